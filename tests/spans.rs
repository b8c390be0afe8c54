//! The spans the library opens (`redisson_lock::observe::SPAN_*`), read back through a
//! subscriber of the tests' own (`support::spans`) while real operations run against a real
//! server: acquires that take the lock, time out or fail, unlocks that release or find the
//! lock gone, forced unlocks, watchdog cycles that renew or find a lock gone. Each test reads
//! only the spans of its own clients (the subscriber is global to the binary).

mod support;

use std::time::Duration;

use redisson_lock::observe::*;
use redisson_lock::{Error, LockClient};
use support::spans::{self, Recorder, SpanSeen};
use support::RedisServer;

/// The one span named `name` of `client`'s about lock `lock`.
fn only(recorder: &Recorder, name: &str, client: &LockClient, lock: &str) -> SpanSeen {
    let mut found: Vec<SpanSeen> = (recorder.spans(name, client.client_id()).into_iter())
        .filter(|s| s.field("lock") == lock)
        .collect();
    assert_eq!(found.len(), 1, "one {name} span of lock {lock}: {found:#?}");
    found.remove(0)
}

fn waited_ms(span: &SpanSeen) -> u64 {
    span.field("waited_ms").parse().expect("waited_ms recorded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_and_its_unlock_have_spans_with_the_lock_and_the_result() {
    let recorder = spans::install();
    let server = RedisServer::start();
    // (With a prefix, so `lock` the name and `key` the Redis key differ.)
    let client = server.client_with(|c| c.with_key_prefix("sp:")).await;
    let id = client.client_id();

    let guard = client.lock("sp-a").lock().await.unwrap();
    let owner = guard.owner_field();
    guard.unlock().await.unwrap();

    let acquire = only(recorder, SPAN_ACQUIRE, &client, "sp-a");
    assert_eq!(acquire.level, tracing::Level::DEBUG);
    for (field, value) in [
        ("client_id", id),
        ("lock", "sp-a"),
        ("key", "sp:sp-a"),
        ("owner", &owner),
        ("kind", "lock"),
        ("result", "acquired"),
    ] {
        assert_eq!(
            acquire.field(field),
            value,
            "acquire's {field}: {acquire:#?}"
        );
    }
    assert!(waited_ms(&acquire) < 5_000);
    assert!(acquire.closed, "the span ends with the call");
    let ended = recorder.events_in(acquire.id);
    assert!(
        ended.iter().any(|e| e.field("result") == "acquired"
            && e.field("lock") == "sp-a"
            && e.field("key") == "sp:sp-a"),
        "the acquire-ended event is in the span, with the same fields: {ended:#?}"
    );

    let unlock = only(recorder, SPAN_UNLOCK, &client, "sp-a");
    for (field, value) in [
        ("client_id", id),
        ("lock", "sp-a"),
        ("key", "sp:sp-a"),
        ("owner", &owner),
        ("kind", "lock"),
        ("result", "released"),
    ] {
        assert_eq!(unlock.field(field), value, "unlock's {field}: {unlock:#?}");
    }
    assert!(unlock.closed);

    // Other kinds go through the same loop, and say which they are.
    client
        .fenced_lock("sp-f")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let rw = client.read_write_lock("sp-rw");
    rw.read_lock().lock().await.unwrap().unlock().await.unwrap();
    rw.write_lock()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let kinds: Vec<(String, String)> = (recorder.spans(SPAN_ACQUIRE, id).iter())
        .map(|s| (s.field("lock").to_string(), s.field("kind").to_string()))
        .collect();
    for (lock, kind) in [("sp-f", "fenced"), ("sp-rw", "read"), ("sp-rw", "write")] {
        assert!(
            kinds.contains(&(lock.to_string(), kind.to_string())),
            "an acquire span of {lock} as {kind}: {kinds:?}"
        );
    }
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_and_failed_acquires_and_forced_unlocks_record_their_result() {
    let recorder = spans::install();
    let server = RedisServer::start();
    let client = server.client().await;
    // (A long watchdog: its renewal must not notice the forced unlock before the unlock does.)
    let holder = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_secs(30)))
        .await;

    // Held by another client: a try_lock and a bounded wait time out.
    let held = holder.lock("sp-b").lock().await.unwrap();
    assert!(client.lock("sp-b").try_lock().await.unwrap().is_none());
    let wait = Duration::from_millis(200);
    assert!(client
        .lock("sp-b")
        .try_lock_for(wait)
        .await
        .unwrap()
        .is_none());
    let tries = recorder.spans(SPAN_ACQUIRE, client.client_id());
    assert_eq!(tries.len(), 2, "{tries:#?}");
    assert!(tries.iter().all(|s| s.field("result") == "timed_out"));
    assert!(waited_ms(&tries[1]) >= 200, "{:#?}", tries[1]);

    // Forced: it was held, then it is not.
    assert!(client.lock("sp-b").force_unlock().await.unwrap());
    assert!(!client.lock("sp-b").force_unlock().await.unwrap());
    let forced = recorder.spans(SPAN_FORCE_UNLOCK, client.client_id());
    let results: Vec<&str> = forced.iter().map(|s| s.field("result")).collect();
    assert_eq!(results, ["released", "not_held"], "{forced:#?}");
    for span in &forced {
        assert_eq!(span.level, tracing::Level::INFO);
        assert_eq!((span.field("lock"), span.field("key")), ("sp-b", "sp-b"));
        assert_eq!(span.field("kind"), "lock");
    }

    // The holder's unlock finds the lock gone.
    let owner = held.owner_field();
    assert!(matches!(held.unlock().await, Err(Error::NotOwner { .. })));
    let unlock = only(recorder, SPAN_UNLOCK, &holder, "sp-b");
    assert_eq!(unlock.field("result"), "not_held", "{unlock:#?}");
    assert_eq!(unlock.field("owner"), owner);

    // A key of another type: the acquire fails.
    server.cmd::<()>(&["SET", "sp-c", "a string"]);
    assert!(matches!(
        client.lock("sp-c").try_lock().await,
        Err(Error::WrongType { .. })
    ));
    let failed = only(recorder, SPAN_ACQUIRE, &client, "sp-c");
    assert_eq!(failed.field("result"), "error", "{failed:#?}");
    client.shutdown().await;
    holder.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_cycle_has_a_span_with_its_counts() {
    let recorder = spans::install();
    let server = RedisServer::start();
    // (A 1500 ms watchdog: a cycle every 500 ms.)
    let client = server.client().await;
    let id = client.client_id();
    let guard = client.lock("sp-w").lock().await.unwrap();
    let patience = Duration::from_secs(5);

    let renewed = recorder
        .closed(SPAN_RENEWAL_CYCLE, id, patience, |s| {
            s.field("renewed") == "1"
        })
        .await
        .expect("a cycle renews the lock");
    for (field, value) in [
        ("locks", "1"),
        ("gone", "0"),
        ("failed", "0"),
        ("unconfirmed", "0"),
    ] {
        assert_eq!(renewed.field(field), value, "{field}: {renewed:#?}");
    }

    // Deleted under its holder: the next cycle finds it gone.
    server.cmd::<()>(&["DEL", "sp-w"]);
    let gone = recorder
        .closed(SPAN_RENEWAL_CYCLE, id, patience, |s| s.field("gone") == "1")
        .await
        .expect("a cycle finds the lock gone");
    assert_eq!(gone.field("renewed"), "0", "{gone:#?}");
    assert!(guard.is_lost());

    // Nothing left to renew: no more cycle spans.
    let before = recorder.spans(SPAN_RENEWAL_CYCLE, id).len();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(recorder.spans(SPAN_RENEWAL_CYCLE, id).len(), before);
    drop(guard);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_span_or_event_carries_the_password() {
    let recorder = spans::install();
    let secret = "sp-secret-horse";
    let server = RedisServer::start_with(&["--requirepass", secret]);
    let client = server.client().await;
    let guard = client.lock("sp-p").lock().await.unwrap();
    let id = client.client_id();
    recorder
        .closed(SPAN_RENEWAL_CYCLE, id, Duration::from_secs(5), |_| true)
        .await
        .expect("a renewal cycle");
    guard.unlock().await.unwrap();
    client.lock("sp-p").force_unlock().await.unwrap();
    client.shutdown().await;

    let (spans, events) = recorder.all();
    assert!(!recorder.spans(SPAN_ACQUIRE, id).is_empty());
    for span in &spans {
        assert!(
            span.fields.values().all(|v| !v.contains(secret)),
            "{span:#?}"
        );
    }
    for event in &events {
        assert!(
            event.fields.values().all(|v| !v.contains(secret)),
            "{event:#?}"
        );
    }
}
