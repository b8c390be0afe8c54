//! Faults on the cluster: a manual failover, a slot migration under renewals and waiters, a
//! killed master, and an acquire's reply lost at a master. Each takes the cluster for itself.

use std::time::{Duration, Instant};

use redisson_lock::inspect::ReplicaSyncState;
use redisson_lock::{names, Config, LockClient};

use super::support::cluster::{self, key_on_master, RedisCluster};
use super::support::{self, server_info};
use super::{client, client_with, listeners, pttl_at_master};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_keeps_holders_and_wakes_waiters() {
    let _exclusive = RedisCluster::exclusive().await;
    let sharded = server_info().sharded_pubsub;
    let name = key_on_master("failover", 2);
    // A lease longer than the switch, so that renewal can go on at the new master.
    let (holder, waiter, held, waiting) =
        held_and_waited(&name, sharded, Duration::from_secs(10)).await;
    let channel = names::lock_channel(&name);
    // The replica of the lock's master takes over.
    let slot = names::cluster_slot(&name);
    let evals_before = cluster::get().command_calls("eval");
    // A client that only looks: its view goes stale with the failover.
    let looker = client().await;
    // And one that writes while its view is stale.
    let writer = client().await;
    tokio::task::block_in_place(|| cluster::get().fail_over(slot));
    // A write at once, while the writer's view is stale, meets the demoted master, whose WAIT
    // is refused (a replica has none): a failover, not a server without WAIT (checked below,
    // once the looker has looked).
    assert!(
        writer.lock(&name).try_lock().await.unwrap().is_none(),
        "held"
    );
    // It still sees the lock, once: a read answered MOVED goes again where the slot is now.
    let mut scan = looker.scan("failover*");
    let mut seen = Vec::new();
    while let Some(info) = scan.next().await {
        seen.push(info.expect("a scan through a failover").name);
    }
    assert_eq!(seen, std::slice::from_ref(&name));
    assert!(looker.inspect(&name).await.unwrap().holders.len() == 1);
    looker.shutdown().await;
    assert_eq!(writer.replica_sync(), ReplicaSyncState::On);
    writer.shutdown().await;
    // The waiter is subscribed at the new master again (at once: the demoted master's
    // SUNSUBSCRIBE says so; the 5 s topology scan is only the backstop).
    let resubscribed = support::eventually(Duration::from_secs(2), || {
        listeners(&name, &channel, sharded) == 1
    })
    .await;
    assert!(
        resubscribed,
        "the waiter's subscription follows the failover"
    );
    // The holder kept its lock (the write was replicated before the switch), and renewal goes
    // on at the new master: its TTL there goes up again.
    let pttl = || -> i64 {
        let cluster = cluster::get();
        cluster.master_of(&name).cmd(&["PTTL", &name]).unwrap()
    };
    let first = pttl();
    assert!(first > 0, "the lock survived the failover");
    assert!(
        support::eventually(Duration::from_secs(5), || pttl() > first).await,
        "renewed at the new master"
    );
    assert!(
        !held.is_lost(),
        "the holder keeps its lock through a manual failover"
    );
    // The promoted replica never saw the scripts (replicas get their effects): its first
    // EVALSHA answered NOSCRIPT, and the same call went again as EVAL.
    let (evals, master) = {
        let cluster = cluster::get();
        let master = cluster.master_of(&name).port;
        (cluster.command_calls("eval")[&master], master)
    };
    assert!(
        evals > evals_before[&master],
        "NOSCRIPT at the promoted replica answered with EVAL"
    );
    let (guard, released, _) = support::release_to(held, waiting, "the waiter is served").await;
    assert!(released.elapsed() < Duration::from_secs(5));
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
}

