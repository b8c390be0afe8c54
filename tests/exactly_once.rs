//! Exactly-once acquire: an acquire whose reply is lost (the fault proxy cuts the connection
//! right after Redis answered) never counts a hold twice and never leaves a hold without a
//! guard, on every path that sends an acquire.

mod support;

use std::time::Duration;

use redisson_lock::Owner;
use support::{eventually, RedisServer};
use tokio::time::timeout;

const LONG_LEASE: Duration = Duration::from_secs(30);
const PROMPT: Duration = Duration::from_secs(5);

fn holds_of(server: &RedisServer, key: &str, field: &str) -> Option<i64> {
    server.cmd(&["HGET", key, field])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_to_the_first_attempt_gives_one_guard_over_one_hold() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    support::load_scripts(&client).await;
    let sha = support::script_sha("acquire");

    for (round, name) in ["lost-lock", "lost-try"].into_iter().enumerate() {
        proxy.cut_after_reply(&[&sha, name], 1);
        let lock = client.lock(name);
        let guard = if round == 0 {
            lock.lock().await.unwrap()
        } else {
            lock.try_lock()
                .await
                .unwrap()
                .expect("the re-sent acquire finds it acquired")
        };
        assert_eq!(proxy.cuts(), round + 1, "the fault fired");
        assert_eq!(
            holds_of(&server, name, &guard.owner_field()),
            Some(1),
            "one guard, one hold"
        );
        assert!(!guard.is_lost());
        guard.unlock().await.unwrap();
        assert_eq!(
            server.cmd::<i64>(&["EXISTS", name]),
            0,
            "freed by one unlock"
        );
    }
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_waiter_whose_reply_is_lost_holds_once() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let (proxy, waiter_client) = support::proxied_client(&server).await;
    support::load_scripts(&waiter_client).await;

    let guard = holder
        .lock("woken")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let lock = waiter_client.lock("woken");
    let waiter = tokio::spawn(async move { lock.lock().await });
    server
        .until_subscribers(&support::channel("woken"), 1)
        .await;
    assert!(eventually(PROMPT, || waiter_client.waiting() == 1).await);
    // The waiter's next acquire is the one the unlock message wakes it for.
    proxy.cut_after_reply(&[&support::script_sha("acquire"), "woken"], 1);
    guard.unlock().await.unwrap();

    let next = timeout(PROMPT, waiter).await.unwrap().unwrap().unwrap();
    assert_eq!(proxy.cuts(), 1, "the fault fired");
    assert_eq!(holds_of(&server, "woken", &next.owner_field()), Some(1));
    next.unlock().await.unwrap();
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "woken"]),
        0,
        "freed by one unlock"
    );
}

/// The acquire a local hand-off pipelines behind the unlock, its reply lost: the waiter
/// re-sends it and holds once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_whose_acquire_reply_is_lost_holds_once() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    support::load_scripts(&client).await;

    // One release with waiters parked counts the listeners; the next one hands off.
    let first = client
        .lock("relay")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let owners = [Owner::new(), Owner::new()];
    let (tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
    for owner in owners {
        let (lock, tx) = (client.lock("relay").with_owner(owner), tx.clone());
        tokio::spawn(async move {
            let _ = tx.send(lock.lock_with_lease(LONG_LEASE).await.unwrap());
        });
    }
    assert!(eventually(PROMPT, || client.waiting() == 2).await);
    first.unlock().await.unwrap();
    let second = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();
    assert!(eventually(PROMPT, || client.waiting() == 1).await);

    proxy.cut_after_reply(&[&support::script_sha("acquire"), "relay"], 1);
    let _ = second.unlock().await; // its own answer may be lost with the write
    let third = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();
    assert_eq!(proxy.cuts(), 1, "the fault fired");
    assert_eq!(holds_of(&server, "relay", &third.owner_field()), Some(1));
    third.unlock().await.unwrap();
    assert!(
        eventually(PROMPT, || server.cmd::<i64>(&["EXISTS", "relay"]) == 0).await,
        "freed by one unlock"
    );
}

/// Every send of a single attempt loses its answer: the call returns the connection error, and
/// the hold its first send took is released in the background (found through its latch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_return_leaves_nothing_held() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    support::load_scripts(&client).await;

    proxy.cut_after_reply(&[&support::script_sha("acquire"), "unlucky"], 10);
    // A long lease: only a release, not the lease, frees the lock within the test.
    let err = client
        .lock("unlucky")
        .try_lock_for_with_lease(Duration::ZERO, LONG_LEASE)
        .await
        .unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    assert!(
        proxy.cuts() >= 2,
        "the first send and its re-sends all lost"
    );
    let armed = proxy.armed();
    assert!(
        eventually(PROMPT, || server.cmd::<i64>(&["EXISTS", "unlucky"]) == 0).await,
        "the hold the lost acquire took was never released"
    );
    assert!(
        eventually(PROMPT, || server
            .cmd::<Vec<String>>(&["KEYS", "redisson_lock_acquire_latch:*"])
            .is_empty())
        .await,
        "its latch was left behind"
    );
    assert_eq!(
        proxy.armed(),
        armed,
        "the release did not re-send the acquire"
    );
    assert_eq!(client.held_locks(), 0);
}

