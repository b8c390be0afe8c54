//! Waiting: woken by the unlock message (not by polling or the TTL), bounded waits, the TTL
//! fallback, and pub/sub reconnects. (The cancellation storm is in `faults.rs`.)

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::{channel, eventually, load_scripts, spawn_waiter, RedisServer};
use tokio::time::Instant;

/// Holders in these tests take a long fixed lease: a waiter that gets in quickly after the
/// unlock can only have been woken by the message.
const LONG_LEASE: Duration = Duration::from_secs(30);
const PROMPT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_is_woken_by_the_unlock_message_without_polling() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter_client = server.client().await;
    let guard = holder
        .lock("hot")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let scripts_before_waiting = server.command_calls("evalsha");

    let waiter = tokio::spawn({
        let lock = waiter_client.lock("hot");
        async move {
            let g = lock.lock().await.unwrap();
            (Instant::now(), g)
        }
    });
    server.until_subscribers(&channel("hot"), 1).await;
    // A waiter tries once, subscribes, tries once more (an unlock may have come before the
    // subscription did), then parks: over a second of waiting costs nothing more.
    let parked = scripts_before_waiting + 2;
    assert!(eventually(PROMPT, || server.command_calls("evalsha") >= parked).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(server.command_calls("evalsha"), parked, "the waiter polls");

    let unlocked_at = Instant::now();
    guard.unlock().await.unwrap();
    let (acquired_at, g) = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(
        acquired_at - unlocked_at < PROMPT,
        "woken by the message, long before the 30 s lease"
    );
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_local_waiter_gets_its_turn() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiters = server.client().await;
    let guard = holder
        .lock("queue")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let lock = waiters.lock("queue");
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            let g = lock.lock_with_lease(LONG_LEASE).await.unwrap();
            let n = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(n, 0, "two holders at once");
            tokio::task::yield_now().await;
            inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            g.unlock().await.unwrap();
        }));
    }
    server.until_subscribers(&channel("queue"), 1).await;
    guard.unlock().await.unwrap();
    // Each unlock message wakes the next one; all five finish far inside one lease.
    tokio::time::timeout(PROMPT, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await
    .expect("a waiter was left waiting for a TTL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_wait_gives_up_on_time() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let _guard = holder
        .lock("busy")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let started = Instant::now();
    let got = other
        .lock("busy")
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(got.is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(other.lock("busy").try_lock().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_never_unlocks_is_outwaited_by_its_ttl() {
    let server = RedisServer::start();
    let client = server.client().await;
    // A crashed holder (another process): no unlock message will ever come.
    let _: i64 = server.cmd(&[
        "HSET",
        "crashed",
        "0a0a0a0a-0000-4000-8000-000000000000:1",
        "1",
    ]);
    let _: i64 = server.cmd(&["PEXPIRE", "crashed", "600"]);
    let got = client
        .lock("crashed")
        .try_lock_for(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        got.is_some(),
        "the waiter must retry when the holder's TTL runs out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_pubsub_disconnect_and_are_still_woken_by_message() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter_client = server.client().await;
    let guard = holder
        .lock("resub")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let waiter = spawn_waiter(&waiter_client, "resub");
    server.until_subscribers(&channel("resub"), 1).await;
    let _: redis::Value = server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(eventually(PROMPT, || server.subscribers(&channel("resub")) == 0).await);
    // The hub reconnects and resubscribes by itself.
    server.until_subscribers(&channel("resub"), 1).await;
    guard.unlock().await.unwrap();
    let g = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("woken after the resubscription")
        .unwrap();
    g.unlock().await.unwrap();
}

/// Owners of one client on one lock: a waiter that finds the lock held by another owner of its
/// own client sends no attempt once subscribed (that holder has not sent its unlock yet, so
/// the unlock message is sure to come), and is woken by that message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sends_no_attempt_its_own_clients_holder_would_refuse() {
    let server = RedisServer::start();
    let client = server.client().await;
    load_scripts(&client).await;
    let holder = client
        .lock("local")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let before = server.command_calls("evalsha");
    let waiter = spawn_waiter(&client, "local");
    server.until_subscribers(&channel("local"), 1).await;
    // One attempt before subscribing (refused), and none after.
    assert!(eventually(PROMPT, || server.command_calls("evalsha") > before).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        server.command_calls("evalsha"),
        before + 1,
        "the waiter sent an attempt its own client's holder would refuse"
    );

    let unlocked_at = Instant::now();
    holder.unlock().await.unwrap();
    let guard = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(unlocked_at.elapsed() < PROMPT, "woken by the message");
    assert_eq!(
        server.command_calls("evalsha"),
        before + 3,
        "the holder's unlock and the waiter's one attempt after the message"
    );
    guard.unlock().await.unwrap();
}

/// A waiter arriving while another waiter of the same client keeps the channel subscribed (or
/// kept it a moment ago) joins that subscription: no SUBSCRIBE, and with the lock held by an
/// owner of its own client, nothing sent at all until the unlock message. The subscription is
/// dropped shortly after its last waiter leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_waiter_joins_the_subscription_already_there() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("relay");
    // Every hold on a fixed lease: a watchdog hold's renewal (every 0.5 s here) would be an
    // EVALSHA in the count below.
    let first = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let second = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock_with_lease(LONG_LEASE).await.unwrap() }
    });
    server.until_subscribers(&channel("relay"), 1).await;
    let subscribes = server.command_calls("subscribe");
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(PROMPT, second).await.unwrap().unwrap();

    // The second owner holds; its subscription has no waiter left but is still live.
    let before = server.command_calls("evalsha");
    let mut third = Box::pin({
        let lock = lock.clone();
        async move { lock.lock_with_lease(LONG_LEASE).await.unwrap() }
    });
    assert!(
        futures::poll!(third.as_mut()).is_pending(),
        "held by the second owner"
    );
    let third = tokio::spawn(third);
    second.unlock().await.unwrap();
    let third = tokio::time::timeout(PROMPT, third).await.unwrap().unwrap();
    assert_eq!(
        server.command_calls("evalsha"),
        before + 2,
        "the second owner's unlock and the third's one attempt, nothing else"
    );
    assert_eq!(
        server.command_calls("subscribe"),
        subscribes,
        "the third waiter subscribed again"
    );
    third.unlock().await.unwrap();
    assert!(
        eventually(PROMPT, || server.subscribers(&channel("relay")) == 0).await,
        "the idle subscription was never dropped"
    );
}