/// Holds `name` (watchdog lease `lease`, renewed every third of it) and parks a waiter of
/// another client on it; returns once the waiter is subscribed.
async fn held_and_waited(
    name: &str,
    sharded: bool,
    lease: Duration,
) -> (
    LockClient,
    LockClient,
    redisson_lock::LockGuard,
    support::Waiting,
) {
    let holder = client_with(|c| c.with_watchdog_timeout(lease)).await;
    let waiter = client().await;
    let count = |channel: &str| listeners(name, channel, sharded);
    let (held, waiting) =
        support::held_and_waited(&holder, &waiter, name, count, "the waiter subscribes").await;
    (holder, waiter, held, waiting)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migration_moves_renewal_and_the_waiters_subscription() {
    let _exclusive = RedisCluster::exclusive().await;
    let sharded = server_info().sharded_pubsub;
    let name = key_on_master("migrated", 1);
    let slot = names::cluster_slot(&name);
    let (holder, waiter, held, waiting) =
        held_and_waited(&name, sharded, Duration::from_secs(3)).await;
    let (from, to) = tokio::task::block_in_place(|| {
        let cluster = cluster::get();
        let from = cluster.master_of_slot(slot).port;
        let to = cluster
            .masters()
            .iter()
            .find(|m| m.port != from)
            .unwrap()
            .port;
        cluster.migrate_slot(slot, to);
        (from, to)
    });
    assert_eq!(cluster::get().master_of(&name).port, to);
    // The waiter is subscribed where the slot lives now (the old owner pushed SUNSUBSCRIBE).
    let channel = names::lock_channel(&name);
    assert!(
        support::eventually(Duration::from_secs(2), || listeners(
            &name, &channel, sharded
        ) == 1)
        .await,
        "the waiter's subscription follows the slot from {from} to {to}"
    );
    // Renewal follows the slot (MOVED): the TTL at the new owner goes up again.
    let first = pttl_at_master(&name);
    assert!(first > 0, "the lock moved with its slot");
    assert!(
        support::eventually(Duration::from_secs(3), || pttl_at_master(&name) > first).await,
        "renewed at the new owner"
    );
    assert!(!held.is_lost());
    let (guard, released, acquired) =
        support::release_to(held, waiting, "the waiter is served").await;
    assert!(
        acquired - released < Duration::from_secs(1),
        "woken by the unlock message at the new owner"
    );
    guard.unlock().await.unwrap();
    tokio::task::block_in_place(|| cluster::get().migrate_slot(slot, from));
    holder.shutdown().await;
    waiter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_leaves_no_stuck_waiter_and_no_unaware_double_holder() {
    if !support::server_info::runs_failovers(
        "cluster::a_killed_master_leaves_no_stuck_waiter_and_no_unaware_double_holder",
    ) {
        return;
    }
    let _exclusive = RedisCluster::exclusive().await;
    let sharded = server_info().sharded_pubsub;
    let name = key_on_master("killed", 0);
    let slot = names::cluster_slot(&name);
    // A lease longer than the promotion (about 3-5 s here), so that the holder can keep it.
    let (holder, waiter, held, waiting) =
        held_and_waited(&name, sharded, Duration::from_secs(10)).await;
    // A scan made before the kill: it plans to visit the master about to die.
    let looker = client().await;
    let mut scan = looker.scan("killed*");
    let killed_at = Instant::now();
    tokio::task::block_in_place(|| cluster::get().kill_master_of(slot));
    let promoted = killed_at.elapsed();
    let channel = names::lock_channel(&name);
    assert!(
        support::eventually(Duration::from_secs(10), || listeners(
            &name, &channel, sharded
        ) == 1)
        .await,
        "the waiter is subscribed again after the promotion"
    );
    let resubscribed = killed_at.elapsed();
    // Either the promoted replica had the lock (the holder keeps it, renews there, and its
    // unlock wakes the waiter), or it lost it with the master or ran out before a renewal
    // reached the new master (a slow promotion: the holder is told, and the waiter gets it).
    // Never both holding unaware.
    let outcome = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if held.is_lost() {
                return "lost";
            }
            if pttl_at_master(&name) > 0 && !held.is_lost() {
                return "kept";
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the holder keeps the lock or is told it lost it");
    let mut unlocked = Instant::now();
    let outcome = match outcome {
        "kept" => renewed_or_told(&name, &held, killed_at).await,
        lost => lost,
    };
    // The scan finds the dead master's locks at the replica that took its place.
    let mut seen = Vec::new();
    while let Some(info) = scan.next().await {
        seen.push(info.expect("a scan through a killed master").name);
    }
    looker.shutdown().await;
    let served = if outcome == "kept" {
        assert_eq!(
            seen,
            std::slice::from_ref(&name),
            "the scan sees the kept lock"
        );
        // Renewed at the new master, then released: the waiter is woken.
        assert!(!held.is_lost());
        assert!(
            !waiting.is_finished(),
            "the waiter must not hold it beside the holder"
        );
        unlocked = Instant::now();
        held.unlock().await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), waiting).await
    } else {
        drop(held);
        tokio::time::timeout(Duration::from_secs(10), waiting).await
    };
    let (guard, acquired) = served.expect("no stuck waiter").unwrap().unwrap();
    eprintln!(
        "killed master: replica promoted after {promoted:?}, waiter subscribed again after {resubscribed:?}; holder {outcome}; waiter served {:?} after the unlock ({:?} after the kill)",
        acquired.saturating_duration_since(unlocked),
        acquired - killed_at
    );
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
    tokio::task::block_in_place(|| cluster::get().heal());
}

/// After a failover that kept `name` at the promoted replica: "kept" once the holder renews it
/// there before its time runs out, "lost" if the holder is told instead (a renewal that could
/// not reach the new master in time). Never neither: the lock lapsing untold fails.
async fn renewed_or_told(
    name: &str,
    held: &redisson_lock::LockGuard,
    killed_at: Instant,
) -> &'static str {
    let first = pttl_at_master(name);
    let mut trace = vec![(killed_at.elapsed(), first)];
    // Its time left, and a second for the lease clock's report, which counts from the send.
    let deadline =
        Instant::now() + Duration::from_millis(first.max(0) as u64) + Duration::from_secs(1);
    while Instant::now() < deadline {
        if held.is_lost() {
            return "lost";
        }
        let pttl = pttl_at_master(name);
        if trace
            .last()
            .is_some_and(|(at, _)| killed_at.elapsed() - *at > Duration::from_millis(500))
        {
            trace.push((killed_at.elapsed(), pttl));
        }
        if pttl > first {
            return "kept";
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("neither renewed at the promoted replica nor told lost; PTTL after the kill: {trace:?}");
}

/// The fault proxy in front of a cluster master: the reply to an acquire is lost (the
/// connection cut right after the master answered), on `lock()` and on `try_lock()`. redis-rs's
/// cluster connection sends the command again; the latch makes that re-send answer without a
/// second hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_acquire_reply_at_a_cluster_master_counts_one_hold() {
    // A cluster of its own, whose third master tells clients to reach it through the proxy
    // (the shared cluster keeps its own ports: announcing another one at run time disturbs the
    // cluster bus, and Redis 6.2 does not take it).
    // Three masters, no replicas (see `RedisCluster::start_on`).
    let ports = cluster::free_ports(3);
    let proxy = support::proxy::Proxy::start(ports[2]).await;
    let own =
        tokio::task::block_in_place(|| RedisCluster::start_on(&ports, Some((2, proxy.port()))));
    let name = key_on_master("lost-reply", 2);
    let real = ports[2];
    assert_eq!(own.master_of(&name).port, real);
    let config = Config::cluster(own.urls())
        .unwrap()
        .with_watchdog_timeout(Duration::from_secs(30));
    let client = LockClient::with_config(config).await.unwrap();
    // Through the proxy, and with the scripts known at the master.
    let guard = client.lock(&name).lock().await.unwrap();
    guard.unlock().await.unwrap();
    assert!(
        proxy.accepted() > 0,
        "the client reaches the master through the proxy"
    );
    let sha = support::script_sha("acquire");
    let holds =
        |field: &str| -> Option<i64> { own.node(real).cmd(&["HGET", &name, field]).unwrap() };
    for round in 0..2 {
        proxy.cut_after_reply(&[&sha, &name], 1);
        let lock = client.lock(&name);
        let guard = if round == 0 {
            lock.lock().await.unwrap()
        } else {
            lock.try_lock()
                .await
                .unwrap()
                .expect("the re-sent acquire finds it acquired")
        };
        assert_eq!(proxy.cuts(), round + 1, "the fault fired");
        assert_eq!(holds(&guard.owner_field()), Some(1), "one guard, one hold");
        assert!(!guard.is_lost());
        guard.unlock().await.unwrap();
        let exists: i64 = own.node(real).cmd(&["EXISTS", &name]).unwrap();
        assert_eq!(exists, 0, "freed by one unlock");
    }
    client.shutdown().await;
    tokio::task::block_in_place(|| drop(own));
}