/// A `lock()` future dropped while its attempt is in flight, and that attempt's answer lost:
/// the background task learns from the latch that it acquired, and releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_whose_answer_is_lost_leaves_nothing_held() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    support::load_scripts(&client).await;

    proxy.cut_after_reply(&[&support::script_sha("acquire"), "dropped"], 1);
    proxy.set_delay(Duration::from_millis(300));
    let call = client.lock("dropped");
    let cancelled = timeout(Duration::from_millis(100), call.lock_with_lease(LONG_LEASE)).await;
    assert!(cancelled.is_err(), "the call was still in flight");
    assert!(
        eventually(PROMPT, || proxy.cuts() == 1).await,
        "the fault fired"
    );
    proxy.set_delay(Duration::ZERO);
    assert!(
        eventually(PROMPT, || server.cmd::<i64>(&["EXISTS", "dropped"]) == 0).await,
        "the hold of the cancelled call was never released"
    );
    assert_eq!(client.held_locks(), 0);
}

/// The application's runtime frozen past the lease (its only thread blocked) with the holder's
/// connection frozen too (the fault proxy runs on that runtime, so no renewal gets through: the
/// watchdog's own thread cannot help): on the first look after it resumes, the guard says lost.
/// (A whole process frozen by SIGSTOP is in `tests/chaos.rs`.)
#[tokio::test(flavor = "current_thread")]
async fn a_holder_frozen_past_its_lease_knows_at_once() {
    use futures::FutureExt;

    let server = RedisServer::start();
    let (_proxy, client) = support::proxied_client(&server).await; // 1.5 s watchdog lease
    let guard = client.lock("frozen").lock().await.unwrap();
    let lease = client.config().watchdog_timeout();
    std::thread::sleep(lease + Duration::from_millis(300)); // the freeze
    assert!(
        guard.is_lost(),
        "not lost on the first look after the freeze"
    );
    assert_eq!(
        guard.lost_reason(),
        Some(redisson_lock::LostReason::Unconfirmed)
    );
    assert!(
        guard.lost().now_or_never().is_some(),
        "lost() is ready at once"
    );
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());
}

/// An acquire whose answer arrives after its lease has run out (the reply held up longer than
/// the lease): no healthy guard is handed out, and the late hold does not linger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_answered_after_its_lease_is_not_handed_out_healthy() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    support::load_scripts(&client).await;

    let lease = Duration::from_millis(200);
    proxy.set_delay(Duration::from_millis(150)); // each way: answers come after 300 ms
    let got = client
        .lock("late")
        .try_lock_for_with_lease(Duration::from_millis(500), lease)
        .await
        .unwrap();
    proxy.set_delay(Duration::ZERO);
    if let Some(guard) = &got {
        assert!(guard.is_lost(), "a stale guard was handed out as healthy");
    }
    assert!(
        eventually(PROMPT, || server.cmd::<i64>(&["EXISTS", "late"]) == 0).await,
        "the late hold lingers"
    );
    drop(got);
    assert!(
        eventually(PROMPT, || client.held_locks() == 0).await,
        "nothing stays registered"
    );
}

/// Renewals that run in Redis but whose replies are lost: the lease clock declares the hold
/// lost while Redis still has it (extended by a renewal the client never heard of). The
/// client releases it, and the owner's next acquire holds once instead of counting twice on
/// the leftover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_lost_by_its_clock_is_released_and_the_owner_then_holds_once() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client_with(server.port(), |c| {
        c.with_watchdog_timeout(Duration::from_secs(2))
    })
    .await;
    support::load_scripts(&client).await;
    // Loaded up front: a NOSCRIPT answer lost with the connection would never be corrected.
    let renew_sha: String = server.cmd(&["SCRIPT", "LOAD", &support::script("renew")]);

    let owner = Owner::new();
    let lock = client.lock("clock-lost").with_owner(owner);
    let guard = lock.lock().await.unwrap();
    let field = guard.owner_field().to_string();
    proxy.cut_after_reply(&[&renew_sha, "clock-lost"], 1000);
    timeout(PROMPT, guard.lost()).await.unwrap();
    assert!(proxy.cuts() >= 1, "renewals ran, their replies were lost");
    assert_eq!(
        guard.lost_reason(),
        Some(redisson_lock::LostReason::Unconfirmed)
    );
    assert!(guard.is_lost());
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());

    let again = timeout(PROMPT, lock.lock()).await.unwrap().unwrap();
    assert_eq!(
        holds_of(&server, "clock-lost", &field),
        Some(1),
        "the leftover hold was released before the owner took the lock again"
    );
    proxy.disarm();
    drop(again);
    client.shutdown().await;
    assert_eq!(server.cmd::<i64>(&["EXISTS", "clock-lost"]), 0);
}
