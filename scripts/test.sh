#!/usr/bin/env bash
# Runs every check and test on a fresh machine: installs redis-server if missing, then
# formatting, clippy, and the whole test suite (unit, integration, doc tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo test --all-targets
cargo test --doc
