//! The watchdog: renewal while held, the lock-lost signal, fixed leases, and no renewal after
//! the hold ends. The watchdog timeout is 1.5 s here (renewal every 0.5 s) to keep tests fast.

mod support;

use std::time::Duration;

use redisson_lock::{LockClient, LostReason, Owner};
use support::{eventually, RedisServer};

const LEASE: Duration = Duration::from_millis(1500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_the_lock_past_several_leases() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let guard = holder.lock("long-job").lock().await.unwrap();
    // The other client waits more than three leases and never gets in.
    let waited = other
        .lock("long-job")
        .try_lock_for(LEASE * 3 + Duration::from_millis(500))
        .await
        .unwrap();
    assert!(waited.is_none(), "the lock expired while held");
    let ttl: i64 = server.cmd(&["PTTL", "long-job"]);
    assert!(
        ttl > 0 && ttl <= 1500,
        "renewal resets the TTL to the lease: {ttl}"
    );
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_lost_fires_when_the_key_is_deleted_behind_the_holder() {
    let server = RedisServer::start();
    let client = server.client().await;
    let guard = client.lock("deleted").lock().await.unwrap();
    let token = guard.lost_token();
    let _: i64 = server.cmd(&["DEL", "deleted"]);

    tokio::time::timeout(LEASE * 2, guard.lost())
        .await
        .expect("lock-lost signal within a lease");
    assert!(token.is_cancelled());
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    assert_eq!(client.renewed_locks(), 0, "renewal stops for good");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "deleted"]),
        0,
        "renewal never recreates a lock"
    );
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_never_extends_a_lock_taken_over_by_another_owner() {
    let server = RedisServer::start();
    let client = server.client().await;
    let stale = client.lock("taken").lock().await.unwrap();
    let _: i64 = server.cmd(&["DEL", "taken"]);
    let new_owner = Owner::new();
    let current = client
        .lock("taken")
        .with_owner(new_owner)
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    tokio::time::timeout(LEASE * 2, stale.lost())
        .await
        .expect("stale holder told its lock is gone");
    let ttl: i64 = server.cmd(&["PTTL", "taken"]);
    assert!(
        ttl > 55_000,
        "the new holder's lease was cut by a stale renewal: {ttl}"
    );
    let err = stale.unlock().await.unwrap_err();
    assert!(err.is_lock_lost());
    assert_eq!(
        client.lock("taken").hold_count_of(new_owner).await.unwrap(),
        1
    );
    current.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_expires_unrenewed_and_signals_loss() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let guard = holder
        .lock("leased")
        .lock_with_lease(Duration::from_millis(400))
        .await
        .unwrap();
    assert_eq!(
        holder.renewed_locks(),
        0,
        "an explicit lease disables the watchdog"
    );
    assert_eq!(holder.held_locks(), 1);
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost when the lease runs out");
    assert_eq!(guard.lost_reason(), Some(LostReason::LeaseExpired));
    assert!(
        eventually(Duration::from_secs(3), || server
            .cmd::<i64>(&["EXISTS", "leased"])
            == 0)
        .await
    );
    let next = other.lock("leased").try_lock().await.unwrap();
    assert!(next.is_some(), "the expired lock is free for others");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_renewal_is_sent_after_the_hold_ends() {
    let server = RedisServer::start();
    let client = server.client().await;
    let guard = client.lock("ended").lock().await.unwrap();
    drop(guard);
    assert_eq!(client.renewed_locks(), 0);
    // Wait for the background unlock to land, then watch three renewal intervals.
    assert!(
        eventually(Duration::from_secs(3), || server
            .cmd::<i64>(&["EXISTS", "ended"])
            == 0)
        .await
    );
    let before = server.command_calls("evalsha");
    tokio::time::sleep(LEASE).await;
    assert_eq!(
        server.command_calls("evalsha"),
        before,
        "a script was sent (a renewal?) with nothing held"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_is_batched() {
    let server = RedisServer::start();
    let client = LockClient::with_config(server.config().with_renewal_batch_size(100))
        .await
        .unwrap();
    let mut guards = Vec::new();
    for i in 0..250 {
        guards.push(client.lock(format!("batch:{i}")).lock().await.unwrap());
    }
    let before = server.command_calls("evalsha");
    // Three intervals: three batches per cycle, so about nine calls (250 unbatched per cycle).
    tokio::time::sleep(LEASE).await;
    let calls = server.command_calls("evalsha") - before;
    assert!(
        (3..=15).contains(&calls),
        "renewal calls in three cycles: {calls}"
    );
    let ttl: i64 = server.cmd(&["PTTL", "batch:249"]);
    assert!(ttl > 0);
    assert_eq!(client.renewed_locks(), 250);
    drop(guards);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_recovers_from_a_flushed_script_cache() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let guard = holder.lock("flush-renew").lock().await.unwrap();
    server.flush_scripts();
    let got = other
        .lock("flush-renew")
        .try_lock_for(LEASE * 2)
        .await
        .unwrap();
    assert!(got.is_none(), "renewal failed after SCRIPT FLUSH");
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_lease_without_confirmed_renewal_is_a_loss() {
    let mut server = RedisServer::start();
    let client = server.client().await;
    let guard = client.lock("unreachable").lock().await.unwrap();
    server.stop();
    tokio::time::timeout(LEASE * 4, guard.lost())
        .await
        .expect("lost once a whole lease passed unconfirmed");
    assert_eq!(guard.lost_reason(), Some(LostReason::Unconfirmed));
    assert_eq!(client.renewed_locks(), 0);
}

/// An application that blocks every worker of its runtime (here `std::thread::sleep` in two
/// tasks on a 2-worker runtime, for more than two leases) does not stall renewal: the watchdog
/// runs on a thread and runtime of its own. The lock stays held in Redis all along, and the
/// guard is healthy when the workers come back.
#[test]
fn renewal_survives_an_application_runtime_whose_workers_are_all_blocked() {
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (client, guard) = runtime.block_on(async {
        let client = server.client().await;
        let guard = client.lock("starved").lock().await.unwrap();
        (client, guard)
    });

    let (started, blocked) = std::sync::mpsc::channel();
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let started = started.clone();
            runtime.spawn(async move {
                started.send(()).unwrap();
                std::thread::sleep(LEASE * 3);
            })
        })
        .collect();
    for _ in 0..2 {
        blocked.recv().unwrap(); // both workers are now asleep
    }
    // From this (non-worker) thread: the key must never expire while the workers sleep.
    let mut conn = server.conn();
    let until = std::time::Instant::now() + LEASE * 3 - Duration::from_millis(200);
    let mut samples = 0;
    while std::time::Instant::now() < until {
        let pttl: i64 = redis::cmd("PTTL").arg("starved").query(&mut conn).unwrap();
        assert!(
            pttl > 0,
            "the lock expired while the app runtime was blocked"
        );
        samples += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(samples > 10);
    runtime.block_on(async {
        for sleeper in sleepers {
            sleeper.await.unwrap();
        }
        assert!(!guard.is_lost(), "renewal was confirmed all along");
        guard.unlock().await.unwrap();
        client.shutdown().await;
    });
}
