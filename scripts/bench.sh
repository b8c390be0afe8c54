#!/usr/bin/env bash
# Side-by-side benchmarks (issues #6, #14, #24): this crate, the floor (the same Lua sent raw with
# redis-rs, no library logic) and Redisson 4.7.0 / 3.23.4, in one run against private servers
# of up to four topologies, a table each.
#
#   scripts/bench.sh [--quick] [--only p1,p2,p3,p4,kinds]
#                    [--topologies single,cluster,cluster-replicas,sentinel] [--no-cluster]
#
# Topologies (all four by default, run in this order):
#   single            one redis-server (and its Unix socket, for P1 over it)
#   cluster           a Redis Cluster of 3 masters, no replicas
#   cluster-replicas  a Redis Cluster of 3 masters with one replica each (6 nodes)
#   sentinel          one master, one replica and 3 sentinels (quorum 2)
# With replicas, every client waits for them after each lock write, as by default: the crate
# (Config::with_replica_sync, 1 s), Redisson (checkLockSyncedSlaves) and the floor (WAIT 1 1000 in
# the same write as its script). --no-cluster is --topologies single.
#
# Builds the bench in release mode (benches/compare.rs, `cargo bench --no-run`) and the interop
# jars (interop/build.sh, which adds interop.Bench), starts the servers on loopback ports in a
# temp dir (all killed on exit), runs every scenario against each topology in turn and prints
# the markdown tables. A full run (neither --quick nor --only) writes the sections of the
# topologies it ran into docs/BENCHMARKS.md and keeps the others, so the file can be brought up
# to date a topology at a time (a full run takes 40-60 minutes per topology). --quick: few,
# short repetitions (a few minutes per topology once built).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=""
only=""
all_topologies=(single cluster cluster-replicas sentinel)
topologies="$(IFS=,; echo "${all_topologies[*]}")"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) quick="--quick" ;;
        --only) only="$2"; shift ;;
        --topologies) topologies="$2"; shift ;;
        --no-cluster) topologies="single" ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "scripts/bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
want=()
IFS=',' read -r -a want <<<"$topologies"
for t in "${want[@]}"; do
    case "$t" in
        single|cluster|cluster-replicas|sentinel) ;;
        *) echo "scripts/bench.sh: unknown topology $t (single, cluster, cluster-replicas, sentinel)" >&2; exit 2 ;;
    esac
done
wants() {
    local t
    for t in "${want[@]}"; do [[ "$t" == "$1" ]] && return 0; done
    return 1
}

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
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port in [from, from + span), not handed out before in this run.
used=" "
free_port() {
    local from="${1:-20000}" span="${2:-40000}" p
    for _ in $(seq 1 50); do
        p=$(( from + RANDOM % span ))
        [[ "$used" == *" $p "* ]] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            used+="$p "
            echo "$p"
            return 0
        fi
    done
    return 1
}

# node_port: a node port in $got. Ports in 10000-21999 keep nodes and a cluster's bus ports
# (+10000) below the kernel's ephemeral range, where an outgoing connection could take one
# first. Called in this shell, not in $(...), so `used` remembers what it handed out (nodes
# started a moment ago may not listen yet).
got=""
node_port() {
    free_port 10000 12000 >"$tmp/port" || { echo "scripts/bench.sh: no free port" >&2; exit 1; }
    got="$(cat "$tmp/port")"
    used+="$got "
}

# start_node PORT [redis-server args...]: one node in its own temp dir, no persistence.
start_node() {
    local p="$1"; shift
    mkdir -p "$tmp/node-$p"
    redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp/node-$p" \
        --logfile "$tmp/node-$p/redis.log" --daemonize no "$@" >/dev/null 2>&1 &
    pids+=($!)
}

wait_ping() {
    local p="$1"
    for _ in $(seq 1 200); do
        redis-cli -p "$p" ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "scripts/bench.sh: node on port $p did not start (log: $tmp/node-$p/redis.log)" >&2
    exit 1
}

