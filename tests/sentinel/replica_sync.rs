//! Replica sync through Sentinel, as Redisson's `checkLockSyncedSlaves`: every lock write
//! waits for the master's replica (a hand-off included, writes queued behind a `WAIT` sharing
//! the next, a woken waiter never queued behind another's), and what no replica acknowledged
//! is undone or told.

use std::time::{Duration, Instant};

use redisson_lock::{names, Error, Lease, LockClient, Owner, Wait};

use super::support;

/// Whether a client is blocked at the master right now (here: in a `WAIT`). Not `CLIENT LIST`'s
/// `cmd=wait`, which is a connection's last command: an idle lane whose last write waited
/// shows it for good.
fn blocked_in_wait() -> bool {
    let blocked = sentinel::get()
        .master()
        .info_field("clients", "blocked_clients");
    blocked.is_some_and(|n| n.trim() != "0")
}
use super::support::sentinel::{self, SentinelGroup};
use super::{calls, client_with, holders, wait_calls};

/// Replica sync is on by default, as Redisson's `checkLockSyncedSlaves`: every lock write
/// carries one `WAIT` for the master's replica; turned off, none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_write_waits_for_the_replica_unless_turned_off() {
    // (Exclusive: other tests' writes would be counted too.)
    let _exclusive = SentinelGroup::exclusive().await;
    for (sync, expected) in [(true, 2), (false, 0)] {
        let client = client_with(|c| if sync { c } else { c.with_replica_sync(None) }).await;
        support::load_scripts(&client).await;
        let before = wait_calls(sentinel::get().master());
        let guard = client.lock("s-wait").lock().await.unwrap();
        guard.unlock().await.unwrap();
        assert_eq!(
            wait_calls(sentinel::get().master()) - before,
            expected,
            "WAITs behind one acquire and one unlock (replica sync {sync})"
        );
        client.shutdown().await;
    }
    let zero = sentinel::get()
        .config()
        .with_replica_sync(Some(Duration::ZERO));
    assert!(matches!(
        LockClient::with_config(zero).await,
        Err(Error::Config(_))
    ));
}

/// Writes queued behind another's `WAIT` go out together behind one `WAIT` of their own (a
/// `WAIT` acknowledges every write before it on its connection), and each still returns only
/// once the replica has it. The replica is stopped while the first acquire waits: the next
/// takes the idle spare lane, and the other 30 queue behind them; once it runs again, 32
/// acquires took at most 3 `WAIT`s (one per lane, then one shared), not 32.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queued_behind_a_wait_share_the_next_and_each_is_acknowledged() {
    let _exclusive = SentinelGroup::exclusive().await;
    let client = client_with(|c| c.with_replica_sync(Some(Duration::from_secs(20)))).await;
    support::load_scripts(&client).await;
    let before = wait_calls(sentinel::get().master());
    sentinel::get().replica().signal(libc::SIGSTOP);
    let acquire = |i: usize| {
        let lock = client.lock(format!("s-shared-{i}"));
        tokio::spawn(async move {
            let guard = lock.try_lock().await.unwrap().expect("a free lock");
            // (Returned only once acknowledged: the replica has it now.)
            let at_replica = holders(sentinel::get().replica(), guard.name());
            (guard, at_replica)
        })
    };
    let first = acquire(0);
    let waiting = support::eventually(Duration::from_secs(10), blocked_in_wait).await;
    assert!(
        waiting,
        "the first acquire's WAIT blocks on the stopped replica"
    );
    let rest: Vec<_> = (1..32).map(acquire).collect();
    // (Nothing outside shows a write queued: a moment for the 31 tasks to reach the queue.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    sentinel::get().replica().signal(libc::SIGCONT);
    for task in std::iter::once(first).chain(rest) {
        let (guard, at_replica) = task.await.unwrap();
        assert_eq!(
            at_replica,
            vec![guard.owner_field()],
            "{} at the replica",
            guard.name()
        );
        guard.unlock().await.unwrap();
    }
    let waits = wait_calls(sentinel::get().master()) - before;
    // 32 acquires and 32 unlocks: the acquires took 3, the unlocks (one after another) 32.
    assert!(
        waits <= 3 + 32,
        "the 30 queued acquires shared one WAIT: {waits} WAITs in all"
    );
    client.shutdown().await;
}

