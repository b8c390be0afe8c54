//! The in-process scenarios P1-P3 (crate and floor), one lock of either implementation
//! (`Locker`, `Setup`), and the recording of P3 results.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use redisson_lock::{
    FencedLock, Lease, Lock, LockClient, LockGuard, Owner, PermitExpirableSemaphore, Semaphore,
    SemaphorePermits,
};
use tokio::sync::Notify;

use crate::floor::{floor_subscription, FloorLock};
use crate::p4::cpu_time;
use crate::redis_util::{
    commands_between, commandstats_async, echo, monitor, script_calls, MARK_END, MARK_START,
};
use crate::stats::{p50_p99_us, Results};
use crate::target::{multiplexed, FloorConn, Target};

/// The hot key of P3 (Bench.java uses the same).
pub(crate) const P3_KEY: &str = "bench:p3";

/// The P3 name of the crate with local hand-off off.
pub(crate) const PLAIN: &str = "crate-plain";

/// The lock kinds besides `RLock` that P1 and P3 also run, one row each (Bench.java's
/// `kinds` takes the same names), and the synchronizers taken as locks: one permit of a
/// semaphore of one (`semaphore`: `RSemaphore`; `permit`: `RPermitExpirableSemaphore`, kept
/// by the watchdog here and without a lease in Redisson, which renews none). The read lock
/// has no P3 row: readers share, so nothing is handed off.
pub(crate) const KINDS: [&str; 7] = [
    "fenced",
    "read",
    "write",
    "fair",
    "spin",
    "semaphore",
    "permit",
];

/// The crate with prompt loss detection off (on by default: each hold kept past 10 ms is
/// listened for on its lock's channel); P1, P2 and P4 at 10,000 locks run it too, for what
/// listening costs.
pub(crate) const UNWATCHED: &str = "crate-nowatch";

// ---------------------------------------------------------------------------------------------
// One lock, either implementation

enum Locker {
    Crate(Lock),
    Fenced(FencedLock),
    Semaphore(Semaphore),
    Permit(PermitExpirableSemaphore),
    Floor(FloorLock),
}

/// What a [`Locker`] holds.
enum Held {
    Lock(LockGuard),
    Permits(SemaphorePermits),
    Floor,
}

impl Locker {
    async fn lock(&mut self) -> Held {
        match self {
            Locker::Crate(lock) => Held::Lock(lock.lock().await.expect("crate lock")),
            Locker::Fenced(lock) => Held::Lock(lock.lock().await.expect("crate lock").into_guard()),
            Locker::Semaphore(sem) => Held::Permits(sem.acquire(1).await.expect("crate acquire")),
            Locker::Permit(sem) => {
                let permit = sem.acquire(Lease::Watchdog).await.expect("crate acquire");
                Held::Lock(permit.into_guard().0)
            }
            Locker::Floor(lock) => {
                lock.lock().await;
                Held::Floor
            }
        }
    }

    async fn unlock(&mut self, held: Held) {
        match (self, held) {
            (Locker::Floor(lock), _) => lock.unlock().await,
            (_, Held::Lock(guard)) => guard.unlock().await.expect("crate unlock"),
            (_, Held::Permits(permits)) => permits.release().await.expect("crate release"),
            (_, Held::Floor) => unreachable!("only the floor holds nothing"),
        }
    }
}

/// Connections for one in-process run.
enum Setup {
    Crate(LockClient),
    Floor {
        conn: FloorConn,
        publish: &'static str,
        client_id: String,
        wait: bool,
    },
}

impl Setup {
    async fn new(imp: &str, target: &Target) -> Setup {
        match imp {
            "crate" => Setup::Crate(
                LockClient::with_config(target.config())
                    .await
                    .expect("crate connect"),
            ),
            // The crate with local hand-off off: waiters served by the unlock message only, as
            // when holder and waiters are in different clients.
            PLAIN => {
                let config = target.config().with_local_handoff(false);
                Setup::Crate(
                    LockClient::with_config(config)
                        .await
                        .expect("crate connect"),
                )
            }
            UNWATCHED => {
                let config = target.config().with_prompt_loss_detection(false);
                Setup::Crate(
                    LockClient::with_config(config)
                        .await
                        .expect("crate connect"),
                )
            }
            _ => Setup::Floor {
                conn: FloorConn::open(target).await,
                publish: target.publish_command(),
                client_id: "00000000-0000-4000-8000-000000000000".to_string(),
                wait: target.has_replicas(),
            },
        }
    }

    /// A locker on `key` for owner number `owner` (waiting listens on `wake`, floor only).
    fn locker(&self, key: &str, owner: usize, wake: &Arc<Notify>) -> Locker {
        self.locker_of("lock", key, owner, wake)
    }

