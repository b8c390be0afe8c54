#!/usr/bin/env bash
# Side-by-side benchmarks (issues #6, #14): this crate, the floor (the same Lua sent raw with
# redis-rs, no library logic) and Redisson 4.7.0 / 3.23.4, in one run against one private
# redis-server, then against a private Redis Cluster of 3 masters.
#
#   scripts/bench.sh [--quick] [--only p1,p2,p3,p4] [--no-cluster]
#
# Builds the bench in release mode (benches/compare.rs, `cargo bench --no-run`) and the interop
# jars (interop/build.sh, which adds interop.Bench), starts redis-server on a free loopback port
# and a 3-master cluster (no replicas) in a temp dir (all killed on exit), runs every scenario
# against each, prints the markdown tables and writes docs/BENCHMARKS.md. --quick: few, short
# repetitions (a few minutes once built). A run with --only or --no-cluster writes the tables to
# stdout but leaves docs/BENCHMARKS.md alone.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=""
only=""
cluster=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) quick="--quick" ;;
        --only) only="$2"; shift ;;
        --no-cluster) cluster="" ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "scripts/bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

for tool in cargo redis-server redis-cli java mvn; do
    command -v "$tool" >/dev/null || { echo "scripts/bench.sh: $tool not found (scripts/ensure-deps.sh installs it)" >&2; exit 1; }
done

