//! Locks on a real Redis Cluster: 6 nodes (3 masters, 3 replicas) shared by every test of this
//! binary (`support::cluster`), distinct keys per test. Tests that change the topology take
//! `RedisCluster::exclusive()` and leave the cluster healthy; the others take
//! `RedisCluster::steady()`, so that none runs through a failover it did not ask for.

mod support;

#[path = "cluster/failover.rs"]
mod failover;
#[path = "cluster/loss.rs"]
mod loss;
#[path = "cluster/replicas.rs"]
mod replicas;

use std::time::{Duration, Instant};

use redisson_lock::{names, Config, Error, LockClient, PublishMode};
use support::cluster::{self, key_on_master, slot_of, RedisCluster};
use support::{server_info, skip};

async fn client_with(adjust: impl FnOnce(Config) -> Config) -> LockClient {
    let config = cluster::get().config();
    LockClient::with_config(adjust(config))
        .await
        .expect("connect to the cluster")
}

async fn client() -> LockClient {
    client_with(|c| c).await
}

fn listeners(key: &str, channel: &str, sharded: bool) -> i64 {
    cluster::get().listeners(key, channel, sharded)
}

/// The lock's TTL at its slot's master now.
fn pttl_at_master(name: &str) -> i64 {
    let cluster = cluster::get();
    cluster.master_of(name).cmd(&["PTTL", name]).unwrap_or(-2)
}

