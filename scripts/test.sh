#!/usr/bin/env bash
# Runs every check and test on a fresh machine: installs what is missing (redis-server,
# openssl, a JDK and Maven), builds the Redisson interop agents, then formatting, clippy,
# and the whole test suite (unit, integration, interop against real Redisson, doc tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh
interop/build.sh
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo test --all-targets
cargo test --doc