echo "== building the bench (release)" >&2
bin="$(cargo bench --bench compare --no-run --message-format=json-render-diagnostics \
    | grep '"kind":\["bench"\]' | grep '"name":"compare"' \
    | grep -o '"executable":"[^"]*"' | tail -n 1 | cut -d'"' -f4)"
[[ -x "$bin" ]] || { echo "scripts/bench.sh: could not find the bench executable" >&2; exit 1; }

echo "== building the interop jars" >&2
interop/build.sh
jars=()
mapfile -t versions < <(grep -v '^[[:space:]]*#' interop/versions.txt | sed 's/[[:space:]]//g' | grep -v '^$')
# Newest first, so the table reads crate | floor | newest Redisson | older ones.
mapfile -t versions < <(printf '%s\n' "${versions[@]}" | sort -rV)
for v in "${versions[@]}"; do
    jars+=(--java-jar "$v=$root/interop/target/agent-$v.jar")
done

tmp="$(mktemp -d)"
redis_pid=""
cluster_pids=()
cleanup() {
    for pid in $redis_pid "${cluster_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port in [from, from + span).
free_port() {
    local from="${1:-20000}" span="${2:-40000}" p
    for _ in $(seq 1 50); do
        p=$(( from + RANDOM % span ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

port=""
for _ in 1 2 3 4 5; do
    port="$(free_port 40000 20000)"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" \
        --logfile "$tmp/redis.log" --daemonize no >/dev/null 2>&1 &
    redis_pid=$!
    for _ in $(seq 1 200); do
        if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
        if ! kill -0 "$redis_pid" 2>/dev/null; then break; fi
        sleep 0.05
    done
    if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=""
done
[[ -n "$redis_pid" ]] || { echo "scripts/bench.sh: could not start redis-server" >&2; exit 1; }
url="redis://127.0.0.1:$port"
echo "== redis-server on $url (pid $redis_pid)" >&2

# The cluster: 3 masters, no replicas (so no client waits for replica acknowledgements), formed
# by redis-cli. Node ports in 10000-21999 keep them and their bus ports (+10000) below the
# kernel's ephemeral range, where an outgoing connection could take one first.
masters=()
if [[ -n "$cluster" ]]; then
    for i in 1 2 3; do
        p="$(free_port 10000 12000)"
        mkdir -p "$tmp/node-$p"
        redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp/node-$p" \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
            --logfile "$tmp/node-$p/redis.log" --daemonize no >/dev/null 2>&1 &
        cluster_pids+=($!)
        masters+=("127.0.0.1:$p")
    done
    for m in "${masters[@]}"; do
        for _ in $(seq 1 200); do
            redis-cli -p "${m#*:}" ping >/dev/null 2>&1 && break
            sleep 0.05
        done
    done
    redis-cli --cluster create "${masters[@]}" --cluster-replicas 0 --cluster-yes >"$tmp/create.log" 2>&1 \
        || { cat "$tmp/create.log" >&2; echo "scripts/bench.sh: could not form the cluster" >&2; exit 1; }
    for m in "${masters[@]}"; do
        for _ in $(seq 1 200); do
            redis-cli -p "${m#*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
            sleep 0.05
        done
        redis-cli -p "${m#*:}" cluster info | grep -q 'cluster_state:ok' \
            || { echo "scripts/bench.sh: cluster node $m not ok" >&2; exit 1; }
    done
    echo "== cluster of 3 masters on ${masters[*]}" >&2
fi

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date -u '+%Y-%m-%d %H:%M UTC')"
args=(--redis "$url" "${jars[@]}")
if [[ ${#masters[@]} -gt 0 ]]; then
    args+=(--cluster "$(printf 'redis://%s,' "${masters[@]}" | sed 's/,$//')")
fi
[[ -n "$quick" ]] && args+=("$quick")
[[ -n "$only" ]] && args+=(--only "$only")
table="$("$bin" "${args[@]}")"
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "$table"

if [[ -n "$only" || -z "$cluster" ]]; then
    exit 0
fi

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mode="full run"
[[ -n "$quick" ]] && mode="quick run (--quick)"
mkdir -p docs
cat >docs/BENCHMARKS.md <<EOF
# Benchmarks

Regenerated by \`scripts/bench.sh\` (this file: $mode). Absolute times on a shared machine are
noise; what counts are the **ratios from the same run**, against the same \`redis-server\`.

## Machine

| | |
| --- | --- |
| date | $started |
| cores (\`nproc\`) | $(nproc) |
| CPU | ${cpu:-unknown} |
| kernel (\`uname -r\`) | $(uname -r) |
| load average before / after | $load_before / $load_after |
| rustc | $(rustc --version) |
| java | $(java -version 2>&1 | head -n 1) |
| redis-server | $(redis-server --version | sed 's/ sha=.*//') (loopback, no persistence): one standalone, and a cluster of 3 masters without replicas |
| Redisson | ${versions[*]} (\`interop.Bench\`, default client settings, \`-Xms512m -Xmx2g\`) |

## Results

The first table is every figure; the second judges the targets of issue #6 on this run; the
third breaks the P3 client commands down by command.

$table

## Method

- **crate**: \`LockClient\` with default settings (one multiplexed command connection, one RESP3
  pub/sub connection, watchdog, local hand-off on), \`lock()\` then \`guard.unlock()\`; each
  owner is an \`Owner\`. In P3 it also runs as **crate, local hand-off off**
  (\`Config::with_local_handoff(false)\`): waiters served by the unlock message alone, the path
  that serves waiters in another client; those rows are marked "local hand-off off".
- **floor**: \`scripts/lua/acquire.lua\` and \`unlock.lua\` (and \`renew.lua\` in P4) sent with
  redis-rs \`Script\` (EVALSHA) over one multiplexed connection; the unlock latch is deleted
  without waiting for the reply, as Redisson does (docs/PROTOCOL.md §4). Waiting (P3) is one permanent
  subscription and a \`Notify\`; renewal (P4) is a loop sending batches of 100 keys in sequence.
  No registry, no owners, no retries, no cancel safety: the cost any client of this protocol pays.
- **Redisson**: \`interop.Bench\` (interop/src/main/java/interop/Bench.java) in the interop jar of
  each version, default \`Config\` apart from the watchdog timeout. P1/P2 run in one JVM per
  version (\`interop.Bench serve\`), warmed up on every measured path first (the JIT needs
  seconds: 15 s, or 5 s with --quick); P3 in one JVM per version after a warm-up of hand-offs
  as long; P4 in a fresh JVM per size. Owners are Java threads.
- One client per implementation, all against the same server, flushed between runs. P1 and P2
  **alternate every implementation repetition by repetition** (crate, floor, each Redisson, then
  again), with both JVMs alive and idle while the others run, so a slow drift of the shared
  machine hits all alike; P3 alternates crate and floor, then runs each Redisson with no other
  client connected (its command counts would include their pings). P3 runs crate, crate with
  hand-off off, and floor in turn.
- Every client has TCP_NODELAY on (the crate and the floor set it, Netty does by default).
- **P1**: one owner, \`lock\` + \`unlock\` on one key, sequentially; latency of the pair. The
  Rust loop runs in a task on the runtime's 2 workers (tokio, multi-thread), as application code
  does; the Java loop on a plain thread, as Java code does.
- **P2**: 64 owners, each on its own key, through one client; completed pairs per second.
- **P3**: N waiters + 1 holder on one key. The holder holds 2 ms then unlocks; an owner that
  released contends again only once someone else acquired, so every unlock is a hand-off to an
  owner that was already waiting (no releasing owner barges in ahead of the waiters). Latency:
  from the holder's unlock *reply* to the next holder's acquire *reply* (one process clock).
  Client commands per acquisition: one extra counting run per N with \`MONITOR\` attached (its
  latencies are not reported), counting what clients sent between two \`ECHO\` markers, leaving
  out what scripts ran (\`[0 lua]\`) and \`INFO\`. Server calls per acquisition: \`INFO
  commandstats\` total calls before and after the timed hand-offs (\`INFO\` excluded); Redis
  counts the commands a script runs there too. Polling would show as commands per acquisition
  growing with N and with the hold time.
- **P4**: one client holds N locks (acquired 256 at a time) with a 3 s watchdog timeout, so
  renewal every 1 s. In a fresh process per implementation and size: memory per lock = RSS after
  acquiring minus RSS before, ÷ N (JVM: also live heap after \`System.gc()\`, which says more than
  the JVM's RSS). After two settling cycles, a window of several cycles: renewal calls per cycle
  = EVALSHA+EVAL calls in the window ÷ cycles; cycle duration = length of each distinct renewal
  burst seen by sampling \`INFO commandstats\` every 5 ms (none when renewals are spread over
  time, as with per-lock timers); client CPU over the window ÷ cycles (Rust: \`getrusage\`; JVM:
  \`getProcessCpuTime\`, which includes JIT and GC threads); locks still held at the end = DBSIZE.
- **Client CPU** in P1/P2 is the whole client process over the measured loop (Rust: \`getrusage\`,
  all runtime threads; JVM: every thread), divided by the pairs: less noisy than latency on a
  busy machine, and the best view of what the library itself costs.
- **Round trip**: p50 of a raw redis-rs \`PING\` in a task on the same runtime, measured at the
  start and again before each P3 repetition (the median is used: a single measurement was seen
  anywhere from 13 to 40 µs on this machine); P3's target is judged in those units.

- **Redis Cluster** (the second table): the same scenarios against a private cluster of 3
  masters without replicas (so nobody waits for replica acknowledgements: Redisson's \`WAIT\`
  after each script is skipped without replicas, and the crate sends none yet). The crate uses
  \`Config::cluster\` (publish mode \`Auto\`: sharded on Redis 7); the floor redis-rs's cluster
  connection, \`SPUBLISH\` in its unlock and one \`SSUBSCRIBE\` at the P3 key's master, and
  renews in batches of one slot's keys (a script's keys must share a slot), one after the
  other; Redisson \`useClusterServers()\` with its defaults. Server counters are summed over the
  masters, except P3's, which are read (and MONITORed) at the master of the P3 key, where all of
  its traffic goes.
- **P4 writes**: the client's write-like system calls per cycle (\`syscw\` in
  \`/proc/self/io\`, every thread of the process), and the read events each server handled per
  cycle (\`total_reads_processed\`, less the sampler's own \`INFO\`s). A pipelined write of many
  calls shows as one or a few of each; an unpipelined client as one per call.

## Notes

- Redisson 3.23.4 in cluster mode on this cluster (no replicas) uses classic
  \`SUBSCRIBE\`/\`PUBLISH\` even on Redis 7, where 4.7.0 and the crate use sharded pub/sub;
  with a replica per master (tests/interop_cluster.rs) 3.23.4 goes sharded too. See
  interop/NOTES.md: a fleet of 3.23.x on a cluster without replicas needs
  \`PublishMode::Publish\`.

- The P1 latency of every client here is dominated by thread wake-ups on a 2-core machine that
  also runs the server (see the round trip above): compare ratios, not microseconds. A profile
  of the crate's P1 loop shows over half its CPU in the kernel (scheduling, futex) and under 2 %
  in this crate's code. The same loop run on the \`block_on\` thread instead of in a task takes
  about twice as long, for the crate and the floor alike (every reply then wakes another thread).
- Redisson is measured both the Java way (a thread per owner, blocking \`lock()\`) and the async
  way (\`lockAsync(id)\`/\`unlockAsync(id)\` chains, the closest to this crate's tasks).
- Redisson 3.23.4 renews each lock with its own timer and its own \`EVAL\` (full script text), so
  its P4 calls per cycle equal the lock count and never form a distinct burst.
- At 100,000 locks with a 3 s watchdog timeout, neither Redisson version kept its locks in our
  runs (‡ in the table): 4.7.0's batched renewal did not keep up during and after the
  acquisition burst, and 3.23.4's per-lock timers flood the server with full-text \`EVAL\`s
  (its acquisition alone takes minutes). Redisson's default 30 s timeout makes that load 10×
  lighter; the 3 s timeout is what makes 100k locks a stress test here.
- The crate deletes spent unlock latches together, one \`DEL\` per 50 ms sweep; the floor and
  Redisson 4.7.0 send one \`DEL\` per unlock (3.23.4 has no latch). That is the crate's
  \`DEL\` column in P3, and part of its P1/P2 advantage over the floor.
- **P3 with local hand-off.** All P3 owners share one client, so each release carries the
  oldest waiter's acquire in the same write as the unlock (README, *Local hand-off*): the next
  holder's acquire reply arrives with the unlock reply, hence a latency of microseconds (the
  wake-up of the next holder's task), not round trips. The crate's commands per acquisition are
  the unlock, the carried acquire and the \`PUBSUB NUMSUB\` that keeps hand-offs fair to other
  clients (hand-offs stop while another client listens on the channel). The floor and Redisson
  wake their waiters by the message; so does the crate with hand-off off, in its own rows.
- Redisson 4.7.0 was seen (MONITOR) sending bursts of single-key renewal scripts for the hot P3
  key while it is handed from thread to thread, hundreds per second; its P3 command counts vary
  from run to run for that reason.
- Benchmarks are not tests: nothing in the test suite asserts a time. \`cargo test --all-targets\`
  runs \`benches/compare.rs\` without a server, and it then returns at once.
EOF
echo "== wrote docs/BENCHMARKS.md" >&2
