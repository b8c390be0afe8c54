//! Interop on a Redis Cluster: real Redisson (every version in `interop/versions.txt`) in
//! cluster mode (`useClusterServers`, topology scanned every second) and this crate share locks
//! on one 6-node cluster (`support::cluster`, shared by this binary). On Redis 7 and newer both
//! sides pick sharded pub/sub by themselves: every wake-up here crosses languages over
//! `SPUBLISH`/`SSUBSCRIBE`, before and after a failover of the lock's master.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use redisson_lock::{names, LockClient};
use support::cluster::{self, key_on_master, RedisCluster};
use support::interop::{both_directions, Deployment, LONG_LEASE_MS};
use support::java::{agent_jars, JavaAgent};
use support::server_info;

support::java::scenarios!(
    wake_ups_cross_languages_on_every_master,
    wake_ups_cross_languages_after_a_failover_of_the_locks_master,
    lock_writes_wait_for_the_replica_on_both_sides,
    synchronizers_cross_languages_at_a_keys_master,
    lock_events_cross_languages_on_every_master,
);

/// Rust clients and agents of every Redisson version in cluster mode (watchdog 1.5 s), and
/// a cluster connection for the critical sections' commands.
async fn fleet() -> (
    Vec<LockClient>,
    Vec<std::sync::Arc<JavaAgent>>,
    redis::cluster_async::ClusterConnection,
) {
    let urls = cluster::get().urls();
    let mut agents = Vec::new();
    for (_, jar) in agent_jars() {
        let seeds = format!("cluster:{}", urls.join(","));
        agents.push(std::sync::Arc::new(
            JavaAgent::start(&jar, &seeds, 1500).await,
        ));
    }
    let mut rust_clients = Vec::new();
    for _ in 0..2 {
        let config = cluster::get().config();
        rust_clients.push(LockClient::with_config(config).await.unwrap());
    }
    let sections = redis::cluster::ClusterClient::new(urls).unwrap();
    let conn = sections.get_async_connection().await.unwrap();
    (rust_clients, agents, conn)
}

/// No lock named `prefix...` is left on any master.
fn no_locks_left(prefix: &str) {
    for master in cluster::get().masters() {
        let left: Vec<String> = master.cmd(&["KEYS", &format!("{prefix}:*")]).unwrap();
        assert!(left.is_empty(), "locks left held: {left:?}");
    }
}

/// The mixed-fleet checker (`support::fleet`) on the cluster: Rust owners and threads of both
/// Redisson versions, on one hot lock, then on 100 keys spread over all three masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_on_a_cluster_never_overlaps() {
    let _steady = RedisCluster::steady().await;
    let (rust_clients, agents, conn) = fleet().await;
    for hot in [true, false] {
        support::fleet::check(conn.clone(), &rust_clients, &agents, hot, "cfleet").await;
    }
    let keys = support::fleet::keys("cfleet", false);
    let masters: std::collections::HashSet<u16> = keys
        .iter()
        .map(|k| cluster::get().master_of(k).port)
        .collect();
    assert_eq!(masters.len(), 3, "the spread keys live on every master");
    no_locks_left("cfleet");
    for master in cluster::get().masters() {
        let markers: Vec<String> = master.cmd(&["KEYS", "cs:holder:{cfleet*"]).unwrap();
        assert!(markers.is_empty(), "markers left: {markers:?}");
    }
}

/// A manual failover of one master (a third of the keys) in the middle of a mixed-fleet run
/// over keys on every master: the run goes on, and no two holders that were not told of a
/// loss are ever inside a section at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_through_a_failover_never_overlaps_unaware_holders() {
    let test = "mixed_fleet_through_a_failover_never_overlaps_unaware_holders";
    if !support::server_info::runs_fault_fleets(test) {
        return;
    }
    let _exclusive = RedisCluster::exclusive().await;
    let (rust_clients, agents, conn) = fleet().await;
    let slot = names::cluster_slot(&support::fleet::keys("ffleet", false)[0]);
    let stats = support::fleet::check_through(conn, &rust_clients, &agents, "ffleet", || async {
        let started = Instant::now();
        tokio::task::spawn_blocking(move || cluster::get().fail_over(slot))
            .await
            .unwrap();
        println!(
            "failover of slot {slot}'s master took {:?}",
            started.elapsed()
        );
    })
    .await;
    // A holder may be told of a loss (Redisson's 1.5 s watchdog can miss a renewal while the
    // slot moves); what may never happen is checked by check_through.
    println!("told of a loss: {:?}", stats.told.lock().unwrap());
    no_locks_left("ffleet");
    for client in rust_clients {
        client.shutdown().await;
    }
}

