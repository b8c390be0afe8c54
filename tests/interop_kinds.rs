//! Interop of the lock kinds beyond `RLock` with the real Redisson, per Redisson version (one
//! section per kind; a new kind adds its scenarios here).
//!
//! - Fenced (`RFencedLock`): one counter for both sides (every acquisition, Java's or Rust's,
//!   re-entries and Java's plain `lock()` included, takes the next token), one lock (each
//!   excludes the other), and wake-ups by the unlock message in both directions.
//! - Multi (`RedissonMultiLock`): a Java multi-lock and a Rust one over the same names exclude
//!   each other, and neither keeps a part when it cannot have them all.
//! - Read-write (`RReadWriteLock`): Java and Rust readers share, a writer on either side
//!   excludes both; a write unlock wakes the other side's readers, the last read unlock the
//!   other side's writer; a Java read unlock keeps a Rust reader's lock (its timeout keys are
//!   renewed by this crate's watchdog).
//! - RedLock (`RedissonRedLock`) over three independent servers: a Java RedLock and a Rust
//!   one exclude each other; either holds with one server down (a majority); a part a
//!   plain lock holds on one server does not stop either.
//! - Fair (`RFairLock`): one queue for both sides, served in arrival order (a Rust waiter
//!   queued between two Java waiters is served between them, and the reverse), each side's
//!   unlock waking the other's head on its own channel; a waiter of either side that gives up
//!   leaves the queue and does not delay the one behind it.
//! - Spin (`RSpinLock`): each excludes the other and takes the lock after the other's
//!   unlock by polling (no message exists); non-reentrant locks (4.4+) exclude each other.

mod support;

use std::path::Path;
use std::time::Duration;

