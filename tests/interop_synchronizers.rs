//! Interop of the synchronizers with the real Redisson, per Redisson version.
//!
//! - Semaphore (`RSemaphore`): one count for both sides (what either sets, takes, gives back,
//!   adds or drains, the other sees), and wake-ups by the release's message in both
//!   directions: a Java release wakes a Rust waiter for as many permits as it frees, and a Rust
//!   release (or a dropped Rust guard) wakes a Java waiter, which has no timer to fall back on.
//! - Semaphore with expiring permits (`RPermitExpirableSemaphore`): one count and one list of
//!   permits for both sides (each side's ids release and update on the other: same 16 bytes,
//!   same hex), a release on either side wakes a waiter on the other by its message, a
//!   permit given back behind a Rust holder's back (a Java `tryRelease` of its id) is told as
//!   lost, and a permit whose holder went quiet comes back at its expiry for a waiter on the
//!   other side (expiry scores in one clock: same machine).
//! - Count-down latch (`RCountDownLatch`): one count for both sides, and the count-down that
//!   opens it wakes the other side's waiters, in both directions.

mod support;

use std::path::Path;
use std::time::Duration;

use redisson_lock::LockClient;
use serde_json::{json, Value};
use support::java::{script_calls, until_java_waits, JavaAgent, JavaError};
use support::RedisServer;
use tokio::time::{timeout, Instant};

const WATCHDOG_MS: u64 = 1500;
const PROMPT: Duration = Duration::from_secs(5);
/// A Rust waiter that misses a release looks again after a second: a wake well inside that
/// was the message's.
const BY_MESSAGE: Duration = Duration::from_millis(600);

support::java::scenarios!(
    java_and_rust_share_one_semaphore_count,
    a_java_release_wakes_a_rust_waiter_for_the_permits_it_frees,
    a_rust_release_wakes_a_java_waiter,
    java_and_rust_share_one_permit_semaphore,
    permit_releases_wake_waiters_across_sides,
    an_expired_permit_comes_back_across_sides,
    java_and_rust_count_one_latch_down,
    a_java_count_down_opens_the_latch_for_rust_waiters,
    a_rust_count_down_opens_the_latch_for_a_java_waiter,
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

/// One `RSemaphore` call of the agent (`semAcquire`, `semRelease`, ...) on `thread`.
async fn sem(
    java: &JavaAgent,
    op: &str,
    name: &str,
    thread: &str,
    extra: Value,
) -> Result<Value, JavaError> {
    java.call(op, name, thread, extra).await
}

fn semaphore_channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

// ---------------------------------------------------------------------------------------------
// Semaphore.

async fn java_and_rust_share_one_semaphore_count(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "shared-pool";
    let pool = rust.semaphore(name);
    let permits = |n: i64| json!({ "permits": n });

    let set = sem(&java, "semTrySetPermits", name, "t", permits(3)).await;
    assert_eq!(set.unwrap(), json!(true));
    assert!(!pool.try_set_permits(9).await.unwrap(), "Java set it");
    assert_eq!(pool.available_permits().await.unwrap(), 3);

    let two = pool.acquire(2).await.unwrap();
    let java_two = sem(
        &java,
        "semTryAcquire",
        name,
        "t",
        json!({ "permits": 2, "waitMs": 0 }),
    );
    assert_eq!(java_two.await.unwrap(), json!(false), "Rust holds 2 of 3");
    let java_one = sem(
        &java,
        "semTryAcquire",
        name,
        "t",
        json!({ "permits": 1, "waitMs": 0 }),
    );
    assert_eq!(java_one.await.unwrap(), json!(true));
    let available = sem(&java, "semAvailable", name, "t", json!({})).await;
    assert_eq!(available.unwrap(), json!(0));
    assert!(
        pool.try_acquire(1).await.unwrap().is_none(),
        "Java took the last"
    );

    two.release().await.unwrap();
    sem(&java, "semRelease", name, "t", permits(1))
        .await
        .unwrap();
    assert_eq!(pool.available_permits().await.unwrap(), 3);

    // Java's addPermits (negative too) and drain, and Rust's, on one count.
    sem(&java, "semAddPermits", name, "t", permits(-5))
        .await
        .unwrap();
    assert_eq!(pool.available_permits().await.unwrap(), -2);
    assert_eq!(pool.add_permits(4).await.unwrap(), 2);
    let drained = sem(&java, "semDrain", name, "t", json!({})).await;
    assert_eq!(drained.unwrap(), json!(2));
    assert_eq!(pool.release(3).await.unwrap(), 3);
    assert_eq!(pool.drain_permits().await.unwrap(), 3);
    let available = sem(&java, "semAvailable", name, "t", json!({})).await;
    assert_eq!(available.unwrap(), json!(0));
    assert_eq!(server.cmd::<String>(&["GET", name]), "0");
    // Nothing but the count is left for Java to see (the latches are gone or expire).
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert!(
        keys.iter().all(|k| k == name
            || k.starts_with("redisson_unlock_latch:")
            || k.starts_with("redisson_lock_acquire_latch:")),
        "{keys:?}"
    );
}

async fn a_java_release_wakes_a_rust_waiter_for_the_permits_it_frees(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "java-frees";
    let pool = rust.semaphore(name);
    pool.try_set_permits(0).await.unwrap();

    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move {
            let permits = pool.acquire(2).await.unwrap();
            (Instant::now(), permits)
        }
    });
    server.until_subscribers(&semaphore_channel(name), 1).await;
    // One permit serves no waiter for two.
    sem(&java, "semRelease", name, "t", json!({ "permits": 1 }))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "1 permit does not serve a waiter for 2"
    );
    let released = Instant::now();
    sem(&java, "semRelease", name, "t", json!({ "permits": 1 }))
        .await
        .unwrap();
    let (acquired, permits) = timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(
        acquired - released < BY_MESSAGE,
        "woken by Java's release message, {:?} after it",
        acquired - released
    );
    assert_eq!(permits.permits(), 2);
    assert_eq!(server.cmd::<String>(&["GET", name]), "0");
}

