//! The mixed-fleet checker: Rust owners (two clients, two owners each) and Java threads (two
//! per Redisson agent) take turns in critical sections guarded by the same locks, on one hot
//! lock or spread over [`FLEET_KEYS`] keys. Each section claims a holder marker (claiming one
//! already claimed is an overlap) and does a non-atomic read-modify-write of a counter; the
//! counters must add up to the number of sections. Works on one server and on a cluster: the
//! sections go through whatever connection the caller gives (keys are routed by the cluster
//! connection there). [`check`] asserts a clean run; [`check_through`] one with a fault in the
//! middle, where only holders that were never told of a loss must not overlap.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::ConnectionLike;
use redisson_lock::{LockClient, Owner};

use super::java::JavaAgent;

/// Keys of the spread phase.
pub const FLEET_KEYS: usize = 100;

/// Critical sections per phase (2000; `MIXED_FLEET_SECTIONS` overrides).
pub fn fleet_sections() -> i64 {
    std::env::var("MIXED_FLEET_SECTIONS")
        .ok()
        .map(|v| v.parse().expect("MIXED_FLEET_SECTIONS must be a number"))
        .unwrap_or(2000)
}

/// What a phase saw. Sections are named `worker#n`.
#[derive(Default)]
pub struct FleetStats {
    /// Sections that found another section's holder marker: (this section, the marker's).
    pub overlaps: Mutex<Vec<(String, String)>>,
    /// Sections whose holder was told its lock was gone (a lost guard, a refused unlock).
    pub told: Mutex<HashSet<String>>,
    /// Sections a command of which failed (a failover): their counter write may or may not
    /// have landed, and their marker may be left behind.
    pub disturbed: Mutex<HashSet<String>>,
    /// Lock calls that failed and were made again.
    pub lock_errors: AtomicU64,
    /// Redisson holds still there after an unlock that succeeded (Redisson re-sends a lock
    /// script whose reply it lost, and its scripts are not idempotent: one `lock()` can count
    /// two holds, and its watchdog renews the second for good). Seen through failovers only;
    /// released again by the thread, so that the run goes on.
    pub redisson_leaks: AtomicU64,
    /// Sections done per side, keyed by side name.
    pub per_side: Mutex<BTreeMap<String, u64>>,
}

impl FleetStats {
    fn add(&self, side: &str, n: u64) {
        *self
            .per_side
            .lock()
            .unwrap()
            .entry(side.into())
            .or_default() += n;
    }

    fn mark(set: &Mutex<HashSet<String>>, section: &str) {
        set.lock().unwrap().insert(section.to_string());
    }

    /// Overlaps in which neither section's holder was told of a loss: a double holder that
    /// did not know.
    pub fn unaware_overlaps(&self) -> Vec<(String, String)> {
        let told = self.told.lock().unwrap();
        self.overlaps
            .lock()
            .unwrap()
            .iter()
            .filter(|(a, b)| !told.contains(a) && !told.contains(b))
            .cloned()
            .collect()
    }
}

/// The critical section, run while the caller holds the lock on `key`: claim the holder marker
/// (an overlap if another section has it), then a non-atomic read-modify-write of the counter.
/// A marker left by a disturbed section is taken over, not counted.
async fn critical_section<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    section: &str,
    rng: &mut StdRng,
    stats: &FleetStats,
) -> redis::RedisResult<()> {
    // The key's hash tag keeps marker and counter in the lock's slot on a cluster.
    let holder = format!("cs:holder:{{{key}}}");
    let counter = format!("cs:counter:{{{key}}}");
    let claimed: Option<String> = redis::cmd("SET")
        .arg(&holder)
        .arg(section)
        .arg("NX")
        .query_async(conn)
        .await?;
    let mut mine = claimed.is_some();
    if !mine {
        let other: Option<String> = redis::cmd("GET").arg(&holder).query_async(conn).await?;
        let other = other.unwrap_or_else(|| "(released meanwhile)".into());
        if stats.disturbed.lock().unwrap().contains(&other) {
            redis::cmd("SET")
                .arg(&holder)
                .arg(section)
                .exec_async(conn)
                .await?;
            mine = true;
        } else {
            stats
                .overlaps
                .lock()
                .unwrap()
                .push((section.to_string(), other));
        }
    }
    let value: Option<i64> = redis::cmd("GET").arg(&counter).query_async(conn).await?;
    tokio::task::yield_now().await;
    if rng.random_bool(0.5) {
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..1000))).await;
    }
    redis::cmd("SET")
        .arg(&counter)
        .arg(value.unwrap_or(0) + 1)
        .exec_async(conn)
        .await?;
    if mine {
        redis::cmd("DEL").arg(&holder).exec_async(conn).await?;
    }
    Ok(())
}