/// kill -9 of one master (a third of the keys) in the middle of a mixed-fleet run: commands
/// there fail for the seconds its replica takes to be promoted, and holders there may lose
/// their locks (1.5 s watchdogs on both sides); a holder may be told so, but no two holders
/// that were not told of a loss are ever inside a section at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_through_a_killed_master_never_overlaps_unaware_holders() {
    let test = "mixed_fleet_through_a_killed_master_never_overlaps_unaware_holders";
    if !support::server_info::runs_fault_fleets(test) {
        return;
    }
    let _exclusive = RedisCluster::exclusive().await;
    let (rust_clients, agents, conn) = fleet().await;
    let slot = names::cluster_slot(&support::fleet::keys("kfleet", false)[0]);
    let stats = support::fleet::check_through(conn, &rust_clients, &agents, "kfleet", || async {
        let started = Instant::now();
        tokio::task::spawn_blocking(move || cluster::get().kill_master_of(slot))
            .await
            .unwrap();
        println!(
            "slot {slot}'s master killed, its replica promoted after {:?}",
            started.elapsed()
        );
    })
    .await;
    println!("told of a loss: {:?}", stats.told.lock().unwrap());
    for client in rust_clients {
        client.shutdown().await;
    }
    tokio::task::spawn_blocking(|| cluster::get().heal())
        .await
        .unwrap();
    // A release that failed while the master was down leaves its lock to its lease.
    assert!(
        support::eventually(Duration::from_secs(5), || {
            cluster::get().masters().iter().all(|m| {
                m.cmd::<Vec<String>>(&["KEYS", "kfleet:*"])
                    .unwrap()
                    .is_empty()
            })
        })
        .await,
        "locks left held"
    );
}

struct Setup {
    java: JavaAgent,
    rust: LockClient,
}

async fn setup(jar: &Path) -> Setup {
    let urls = cluster::get().urls().join(",");
    let java = JavaAgent::start(jar, &format!("cluster:{urls}"), 30_000).await;
    let config = cluster::get().config();
    let rust = LockClient::with_config(config)
        .await
        .expect("connect to the cluster");
    Setup { java, rust }
}

/// Subscribers of `name`'s channel: at its master with `SHARDNUMSUB` (sharded, Redis >= 7), or
/// summed over every node with `NUMSUB`.
fn listeners(name: &str) -> i64 {
    let cluster = cluster::get();
    let channel = names::lock_channel(name);
    if server_info().sharded_pubsub {
        let (_, n): (String, i64) = cluster
            .master_of(name)
            .cmd(&["PUBSUB", "SHARDNUMSUB", &channel])
            .unwrap();
        n
    } else {
        cluster
            .nodes
            .iter()
            .filter(|n| n.is_running())
            .map(|n| {
                let (_, k): (String, i64) = n.cmd(&["PUBSUB", "NUMSUB", &channel]).unwrap();
                k
            })
            .sum()
    }
}

/// The shared cluster: a lock lives at its slot's master.
struct Cluster;

impl Deployment for Cluster {
    fn at_master<T: redis::FromRedisValue>(&self, name: &str, args: &[&str]) -> T {
        cluster::get().master_of(name).cmd(args).unwrap()
    }

    async fn until_listeners(&self, name: &str, n: i64) {
        assert!(
            support::eventually(Duration::from_secs(10), || listeners(name) == n).await,
            "{n} listener(s) on {name}'s channel"
        );
    }
}

