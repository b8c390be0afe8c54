//! The lock kinds beyond `Lock` on a real Redis Cluster (`support::cluster`, 6 nodes shared by
//! this binary's tests): each kind's keys stay in its lock's slot, a write unlock's wake-all
//! message reaches readers of another client at every master, and a multi-lock takes locks on
//! every master together. Also the holders' side of the hub on a cluster: many held locks
//! listened for their loss at their masters, each told of it.

mod support;

use std::time::Duration;

use redisson_lock::{names, Error, Lease, LockClient, MultiLock, Owner};
use support::cluster::{self, key_on_master, RedisCluster};
use support::{eventually, server_info};

async fn client() -> LockClient {
    let config = cluster::get().config();
    LockClient::with_config(config)
        .await
        .expect("connect to the cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_locks_count_tokens_at_each_keys_master() {
    let _steady = RedisCluster::steady().await;
    let client = client().await;
    for master in 0..3 {
        let name = key_on_master("fenced", master);
        let lock = client.fenced_lock(&name).with_owner(Owner::new());
        let first = lock.lock().await.unwrap();
        let again = lock.lock().await.unwrap();
        assert_eq!((first.token(), again.token()), (1, 2));
        let token: i64 = cluster::get()
            .master_of(&name)
            .cmd(&["GET", &names::token_key(&name)])
            .unwrap();
        assert_eq!(token, 2, "{name}: the counter sits at the lock's master");
        again.unlock().await.unwrap();
        first.unlock().await.unwrap();
    }
    // A name whose counter would hash elsewhere is refused before anything is sent.
    let err = client.fenced_lock("bad{").try_lock().await.unwrap_err();
    assert!(matches!(err, Error::CrossSlot { .. }), "{err:?}");
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_takes_locks_on_every_master_or_none() {
    let _steady = RedisCluster::steady().await;
    let (client, other) = (client().await, client().await);
    let names: Vec<String> = (0..3).map(|m| key_on_master("multi", m)).collect();
    let all = MultiLock::new(names.iter().map(|n| client.lock(n))).unwrap();
    let guard = all.lock().await.unwrap();
    assert!(other.lock(&names[2]).try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();

    let last = other.lock(&names[2]).lock().await.unwrap();
    assert!(all.try_lock().await.unwrap().is_none());
    for name in &names[..2] {
        let exists: i64 = cluster::get()
            .master_of(name)
            .cmd(&["EXISTS", name])
            .unwrap();
        assert_eq!(exists, 0, "{name} given back");
    }
    last.unlock().await.unwrap();
    client.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_locks_wake_every_reader_at_each_keys_master() {
    let _steady = RedisCluster::steady().await;
    let (writer, readers) = (client().await, client().await);
    let long = std::time::Duration::from_secs(30);
    let sharded = support::server_info().sharded_pubsub;
    for master in 0..3 {
        let name = key_on_master("rw", master);
        let held = writer
            .read_write_lock(&name)
            .write_lock()
            .lock_with_lease(long)
            .await
            .unwrap();
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let read = readers.read_write_lock(&name).read_lock();
                tokio::spawn(async move { read.lock().await.unwrap() })
            })
            .collect();
        let channel = names::rwlock_channel(&name);
        assert!(
            support::eventually(std::time::Duration::from_secs(5), || {
                cluster::get().listeners(&name, &channel, sharded) >= 1
            })
            .await,
            "{name}: the readers never subscribed"
        );
        held.unlock().await.unwrap();
        // Well inside the 30 s lease: only the wake-all message explains it.
        for waiter in waiting {
            let guard = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
                .await
                .unwrap()
                .unwrap();
            let field = guard.owner_field();
            let timeout_key = format!("{}:1", names::read_timeout_prefix(&name, &field));
            let pttl: i64 = cluster::get()
                .master_of(&name)
                .cmd(&["PTTL", &timeout_key])
                .unwrap();
            assert!(
                pttl > 0,
                "{name}: the reader's timeout key at the lock's master"
            );
            guard.unlock().await.unwrap();
        }
    }
    let err = writer.read_write_lock("bad{").read_lock().try_lock().await;
    assert!(matches!(err.unwrap_err(), Error::CrossSlot { .. }));
    writer.shutdown().await;
    readers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_and_spin_locks_serve_their_waiters_at_each_keys_master() {
    let _steady = RedisCluster::steady().await;
    let (client, other) = (client().await, client().await);
    for master in 0..3 {
        // Fair: the queue and deadlines sit at the lock's master, and the holder's unlock wakes
        // the waiter of the other client on its own channel there.
        let name = key_on_master("fair", master);
        let held = client.fair_lock(&name).lock().await.unwrap();
        let lock = other.fair_lock(&name);
        let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
        let queued = support::eventually(std::time::Duration::from_secs(5), || {
            let len = cluster::get()
                .master_of(&name)
                .cmd::<i64>(&["LLEN", &names::queue_key(&name)]);
            len.unwrap() == 1
        })
        .await;
        assert!(queued, "{name}: queued at its master");
        held.unlock().await.unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken by the unlock")
            .unwrap();
        got.unlock().await.unwrap();

        // Spin: the waiter polls its way in after the unlock.
        let name = key_on_master("spin", master);
        let held = client.spin_lock(&name).lock().await.unwrap();
        let lock = other.spin_lock(&name);
        let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
        held.unlock().await.unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the poll finds it free")
            .unwrap();
        got.unlock().await.unwrap();
    }
    // A name whose queue would hash elsewhere is refused before anything is sent.
    let err = client.fair_lock("bad{").try_lock().await.unwrap_err();
    assert!(matches!(err, Error::CrossSlot { .. }), "{err:?}");
    client.shutdown().await;
    other.shutdown().await;
}

/// A burst of held locks on every master: each is listened for at its master (sharded where the
/// server has it: the router's pipelined `SSUBSCRIBE`s, each confirmed alone), and a forced
/// unlock of one on each master is told to its holder, and to no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_count_and_wake_waiters_at_each_keys_master() {
    let _steady = RedisCluster::steady().await;
    let (holder, waiters) = (client().await, client().await);
    let sharded = support::server_info().sharded_pubsub;
    let prompt = Duration::from_secs(5);
    for master in 0..3 {
        let name = key_on_master("sem", master);
        let pool = holder.semaphore(&name);
        assert!(pool.try_set_permits(2).await.unwrap());
        let both = pool.acquire(2).await.unwrap();
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let pool = waiters.semaphore(&name);
                tokio::spawn(async move {
                    let taken = pool.acquire(1).await.unwrap().forget();
                    (tokio::time::Instant::now(), taken)
                })
            })
            .collect();
        let channel = names::semaphore_channel(&name);
        assert!(
            eventually(prompt, || cluster::get()
                .listeners(&name, &channel, sharded)
                >= 1)
            .await,
            "{name}: the waiters never subscribed"
        );
        // One release of both permits wakes both waiters (of another client) by its message:
        // well inside the second after which a waiter that missed it looks again.
        let released = tokio::time::Instant::now();
        both.release().await.unwrap();
        for waiter in waiting {
            let (at, taken) = tokio::time::timeout(prompt, waiter).await.unwrap().unwrap();
            assert_eq!(taken, 1);
            let after = at - released;
            assert!(
                after < Duration::from_millis(600),
                "{name}: woken {after:?} after"
            );
        }
        let count: String = cluster::get()
            .master_of(&name)
            .cmd(&["GET", &name])
            .unwrap();
        assert_eq!(count, "0", "{name}: the count sits at the key's master");
    }
    let err = holder.semaphore("bad{").try_acquire(1).await.unwrap_err();
    assert!(matches!(err, Error::CrossSlot { .. }), "{err:?}");
    holder.shutdown().await;
    waiters.shutdown().await;
}