    /// [`Setup::locker`] of one of [`KINDS`] (or `lock`; the floor has `lock` only).
    fn locker_of(&self, kind: &str, key: &str, owner: usize, wake: &Arc<Notify>) -> Locker {
        let me = Owner::new();
        match self {
            Setup::Crate(client) => match kind {
                "lock" => Locker::Crate(client.lock(key).with_owner(me)),
                "fenced" => Locker::Fenced(client.fenced_lock(key).with_owner(me)),
                "read" => Locker::Crate(client.read_write_lock(key).read_lock().with_owner(me)),
                "write" => Locker::Crate(client.read_write_lock(key).write_lock().with_owner(me)),
                "fair" => Locker::Crate(client.fair_lock(key).with_owner(me)),
                "spin" => Locker::Crate(client.spin_lock(key).with_owner(me)),
                "semaphore" => Locker::Semaphore(client.semaphore(key)),
                "permit" => Locker::Permit(client.permit_semaphore(key)),
                other => panic!("no such kind: {other}"),
            },
            Setup::Floor {
                conn,
                publish,
                client_id,
                wait,
            } => Locker::Floor(FloorLock::new(
                conn.clone(),
                publish,
                key,
                format!("{client_id}:{}", owner + 1),
                wake.clone(),
                *wait,
            )),
        }
    }