/// A stopped replica acknowledges nothing: an acquire waits out the sync timeout, is undone
/// and fails with `NotReplicated` (nothing left held at the master); a holder whose renewals
/// go unacknowledged for a whole lease is told its lock is lost, although the master has
/// them (its replica's TTL ran out: a failover now would free the lock). Once the replica is
/// back, the lock is free to take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_replica_acknowledgement_acquires_are_undone_and_holders_told() {
    let _exclusive = SentinelGroup::exclusive().await;
    // Long enough for renewals that each wait out WAIT's 1 s to keep the key at the master.
    let lease = Duration::from_secs(5);
    let client = client_with(|c| c.with_watchdog_timeout(lease)).await;
    let held = client.lock("s-unsynced-held").lock().await.unwrap();
    sentinel::get().replica().signal(libc::SIGSTOP);

    let pttl = || -> i64 {
        sentinel::get()
            .master()
            .cmd(&["PTTL", "s-unsynced-held"])
            .unwrap()
    };
    let (started, first) = (Instant::now(), pttl());
    let err = client.lock("s-unsynced").try_lock().await.unwrap_err();
    let took = started.elapsed();
    assert!(err.is_not_replicated(), "{err}");
    assert!(
        took >= Duration::from_secs(1),
        "waited out WAIT's 1 s: {took:?}"
    );
    assert!(
        holders(sentinel::get().master(), "s-unsynced").is_empty(),
        "the unacknowledged acquire was undone"
    );
    // Until the holder is told: did the key's TTL at the master go up? (Then the master had
    // the renewals; only the replica missed them.)
    let mut renewed_at_master = false;
    let told = tokio::time::timeout(lease * 2, async {
        while !held.is_lost() {
            let unrenewed = first - started.elapsed().as_millis() as i64;
            renewed_at_master |= pttl() > unrenewed + 500;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    sentinel::get().replica().signal(libc::SIGCONT);
    assert!(told.is_ok(), "the holder was told within two leases");
    assert!(renewed_at_master, "the master had the renewals");

    tokio::task::spawn_blocking(|| sentinel::get().wait_healthy())
        .await
        .unwrap();
    let guard = client
        .lock("s-unsynced")
        .try_lock()
        .await
        .unwrap()
        .expect("free once the replica acknowledges again");
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

/// The synchronizers' writes wait for the replica as the locks' do: acknowledged, each acquire
/// and release sends its `WAIT`; with the replica stopped, a semaphore's and an expiring
/// permit's acquire is not acknowledged (`NotReplicated`) and undone, the permits available
/// again at the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronizer_acquires_no_replica_acknowledged_are_undone() {
    let _exclusive = SentinelGroup::exclusive().await;
    let client = client_with(|c| c).await;
    let pool = client.semaphore("s-sem");
    pool.try_set_permits(2).await.unwrap();
    let jobs = client.permit_semaphore("s-permits");
    jobs.try_set_permits(2).await.unwrap();
    let waits = wait_calls(sentinel::get().master());
    pool.acquire(1).await.unwrap().release().await.unwrap();
    let permit = jobs.acquire(Lease::Watchdog).await.unwrap();
    permit.release().await.unwrap();
    assert!(
        wait_calls(sentinel::get().master()) >= waits + 4,
        "each acquire and release waited for the replica"
    );

    sentinel::get().replica().signal(libc::SIGSTOP);
    let semaphore = pool.try_acquire(1).await.map(|p| p.map(|p| p.forget()));
    let permit = jobs
        .try_acquire(Wait::Never, Lease::Watchdog)
        .await
        .map(|p| p.map(|p| p.forget()));
    let undone = support::eventually(Duration::from_secs(10), || {
        let group = sentinel::get();
        let count = |key: &str| group.master().cmd::<String>(&["GET", key]).unwrap();
        let listed: i64 = group
            .master()
            .cmd(&["ZCARD", "{s-permits}:timeout"])
            .unwrap();
        count("s-sem") == "2" && count("s-permits") == "2" && listed == 0
    })
    .await;
    sentinel::get().replica().signal(libc::SIGCONT);
    let semaphore = semaphore.unwrap_err();
    assert!(semaphore.is_not_replicated(), "{semaphore}");
    let permit = permit.unwrap_err();
    assert!(permit.is_not_replicated(), "{permit}");
    assert!(
        undone,
        "the unacknowledged acquires were undone at the master"
    );
    tokio::task::spawn_blocking(|| sentinel::get().wait_healthy())
        .await
        .unwrap();
    client.shutdown().await;
}

/// A waiter whose attempt no replica acknowledged (the hold undone, as for `try_lock`) keeps
/// waiting and takes the lock once the replica answers again: `lock()` does not fail for
/// it. (A cluster failover's first moments look the same: CI once saw a waiter's first write
/// to a promoted master wait for the old master's replica and fail the waiter.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_attempt_is_not_acknowledged_keeps_waiting() {
    let _exclusive = SentinelGroup::exclusive().await;
    let name = "s-unsynced-waiter";
    let holder = client_with(|c| c).await;
    let waiter = client_with(|c| c).await;
    // A fixed lease, so that the key goes by expiry (no unlock, no renewal to wait for).
    let held = holder
        .lock(name)
        .lock_with_lease(Duration::from_millis(1500))
        .await
        .unwrap();
    let lock = waiter.lock(name);
    let waiting = tokio::spawn(async move { lock.lock().await });
    assert!(
        support::eventually(Duration::from_secs(5), || {
            let (_, n): (String, i64) = sentinel::get()
                .master()
                .cmd(&["PUBSUB", "NUMSUB", &names::lock_channel(name)])
                .unwrap();
            n == 1
        })
        .await,
        "the waiter is subscribed"
    );
    sentinel::get().replica().signal(libc::SIGSTOP);
    // The lease runs out; the waiter's attempt then blocks in a WAIT and waits out its 1 s,
    // unacknowledged (the WAIT ends while the replica is still stopped).
    let in_wait = blocked_in_wait;
    let blocked = support::eventually(Duration::from_secs(10), in_wait).await;
    let unanswered = blocked && support::eventually(Duration::from_secs(5), || !in_wait()).await;
    sentinel::get().replica().signal(libc::SIGCONT);
    assert!(
        blocked,
        "the waiter's attempt waits for the stopped replica"
    );
    assert!(unanswered, "and its WAIT ends unanswered");
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter takes the lock once the replica answers")
        .unwrap()
        .expect("lock() does not fail for an unacknowledged attempt");
    assert_eq!(
        holders(sentinel::get().replica(), name),
        vec![guard.owner_field()],
        "held at the replica too"
    );
    drop(held);
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
}

/// Local hand-off waits for the replica as every lock write does: the release's unlock, the
/// parked waiter's acquire and the listener count go in one write behind one `WAIT`, so the
/// waiter holds the lock at the replica by the time the release returns. A hand-off no
/// replica acknowledged is undone by its waiter, which keeps waiting and takes the lock once
/// the replica answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_waits_for_the_replica_and_an_unacknowledged_one_is_undone() {
    // (Exclusive: WAITs are counted, and the replica is stopped.)
    let _exclusive = SentinelGroup::exclusive().await;
    let name = "s-hand-off";
    let lease = Duration::from_secs(30);
    let client = client_with(|c| c).await;
    support::load_scripts(&client).await;
    let first = client.lock(name).lock_with_lease(lease).await.unwrap();
    let owners = [Owner::new(), Owner::new(), Owner::new()];
    let mut acquired = support::waiters(&client, name, &owners, lease);
    assert!(support::eventually(Duration::from_secs(5), || client.waiting() == 3).await);
    // The first release with waiters parked only counts the channel's listeners.
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), acquired.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(support::eventually(Duration::from_secs(5), || client.waiting() == 2).await);

    let master_calls = || {
        let group = sentinel::get();
        (wait_calls(group.master()), calls(group.master(), "evalsha"))
    };
    let (waits, scripts) = master_calls();
    second.unlock().await.unwrap();
    let at_replica = holders(sentinel::get().replica(), name);
    let third = tokio::time::timeout(Duration::from_secs(5), acquired.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        at_replica,
        vec![third.owner_field()],
        "the waiter held the lock at the replica when the release returned"
    );
    let (waits_now, scripts_now) = master_calls();
    assert_eq!(
        (waits_now - waits, scripts_now - scripts),
        (1, 2),
        "one WAIT behind the unlock and the acquire it carried; no attempt of the waiter's own"
    );

    sentinel::get().replica().signal(libc::SIGSTOP);
    // Handed off, but unacknowledged (the WAIT waits out its 1 s): the waiter must not take it.
    third.unlock().await.unwrap();
    let early = tokio::time::timeout(Duration::from_millis(500), acquired.recv()).await;
    sentinel::get().replica().signal(libc::SIGCONT);
    assert!(
        early.is_err(),
        "a hand-off no replica acknowledged gave the waiter the lock"
    );
    let last = tokio::time::timeout(Duration::from_secs(10), acquired.recv())
        .await
        .expect("the waiter takes the lock once the replica answers")
        .unwrap();
    assert_eq!(
        holders(sentinel::get().replica(), name),
        vec![last.owner_field()],
        "held at the replica too, by that waiter alone"
    );
    last.unlock().await.unwrap();
    assert_eq!(client.held_locks(), 0);
    client.shutdown().await;
}

