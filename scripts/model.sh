#!/usr/bin/env bash
# Runs the model checks of the engine's races (tests/model/: the engine on shuttle's schedulers
# against the in-memory stand-in server) and reports the schedules explored per model.
#
#   scripts/model.sh                   the bounded run CI makes (200 schedules per scheduler)
#   scripts/model.sh --iterations N    N schedules per scheduler and model (a long run)
#   scripts/model.sh --model NAME      only the models whose test name contains NAME
#
# A failing schedule is printed with the failure; `shuttle::replay(model, "<schedule>")` runs
# it again.
set -euo pipefail
cd "$(dirname "$0")/.."

iterations=""
filter=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --iterations) iterations="${2:?--iterations N}"; shift 2 ;;
        --model) filter="${2:?--model NAME}"; shift 2 ;;
        *) echo "usage: scripts/model.sh [--iterations N] [--model NAME]" >&2; exit 64 ;;
    esac
done

export RLOCK_MODEL_ITERATIONS="${iterations:-${RLOCK_MODEL_ITERATIONS:-}}"
[[ -n "$RLOCK_MODEL_ITERATIONS" ]] || unset RLOCK_MODEL_ITERATIONS
start=$(date +%s)
# (The debug profile: it reuses the test run's build of every dependency.)
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
cargo test --features model --test model -- --nocapture --test-threads 1 $filter \
    2>&1 | tee "$out" || status=$?
echo
echo "=== schedules explored (in $(( $(date +%s) - start )) s)"
grep -o 'model [^:]*: [0-9]* schedules explored.*' "$out" || echo "(none reported)"
exit $status
