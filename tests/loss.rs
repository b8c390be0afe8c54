//! Loss told at once (`Config::with_prompt_loss_detection`): a holder listens
//! on its lock's channel once its hold has lived a few ms, and a forced unlock by anyone is
//! noticed within a round trip instead of at the next renewal.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::{LostReason, Owner};
use support::{eventually, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_unlock_is_told_to_the_holder_at_once() {
    let server = RedisServer::start();
    // (A 30 s watchdog: the next renewal is 10 s away.)
    let holder = server
        .client_with(|c| c.with_prompt_loss_detection(true))
        .await;
    let other = server.client().await;
    let guard = holder.lock("told").lock().await.unwrap();
    let channel = support::channel("told");
    server.until_subscribers(&channel, 1).await;

    let forced = Instant::now();
    assert!(other.lock("told").force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("told well before the next renewal");
    let window = forced.elapsed();
    eprintln!("forced unlock to lost signal: {window:?}");
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    assert!(window < Duration::from_millis(500), "{window:?}");
    holder.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_it_the_holder_learns_at_the_next_renewal() {
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| {
            c.with_watchdog_timeout(Duration::from_secs(30))
                .with_prompt_loss_detection(false)
        })
        .await;
    let other = server.client().await;
    let guard = holder.lock("untold").lock().await.unwrap();
    assert!(other.lock("untold").force_unlock().await.unwrap());
    let told = tokio::time::timeout(Duration::from_secs(2), guard.lost()).await;
    assert!(
        told.is_err(),
        "not told before the next renewal (10 s away)"
    );
    assert_eq!(
        server.subscribers(&support::channel("untold")),
        0,
        "no listener"
    );
    holder.shutdown().await;
    other.shutdown().await;
}

/// A hold given up normally ends its watch: the channel's subscription goes (after the hub's
/// linger), and a reentrant hold is watched once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_hold_stops_listening() {
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| c.with_prompt_loss_detection(true))
        .await;
    let lock = holder.lock("watched").with_owner(Owner::new());
    let first = lock.lock().await.unwrap();
    let again = lock.lock().await.unwrap();
    let channel = support::channel("watched");
    server.until_subscribers(&channel, 1).await;
    again.unlock().await.unwrap();
    assert!(!first.is_lost(), "a partial release is no loss");
    first.unlock().await.unwrap();
    let gone = eventually(Duration::from_secs(5), || server.subscribers(&channel) == 0).await;
    assert!(gone, "unsubscribed once the lock was released");
    holder.shutdown().await;
}

/// A hold lost before its watch began (forced at once after the acquire)
/// is told when the watch begins: it checks the hold first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_lost_in_its_first_moments_is_told_when_its_watch_begins() {
    let server = RedisServer::start();
    // (The library's default watchdog, not the fixture's: 30 s, so the next renewal is 10 s
    // away.)
    let config = redisson_lock::Config::from_url(&server.url())
        .unwrap()
        .with_prompt_loss_detection(true);
    let holder = redisson_lock::LockClient::with_config(config)
        .await
        .unwrap();
    let other = server.client().await;
    let guard = holder.lock("early").lock().await.unwrap();
    let forced = Instant::now();
    assert!(other.lock("early").force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("told well before the next renewal");
    let window = forced.elapsed();
    eprintln!("forced unlock in the first moments to lost signal: {window:?}");
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    // (Its watch begins 10-20 ms after the acquire, and checks the hold first.)
    assert!(window < Duration::from_millis(100), "{window:?}");
    holder.shutdown().await;
    other.shutdown().await;
}

/// A hold given up within its first few ms is never listened for: 200 lock+unlock pairs
/// send no subscription, while a hold kept longer is listened for once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_hold_costs_no_subscription() {
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| {
            c.with_service_name("short-holds")
                .with_prompt_loss_detection(true)
        })
        .await;
    let monitor = support::monitor::Monitor::start(server.port());
    let lock = holder.lock("short");
    for _ in 0..200 {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
    let kept = holder.lock("kept").lock().await.unwrap();
    server.until_subscribers(&support::channel("kept"), 1).await;
    // (The watch checks the hold once subscribed: its check is the event to wait for.)
    let checked = support::eventually(Duration::from_secs(5), || {
        monitor.holds_checked("short-holds") >= 1
    })
    .await;
    assert!(checked, "the hold kept was checked");
    kept.unlock().await.unwrap();
    let subscribes =
        monitor.count("SUBSCRIBE", "short-holds") + monitor.count("SSUBSCRIBE", "short-holds");
    assert_eq!(subscribes, 1, "only the hold kept was listened for");
    assert_eq!(monitor.holds_checked("short-holds"), 1, "and checked once");
    holder.shutdown().await;
}