    /// Gives a semaphore kind's `key` its one permit (the others need nothing).
    async fn prepare(&self, kind: &str, key: &str) {
        if let Setup::Crate(client) = self {
            match kind {
                "semaphore" => drop(client.semaphore(key).try_set_permits(1).await),
                "permit" => drop(client.permit_semaphore(key).try_set_permits(1).await),
                _ => {}
            }
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
pub(crate) async fn p1(
    imp: String,
    target: Target,
    warmup: usize,
    iters: usize,
) -> (f64, f64, f64) {
    p1_of("lock", imp, target, warmup, iters).await
}

/// [`p1`] with a lock of `kind` (`lock` or one of [`KINDS`]).
pub(crate) async fn p1_of(
    kind: &'static str,
    imp: String,
    target: Target,
    warmup: usize,
    iters: usize,
) -> (f64, f64, f64) {
    p1_pairs(kind, imp, target, warmup, iters).await
}

/// `warmup` then `iters` timed lock+unlock pairs of `kind` on one key.
async fn p1_pairs(
    kind: &'static str,
    imp: String,
    target: Target,
    warmup: usize,
    iters: usize,
) -> (f64, f64, f64) {
    let mut side = Side::new(kind, &imp, &target, None).await;
    side.warm_up(warmup).await;
    side.pairs(iters).await;
    side.close().await
}

/// Whether P1 and P2 run `imp` in turns with its twin ([`p1_paired`], [`p2_paired`]) rather
/// than alone: the crate with prompt loss detection on and off ([`UNWATCHED`]).
pub(crate) fn in_turns(imp: &str) -> bool {
    imp == "crate" || imp == UNWATCHED
}

/// The "implementation" under which [`p1_paired`]'s on ÷ off ratios are kept, one per turn.
pub(crate) const PAIRED: &str = "on÷off";

/// How many pairs each side of [`p1_paired`] runs before the other's turn.
pub(crate) const PAIRED_BLOCK: usize = 100;

/// P1 of the crate with prompt loss detection on and off ([`UNWATCHED`]), on one key or
/// (`distinct`) a new lock on a new key for each pair (its making timed with it), in turns of
/// [`PAIRED_BLOCK`] pairs, each turn's two blocks in alternating order: both sides meet the
/// same moments of the machine (whose round trips switch between modes many times a
/// repetition), and each pair of adjacent blocks gives one on ÷ off ratio of p50 and of p99.
pub(crate) async fn p1_paired(
    target: Target,
    warmup: usize,
    iters: usize,
    distinct: bool,
) -> Paired {
    let mut sides = [
        Side::new("lock", "crate", &target, distinct.then_some("on")).await,
        Side::new("lock", UNWATCHED, &target, distinct.then_some("off")).await,
    ];
    for side in &mut sides {
        side.warm_up(warmup).await;
    }
    let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
    for turn in 0..iters.div_ceil(PAIRED_BLOCK) {
        let mut blocks = [(0.0, 0.0); 2];
        for i in [turn % 2, 1 - turn % 2] {
            let from = sides[i].lat.len();
            sides[i].pairs(PAIRED_BLOCK).await;
            blocks[i] = p50_p99_us(sides[i].lat[from..].to_vec());
        }
        p50s.push(blocks[0].0 / blocks[1].0);
        p99s.push(blocks[0].1 / blocks[1].1);
    }
    let [on, off] = sides;
    Paired {
        on: on.close().await,
        off: off.close().await,
        p50s,
        p99s,
    }
}

/// What [`p1_paired`] measured.
pub(crate) struct Paired {
    /// `(p50 µs, p99 µs, client CPU µs per pair)` of all the on blocks (loss detection on),
    /// and of the off blocks.
    pub(crate) on: (f64, f64, f64),
    pub(crate) off: (f64, f64, f64),
    /// On ÷ off of each turn's two blocks: p50, p99.
    pub(crate) p50s: Vec<f64>,
    pub(crate) p99s: Vec<f64>,
}

/// One client's P1 lock, and what its pairs took.
struct Side {
    setup: Setup,
    kind: &'static str,
    locker: Locker,
    /// A new key for each pair, under `bench:p1d:{this}:`.
    distinct: Option<&'static str>,
    pairs: usize,
    wake: Arc<Notify>,
    lat: Vec<u64>,
    cpu: Duration,
}

impl Side {
    async fn new(
        kind: &'static str,
        imp: &str,
        target: &Target,
        distinct: Option<&'static str>,
    ) -> Side {
        let setup = Setup::new(imp, target).await;
        setup.prepare(kind, "bench:p1").await;
        let wake = Arc::new(Notify::new());
        let locker = setup.locker_of(kind, "bench:p1", 0, &wake);
        Side {
            setup,
            kind,
            locker,
            distinct,
            pairs: 0,
            wake,
            lat: Vec::new(),
            cpu: Duration::ZERO,
        }
    }

    /// `n` pairs not counted: what was measured so far is forgotten.
    async fn warm_up(&mut self, n: usize) {
        self.pairs(n).await;
        self.lat.clear();
        self.cpu = Duration::ZERO;
    }

    /// `n` timed pairs; their latencies onto `lat`, their CPU onto `cpu`.
    async fn pairs(&mut self, n: usize) {
        self.lat.reserve(n);
        let cpu0 = cpu_time();
        for _ in 0..n {
            let t = Instant::now();
            if let Some(side) = self.distinct {
                let key = format!("bench:p1d:{side}:{}", self.pairs);
                self.locker = self.setup.locker_of(self.kind, &key, 0, &self.wake);
            }
            let held = self.locker.lock().await;
            self.locker.unlock(held).await;
            self.lat.push(t.elapsed().as_nanos() as u64);
            self.pairs += 1;
        }
        self.cpu += cpu_time() - cpu0;
    }

    /// Closes the client: `(p50 µs, p99 µs, client CPU µs per pair)` of the timed pairs.
    async fn close(self) -> (f64, f64, f64) {
        let cpu = self.cpu.as_secs_f64() * 1e6 / self.lat.len() as f64;
        self.setup.close().await;
        let (p50, p99) = p50_p99_us(self.lat);
        (p50, p99, cpu)
    }
}

/// One round trip for reference: `PING` over a raw multiplexed connection, `(p50, p99)` in µs.
pub(crate) async fn round_trip(url: String, n: usize) -> (f64, f64) {
    let mut conn = multiplexed(&url).await;
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
pub(crate) async fn p2(
    imp: &str,
    target: &Target,
    owners: usize,
    warmup: Duration,
    secs: Duration,
) -> (f64, f64) {
    let setup = Setup::new(imp, target).await;
    let wake = Arc::new(Notify::new());
    p2_window(&setup, owners, warmup, &wake).await;
    let window = p2_window(&setup, owners, secs, &wake).await;
    setup.close().await;
    window.rate_and_cpu()
}

/// How long each side of [`p2_paired`] runs before the other's turn.
pub(crate) const P2_PAIRED_WINDOW: Duration = Duration::from_millis(250);

/// P2 of the crate with prompt loss detection on and off ([`UNWATCHED`]), in turns of
/// [`P2_PAIRED_WINDOW`] a side (`secs` a side in all), each turn's two windows in alternating
/// order (on the same keys: the two never run at once): as [`p1_paired`], both sides meet the
/// same moments of the machine, and each turn gives one on ÷ off ratio of pairs/s.
pub(crate) async fn p2_paired(
    target: &Target,
    owners: usize,
    warmup: Duration,
    secs: Duration,
) -> PairedP2 {
    let sides = [
        Setup::new("crate", target).await,
        Setup::new(UNWATCHED, target).await,
    ];
    let wake = Arc::new(Notify::new());
    for setup in &sides {
        p2_window(setup, owners, warmup, &wake).await;
    }
    let mut totals = [P2Window::default(), P2Window::default()];
    let mut ratios = Vec::new();
    let turns = (secs.as_millis() / P2_PAIRED_WINDOW.as_millis()).max(1) as usize;
    for turn in 0..turns {
        let mut rates = [0.0; 2];
        for i in [turn % 2, 1 - turn % 2] {
            let window = p2_window(&sides[i], owners, P2_PAIRED_WINDOW, &wake).await;
            rates[i] = window.rate_and_cpu().0;
            totals[i].add(&window);
        }
        ratios.push(rates[0] / rates[1]);
    }
    for setup in sides {
        setup.close().await;
    }
    let [on, off] = totals.map(|t| t.rate_and_cpu());
    PairedP2 { on, off, ratios }
}

/// What [`p2_paired`] measured.
pub(crate) struct PairedP2 {
    /// `(pairs/s, client CPU µs per pair)` over all the on windows, and over the off ones.
    pub(crate) on: (f64, f64),
    pub(crate) off: (f64, f64),
    /// On ÷ off pairs/s of each turn's two windows.
    pub(crate) ratios: Vec<f64>,
}

/// The pairs one P2 window made, in how long, for how much client CPU.
#[derive(Default)]
struct P2Window {
    pairs: u64,
    elapsed: Duration,
    cpu: Duration,
}

impl P2Window {
    fn add(&mut self, other: &P2Window) {
        self.pairs += other.pairs;
        self.elapsed += other.elapsed;
        self.cpu += other.cpu;
    }

    /// `(pairs/s, client CPU µs per pair)`.
    fn rate_and_cpu(&self) -> (f64, f64) {
        let pairs = self.pairs as f64;
        (
            pairs / self.elapsed.as_secs_f64(),
            self.cpu.as_secs_f64() * 1e6 / pairs,
        )
    }
}

/// `owners` tasks of `setup`'s client, each locking and unlocking a key of its own
/// (`bench:p2:<i>`) until `length` has passed.
async fn p2_window(setup: &Setup, owners: usize, length: Duration, wake: &Arc<Notify>) -> P2Window {
    let cpu0 = cpu_time();
    let start = Instant::now();
    let deadline = start + length;
    let mut tasks = Vec::new();
    for i in 0..owners {
        let mut locker = setup.locker(&format!("bench:p2:{i}"), i, wake);
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
    P2Window {
        pairs,
        elapsed: start.elapsed(),
        cpu: cpu_time() - cpu0,
    }
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

pub(crate) struct P3Rep {
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    /// Calls in `INFO commandstats`, which counts the commands scripts run too.
    pub(crate) calls_per_acq: f64,
    pub(crate) scripts_per_acq: f64,
    /// Counting runs only: commands clients sent (MONITOR, Lua's own calls left out), by name.
    pub(crate) client_per_acq: Option<HashMap<String, f64>>,
}

/// `n` waiters plus the holder: each owner loops lock, hold `hold`, unlock, then waits until
/// another owner has taken the lock before contending again (so every unlock is a hand-off to
/// a waiter that was already waiting). Ends after `warmup + handoffs` acquisitions. With
/// `count`, MONITOR counts the commands clients send (that run's latencies are not reported:
/// MONITOR slows the server).
pub(crate) async fn p3(
    imp: &str,
    target: &Target,
    n: usize,
    warmup: usize,
    handoffs: usize,
    hold: Duration,
    count: bool,
) -> P3Rep {
    p3_of("lock", imp, target, n, (warmup, handoffs), hold, count).await
}

/// [`p3`] with a lock of `kind` (`lock` or one of [`KINDS`]); `(warmup, handoffs)`.
pub(crate) async fn p3_of(
    kind: &'static str,
    imp: &str,
    target: &Target,
    n: usize,
    (warmup, handoffs): (usize, usize),
    hold: Duration,
    count: bool,
) -> P3Rep {
    let setup = Setup::new(imp, target).await;
    let (wake, listener) = match &setup {
        Setup::Floor { .. } => {
            let (wake, task) = floor_subscription(target, P3_KEY).await;
            (wake, Some(task))
        }
        Setup::Crate(_) => (Arc::new(Notify::new()), None),
    };
    let key = P3_KEY;
    setup.prepare(kind, key).await;
    // Counters and MONITOR at the key's master: where every command of the hand-off goes.
    let node = target.node_of(key);
    let mut stats_conn = multiplexed(&node).await;
    let monitor = if count {
        Some(monitor(&node).await)
    } else {
        None
    };
    let total = warmup + handoffs;
    let track = Arc::new(Handoffs::new(total + n + 4));
    let before: Arc<OnceLock<HashMap<String, u64>>> = Arc::new(OnceLock::new());
    let mut tasks = Vec::new();
    for i in 0..=n {
        let mut locker = setup.locker_of(kind, key, i, &wake);
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

pub(crate) fn record_p3(results: &mut Results, n: usize, imp: &str, r: &P3Rep) {
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