/// A waiter of the same client woken by an unlock message does not wait out that unlock's
/// `WAIT`: its acquire goes out at once on the connection's spare lane (as a waiter in
/// another process would on its own connection). The replica is stopped, so the unlock's
/// `WAIT` blocks; the waiter's acquire has run at the master meanwhile, and once the replica
/// answers both return, acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_waiter_does_not_queue_behind_the_unlocks_wait() {
    let _exclusive = SentinelGroup::exclusive().await;
    let name = "s-spare-lane";
    let client = client_with(|c| {
        c.with_local_handoff(false)
            .with_replica_sync(Some(Duration::from_secs(5)))
    })
    .await;
    support::load_scripts(&client).await;
    let held = client.lock(name).lock().await.unwrap();
    let lock = client.lock(name).with_owner(Owner::new());
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    assert!(support::eventually(Duration::from_secs(5), || client.waiting() == 1).await);

    sentinel::get().replica().signal(libc::SIGSTOP);
    let unlock = tokio::spawn(held.unlock());
    let master_holders = || holders(sentinel::get().master(), name);
    let taken = support::eventually(Duration::from_secs(3), || master_holders().len() == 1).await;
    let unlock_out = !unlock.is_finished();
    sentinel::get().replica().signal(libc::SIGCONT);
    assert!(
        taken && unlock_out,
        "the waiter's acquire ran at the master while the unlock's WAIT was out \
         (taken {taken}, unlock still out {unlock_out})"
    );
    unlock.await.unwrap().unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter's acquire is acknowledged")
        .unwrap();
    assert_eq!(
        holders(sentinel::get().replica(), name),
        vec![guard.owner_field()],
        "held at the replica"
    );
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

