//! Side-by-side benchmarks on one `redis-server`, in one run (issue #6):
//!
//! - **crate**: this library (`LockClient`, `Lock`, guards, watchdog, pub/sub hub);
//! - **floor**: the same Lua (`scripts/lua/*.lua`) sent raw over one redis-rs multiplexed
//!   connection, with no library logic: what any client speaking this protocol must pay;
//! - **Redisson** 4.7.0 and 3.23.4, via `interop.Bench` in the interop jars.
//!
//! Absolute times on a shared machine are noise; the ratios from one run are the result.
//! `scripts/bench.sh [--quick]` builds everything, starts a private server and writes
//! `docs/BENCHMARKS.md`. This binary is the orchestrator; direct use:
//!
//! ```text
//! compare --redis redis://127.0.0.1:PORT [--quick] [--java-jar VERSION=PATH]... [--only p1,p2,p3,p4]
//! compare --p4-child crate|floor --redis URL --locks N --watchdog-ms MS   (internal: one P4 run)
//! ```
//!
//! Per-rep figures go to stderr as they come; the markdown table goes to stdout.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::pin::pin;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script};
use redisson_lock::{Config, Lock, LockClient, LockGuard, Owner};
use serde_json::{json, Value};
use tokio::sync::Notify;

// ---------------------------------------------------------------------------------------------
// Plan

