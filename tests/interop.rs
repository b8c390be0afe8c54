//! Interop with the real Redisson (issue #3): a Rust [`Lock`] and a Java `RLock` of the same
//! name are one lock, in both directions, for every Redisson version the agent is built for.
//!
//! Each scenario is an `async fn scenario(jar)`; `scenarios!` turns it into one test per
//! Redisson version (`redisson_3_23_4::<scenario>`, `redisson_4_7_0::<scenario>`), so a failure
//! names the version. Two tests are not per version: `all_three_*` (both Java versions and Rust
//! on one key) and `mixed_fleet_*` (the mutual-exclusion checker under load).
//!
//! Both sides run with the same 1500 ms watchdog timeout (renewal every 500 ms) unless a test
//! says otherwise. Holders whose unlock must *wake* a waiter take a 30 s lease: a waiter that gets
//! in within seconds can only have been woken by the unlock message.
//!
//! [`Lock`]: redisson_lock::Lock

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redisson_lock::{LockClient, LockGuard, Owner};
use support::java::{agent_jars, JavaAgent};
use support::{eventually, RedisServer, Relay};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The watchdog timeout of both sides.
const WATCHDOG_MS: u64 = 1500;
const LEASE: Duration = Duration::from_millis(WATCHDOG_MS);
/// A holder's lease long enough that only the unlock message explains a prompt wake.
const LONG_LEASE_MS: u64 = 30_000;
const LONG_LEASE: Duration = Duration::from_millis(LONG_LEASE_MS);
/// A hand-off counts as prompt within this (far below any lease a waiter could be timing out on).
const PROMPT: Duration = Duration::from_secs(5);
/// How long a waiter must stay out while the lock is held, in the "not before" checks.
const STAYS_OUT: Duration = Duration::from_millis(500);

// ---------------------------------------------------------------------------------------------
// One test per Redisson version per scenario.

support::java::scenarios!(
    java_holds_rust_cannot_acquire_and_sees_the_java_field,
    java_unlock_wakes_a_rust_waiter_by_message,
    rust_unlock_wakes_a_java_waiter_by_message_and_not_before,
    java_reentrancy_keeps_rust_out_until_the_last_unlock,
    rust_reentrancy_keeps_java_out_until_the_last_unlock,
    java_watchdog_keeps_the_lock_past_several_leases,
    rust_watchdog_keeps_the_lock_past_several_leases,
    rust_unlock_after_its_lease_expired_and_java_took_over_is_refused,
    rust_unlock_after_delete_and_java_takeover_is_not_owner,
    java_unlock_of_a_rust_lock_is_illegal_monitor_state,
    java_force_unlock_signals_the_rust_holder_and_wakes_a_rust_waiter,
    java_force_unlock_is_told_to_a_listening_rust_holder_at_once,
    rust_force_unlock_wakes_a_java_waiter_by_message,
    java_lease_only_lock_expires_on_time_for_rust,
    rust_lease_only_lock_expires_on_time_for_java,
    hash_tagged_names_share_the_channel_both_ways,
    rust_shutdown_releases_reentrant_holds_and_wakes_a_java_waiter,
    a_killed_jvm_holder_is_outwaited_by_its_last_renewed_lease,
    a_busy_rust_relay_with_hand_offs_does_not_starve_a_java_waiter,
);