# wait_for PORT PATTERN ARGS... [-- paste]: waits (up to 60 s) until `redis-cli -p PORT
# ARGS...` prints a line matching PATTERN (with `-- paste`: its lines paired, field<TAB>value).
wait_for() {
    local p="$1" pattern="$2" pair=""; shift 2
    local cmd=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do cmd+=("$1"); shift; done
    [[ $# -gt 0 ]] && pair=1
    for _ in $(seq 1 1200); do
        if [[ -n "$pair" ]]; then
            redis-cli -p "$p" "${cmd[@]}" 2>/dev/null | paste - - | grep -q "$pattern" && return 0
        else
            redis-cli -p "$p" "${cmd[@]}" 2>/dev/null | grep -q "$pattern" && return 0
        fi
        sleep 0.05
    done
    echo "scripts/bench.sh: node $p never showed '$pattern' for: ${cmd[*]}" >&2
    exit 1
}

# start_cluster REPLICAS: a cluster of 3 masters, with REPLICAS replicas each, formed by
# redis-cli; prints the masters' host:port.
start_cluster() {
    local replicas="$1" nodes=() ports=() p m
    for _ in $(seq 1 $(( 3 * (1 + replicas) ))); do
        node_port
        p="$got"
        # A long node timeout with replicas: no failover from a node busy under the bench.
        start_node "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
            --cluster-node-timeout $(( replicas > 0 ? 15000 : 5000 ))
        ports+=("$p")
        nodes+=("127.0.0.1:$p")
    done
    for p in "${ports[@]}"; do wait_ping "$p"; done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes \
        >"$tmp/create-$replicas.log" 2>&1 \
        || { cat "$tmp/create-$replicas.log" >&2; echo "scripts/bench.sh: could not form the cluster" >&2; exit 1; }
    for p in "${ports[@]}"; do wait_for "$p" 'cluster_state:ok' cluster info; done
    # Every node must know every replica as one (Redisson reads them from CLUSTER NODES).
    for p in "${ports[@]}"; do
        for _ in $(seq 1 1200); do
            [[ "$(redis-cli -p "$p" cluster nodes | awk '$3 ~ /slave/' | wc -l)" -eq $(( 3 * replicas )) ]] && break
            sleep 0.05
        done
    done
    # The masters: the nodes that serve slots.
    mapfile -t cluster_masters < <(redis-cli -p "${ports[0]}" cluster nodes \
        | awk '$3 ~ /master/ && NF >= 9 { sub(/@.*/, "", $2); print $2 }' | sort)
    [[ ${#cluster_masters[@]} -eq 3 ]] || { echo "scripts/bench.sh: expected 3 masters" >&2; exit 1; }
    # Every client counts the replicas it waits for at connect: they must be online by then.
    if (( replicas > 0 )); then
        for m in "${cluster_masters[@]}"; do
            wait_for "${m#*:}" 'slave0:.*state=online' info replication
        done
    fi
}

url=""
if wants single; then
    port=""
    for _ in 1 2 3 4 5; do
        port="$(free_port 40000 20000)"
        # (Its Unix socket too: P1 over it, for a service beside its Redis.)
        start_node "$port" --unixsocket "$tmp/redis-$port.sock" --unixsocketperm 700
        if (wait_ping "$port") 2>/dev/null; then break; fi
        port=""
    done
    [[ -n "$port" ]] || { echo "scripts/bench.sh: could not start redis-server" >&2; exit 1; }
    url="redis://127.0.0.1:$port"
    echo "== redis-server on $url" >&2
fi

# No replicas: no client waits for replica acknowledgements.
masters=()
if wants cluster; then
    start_cluster 0
    masters=("${cluster_masters[@]}")
    echo "== cluster of 3 masters on ${masters[*]}" >&2
fi

replicated=()
if wants cluster-replicas; then
    start_cluster 1
    replicated=("${cluster_masters[@]}")
    echo "== cluster of 3 masters with a replica each, masters on ${replicated[*]}" >&2
fi

sentinel_name="bench-master"
sentinels=()
sentinel_master=""
if wants sentinel; then
    node_port
    sm="$got"
    node_port
    sr="$got"
    start_node "$sm"
    wait_ping "$sm"
    start_node "$sr" --replicaof 127.0.0.1 "$sm"
    wait_ping "$sr"
    for _ in 1 2 3; do
        node_port
        p="$got"
        mkdir -p "$tmp/node-$p"
        # A sentinel rewrites its config file: one each. down-after 5 s: no failover from a
        # master merely slow under the bench.
        cat >"$tmp/node-$p/sentinel.conf" <<CONF
port $p
bind 127.0.0.1
dir $tmp/node-$p
logfile $tmp/node-$p/redis.log
sentinel monitor $sentinel_name 127.0.0.1 $sm 2
sentinel down-after-milliseconds $sentinel_name 5000
sentinel failover-timeout $sentinel_name 60000
sentinel parallel-syncs $sentinel_name 1
CONF
        redis-server "$tmp/node-$p/sentinel.conf" --sentinel --daemonize no >/dev/null 2>&1 &
        pids+=($!)
        sentinels+=("$p")
    done
    wait_for "$sm" 'slave0:.*state=online' info replication
    for p in "${sentinels[@]}"; do
        wait_ping "$p"
        # The sentinels know the replica and each other (Redisson checks the sentinel list).
        wait_for "$p" $'^num-slaves\t1$' sentinel master "$sentinel_name" -- paste
        wait_for "$p" $'^num-other-sentinels\t2$' sentinel master "$sentinel_name" -- paste
    done
    sentinel_master="127.0.0.1:$sm"
    echo "== sentinel group $sentinel_name: master $sentinel_master, replica 127.0.0.1:$sr, sentinels ${sentinels[*]}" >&2
fi

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || commit+=" with uncommitted changes"
mode="full run"
[[ -n "$quick" ]] && mode="quick run (--quick)"
urls() { printf 'redis://%s,' "$@" | sed 's/,$//'; }
base=("${jars[@]}")
[[ -n "$quick" ]] && base+=("$quick")
[[ -n "$only" ]] && base+=(--only "$only")

# One run of the bench per topology: each section says when it ran, on what commit and under
# what load, so docs/BENCHMARKS.md can be brought up to date a topology at a time.
for t in "${all_topologies[@]}"; do
    wants "$t" || continue
    case "$t" in
        single) targs=(--redis "$url" --redis-unix "$tmp/redis-$port.sock") ;;
        cluster) targs=(--cluster "$(urls "${masters[@]}")") ;;
        cluster-replicas) targs=(--cluster-replicas "$(urls "${replicated[@]}")") ;;
        sentinel) targs=(--sentinel "$sentinel_name@$(urls "${sentinels[@]/#/127.0.0.1:}")") ;;
    esac
    before="$(cut -d' ' -f1-3 /proc/loadavg)"
    started="$(date -u '+%Y-%m-%d %H:%M UTC')"
    "$bin" "${base[@]}" "${targs[@]}" >"$tmp/table-$t.md"
    after="$(cut -d' ' -f1-3 /proc/loadavg)"
    # (The bench prints the heading first: the run's line goes right under it.)
    {
        echo "<!-- topology: $t -->"
        head -n 1 "$tmp/table-$t.md"
        echo
        echo "Run: $started, $mode, commit $commit; load average before / after: $before / $after."
        tail -n +2 "$tmp/table-$t.md"
    } >"$tmp/section-$t.md"
    echo
    cat "$tmp/section-$t.md"
done

# A failover during the run would have measured something else: say so.
for m in "${replicated[@]}"; do
    redis-cli -p "${m#*:}" role | head -n 1 | grep -q master \
        || echo "scripts/bench.sh: WARNING: cluster master $m failed over during the run" >&2
done
if [[ -n "$sentinel_master" ]]; then
    now="$(redis-cli -p "${sentinels[0]}" sentinel get-master-addr-by-name "$sentinel_name" | paste -sd:)"
    [[ "$now" == "$sentinel_master" ]] \
        || echo "scripts/bench.sh: WARNING: the sentinels failed $sentinel_master over to $now during the run" >&2
fi

if [[ -n "$only" || -n "$quick" ]]; then
    echo "scripts/bench.sh: docs/BENCHMARKS.md left as it is (it keeps full runs of every scenario)" >&2
    exit 0
fi

# The section of topology $1 in docs/BENCHMARKS.md as it is: from its marker to the next
# section or chapter.
old_section() {
    [[ -f docs/BENCHMARKS.md ]] || return 0
    awk -v m="<!-- topology: $1 -->" '
        $0 == m { on = 1; print; next }
        on && (/^<!-- topology: / || /^## /) { exit }
        on { print }' docs/BENCHMARKS.md
}
# The topologies run now, and the others as the file had them.
results=""
for t in "${all_topologies[@]}"; do
    if [[ -f "$tmp/section-$t.md" ]]; then
        section="$(cat "$tmp/section-$t.md")"
    else
        section="$(old_section "$t")"
    fi
    [[ -n "$section" ]] && results+="$section"$'\n\n'
done

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
mkdir -p docs
cat >docs/BENCHMARKS.md <<EOF
# Benchmarks

Regenerated by \`scripts/bench.sh\`, a topology at a time: a full run writes the sections of the
topologies it ran and keeps the others (\`--quick\` and \`--only\` runs write nothing here).
Absolute times on a shared machine are noise; what counts are the **ratios from the same
run**, against the same \`redis-server\`. Each section says when it ran, and on what commit.

## Machine

| | |
| --- | --- |
| cores (\`nproc\`) | $(nproc) |
| CPU | ${cpu:-unknown} |
| kernel (\`uname -r\`) | $(uname -r) |
| rustc | $(rustc --version) |
| java | $(java -version 2>&1 | head -n 1) |
| redis-server | $(redis-server --version | sed 's/ sha=.*//') (loopback, no persistence): one standalone, a cluster of 3 masters without replicas, a cluster of 3 masters with a replica each, and a Sentinel group (a master, its replica, 3 sentinels) |
| Redisson | ${versions[*]} (\`interop.Bench\`, default client settings, \`-Xms512m -Xmx2g\`) |

## Results

One section per topology: a table of every figure, the targets judged on this run (issue #6
on the standalone server, issue #14 on the clusters), and the P3 client commands by command.

${results%$'\n\n'}

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
  machine hits all alike (the crate with loss detection on and off is one step of it, the two
  in turns within: P1 in blocks of 100 pairs, P2 in windows of 250 ms); P3 alternates crate
  and floor, then runs each Redisson with no other client connected (its command counts would
  include their pings). P3 runs crate, crate with hand-off off, and floor in turn.
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
  the JVM's RSS; the crate with loss detection on is measured once its watch has subscribed
  every hold, as \`CLIENT LIST\` shows, and a renewal interval more for the checks that start).
  After two settling cycles, a window of several cycles: renewal calls per cycle
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
- **Replicated topologies** (the third and fourth tables, issue #24): a cluster of 3 masters
  with one replica each (\`redis-cli --cluster create ... --cluster-replicas 1\`), and one master
  with one replica watched by 3 sentinels (quorum 2). Every client waits for the replica after
  each lock write, as each does by default: the crate (\`Config::with_replica_sync\`, 1 s:
  \`WAIT 1 1000\` in the same write as each acquire and unlock, one behind each master's
  renewals), Redisson (\`checkLockSyncedSlaves\`, \`slavesSyncTimeout\` 1 s) and the floor
  (\`[EVALSHA, WAIT 1 1000]\` in one write to the key's master; one \`WAIT\` per master after each
  renewal cycle). The crate connects with \`Config::cluster\` or \`Config::sentinel\`, Redisson
  with \`useClusterServers()\` or \`useSentinelServers()\` and their defaults; the floor straight
  to the master the sentinels name, or through redis-rs's cluster connection. A release that
  waits for replicas does not hand off locally (README), so there the crate's P3 rows with and
  without local hand-off both serve waiters by the unlock message.
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
- The crate deletes spent latches a few at a time: a later write to their node carries the
  \`DEL\` of 16 (in the same write, behind the same \`WAIT\`), and a 50 ms sweep takes what no
  write carried (since 2026-12-07; before that, one \`DEL\` per 50 ms sweep). The floor and
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
- **With replicas, a \`WAIT\` holds its connection.** Redis reads nothing more from a client
  blocked in \`WAIT\` until its replicas acknowledge, so lock writes that wait for replicas go
  one acknowledgement round at a time per connection. The crate and the floor send them over
  one multiplexed connection per master, Redisson over a pool of connections per master, where
  one acknowledgement round releases many. Measured by hand on this machine (a master and one
  replica, \`[SET, WAIT 1 1000]\` pairs): 64 in flight on one connection, 12-15k pairs/s; 8
  connections with 8 in flight each, 52k pairs/s. That is the ceiling of P2 (64 owners) through
  Sentinel, one master, where Redisson 4.7.0's async chains can come out ahead; on the cluster
  the crate has a connection per master.
- **The semaphore's exactly-once latches.** Each of the crate's semaphore acquires and
  releases also writes a latch beside the count, so that a command re-sent after its answer was
  lost takes or gives its permits once. Redisson's \`RSemaphore\` sends \`GET\`+\`DECRBY\` and
  \`INCRBY\`+\`PUBLISH\` with no request id (4.7.0, seen with MONITOR), so its retried command
  can count twice. With replicas, each latch is one more write the replica applies before
  \`WAIT\` answers. Measured by hand on this machine (a master and a replica, \`WAIT\` in the
  same write, the script sets alternating pair by pair, p50 of 4,000 pairs in three rounds):
  no latches 410-468 µs, the crate's checks without the latch writes 417-481, the crate's
  scripts 449-497. The kinds section measures that cost in every run (*P1, acquire + release
  of one permit*: the wire with and without latches beside both clients' rows, for
  \`RSemaphore\` and \`RPermitExpirableSemaphore\`, whose scripts latch the same way): a
  crate semaphore or permit row behind Redisson's with replicas by no more than it is the
  guarantee.
- Benchmarks are not tests: nothing in the test suite asserts a time. \`cargo test --all-targets\`
  runs \`benches/compare.rs\` without a server, and it then returns at once.
EOF
echo "== wrote docs/BENCHMARKS.md" >&2
