//! The fair lock (Redisson `RFairLock`) and the non-reentrant kinds (4.4+): Redisson's layout
//! (the hash, `redisson_lock_queue:{N}`, `redisson_lock_timeout:{N}`, a channel per waiter),
//! arrival order, a single attempt that never queues, waiters that give up leaving the queue
//! at once (timed out, cancelled, thousands of them), exactly-once queueing through a lost
//! reply, the watchdog and the lost signal, and `NON_REENTRANT_REACQUIRE` as a typed error.

mod support;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redisson_lock::{LockClient, Owner};
use support::RedisServer;

const PROMPT: Duration = Duration::from_secs(5);

fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&[
        "LRANGE",
        &format!("redisson_lock_queue:{{{name}}}"),
        "0",
        "-1",
    ])
}

fn deadlines(server: &RedisServer, name: &str) -> Vec<(String, f64)> {
    let key = format!("redisson_lock_timeout:{{{name}}}");
    server.cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"])
}

/// The hash field `owner` of `client` writes.
fn field_of(client: &LockClient, owner: Owner) -> String {
    format!("{}:{}", client.client_id(), owner.id())
}

fn own_channel(name: &str, field: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}:{field}")
}

/// Starts a waiter of `owner` on `name` that records itself in `order` once it holds the lock,
/// then unlocks; returns once the waiter stands in the queue and listens on its own channel.
async fn queue_waiter(
    server: &RedisServer,
    client: &LockClient,
    name: &str,
    owner: Owner,
    order: &Arc<Mutex<Vec<String>>>,
) -> tokio::task::JoinHandle<()> {
    let field = field_of(client, owner);
    let lock = client.fair_lock(name).with_owner(owner);
    let (order, me) = (order.clone(), field.clone());
    let task = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        order.lock().push(me);
        guard.unlock().await.unwrap();
    });
    let queued = support::eventually(PROMPT, || queue(server, name).contains(&field)).await;
    assert!(queued, "{field} queued");
    server
        .until_subscribers(&own_channel(name, &field), 1)
        .await;
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order_in_redissons_layout() {
    let server = RedisServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let name = "fifo";
    let holder = a.fair_lock(name).lock().await.unwrap();
    assert_eq!(
        server.cmd::<String>(&["HGET", name, &holder.owner_field()]),
        "1"
    );
    // Alternating clients, so that no local shortcut can explain the order.
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut expected = Vec::new();
    let mut tasks = Vec::new();
    for (i, client) in [&b, &a, &b, &a].into_iter().enumerate() {
        let owner = Owner::new();
        expected.push(field_of(client, owner));
        tasks.push(queue_waiter(&server, client, name, owner, &order).await);
        assert_eq!(queue(&server, name), expected, "waiter {i} at the tail");
    }
    // Each place ends a reservation (5 min by default) after the one ahead of it.
    let places = deadlines(&server, name);
    assert_eq!(places.len(), 4);
    for pair in places.windows(2) {
        let gap = pair[1].1 - pair[0].1;
        assert!((299_000.0..=301_000.0).contains(&gap), "gap {gap}");
    }
    holder.unlock().await.unwrap();
    for task in tasks {
        tokio::time::timeout(PROMPT, task).await.unwrap().unwrap();
    }
    assert_eq!(*order.lock(), expected, "served in arrival order");
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
    assert!(queue(&server, name).is_empty() && deadlines(&server, name).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_attempt_never_queues_nor_jumps_the_queue() {
    let server = RedisServer::start();
    let client = server.client().await;
    let name = "try-once";
    let lock = client.fair_lock(name);
    let holder = lock.lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiter = queue_waiter(&server, &client, name, Owner::new(), &order).await;
    let before = queue(&server, name);
    assert!(lock.try_lock().await.unwrap().is_none());
    assert_eq!(queue(&server, name), before, "try_lock did not queue");
    holder.unlock().await.unwrap();
    tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert_eq!(order.lock().len(), 1);
    // Nobody waits: a single attempt takes a free lock.
    lock.try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_give_up_leave_the_queue_and_the_next_is_not_delayed() {
    let server = RedisServer::start();
    let client = server.client().await;
    let name = "storm";
    let holder = client.fair_lock(name).lock().await.unwrap();

    // A wait that runs out leaves at once; one behind it moves up by its reservation.
    let behind = Owner::new();
    let timed_out = {
        let lock = client.fair_lock(name);
        tokio::spawn(async move { lock.try_lock_for(Duration::from_millis(300)).await })
    };
    assert!(support::eventually(PROMPT, || queue(&server, name).len() == 1).await);
    let order = Arc::new(Mutex::new(Vec::new()));
    let last = queue_waiter(&server, &client, name, behind, &order).await;
    let before = deadlines(&server, name)[1].1;
    assert!(timed_out.await.unwrap().unwrap().is_none());
    let field = field_of(&client, behind);
    assert_eq!(queue(&server, name), vec![field.clone()]);
    let after = deadlines(&server, name)[0].1;
    assert!(
        (before - after - 300.0).abs() < 1.0,
        "moved up by the 300 ms reservation: {before} -> {after}"
    );

    // A storm of cancelled waits ahead of nobody and behind `last`: none stays behind.
    let storm: Vec<_> = (0..1000)
        .map(|_| {
            let lock = client.fair_lock(name);
            tokio::spawn(async move { lock.lock().await })
        })
        .collect();
    let queued =
        support::eventually(Duration::from_secs(20), || queue(&server, name).len() > 500).await;
    assert!(queued, "the storm queued");
    for task in storm {
        task.abort();
    }
    let cleared = support::eventually(Duration::from_secs(20), || {
        queue(&server, name) == vec![field.clone()] && deadlines(&server, name).len() == 1
    })
    .await;
    assert!(cleared, "left: {} queued", queue(&server, name).len());

    let released = tokio::time::Instant::now();
    holder.unlock().await.unwrap();
    tokio::time::timeout(PROMPT, last).await.unwrap().unwrap();
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the next waiter took {took:?}"
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
    let keys: Vec<String> = server.cmd(&["KEYS", "redisson_lock_*"]);
    assert!(
        keys.iter().all(|k| k.contains("latch")),
        "no queue, deadline or hold left: {keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_head_leaving_a_free_lock_wakes_the_next_waiter() {
    let server = RedisServer::start();
    let client = server.client().await;
    let name = "head-leaves";
    // A head that never takes the lock: a dead Redisson waiter's entry, reserved for 5 min.
    let dead = "00000000-0000-0000-0000-000000000000:1";
    let far = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 300_000)
        .to_string();
    let _: i64 = server.cmd(&["RPUSH", &format!("redisson_lock_queue:{{{name}}}"), dead]);
    let _: i64 = server.cmd(&[
        "ZADD",
        &format!("redisson_lock_timeout:{{{name}}}"),
        &far,
        dead,
    ]);
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiter = queue_waiter(&server, &client, name, Owner::new(), &order).await;
    // Its own withdrawal (as a cancelled Rust waiter's, or Redisson's acquireFailed would run
    // it) wakes the waiter behind at once.
    let withdraw = support::script("fair_withdraw");
    let queue_key = format!("redisson_lock_queue:{{{name}}}");
    let timeout_key = format!("redisson_lock_timeout:{{{name}}}");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let _: i64 = server.cmd(&[
        "EVAL",
        &withdraw,
        "4",
        name,
        &queue_key,
        &timeout_key,
        &channel,
        dead,
        "300000",
        "0",
        "publish",
    ]);
    tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert_eq!(order.lock().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_queues_once_and_holds_once() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    let other = server.client().await;
    let name = "lost";
    // Load the fair acquire first, so the cut reply is the script's own.
    client
        .fair_lock("warm-up")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let holder = other.fair_lock(name).lock().await.unwrap();
    let sha = support::script_sha("fair_acquire");
    proxy.cut_after_reply(&[&sha, name], 1);
    let lock = client.fair_lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    assert!(
        support::eventually(PROMPT, || proxy.cuts() == 1).await,
        "the fault fired"
    );
    assert!(support::eventually(PROMPT, || queue(&server, name).len() == 1).await);
    assert_eq!(deadlines(&server, name).len(), 1, "queued once");
    holder.unlock().await.unwrap();
    let guard = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert_eq!(
        server.cmd::<String>(&["HGET", name, &guard.owner_field()]),
        "1",
        "one hold"
    );
    guard.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_fair_lock_and_a_forced_unlock_is_told() {
    let server = RedisServer::start();
    // (A short watchdog: the forced unlock is found at the next renewal, a third of it.)
    let client = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_millis(600)))
        .await;
    let watchdog = client.config().watchdog_timeout();
    let name = "renewed";
    let lock = client.fair_lock(name).with_owner(Owner::new());
    let guard = lock.lock().await.unwrap();
    let reentered = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2, "reentrant");
    tokio::time::sleep(watchdog * 2).await;
    assert!(lock.is_locked().await.unwrap(), "renewed past its lease");
    drop(reentered);
    assert!(lock.force_unlock().await.unwrap());
    tokio::time::timeout(PROMPT, guard.lost()).await.unwrap();
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_kinds_refuse_the_holders_second_acquire() {
    let server = RedisServer::start();
    let client = server.client().await;
    for (name, lock) in [
        ("nr", client.non_reentrant_lock("nr")),
        ("nr-fair", client.non_reentrant_fair_lock("nr-fair")),
    ] {
        let owner = Owner::new();
        let guard = lock.clone().with_owner(owner).lock().await.unwrap();
        let err = lock.clone().with_owner(owner).try_lock().await.unwrap_err();
        assert!(err.is_non_reentrant(), "{name}: {err}");
        let err = (lock.clone().with_owner(owner))
            .try_lock_for(Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(err.is_non_reentrant(), "{name}: {err}");
        assert_eq!(
            server.cmd::<String>(&["HGET", name, &guard.owner_field()]),
            "1",
            "{name}: nothing changed"
        );
        assert!(queue(&server, name).is_empty(), "{name}: not queued");
        // Another owner waits and gets it as usual.
        let other = lock.clone().with_owner(Owner::new());
        let waiter = tokio::spawn(async move { other.lock().await.unwrap() });
        guard.unlock().await.unwrap();
        let got = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
        got.unlock().await.unwrap();
    }
}

#[test]
fn the_blocking_fair_spin_and_non_reentrant_locks_hold_and_release() {
    let server = RedisServer::start();
    let client = redisson_lock::blocking::LockClient::with_config(server.config()).unwrap();
    for lock in [
        client.fair_lock("b-fair"),
        client.spin_lock("b-spin"),
        client.non_reentrant_lock("b-nr"),
        client.non_reentrant_fair_lock("b-nrf"),
    ] {
        let guard = lock.lock().unwrap();
        assert!(lock.is_locked().unwrap());
        guard.unlock().unwrap();
        assert!(!lock.is_locked().unwrap());
    }
}

/// Owners of one client passing a fair lock around, each queueing again while another of
/// them holds it: a waiter whose subscription was still live from its last turn must queue
/// (attempt) before it waits, or no unlock ever wakes it (before the fix each such turn slept
/// out a whole watchdog timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_of_one_client_take_turns_without_stalling() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_secs(30)))
        .await;
    let turns = Arc::new(tokio::sync::watch::Sender::new(0u32));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let lock = client.fair_lock("relay").with_owner(Owner::new());
            let turns = turns.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    let guard = lock.lock().await.unwrap();
                    turns.send_modify(|t| *t += 1);
                    let at = *turns.borrow();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    guard.unlock().await.unwrap();
                    // Contend again only once another owner has taken it.
                    let mut seen = turns.subscribe();
                    let _ = seen.wait_for(|t| *t > at || *t >= 40).await;
                }
            })
        })
        .collect();
    let all = futures::future::join_all(tasks);
    let done = tokio::time::timeout(Duration::from_secs(20), all).await;
    assert!(done.is_ok(), "stalled at turn {}", *turns.borrow());
    assert_eq!(*turns.borrow(), 40);
}
