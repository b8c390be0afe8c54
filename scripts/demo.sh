#!/usr/bin/env bash
# The main job for a newcomer: `rlock demo` tells the lock's story on a redis-server it starts
# itself on a free loopback port (installed from apt first if it is missing), then stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh redis
exec cargo run --quiet --package rlock -- demo "$@"