#[test]
fn the_generated_versions_are_the_built_ones() {
    let built: Vec<String> = agent_jars().into_iter().map(|(v, _)| v).collect();
    assert_eq!(
        built,
        ["3.23.4", "4.7.0"],
        "interop/versions.txt changed: update the `scenarios!` macro so every version is tested"
    );
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// One Redis, one Redisson JVM and one Rust client, all with the 1500 ms watchdog. Fields drop
/// in order: the JVM first, the Redis server last.
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

fn hgetall(server: &RedisServer, key: &str) -> BTreeMap<String, String> {
    server.cmd(&["HGETALL", key])
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

fn only(field: &str, count: u32) -> BTreeMap<String, String> {
    BTreeMap::from([(field.to_string(), count.to_string())])
}

/// Redisson's channel name: the name in a hash tag, unless it already contains `{`.
fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

fn subscribers(server: &RedisServer, name: &str) -> i64 {
    let reply: Vec<redis::Value> = server.cmd(&["PUBSUB", "NUMSUB", &channel(name)]);
    match reply.get(1) {
        Some(redis::Value::Int(n)) => *n,
        _ => 0,
    }
}

/// Waits until at least `n` connections are subscribed to the lock's channel (waiters parked).
async fn until_subscribers(server: &RedisServer, name: &str, n: i64) {
    assert!(
        eventually(PROMPT, || subscribers(server, name) >= n).await,
        "fewer than {n} waiters subscribed to {} (have {})",
        channel(name),
        subscribers(server, name)
    );
}

/// Spawns a Rust waiter blocked in `lock()`; the task returns when it acquired.
fn spawn_rust_waiter(
    client: &LockClient,
    name: &str,
) -> tokio::task::JoinHandle<(Instant, LockGuard)> {
    let lock = client.lock(name);
    tokio::spawn(async move {
        let guard = lock.lock().await.expect("rust waiter lock()");
        (Instant::now(), guard)
    })
}

// ---------------------------------------------------------------------------------------------
// 1. Java holds: Rust cannot acquire, and reads Java's field.

async fn java_holds_rust_cannot_acquire_and_sees_the_java_field(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    s.java.lock("s1", "a").await.unwrap();

    let lock = s.rust.lock("s1");
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "Rust acquired a lock Redisson holds"
    );
    assert_eq!(
        hgetall(&s.server, "s1"),
        only(&java_field, 1),
        "the hash is exactly Redisson's <clientId>:<threadId> = 1"
    );
    assert!(java_field.starts_with(s.java.client_id()));
    assert!(lock.is_locked().await.unwrap());
    let remaining = lock.remaining_lease().await.unwrap().expect("held");
    assert!(remaining <= LEASE && !remaining.is_zero(), "{remaining:?}");
    // A Rust owner has no hold on it, and Java's hold is untouched by the failed attempt.
    assert_eq!(lock.hold_count_of(Owner::new()).await.unwrap(), 0);
    assert_eq!(s.java.hold_count("s1", "a").await.unwrap(), 1);

    s.java.unlock("s1", "a").await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    let guard = lock
        .try_lock()
        .await
        .unwrap()
        .expect("free after Java's unlock");
    guard.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 2. Java unlock wakes a Rust waiter.

async fn java_unlock_wakes_a_rust_waiter_by_message(jar: &Path) {
    let s = setup(jar).await;
    s.java.lock_lease("s2", "a", LONG_LEASE_MS).await.unwrap();
    let waiter = spawn_rust_waiter(&s.rust, "s2");
    until_subscribers(&s.server, "s2", 1).await;
    assert!(!waiter.is_finished(), "the waiter got in while Java holds");

    let unlocked_at = Instant::now();
    s.java.unlock("s2", "a").await.unwrap();
    let (acquired_at, guard) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("the Rust waiter was not woken by Redisson's unlock message (Java's lease is 30 s)")
        .unwrap();
    assert!(acquired_at >= unlocked_at);
    assert_eq!(hgetall(&s.server, "s2"), only(&guard.owner_field(), 1));
    guard.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 3. Rust unlock wakes a Java waiter, and not before.

async fn rust_unlock_wakes_a_java_waiter_by_message_and_not_before(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    let guard = s.rust.lock("s3").lock_with_lease(LONG_LEASE).await.unwrap();
    let mut waiter = s.java.lock_async_report("s3", "a", None).await;
    until_subscribers(&s.server, "s3", 1).await;
    assert!(
        waiter.within(STAYS_OUT).await.is_none(),
        "Redisson acquired while Rust holds"
    );
    assert_eq!(hgetall(&s.server, "s3"), only(&guard.owner_field(), 1));

    guard.unlock().await.unwrap();
    assert!(
        waiter.within(PROMPT).await.is_some(),
        "the Java waiter was not woken by the Rust unlock message (Rust's lease is 30 s)"
    );
    assert_eq!(hgetall(&s.server, "s3"), only(&java_field, 1));
    s.java.unlock("s3", "a").await.unwrap();
    assert_eq!(s.server.cmd::<i64>(&["EXISTS", "s3"]), 0);
}

// ---------------------------------------------------------------------------------------------
// 4. Reentrancy, both directions.

async fn java_reentrancy_keeps_rust_out_until_the_last_unlock(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    let lock = s.rust.lock("s4");
    s.java.lock("s4", "a").await.unwrap();
    s.java.lock("s4", "a").await.unwrap();
    assert_eq!(s.java.hold_count("s4", "a").await.unwrap(), 2);
    assert_eq!(hgetall(&s.server, "s4"), only(&java_field, 2));
    assert!(lock.try_lock().await.unwrap().is_none());

    s.java.unlock("s4", "a").await.unwrap();
    assert_eq!(s.java.hold_count("s4", "a").await.unwrap(), 1);
    assert_eq!(hgetall(&s.server, "s4"), only(&java_field, 1));
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "Rust got in after Java's first of two unlocks"
    );
    assert!(lock.is_locked().await.unwrap());

    s.java.unlock("s4", "a").await.unwrap();
    assert_eq!(s.java.hold_count("s4", "a").await.unwrap(), 0);
    assert!(hgetall(&s.server, "s4").is_empty());
    let guard = lock
        .try_lock()
        .await
        .unwrap()
        .expect("free after the last unlock");
    guard.unlock().await.unwrap();
}

async fn rust_reentrancy_keeps_java_out_until_the_last_unlock(jar: &Path) {
    let s = setup(jar).await;
    let owner = Owner::new();
    let lock = s.rust.lock("s4r").with_owner(owner);
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    let field = outer.owner_field().to_string();
    assert_eq!(inner.owner_field(), field, "one owner, one field");
    assert_eq!(lock.hold_count_of(owner).await.unwrap(), 2);
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert_eq!(hgetall(&s.server, "s4r"), only(&field, 2));
    assert!(!s.java.try_lock("s4r", "b", 0, None).await.unwrap());
    assert_eq!(s.java.hold_count("s4r", "b").await.unwrap(), 0);
    assert!(s.java.is_locked("s4r", "b").await.unwrap());

    inner.unlock().await.unwrap();
    assert_eq!(lock.hold_count_of(owner).await.unwrap(), 1);
    assert_eq!(hgetall(&s.server, "s4r"), only(&field, 1));
    assert!(
        !s.java.try_lock("s4r", "b", 0, None).await.unwrap(),
        "Redisson got in after Rust's first of two unlocks"
    );

    outer.unlock().await.unwrap();
    assert_eq!(lock.hold_count_of(owner).await.unwrap(), 0);
    assert!(s.java.try_lock("s4r", "b", 0, None).await.unwrap());
    assert_eq!(s.java.hold_count("s4r", "b").await.unwrap(), 1);
    s.java.unlock("s4r", "b").await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 5. The watchdog of each side keeps the lock past several leases.

async fn java_watchdog_keeps_the_lock_past_several_leases(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    s.java.lock("s5", "a").await.unwrap();
    let lock = s.rust.lock("s5");
    let started = Instant::now();
    let got = lock.try_lock_for(LEASE * 3 + LEASE / 3).await.unwrap();
    assert!(
        got.is_none(),
        "Redisson's lock expired while its watchdog should renew it"
    );
    assert!(started.elapsed() >= LEASE * 3);
    let ttl = pttl(&s.server, "s5");
    assert!(ttl > 0 && ttl <= WATCHDOG_MS as i64, "renewed TTL {ttl}");
    assert_eq!(hgetall(&s.server, "s5"), only(&java_field, 1));

    let waiter = spawn_rust_waiter(&s.rust, "s5");
    until_subscribers(&s.server, "s5", 1).await;
    s.java.unlock("s5", "a").await.unwrap();
    let (_, guard) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("the Rust waiter did not get the lock after Java's unlock")
        .unwrap();
    assert_eq!(hgetall(&s.server, "s5"), only(&guard.owner_field(), 1));
    guard.unlock().await.unwrap();
}

async fn rust_watchdog_keeps_the_lock_past_several_leases(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("b").await;
    let guard = s.rust.lock("s5r").lock().await.unwrap();
    let started = Instant::now();
    let got = s
        .java
        .try_lock("s5r", "b", WATCHDOG_MS * 3 + WATCHDOG_MS / 3, None)
        .await
        .unwrap();
    assert!(
        !got,
        "the Rust lock expired while its watchdog should renew it"
    );
    assert!(started.elapsed() >= LEASE * 3);
    let ttl = pttl(&s.server, "s5r");
    assert!(ttl > 0 && ttl <= WATCHDOG_MS as i64, "renewed TTL {ttl}");
    assert!(!guard.is_lost());
    assert_eq!(s.rust.renewed_locks(), 1);
    assert_eq!(hgetall(&s.server, "s5r"), only(&guard.owner_field(), 1));

    let mut waiter = s.java.lock_async_report("s5r", "b", None).await;
    until_subscribers(&s.server, "s5r", 1).await;
    assert!(waiter.within(Duration::from_millis(100)).await.is_none());
    guard.unlock().await.unwrap();
    assert!(
        waiter.within(PROMPT).await.is_some(),
        "the Java waiter did not get the lock after Rust's unlock"
    );
    assert_eq!(hgetall(&s.server, "s5r"), only(&java_field, 1));
    s.java.unlock("s5r", "b").await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 6. Unlocking a lock the other side holds is refused and changes nothing.

async fn rust_unlock_after_its_lease_expired_and_java_took_over_is_refused(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    let guard = s
        .rust
        .lock("s6")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let mut java = s.java.lock_async_report("s6", "a", None).await;
    java.acquired().await; // after the Rust lease ran out
    let before = hgetall(&s.server, "s6");
    assert_eq!(before, only(&java_field, 1));

    let err = guard.unlock().await.unwrap_err();
    assert!(
        err.is_not_owner() || err.is_lock_lost(),
        "unlock of a lock Java took over: {err}"
    );
    assert_eq!(
        hgetall(&s.server, "s6"),
        before,
        "the Java holder's hash changed"
    );
    assert!(s.java.is_held_by_thread("s6", "a").await.unwrap());
    s.java.unlock("s6", "a").await.unwrap();
}

async fn rust_unlock_after_delete_and_java_takeover_is_not_owner(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    // The Rust holder renews only every 10 s (30 s watchdog), so its unlock certainly runs before
    // any renewal could notice the takeover: Redis itself must refuse it.
    let holder = LockClient::with_config(s.server.config().with_watchdog_timeout(LONG_LEASE))
        .await
        .unwrap();
    let guard = holder.lock("s6d").lock().await.unwrap();
    let _: i64 = s.server.cmd(&["DEL", "s6d"]);
    s.java.lock("s6d", "a").await.unwrap();
    let before = hgetall(&s.server, "s6d");
    assert_eq!(before, only(&java_field, 1));
    assert!(!guard.is_lost(), "no renewal can have run yet");

    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_owner(), "expected NotOwner, got {err}");
    assert_eq!(
        hgetall(&s.server, "s6d"),
        before,
        "the Java holder's hash changed"
    );
    let ttl = pttl(&s.server, "s6d");
    assert!(
        ttl > 0 && ttl <= WATCHDOG_MS as i64,
        "Java's TTL was touched: {ttl}"
    );
    assert_eq!(
        holder.renewed_locks(),
        0,
        "the refused hold is still renewed"
    );
    assert!(s.java.is_held_by_thread("s6d", "a").await.unwrap());
    s.java.unlock("s6d", "a").await.unwrap();
}

async fn java_unlock_of_a_rust_lock_is_illegal_monitor_state(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    let guard = s.rust.lock("s6j").lock().await.unwrap();
    let before = hgetall(&s.server, "s6j");
    assert_eq!(before, only(&guard.owner_field(), 1));

    let err = s.java.unlock("s6j", "a").await.unwrap_err();
    assert!(err.is_illegal_monitor_state(), "{err}");
    let thread_id = java_field.rsplit(':').next().unwrap();
    assert!(
        err.message.contains("not locked by current thread")
            && err.message.contains(s.java.client_id())
            && err.message.contains(&format!("thread-id: {thread_id}")),
        "{err}"
    );
    assert_eq!(
        hgetall(&s.server, "s6j"),
        before,
        "the Rust holder's hash changed"
    );
    assert!(!s.java.is_held_by_thread("s6j", "a").await.unwrap());
    assert!(s.rust.lock("s6j").is_held_by(guard.owner()).await.unwrap());
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    assert_eq!(s.server.cmd::<i64>(&["EXISTS", "s6j"]), 0);
}

// ---------------------------------------------------------------------------------------------
// 7. Force unlock, both directions.

async fn java_force_unlock_signals_the_rust_holder_and_wakes_a_rust_waiter(jar: &Path) {
    let s = setup(jar).await;
    // The holder's lease is 30 s but it renews every 500 ms: a waiter that gets in within
    // seconds was woken by the message, and the holder learns of the loss within a renewal.
    let holder = LockClient::with_config(
        s.server
            .config()
            .with_watchdog_timeout(LONG_LEASE)
            .with_renewal_interval(LEASE / 3),
    )
    .await
    .unwrap();
    let guard = holder.lock("s7").lock().await.unwrap();
    let token = guard.lost_token();
    let waiter = spawn_rust_waiter(&s.rust, "s7");
    until_subscribers(&s.server, "s7", 1).await;
    assert!(!waiter.is_finished());

    assert!(s.java.force_unlock("s7", "a").await.unwrap());
    let (_, next) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("the Rust waiter was not woken by Redisson's forceUnlock message")
        .unwrap();
    assert_eq!(hgetall(&s.server, "s7"), only(&next.owner_field(), 1));
    tokio::time::timeout(LEASE * 2, guard.lost())
        .await
        .expect("the Rust holder's lock-lost signal did not fire after forceUnlock");
    assert!(token.is_cancelled());
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lock_lost() || err.is_not_owner(), "{err}");
    assert_eq!(
        hgetall(&s.server, "s7"),
        only(&next.owner_field(), 1),
        "the stale holder touched the new holder's hash"
    );
    next.unlock().await.unwrap();
}

/// Loss told at once (`with_prompt_loss_detection`): the holder hears Redisson's `forceUnlock()`
/// message on its lock's channel, checks its hold, and is told within a round trip, where its
/// next renewal is 10 s away (about 8 s on average before: issue #25).
async fn java_force_unlock_is_told_to_a_listening_rust_holder_at_once(jar: &Path) {
    let s = setup(jar).await;
    let holder = LockClient::with_config(
        s.server
            .config()
            .with_watchdog_timeout(LONG_LEASE)
            .with_prompt_loss_detection(true),
    )
    .await
    .unwrap();
    let guard = holder.lock("s7p").lock().await.unwrap();
    until_subscribers(&s.server, "s7p", 1).await;
    let forced = Instant::now();
    assert!(s.java.force_unlock("s7p", "a").await.unwrap());
    tokio::time::timeout(LEASE, guard.lost())
        .await
        .expect("told well before the next renewal, 10 s away");
    let window = forced.elapsed();
    println!("Redisson forceUnlock() to the Rust holder's lost signal: {window:?}");
    assert!(window < Duration::from_millis(500), "{window:?}");
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());
    holder.shutdown().await;
}

async fn rust_force_unlock_wakes_a_java_waiter_by_message(jar: &Path) {
    let s = setup(jar).await;
    let waiter_field = s.java.field("b").await;
    s.java.lock_lease("s7r", "a", LONG_LEASE_MS).await.unwrap();
    let mut waiter = s.java.lock_async_report("s7r", "b", None).await;
    until_subscribers(&s.server, "s7r", 1).await;
    assert!(waiter.within(STAYS_OUT).await.is_none());

    assert!(s.rust.lock("s7r").force_unlock().await.unwrap());
    assert!(
        waiter.within(PROMPT).await.is_some(),
        "the Java waiter was not woken by the Rust force_unlock message (holder's lease is 30 s)"
    );
    assert_eq!(hgetall(&s.server, "s7r"), only(&waiter_field, 1));
    assert!(!s.java.is_held_by_thread("s7r", "a").await.unwrap());
    assert!(s.rust.lock("s7r").try_lock().await.unwrap().is_none());
    s.java.unlock("s7r", "b").await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 8. Lease-only locks expire on time for the other side.

async fn java_lease_only_lock_expires_on_time_for_rust(jar: &Path) {
    let s = setup(jar).await;
    let before_acquire = Instant::now();
    s.java.lock_lease("s8", "a", 800).await.unwrap();
    let ttl = pttl(&s.server, "s8");
    assert!(
        ttl > 0 && ttl <= 800,
        "PTTL right after lock(800 ms): {ttl}"
    );
    let got = s
        .rust
        .lock("s8")
        .try_lock_for(Duration::from_secs(5))
        .await
        .unwrap();
    let guard = got.expect("Redisson's 800 ms lease did not expire");
    let waited = before_acquire.elapsed();
    assert!(
        waited >= Duration::from_millis(790) && waited < Duration::from_millis(800) + LEASE * 2,
        "acquired {waited:?} after Java's 800 ms lease began"
    );
    assert_eq!(hgetall(&s.server, "s8"), only(&guard.owner_field(), 1));
    guard.unlock().await.unwrap();
}

async fn rust_lease_only_lock_expires_on_time_for_java(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    let before_acquire = Instant::now();
    let guard = s
        .rust
        .lock("s8r")
        .lock_with_lease(Duration::from_millis(800))
        .await
        .unwrap();
    let ttl = pttl(&s.server, "s8r");
    assert!(
        ttl > 0 && ttl <= 800,
        "PTTL right after lock_with_lease(800 ms): {ttl}"
    );
    assert_eq!(guard.lease(), Some(Duration::from_millis(800)));
    assert_eq!(
        s.rust.renewed_locks(),
        0,
        "a fixed lease must not be renewed"
    );

    assert!(
        s.java.try_lock("s8r", "a", 5000, None).await.unwrap(),
        "the Rust 800 ms lease did not expire for Redisson"
    );
    let waited = before_acquire.elapsed();
    assert!(
        waited >= Duration::from_millis(790) && waited < Duration::from_millis(800) + LEASE * 2,
        "Java acquired {waited:?} after Rust's 800 ms lease began"
    );
    assert_eq!(hgetall(&s.server, "s8r"), only(&java_field, 1));
    tokio::time::timeout(LEASE, guard.lost())
        .await
        .expect("the expired Rust hold's lock-lost signal");
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lock_lost() || err.is_not_owner(), "{err}");
    assert_eq!(hgetall(&s.server, "s8r"), only(&java_field, 1));
    s.java.unlock("s8r", "a").await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Names that carry their own hash tag: the channel then has no added braces, on both sides.

async fn hash_tagged_names_share_the_channel_both_ways(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    for name in ["{orders}:42", "half{open", "plain:7"] {
        // Java holds (30 s lease), Rust waits: Java's unlock message must reach Rust's channel.
        s.java.lock_lease(name, "a", LONG_LEASE_MS).await.unwrap();
        let waiter = spawn_rust_waiter(&s.rust, name);
        until_subscribers(&s.server, name, 1).await;
        s.java.unlock(name, "a").await.unwrap();
        let (_, guard) = tokio::time::timeout(PROMPT, waiter)
            .await
            .unwrap_or_else(|_| panic!("{name}: Rust waiter not woken by Redisson's unlock"))
            .unwrap();
        assert_eq!(
            hgetall(&s.server, name),
            only(&guard.owner_field(), 1),
            "{name}"
        );
        guard.unlock().await.unwrap();

        // Rust holds (30 s lease), Java waits: Rust's unlock message must reach Java's channel.
        let guard = s.rust.lock(name).lock_with_lease(LONG_LEASE).await.unwrap();
        let mut waiter = s.java.lock_async_report(name, "a", None).await;
        until_subscribers(&s.server, name, 1).await;
        assert!(
            waiter.within(Duration::from_millis(100)).await.is_none(),
            "{name}"
        );
        guard.unlock().await.unwrap();
        assert!(
            waiter.within(PROMPT).await.is_some(),
            "{name}: Java waiter not woken by the Rust unlock"
        );
        assert_eq!(hgetall(&s.server, name), only(&java_field, 1), "{name}");
        s.java.unlock(name, "a").await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Shutdown of a Rust client releases everything it holds, and Java waiters hear about it.

async fn rust_shutdown_releases_reentrant_holds_and_wakes_a_java_waiter(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    // A 30 s watchdog timeout, so neither the hold nor a partial release's TTL can run out
    // during the test: only the final release's message explains a prompt wake.
    let holder = LockClient::with_config(s.server.config().with_watchdog_timeout(LONG_LEASE))
        .await
        .unwrap();
    let lock = holder.lock("s10").with_owner(Owner::new());
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    assert_eq!(hgetall(&s.server, "s10"), only(&outer.owner_field(), 2));
    let mut waiter = s.java.lock_async_report("s10", "a", None).await;
    until_subscribers(&s.server, "s10", 1).await;
    assert!(waiter.within(Duration::from_millis(100)).await.is_none());

    holder.shutdown().await;
    assert!(
        waiter.within(PROMPT).await.is_some(),
        "the Java waiter was not woken by the releases of the Rust client's shutdown"
    );
    assert_eq!(hgetall(&s.server, "s10"), only(&java_field, 1));
    assert!(
        outer.is_lost() && inner.is_lost(),
        "guards outlived their client's shutdown"
    );
    assert!(inner.unlock().await.is_err());
    assert_eq!(hgetall(&s.server, "s10"), only(&java_field, 1));
    s.java.unlock("s10", "a").await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Local hand-off stops for a Redisson waiter: it listens on the channel, so the Rust client is
// no longer alone there, and its releases go back to plain unlocks whose message Redisson races.

async fn a_busy_rust_relay_with_hand_offs_does_not_starve_a_java_waiter(jar: &Path) {
    let s = setup(jar).await;
    let java_field = s.java.field("a").await;
    let relay = Relay::start(&s.rust, "s12", 2, Duration::from_millis(2));
    // Running and handing off: the Rust client is alone on the channel.
    assert!(eventually(PROMPT, || relay.acquisitions() >= 20).await);

    let mut waiter = s.java.lock_async_report("s12", "a", None).await;
    assert!(
        waiter.within(PROMPT).await.is_some(),
        "Redisson starved by the Rust client's hand-offs"
    );
    assert_eq!(hgetall(&s.server, "s12"), only(&java_field, 1));
    s.java.unlock("s12", "a").await.unwrap();
    relay.stop().await;
    assert_eq!(s.server.cmd::<i64>(&["EXISTS", "s12"]), 0);
}

// ---------------------------------------------------------------------------------------------
// A JVM that dies holding a watchdog lock: renewal stops, and a Rust waiter gets in once the last
// renewed lease (at most one watchdog timeout) runs out. No message ever comes.

async fn a_killed_jvm_holder_is_outwaited_by_its_last_renewed_lease(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let java_field = java.field("a").await;
    java.lock("s11", "a").await.unwrap();
    let waiter = spawn_rust_waiter(&rust, "s11");
    until_subscribers(&server, "s11", 1).await;
    assert_eq!(hgetall(&server, "s11"), only(&java_field, 1));

    drop(java); // SIGKILL: no unlock, no more renewals
    let killed_at = Instant::now();
    let (acquired_at, guard) = tokio::time::timeout(LEASE * 3, waiter)
        .await
        .expect("the Rust waiter did not outwait the dead JVM's lease")
        .unwrap();
    assert!(
        acquired_at - killed_at <= LEASE + Duration::from_secs(1),
        "the waiter took {:?}, more than one lease after the JVM died",
        acquired_at - killed_at
    );
    assert_eq!(hgetall(&server, "s11"), only(&guard.owner_field(), 1));
    guard.unlock().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 9. Both Redisson versions and Rust on one key.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Party {
    Rust,
    Java(usize),
}

/// Three rounds, one per side: that side takes the free lock (30 s lease) and holds it while the
/// other two wait in `lock()`; it releases, one waiter gets in promptly (the unlock message, not
/// the lease), releases in turn, and the last one gets in promptly too. A shared marker set with
/// `SET NX` by each holder proves nobody else was inside meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_three_redisson_3_and_4_and_rust_take_turns_on_one_key() {
    const KEY: &str = "trio";
    const MARKER: &str = "trio:marker";
    let server = RedisServer::start();
    let mut agents = Vec::new();
    for (_, jar) in agent_jars() {
        agents.push(Arc::new(
            JavaAgent::start(&jar, &server.url(), WATCHDOG_MS).await,
        ));
    }
    let rust = server.client().await;
    let parties: Vec<Party> = std::iter::once(Party::Rust)
        .chain((0..agents.len()).map(Party::Java))
        .collect();
    let name = |p: Party| match p {
        Party::Rust => "rust".to_string(),
        Party::Java(i) => format!("redisson-{}", agents[i].version()),
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<(Party, Option<LockGuard>)>();

    let mut slowest = Duration::ZERO;
    let mut rounds = Vec::new();
    for &first in &parties {
        // `first` takes the free lock directly.
        let mut guard = match first {
            Party::Rust => Some(rust.lock(KEY).lock_with_lease(LONG_LEASE).await.unwrap()),
            Party::Java(i) => {
                agents[i].lock_lease(KEY, "t", LONG_LEASE_MS).await.unwrap();
                None
            }
        };
        // The other two start waiting in lock(); each reports on `tx` once it holds the lock.
        for &p in parties.iter().filter(|&&p| p != first) {
            let tx = tx.clone();
            match p {
                Party::Rust => {
                    let lock = rust.lock(KEY);
                    tokio::spawn(async move {
                        let g = lock.lock_with_lease(LONG_LEASE).await.unwrap();
                        let _ = tx.send((Party::Rust, Some(g)));
                    });
                }
                Party::Java(i) => {
                    let mut h = agents[i]
                        .lock_async_report(KEY, "t", Some(LONG_LEASE_MS))
                        .await;
                    tokio::spawn(async move {
                        h.acquired().await;
                        let _ = tx.send((Party::Java(i), None));
                    });
                }
            }
        }
        until_subscribers(&server, KEY, 2).await;

        let mut holder = first;
        let mut order = vec![name(first)];
        for turn in 0..parties.len() {
            let marked: Option<String> = server.cmd(&["SET", MARKER, &name(holder), "NX"]);
            assert!(
                marked.is_some(),
                "{} got in while the marker was set: {order:?}",
                name(holder)
            );
            let waiting = turn + 1 < parties.len();
            if waiting {
                if let Ok(got) = tokio::time::timeout(STAYS_OUT, rx.recv()).await {
                    let who = got.map(|g| name(g.0));
                    panic!("{who:?} got in while {} holds: {order:?}", name(holder));
                }
            }
            let _: i64 = server.cmd(&["DEL", MARKER]);
            let released_at = Instant::now();
            match holder {
                Party::Rust => guard.take().unwrap().unlock().await.unwrap(),
                Party::Java(i) => agents[i].unlock(KEY, "t").await.unwrap(),
            }
            if !waiting {
                break;
            }
            let (next, g) = tokio::time::timeout(PROMPT, rx.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "no waiter got in promptly after {}'s unlock: {order:?}",
                        name(holder)
                    )
                })
                .unwrap();
            slowest = slowest.max(released_at.elapsed());
            assert!(
                !order.contains(&name(next)),
                "{} held twice: {order:?}",
                name(next)
            );
            holder = next;
            guard = g;
            order.push(name(next));
        }
        assert_eq!(order.len(), parties.len());
        assert!(
            eventually(PROMPT, || server.cmd::<i64>(&["EXISTS", KEY]) == 0).await,
            "the lock is still held after everyone released it: {order:?}"
        );
        rounds.push(order);
    }
    println!("all three, turns: {rounds:?}; slowest hand-off {slowest:?}");
}

// ---------------------------------------------------------------------------------------------
// The mixed-fleet checker (`support::fleet`), on one server.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_of_rust_and_both_redisson_versions_never_overlaps() {
    let server = RedisServer::start();
    let mut agents = Vec::new();
    for (_, jar) in agent_jars() {
        agents.push(Arc::new(
            JavaAgent::start(&jar, &server.url(), WATCHDOG_MS).await,
        ));
    }
    assert_eq!(agents.len(), 2, "two Redisson versions");
    let rust_clients = vec![server.client().await, server.client().await];
    let conn = server.async_conn().await;
    for hot in [true, false] {
        support::fleet::check(conn.clone(), &rust_clients, &agents, hot, "fleet").await;
        let leftovers: Vec<String> = server.cmd(&["KEYS", "fleet:*"]);
        assert!(leftovers.is_empty(), "locks left held: {leftovers:?}");
        let markers: Vec<String> = server.cmd(&["KEYS", "cs:holder:*"]);
        assert!(markers.is_empty(), "markers left: {markers:?}");
    }
}
