//! Interop through Redis Sentinel: real Redisson (every version in `interop/versions.txt`) in
//! sentinel mode (`useSentinelServers`, topology scanned every second, replica
//! acknowledgement on as by default) and this crate share locks on the master of one sentinel
//! group (`support::sentinel`, shared by this binary): every wake-up crosses languages, before
//! and after a failover, and the mixed-fleet checker runs on it.

mod support;

use std::path::Path;
use std::time::Duration;

use redisson_lock::{names, LockClient};
use support::interop::{both_directions, Deployment, LONG_LEASE_MS};
use support::java::{agent_jars, JavaAgent};
use support::sentinel::{self, SentinelGroup, MASTER_NAME};

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

/// The shared sentinel group: every lock lives at the master.
struct Sentinel;

impl Deployment for Sentinel {
    fn at_master<T: redis::FromRedisValue>(&self, _name: &str, args: &[&str]) -> T {
        sentinel::get().master().cmd(args).unwrap()
    }

    async fn until_listeners(&self, name: &str, n: i64) {
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
}

async fn wake_ups_cross_languages(jar: &Path) {
    let _steady = SentinelGroup::steady().await;
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    both_directions(&Sentinel, &s.java, &s.rust, &format!("sxlang-{version}")).await;
    s.rust.shutdown().await;
    s.java.shutdown().await;
}

async fn wake_ups_cross_languages_after_a_failover(jar: &Path) {
    let _exclusive = SentinelGroup::exclusive().await;
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    let name = format!("sxlang-failover-{version}");
    both_directions(&Sentinel, &s.java, &s.rust, &name).await;
    tokio::task::block_in_place(|| sentinel::get().fail_over());
    // Redisson finds the new master by its sentinel scan (every 1 s here) or the sentinels'
    // +switch-master, and nothing tells the test when it has: two scans' time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    both_directions(&Sentinel, &s.java, &s.rust, &name).await;
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
    // (A fixed lease, as Java's: a watchdog hold's renewal would add a WAIT of its own.)
    let lease = Duration::from_millis(LONG_LEASE_MS);
    let guard = s.rust.lock(&name).lock_with_lease(lease).await.unwrap();
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

/// A mixed fleet through a Sentinel failover and then a kill -9 of the new master (brought
/// back as a replica once its replica is promoted, as an operator would), in the middle of a
/// run over 100 keys: Rust owners and threads of every Redisson version go on, a holder may be
/// told of a loss, but no two holders that were never told are inside a section at once, and
/// the counters miss no update outside the disturbed sections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_through_a_failover_and_a_killed_master_never_overlaps_unaware_holders() {
    let test = "mixed_fleet_through_a_failover_and_a_killed_master_never_overlaps_unaware_holders";
    if !support::server_info::runs_fault_fleets(test) {
        return;
    }
    let _exclusive = SentinelGroup::exclusive().await;
    let mut agents = Vec::new();
    for (_, jar) in agent_jars() {
        agents.push(std::sync::Arc::new(
            JavaAgent::start(&jar, &agent_url(), 1500).await,
        ));
    }
    let mut rust_clients = Vec::new();
    for _ in 0..2 {
        // (The agents' 1.5 s watchdog: a release that failed while the master was down
        // leaves its lock to its lease, which must not outlast an agent call's 30 s.)
        let config = sentinel::get().config();
        let config = config.with_watchdog_timeout(Duration::from_millis(1500));
        rust_clients.push(LockClient::with_config(config).await.unwrap());
    }
    // The sections' own commands follow the master too.
    let conn = sentinel::MasterConnection::new(sentinel::get().sentinel_urls());
    let stats = support::fleet::check_through(conn, &rust_clients, &agents, "xfleet", || async {
        let started = std::time::Instant::now();
        tokio::task::spawn_blocking(move || {
            let mut group = sentinel::get();
            group.fail_over();
            let (dead, _) = group.kill_master();
            println!(
                "failover, then kill -9 of the new master: {:?}",
                started.elapsed()
            );
            group.revive(dead);
        })
        .await
        .unwrap();
        println!("and it is back as a replica after {:?}", started.elapsed());
    })
    .await;
    println!("told of a loss: {:?}", stats.told.lock().unwrap());
    for client in rust_clients {
        client.shutdown().await;
    }
    // A release that failed while the master was down leaves its lock to its lease.
    assert!(
        support::eventually(Duration::from_secs(5), || {
            sentinel::get()
                .master()
                .cmd::<Vec<String>>(&["KEYS", "xfleet:*"])
                .unwrap()
                .is_empty()
        })
        .await,
        "locks left held"
    );
}