async fn a_rust_release_wakes_a_java_waiter(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rust-frees";
    let pool = rust.semaphore(name);
    pool.try_set_permits(2).await.unwrap();

    // Rust holds both; a Java thread waits for two, and a dropped Rust guard frees them.
    let held = pool.acquire(2).await.unwrap();
    let before = script_calls(&server);
    let java_waits = sem(&java, "semAcquire", name, "w", json!({ "permits": 2 }));
    let freed = async {
        until_java_waits(&java, &server, &semaphore_channel(name), before).await;
        drop(held);
    };
    let (acquired, ()) = timeout(PROMPT, async { tokio::join!(java_waits, freed) })
        .await
        .expect("the Java waiter was woken by the Rust release's message");
    acquired.unwrap();
    assert_eq!(server.cmd::<String>(&["GET", name]), "0", "Java took both");

    // And Semaphore::release (no guard) wakes it too.
    let before = script_calls(&server);
    let java_waits = sem(&java, "semAcquire", name, "w", json!({ "permits": 1 }));
    let freed = async {
        until_java_waits(&java, &server, &semaphore_channel(name), before).await;
        pool.release(1).await.unwrap()
    };
    let (acquired, count) = timeout(PROMPT, async { tokio::join!(java_waits, freed) })
        .await
        .expect("the Java waiter was woken by the Rust release's message");
    acquired.unwrap();
    assert_eq!(count, 1);
    assert_eq!(server.cmd::<String>(&["GET", name]), "0");
}

// ---------------------------------------------------------------------------------------------
// Count-down latch.

fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

async fn java_and_rust_count_one_latch_down(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "shared-gate";
    let gate = rust.count_down_latch(name);

    let set = java
        .call("latchTrySetCount", name, "t", json!({ "count": 3 }))
        .await;
    assert_eq!(set.unwrap(), json!(true));
    assert!(!gate.try_set_count(9).await.unwrap(), "Java set it");
    assert_eq!(gate.count().await.unwrap(), 3);
    assert_eq!(gate.count_down().await.unwrap(), 2);
    java.call("latchCountDown", name, "t", json!({}))
        .await
        .unwrap();
    let count = java.call("latchGetCount", name, "t", json!({})).await;
    assert_eq!(count.unwrap(), json!(1));
    assert_eq!(gate.count_down().await.unwrap(), 0);
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0, "deleted at zero");
    let open = java
        .call("latchAwait", name, "t", json!({ "waitMs": 0 }))
        .await;
    assert_eq!(open.unwrap(), json!(true), "Java sees it open");

    // Rust sets it, Java deletes it: open for both.
    assert!(gate.try_set_count(2).await.unwrap());
    let count = java.call("latchGetCount", name, "t", json!({})).await;
    assert_eq!(count.unwrap(), json!(2));
    let deleted = java.call("latchDelete", name, "t", json!({})).await;
    assert_eq!(deleted.unwrap(), json!(true));
    assert!(gate.wait_for(Duration::ZERO).await.unwrap());
}

