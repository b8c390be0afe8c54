//! The lock's data in Redis, ownership and reentrancy, unlock, and input checking.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use redisson_lock::{blocking, LockClient, LostReason, Owner};
use support::{eventually, spawn_waiter, RedisServer};

fn hash(server: &RedisServer, key: &str) -> HashMap<String, String> {
    server.cmd(&["HGETALL", key])
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_writes_redisson_layout() {
    let server = RedisServer::start();
    let client = server.client().await;
    let owner = Owner::new();
    let guard = client
        .lock("orders")
        .with_owner(owner)
        .lock()
        .await
        .unwrap();

    let expected_field = format!("{}:{}", client.client_id(), owner.id());
    assert_eq!(guard.owner_field(), expected_field);
    assert_eq!(
        hash(&server, "orders"),
        HashMap::from([(expected_field, "1".to_string())])
    );
    // The client id is a lower-case v4 UUID, as Redisson's.
    let id = uuid::Uuid::parse_str(client.client_id()).unwrap();
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(client.client_id(), client.client_id().to_lowercase());
    // TTL is the watchdog timeout (1.5 s in tests), freshly set.
    let ttl = pttl(&server, "orders");
    assert!(ttl > 500 && ttl <= 1500, "pttl {ttl}");

    guard.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "orders"]), 0);
    // The unlock latch is deleted (in the background) once its answer was read.
    let no_latches = || {
        server
            .cmd::<Vec<String>>(&["KEYS", "redisson_unlock_latch*"])
            .is_empty()
    };
    assert!(eventually(Duration::from_secs(5), no_latches).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_lease_sets_exact_ttl_and_reentry_resets_it() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("lease").with_owner(Owner::new());
    let first = lock.lock_with_lease(Duration::from_secs(60)).await.unwrap();
    assert_eq!(first.lease(), Some(Duration::from_secs(60)));
    let ttl = pttl(&server, "lease");
    assert!(ttl > 59_000 && ttl <= 60_000, "pttl {ttl}");
    let second = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let ttl = pttl(&server, "lease");
    assert!(
        ttl > 19_000 && ttl <= 20_000,
        "re-entry resets the TTL, not adds: {ttl}"
    );
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    second.unlock().await.unwrap();
    first.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_publishes_zero_on_the_lock_channel() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut sub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    sub.subscribe("redisson_lock__channel:{jobs}")
        .await
        .unwrap();
    let guard = client.lock("jobs").lock().await.unwrap();
    guard.unlock().await.unwrap();
    let mut messages = sub.on_message();
    let msg = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("unlock message")
        .unwrap();
    assert_eq!(msg.get_channel_name(), "redisson_lock__channel:{jobs}");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_scope_reenters_nested_calls() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("scoped");
    let other = client.lock("scoped");
    Owner::new()
        .scope(async {
            let outer = lock.lock().await.unwrap();
            // Nested code with its own handle, no guard passed in: re-enters.
            let inner = other.try_lock().await.unwrap().expect("re-entry");
            assert_eq!(lock.hold_count().await.unwrap(), 2);
            assert!(lock.is_held_by_current().await.unwrap());
            inner.unlock().await.unwrap();
            assert_eq!(lock.hold_count().await.unwrap(), 1);
            assert!(lock.is_locked().await.unwrap(), "outer hold remains");
            outer.unlock().await.unwrap();
        })
        .await;
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_owner_each_acquire_is_its_own_owner() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("plain");
    let held = lock.lock().await.unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "a second acquire must not re-enter"
    );
    assert_eq!(
        lock.hold_count().await.unwrap(),
        0,
        "no current owner outside a scope"
    );
    held.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_branches_do_not_share_a_hold() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("joined");
    let (acquired_tx, acquired_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let (first, second) = tokio::join!(
        async {
            let guard = lock.lock().await.unwrap();
            acquired_tx.send(()).unwrap();
            release_rx.await.unwrap();
            guard.unlock().await.unwrap();
        },
        async {
            acquired_rx.await.unwrap();
            // Same tokio task as the holder, but a different owner: excluded.
            let attempt = lock.try_lock().await.unwrap();
            let excluded = attempt.is_none();
            release_tx.send(()).unwrap();
            excluded
        }
    );
    let () = first;
    assert!(second, "a join! branch re-entered its sibling's hold");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_leave_no_identity_to_reuse() {
    let server = RedisServer::start();
    let client = server.client().await;
    // Many short tasks: tokio reuses task ids, which must never make them one owner.
    let mut guards = Vec::new();
    let lock = client.lock("task-ids");
    guards.push(
        tokio::spawn({
            let lock = lock.clone();
            async move { lock.lock().await.unwrap() }
        })
        .await
        .unwrap(),
    );
    for _ in 0..20 {
        let lock = lock.clone();
        let got = tokio::spawn(async move { lock.try_lock().await.unwrap().is_some() })
            .await
            .unwrap();
        assert!(!got, "a later task acquired a lock held by a finished one");
    }
    guards.pop().unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_owner_reenters_across_tasks_and_guard_moves() {
    let server = RedisServer::start();
    let client = server.client().await;
    let owner = Owner::new();
    let lock = client.lock("handles").with_owner(owner);
    let first = lock.lock().await.unwrap();
    let second = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert!(lock.is_held_by(owner).await.unwrap());
    assert!(!lock.is_held_by(Owner::new()).await.unwrap());
    // A guard may be unlocked from another task than the one that acquired it.
    tokio::spawn(async move { first.unlock().await.unwrap() })
        .await
        .unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    second.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_report_holder_and_lease() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("q");
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_lease().await.unwrap(), None);
    let owner = Owner::new();
    let guard = lock
        .clone()
        .with_owner(owner)
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count_of(owner).await.unwrap(), 1);
    let left = lock.remaining_lease().await.unwrap().unwrap();
    assert!(
        left > Duration::from_secs(29) && left <= Duration::from_secs(30),
        "{left:?}"
    );
    assert!(lock.force_unlock().await.unwrap());
    assert!(
        !lock.force_unlock().await.unwrap(),
        "second force unlock finds nothing"
    );
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noscript_after_script_flush_recovers() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("flushed");
    let g = lock.lock().await.unwrap();
    server.flush_scripts();
    g.unlock().await.unwrap();
    server.flush_scripts();
    let g = lock.lock().await.unwrap();
    server.flush_scripts();
    assert!(lock.force_unlock().await.unwrap());
    drop(g);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_guard_releases_in_the_background() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("dropped");
    let guard = lock.lock().await.unwrap();
    assert_eq!(client.renewed_locks(), 1);
    drop(guard);
    // Renewal stops synchronously, in Drop.
    assert_eq!(client.renewed_locks(), 0);
    // The unlock itself is sent by the background task: the waiter gets in.
    let next = lock.try_lock_for(Duration::from_secs(5)).await.unwrap();
    assert!(next.is_some());
}

