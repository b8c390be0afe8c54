//! Local hand-off: a release passes the lock straight to a waiter of the same client, in the
//! same write as the unlock, but only while no other client listens on the lock's channel.

mod support;

use std::time::Duration;

use redisson_lock::{LockClient, LockGuard, Owner};
use support::{eventually, load_scripts, waiters, RedisServer, Relay};
use tokio::sync::mpsc;
use tokio::time::timeout;

/// Holders here take a long fixed lease: nothing happens by expiry within a test.
const LONG_LEASE: Duration = Duration::from_secs(30);
const PROMPT: Duration = Duration::from_secs(5);

/// A lock held by one owner of `client` with two more waiting, after one release: that first
/// release with waiters parked only counted the channel's listeners (a plain unlock, whose
/// message woke one waiter, which acquired by its own attempt), and the count found this client
/// alone. Returns the holder's guard, the owner still parked, and where its guard will arrive.
async fn relay_after_one_release(
    client: &LockClient,
    server: &RedisServer,
    name: &str,
) -> (LockGuard, Owner, mpsc::UnboundedReceiver<LockGuard>) {
    let first = client.lock(name).lock_with_lease(LONG_LEASE).await.unwrap();
    let owners = [Owner::new(), Owner::new()];
    let mut acquired = waiters(client, name, &owners, LONG_LEASE);
    assert!(eventually(PROMPT, || client.waiting() == 2).await);
    let counts = server.command_calls("pubsub|numsub");
    first.unlock().await.unwrap();
    let second = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();
    let last = *owners.iter().find(|&&o| o != second.owner()).unwrap();
    assert!(eventually(PROMPT, || client.waiting() == 1).await);
    assert_eq!(
        server.command_calls("pubsub|numsub"),
        counts + 1,
        "the release counted"
    );
    (second, last, acquired)
}

/// The next release carries the parked waiter's acquire: Redis has run it by the time the
/// releasing owner reads its unlock reply, and the waiter sends nothing itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_passes_the_lock_to_a_parked_waiter_in_the_same_write() {
    let server = RedisServer::start();
    let client = server.client().await;
    load_scripts(&client).await;
    let (second, last, mut acquired) = relay_after_one_release(&client, &server, "relay").await;

    let scripts = server.command_calls("evalsha");
    second.unlock().await.unwrap();
    let field = format!("{}:{}", client.client_id(), last.id());
    let holds: Option<i64> = server.cmd(&["HGET", "relay", &field]);
    assert_eq!(
        holds,
        Some(1),
        "the waiter did not hold the lock when the unlock was answered"
    );
    let third = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();
    assert_eq!(third.owner(), last);
    assert_eq!(client.waiting(), 0);
    assert_eq!(
        server.command_calls("evalsha"),
        scripts + 2,
        "the unlock and the acquire it carried, no attempt of the waiter's own"
    );
    third.unlock().await.unwrap();
    assert_eq!(client.held_locks(), 0);
}

/// A script cache flushed just before a hand-off: the unlock is loaded and sent again, and the
/// waiter, whose carried acquire never ran, makes its own attempt; nobody sees an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_script_cache_during_a_hand_off_is_invisible() {
    let server = RedisServer::start();
    let client = server.client().await;
    let (second, last, mut acquired) = relay_after_one_release(&client, &server, "relay").await;
    server.flush_scripts();
    second.unlock().await.unwrap();
    let third = timeout(PROMPT, acquired.recv())
        .await
        .expect("the waiter never got the lock")
        .expect("the waiter failed");
    assert_eq!(third.owner(), last);
    third.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "relay"]), 0);
}

/// A waiter in another client (here another `LockClient`; a Redisson JVM counts the same, see
/// `tests/interop.rs`) is not starved by owners of one client passing the lock around: once it
/// listens on the channel, releases stop handing off and its wake-up races fairly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_another_client_gets_the_lock_from_a_busy_local_relay() {
    let server = RedisServer::start();
    let local = server.client().await;
    let remote = server.client().await;
    let relay = Relay::start(&local, "contended", 2, Duration::from_millis(2));
    // The relay is running, handing off (its client is alone on the channel).
    assert!(eventually(PROMPT, || relay.acquisitions() >= 20).await);

    let started = relay.acquisitions();
    let guard = timeout(PROMPT, remote.lock("contended").lock())
        .await
        .expect("starved by the other client's hand-offs")
        .unwrap();
    eprintln!(
        "the remote waiter got the lock after {} relayed sections",
        relay.acquisitions() - started
    );
    guard.unlock().await.unwrap();
    relay.stop().await;
}

/// A waiter that has gone (its future dropped while parked) leaves the queue at once: the next
/// release hands the lock to the waiter behind it, never to the one that left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_is_never_handed_the_lock() {
    let server = RedisServer::start();
    let client = server.client().await;
    let first = client
        .lock("gone")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    // A release with a waiter parked: it learns that this client is alone on the channel.
    let mut acquired = waiters(&client, "gone", &[Owner::new()], LONG_LEASE);
    assert!(eventually(PROMPT, || client.waiting() == 1).await);
    first.unlock().await.unwrap();
    let second = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();

    // Two more waiters, the doomed one parked first (so first in line), then cancelled.
    let doomed_owner = Owner::new();
    let doomed = {
        let lock = client.lock("gone").with_owner(doomed_owner);
        tokio::spawn(async move { lock.lock().await })
    };
    assert!(eventually(PROMPT, || client.waiting() == 1).await);
    let next_owner = Owner::new();
    let mut next = waiters(&client, "gone", &[next_owner], LONG_LEASE);
    assert!(eventually(PROMPT, || client.waiting() == 2).await);
    doomed.abort();
    assert!(doomed.await.unwrap_err().is_cancelled());
    assert_eq!(client.waiting(), 1, "the dropped waiter is still parked");

    second.unlock().await.unwrap();
    let field = |owner: Owner| format!("{}:{}", client.client_id(), owner.id());
    let holders: Vec<String> = server.cmd(&["HKEYS", "gone"]);
    assert_eq!(holders, [field(next_owner)], "handed to the wrong waiter");
    let third = timeout(PROMPT, next.recv()).await.unwrap().unwrap();
    third.unlock().await.unwrap();
    assert_eq!(client.held_locks(), 0);
    assert_eq!(server.cmd::<i64>(&["EXISTS", "gone"]), 0);
}

/// With hand-off off, waiters are served by the unlock message alone and no release counts
/// the channel's listeners.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_local_handoff_off_releases_only_unlock() {
    let server = RedisServer::start();
    let client = server.client_with(|c| c.with_local_handoff(false)).await;
    let first = client
        .lock("plain")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let mut acquired = waiters(&client, "plain", &[Owner::new(), Owner::new()], LONG_LEASE);
    assert!(eventually(PROMPT, || client.waiting() == 2).await);
    first.unlock().await.unwrap();
    for _ in 0..2 {
        let guard = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();
        guard.unlock().await.unwrap();
    }
    assert_eq!(server.command_calls("pubsub|numsub"), 0);
    assert_eq!(client.held_locks(), 0);
}