/// A replica restarted without its data does a full resync, and until it is online it can
/// acknowledge nothing (`WAIT` answers 0) and holds none of the data: it is not waited for.
/// Acquires keep working, a holder renewing through the resync is not told anything, and once
/// the replica is online lock writes wait for it again. (Counting `connected_slaves`, which
/// lists a syncing replica, undid every acquire and lost the holder.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_in_full_resync_is_not_waited_for() {
    let _exclusive = SentinelGroup::exclusive().await;
    let lease = Duration::from_secs(3);
    let client = client_with(|c| c.with_watchdog_timeout(lease)).await;
    let held = client.lock("s-resync-held").lock().await.unwrap();
    // The master holds the full sync back for 8 s: the test's acquires fall inside it.
    let saved = tokio::task::spawn_blocking(|| {
        sentinel::get().restart_replica_empty(Duration::from_secs(8))
    })
    .await
    .unwrap();
    let syncing = || {
        let states = sentinel::replica_states(sentinel::get().master());
        !states.is_empty() && states.iter().all(|s| s != "online")
    };
    let started = Instant::now();
    for round in 0..3 {
        let guard = client
            .lock("s-resync")
            .try_lock()
            .await
            .unwrap_or_else(|err| panic!("acquire {round} during the resync: {err}"))
            .expect("the lock is free");
        guard.unlock().await.unwrap();
    }
    // Renewals through the resync (a third of the lease each): at least two more.
    tokio::time::sleep(lease).await;
    assert!(
        syncing(),
        "the replica was still syncing after the acquires and a lease of renewals ({:?})",
        started.elapsed()
    );
    assert!(!held.is_lost(), "the holder was not told anything");

    let online = support::eventually(Duration::from_secs(30), || {
        sentinel::get()
            .master()
            .info_field("replication", "connected_slaves")
            .is_some()
            && sentinel::replica_states(sentinel::get().master()) == ["online"]
    })
    .await;
    assert!(online, "the replica finished its resync");
    // Counted again within the topology's recount interval: writes wait for it again. Only
    // the counted client's connections are counted (`MONITOR`): the held lock's renewals
    // carry WAITs of their own to the same master.
    let counted = client_with(|c| c.with_service_name("s-resync-counted")).await;
    let monitor = support::monitor::Monitor::start(sentinel::get().master().port);
    let mut waits = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while waits == 0 && Instant::now() < deadline {
        monitor.clear();
        let guard = counted.lock("s-resync").lock().await.unwrap();
        guard.unlock().await.unwrap();
        waits = monitor.count("WAIT", "s-resync-counted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        waits, 2,
        "an acquire and an unlock WAIT for the online replica again"
    );
    counted.shutdown().await;
    assert!(!held.is_lost());
    held.unlock().await.unwrap();
    client.shutdown().await;
    tokio::task::spawn_blocking(move || {
        let group = sentinel::get();
        group.restore_settings(&saved);
        group.wait_healthy();
    })
    .await
    .unwrap();
}

