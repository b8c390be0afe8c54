#!/usr/bin/env bash
# Builds the interop agent jars, one per Redisson version:
#   interop/target/agent-<version>.jar   (runnable: java -jar agent-<version>.jar redis://... [watchdogMs])
# A no-op when every jar is newer than pom.xml, this script and everything under src/.
# Safe to call concurrently (an flock serialises builders). Needs Java 17+ and Maven on PATH
# (or MVN=/path/to/mvn). Extra Maven flags can be passed in MVN_FLAGS (e.g. "-o").
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# The versions live in versions.txt (tests/support/java.rs reads the same list).
mapfile -t VERSIONS < <(grep -v '^[[:space:]]*#' versions.txt | sed 's/[[:space:]]//g' | grep -v '^$' || true)
if [[ ${#VERSIONS[@]} -eq 0 ]]; then echo "interop/build.sh: no versions in versions.txt" >&2; exit 1; fi
mkdir -p target

exec 9>target/.build.lock
flock 9

fresh() {
    local jar
    for v in "${VERSIONS[@]}"; do
        jar="target/agent-$v.jar"
        [[ -f "$jar" ]] || return 1
        if [[ pom.xml -nt "$jar" || build.sh -nt "$jar" || versions.txt -nt "$jar" ]]; then return 1; fi
        if [[ -n "$(find src -newer "$jar" -print -quit)" ]]; then return 1; fi
    done
    return 0
}

if fresh; then
    exit 0
fi

MVN="${MVN:-mvn}"
for v in "${VERSIONS[@]}"; do
    log="target/build-$v.log"
    start=$(date +%s)
    # shellcheck disable=SC2086
    if ! "$MVN" -B -q -Dstyle.color=never ${MVN_FLAGS:-} -Dredisson.version="$v" package >"$log" 2>&1; then
        echo "interop/build.sh: mvn package failed for Redisson $v; log: $here/$log" >&2
        tail -n 60 "$log" >&2
        exit 1
    fi
    # The shade plugin may keep the old mtime on an identical jar: make freshness explicit.
    touch "target/agent-$v.jar"
    echo "interop/build.sh: built target/agent-$v.jar in $(( $(date +%s) - start ))s" >&2
done