async fn wake_ups_cross_languages_on_every_master(jar: &Path) {
    let _steady = RedisCluster::steady().await;
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    for master in 0..3 {
        both_directions(
            &Cluster,
            &s.java,
            &s.rust,
            &key_on_master(&format!("xlang-{version}"), master),
        )
        .await;
    }
    s.rust.shutdown().await;
    s.java.shutdown().await;
}

async fn wake_ups_cross_languages_after_a_failover_of_the_locks_master(jar: &Path) {
    let _exclusive = RedisCluster::exclusive().await;
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    let name = key_on_master(&format!("xlang-failover-{version}"), 1);
    both_directions(&Cluster, &s.java, &s.rust, &name).await;
    let slot = names::cluster_slot(&name);
    tokio::task::block_in_place(|| cluster::get().fail_over(slot));
    // Redisson finds the new master by its topology scan (every 1 s here), and nothing tells
    // the test when it has: two scans' time, or its first script may go to the demoted node
    // (and its WAIT fail there). This crate follows the demoted master's SUNSUBSCRIBE.
    tokio::time::sleep(Duration::from_secs(2)).await;
    both_directions(&Cluster, &s.java, &s.rust, &name).await;
    s.rust.shutdown().await;
    s.java.shutdown().await;
}

/// Redisson in cluster mode follows each lock script with `WAIT` for the key's master's
/// replica (`checkLockSyncedSlaves`, on by default): so does this crate, one per acquire and
/// unlock.
async fn lock_writes_wait_for_the_replica_on_both_sides(jar: &Path) {
    // (Exclusive: other tests' writes would be counted too.)
    let _exclusive = RedisCluster::exclusive().await;
    let s = setup(jar).await;
    let name = key_on_master(&format!("cwait-{}", s.java.version().replace('.', "_")), 0);
    let master = cluster::get().master_of(&name).port;
    let waits = || cluster::get().command_calls("WAIT")[&master];
    // One round each first: scripts loaded, Redisson's replica count probed.
    s.java.lock_lease(&name, "a", LONG_LEASE_MS).await.unwrap();
    s.java.unlock(&name, "a").await.unwrap();
    support::load_scripts(&s.rust).await;
    // (A fixed lease, as Java's: a watchdog hold's renewal would add a WAIT of its own.)
    let lease = Duration::from_millis(LONG_LEASE_MS);
    let guard = s.rust.lock(&name).lock_with_lease(lease).await.unwrap();
    guard.unlock().await.unwrap();

    let before = waits();
    s.java.lock_lease(&name, "a", LONG_LEASE_MS).await.unwrap();
    s.java.unlock(&name, "a").await.unwrap();
    let java = waits() - before;
    let before = waits();
    // (A fixed lease, as Java's: a watchdog hold's renewal would add a WAIT of its own.)
    let lease = Duration::from_millis(LONG_LEASE_MS);
    let guard = s.rust.lock(&name).lock_with_lease(lease).await.unwrap();
    guard.unlock().await.unwrap();
    let rust = waits() - before;
    println!(
        "WAITs per lock and unlock on a cluster: Redisson {} {java}, this crate {rust}",
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

/// The synchronizers at a key's master (one master: every master's routing is
/// `cluster_kinds`'s to show): a Java release wakes a Rust semaphore waiter, a Rust release
/// wakes a Java one, each side releases the other's expiring permit by id, and a Java
/// count-down opens a Rust latch waiter.
async fn synchronizers_cross_languages_at_a_keys_master(jar: &Path) {
    let _steady = RedisCluster::steady().await;
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    let prompt = Duration::from_secs(5);
    {
        let master = 1;
        let name = key_on_master(&format!("xsem-{version}"), master);
        let pool = s.rust.semaphore(&name);
        pool.try_set_permits(0).await.unwrap();
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.acquire(1).await.unwrap().forget() }
        });
        let channel = names::semaphore_channel(&name);
        let sharded = server_info().sharded_pubsub;
        assert!(
            support::eventually(prompt, || cluster::get()
                .listeners(&name, &channel, sharded)
                >= 1)
            .await
        );
        let extra = serde_json::json!({ "permits": 1 });
        let released = std::time::Instant::now();
        s.java.call("semRelease", &name, "t", extra).await.unwrap();
        assert_eq!(
            tokio::time::timeout(prompt, waiter).await.unwrap().unwrap(),
            1
        );
        assert!(
            released.elapsed() < Duration::from_millis(600),
            "woken by the message"
        );
        // A Java waiter (on a channel of its own) woken by a Rust release.
        let name = key_on_master(&format!("xsem-java-{version}"), master);
        let pool = s.rust.semaphore(&name);
        pool.try_set_permits(0).await.unwrap();
        let wait = serde_json::json!({ "waitMs": 5000 });
        let java_waits = s.java.call("semTryAcquire", &name, "w", wait);
        let freed = async {
            let channel = names::semaphore_channel(&name);
            let subscribed = || cluster::get().listeners(&name, &channel, sharded) >= 1;
            assert!(support::eventually(prompt, subscribed).await, "Java waits");
            pool.release(1).await.unwrap()
        };
        let (took, _) = tokio::join!(java_waits, freed);
        assert_eq!(took.unwrap(), serde_json::json!(true));

        let name = key_on_master(&format!("xpermit-{version}"), master);
        let jobs = s.rust.permit_semaphore(&name);
        jobs.try_set_permits(2).await.unwrap();
        let ours = jobs.acquire(redisson_lock::Lease::Watchdog).await.unwrap();
        let theirs = s
            .java
            .call("permAcquire", &name, "t", serde_json::json!({}))
            .await
            .unwrap();
        assert!(jobs.try_release(theirs.as_str().unwrap()).await.unwrap());
        let released = serde_json::json!({ "permit": ours.id() });
        let released = s
            .java
            .call("permTryRelease", &name, "t", released)
            .await
            .unwrap();
        assert_eq!(released, serde_json::json!(true));
        tokio::time::timeout(prompt, ours.lost())
            .await
            .expect("told as lost");
        assert_eq!(jobs.available_permits().await.unwrap(), 2);

        let name = key_on_master(&format!("xlatch-{version}"), master);
        let gate = s.rust.count_down_latch(&name);
        assert!(gate.try_set_count(1).await.unwrap());
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.wait().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        s.java
            .call("latchCountDown", &name, "t", serde_json::json!({}))
            .await
            .unwrap();
        tokio::time::timeout(prompt, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
    s.rust.shutdown().await;
    s.java.shutdown().await;
}

/// Lock events at each master (keyspace events are node-local: both sides listen at the
/// key's master): a Java listener hears a Rust unlock, Rust's events a Java unlock.
async fn lock_events_cross_languages_on_every_master(jar: &Path) {
    let _steady = RedisCluster::steady().await;
    for node in cluster::get().nodes.iter().filter(|n| n.is_running()) {
        let _: String = node
            .cmd(&["CONFIG", "SET", "notify-keyspace-events", "Egx"])
            .unwrap();
    }
    let s = setup(jar).await;
    let version = s.java.version().replace('.', "_");
    let prompt = Duration::from_secs(5);
    for master in 0..3 {
        let name = key_on_master(&format!("xevents-{version}"), master);
        s.java
            .call("listenAdd", &name, "listener", serde_json::json!({}))
            .await
            .unwrap();
        let mut events = s.rust.lock(&name).events().await.unwrap();
        s.rust
            .lock(&name)
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        let wait = serde_json::json!({ "waitMs": 5000 });
        let heard = s
            .java
            .call("listenNext", &name, "listener", wait)
            .await
            .unwrap();
        assert_eq!(heard, serde_json::json!("deleted"), "{name}");
        let told = tokio::time::timeout(prompt, events.next()).await.unwrap();
        assert_eq!(
            told,
            Some(redisson_lock::LockEvent::Released),
            "{name}: ours"
        );
        s.java
            .call("lock", &name, "t", serde_json::json!({}))
            .await
            .unwrap();
        s.java
            .call("unlock", &name, "t", serde_json::json!({}))
            .await
            .unwrap();
        let told = tokio::time::timeout(prompt, events.next()).await.unwrap();
        assert_eq!(
            told,
            Some(redisson_lock::LockEvent::Released),
            "{name}: theirs"
        );
    }
    s.rust.shutdown().await;
    s.java.shutdown().await;
}
