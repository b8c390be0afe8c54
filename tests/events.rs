//! Lock events for non-holders (`Lock::events`) on a real server: with keyspace events on
//! (`notify-keyspace-events Egx`, what Redisson's listeners need) every release is told once
//! (an unlock, a forced unlock, a `DEL` by hand) and a lease run out is told as expired; with
//! them off, unlocks are still told (their messages) and the rest is not; where `CONFIG` is
//! refused the setting is unknown and a release is still told once; a dropped events
//! connection comes back and says an event may have been missed. Against Redisson's
//! listeners: `tests/interop_events.rs`.

mod support;

use std::time::Duration;

use redisson_lock::{EventSources, Lease, LockEvent, LockEvents};
use support::RedisServer;
use tokio::time::timeout;

const PROMPT: Duration = Duration::from_secs(5);
/// How long a test listens to be sure nothing more is told.
const QUIET: Duration = Duration::from_millis(300);

async fn next(events: &mut LockEvents) -> LockEvent {
    timeout(PROMPT, events.next())
        .await
        .expect("an event came")
        .expect("the stream is open")
}

async fn nothing_more(events: &mut LockEvents) {
    if let Ok(event) = timeout(QUIET, events.next()).await {
        panic!("told once only, then {event:?}");
    }
}

fn keyspace_events(server: &RedisServer, flags: &str) {
    let _: String = server.cmd(&["CONFIG", "SET", "notify-keyspace-events", flags]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keyspace_events_every_release_and_expiry_is_told_once() {
    let server = RedisServer::start();
    keyspace_events(&server, "Egx");
    let holder = server.client().await;
    let watcher = server.client().await;
    let lock = holder.lock("watched");
    let mut events = watcher.lock("watched").events().await.unwrap();
    assert_eq!(
        events.sources(),
        EventSources {
            deletions: Some(true),
            expiries: Some(true)
        }
    );

    // An unlock: its message and its `del`, one event.
    lock.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Released);
    nothing_more(&mut events).await;

    // A re-entry and a partial unlock tell nothing; the last unlock does.
    let outer = lock.lock().await.unwrap();
    let inner = lock.clone().with_owner(outer.owner()).lock().await.unwrap();
    inner.unlock().await.unwrap();
    nothing_more(&mut events).await;
    outer.unlock().await.unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Released);

    // A forced unlock, and a `DEL` by hand.
    let held = lock.lock().await.unwrap();
    assert!(watcher.lock("watched").force_unlock().await.unwrap());
    assert_eq!(next(&mut events).await, LockEvent::Released);
    nothing_more(&mut events).await;
    drop(held);
    let held = lock.lock().await.unwrap();
    let _: i64 = server.cmd(&["DEL", "watched"]);
    assert_eq!(next(&mut events).await, LockEvent::Released);
    drop(held);
    nothing_more(&mut events).await;

    // A holder whose lease runs out while it cannot reach the server (its unlock, held back,
    // comes after the key is gone): the server's expiry is told.
    let (proxy, frozen) = support::proxied_client(&server).await;
    let _guard = frozen
        .lock("watched")
        .acquire(
            redisson_lock::Wait::Forever,
            Lease::Fixed(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    proxy.set_delay(Duration::from_secs(3));
    assert_eq!(next(&mut events).await, LockEvent::Expired);
    nothing_more(&mut events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keyspace_events_unlocks_are_told_by_their_message() {
    let server = RedisServer::start();
    keyspace_events(&server, "");
    let holder = server.client().await;
    let watcher = server.client().await;
    let lock = holder.lock("quiet");
    let mut events = watcher.lock("quiet").events().await.unwrap();
    assert_eq!(
        events.sources(),
        EventSources {
            deletions: Some(false),
            expiries: Some(false)
        }
    );
    lock.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Released);
    let held = lock.lock().await.unwrap();
    assert!(watcher.lock("quiet").force_unlock().await.unwrap());
    assert_eq!(next(&mut events).await, LockEvent::Released);
    drop(held);
    nothing_more(&mut events).await;

    // What sends no message is not told: a `DEL` by hand, an expiry.
    let _: i64 = server.cmd(&["HSET", "quiet", "someone:1", "1"]);
    let _: i64 = server.cmd(&["DEL", "quiet"]);
    let _: i64 = server.cmd(&["HSET", "quiet", "someone:1", "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", "quiet", "50"]);
    nothing_more(&mut events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_config_is_refused_a_release_is_still_told_once() {
    let server = RedisServer::start();
    keyspace_events(&server, "Egx");
    // A user that may not read the server's settings (as on managed servers).
    let _: String = server.cmd(&[
        "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-config",
    ]);
    let url = format!("redis://app:pw@127.0.0.1:{}", server.port());
    let config = redisson_lock::Config::from_url(&url).unwrap();
    let watcher = redisson_lock::LockClient::with_config(config)
        .await
        .unwrap();
    let holder = server.client().await;
    let mut events = watcher.lock("unknown").events().await.unwrap();
    assert_eq!(
        events.sources(),
        EventSources {
            deletions: None,
            expiries: None
        }
    );
    // The unlock's message comes first or its `del` does: one event either way.
    holder
        .lock("unknown")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Released);
    nothing_more(&mut events).await;
    assert_eq!(
        events.sources().deletions,
        Some(true),
        "learnt from the `del`"
    );
    let _: i64 = server.cmd(&["HSET", "unknown", "someone:1", "1"]);
    let _: i64 = server.cmd(&["DEL", "unknown"]);
    assert_eq!(next(&mut events).await, LockEvent::Released);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_events_connection_comes_back_and_says_so() {
    let server = RedisServer::start();
    keyspace_events(&server, "Egx");
    let (proxy, watcher) = support::proxied_client(&server).await;
    let holder = server.client().await;
    let mut events = watcher.lock("dropped").events().await.unwrap();
    proxy.cut_all();
    assert_eq!(next(&mut events).await, LockEvent::Resubscribed);
    holder
        .lock("dropped")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Released);

    // The client's shutdown ends the stream.
    watcher.shutdown().await;
    assert_eq!(timeout(PROMPT, events.next()).await.unwrap(), None);
}