/// One owner holds `name` with a 30 s watchdog lease; a task of a second client waits; the
/// release must wake it by message, far inside the lease.
async fn handover_by_message(name: &str, sharded: bool, adjust: fn(Config) -> Config) {
    let holder = client_with(|c| adjust(c.with_watchdog_timeout(Duration::from_secs(30)))).await;
    let waiter = client_with(adjust).await;
    let what = format!(
        "the waiter subscribes to {} (sharded: {sharded})",
        names::lock_channel(name)
    );
    let count = |channel: &str| listeners(name, channel, sharded);
    support::handover_by_message(holder, waiter, name, count, &what).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_every_master_are_held_and_waited_in_sharded_mode() {
    let _steady = RedisCluster::steady().await;
    if !server_info().sharded_pubsub {
        skip(
            "locks_on_every_master_are_held_and_waited_in_sharded_mode",
            "no sharded pub/sub before Redis 7",
        );
        return;
    }
    for master in 0..3 {
        let name = key_on_master("sharded", master);
        handover_by_message(&name, true, |c| c).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_every_master_are_held_and_waited_in_classic_mode() {
    let _steady = RedisCluster::steady().await;
    for master in 0..3 {
        let name = key_on_master("classic", master);
        handover_by_message(&name, false, |c| c.with_publish_mode(PublishMode::Publish)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lives_on_its_slots_master_with_redissons_layout() {
    let _steady = RedisCluster::steady().await;
    let client = client().await;
    let name = key_on_master("layout", 1);
    let guard = client.lock(&name).lock().await.unwrap();
    {
        let cluster = cluster::get();
        let master = cluster.master_of(&name);
        let count: i64 = master.cmd(&["HGET", &name, &guard.owner_field()]).unwrap();
        assert_eq!(count, 1);
        let ttl: i64 = master.cmd(&["PTTL", &name]).unwrap();
        assert!(ttl > 0 && ttl <= 1500, "the watchdog lease: {ttl}");
    }
    assert!(client.lock(&name).is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(!client.lock(&name).is_locked().await.unwrap());
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_whose_keys_span_slots_are_refused_before_anything_is_sent() {
    let _steady = RedisCluster::steady().await;
    let client = client().await;
    for name in ["bad{", "a{}b", "x{y"] {
        let lock = client.lock(name);
        let err = lock.try_lock().await.expect_err(name);
        match &err {
            Error::CrossSlot {
                key_slot,
                derived_slot,
                ..
            } => {
                assert_eq!(*key_slot, names::cluster_slot(name));
                assert_ne!(key_slot, derived_slot);
            }
            other => panic!("{name}: expected CrossSlot, got {other:?}"),
        }
        assert!(err.is_invalid_input());
        assert!(lock.force_unlock().await.unwrap_err().is_invalid_input());
        let cluster = cluster::get();
        let exists: i64 = cluster.master_of(name).cmd(&["EXISTS", name]).unwrap();
        assert_eq!(exists, 0, "{name}: nothing written");
    }
    // A name with a real hash tag is fine.
    let guard = client.lock("good{tag}").lock().await.unwrap();
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

/// `INFO stats` `total_reads_processed` per running node port: read events the node handled.
fn reads_processed() -> std::collections::HashMap<u16, u64> {
    cluster::get().info_numbers("stats", "total_reads_processed:")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_each_masters_locks_in_few_calls_each_cycle() {
    use futures::StreamExt;
    // (Exclusive: other tests' scripts would be counted as renewals.)
    let _exclusive = RedisCluster::exclusive().await;
    let client = client_with(|c| c.with_watchdog_timeout(Duration::from_millis(1500))).await;
    let count = 10_000;
    let acquiring = Instant::now();
    let guards: Vec<_> = futures::stream::iter(0..count)
        .map(|i| {
            let lock = client.lock(format!("renew-{i}"));
            async move { lock.lock().await.unwrap() }
        })
        .buffer_unordered(256)
        .collect()
        .await;
    eprintln!("{count} locks acquired in {:?}", acquiring.elapsed());
    assert_eq!(client.renewed_locks(), count);
    let slots: std::collections::HashSet<u16> = (0..count)
        .map(|i| names::cluster_slot(&format!("renew-{i}")))
        .collect();
    let before = cluster::get().command_calls("evalsha");
    let reads_before = reads_processed();
    // Several cycles (500 ms apart), five leases' worth of the 1.5 s lease without which the
    // locks would have expired: every lock still held, each by its guard.
    let window = Duration::from_millis(2500);
    tokio::time::sleep(window).await;
    let after = cluster::get().command_calls("evalsha");
    let reads_after = reads_processed();
    let lost: Vec<&str> = guards
        .iter()
        .filter(|g| g.is_lost())
        .map(|g| g.name())
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {count} lost: {:?}...",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    {
        // Every key at its master, in one pipeline per master: all still there, each with a
        // TTL only renewal can have kept above zero.
        let cluster = cluster::get();
        let mut by_master: std::collections::HashMap<u16, Vec<String>> = Default::default();
        for i in 0..count {
            let name = format!("renew-{i}");
            by_master
                .entry(cluster.master_of(&name).port)
                .or_default()
                .push(name);
        }
        for (port, names) in by_master {
            let mut pipe = redis::pipe();
            for name in &names {
                pipe.cmd("PTTL").arg(name);
            }
            let ttls: Vec<i64> = pipe.query(&mut cluster.node(port).conn().unwrap()).unwrap();
            for (name, ttl) in names.iter().zip(ttls) {
                assert!(ttl > 0, "{name} renewed on its master, ttl {ttl}");
            }
        }
    }
    // One renewal call per 100 of a master's locks per cycle, whatever their slots (a script
    // may touch any key its node serves), each master's calls in one pipelined write.
    let delta = |a: &std::collections::HashMap<u16, u64>,
                 b: &std::collections::HashMap<u16, u64>| {
        b.iter()
            .map(|(port, n)| (*port, n - a.get(port).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect::<std::collections::BTreeMap<u16, u64>>()
    };
    let calls = delta(&before, &after);
    let total: u64 = calls.values().sum();
    let reads: std::collections::BTreeMap<u16, u64> = delta(&reads_before, &reads_after)
        .into_iter()
        .filter(|(port, _)| calls.contains_key(port))
        .collect();
    // (500 ms cycles in the 2.5 s window: 4 to 6 of them.)
    let most_cycles = window.as_millis() as u64 / 500 + 1;
    eprintln!(
        "renewal of {count} locks over {} slots: {total} calls in {window:?} (at most \
         {most_cycles} cycles); calls per master {calls:?}; read events per master {reads:?}",
        slots.len(),
    );
    for (port, n) in &calls {
        // About 3,334 locks per master: 34 calls a cycle (it was one per slot: ~2,600).
        assert!(
            *n >= 34 && *n <= 100 * most_cycles,
            "master {port}: {n} renewal calls in at most {most_cycles} cycles"
        );
    }
    assert_eq!(calls.len(), 3, "renewal reaches every master");
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    client.shutdown().await;
}

/// Renewal across slots meets a slot half migrated: its keys still at the source are renewed
/// there, those already moved answer "not served here" and are renewed at the target (by
/// their own slot, through `ASK`) in the same cycle. Through two leases of it, no lock of the
/// slot or of the other slots on its master is lost, each is still renewed where it lives, and
/// after the migration ends every lock is renewed at its new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_across_slots_keeps_every_lock_through_a_slot_migration() {
    let _exclusive = RedisCluster::exclusive().await;
    let lease = Duration::from_millis(1500);
    let client = client().await;
    // 20 locks in the migrating slot, 100 in other slots of the same master.
    let slot = slot_of("{migrating}");
    let mut names: Vec<String> = (0..20).map(|i| format!("{{migrating}}:{i}")).collect();
    let from = cluster::get().master_of_slot(slot).port;
    names.extend(
        (0..)
            .map(|i| format!("beside-{i}"))
            .filter(|k| slot_of(k) != slot && cluster::get().master_of(k).port == from)
            .take(100),
    );
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).lock().await.unwrap());
    }
    let to = tokio::task::block_in_place(|| {
        let cluster = cluster::get();
        let to = (cluster.masters().iter())
            .find(|m| m.port != from)
            .unwrap()
            .port;
        cluster.start_migration(slot, to);
        assert_eq!(cluster.move_keys(slot, to, 10), 10);
        to
    });
    // The subject is renewal while the slot stays half moved: two leases of it.
    tokio::time::sleep(lease * 2).await;
    let lost: Vec<_> = (guards.iter().filter(|g| g.is_lost()))
        .map(|g| (g.name(), g.lost_reason()))
        .collect();
    assert!(lost.is_empty(), "lost mid-migration: {lost:?}");
    {
        let cluster = cluster::get();
        let (source, target) = (cluster.node(from), cluster.node(to));
        for name in &names {
            // (Where the key is not, the node answers ASK or MOVED.)
            let at_source: i64 = source.cmd(&["PTTL", name]).unwrap_or(-2);
            // (The target serves a key of a slot it imports only after ASKING.)
            let (_, at_target): ((), i64) = redis::pipe()
                .cmd("ASKING")
                .cmd("PTTL")
                .arg(name)
                .query(&mut target.conn().unwrap())
                .unwrap_or(((), -2));
            // (A key lives at one of them; a lease of 1.5 s without renewal would be gone.)
            let ttl = at_source.max(at_target);
            assert!(
                ttl > 0,
                "{name} still renewed where it lives mid-migration ({ttl})"
            );
        }
    }
    tokio::task::block_in_place(|| {
        let cluster = cluster::get();
        cluster.move_keys(slot, to, usize::MAX);
        cluster.finish_migration(slot, to);
    });
    tokio::time::sleep(lease).await;
    let lost: Vec<&str> = (guards.iter().filter(|g| g.is_lost()))
        .map(|g| g.name())
        .collect();
    assert!(lost.is_empty(), "lost after the migration: {lost:?}");
    let first: Vec<i64> = names.iter().map(|n| pttl_at_master(n)).collect();
    assert!(
        first.iter().all(|t| *t > 0),
        "every lock at its master: {first:?}"
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    tokio::task::block_in_place(|| cluster::get().migrate_slot(slot, from));
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_and_inspect_see_locks_on_every_master_with_their_node_and_waiters() {
    let _steady = RedisCluster::steady().await;
    let holder = client_with(|c| c.with_service_name("cluster-holder")).await;
    let waiter = client().await;
    let looker = client().await;
    let names: Vec<String> = (0..3).map(|m| key_on_master("inspect-scan", m)).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(holder.lock(name).lock().await.unwrap());
    }
    let waiting = support::spawn_waiter(&waiter, &names[1]);
    let channel = names::lock_channel(&names[1]);
    let sharded = server_info().sharded_pubsub;
    assert!(
        support::eventually(Duration::from_secs(5), || listeners(
            &names[1], &channel, sharded
        ) == 1)
        .await
    );

    // Fresh clients too, whose direct links are not open yet: each SCAN still goes to the
    // master it is meant for (redis-rs would send a keyless command to any node).
    let mut wanted = names.clone();
    wanted.sort();
    let mut seen = Vec::new();
    for fresh in [client().await, client().await, client().await] {
        let mut scan = fresh.scan("inspect-scan*");
        seen.clear();
        while let Some(info) = scan.next().await {
            seen.push(info.unwrap());
        }
        seen.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            seen.iter().map(|i| i.name.clone()).collect::<Vec<_>>(),
            wanted,
            "each lock once, from every master"
        );
        fresh.shutdown().await;
    }
    for info in &seen {
        let master = cluster::get().master_of(&info.name).port;
        assert_eq!(info.node, Some(format!("127.0.0.1:{master}")));
        assert_eq!(info.slot, Some(names::cluster_slot(&info.name)));
        let client = info.holders[0].client.as_ref().expect("named holder");
        assert_eq!(client.service, "cluster-holder");
    }
    let info = looker.inspect(&names[1]).await.unwrap();
    assert_eq!(info.waiters, Some(1));

    for guard in guards {
        guard.unlock().await.unwrap();
    }
    waiting.await.unwrap().unlock().await.unwrap();
    for client in [holder, waiter, looker] {
        client.shutdown().await;
    }
}

/// The grouped write answers `NOSCRIPT` (a flushed or restarted master: nothing ran) with
/// `EVAL` at that master: with every master's script cache flushed, the renewals of locks on
/// every master go on (each master runs the renewal as `EVAL`), and so do their unlocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_script_cache_at_every_master_is_met_by_eval_there() {
    let _steady = RedisCluster::steady().await;
    let lease = Duration::from_millis(1500);
    let holder = client_with(|c| {
        c.with_watchdog_timeout(lease)
            .with_service_name("flushed-holder")
    })
    .await;
    let names: Vec<String> = (0..3).map(|m| key_on_master("flushed", m)).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(holder.lock(name).lock().await.unwrap());
    }
    let masters: Vec<u16> = names
        .iter()
        .map(|n| cluster::get().master_of(n).port)
        .collect();
    // Only the holder's EVALs count: the flush turns other tests' scripts there into EVALs too.
    let monitors: Vec<_> = (masters.iter())
        .map(|&port| support::monitor::Monitor::start(port))
        .collect();
    for &port in &masters {
        let _: String = cluster::get().node(port).cmd(&["SCRIPT", "FLUSH"]).unwrap();
    }
    let renewed_by_eval = support::eventually(lease * 2, || {
        (monitors.iter()).all(|m| m.count("eval", "flushed-holder") > 0)
    })
    .await;
    assert!(renewed_by_eval, "each master ran the renewal as EVAL");
    // Two more leases: a lock whose renewal stopped at the flush would be gone by now.
    tokio::time::sleep(lease * 2).await;
    for (name, guard) in names.iter().zip(&guards) {
        assert!(!guard.is_lost(), "{name} still held by its guard");
        assert!(pttl_at_master(name) > 0, "{name} renewed at its master");
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    for name in &names {
        assert_eq!(pttl_at_master(name), -2, "{name} released");
    }
    holder.shutdown().await;
}