use redisson_lock::{LockClient, MultiLock, Owner, RedLock};
use serde_json::json;
use support::java::{script_calls, until_java_waits, JavaAgent};
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
    java_and_rust_readers_share_and_writers_exclude_both,
    a_java_write_unlock_wakes_every_rust_reader,
    a_rust_write_unlock_wakes_a_java_reader,
    the_last_rust_read_unlock_wakes_a_java_writer,
    a_java_read_unlock_leaves_a_renewed_rust_reader_holding,
    java_and_rust_red_locks_exclude_each_other_on_a_majority,
    fair_waiters_are_served_in_arrival_order_from_a_java_holder,
    fair_waiters_are_served_in_arrival_order_from_a_rust_holder,
    fair_waiters_that_give_up_leave_the_queue_on_both_sides,
    java_and_rust_spin_and_non_reentrant_locks_exclude_each_other,
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
    let before = script_calls(&server);
    let (woken, unlocked_at) = tokio::join!(java.fenced_lock(name, "waiter"), async {
        until_java_waits(&java, &server, &support::channel(name), before).await;
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

// ---------------------------------------------------------------------------------------------
// Read-write.

fn rw_channel(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

/// Java's `tryLock(0)` on one half: whether it was taken.
async fn java_try(java: &JavaAgent, half: &str, name: &str, thread: &str) -> bool {
    let taken = java
        .rw(half, "tryLock", name, thread, json!({ "waitMs": 0 }))
        .await
        .unwrap();
    taken.as_bool().unwrap()
}

async fn java_unlock(java: &JavaAgent, half: &str, name: &str, thread: &str) {
    java.rw(half, "unlock", name, thread, json!({}))
        .await
        .unwrap();
}

async fn java_and_rust_readers_share_and_writers_exclude_both(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rw-shared";
    let rw = rust.read_write_lock(name);

    assert!(java_try(&java, "read", name, "r1").await);
    let ours = rw.read_lock().lock().await.unwrap();
    let mode: String = server.cmd(&["HGET", name, "mode"]);
    assert_eq!(mode, "read");
    assert!(
        rw.write_lock().try_lock().await.unwrap().is_none(),
        "a Java reader"
    );
    assert!(!java_try(&java, "write", name, "w1").await, "a Rust reader");
    java_unlock(&java, "read", name, "r1").await;
    assert!(
        !java_try(&java, "write", name, "w1").await,
        "the Rust reader is left"
    );
    ours.unlock().await.unwrap();

    let write = rw.write_lock().lock().await.unwrap();
    assert!(!java_try(&java, "read", name, "r1").await, "a Rust writer");
    assert!(!java_try(&java, "write", name, "w1").await);
    let locked = java.rw("write", "isLocked", name, "w1", json!({})).await;
    assert_eq!(locked.unwrap().as_bool(), Some(true), "Java sees our write");
    write.unlock().await.unwrap();

    assert!(java_try(&java, "write", name, "w1").await);
    assert!(
        rw.read_lock().try_lock().await.unwrap().is_none(),
        "a Java writer"
    );
    assert!(
        rw.write_lock().is_locked().await.unwrap(),
        "we see Java's write"
    );
    java_unlock(&java, "write", name, "w1").await;
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
}

async fn a_java_write_unlock_wakes_every_rust_reader(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rw-java-writes";
    let lease = json!({ "waitMs": 0, "leaseMs": LONG_LEASE.as_millis() as u64 });
    let taken = java.rw("write", "tryLock", name, "w", lease).await.unwrap();
    assert_eq!(taken.as_bool(), Some(true));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let read = rust.read_write_lock(name).read_lock();
            tokio::spawn(async move { read.lock().await.unwrap() })
        })
        .collect();
    server.until_subscribers(&rw_channel(name), 1).await;
    java_unlock(&java, "write", name, "w").await;
    // Both, well inside the 30 s lease: only Java's wake-all message explains it.
    for reader in readers {
        let guard = tokio::time::timeout(PROMPT, reader).await.unwrap().unwrap();
        guard.unlock().await.unwrap();
    }
}

async fn a_rust_write_unlock_wakes_a_java_reader(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rw-rust-writes";
    let held = rust
        .read_write_lock(name)
        .write_lock()
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let before = script_calls(&server);
    let (woken, unlocked_at) = tokio::join!(java.rw("read", "lock", name, "r", json!({})), async {
        until_java_waits(&java, &server, &rw_channel(name), before).await;
        held.unlock().await.unwrap();
        Instant::now()
    });
    woken.unwrap();
    assert!(
        unlocked_at.elapsed() < PROMPT,
        "woken {:?} after the unlock",
        unlocked_at.elapsed()
    );
    java_unlock(&java, "read", name, "r").await;
}

async fn the_last_rust_read_unlock_wakes_a_java_writer(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rw-rust-reads";
    let read = rust.read_write_lock(name).read_lock();
    let (a, b) = (
        read.clone().lock_with_lease(LONG_LEASE).await.unwrap(),
        read.lock_with_lease(LONG_LEASE).await.unwrap(),
    );
    let before = script_calls(&server);
    let (woken, unlocked_at) =
        tokio::join!(java.rw("write", "lock", name, "w", json!({})), async {
            until_java_waits(&java, &server, &rw_channel(name), before).await;
            a.unlock().await.unwrap();
            b.unlock().await.unwrap();
            Instant::now()
        });
    woken.unwrap();
    assert!(
        unlocked_at.elapsed() < PROMPT,
        "woken {:?} after the unlock",
        unlocked_at.elapsed()
    );
    java_unlock(&java, "write", name, "w").await;
}

async fn a_java_read_unlock_leaves_a_renewed_rust_reader_holding(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rw-renewed";
    // Both on the watchdog: after two leases only renewal keeps either reader's timeout key.
    java.rw("read", "lock", name, "r", json!({})).await.unwrap();
    let ours = rust.read_write_lock(name).read_lock().lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2 * WATCHDOG_MS)).await;
    java_unlock(&java, "read", name, "r").await;
    // Java's unlock sets the hash's TTL from the longest live reader lease: ours.
    let pttl: i64 = server.cmd(&["PTTL", name]);
    assert!(pttl > 0, "the lock outlived Java's reader: {pttl}");
    assert!(!ours.is_lost());
    assert!(
        !java_try(&java, "write", name, "w").await,
        "our reader still excludes"
    );
    ours.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
}

// ---------------------------------------------------------------------------------------------
// RedLock.

