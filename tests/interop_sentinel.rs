//! Interop through Redis Sentinel: real Redisson (every version in `interop/versions.txt`) in
//! sentinel mode (`useSentinelServers`, topology scanned every second, replica
//! acknowledgement on as by default) and this crate share locks on the master of one sentinel
//! group (`support::sentinel`, shared by this binary): every wake-up crosses languages, before
//! and after a failover, and the mixed-fleet checker runs on it.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use redisson_lock::{names, LockClient};
use support::java::{agent_jars, JavaAgent};
use support::sentinel::{self, SentinelGroup, MASTER_NAME};

/// Java's lease in these scenarios: far longer than any wake-up may take.
const LONG_LEASE_MS: u64 = 30_000;
const PROMPT: Duration = Duration::from_secs(5);

support::java::scenarios!(
    wake_ups_cross_languages,
    wake_ups_cross_languages_after_a_failover,
    lock_writes_wait_for_the_replica_on_both_sides,
);

/// The agent's address argument for the group.
fn agent_url() -> String {
    let urls = sentinel::get().sentinel_urls().join(",");
    format!("sentinel:{MASTER_NAME}@{urls}")
}

struct Setup {
    java: JavaAgent,
    rust: LockClient,
}

async fn setup(jar: &Path) -> Setup {
    let java = JavaAgent::start(jar, &agent_url(), 30_000).await;
    let config = sentinel::get().config();
    let rust = LockClient::with_config(config)
        .await
        .expect("connect through the sentinels");
    Setup { java, rust }
}

fn hgetall(key: &str) -> BTreeMap<String, String> {
    sentinel::get().master().cmd(&["HGETALL", key]).unwrap()
}

async fn until_listeners(name: &str, n: i64) {
    let channel = names::lock_channel(name);
    let listening = support::eventually(Duration::from_secs(10), || {
        let (_, k): (String, i64) = sentinel::get()
            .master()
            .cmd(&["PUBSUB", "NUMSUB", &channel])
            .unwrap();
        k == n
    })
    .await;
    assert!(
        listening,
        "{n} listener(s) on {name}'s channel at the master"
    );
}

/// Java unlock wakes a Rust waiter, then Rust unlock wakes a Java waiter, on `name`. Both
/// holds have 30 s leases: only the message can wake the waiter within [`PROMPT`].
async fn both_directions(s: &Setup, name: &str) {
    let java_field = s.java.field("a").await;

    s.java.lock_lease(name, "a", LONG_LEASE_MS).await.unwrap();
    let lock = s.rust.lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| (Instant::now(), g)) });
    until_listeners(name, 1).await;
    assert!(
        !waiter.is_finished(),
        "the Rust waiter got in while Java holds"
    );
    let unlocked = Instant::now();
    s.java.unlock(name, "a").await.unwrap();
    let (acquired, guard) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("Redisson's unlock message woke the Rust waiter")
        .unwrap()
        .unwrap();
    assert!(acquired >= unlocked);
    assert_eq!(
        hgetall(name),
        BTreeMap::from([(guard.owner_field(), "1".to_string())])
    );

    let mut java_waiter = s.java.lock_async_report(name, "a", None).await;
    until_listeners(name, 1).await;
    assert!(
        java_waiter
            .within(Duration::from_millis(300))
            .await
            .is_none(),
        "Redisson acquired while Rust holds"
    );
    guard.unlock().await.unwrap();
    assert!(
        java_waiter.within(PROMPT).await.is_some(),
        "the Rust unlock message woke the Java waiter"
    );
    assert_eq!(
        hgetall(name),
        BTreeMap::from([(java_field, "1".to_string())])
    );
    s.java.unlock(name, "a").await.unwrap();
    let exists: i64 = sentinel::get().master().cmd(&["EXISTS", name]).unwrap();
    assert_eq!(exists, 0);
}

async fn wake_ups_cross_languages(jar: &Path) {
    let _steady = SentinelGroup::steady().await;
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    both_directions(&s, &format!("sxlang-{version}")).await;
    s.rust.shutdown().await;
    s.java.shutdown().await;
}

async fn wake_ups_cross_languages_after_a_failover(jar: &Path) {
    let _exclusive = SentinelGroup::exclusive().await;
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    let name = format!("sxlang-failover-{version}");
    both_directions(&s, &name).await;
    tokio::task::block_in_place(|| sentinel::get().fail_over());
    // Redisson finds the new master by its sentinel scan (every 1 s here) or the sentinels'
    // +switch-master, and nothing tells the test when it has: two scans' time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    both_directions(&s, &name).await;
    s.rust.shutdown().await;
    s.java.shutdown().await;
}

/// `WAIT` commands the master has run.
fn wait_calls() -> u64 {
    let stats = sentinel::get()
        .master()
        .info_field("commandstats", "cmdstat_wait")
        .unwrap_or_default();
    stats
        .strip_prefix("calls=")
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Redisson in sentinel mode follows each lock script with `WAIT` for the master's replica
/// (`checkLockSyncedSlaves`, on by default): so does this crate, one per acquire and unlock.
async fn lock_writes_wait_for_the_replica_on_both_sides(jar: &Path) {
    // (Exclusive: other tests' writes would be counted too.)
    let _exclusive = SentinelGroup::exclusive().await;
    let s = setup(jar).await;
    let name = format!("swait-{}", s.java.version().replace('.', "_"));
    support::load_scripts(&s.rust).await;
    s.java.lock_lease(&name, "a", LONG_LEASE_MS).await.unwrap();
    s.java.unlock(&name, "a").await.unwrap();
    let before = wait_calls();
    s.java.lock_lease(&name, "a", LONG_LEASE_MS).await.unwrap();
    s.java.unlock(&name, "a").await.unwrap();
    let java = wait_calls() - before;
    let before = wait_calls();
    let guard = s.rust.lock(&name).lock().await.unwrap();
    guard.unlock().await.unwrap();
    let rust = wait_calls() - before;
    println!(
        "WAITs per lock and unlock: Redisson {} {java}, this crate {rust}",
        s.java.version()
    );
    assert_eq!(
        rust, 2,
        "one WAIT behind the acquire, one behind the unlock"
    );
    assert_eq!(java, rust, "as many as Redisson sends");
    s.rust.shutdown().await;
    s.java.shutdown().await;
}

/// The mixed-fleet checker (`support::fleet`) through the sentinels: Rust owners and threads
/// of every Redisson version, on one hot lock and on keys spread wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_through_sentinel_never_overlaps() {
    let _steady = SentinelGroup::steady().await;
    let mut agents = Vec::new();
    for (_, jar) in agent_jars() {
        agents.push(std::sync::Arc::new(
            JavaAgent::start(&jar, &agent_url(), 1500).await,
        ));
    }
    let mut rust_clients = Vec::new();
    for _ in 0..2 {
        let config = sentinel::get().config();
        rust_clients.push(LockClient::with_config(config).await.unwrap());
    }
    // The sections' own commands go straight to the master (it stays put: steady).
    let master = sentinel::get().master().url();
    let conn = redis::Client::open(master)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for hot in [true, false] {
        support::fleet::check(conn.clone(), &rust_clients, &agents, hot, "sfleet").await;
    }
    let left: Vec<String> = sentinel::get().master().cmd(&["KEYS", "sfleet:*"]).unwrap();
    assert!(left.is_empty(), "locks left held: {left:?}");
    for client in rust_clients {
        client.shutdown().await;
    }
}