/// Permits with ids on every master: the watchdog renews three of each master's (its renewal
/// calls carry keys of several slots to each master) past a watchdog timeout with none lost; a release wakes another client's waiter by its message at the key's master; the
/// permit list sits beside the count at that master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiring_permits_renew_and_wake_waiters_at_each_keys_master() {
    let _steady = RedisCluster::steady().await;
    let (holder, waiters) = (client().await, client().await);
    let prompt = Duration::from_secs(5);
    let mut held = Vec::new();
    for master in 0..3 {
        for i in 0..3 {
            let name = key_on_master(&format!("permits-{i}"), master);
            let jobs = holder.permit_semaphore(&name);
            assert!(jobs.try_set_permits(1).await.unwrap());
            held.push((name, jobs.acquire(Lease::Watchdog).await.unwrap()));
        }
    }
    // Past a watchdog timeout (1.5 s): kept only if renewed.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    for (name, permit) in &held {
        assert!(!permit.is_lost(), "{name}: kept by the watchdog");
        let timeouts = format!("{{{name}}}:timeout");
        let listed: i64 = cluster::get()
            .master_of(name)
            .cmd(&["ZCARD", &timeouts])
            .unwrap();
        assert_eq!(listed, 1, "{name}: listed at the key's master");
    }
    for (name, permit) in held {
        let jobs = waiters.permit_semaphore(&name);
        let waiter = tokio::spawn(async move {
            let permit = jobs.acquire(Lease::Watchdog).await.unwrap();
            (tokio::time::Instant::now(), permit.forget())
        });
        let channel = names::semaphore_channel(&name);
        let sharded = server_info().sharded_pubsub;
        assert!(
            eventually(prompt, || cluster::get()
                .listeners(&name, &channel, sharded)
                >= 1)
            .await,
            "{name}: the waiter never subscribed"
        );
        let released = tokio::time::Instant::now();
        permit.release().await.unwrap();
        let (at, id) = tokio::time::timeout(prompt, waiter).await.unwrap().unwrap();
        assert_eq!(id.len(), 32);
        let after = at - released;
        assert!(
            after < Duration::from_millis(600),
            "{name}: woken {after:?} after"
        );
    }
    let bad = holder.permit_semaphore("bad{");
    let err = bad.try_acquire(redisson_lock::Wait::Never, Lease::Watchdog);
    let err = err.await.unwrap_err();
    assert!(matches!(err, Error::CrossSlot { .. }), "{err:?}");
    holder.shutdown().await;
    waiters.shutdown().await;
}