#[test]
fn blocking_api_reenters_per_thread_and_excludes_other_threads() {
    let server = RedisServer::start();
    let client = blocking::LockClient::with_config(server.config()).unwrap();
    let lock = client.lock("threads");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());

    let other = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            let held_elsewhere = lock.try_lock().unwrap().is_none();
            let is_mine = lock.is_held_by_current_thread().unwrap();
            (held_elsewhere, is_mine)
        })
        .join()
        .unwrap()
    };
    assert_eq!(other, (true, false));

    inner.unlock().unwrap();
    outer.unlock().unwrap();
    let after = {
        let lock = lock.clone();
        std::thread::spawn(move || lock.try_lock().unwrap().map(|g| g.unlock()))
            .join()
            .unwrap()
    };
    assert!(matches!(after, Some(Ok(()))));
    client.shutdown();
}

#[tokio::test]
#[should_panic(expected = "inside an async runtime")]
async fn blocking_api_panics_inside_a_runtime() {
    let _ = blocking::LockClient::connect("redis://127.0.0.1:1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_everything_and_refuses_later_calls() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    let owner = Owner::new();
    let a = client.lock("s1").with_owner(owner).lock().await.unwrap();
    let a2 = client.lock("s1").with_owner(owner).lock().await.unwrap();
    let b = client
        .lock("s2")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let waiter = spawn_waiter(&other, "s1");

    client.shutdown().await;
    assert_eq!(server.cmd::<i64>(&["EXISTS", "s2"]), 0);
    // s1 may already belong to the waiter, but not to the shut-down client.
    assert!(hash(&server, "s1")
        .keys()
        .all(|f| !f.starts_with(client.client_id())));
    assert!(a.is_lost() && a2.is_lost() && b.is_lost());
    assert_eq!(a.lost_reason(), Some(LostReason::Shutdown));
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter woken by the shutdown's unlock")
        .unwrap();
    assert!(client
        .lock("s3")
        .try_lock()
        .await
        .unwrap_err()
        .is_shutdown());
    assert!(a.unlock().await.unwrap_err().is_lock_lost());
    drop((a2, b));
    got.unlock().await.unwrap();
}

/// A shutdown whose caller goes away at once still finishes: the holds are released, and a
/// second call returns once that work is done.
// One thread: the shutdown's task cannot start (let alone finish) before the first poll
// returns, so that poll is pending on any machine (with two workers it once finished first).
#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_shutdown_still_releases_everything() {
    let server = RedisServer::start();
    let client = server.client().await;
    let guards = [
        client.lock("cs1").lock().await.unwrap(),
        client.lock("cs2").lock().await.unwrap(),
    ];
    // Dropped at its first await: before any release went out.
    let mut first = Box::pin(client.shutdown());
    assert!(futures::poll!(first.as_mut()).is_pending());
    drop(first);
    client.shutdown().await;
    assert_eq!(server.cmd::<i64>(&["EXISTS", "cs1", "cs2"]), 0);
    assert!(guards.iter().all(|g| g.is_lost()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_prefix_maps_key_and_channel() {
    let server = RedisServer::start();
    let client = LockClient::with_config(server.config().with_key_prefix("app:"))
        .await
        .unwrap();
    let g = client.lock("x").lock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "app:x"]), 1);
    assert_eq!(client.lock("x").key(), "app:x");
    g.unlock().await.unwrap();
}

