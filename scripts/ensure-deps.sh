#!/usr/bin/env bash
# Installs what the tests and the demo need, from Debian's packages, when it is missing:
# redis-server (every test starts its own), openssl (the TLS test makes a throwaway CA), tmux
# (the terminal `rlock top` is tested in), and a
# JDK with Maven (the interop tests build and run real Redisson). Starts nothing: tests and
# the demo start their own servers on free loopback ports.
# Usage: scripts/ensure-deps.sh [redis|all]   (default: all)
set -euo pipefail
want="${1:-all}"
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ "$want" = all ]; then
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v tmux >/dev/null 2>&1 || missing+=(tmux)
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing from apt: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
command -v redis-server >/dev/null