/// Lock events at each master with the cluster's keyspace events off (the default): the
/// unlocks are told by their messages (sharded where the servers have it), at the key's master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_events_tell_unlocks_at_each_keys_master_without_keyspace_events() {
    let _steady = RedisCluster::steady().await;
    let (holder, watcher) = (client().await, client().await);
    let prompt = Duration::from_secs(5);
    for master in 0..3 {
        let name = key_on_master("events", master);
        let mut events = watcher.lock(&name).events().await.unwrap();
        assert_eq!(events.sources().deletions, Some(false), "{name}");
        holder
            .lock(&name)
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        let told = tokio::time::timeout(prompt, events.next()).await.unwrap();
        assert_eq!(told, Some(redisson_lock::LockEvent::Released), "{name}");
    }
    holder.shutdown().await;
    watcher.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_down_latches_open_for_waiters_at_each_keys_master() {
    let _steady = RedisCluster::steady().await;
    let (counter, waiters) = (client().await, client().await);
    let sharded = support::server_info().sharded_pubsub;
    let prompt = Duration::from_secs(5);
    for master in 0..3 {
        let name = key_on_master("gate", master);
        let gate = counter.count_down_latch(&name);
        assert!(gate.try_set_count(1).await.unwrap());
        let waiter = tokio::spawn({
            let gate = waiters.count_down_latch(&name);
            async move {
                gate.wait().await.unwrap();
                tokio::time::Instant::now()
            }
        });
        let channel = names::latch_channel(&name);
        assert!(
            eventually(prompt, || cluster::get()
                .listeners(&name, &channel, sharded)
                >= 1)
            .await,
            "{name}: the waiter never subscribed"
        );
        let count: String = cluster::get()
            .master_of(&name)
            .cmd(&["GET", &name])
            .unwrap();
        assert_eq!(count, "1", "{name}: the count sits at the key's master");
        let opened = tokio::time::Instant::now();
        assert_eq!(gate.count_down().await.unwrap(), 0);
        let at = tokio::time::timeout(prompt, waiter).await.unwrap().unwrap();
        let after = at - opened;
        assert!(
            after < Duration::from_millis(600),
            "{name}: woken {after:?} after"
        );
    }
    // Redisson wraps the whole name in the channel's braces: a name with a hash tag of its own
    // puts the channel in another slot, refused before anything is sent.
    let err = counter.count_down_latch("a{b}c").count().await.unwrap_err();
    assert!(matches!(err, Error::CrossSlot { .. }), "{err:?}");
    counter.shutdown().await;
    waiters.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_held_locks_are_listened_for_at_their_masters_and_told_their_loss() {
    const PER_MASTER: usize = 400;
    let _steady = RedisCluster::steady().await;
    let sharded = server_info().sharded_pubsub;
    let config = cluster::get().config().with_prompt_loss_detection(true);
    let holder = LockClient::with_config(config).await.unwrap();
    let names: Vec<String> = (0..3)
        .flat_map(|master| {
            (0..PER_MASTER).map(move |i| key_on_master(&format!("heard-{i}"), master))
        })
        .collect();
    let guards = futures::future::join_all(names.iter().map(|name| {
        let lock = holder.lock(name);
        async move { lock.lock().await.unwrap() }
    }))
    .await;
    let listened =
        |name: &String| cluster::get().listeners(name, &names::lock_channel(name), sharded);
    let all = eventually(Duration::from_secs(20), || {
        names
            .iter()
            .step_by(37)
            .chain(names.last())
            .all(|n| listened(n) == 1)
    })
    .await;
    assert!(
        all,
        "every held lock is listened for once at its master (sharded: {sharded})"
    );
    let other = client().await;
    let victims: Vec<usize> = (0..3)
        .map(|master| master * PER_MASTER + PER_MASTER / 2)
        .collect();
    for &victim in &victims {
        assert!(other.lock(&names[victim]).force_unlock().await.unwrap());
    }
    for &victim in &victims {
        tokio::time::timeout(Duration::from_secs(2), guards[victim].lost())
            .await
            .unwrap_or_else(|_| panic!("{}: a forced unlock is told at once", names[victim]));
    }
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    assert_eq!(lost, victims.len(), "only the forced locks are lost");
    for guard in guards.into_iter().filter(|g| !g.is_lost()) {
        guard.unlock().await.unwrap();
    }
    holder.shutdown().await;
    other.shutdown().await;
}