async fn a_java_count_down_opens_the_latch_for_rust_waiters(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "java-opens";
    let gate = rust.count_down_latch(name);
    gate.try_set_count(1).await.unwrap();

    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let gate = gate.clone();
            tokio::spawn(async move {
                gate.wait().await.unwrap();
                Instant::now()
            })
        })
        .collect();
    server.until_subscribers(&latch_channel(name), 1).await;
    let opened = Instant::now();
    java.call("latchCountDown", name, "t", json!({}))
        .await
        .unwrap();
    for waiter in waiters {
        let at = timeout(PROMPT, waiter).await.unwrap().unwrap();
        assert!(
            at - opened < BY_MESSAGE,
            "woken by Java's opening message, {:?} after it",
            at - opened
        );
    }
}

async fn a_rust_count_down_opens_the_latch_for_a_java_waiter(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "rust-opens";
    let gate = rust.count_down_latch(name);
    gate.try_set_count(2).await.unwrap();

    let java_waits = java.call("latchAwait", name, "w", json!({ "waitMs": 30_000 }));
    let opens = async {
        server.until_subscribers(&latch_channel(name), 1).await;
        // (No event shows the Java thread parked behind its look at the count.)
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(gate.count_down().await.unwrap(), 1);
        assert_eq!(gate.count_down().await.unwrap(), 0);
        Instant::now()
    };
    let (opened, at) = timeout(PROMPT, async {
        let (opened, at) = tokio::join!(java_waits, opens);
        (opened, (at, Instant::now()))
    })
    .await
    .expect("the Java waiter was woken by the Rust count-down's message");
    assert_eq!(opened.unwrap(), json!(true));
    let (counted, answered) = at;
    assert!(
        answered - counted < Duration::from_secs(2),
        "Java's 30 s wait ended {:?} after the count-down",
        answered - counted
    );
}

// ---------------------------------------------------------------------------------------------
// Semaphore with expiring permits.

/// The permits listed in `{name}:timeout`, as hex ids.
fn permit_ids(server: &RedisServer, name: &str) -> Vec<String> {
    let ids: Vec<Vec<u8>> = server.cmd(&["ZRANGE", &format!("{{{name}}}:timeout"), "0", "-1"]);
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    ids.iter().map(|id| hex(id)).collect()
}

async fn java_and_rust_share_one_permit_semaphore(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "shared-permits";
    let jobs = rust.permit_semaphore(name);
    let perm = |op: &'static str, extra: Value| java.call(op, name, "t", extra);

    assert_eq!(
        perm("permTrySetPermits", json!({ "permits": 3 }))
            .await
            .unwrap(),
        json!(true)
    );
    assert!(!jobs.try_set_permits(9).await.unwrap(), "Java set it");
    assert_eq!(jobs.available_permits().await.unwrap(), 3);

    // Each side's ids, as the other reads them.
    let ours = jobs.acquire(redisson_lock::Lease::Watchdog).await.unwrap();
    let theirs = perm("permAcquire", json!({ "leaseMs": 60_000 }))
        .await
        .unwrap();
    let theirs = theirs
        .as_str()
        .expect("Java answers the permit id")
        .to_string();
    let mut listed = permit_ids(&server, name);
    listed.sort();
    let mut expected = vec![ours.id().to_string(), theirs.clone()];
    expected.sort();
    assert_eq!(listed, expected, "both ids, in Redisson's encoding");
    assert_eq!(perm("permAcquired", json!({})).await.unwrap(), json!(2));
    assert_eq!(perm("permAvailable", json!({})).await.unwrap(), json!(1));
    assert_eq!(jobs.permits().await.unwrap(), 3);

    // Rust updates and gives back Java's permit; Java updates Rust's.
    assert!(jobs
        .update_lease_time(&theirs, Some(Duration::from_secs(90)))
        .await
        .unwrap());
    assert!(jobs.try_release(&theirs).await.unwrap());
    let again = perm("permTryRelease", json!({ "permit": theirs }))
        .await
        .unwrap();
    assert_eq!(again, json!(false), "given back once");
    let updated = perm(
        "permUpdateLease",
        json!({ "permit": ours.id(), "leaseMs": 60_000 }),
    );
    assert_eq!(updated.await.unwrap(), json!(true));

    // Java's setPermits and addPermits, Rust's counts.
    perm("permSetPermits", json!({ "permits": 5 }))
        .await
        .unwrap();
    assert_eq!(
        jobs.available_permits().await.unwrap(),
        4,
        "5 in all, 1 taken"
    );
    perm("permAddPermits", json!({ "permits": 2 }))
        .await
        .unwrap();
    assert_eq!(jobs.permits().await.unwrap(), 7);
    assert_eq!(jobs.add_permits(-2).await.unwrap(), 4);
    assert_eq!(perm("permPermits", json!({})).await.unwrap(), json!(5));

    // Java gives back the Rust holder's permit behind its back: told as lost.
    let released = perm("permTryRelease", json!({ "permit": ours.id() }))
        .await
        .unwrap();
    assert_eq!(released, json!(true));
    timeout(Duration::from_millis(WATCHDOG_MS), ours.lost())
        .await
        .expect("the renewal found the permit gone and said so");
    assert!(permit_ids(&server, name).is_empty());
    assert_eq!(jobs.available_permits().await.unwrap(), 5);
}

