//! The spin lock (Redisson `RSpinLock`): RLock's hash without pub/sub. Waiters poll with the
//! lock's own back-off and subscribe to nothing, unlocks publish nothing, and it excludes an
//! RLock on the same key.

mod support;

use std::time::Duration;

use redisson_lock::{BackOff, Owner};
use support::RedisServer;

const PROMPT: Duration = Duration::from_secs(5);

fn acquire_calls(server: &RedisServer) -> u64 {
    server.command_calls("evalsha") + server.command_calls("eval")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spin_waiter_polls_subscribes_to_nothing_and_no_unlock_publishes() {
    let server = RedisServer::start();
    let client = server.client().await;
    let name = "spin";
    let lock = client.spin_lock(name);
    // A fixed lease: a watchdog hold's renewals (an EVALSHA every 0.5 s here) would make up
    // the waiter's attempts counted below by themselves within PROMPT.
    let held = lock
        .clone()
        .with_owner(Owner::new())
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let reentered = lock
        .clone()
        .with_owner(Owner::new())
        .try_lock()
        .await
        .unwrap();
    assert!(reentered.is_none(), "excludes another owner");
    let before = acquire_calls(&server);
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    assert!(
        support::eventually(PROMPT, || acquire_calls(&server) >= before + 4).await,
        "the waiter polls"
    );
    assert_eq!(server.subscribers(&support::channel(name)), 0);
    let subscriptions: i64 = server.cmd(&["PUBSUB", "NUMPAT"]);
    assert_eq!(subscriptions, 0);
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(lock.is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(lock.clone().lock().await.unwrap().unlock().await.is_ok());
    assert_eq!(
        server.command_calls("publish") + server.command_calls("spublish"),
        0,
        "no spin unlock published"
    );
    // A forced unlock publishes nothing either.
    let _held = lock.lock().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert_eq!(server.command_calls("publish"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_back_off_is_the_locks_own() {
    let server = RedisServer::start();
    let client = server.client().await;
    // (Fixed leases: no renewal calls among the attempts counted.)
    let lease = Duration::from_secs(30);
    let held = [
        client.lock("fast").lock_with_lease(lease).await.unwrap(),
        client.lock("slow").lock_with_lease(lease).await.unwrap(),
    ];
    // The attempts of a one-second wait, one lock at a time.
    let window = Duration::from_millis(1000);
    let mut made = Vec::new();
    for (name, backoff) in [
        ("fast", BackOff::default()),
        ("slow", BackOff::constant(Duration::from_millis(250))),
    ] {
        let lock = client.spin_lock_with_backoff(name, backoff);
        let before = server.command_calls("evalsha");
        assert!(lock.try_lock_for(window).await.unwrap().is_none());
        made.push(server.command_calls("evalsha") - before);
    }
    let (fast, slow) = (made[0], made[1]);
    // Default: 1, 2, 4, ... 128 ms: about 13 attempts in a second. 250 ms: about 5.
    assert!(fast >= 9, "default back-off made {fast} attempts");
    assert!(
        (3..=6).contains(&slow),
        "250 ms back-off made {slow} attempts"
    );
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spin_lock_and_an_rlock_on_one_key_exclude_each_other() {
    let server = RedisServer::start();
    let client = server.client().await;
    let name = "shared-key";
    let spin = client.spin_lock(name).lock().await.unwrap();
    assert!(client.lock(name).try_lock().await.unwrap().is_none());
    spin.unlock().await.unwrap();
    let plain = client.lock(name).lock().await.unwrap();
    assert!(client.spin_lock(name).try_lock().await.unwrap().is_none());
    plain.unlock().await.unwrap();
}
