//! The multi-lock (Redisson `RedissonMultiLock`): every lock or none, over one client or
//! several deployments, waiting for the busy part, giving back what it took when it fails or is
//! cancelled, and telling the holder when any part is lost.

mod support;

use std::time::Duration;

use redisson_lock::{MultiLock, Owner};
use support::{eventually, RedisServer};

const PROMPT: Duration = Duration::from_secs(5);
const LONG_LEASE: Duration = Duration::from_secs(30);

fn exists(server: &RedisServer, key: &str) -> bool {
    server.cmd::<i64>(&["EXISTS", key]) == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_or_none() {
    let server = RedisServer::start();
    let (client, other) = (server.client().await, server.client().await);
    let busy = other.lock("m-b").lock_with_lease(LONG_LEASE).await.unwrap();
    let all = MultiLock::new(["m-a", "m-b", "m-c"].map(|n| client.lock(n))).unwrap();

    assert!(all.try_lock().await.unwrap().is_none());
    assert!(!exists(&server, "m-a"), "the part taken was given back");
    assert!(
        !exists(&server, "m-c"),
        "the parts after the busy one were not tried"
    );
    assert!(all
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert!(!exists(&server, "m-a"));

    busy.unlock().await.unwrap();
    let owner = Owner::new();
    let guard = owner.scope(all.lock()).await.unwrap();
    for name in ["m-a", "m-b", "m-c"] {
        assert_eq!(
            server.cmd::<Option<i64>>(&[
                "HGET",
                name,
                &format!("{}:{}", client.client_id(), owner.id())
            ]),
            Some(1),
            "{name} held by the scope's owner"
        );
    }
    assert!(owner.scope(all.is_held_by_current()).await.unwrap());
    guard.unlock().await.unwrap();
    for name in ["m-a", "m-b", "m-c"] {
        assert!(!exists(&server, name), "{name} released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_holds_the_first_parts_and_is_woken_for_the_busy_one() {
    let server = RedisServer::start();
    let (client, other) = (server.client().await, server.client().await);
    let busy = other.lock("w-b").lock_with_lease(LONG_LEASE).await.unwrap();
    let all = MultiLock::new([client.lock("w-a"), client.lock("w-b")]).unwrap();
    let waiter = tokio::spawn(async move { all.lock().await.unwrap() });
    server.until_subscribers(&support::channel("w-b"), 1).await;
    assert!(
        exists(&server, "w-a"),
        "the free part is held while waiting"
    );
    busy.unlock().await.unwrap();
    // Well inside the 30 s lease: the unlock message woke it.
    let guard = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert_eq!(guard.guards().len(), 2);
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_gives_back_the_parts_it_took() {
    let server = RedisServer::start();
    let (client, other) = (server.client().await, server.client().await);
    let _busy = other.lock("c-b").lock_with_lease(LONG_LEASE).await.unwrap();
    let all = MultiLock::new([client.lock("c-a"), client.lock("c-b")]).unwrap();
    let waiter = tokio::spawn(async move { all.lock().await });
    server.until_subscribers(&support::channel("c-b"), 1).await;
    assert!(exists(&server, "c-a"));
    waiter.abort();
    assert!(
        eventually(PROMPT, || !exists(&server, "c-a")).await,
        "the cancelled call's hold of c-a was released"
    );
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_of_two_deployments_are_taken_together() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (one.client().await, two.client().await);
    let both = MultiLock::new([a.lock("x"), b.lock("x")]).unwrap();
    let guard = both.lock().await.unwrap();
    assert!(exists(&one, "x") && exists(&two, "x"));
    // Held on the second deployment only: no multi-lock of both can be had.
    guard.unlock().await.unwrap();
    let part = b.lock("x").lock().await.unwrap();
    assert!(both.try_lock().await.unwrap().is_none());
    assert!(
        !exists(&one, "x"),
        "the first deployment's part was given back"
    );
    part.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_any_part_is_told_to_the_holder() {
    let server = RedisServer::start();
    let client = server.client().await;
    let all = MultiLock::new([client.lock("l-a"), client.lock("l-b")]).unwrap();
    let guard = all.lock().await.unwrap();
    let lost = guard.lost();
    assert!(client.lock("l-b").force_unlock().await.unwrap());
    // The watchdog's next renewal (every 500 ms in tests) finds l-b gone.
    tokio::time::timeout(PROMPT, lost).await.unwrap();
    assert!(guard.is_lost());
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_owner() || err.is_lock_lost(), "{err}");
    assert!(!exists(&server, "l-a"), "the part still held was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_locks_or_one_lock_twice_is_refused() {
    let server = RedisServer::start();
    let client = server.client().await;
    let err = MultiLock::new(Vec::new()).unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    let err = MultiLock::new([client.lock("d"), client.lock("d")]).unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(!exists(&server, "d"), "nothing written");
}