/// A waiter parked behind a holder of its own client is woken when the watchdog finds that
/// holder's lock gone (here deleted behind its back, so no unlock message ever comes), long
/// before its fallback timer (one watchdog timeout: 30 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_lost_local_holder_is_woken_by_the_watchdog() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| {
            c.with_watchdog_timeout(LONG_LEASE)
                .with_renewal_interval(Duration::from_millis(200))
        })
        .await;
    let holder = client.lock("vanish").lock().await.unwrap();
    let before = server.command_calls("evalsha");
    let waiter = spawn_waiter(&client, "vanish");
    server.until_subscribers(&channel("vanish"), 1).await;
    assert!(eventually(PROMPT, || server.command_calls("evalsha") > before).await);

    let deleted: i64 = server.cmd(&["DEL", "vanish"]);
    assert_eq!(deleted, 1);
    let guard = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("the waiter slept out its timer instead of being woken")
        .unwrap();
    assert_eq!(holder.lost_reason(), Some(redisson_lock::LostReason::Gone));
    guard.unlock().await.unwrap();
}

/// A lock's channel is given up about a second after its last waiter left (kept that long so
/// that a hot lock costs no SUBSCRIBE per hand-off), not kept for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_nobody_waits_on_is_given_up_after_its_linger() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let held = holder.lock("lingered").lock().await.unwrap();
    let lock = waiter.lock("lingered");
    let waiting = tokio::spawn(async move { lock.lock().await.unwrap() });
    let channel = channel("lingered");
    server.until_subscribers(&channel, 1).await;
    held.unlock().await.unwrap();
    let guard = waiting.await.unwrap();
    guard.unlock().await.unwrap();
    let left = Instant::now();
    let gone = eventually(PROMPT, || server.subscribers(&channel) == 0).await;
    assert!(gone, "unsubscribed once nobody waits");
    eprintln!(
        "channel given up {:?} after its waiter left",
        left.elapsed()
    );
    holder.shutdown().await;
    waiter.shutdown().await;
}
