//! The mixed-fleet checker: Rust owners (two clients, two owners each) and Java threads (two
//! per Redisson agent) take turns in critical sections guarded by the same locks, on one hot
//! lock or spread over [`FLEET_KEYS`] keys. Each section claims a holder marker (claiming one
//! already claimed is an overlap) and does a non-atomic read-modify-write of a counter; the
//! counters must add up to the number of sections. Works on one server and on a cluster: the
//! sections go through whatever connection the caller gives (keys are routed by the cluster
//! connection there).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
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

/// What a phase saw.
#[derive(Default)]
pub struct FleetStats {
    pub overlaps: AtomicU64,
    /// Sections done per side, keyed by side name.
    pub per_side: std::sync::Mutex<BTreeMap<String, u64>>,
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
}

/// The critical section, run while the caller holds the lock on `key`: claim the holder marker
/// (an overlap if someone else has it), then a non-atomic read-modify-write of the counter.
async fn critical_section<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    me: &str,
    rng: &mut StdRng,
    stats: &FleetStats,
) {
    // The key's hash tag keeps marker and counter in the lock's slot on a cluster.
    let holder = format!("cs:holder:{{{key}}}");
    let counter = format!("cs:counter:{{{key}}}");
    let claimed: Option<String> = redis::cmd("SET")
        .arg(&holder)
        .arg(me)
        .arg("NX")
        .query_async(conn)
        .await
        .unwrap();
    if claimed.is_none() {
        stats.overlaps.fetch_add(1, Ordering::Relaxed);
    }
    let value: Option<i64> = redis::cmd("GET")
        .arg(&counter)
        .query_async(conn)
        .await
        .unwrap();
    tokio::task::yield_now().await;
    if rng.random_bool(0.5) {
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..1000))).await;
    }
    let () = redis::cmd("SET")
        .arg(&counter)
        .arg(value.unwrap_or(0) + 1)
        .query_async(conn)
        .await
        .unwrap();
    if claimed.is_some() {
        let _: i64 = redis::cmd("DEL")
            .arg(&holder)
            .query_async(conn)
            .await
            .unwrap();
    }
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

/// One phase: every worker claims sections from a shared budget until it is spent.
pub async fn phase<C>(
    conn: C,
    rust_clients: &[LockClient],
    agents: &[Arc<JavaAgent>],
    keys: &[String],
    sections: i64,
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
            let (client, budget, stats, keys) =
                (client.clone(), budget.clone(), stats.clone(), keys.clone());
            let mut conn = conn.clone();
            tasks.push(tokio::spawn(async move {
                let owner = Owner::new();
                let me = format!("rust{c}.{t}");
                let mut rng = StdRng::from_os_rng();
                let mut done = 0;
                while budget.fetch_sub(1, Ordering::SeqCst) > 0 {
                    let key = &keys[rng.random_range(0..keys.len())];
                    let guard = client.lock(key).with_owner(owner).lock().await.unwrap();
                    critical_section(&mut conn, key, &me, &mut rng, &stats).await;
                    guard.unlock().await.unwrap();
                    done += 1;
                }
                stats.add("rust", done);
            }));
        }
    }
    // Four Java threads: two per Redisson version. The Java thread holds the lock while Rust
    // runs the section's Redis commands on its behalf: Redisson's lock is what excludes.
    for agent in agents {
        for t in 0..2 {
            let (agent, budget, stats, keys) =
                (agent.clone(), budget.clone(), stats.clone(), keys.clone());
            let mut conn = conn.clone();
            tasks.push(tokio::spawn(async move {
                let thread = format!("w{t}");
                let me = format!("redisson-{}.{thread}", agent.version());
                let mut rng = StdRng::from_os_rng();
                let mut done = 0;
                while budget.fetch_sub(1, Ordering::SeqCst) > 0 {
                    let key = &keys[rng.random_range(0..keys.len())];
                    agent.lock(key, &thread).await.unwrap();
                    critical_section(&mut conn, key, &me, &mut rng, &stats).await;
                    agent.unlock(key, &thread).await.unwrap();
                    done += 1;
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

/// Runs one phase (`hot`: one lock, else [`FLEET_KEYS`] keys named after `prefix`) and
/// asserts: no overlap, no lost update, every side got the lock.
pub async fn check<C>(
    conn: C,
    rust_clients: &[LockClient],
    agents: &[Arc<JavaAgent>],
    hot: bool,
    prefix: &str,
) where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let sections = fleet_sections();
    let keys = keys(prefix, hot);
    let what = if hot {
        "one hot lock".to_string()
    } else {
        format!("{FLEET_KEYS} keys")
    };
    let (elapsed, stats) = tokio::time::timeout(
        Duration::from_secs(600),
        phase(conn.clone(), rust_clients, agents, &keys, sections),
    )
    .await
    .unwrap_or_else(|_| panic!("mixed fleet ({what}) did not finish"));
    let overlaps = stats.overlaps.load(Ordering::Relaxed);
    let per_side = stats.per_side.lock().unwrap().clone();
    let sum = counter_sum(&mut conn.clone(), &keys).await;
    println!(
        "mixed fleet, {what}: {sections} critical sections in {elapsed:.2?} \
         ({:.0}/s); per side {per_side:?}; overlaps {overlaps}; counter sum {sum}",
        sections as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(
        overlaps, 0,
        "{what}: two holders inside a critical section at once"
    );
    assert_eq!(
        sum, sections,
        "{what}: lost updates, the lock did not exclude"
    );
    assert_eq!(per_side.values().sum::<u64>(), sections as u64);
    for side in ["rust", "redisson-3.23.4", "redisson-4.7.0"] {
        assert!(
            per_side.get(side).copied().unwrap_or(0) > 0,
            "{what}: {side} never got the lock: {per_side:?}"
        );
    }
}
