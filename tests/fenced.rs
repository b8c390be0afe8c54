//! The fenced lock (Redisson `RFencedLock`): RLock's layout plus a token counter that every
//! acquisition increments, on every path that acquires (first attempt, re-entry, a woken
//! waiter, a local hand-off, a re-sent attempt after a lost reply).

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redisson_lock::Owner;
use support::RedisServer;

const PROMPT: Duration = Duration::from_secs(5);
const LONG_LEASE: Duration = Duration::from_secs(30);

fn counter(server: &RedisServer, name: &str) -> Option<i64> {
    server.cmd(&["GET", &format!("redisson_lock_token:{{{name}}}")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acquisition_takes_the_next_token_reentries_too() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.fenced_lock("ledger");
    assert_eq!(lock.token().await.unwrap(), None, "no token issued yet");

    let (a, b) = (Owner::new(), Owner::new());
    let first = lock.clone().with_owner(a).lock().await.unwrap();
    assert_eq!(first.token(), 1);
    let again = lock.clone().with_owner(a).lock().await.unwrap();
    assert_eq!(again.token(), 2, "a re-entry is given a token of its own");
    // RLock's layout: one field, the hold count, and Redisson's counter key.
    assert_eq!(
        server.cmd::<HashMap<String, i64>>(&["HGETALL", "ledger"]),
        HashMap::from([(first.owner_field(), 2)])
    );
    assert_eq!(counter(&server, "ledger"), Some(2));
    assert_eq!(lock.token().await.unwrap(), Some(2));

    // A refused attempt spends no token.
    assert!(lock
        .clone()
        .with_owner(b)
        .try_lock()
        .await
        .unwrap()
        .is_none());
    assert_eq!(counter(&server, "ledger"), Some(2));
    // A plain RLock of the same name is the same lock.
    assert!(client.lock("ledger").try_lock().await.unwrap().is_none());

    again.unlock().await.unwrap();
    first.unlock().await.unwrap();
    let next = lock
        .clone()
        .with_owner(b)
        .try_lock()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.token(), 3);
    // Forcing the lock open leaves the counter: tokens never go back.
    assert!(lock.force_unlock().await.unwrap());
    assert_eq!(lock.token().await.unwrap(), Some(3));
    assert_eq!(lock.try_lock().await.unwrap().unwrap().token(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_in_another_client_is_woken_with_the_next_token() {
    let server = RedisServer::start();
    let (holder_client, waiter_client) = (server.client().await, server.client().await);
    let held = holder_client
        .fenced_lock("woken")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let lock = waiter_client.fenced_lock("woken");
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    server
        .until_subscribers(&support::channel("woken"), 1)
        .await;
    held.unlock().await.unwrap();
    // Well inside the 30 s lease: only the unlock message explains it.
    let woken = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert_eq!(woken.token(), 2);
    assert_eq!(counter(&server, "woken"), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_hand_off_issues_the_waiters_token() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.fenced_lock("relay");
    let held = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let waiter = {
        let lock = lock.clone();
        // (A fixed lease: no renewal's EVALSHA in the count below.)
        tokio::spawn(async move { lock.lock_with_lease(LONG_LEASE).await.unwrap() })
    };
    server
        .until_subscribers(&support::channel("relay"), 1)
        .await;
    let acquires_before = server.command_calls("evalsha");
    held.unlock().await.unwrap();
    let handed = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert_eq!(handed.token(), 2);
    assert_eq!(counter(&server, "relay"), Some(2));
    // The waiter's acquire rode in the unlock's write: unlock + acquire, no attempt of its own.
    assert_eq!(server.command_calls("evalsha") - acquires_before, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_spends_one_token_and_counts_one_hold() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    // Load the fenced acquire first, so the cut reply is the script's own.
    drop(client.fenced_lock("warm-up").lock().await.unwrap());
    let sha = support::script_sha("fenced_acquire");

    proxy.cut_after_reply(&[&sha, "lost"], 1);
    let guard = client.fenced_lock("lost").lock().await.unwrap();
    assert_eq!(proxy.cuts(), 1, "the fault fired");
    assert_eq!(
        guard.token(),
        1,
        "the re-send answered the token the first send took"
    );
    assert_eq!(counter(&server, "lost"), Some(1), "one token spent");
    assert_eq!(
        server.cmd::<Option<i64>>(&["HGET", "lost", &guard.owner_field()]),
        Some(1),
        "one hold"
    );
    guard.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "lost"]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_passes_the_token_to_the_body() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.fenced_lock("body");
    let first = lock.with_lock(|token| async move { token }).await.unwrap();
    let second = lock.with_lock(|token| async move { token }).await.unwrap();
    assert_eq!((first, second), (1, 2));
    assert!(!lock.is_locked().await.unwrap(), "released after each body");
}

#[test]
fn the_blocking_fenced_lock_reenters_per_thread_with_a_token_each() {
    let server = RedisServer::start();
    let client = redisson_lock::blocking::LockClient::with_config(server.config()).unwrap();
    let lock = client.fenced_lock("threads");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!((outer.token(), inner.token()), (1, 2));
    assert_eq!(lock.hold_count().unwrap(), 2);
    let elsewhere = {
        let lock = lock.clone();
        std::thread::spawn(move || lock.try_lock().unwrap().is_none())
            .join()
            .unwrap()
    };
    assert!(elsewhere, "another thread is another owner");
    inner.unlock().unwrap();
    outer.unlock().unwrap();
    assert_eq!(lock.token().unwrap(), Some(2));
    client.shutdown();
}