async fn java_and_rust_red_locks_exclude_each_other_on_a_majority(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let others = [RedisServer::start(), RedisServer::start()];
    let urls: Vec<String> = std::iter::once(server.url())
        .chain(others.iter().map(RedisServer::url))
        .collect();
    let clients = [rust, others[0].client().await, others[1].client().await];
    let name = "red-lock";
    let red = RedLock::new(clients.iter().map(|c| c.lock(name))).unwrap();
    assert_eq!(red.quorum(), 2);

    // Java holds a majority: ours cannot have one.
    assert!(java.red_try_lock(&urls, name, "a", 0, None).await.unwrap());
    assert!(red
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    java.red_unlock(&urls, name, "a").await.unwrap();

    // Ours holds: Java's cannot.
    let guard = red.try_lock().await.unwrap().expect("a majority is free");
    assert_eq!(guard.guards().len(), 3);
    assert!(!java
        .red_try_lock(&urls, name, "b", 300, None)
        .await
        .unwrap());
    guard.unlock().await.unwrap();

    // One part held by a plain lock elsewhere: two of three still make it, on both sides.
    let plain = clients[2]
        .lock(name)
        .with_owner(Owner::new())
        .lock()
        .await
        .unwrap();
    let guard = red.try_lock().await.unwrap().expect("2 of 3");
    assert_eq!(guard.guards().len(), 2);
    guard.unlock().await.unwrap();
    assert!(java
        .red_try_lock(&urls, name, "c", 300, None)
        .await
        .unwrap());
    assert!(red.try_lock().await.unwrap().is_none(), "Java holds 2 of 3");
    java.red_unlock(&urls, name, "c").await.unwrap();
    plain.unlock().await.unwrap();
    for client in clients {
        client.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Fair.

fn fair_queue(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&[
        "LRANGE",
        &format!("redisson_lock_queue:{{{name}}}"),
        "0",
        "-1",
    ])
}

/// Waits until `field` stands last in `name`'s queue.
async fn until_queued(server: &RedisServer, name: &str, field: &str) {
    let queued = support::eventually(PROMPT, || {
        fair_queue(server, name).last().map(String::as_str) == Some(field)
    })
    .await;
    assert!(queued, "{field} queued: {:?}", fair_queue(server, name));
}

/// One waiter of either side, queued on a fair lock.
enum FairWaiter {
    Java(support::java::AsyncAcquire, &'static str),
    Rust(tokio::task::JoinHandle<redisson_lock::LockGuard>),
}

impl FairWaiter {
    /// Whether it got the lock within `timeout`; if so, it unlocks.
    async fn served_within(self, java: &JavaAgent, name: &str, timeout: Duration) -> Option<Self> {
        match self {
            FairWaiter::Java(mut acquire, thread) => match acquire.within(timeout).await {
                Some(_) => {
                    java.rw("fair", "unlock", name, thread, json!({}))
                        .await
                        .unwrap();
                    None
                }
                None => Some(FairWaiter::Java(acquire, thread)),
            },
            FairWaiter::Rust(mut task) => match tokio::time::timeout(timeout, &mut task).await {
                Ok(guard) => {
                    guard.unwrap().unlock().await.unwrap();
                    None
                }
                Err(_) => Some(FairWaiter::Rust(task)),
            },
        }
    }
}

/// Queues `sides` (true: Java) behind the holder, one at a time, then releases the holder and
/// checks that each is served in turn: the one after stays queued until the one before
/// unlocks.
async fn served_in_order(setup: &Setup, name: &str, java_holds: bool, sides: &[bool]) {
    let (java, rust, server) = (&setup.java, &setup.rust, &setup.server);
    let rust_holder = if java_holds {
        java.rw("fair", "lock", name, "holder", json!({}))
            .await
            .unwrap();
        None
    } else {
        Some(rust.fair_lock(name).lock().await.unwrap())
    };
    let threads = ["j1", "j2", "j3"];
    let mut waiters = Vec::new();
    for (i, &is_java) in sides.iter().enumerate() {
        if is_java {
            let thread = threads[i];
            // (Asked first: the thread's commands queue behind its lock().)
            let field = java.field(thread).await;
            let acquire = java.lock_async_kind(Some("fair"), name, thread, None).await;
            until_queued(server, name, &field).await;
            // Listening on its own channel (3.23.4 can still miss a message published before
            // it parks, #5761: the unlocks below come much later).
            let own = format!("redisson_lock__channel:{{{name}}}:{field}");
            server.until_subscribers(&own, 1).await;
            waiters.push(FairWaiter::Java(acquire, thread));
        } else {
            let owner = Owner::new();
            let lock = rust.fair_lock(name).with_owner(owner);
            let task = tokio::spawn(async move { lock.lock().await.unwrap() });
            let field = format!("{}:{}", rust.client_id(), owner.id());
            until_queued(server, name, &field).await;
            waiters.push(FairWaiter::Rust(task));
        }
    }
    match rust_holder {
        None => drop(
            java.rw("fair", "unlock", name, "holder", json!({}))
                .await
                .unwrap(),
        ),
        Some(guard) => guard.unlock().await.unwrap(),
    }
    let mut waiters = waiters.into_iter().enumerate().peekable();
    while let Some((i, waiter)) = waiters.next() {
        // The next one is not served while this one holds.
        let early = match waiters.peek_mut() {
            Some((_, FairWaiter::Rust(task))) => task.is_finished(),
            Some((_, FairWaiter::Java(acquire, _))) => {
                acquire.within(Duration::from_millis(1)).await.is_some()
            }
            None => false,
        };
        assert!(!early, "waiter {} served before waiter {i}", i + 1);
        let left = waiter.served_within(java, name, PROMPT).await;
        assert!(
            left.is_none(),
            "waiter {i} ({}) was not served",
            if sides[i] { "Java" } else { "Rust" }
        );
    }
    assert!(fair_queue(server, name).is_empty());
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
}

async fn fair_waiters_are_served_in_arrival_order_from_a_java_holder(jar: &Path) {
    let setup = setup(jar).await;
    // Rust, Java, Rust: a Java waiter between two Rust waiters.
    served_in_order(&setup, "fair-j", true, &[false, true, false]).await;
    setup.rust.shutdown().await;
}

async fn fair_waiters_are_served_in_arrival_order_from_a_rust_holder(jar: &Path) {
    let setup = setup(jar).await;
    // Java, Rust, Java: a Rust waiter between two Java waiters.
    served_in_order(&setup, "fair-r", false, &[true, false, true]).await;
    setup.rust.shutdown().await;
}

async fn fair_waiters_that_give_up_leave_the_queue_on_both_sides(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "fair-give-up";
    let holder = rust.fair_lock(name).lock().await.unwrap();
    // Java's wait runs out (its acquireFailed), then a Rust wait is cancelled.
    let tried = java
        .rw("fair", "tryLock", name, "j1", json!({ "waitMs": 300 }))
        .await
        .unwrap();
    assert_eq!(tried, json!(false));
    assert!(fair_queue(&server, name).is_empty(), "Java left the queue");
    let lock = rust.fair_lock(name);
    let cancelled = tokio::spawn(async move { lock.lock().await });
    assert!(support::eventually(PROMPT, || fair_queue(&server, name).len() == 1).await);
    // A Java waiter behind the Rust one that gives up.
    let field = java.field("j2").await;
    let mut behind = java.lock_async_kind(Some("fair"), name, "j2", None).await;
    until_queued(&server, name, &field).await;
    cancelled.abort();
    let left = support::eventually(PROMPT, || fair_queue(&server, name).len() == 1).await;
    assert!(
        left,
        "the cancelled Rust waiter left: {:?}",
        fair_queue(&server, name)
    );
    let released = Instant::now();
    holder.unlock().await.unwrap();
    behind.acquired().await;
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the Java waiter took {took:?}"
    );
    java.rw("fair", "unlock", name, "j2", json!({}))
        .await
        .unwrap();
    assert!(fair_queue(&server, name).is_empty());
    rust.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Spin and non-reentrant.

async fn java_and_rust_spin_and_non_reentrant_locks_exclude_each_other(jar: &Path) {
    let Setup {
        java,
        rust,
        server: _server,
    } = setup(jar).await;
    let mut kinds = vec![("spin", rust.spin_lock("spin"))];
    if java.version() != "3.23.4" {
        kinds.push(("nonReentrant", rust.non_reentrant_lock("nr")));
        kinds.push(("nonReentrantFair", rust.non_reentrant_fair_lock("nrf")));
    }
    for (kind, lock) in kinds {
        // One owner: its second acquire re-enters (spin) or is refused (non-reentrant).
        let lock = lock.with_owner(Owner::new());
        let name = lock.name().to_string();
        // Java holds: Rust is kept out, then polls (spin) or is woken, after Java's unlock.
        java.rw(kind, "lock", &name, "t1", json!({})).await.unwrap();
        assert!(
            lock.try_lock().await.unwrap().is_none(),
            "{kind}: Java holds"
        );
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.lock().await.unwrap() })
        };
        java.rw(kind, "unlock", &name, "t1", json!({}))
            .await
            .unwrap();
        let guard = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
        // Rust holds: Java is kept out, then takes it after Rust's unlock.
        let tried = java
            .rw(kind, "tryLock", &name, "t2", json!({ "waitMs": 0 }))
            .await
            .unwrap();
        assert_eq!(tried, json!(false), "{kind}: Rust holds");
        let reentry = lock.try_lock().await;
        if kind == "spin" {
            reentry.unwrap().unwrap().unlock().await.unwrap();
        } else {
            assert!(reentry.unwrap_err().is_non_reentrant(), "{kind}");
        }
        guard.unlock().await.unwrap();
        let tried = java
            .rw(kind, "tryLock", &name, "t2", json!({ "waitMs": 5000 }))
            .await
            .unwrap();
        assert_eq!(tried, json!(true), "{kind}: Java after Rust's unlock");
        java.rw(kind, "unlock", &name, "t2", json!({}))
            .await
            .unwrap();
    }
    rust.shutdown().await;
}
