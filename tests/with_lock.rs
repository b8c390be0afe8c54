//! `with_lock`: acquire, run the body raced against the lock-lost signal, release.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::RedisServer;

const PROMPT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_runs_under_the_lock_and_the_lock_is_released_after() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("section");
    let seen = lock
        .with_lock(|| async {
            // Inside the body the lock is held (by a fresh owner of this client).
            let fields: Vec<String> = server.cmd(&["HKEYS", "section"]);
            fields
        })
        .await
        .unwrap();
    assert_eq!(seen.len(), 1, "held while the body ran");
    assert!(seen[0].starts_with(client.client_id()));
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "section"]),
        0,
        "released after"
    );
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_mid_body_stops_the_body_and_says_so() {
    let server = RedisServer::start();
    let client = server.client().await; // 1.5 s lease, renewed every 0.5 s
    let finished = Arc::new(AtomicBool::new(false));
    let body_finished = finished.clone();
    let started = tokio::time::Instant::now();
    let lock = client.lock("stolen");
    let server = &server;
    let call = lock.with_lock(|| async move {
        // Deleted behind the holder's back: the next renewal finds it gone.
        let _: i64 = server.cmd(&["DEL", "stolen"]);
        tokio::time::sleep(Duration::from_secs(30)).await;
        body_finished.store(true, Ordering::SeqCst);
    });
    let err = tokio::time::timeout(PROMPT, call)
        .await
        .expect("the body was not stopped when the lock was lost")
        .unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    assert!(started.elapsed() < PROMPT);
    assert!(
        !finished.load(Ordering::SeqCst),
        "the body ran on without the lock"
    );
    assert_eq!(client.held_locks(), 0);
}

#[test]
fn blocking_with_lock_returns_the_output_or_reports_a_loss() {
    let server = RedisServer::start();
    let client = redisson_lock::blocking::LockClient::with_config(server.config()).unwrap();
    let lock = client.lock("ledger");
    let total = lock
        .with_lock(|guard| {
            assert!(!guard.is_lost());
            assert_eq!(server.cmd::<i64>(&["EXISTS", "ledger"]), 1);
            6
        })
        .unwrap();
    assert_eq!(total, 6);
    assert_eq!(server.cmd::<i64>(&["EXISTS", "ledger"]), 0);

    // Lost while the closure runs: the closure runs on (it cannot be stopped from outside)
    // and sees the loss through the guard; the call reports it.
    let err = lock
        .with_lock(|guard| {
            let _: i64 = server.cmd(&["DEL", "ledger"]);
            guard.wait_lost(PROMPT)
        })
        .unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    client.shutdown();
}