struct Plan {
    quick: bool,
    reps: usize,
    p1_warmup: usize,
    p1_iters: usize,
    /// One JVM per Redisson version runs P1-P3 after one warm-up this long (JIT).
    java_warmup: Duration,
    p2_owners: usize,
    p2_warmup: Duration,
    p2_secs: Duration,
    p3_ns: Vec<usize>,
    p3_handoffs: usize,
    p3_warmup: usize,
    p3_hold_ms: u64,
    p3_reps: usize,
    p3_count_handoffs: usize,
    p4_counts: Vec<usize>,
    p4_watchdog_ms: u64,
    p4_cycles: u32,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                quick,
                reps: 2,
                p1_warmup: 500,
                p1_iters: 2_000,
                java_warmup: Duration::from_secs(5),
                p2_owners: 64,
                p2_warmup: Duration::from_millis(300),
                p2_secs: Duration::from_secs(1),
                p3_ns: vec![1, 8, 64],
                p3_handoffs: 200,
                p3_warmup: 20,
                p3_hold_ms: 2,
                p3_reps: 1,
                p3_count_handoffs: 150,
                p4_counts: vec![10_000],
                p4_watchdog_ms: 3_000,
                p4_cycles: 2,
            }
        } else {
            Plan {
                quick,
                reps: 5,
                p1_warmup: 3_000,
                p1_iters: 20_000,
                java_warmup: Duration::from_secs(15),
                p2_owners: 64,
                p2_warmup: Duration::from_secs(1),
                p2_secs: Duration::from_secs(3),
                p3_ns: vec![1, 8, 64],
                p3_handoffs: 1_000,
                p3_warmup: 50,
                p3_hold_ms: 2,
                p3_reps: 3,
                p3_count_handoffs: 300,
                p4_counts: vec![10_000, 100_000],
                p4_watchdog_ms: 3_000,
                p4_cycles: 5,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and results

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `(p50, p99)` in µs of latencies in ns.
fn p50_p99_us(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    (percentile(&ns, 50.0) / 1e3, percentile(&ns, 99.0) / 1e3)
}

/// Every figure of the run: metric → implementation → one value per repetition.
#[derive(Default)]
struct Results {
    values: HashMap<String, HashMap<String, Vec<f64>>>,
    notes: HashMap<(String, String), String>,
    /// P3 counting runs: (waiters, implementation, client commands per acquisition by name).
    breakdown: Vec<(usize, String, String)>,
}

impl Results {
    fn add(&mut self, metric: &str, imp: &str, value: f64) {
        eprintln!("  {metric:<28} {imp:<16} {value:.3}");
        self.values
            .entry(metric.to_string())
            .or_default()
            .entry(imp.to_string())
            .or_default()
            .push(value);
    }

    fn note(&mut self, metric: &str, imp: &str, note: impl Into<String>) {
        let note = note.into();
        eprintln!("  {metric:<28} {imp:<16} note: {note}");
        self.notes
            .insert((metric.to_string(), imp.to_string()), note);
    }

    fn median(&self, metric: &str, imp: &str) -> Option<f64> {
        let v = self.values.get(metric)?.get(imp)?;
        let m = median(v);
        m.is_finite().then_some(m)
    }

    fn reps(&self, metric: &str, imp: &str) -> usize {
        self.values
            .get(metric)
            .and_then(|m| m.get(imp))
            .map_or(0, |v| v.len())
    }

    fn get_note(&self, metric: &str, imp: &str) -> Option<&str> {
        self.notes
            .get(&(metric.to_string(), imp.to_string()))
            .map(|s| s.as_str())
    }
}

// ---------------------------------------------------------------------------------------------
// Redis helpers (server-side counters)

fn sync_conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .unwrap()
        .get_connection()
        .expect("connect to the bench redis")
}

/// `INFO commandstats` as command → calls.
fn parse_commandstats(info: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

fn commandstats(conn: &mut redis::Connection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    parse_commandstats(&info)
}

async fn commandstats_async(conn: &mut MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    parse_commandstats(&info)
}

/// Commands issued between two snapshots, not counting the `INFO` snapshots themselves.
fn commands_between(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> u64 {
    after
        .iter()
        .filter(|(name, _)| !name.starts_with("info"))
        .map(|(name, calls)| calls - before.get(name).copied().unwrap_or(0))
        .sum()
}

fn script_calls(stats: &HashMap<String, u64>) -> u64 {
    ["evalsha", "eval"]
        .iter()
        .map(|c| stats.get(*c).copied().unwrap_or(0))
        .sum()
}

fn flushall(url: &str) {
    let _: () = redis::cmd("FLUSHALL").query(&mut sync_conn(url)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// The floor: the crate's own Lua, sent raw

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/lua/acquire.lua")));
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/lua/unlock.lua")));
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/lua/renew.lua")));

const LEASE_MS: u64 = 30_000;
const LATCH_PX_MS: u64 = 20_000;

async fn floor_conn(url: &str) -> MultiplexedConnection {
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("floor connection")
}

static LATCH_SEQ: AtomicU64 = AtomicU64::new(1);

/// One lock name and owner field spoken to over a raw connection: acquire script, unlock
/// script with a fresh latch, and the latch `DEL` sent without waiting for its reply (as
/// PROTOCOL.md §3 and Redisson do). Waiting, when needed, listens on `wake`.
#[derive(Clone)]
struct FloorLock {
    conn: MultiplexedConnection,
    key: String,
    channel: String,
    field: String,
    lease_ms: u64,
    wake: Arc<Notify>,
}

impl FloorLock {
    fn new(conn: MultiplexedConnection, key: &str, field: String, wake: Arc<Notify>) -> Self {
        FloorLock {
            conn,
            key: key.to_string(),
            channel: format!("redisson_lock__channel:{{{key}}}"),
            field,
            lease_ms: LEASE_MS,
            wake,
        }
    }

    async fn try_acquire(&mut self) -> Option<i64> {
        ACQUIRE
            .key(&self.key)
            .arg(self.lease_ms)
            .arg(&self.field)
            .invoke_async(&mut self.conn)
            .await
            .expect("floor acquire")
    }

    /// Acquires, waiting for an unlock message (or the holder's PTTL) between attempts.
    async fn lock(&mut self) {
        let wake = self.wake.clone();
        loop {
            let mut notified = pin!(wake.notified());
            notified.as_mut().enable();
            match self.try_acquire().await {
                None => return,
                Some(pttl) => {
                    let wait = Duration::from_millis(pttl.clamp(1, 1000) as u64);
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    async fn unlock(&mut self) {
        let id = LATCH_SEQ.fetch_add(1, Ordering::Relaxed);
        let latch = format!("redisson_unlock_latch:{{{}}}:{id:032x}", self.key);
        let reply: Option<i64> = UNLOCK
            .key(&self.key)
            .key(&self.channel)
            .key(&latch)
            .arg("0")
            .arg(self.lease_ms)
            .arg(&self.field)
            .arg("publish")
            .arg(LATCH_PX_MS)
            .invoke_async(&mut self.conn)
            .await
            .expect("floor unlock");
        assert!(reply.is_some(), "floor unlock: not held");
        let mut conn = self.conn.clone();
        tokio::spawn(async move {
            let _: redis::RedisResult<i64> =
                redis::cmd("DEL").arg(latch).query_async(&mut conn).await;
        });
    }
}

/// A raw subscription on one channel: `0` wakes one waiter, anything else all of them.
async fn floor_subscription(
    url: &str,
    channel: &str,
) -> (Arc<Notify>, tokio::task::JoinHandle<()>) {
    let mut pubsub = redis::Client::open(url)
        .unwrap()
        .get_async_pubsub()
        .await
        .expect("floor pubsub");
    pubsub.subscribe(channel).await.expect("subscribe");
    let wake = Arc::new(Notify::new());
    let w = wake.clone();
    let task = tokio::spawn(async move {
        let mut messages = pubsub.into_on_message();
        while let Some(msg) = messages.next().await {
            if msg.get_payload_bytes() == b"0" {
                w.notify_one();
            } else {
                w.notify_waiters();
            }
        }
    });
    (wake, task)
}

// ---------------------------------------------------------------------------------------------
// One lock, either implementation

enum Locker {
    Crate(Lock),
    Floor(FloorLock),
}

impl Locker {
    async fn lock(&mut self) -> Option<LockGuard> {
        match self {
            Locker::Crate(lock) => Some(lock.lock().await.expect("crate lock")),
            Locker::Floor(lock) => {
                lock.lock().await;
                None
            }
        }
    }

    async fn unlock(&mut self, guard: Option<LockGuard>) {
        match self {
            Locker::Crate(_) => guard.unwrap().unlock().await.expect("crate unlock"),
            Locker::Floor(lock) => lock.unlock().await,
        }
    }
}

/// Connections for one in-process run.
enum Setup {
    Crate(LockClient),
    Floor {
        conn: MultiplexedConnection,
        client_id: String,
        url: String,
    },
}

impl Setup {
    async fn new(imp: &str, url: &str) -> Setup {
        match imp {
            "crate" => Setup::Crate(LockClient::connect(url).await.expect("crate connect")),
            _ => Setup::Floor {
                conn: floor_conn(url).await,
                client_id: "00000000-0000-4000-8000-000000000000".to_string(),
                url: url.to_string(),
            },
        }
    }

    /// A locker on `key` for owner number `owner` (waiting listens on `wake`, floor only).
    fn locker(&self, key: &str, owner: usize, wake: &Arc<Notify>) -> Locker {
        match self {
            Setup::Crate(client) => Locker::Crate(client.lock(key).with_owner(Owner::new())),
            Setup::Floor {
                conn, client_id, ..
            } => Locker::Floor(FloorLock::new(
                conn.clone(),
                key,
                format!("{client_id}:{}", owner + 1),
                wake.clone(),
            )),
        }
    }

    async fn close(self) {
        if let Setup::Crate(client) = self {
            client.shutdown().await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// P1: uncontended lock + unlock, one owner, sequential

/// `(p50 µs, p99 µs, client CPU µs per pair)`.
async fn p1(imp: &str, url: &str, warmup: usize, iters: usize) -> (f64, f64, f64) {
    let setup = Setup::new(imp, url).await;
    let wake = Arc::new(Notify::new());
    let mut locker = setup.locker("bench:p1", 0, &wake);
    for _ in 0..warmup {
        let g = locker.lock().await;
        locker.unlock(g).await;
    }
    let mut lat = Vec::with_capacity(iters);
    let cpu0 = cpu_time();
    for _ in 0..iters {
        let t = Instant::now();
        let g = locker.lock().await;
        locker.unlock(g).await;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    let cpu = (cpu_time() - cpu0).as_secs_f64() * 1e6 / iters as f64;
    setup.close().await;
    let (p50, p99) = p50_p99_us(lat);
    (p50, p99, cpu)
}

/// One round trip for reference: `PING` over a raw multiplexed connection, `(p50, p99)` in µs.
async fn round_trip(url: &str, n: usize) -> (f64, f64) {
    let mut conn = floor_conn(url).await;
    let mut lat = Vec::with_capacity(n);
    for i in 0..n + n / 5 {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        if i >= n / 5 {
            lat.push(t.elapsed().as_nanos() as u64);
        }
    }
    p50_p99_us(lat)
}

// ---------------------------------------------------------------------------------------------
// P2: throughput, 64 owners on distinct keys through one client

/// `(pairs/s, client CPU µs per pair)`.
async fn p2(imp: &str, url: &str, owners: usize, warmup: Duration, secs: Duration) -> (f64, f64) {
    let setup = Setup::new(imp, url).await;
    let wake = Arc::new(Notify::new());
    let mut rate = 0.0;
    let mut cpu_per_pair = 0.0;
    for (measured, length) in [(false, warmup), (true, secs)] {
        let cpu0 = cpu_time();
        let start = Instant::now();
        let deadline = start + length;
        let mut tasks = Vec::new();
        for i in 0..owners {
            let mut locker = setup.locker(&format!("bench:p2:{i}"), i, &wake);
            tasks.push(tokio::spawn(async move {
                let mut pairs = 0u64;
                while Instant::now() < deadline {
                    let g = locker.lock().await;
                    locker.unlock(g).await;
                    pairs += 1;
                }
                pairs
            }));
        }
        let mut pairs = 0;
        for t in tasks {
            pairs += t.await.unwrap();
        }
        if measured {
            rate = pairs as f64 / start.elapsed().as_secs_f64();
            cpu_per_pair = (cpu_time() - cpu0).as_secs_f64() * 1e6 / pairs as f64;
        }
    }
    setup.close().await;
    (rate, cpu_per_pair)
}

// ---------------------------------------------------------------------------------------------
// P3: hand-off on one hot key with N waiters

/// Acquisition `k`'s time, and the time its holder got the unlock reply.
struct Handoffs {
    base: Instant,
    acquired: Vec<AtomicU64>,
    released: Vec<AtomicU64>,
    count: AtomicUsize,
    moved: Notify,
}

impl Handoffs {
    fn new(slots: usize) -> Self {
        Handoffs {
            base: Instant::now(),
            acquired: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            released: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
            moved: Notify::new(),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn acquired(&self) -> usize {
        let t = self.now();
        let k = self.count.fetch_add(1, Ordering::SeqCst);
        self.acquired[k].store(t, Ordering::SeqCst);
        self.moved.notify_waiters();
        k
    }

    fn released(&self, k: usize) {
        self.released[k].store(self.now(), Ordering::SeqCst);
    }

    /// Waits until acquisition `k + 1` has happened (someone else took over).
    async fn taken_over(&self, k: usize) {
        loop {
            let mut moved = pin!(self.moved.notified());
            moved.as_mut().enable();
            if self.count.load(Ordering::SeqCst) > k + 1 {
                return;
            }
            moved.await;
        }
    }

    /// Hand-off latencies in ns from acquisition `from` on.
    fn latencies(&self, from: usize) -> Vec<u64> {
        let n = self.count.load(Ordering::SeqCst);
        (from..n.saturating_sub(1))
            .map(|k| {
                let rel = self.released[k].load(Ordering::SeqCst);
                let acq = self.acquired[k + 1].load(Ordering::SeqCst);
                acq.saturating_sub(rel)
            })
            .collect()
    }
}

struct P3Rep {
    p50_us: f64,
    p99_us: f64,
    /// Calls in `INFO commandstats`, which counts the commands scripts run too.
    calls_per_acq: f64,
    scripts_per_acq: f64,
    /// Counting runs only: commands clients sent (MONITOR, Lua's own calls left out), by name.
    client_per_acq: Option<HashMap<String, f64>>,
}

const MARK_START: &str = "bench-mark-start";
const MARK_END: &str = "bench-mark-end";

/// Counts, by name, the commands clients send between the `ECHO` markers (MONITOR lines of
/// commands run by scripts, `[0 lua]`, are left out, and so are `INFO` and the markers).
async fn monitor(url: &str) -> tokio::task::JoinHandle<HashMap<String, u64>> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let addr = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("monitor connect");
    stream.write_all(b"MONITOR\r\n").await.unwrap();
    let mut lines = tokio::io::BufReader::new(stream).lines();
    // The +OK reply: MONITOR is on before the caller goes on.
    let ok = lines.next_line().await.unwrap().unwrap_or_default();
    assert_eq!(ok.trim(), "+OK", "MONITOR refused: {ok}");
    tokio::spawn(async move {
        let mut counts: HashMap<String, u64> = HashMap::new();
        let mut counting = false;
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(MARK_START) {
                counting = true;
                continue;
            }
            if line.contains(MARK_END) {
                break;
            }
            if !counting || line.contains("[0 lua]") {
                continue;
            }
            let Some(rest) = line.split_once("] \"").map(|(_, r)| r) else {
                continue;
            };
            let name = rest.split('"').next().unwrap_or("").to_ascii_lowercase();
            if name != "info" {
                *counts.entry(name).or_default() += 1;
            }
        }
        counts
    })
}

async fn echo(conn: &mut MultiplexedConnection, what: &str) {
    let _: String = redis::cmd("ECHO")
        .arg(what)
        .query_async(conn)
        .await
        .unwrap();
}

/// `n` waiters plus the holder: each owner loops lock, hold `hold`, unlock, then waits until
/// another owner has taken the lock before contending again (so every unlock is a hand-off to
/// a waiter that was already waiting). Ends after `warmup + handoffs` acquisitions. With
/// `count`, MONITOR counts the commands clients send (that run's latencies are not reported:
/// MONITOR slows the server).
async fn p3(
    imp: &str,
    url: &str,
    n: usize,
    warmup: usize,
    handoffs: usize,
    hold: Duration,
    count: bool,
) -> P3Rep {
    let setup = Setup::new(imp, url).await;
    let key = "bench:p3";
    let (wake, listener) = match &setup {
        Setup::Floor { url, .. } => {
            let (wake, task) =
                floor_subscription(url, &format!("redisson_lock__channel:{{{key}}}")).await;
            (wake, Some(task))
        }
        Setup::Crate(_) => (Arc::new(Notify::new()), None),
    };
    let mut stats_conn = floor_conn(url).await;
    let monitor = if count {
        Some(monitor(url).await)
    } else {
        None
    };
    let total = warmup + handoffs;
    let track = Arc::new(Handoffs::new(total + n + 4));
    let before: Arc<OnceLock<HashMap<String, u64>>> = Arc::new(OnceLock::new());
    let mut tasks = Vec::new();
    for i in 0..=n {
        let mut locker = setup.locker(key, i, &wake);
        let track = track.clone();
        let before = before.clone();
        let mut stats = stats_conn.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let g = locker.lock().await;
                let k = track.acquired();
                if k == warmup {
                    let _ = before.set(commandstats_async(&mut stats).await);
                    if count {
                        echo(&mut stats, MARK_START).await;
                    }
                }
                if k >= total {
                    locker.unlock(g).await;
                    track.released(k);
                    return;
                }
                tokio::time::sleep(hold).await;
                locker.unlock(g).await;
                track.released(k);
                track.taken_over(k).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Let the fire-and-forget latch deletes land before counting.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let after = commandstats_async(&mut stats_conn).await;
    let before = before.get().expect("warm-up reached");
    let acquisitions = (track.count.load(Ordering::SeqCst) - warmup) as f64;
    let calls = commands_between(before, &after) as f64;
    let scripts = (script_calls(&after) - script_calls(before)) as f64;
    let client_per_acq = match monitor {
        Some(task) => {
            echo(&mut stats_conn, MARK_END).await;
            let counts = tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("monitor end marker")
                .unwrap();
            Some(
                counts
                    .into_iter()
                    .map(|(k, v)| (k, v as f64 / acquisitions))
                    .collect(),
            )
        }
        None => None,
    };
    let (p50_us, p99_us) = p50_p99_us(track.latencies(warmup));
    if let Some(task) = listener {
        task.abort();
    }
    setup.close().await;
    P3Rep {
        p50_us,
        p99_us,
        calls_per_acq: calls / acquisitions,
        scripts_per_acq: scripts / acquisitions,
        client_per_acq,
    }
}

// ---------------------------------------------------------------------------------------------
// P4 child: hold many locks under the watchdog, report memory; CPU between "start" and "stop"

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn emit(value: Value) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}").unwrap();
    out.flush().unwrap();
}

fn p4_child(imp: &str, url: &str, count: usize, watchdog_ms: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let watchdog = Duration::from_millis(watchdog_ms);
        let interval = watchdog / 3;
        // Hold on to whatever keeps the locks held until the process exits.
        let mut keep: Vec<LockGuard> = Vec::new();
        let mut renewer = None;
        let rss0;
        let started = Instant::now();
        if imp == "crate" {
            let config = Config::from_url(url)
                .unwrap()
                .with_watchdog_timeout(watchdog);
            let client = LockClient::with_config(config).await.expect("connect");
            // Warm the allocator and code paths the same way, then take the baseline.
            warm_crate(&client, 1000).await;
            rss0 = rss_bytes();
            let t = Instant::now();
            keep = futures::stream::iter(0..count)
                .map(|i| {
                    let lock = client.lock(format!("bench:p4:{i}"));
                    async move { lock.lock().await.expect("lock") }
                })
                .buffer_unordered(256)
                .collect()
                .await;
            eprintln!("crate: {count} locks acquired in {:?}", t.elapsed());
            assert_eq!(client.renewed_locks(), count);
            std::mem::forget(client);
        } else {
            let conn = floor_conn(url).await;
            let field = "00000000-0000-4000-8000-000000000000:1".to_string();
            rss0 = rss_bytes();
            let keys: Vec<String> = futures::stream::iter(0..count)
                .map(|i| {
                    let mut lock = FloorLock::new(
                        conn.clone(),
                        &format!("bench:p4:{i}"),
                        field.clone(),
                        Arc::new(Notify::new()),
                    );
                    lock.lease_ms = watchdog_ms;
                    async move {
                        assert!(lock.try_acquire().await.is_none());
                        lock.key
                    }
                })
                .buffer_unordered(256)
                .collect()
                .await;
            let mut conn = conn.clone();
            renewer = Some(tokio::spawn(async move {
                // The watchdog with no library logic: every interval, every key, batches of 100.
                let mut next = Instant::now() + interval;
                loop {
                    tokio::time::sleep_until(next.into()).await;
                    let cycle = Instant::now();
                    for batch in keys.chunks(100) {
                        let mut call = RENEW.prepare_invoke();
                        call.arg(watchdog_ms);
                        for key in batch {
                            call.key(key).arg(&field);
                        }
                        let renewed: Vec<i64> = call.invoke_async(&mut conn).await.expect("renew");
                        assert!(renewed.iter().all(|r| *r == 1));
                    }
                    next = cycle + interval;
                }
            }));
        }
        let rss1 = rss_bytes();
        emit(json!({
            "phase": "held",
            "acquire_ms": started.elapsed().as_secs_f64() * 1e3,
            "rss_delta_bytes": rss1 as i64 - rss0 as i64,
            "bytes_per_lock": (rss1 as f64 - rss0 as f64) / count as f64,
        }));
        let mut lines =
            tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
        let mut cpu0 = cpu_time();
        let mut t0 = Instant::now();
        while let Ok(Some(line)) = lines.next_line().await {
            match line.trim() {
                "start" => {
                    cpu0 = cpu_time();
                    t0 = Instant::now();
                    emit(json!({"phase": "started"}));
                }
                "stop" => {
                    let cpu = cpu_time() - cpu0;
                    emit(json!({
                        "phase": "stopped",
                        "cpu_ms": cpu.as_secs_f64() * 1e3,
                        "wall_ms": t0.elapsed().as_secs_f64() * 1e3,
                        "rss_bytes": rss_bytes(),
                    }));
                }
                _ => break,
            }
        }
        drop(renewer);
        // Exit without releasing: the orchestrator flushes the server.
        std::mem::forget(keep);
        std::process::exit(0);
    });
}

async fn warm_crate(client: &LockClient, n: usize) {
    let guards: Vec<LockGuard> = futures::stream::iter(0..n)
        .map(|i| {
            let lock = client.lock(format!("bench:warm:{i}"));
            async move { lock.lock().await.expect("lock") }
        })
        .buffer_unordered(256)
        .collect()
        .await;
    for g in guards {
        g.unlock().await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Orchestrator

struct Java {
    version: String,
    jar: PathBuf,
}

fn java_command(java: &Java, url: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(std::env::var("JAVA").unwrap_or_else(|_| "java".into()));
    cmd.arg("-Xms512m")
        .arg("-Xmx2g")
        .arg("-cp")
        .arg(&java.jar)
        .arg("interop.Bench")
        .arg(url)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd
}

/// Runs one Java scenario to completion; returns its JSON result lines.
fn run_java(java: &Java, url: &str, args: &[String]) -> Vec<Value> {
    let mut child = java_command(java, url, args).spawn().expect("start java");
    drop(child.stdin.take());
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut results = Vec::new();
    for line in out.lines() {
        let line = line.unwrap();
        match serde_json::from_str::<Value>(&line) {
            Ok(v) => results.push(v),
            Err(_) => eprintln!("java: {line}"),
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "interop.Bench {args:?} failed: {status}");
    results
}

/// A P4 child (Rust or JVM) driven over stdin/stdout.
struct Driven {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Driven {
    fn start(mut cmd: Command) -> Driven {
        let mut child = cmd.spawn().expect("start P4 child");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(_) => eprintln!("child: {line}"),
                }
            }
        });
        Driven {
            child,
            stdin,
            lines,
        }
    }

    fn expect(&mut self, phase: &str, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v["phase"] == phase => return Some(v),
                Ok(v) => eprintln!("child: {v}"),
                Err(_) => return None,
            }
        }
    }

    fn send(&mut self, line: &str) {
        let _ = writeln!(self.stdin, "{line}");
        let _ = self.stdin.flush();
    }

    fn finish(mut self) {
        self.send("quit");
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One renewal burst seen from the server: its script calls and how long it lasted.
struct Burst {
    calls: u64,
    duration: Duration,
}

/// Samples evalsha+eval counts every 5 ms for `window`; splits them into bursts separated by
/// at least `gap` of silence.
fn sample_bursts(
    conn: &mut redis::Connection,
    window: Duration,
    gap: Duration,
) -> (u64, Vec<Burst>) {
    let start = Instant::now();
    let first = script_calls(&commandstats(conn));
    let mut last = first;
    let mut bursts = Vec::new();
    let mut current: Option<(Instant, Instant, u64)> = None; // first seen, last seen, calls
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        let calls = script_calls(&commandstats(conn));
        let delta = calls - last;
        last = calls;
        if delta > 0 {
            current = Some(match current {
                Some((s, _, c)) => (s, now, c + delta),
                None => (now, now, delta),
            });
        } else if let Some((s, e, c)) = current {
            if now - e >= gap {
                bursts.push((s, e, c));
                current = None;
            }
        }
    }
    let total = last - first;
    // The first and the last bursts may be cut by the window: keep complete ones only.
    let complete: Vec<Burst> = bursts
        .iter()
        .filter(|(s, _, _)| *s - start > Duration::from_millis(10))
        .map(|(s, e, c)| Burst {
            calls: *c,
            duration: *e - *s + Duration::from_millis(5),
        })
        .collect();
    (total, complete)
}

fn dbsize(url: &str) -> u64 {
    redis::cmd("DBSIZE").query(&mut sync_conn(url)).unwrap()
}

fn run_p4(plan: &Plan, results: &mut Results, imp: &str, cmd: Command, url: &str, count: usize) {
    let tag = format!("p4.{count}");
    eprintln!("P4 {count} locks: {imp}");
    flushall(url);
    let mut child = Driven::start(cmd);
    let Some(held) = child.expect("held", Duration::from_secs(600)) else {
        results.note(&format!("{tag}.calls"), imp, "did not finish acquiring");
        child.finish();
        flushall(url);
        return;
    };
    let interval = Duration::from_millis(plan.p4_watchdog_ms / 3);
    results.add(
        &format!("{tag}.acquire_s"),
        imp,
        held["acquire_ms"].as_f64().unwrap() / 1e3,
    );
    if let Some(b) = held["bytes_per_lock"].as_f64() {
        results.add(&format!("{tag}.bytes_per_lock"), imp, b);
    }
    if let Some(b) = held["heap_bytes_per_lock"].as_f64() {
        results.add(&format!("{tag}.heap_bytes_per_lock"), imp, b);
    }
    // Settle: let renewal reach its steady state after the acquisition burst.
    std::thread::sleep(interval * 2);
    child.send("start");
    child.expect("started", Duration::from_secs(30));
    let window = interval * plan.p4_cycles;
    let mut conn = sync_conn(url);
    let gap = (interval / 20).max(Duration::from_millis(20));
    let (calls, bursts) = sample_bursts(&mut conn, window, gap);
    child.send("stop");
    let stopped = child
        .expect("stopped", Duration::from_secs(30))
        .unwrap_or(Value::Null);
    let held_now = dbsize(url);
    child.finish();
    flushall(url);
    let cycles = plan.p4_cycles as f64;
    results.add(&format!("{tag}.calls"), imp, calls as f64 / cycles);
    if let Some(cpu) = stopped["cpu_ms"].as_f64() {
        results.add(&format!("{tag}.cpu_ms"), imp, cpu / cycles);
    }
    results.add(
        &format!("{tag}.held_pct"),
        imp,
        held_now as f64 * 100.0 / count as f64,
    );
    // Distinct bursts, each about a cycle's worth of calls: a batched cycle we can time.
    let per_cycle = calls as f64 / cycles;
    let distinct: Vec<&Burst> = bursts
        .iter()
        .filter(|b| (b.calls as f64) > 0.8 * per_cycle && (b.calls as f64) < 1.2 * per_cycle)
        .collect();
    if !distinct.is_empty() {
        let ms: Vec<f64> = distinct
            .iter()
            .map(|b| b.duration.as_secs_f64() * 1e3)
            .collect();
        results.add(&format!("{tag}.cycle_ms"), imp, median(&ms));
    } else {
        results.note(&format!("{tag}.cycle_ms"), imp, "no distinct cycle");
    }
}

fn record_p3(results: &mut Results, n: usize, imp: &str, r: &P3Rep) {
    match &r.client_per_acq {
        None => {
            results.add(&format!("p3.{n}.p50_us"), imp, r.p50_us);
            results.add(&format!("p3.{n}.p99_us"), imp, r.p99_us);
            results.add(&format!("p3.{n}.calls"), imp, r.calls_per_acq);
            results.add(&format!("p3.{n}.scripts"), imp, r.scripts_per_acq);
        }
        Some(by_name) => {
            results.add(&format!("p3.{n}.client"), imp, by_name.values().sum());
            let mut parts: Vec<(&String, &f64)> =
                by_name.iter().filter(|(_, v)| **v >= 0.005).collect();
            parts.sort_by(|a, b| b.1.partial_cmp(a.1).unwrap().then(a.0.cmp(b.0)));
            let text = parts
                .iter()
                .map(|(k, v)| format!("{} {:.2}", k.to_uppercase(), v))
                .collect::<Vec<_>>()
                .join(", ");
            eprintln!("  p3.{n} client commands by name {imp:<16} {text}");
            results.breakdown.push((n, imp.to_string(), text));
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut url = None;
    let mut quick = false;
    let mut jars = Vec::new();
    let mut only: Option<Vec<String>> = None;
    let mut child: Option<String> = None;
    let mut locks = 0usize;
    let mut watchdog_ms = 3_000u64;
    let mut unknown = Vec::new();
    let mut rust_impls: Vec<String> = vec!["crate".into(), "floor".into()];
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--redis" => url = args.next(),
            "--quick" => quick = true,
            "--bench" => {} // passed by `cargo bench`
            "--java-jar" => {
                let spec = args.next().expect("--java-jar VERSION=PATH");
                let (v, p) = spec.split_once('=').expect("--java-jar VERSION=PATH");
                jars.push(Java {
                    version: v.to_string(),
                    jar: PathBuf::from(p),
                });
            }
            "--only" => {
                only = Some(
                    args.next()
                        .unwrap()
                        .split(',')
                        .map(|s| s.trim().to_lowercase())
                        .collect(),
                )
            }
            "--rust" => {
                rust_impls = args
                    .next()
                    .unwrap()
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect()
            }
            "--p4-child" => child = args.next(),
            "--locks" => locks = args.next().unwrap().parse().unwrap(),
            "--watchdog-ms" => watchdog_ms = args.next().unwrap().parse().unwrap(),
            other => unknown.push(other.to_string()),
        }
    }
    let Some(url) = url else {
        // `cargo test --all-targets` runs this binary too: benchmarks are not tests, and
        // without a server there is nothing to measure.
        eprintln!("compare: no --redis URL, nothing to do (run scripts/bench.sh [--quick])");
        return;
    };
    if !unknown.is_empty() {
        eprintln!("compare: unknown arguments {unknown:?}");
        eprintln!("usage: compare --redis URL [--quick] [--java-jar VERSION=PATH]... [--only p1,p2,p3,p4] [--rust crate,floor]");
        std::process::exit(2);
    }
    if let Some(imp) = child {
        p4_child(&imp, &url, locks, watchdog_ms);
        return;
    }
    let wants = |s: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == s));
    let plan = Plan::new(quick);
    let mut results = Results::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rust: Vec<&str> = rust_impls.iter().map(|s| s.as_str()).collect();
    let rust = rust.as_slice();
    let java_name = |j: &Java| format!("redisson-{}", j.version);
    let t0 = Instant::now();

    {
        let (p50, p99) = rt.block_on(round_trip(&url, 3000));
        results.add("rtt.p50_us", "floor", p50);
        results.add("rtt.p99_us", "floor", p99);
    }

    if wants("p1") {
        eprintln!(
            "P1: uncontended lock+unlock ({} pairs x {} reps)",
            plan.p1_iters, plan.reps
        );
        for _ in 0..plan.reps {
            for imp in rust {
                let (p50, p99, cpu) = rt.block_on(p1(imp, &url, plan.p1_warmup, plan.p1_iters));
                results.add("p1.p50_us", imp, p50);
                results.add("p1.p99_us", imp, p99);
                results.add("p1.cpu_us", imp, cpu);
                flushall(&url);
            }
        }
    }

    if wants("p2") {
        eprintln!(
            "P2: {} owners, distinct keys, {:?} x {} reps",
            plan.p2_owners, plan.p2_secs, plan.reps
        );
        for _ in 0..plan.reps {
            for imp in rust {
                let (ops, cpu) =
                    rt.block_on(p2(imp, &url, plan.p2_owners, plan.p2_warmup, plan.p2_secs));
                results.add("p2.ops", imp, ops);
                results.add("p2.cpu_us", imp, cpu);
                flushall(&url);
            }
        }
    }

    if wants("p3") {
        let hold = Duration::from_millis(plan.p3_hold_ms);
        let count_handoffs = plan.p3_count_handoffs;
        for &n in &plan.p3_ns {
            eprintln!(
                "P3: hand-off, {n} waiters, {} hand-offs x {} reps (+1 counting run)",
                plan.p3_handoffs, plan.p3_reps
            );
            for rep in 0..=plan.p3_reps {
                let counting = rep == plan.p3_reps;
                for imp in rust {
                    let handoffs = if counting {
                        count_handoffs
                    } else {
                        plan.p3_handoffs
                    };
                    let r = rt.block_on(p3(imp, &url, n, plan.p3_warmup, handoffs, hold, counting));
                    record_p3(&mut results, n, imp, &r);
                    flushall(&url);
                }
            }
        }
    }

    if wants("p1") || wants("p2") || wants("p3") {
        // Redisson: P1, P2 (threads and async) and P3 in one JVM per version, warmed up once.
        for j in &jars {
            eprintln!(
                "P1-P3: {} (JVM warm-up {:?})",
                java_name(j),
                plan.java_warmup
            );
            let ns: Vec<String> = plan.p3_ns.iter().map(|n| n.to_string()).collect();
            let a = vec![
                "suite".to_string(),
                plan.java_warmup.as_millis().to_string(),
                plan.p1_iters.to_string(),
                plan.reps.to_string(),
                plan.p2_owners.to_string(),
                plan.p2_secs.as_millis().to_string(),
                ns.join(","),
                plan.p3_handoffs.to_string(),
                plan.p3_warmup.to_string(),
                plan.p3_hold_ms.to_string(),
                plan.p3_reps.to_string(),
                plan.p3_count_handoffs.to_string(),
            ];
            let imp = java_name(j);
            for v in run_java(j, &url, &a) {
                match v["scenario"].as_str() {
                    Some("p1") => {
                        results.add("p1.p50_us", &imp, v["p50_us"].as_f64().unwrap());
                        results.add("p1.p99_us", &imp, v["p99_us"].as_f64().unwrap());
                        results.add("p1.cpu_us", &imp, v["cpu_us"].as_f64().unwrap());
                    }
                    Some("p2") => {
                        results.add("p2.ops", &imp, v["ops_per_s"].as_f64().unwrap());
                        results.add("p2.cpu_us", &imp, v["cpu_us"].as_f64().unwrap());
                    }
                    Some("p2async") => {
                        results.add("p2.ops_async", &imp, v["ops_per_s"].as_f64().unwrap());
                        results.add("p2.cpu_us_async", &imp, v["cpu_us"].as_f64().unwrap());
                    }
                    Some("p3") => {
                        let n = v["n"].as_u64().unwrap() as usize;
                        let client = v["client"].as_object().map(|m| {
                            m.iter()
                                .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
                                .collect::<HashMap<_, _>>()
                        });
                        let r = P3Rep {
                            p50_us: v["p50_us"].as_f64().unwrap_or(f64::NAN),
                            p99_us: v["p99_us"].as_f64().unwrap_or(f64::NAN),
                            calls_per_acq: v["calls_per_acq"].as_f64().unwrap_or(f64::NAN),
                            scripts_per_acq: v["scripts_per_acq"].as_f64().unwrap_or(f64::NAN),
                            client_per_acq: client,
                        };
                        record_p3(&mut results, n, &imp, &r);
                    }
                    _ => eprintln!("java: unexpected {v}"),
                }
            }
            flushall(&url);
        }
    }

    if wants("p4") {
        let exe = std::env::current_exe().unwrap();
        for &count in &plan.p4_counts {
            for imp in rust {
                let mut cmd = Command::new(&exe);
                cmd.args(["--p4-child", imp, "--redis", &url])
                    .args(["--locks", &count.to_string()])
                    .args(["--watchdog-ms", &plan.p4_watchdog_ms.to_string()])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit());
                run_p4(&plan, &mut results, imp, cmd, &url, count);
            }
            for j in &jars {
                let args = [
                    "p4".to_string(),
                    count.to_string(),
                    plan.p4_watchdog_ms.to_string(),
                ];
                let cmd = java_command(j, &url, &args);
                run_p4(&plan, &mut results, &java_name(j), cmd, &url, count);
            }
        }
    }
    // The async Redisson rows compare against the same crate and floor figures.
    for (from, to) in [("p2.ops", "p2.ops_async"), ("p2.cpu_us", "p2.cpu_us_async")] {
        for imp in rust {
            if let Some(v) = results.values.get(from).and_then(|m| m.get(*imp)).cloned() {
                if let Some(m) = results.values.get_mut(to) {
                    m.insert(imp.to_string(), v);
                }
            }
        }
    }
    eprintln!("all scenarios done in {:.0} s", t0.elapsed().as_secs_f64());
    print!(
        "{}",
        table(
            &plan,
            &results,
            &jars.iter().map(java_name).collect::<Vec<_>>()
        )
    );
}

// ---------------------------------------------------------------------------------------------
// The table

#[derive(Clone, Copy, PartialEq)]
enum Better {
    Lower,
    Higher,
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v.abs() >= 10_000.0 {
        let s = format!("{:.0}", v);
        // thousands separators
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if v.abs() >= 100.0 {
        format!("{:.0}", v)
    } else if v.abs() >= 10.0 {
        format!("{:.1}", v)
    } else {
        format!("{:.2}", v)
    }
}

fn table(plan: &Plan, r: &Results, javas: &[String]) -> String {
    let mut out = String::new();
    let mut header = "| scenario | metric | crate | floor |".to_string();
    let mut rule = "| --- | --- | ---: | ---: |".to_string();
    for j in javas {
        header.push_str(&format!(" {} |", j.replace("redisson-", "Redisson ")));
        rule.push_str(" ---: |");
    }
    header.push_str(" crate/floor |");
    rule.push_str(" ---: |");
    for j in javas {
        header.push_str(&format!(" crate/{} |", j.replace("redisson-", "R")));
        rule.push_str(" ---: |");
    }
    out.push_str(&header);
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');

    // Lines where the crate is not ahead of a Redisson version: (line, version).
    let mut behind: Vec<(String, String)> = Vec::new();
    let mut compared = 0usize;
    let mut row = |scenario: &str, label: &str, metric: &str, better: Better, with_floor: bool| {
        if !r.values.contains_key(metric) && !r.notes.keys().any(|(m, _)| m == metric) {
            return;
        }
        // P4 renewal figures of a client that lost locks cover fewer locks: not comparable.
        let degraded = |imp: &str| -> bool {
            let Some(prefix) = metric.strip_suffix(".calls").or_else(|| {
                metric
                    .strip_suffix(".cycle_ms")
                    .or_else(|| metric.strip_suffix(".cpu_ms"))
            }) else {
                return false;
            };
            prefix.starts_with("p4.")
                && r.median(&format!("{prefix}.held_pct"), imp)
                    .is_some_and(|held| held < 99.5)
        };
        for j in javas {
            if degraded(j) || degraded("crate") {
                continue;
            }
            if let (Some(a), Some(b)) = (r.median(metric, "crate"), r.median(metric, j)) {
                compared += 1;
                // A tie (e.g. 100 % held on both sides) is not "behind".
                let ahead_or_even = match better {
                    Better::Lower => a <= b,
                    Better::Higher => a >= b,
                };
                if !ahead_or_even {
                    behind.push((format!("{scenario}: {label}"), j.clone()));
                }
            }
        }
        let mark = |imp: &str| if degraded(imp) { " ‡" } else { "" };
        let cell = |imp: &str| -> String {
            match (r.median(metric, imp), r.get_note(metric, imp)) {
                (Some(v), _) => format!("{}{}", fmt_num(v), mark(imp)),
                (None, Some(note)) => format!("{note}{}", mark(imp)),
                (None, None) => "–".into(),
            }
        };
        let arrow = match better {
            Better::Lower => "↓",
            Better::Higher => "↑",
        };
        let mut line = format!("| {scenario} | {label} {arrow} | {} |", cell("crate"));
        line.push_str(&format!(
            " {} |",
            if with_floor {
                cell("floor")
            } else {
                "–".into()
            }
        ));
        for j in javas {
            line.push_str(&format!(" {} |", cell(j)));
        }
        let ratio = |other: &str| -> String {
            match (r.median(metric, "crate"), r.median(metric, other)) {
                (Some(a), Some(b)) if b != 0.0 => format!("{:.2}×{}", a / b, mark(other)),
                _ => "–".into(),
            }
        };
        line.push_str(&format!(
            " {} |",
            if with_floor {
                ratio("floor")
            } else {
                "–".into()
            }
        ));
        for j in javas {
            line.push_str(&format!(" {} |", ratio(j)));
        }
        out.push_str(&line);
        out.push('\n');
    };

    row(
        "P1 uncontended",
        "lock+unlock p50 µs",
        "p1.p50_us",
        Better::Lower,
        true,
    );
    row(
        "P1 uncontended",
        "lock+unlock p99 µs",
        "p1.p99_us",
        Better::Lower,
        true,
    );
    row(
        "P1 uncontended",
        "client CPU µs / pair",
        "p1.cpu_us",
        Better::Lower,
        true,
    );
    row(
        &format!("P2 {} owners", plan.p2_owners),
        "lock+unlock pairs/s (Redisson: a thread per owner, lock())",
        "p2.ops",
        Better::Higher,
        true,
    );
    row(
        &format!("P2 {} owners", plan.p2_owners),
        "client CPU µs / pair (Redisson: threads)",
        "p2.cpu_us",
        Better::Lower,
        true,
    );
    row(
        &format!("P2 {} owners", plan.p2_owners),
        "lock+unlock pairs/s (Redisson: lockAsync(id) chains)",
        "p2.ops_async",
        Better::Higher,
        true,
    );
    row(
        &format!("P2 {} owners", plan.p2_owners),
        "client CPU µs / pair (Redisson: async)",
        "p2.cpu_us_async",
        Better::Lower,
        true,
    );
    for n in &plan.p3_ns {
        let s = format!("P3 hand-off, {n} waiter{}", if *n == 1 { "" } else { "s" });
        row(
            &s,
            "unlock reply → next acquire p50 µs",
            &format!("p3.{n}.p50_us"),
            Better::Lower,
            true,
        );
        row(
            &s,
            "… p99 µs",
            &format!("p3.{n}.p99_us"),
            Better::Lower,
            true,
        );
        row(
            &s,
            "client commands / acquisition (MONITOR)",
            &format!("p3.{n}.client"),
            Better::Lower,
            true,
        );
        row(
            &s,
            "server calls / acquisition, incl. inside Lua (INFO)",
            &format!("p3.{n}.calls"),
            Better::Lower,
            true,
        );
    }
    for count in &plan.p4_counts {
        let s = format!("P4 {} locks", fmt_num(*count as f64));
        let t = format!("p4.{count}");
        row(
            &s,
            "renewal calls / cycle",
            &format!("{t}.calls"),
            Better::Lower,
            true,
        );
        row(
            &s,
            "renewal cycle ms",
            &format!("{t}.cycle_ms"),
            Better::Lower,
            true,
        );
        row(
            &s,
            "client CPU ms / cycle",
            &format!("{t}.cpu_ms"),
            Better::Lower,
            true,
        );
        row(
            &s,
            "client RSS bytes / lock",
            &format!("{t}.bytes_per_lock"),
            Better::Lower,
            true,
        );
        row(
            &s,
            "JVM live heap bytes / lock",
            &format!("{t}.heap_bytes_per_lock"),
            Better::Lower,
            false,
        );
        row(
            &s,
            "% still held after the window",
            &format!("{t}.held_pct"),
            Better::Higher,
            true,
        );
        row(
            &s,
            "time to acquire all, s",
            &format!("{t}.acquire_s"),
            Better::Lower,
            true,
        );
    }
    if !r.breakdown.is_empty() {
        out.push_str(
            "\nP3 client commands per acquisition, by command (one counting run with MONITOR):\n\n",
        );
        out.push_str("| waiters | implementation | commands |\n| ---: | --- | --- |\n");
        for (n, imp, text) in &r.breakdown {
            out.push_str(&format!("| {n} | {imp} | {text} |\n"));
        }
    }
    if r.values.keys().any(|m| m.ends_with(".held_pct"))
        && r.values
            .iter()
            .filter(|(m, _)| m.ends_with(".held_pct"))
            .any(|(_, by)| by.values().any(|v| median(v) < 99.5))
    {
        out.push_str("\n‡ That client lost locks during P4 (see “% still held”): its renewal figures cover fewer locks, so they are shown but not compared.\n");
    }
    out.push_str(&targets(plan, r, &behind, compared));
    let reps = r.reps("p1.p50_us", "crate");
    out.push_str(&format!(
        "\n{}Medians over repetitions (P1/P2: {} each, P3: {} each, P4: 1 run per size). ↓ lower is better, ↑ higher is better; ratios are crate ÷ other.\n",
        if plan.quick { "**Quick run** (`--quick`: few, short repetitions; indicative only). " } else { "" },
        reps.max(plan.reps), plan.p3_reps
    ));
    if let (Some(p50), Some(p99)) = (
        r.median("rtt.p50_us", "floor"),
        r.median("rtt.p99_us", "floor"),
    ) {
        out.push_str(&format!(
            "One round trip in this run (redis-rs `PING` on the same runtime): p50 {} µs, p99 {} µs.\n",
            fmt_num(p50),
            fmt_num(p99)
        ));
    }
    out
}

/// The issue's targets, judged on this run's medians.
fn targets(plan: &Plan, r: &Results, behind: &[(String, String)], compared: usize) -> String {
    let ratio = |metric: &str| -> Option<f64> {
        Some(r.median(metric, "crate")? / r.median(metric, "floor")?)
    };
    let verdict = |ok: Option<bool>| match ok {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "not measured",
    };
    let mut out =
        String::from("\n| target (issue #6) | this run | verdict |\n| --- | --- | --- |\n");
    let p1 = ratio("p1.p50_us");
    out.push_str(&format!(
        "| P1 p50 within 1.10× the floor | crate/floor {} | {} |\n",
        p1.map_or("–".into(), |x| format!("{x:.2}×")),
        verdict(p1.map(|x| x <= 1.10))
    ));
    let p2 = ratio("p2.ops");
    out.push_str(&format!(
        "| P2 throughput ≥ 0.9× the floor | crate/floor {} | {} |\n",
        p2.map_or("–".into(), |x| format!("{x:.2}×")),
        verdict(p2.map(|x| x >= 0.90))
    ));
    let rtt = r.median("rtt.p50_us", "floor");
    let mut p3_text = Vec::new();
    let mut p3_ok = None;
    for n in &plan.p3_ns {
        let (Some(p50), Some(cmds)) = (
            r.median(&format!("p3.{n}.p50_us"), "crate"),
            r.median(&format!("p3.{n}.client"), "crate"),
        ) else {
            continue;
        };
        let rtts = rtt.map(|t| p50 / t);
        p3_text.push(format!(
            "N={n}: {} µs{}, {cmds:.1} commands",
            fmt_num(p50),
            rtts.map_or(String::new(), |x| format!(" = {x:.1} RTT"))
        ));
        let ok = rtts.is_none_or(|x| x <= 3.0) && cmds <= 8.0;
        p3_ok = Some(p3_ok.unwrap_or(true) && ok);
    }
    out.push_str(&format!(
        "| P3 hand-off p50 ≤ 3 round trips, few commands per acquisition, flat in N (no polling) | {} | {} |\n",
        if p3_text.is_empty() { "–".into() } else { p3_text.join("; ") },
        verdict(p3_ok)
    ));
    let p4 = plan
        .p4_counts
        .iter()
        .max()
        .and_then(|n| Some((*n, r.median(&format!("p4.{n}.calls"), "crate")?)));
    out.push_str(&format!(
        "| P4 ≤ 1,000 Redis calls per cycle at 100k locks | {} | {} |\n",
        p4.map_or("–".into(), |(n, c)| format!(
            "{} calls / cycle at {} locks",
            fmt_num(c),
            fmt_num(n as f64)
        )),
        verdict(p4.filter(|(n, _)| *n >= 100_000).map(|(_, c)| c <= 1000.5))
    ));
    let list = behind
        .iter()
        .map(|(line, j)| format!("{line} (vs {})", j.replace("redisson-", "Redisson ")))
        .collect::<Vec<_>>()
        .join("; ");
    out.push_str(&format!(
        "| ahead of Redisson on every line | behind on {} of {} comparisons{}{} | {} |\n",
        behind.len(),
        compared,
        if list.is_empty() { "" } else { ": " },
        list,
        verdict((compared > 0).then_some(behind.is_empty()))
    ));
    out
}