async fn permit_releases_wake_waiters_across_sides(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "permit-wakes";
    let jobs = rust.permit_semaphore(name);
    jobs.try_set_permits(1).await.unwrap();
    let perm =
        |op: &'static str, thread: &'static str, extra: Value| java.call(op, name, thread, extra);

    // Java holds the one permit (no lease: no expiry to wake at); its release wakes Rust.
    let theirs = perm("permAcquire", "t", json!({})).await.unwrap();
    let waiter = tokio::spawn({
        let jobs = jobs.clone();
        async move {
            let permit = jobs.acquire(redisson_lock::Lease::Watchdog).await.unwrap();
            (Instant::now(), permit)
        }
    });
    server.until_subscribers(&semaphore_channel(name), 1).await;
    let released = Instant::now();
    perm("permRelease", "t", json!({ "permit": theirs }))
        .await
        .unwrap();
    let (acquired, ours) = timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(
        acquired - released < BY_MESSAGE,
        "woken by Java's release message, {:?} after it",
        acquired - released
    );

    // Rust holds it (a long fixed lease: Java's expiry hint is a minute away); a dropped
    // Rust guard wakes the Java waiter by its message.
    drop(ours);
    let ours = jobs
        .acquire(redisson_lock::Lease::Fixed(Duration::from_secs(60)))
        .await
        .unwrap();
    let before = script_calls(&server);
    let java_waits = perm("permTryAcquire", "w", json!({ "waitMs": 5_000 }));
    let freed = async {
        until_java_waits(&java, &server, &semaphore_channel(name), before).await;
        let freed = Instant::now();
        drop(ours);
        freed
    };
    let (acquired, freed) = timeout(PROMPT, async { tokio::join!(java_waits, freed) })
        .await
        .unwrap();
    let id = acquired.unwrap();
    assert!(id.is_string(), "Java took the permit: {id}");
    assert!(
        freed.elapsed() < Duration::from_secs(2),
        "by the message, not the minute"
    );
    assert_eq!(
        permit_ids(&server, name),
        vec![id.as_str().unwrap().to_string()]
    );
}

async fn an_expired_permit_comes_back_across_sides(jar: &Path) {
    let Setup {
        java,
        rust,
        server: _server,
    } = setup(jar).await;
    let name = "permit-expires";
    let jobs = rust.permit_semaphore(name);
    jobs.try_set_permits(1).await.unwrap();
    let lease = Duration::from_millis(500);
    let perm = |op: &'static str, extra: Value| java.call(op, name, "t", extra);

    // A Java holder's leased permit (nothing renews it, nothing publishes its end): a Rust
    // waiter takes it at its expiry, by the acquire's hint.
    perm(
        "permAcquire",
        json!({ "leaseMs": lease.as_millis() as u64 }),
    )
    .await
    .unwrap();
    let taken = Instant::now();
    let ours = jobs
        .try_acquire(
            redisson_lock::Wait::AtMost(PROMPT),
            redisson_lock::Lease::Watchdog,
        )
        .await
        .unwrap()
        .expect("Java's expired permit came back");
    let waited = taken.elapsed();
    assert!(waited >= lease - Duration::from_millis(100), "{waited:?}");
    assert!(waited < lease + Duration::from_millis(700), "{waited:?}");

    // A Rust holder gone quiet: a Java waiter takes its permit at its expiry.
    ours.release().await.unwrap();
    jobs.acquire(redisson_lock::Lease::Fixed(lease))
        .await
        .unwrap()
        .forget();
    let taken = Instant::now();
    let id = perm("permTryAcquire", json!({ "waitMs": 5_000 }))
        .await
        .unwrap();
    assert!(id.is_string(), "Java took the expired permit: {id}");
    let waited = taken.elapsed();
    assert!(waited >= lease - Duration::from_millis(100), "{waited:?}");
    assert!(waited < lease + Duration::from_millis(700), "{waited:?}");
}