/// A master whose replica left it (here made a master behind the sentinels' back, as a
/// promotion begins) goes on taking writes that a failover will lose: the first lock write
/// after that, which no replica acknowledged, is not trusted (the acquire is undone, as
/// Redisson's fails), though the master, counted again, has no replica to wait for. With that
/// count, the next acquire sends no `WAIT` and stands, as Redisson's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_the_replica_left_is_not_trusted() {
    let _exclusive = SentinelGroup::exclusive().await;
    let client = client_with(|c| c).await;
    let name = "s-replica-left";
    // (Scripts loaded, the replica counted.)
    client
        .lock(name)
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let (master, replica) = {
        let group = sentinel::get();
        (group.master().port, group.replica().port)
    };
    let _: String = sentinel::get()
        .node(replica)
        .cmd(&["REPLICAOF", "NO", "ONE"])
        .unwrap();
    let left = support::eventually(Duration::from_secs(5), || {
        support::sentinel::replica_states(sentinel::get().node(master)).is_empty()
    })
    .await;
    assert!(left, "the master lists no replica");

    let err = client.lock(name).try_lock().await.unwrap_err();
    assert!(err.is_not_replicated(), "{err}");
    assert!(
        holders(sentinel::get().node(master), name).is_empty(),
        "the unacknowledged acquire was undone"
    );
    let guard = client.lock(name).try_lock().await.unwrap();
    assert!(
        guard.is_some(),
        "counted again: no WAIT, the acquire stands"
    );
    drop(guard);
    client.shutdown().await;

    let _: String = sentinel::get()
        .node(replica)
        .cmd(&["REPLICAOF", "127.0.0.1", &master.to_string()])
        .unwrap();
    tokio::task::spawn_blocking(|| sentinel::get().wait_healthy())
        .await
        .unwrap();
}
