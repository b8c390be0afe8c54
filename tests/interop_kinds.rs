//! Interop of the lock kinds beyond `RLock` with the real Redisson, per Redisson version (one
//! section per kind; a new kind adds its scenarios here).
//!
//! - Fenced (`RFencedLock`): one counter for both sides (every acquisition, Java's or Rust's,
//!   re-entries and Java's plain `lock()` included, takes the next token), one lock (each
//!   excludes the other), and wake-ups by the unlock message in both directions.
//! - Multi (`RedissonMultiLock`): a Java multi-lock and a Rust one over the same names exclude
//!   each other, and neither keeps a part when it cannot have them all.

mod support;

use std::path::Path;
use std::time::Duration;

use redisson_lock::{LockClient, MultiLock, Owner};
use support::java::JavaAgent;
use support::RedisServer;
use tokio::time::Instant;

const WATCHDOG_MS: u64 = 1500;
/// A holder's lease long enough that only the unlock message explains a prompt wake.
const LONG_LEASE: Duration = Duration::from_secs(30);
const PROMPT: Duration = Duration::from_secs(5);

support::java::scenarios!(
    tokens_come_from_one_counter_on_both_sides,
    a_java_unlock_wakes_a_rust_fenced_waiter_with_the_next_token,
    a_rust_unlock_wakes_a_java_fenced_waiter_with_the_next_token,
    java_and_rust_multi_locks_exclude_each_other_all_or_none,
);

/// Fields drop in order: the JVM first, the Redis server last.
struct Setup {
    java: JavaAgent,
    rust: LockClient,
    server: RedisServer,
}

async fn setup(jar: &Path) -> Setup {
    let server = RedisServer::start();
    let java = JavaAgent::start(jar, &server.url(), WATCHDOG_MS).await;
    let rust = server.client().await;
    Setup { java, rust, server }
}

// ---------------------------------------------------------------------------------------------
// Fenced.

async fn tokens_come_from_one_counter_on_both_sides(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "shared-ledger";
    let lock = rust.fenced_lock(name).with_owner(Owner::new());

    let t1 = java.fenced_lock(name, "t1").await.unwrap();
    assert_eq!(t1, 1);
    assert!(lock.try_lock().await.unwrap().is_none(), "Java holds it");
    assert_eq!(
        lock.token().await.unwrap(),
        Some(1),
        "Java's token, read by Rust"
    );
    java.fenced_unlock(name, "t1").await.unwrap();

    let first = lock.lock().await.unwrap();
    let again = lock.lock().await.unwrap();
    assert_eq!((first.token(), again.token()), (2, 3));
    assert_eq!(
        java.token(name).await.unwrap(),
        Some(3),
        "Rust's token, read by Java"
    );
    assert_eq!(
        java.fenced_try_lock(name, "t1", 0, None).await.unwrap(),
        None,
        "Rust holds it"
    );
    again.unlock().await.unwrap();
    first.unlock().await.unwrap();

    // Java's plain lock() spends a token too; Rust's next one follows it.
    java.fenced_plain_lock(name, "t1").await.unwrap();
    assert_eq!(lock.token().await.unwrap(), Some(4));
    java.fenced_unlock(name, "t1").await.unwrap();
    assert_eq!(lock.try_lock().await.unwrap().unwrap().token(), 5);
    assert_eq!(
        server.cmd::<i64>(&["GET", "redisson_lock_token:{shared-ledger}"]),
        5
    );
}

async fn a_java_unlock_wakes_a_rust_fenced_waiter_with_the_next_token(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "java-then-rust";
    let lease_ms = LONG_LEASE.as_millis() as u64;
    let token = java
        .fenced_try_lock(name, "holder", 0, Some(lease_ms))
        .await
        .unwrap()
        .expect("free");
    let lock = rust.fenced_lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    server.until_subscribers(&support::channel(name), 1).await;
    java.fenced_unlock(name, "holder").await.unwrap();
    // Well inside the 30 s lease: only the unlock message explains it.
    let woken = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert_eq!(woken.token(), token + 1);
}

async fn a_rust_unlock_wakes_a_java_fenced_waiter_with_the_next_token(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rust-then-java";
    let held = rust
        .fenced_lock(name)
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let (woken, unlocked_at) = tokio::join!(java.fenced_lock(name, "waiter"), async {
        server.until_subscribers(&support::channel(name), 1).await;
        held.unlock().await.unwrap();
        Instant::now()
    });
    // Well inside the 30 s lease: only the unlock message explains it.
    assert!(
        unlocked_at.elapsed() < PROMPT,
        "woken {:?} after the unlock",
        unlocked_at.elapsed()
    );
    assert_eq!(woken.unwrap(), 2);
    java.fenced_unlock(name, "waiter").await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Multi.

async fn java_and_rust_multi_locks_exclude_each_other_all_or_none(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let names = ["multi-a", "multi-b", "multi-c"];
    let ours = MultiLock::new(names.map(|n| rust.lock(n))).unwrap();
    let exists = |key: &str| server.cmd::<i64>(&["EXISTS", key]) == 1;

    assert!(java.multi_try_lock(&names, "t1", 0).await.unwrap());
    assert!(
        ours.try_lock().await.unwrap().is_none(),
        "Java holds them all"
    );
    java.multi_unlock(&names, "t1").await.unwrap();
    assert!(
        names.iter().all(|n| !exists(n)),
        "Java's unlock freed every part"
    );

    // Rust holds only the middle one: Java's multi-lock takes none (gives back multi-a).
    let middle = rust.lock("multi-b").lock().await.unwrap();
    assert!(!java.multi_try_lock(&names, "t1", 200).await.unwrap());
    assert!(
        !exists("multi-a") && !exists("multi-c"),
        "Java kept no part"
    );
    middle.unlock().await.unwrap();

    let guard = ours.lock().await.unwrap();
    assert!(
        !java.multi_try_lock(&names, "t1", 0).await.unwrap(),
        "Rust holds them all"
    );
    guard.unlock().await.unwrap();
    assert!(java.multi_try_lock(&names, "t1", 0).await.unwrap());
    java.multi_unlock(&names, "t1").await.unwrap();
}