/// Where the server sends keyspace notifications (`notify-keyspace-events Kgxe` here; Redis
/// ships them off), a raw `DEL` and an expiry, which send no message on the lock's channel,
/// are told at once too; the renewals' own events cost no check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_del_or_an_expiry_is_told_at_once_where_the_server_sends_keyspace_events() {
    let server = RedisServer::start_with(&["--notify-keyspace-events", "Kgxe"]);
    let holder = server
        .client_with(|c| {
            c.with_service_name("keyspace-holder")
                .with_prompt_loss_detection(true)
                .with_watchdog_timeout(Duration::from_secs(30))
        })
        .await;
    let keyspace = |name: &str| format!("__keyspace@0__:{}", name);

    let deleted = holder.lock("raw-del").lock().await.unwrap();
    server.until_subscribers(&keyspace("raw-del"), 1).await;
    let at = Instant::now();
    let _: i64 = server.cmd(&["DEL", "raw-del"]);
    tokio::time::timeout(Duration::from_secs(2), deleted.lost())
        .await
        .expect("a raw DEL told well before the next renewal (10 s away)");
    eprintln!("raw DEL to lost signal: {:?}", at.elapsed());
    assert!(at.elapsed() < Duration::from_millis(500));
    assert_eq!(deleted.lost_reason(), Some(LostReason::Gone));

    let expiring = holder.lock("raw-expiry").lock().await.unwrap();
    server.until_subscribers(&keyspace("raw-expiry"), 1).await;
    let at = Instant::now();
    let _: i64 = server.cmd(&["PEXPIRE", "raw-expiry", "50"]);
    tokio::time::timeout(Duration::from_secs(2), expiring.lost())
        .await
        .expect("an expiry told well before the next renewal");
    eprintln!("expiry (PEXPIRE 50) to lost signal: {:?}", at.elapsed());
    assert_eq!(expiring.lost_reason(), Some(LostReason::Gone));
    holder.shutdown().await;

    // Renewals (every 500 ms here) send `expire` events, which check nothing.
    let renewing = server
        .client_with(|c| {
            c.with_service_name("keyspace-renewing")
                .with_prompt_loss_detection(true)
        })
        .await;
    let monitor = support::monitor::Monitor::start(server.port());
    let kept = renewing.lock("renewed").lock().await.unwrap();
    server.until_subscribers(&keyspace("renewed"), 1).await;
    let renewals_before = monitor.count("EVALSHA", "keyspace-renewing");
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert!(
        monitor.count("EVALSHA", "keyspace-renewing") >= renewals_before + 2,
        "renewed meanwhile"
    );
    assert_eq!(
        monitor.holds_checked("keyspace-renewing"),
        1,
        "only the watch's first check: no check per renewal"
    );
    assert!(!kept.is_lost());
    kept.unlock().await.unwrap();
    renewing.shutdown().await;
}

/// Where the server sends none (Redis's default), no keyspace channel is listened to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keyspace_events_no_keyspace_channel_is_listened_to() {
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| c.with_prompt_loss_detection(true))
        .await;
    let held = holder.lock("no-events").lock().await.unwrap();
    server
        .until_subscribers(&support::channel("no-events"), 1)
        .await;
    let keyspace = format!("__keyspace@0__:{}", "no-events");
    assert_eq!(server.subscribers(&keyspace), 0);
    held.unlock().await.unwrap();
    holder.shutdown().await;
}

/// Many held locks are watched by the client's one loss task: no task per hold, and their
/// subscriptions go out together (one `SUBSCRIBE` per burst, not one per lock); a forced
/// unlock of any of them is still told at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_held_locks_are_watched_by_one_task_and_few_subscribes() {
    const HELD: usize = 1000;
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| {
            c.with_service_name("many-held")
                .with_prompt_loss_detection(true)
        })
        .await;
    let monitor = support::monitor::Monitor::start(server.port());
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = tasks();
    let guards = futures::future::join_all((0..HELD).map(|i| {
        let lock = holder.lock(format!("many-{i}"));
        async move { lock.lock().await.unwrap() }
    }))
    .await;
    let all = eventually(Duration::from_secs(10), || {
        server.cmd::<i64>(&["PUBSUB", "NUMPAT"]) == 0
            && (0..HELD)
                .step_by(97)
                .chain([HELD - 1])
                .all(|i| server.subscribers(&support::channel(&format!("many-{i}"))) == 1)
    })
    .await;
    assert!(all, "every held lock is listened for");
    // Each hold is checked once its subscription is confirmed, those confirmed together in
    // one call (up to 100 holds each); once those are done, no task is left per hold.
    let checked = eventually(Duration::from_secs(10), || {
        monitor.holds_checked("many-held") >= HELD
    })
    .await;
    assert!(checked, "every held lock is checked once listened for");
    let calls = monitor.script_calls("held_across", "many-held").len();
    assert!(
        calls <= HELD / 10,
        "{HELD} holds checked in {calls} calls: not batched"
    );
    let settled = eventually(Duration::from_secs(5), || tasks() < before + 20).await;
    let subscribes = monitor.count("SUBSCRIBE", "many-held");
    let grew = tasks().saturating_sub(before);
    eprintln!("{HELD} held locks: {subscribes} SUBSCRIBEs, {calls} check calls, {grew} more tasks");
    assert!(settled, "no task per held lock: {grew} more tasks");
    assert!(
        subscribes <= HELD / 10,
        "subscriptions go out together: {subscribes} SUBSCRIBEs"
    );
    let victim = &guards[HELD / 2];
    let other = server.client().await;
    let forced = Instant::now();
    assert!(other.lock(victim.name()).force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(2), victim.lost())
        .await
        .expect("a forced unlock of one of them is told at once");
    eprintln!("forced unlock to lost signal: {:?}", forced.elapsed());
    assert!(guards.iter().filter(|g| g.is_lost()).count() == 1);
    for guard in guards {
        if !guard.is_lost() {
            guard.unlock().await.unwrap();
        }
    }
    holder.shutdown().await;
    other.shutdown().await;
}