/// Spent unlock latches are deleted together, a sweep at a time, not one `DEL` per unlock;
/// none is left behind, and shutdown deletes the ones still waiting for their sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spent_latches_are_deleted_in_sweeps_and_at_shutdown() {
    let server = RedisServer::start();
    let client = server.client().await;
    let latches = || server.cmd::<Vec<String>>(&["KEYS", "redisson_unlock_latch*"]);
    let dels_before = server.command_calls("del");
    let unlocks = 200;
    let guards = futures::future::join_all((0..unlocks).map(|i| {
        let lock = client.lock(format!("sweep:{i}"));
        async move { lock.lock().await.unwrap() }
    }))
    .await;
    futures::future::join_all(guards.into_iter().map(|g| g.unlock()))
        .await
        .into_iter()
        .collect::<Result<Vec<()>, _>>()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || latches().is_empty()).await);
    // Redis counts the `DEL` each unlock script runs on the lock's hash too.
    let sweeps = server.command_calls("del") - dels_before - unlocks;
    assert!(
        (1..unlocks / 10).contains(&sweeps),
        "{sweeps} DEL commands for {unlocks} latches"
    );

    // One more latch, and shut down within its sweep: shutdown deletes it.
    client
        .lock("last")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    client.shutdown().await;
    assert_eq!(latches(), Vec::<String>::new(), "a latch outlived shutdown");
}

/// A key written again and again has its spent latches deleted by its own writes, a `DEL` of
/// a few carried in the same write, not by sweeps of their own: while the writes go on, the
/// latches waiting never pile up to a sweep's worth (the sweeper leaves a key written since
/// its last look to them), and a `DEL` carries a few latches, not one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_keys_latches_are_deleted_by_its_own_writes() {
    let server = RedisServer::start();
    let client = server.client().await;
    // (An acquire's latch and an unlock's: two a pair.)
    let latches = || server.cmd::<Vec<String>>(&["KEYS", "redisson_*_latch:*"]);
    let dels_before = server.command_calls("del");
    let lock = client.lock("busy");
    let pairs = 300;
    let mut most = 0;
    for _ in 0..pairs {
        lock.lock().await.unwrap().unlock().await.unwrap();
        most = most.max(latches().len());
    }
    // (16 gather before a write carries them; one more may be on its way to the queue.)
    assert!(most <= 17, "{most} spent latches waited at once");
    // Redis counts the `DEL` each unlock script runs on the lock's hash too.
    let dels = server.command_calls("del") - dels_before - pairs;
    assert!(
        (2 * pairs / 32..=2 * pairs / 16 + 2).contains(&dels),
        "{dels} DEL commands for {} latches",
        2 * pairs
    );
    client.shutdown().await;
    assert_eq!(latches(), Vec::<String>::new(), "a latch outlived shutdown");
}

/// `acquire(Wait, Lease)`, the acquire every other method is a shorthand for, on every kind
/// of handle: a fixed lease sets the TTL, the watchdog's sets the watchdog timeout; a bounded
/// wait on a held lock gives up (`None`) after its wait, `Wait::Never` at once; a bad lease
/// is refused before anything is sent; the blocking API takes the same values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_takes_the_wait_and_the_lease_as_values() {
    use redisson_lock::{Lease, Wait};
    let server = RedisServer::start();
    let client = server.client().await;
    let lease = Lease::Fixed(Duration::from_secs(20));
    let held = client
        .lock("terms")
        .acquire(Wait::Never, lease)
        .await
        .unwrap()
        .expect("free");
    assert!((19_000..=20_000).contains(&pttl(&server, "terms")));

    let other = client.lock("terms").with_owner(Owner::new());
    let started = std::time::Instant::now();
    let wait = Wait::AtMost(Duration::from_millis(300));
    assert!(other
        .acquire(wait, Lease::Watchdog)
        .await
        .unwrap()
        .is_none());
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "waited its wait"
    );
    assert!(other
        .acquire(Wait::Never, Lease::Watchdog)
        .await
        .unwrap()
        .is_none());
    let fenced = client.fenced_lock("terms-fenced");
    let zero = Lease::Fixed(Duration::ZERO);
    let err = fenced.acquire(Wait::Forever, zero).await.unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "terms-fenced"]), 0);
    held.unlock().await.unwrap();

    let watchdog = client.config().watchdog_timeout().as_millis() as i64;
    let guard = (other.acquire(Wait::Forever, Lease::Watchdog).await.unwrap()).unwrap();
    assert!(pttl(&server, "terms") > watchdog - 1_000);
    guard.unlock().await.unwrap();

    // (A thread of its own: the blocking API refuses to run inside a runtime.)
    let url = server.url();
    let blocking = std::thread::spawn(move || {
        let client = blocking::LockClient::connect(&url).unwrap();
        let guard = (client.lock("terms-blocking"))
            .acquire(Wait::AtMost(Duration::from_secs(1)), lease)
            .unwrap()
            .expect("free");
        guard.unlock().unwrap();
        client.shutdown();
    });
    tokio::task::block_in_place(|| blocking.join().unwrap());
    client.shutdown().await;
}
