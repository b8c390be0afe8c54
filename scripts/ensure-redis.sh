#!/usr/bin/env bash
# Installs redis-server from Debian's packages when it is not on PATH. Starts nothing:
# tests and the demo start their own servers on free loopback ports.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server not found: installing it from apt" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
# The package may try to start a system service; we never rely on it.
command -v redis-server >/dev/null