/// The lock names of a phase.
pub fn keys(prefix: &str, hot: bool) -> Vec<String> {
    if hot {
        vec![format!("{prefix}:hot")]
    } else {
        (0..FLEET_KEYS)
            .map(|i| format!("{prefix}:key:{i}"))
            .collect()
    }
}

/// Sections done so far in the running phase, for a caller that acts in the middle of it.
pub type Progress = Arc<AtomicU64>;

/// One phase: every worker claims sections from a shared budget until it is spent. Failed
/// commands are counted, never fatal (a failover may be under way): a failed lock call is made
/// again, a failed section is marked disturbed, a lost guard or a refused unlock is marked told.
pub async fn phase<C>(
    conn: C,
    rust_clients: &[LockClient],
    agents: &[Arc<JavaAgent>],
    keys: &[String],
    sections: i64,
    progress: Progress,
) -> (Duration, FleetStats)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let keys = Arc::new(keys.to_vec());
    let budget = Arc::new(AtomicI64::new(sections));
    let stats = Arc::new(FleetStats::default());
    let started = Instant::now();
    let mut tasks = Vec::new();
    // Four Rust owners: two per client, each its own Owner.
    for (c, client) in rust_clients.iter().enumerate() {
        for t in 0..2 {
            let (client, budget, stats, keys, progress) = (
                client.clone(),
                budget.clone(),
                stats.clone(),
                keys.clone(),
                progress.clone(),
            );
            let mut conn = conn.clone();
            tasks.push(tokio::spawn(async move {
                let owner = Owner::new();
                let me = format!("rust{c}.{t}");
                let mut rng = StdRng::from_os_rng();
                let mut done = 0;
                while budget.fetch_sub(1, Ordering::SeqCst) > 0 {
                    let section = format!("{me}#{done}");
                    let key = &keys[rng.random_range(0..keys.len())];
                    let guard = loop {
                        match client.lock(key).with_owner(owner).lock().await {
                            Ok(guard) => break guard,
                            Err(err) => {
                                eprintln!("{section}: lock {key} failed: {err}");
                                stats.lock_errors.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    };
                    if let Err(err) =
                        critical_section(&mut conn, key, &section, &mut rng, &stats).await
                    {
                        eprintln!("{section}: section on {key} disturbed: {err}");
                        FleetStats::mark(&stats.disturbed, &section);
                    }
                    let lost = guard.is_lost();
                    let unlocked = guard.unlock().await;
                    if lost || unlocked.is_err() {
                        eprintln!("{section}: told the lock on {key} was lost ({unlocked:?})");
                        FleetStats::mark(&stats.told, &section);
                    }
                    done += 1;
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                stats.add("rust", done);
            }));
        }
    }
    // Four Java threads: two per Redisson version. The Java thread holds the lock while Rust
    // runs the section's Redis commands on its behalf: Redisson's lock is what excludes.
    for agent in agents {
        for t in 0..2 {
            let (agent, budget, stats, keys, progress) = (
                agent.clone(),
                budget.clone(),
                stats.clone(),
                keys.clone(),
                progress.clone(),
            );
            let mut conn = conn.clone();
            tasks.push(tokio::spawn(async move {
                let thread = format!("w{t}");
                let me = format!("redisson-{}.{thread}", agent.version());
                eprintln!("{me} holds as {}", agent.field(&thread).await);
                let mut rng = StdRng::from_os_rng();
                let mut done = 0;
                while budget.fetch_sub(1, Ordering::SeqCst) > 0 {
                    let section = format!("{me}#{done}");
                    let key = &keys[rng.random_range(0..keys.len())];
                    while let Err(err) = agent.lock(key, &thread).await {
                        eprintln!("{section}: lock {key} failed: {err}");
                        stats.lock_errors.fetch_add(1, Ordering::Relaxed);
                        // The script may have run before the error (a lost reply): then the
                        // thread holds the lock, and locking again would hold it twice.
                        if agent.is_held_by_thread(key, &thread).await == Ok(true) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Err(err) =
                        critical_section(&mut conn, key, &section, &mut rng, &stats).await
                    {
                        eprintln!("{section}: section on {key} disturbed: {err}");
                        FleetStats::mark(&stats.disturbed, &section);
                    }
                    // Redisson tells a holder its lock is gone by refusing the unlock; any
                    // other failure is tried again while the thread still holds.
                    loop {
                        match agent.unlock(key, &thread).await {
                            Ok(()) if agent.is_held_by_thread(key, &thread).await == Ok(true) => {
                                eprintln!("{section}: Redisson still holds {key} after its unlock");
                                stats.redisson_leaks.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(()) => break,
                            Err(err) if err.is_illegal_monitor_state() => {
                                eprintln!("{section}: told the lock on {key} was lost");
                                FleetStats::mark(&stats.told, &section);
                                break;
                            }
                            Err(err) => {
                                eprintln!("{section}: unlock {key} failed: {err}");
                                // A failed unlock after which the thread no longer holds the
                                // lock told it the lock was gone (as for a Rust holder's
                                // failed unlock): its section may have outlived its lease.
                                if agent.is_held_by_thread(key, &thread).await == Ok(false) {
                                    eprintln!("{section}: told the lock on {key} was lost");
                                    FleetStats::mark(&stats.told, &section);
                                    break;
                                }
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    }
                    done += 1;
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                stats.add(&format!("redisson-{}", agent.version()), done);
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stats = Arc::try_unwrap(stats).ok().expect("all workers finished");
    (started.elapsed(), stats)
}

/// How long a phase may make no progress before it fails as stalled: well beyond any lease
/// of the fleet (a missed message is made good by the holder's TTL at the latest).
const STALL: Duration = Duration::from_secs(45);

/// Each held lock of `keys`: its fields and PTTL.
async fn lock_states<C: ConnectionLike>(
    conn: &mut C,
    keys: &[String],
) -> Vec<(String, Vec<String>, i64)> {
    let mut held = Vec::new();
    for key in keys {
        let fields: Vec<String> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(conn)
            .await
            .unwrap_or_default();
        if !fields.is_empty() {
            let pttl: i64 = redis::cmd("PTTL")
                .arg(key)
                .query_async(conn)
                .await
                .unwrap_or(-3);
            held.push((key.clone(), fields, pttl));
        }
    }
    held
}

/// The counters of `keys`, summed.
pub async fn counter_sum<C: ConnectionLike>(conn: &mut C, keys: &[String]) -> i64 {
    let mut sum = 0;
    for key in keys {
        let value: Option<i64> = redis::cmd("GET")
            .arg(format!("cs:counter:{{{key}}}"))
            .query_async(conn)
            .await
            .unwrap();
        sum += value.unwrap_or(0);
    }
    sum
}

/// Runs one phase over `keys`; with a `fault`, starts it once a third of the sections are
/// done and lets the phase run on through it. Prints what the phase saw.
async fn run<C, F, Fut>(
    conn: &C,
    rust_clients: &[LockClient],
    agents: &[Arc<JavaAgent>],
    keys: &[String],
    what: &str,
    fault: Option<F>,
) -> (FleetStats, i64)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let sections = fleet_sections();
    let progress = Progress::default();
    let running = phase(
        conn.clone(),
        rust_clients,
        agents,
        keys,
        sections,
        progress.clone(),
    );
    let faulted = async {
        if let Some(fault) = fault {
            let third = sections as u64 / 3;
            while progress.load(Ordering::Relaxed) < third {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let at = progress.load(Ordering::Relaxed);
            fault().await;
            println!(
                "mixed fleet, {what}: fault after {at} sections, over after {}",
                progress.load(Ordering::Relaxed)
            );
        }
    };
    // A phase that stops moving fails at once, saying who holds what.
    let stalled = async {
        let mut last = u64::MAX;
        loop {
            tokio::time::sleep(STALL).await;
            let now = progress.load(Ordering::Relaxed);
            if now == last {
                let held = lock_states(&mut conn.clone(), keys).await;
                let clients: Vec<String> = (rust_clients.iter().enumerate())
                    .map(|(i, c)| format!("rust{i} {}", c.client_id()))
                    .chain(
                        agents
                            .iter()
                            .map(|a| format!("{} {}", a.version(), a.client_id())),
                    )
                    .collect();
                for agent in agents {
                    // Where each agent thread is blocked, for the report.
                    let stacks = std::process::Command::new("jstack")
                        .arg(agent.pid().to_string())
                        .output()
                        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                        .unwrap_or_default();
                    let agent_threads: Vec<&str> = stacks
                        .split("\n\n")
                        .filter(|t| t.starts_with("\"agent-"))
                        .collect();
                    eprintln!(
                        "Redisson {} threads:\n{}",
                        agent.version(),
                        agent_threads.join("\n\n")
                    );
                }
                panic!(
                    "mixed fleet ({what}) stalled after {now} sections; locks: {held:?}; \
                     clients: {clients:?}"
                );
            }
            last = now;
        }
    };
    let ((elapsed, stats), ()) = tokio::select! {
        done = async { tokio::join!(running, faulted) } => done,
        () = stalled => unreachable!(),
    };
    let per_side = stats.per_side.lock().unwrap().clone();
    let sum = counter_sum(&mut conn.clone(), keys).await;
    // (Each figure read alone: the guards of one statement live to its end.)
    let overlaps = stats.overlaps.lock().unwrap().len();
    let unaware = stats.unaware_overlaps().len();
    let told = stats.told.lock().unwrap().len();
    let disturbed = stats.disturbed.lock().unwrap().len();
    println!(
        "mixed fleet, {what}: {sections} critical sections in {elapsed:.2?} ({:.0}/s); \
         per side {per_side:?}; overlaps {}, of holders not told {}; told {}; disturbed {}; \
         failed lock calls {}; Redisson holds left after an unlock {}; counter sum {sum}",
        sections as f64 / elapsed.as_secs_f64(),
        overlaps,
        unaware,
        told,
        disturbed,
        stats.lock_errors.load(Ordering::Relaxed),
        stats.redisson_leaks.load(Ordering::Relaxed),
    );
    assert_eq!(per_side.values().sum::<u64>(), sections as u64);
    for side in ["rust", "redisson-3.23.4", "redisson-4.7.0"] {
        assert!(
            per_side.get(side).copied().unwrap_or(0) > 0,
            "{what}: {side} never got the lock: {per_side:?}"
        );
    }
    (stats, sum)
}

fn phase_keys(prefix: &str, hot: bool) -> (Vec<String>, String) {
    let what = if hot {
        "one hot lock".to_string()
    } else {
        format!("{FLEET_KEYS} keys")
    };
    (keys(prefix, hot), what)
}

/// Runs one phase (`hot`: one lock, else [`FLEET_KEYS`] keys named after `prefix`) and
/// asserts: no failed command, no overlap, no lost update, every side got the lock.
pub async fn check<C>(
    conn: C,
    rust_clients: &[LockClient],
    agents: &[Arc<JavaAgent>],
    hot: bool,
    prefix: &str,
) where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let (keys, what) = phase_keys(prefix, hot);
    let none: Option<fn() -> std::future::Ready<()>> = None;
    let (stats, sum) = run(&conn, rust_clients, agents, &keys, &what, none).await;
    assert_eq!(
        stats.lock_errors.load(Ordering::Relaxed),
        0,
        "{what}: failed lock calls"
    );
    assert_eq!(
        stats.redisson_leaks.load(Ordering::Relaxed),
        0,
        "{what}: Redisson holds left after an unlock"
    );
    assert!(
        stats.disturbed.lock().unwrap().is_empty(),
        "{what}: failed commands"
    );
    assert!(stats.told.lock().unwrap().is_empty(), "{what}: locks lost");
    assert_eq!(
        *stats.overlaps.lock().unwrap(),
        Vec::<(String, String)>::new(),
        "{what}: two holders inside a critical section at once"
    );
    assert_eq!(
        sum,
        fleet_sections(),
        "{what}: lost updates, the lock did not exclude"
    );
}

/// Runs one phase over the spread keys with `fault` in the middle of it, and asserts that no
/// two holders that were never told of a loss overlapped, and that no update was lost
/// outside the sections a failed command disturbed. Returns what the phase saw.
pub async fn check_through<C, F, Fut>(
    conn: C,
    rust_clients: &[LockClient],
    agents: &[Arc<JavaAgent>],
    prefix: &str,
    fault: F,
) -> FleetStats
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (keys, what) = phase_keys(prefix, false);
    let what = format!("{what} through a fault");
    let (stats, sum) = run(&conn, rust_clients, agents, &keys, &what, Some(fault)).await;
    assert_eq!(
        stats.unaware_overlaps(),
        Vec::<(String, String)>::new(),
        "{what}: two holders, neither told of a loss, inside a critical section at once"
    );
    // A failover's demoted master refuses WAIT; that is no server without WAIT: every Rust
    // client still waits for replicas (given up, the next kill loses acknowledged writes).
    for client in rust_clients {
        assert_ne!(
            client.replica_sync(),
            redisson_lock::inspect::ReplicaSyncState::Unavailable,
            "{what}: replica sync given up through the fault"
        );
    }
    // Each excused overlap (a told holder's section) can undo one update, and so can each
    // disturbed section; nothing else may.
    let sections = fleet_sections();
    let disturbed = stats.disturbed.lock().unwrap().len() as i64;
    let excused = stats.overlaps.lock().unwrap().len() as i64;
    let floor = sections - disturbed - excused;
    assert!(
        sum <= sections && sum >= floor,
        "{what}: counter sum {sum} outside [{floor}, {sections}]: updates lost beyond the \
         disturbed sections and the told holders' overlaps"
    );
    stats
}
