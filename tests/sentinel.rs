//! Locks on a master watched by Redis Sentinel: a master, its replica and three sentinels
//! shared by every test of this binary (`support::sentinel`), distinct keys per test. Tests
//! that fail the master over take `SentinelGroup::exclusive()` and leave the group healthy;
//! the others take `SentinelGroup::steady()`.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::inspect::ReplicaSyncState;
use redisson_lock::observe::SPAN_FAILOVER;
use redisson_lock::{names, Config, Error, Lease, LockClient, Wait};
use support::cluster::Node;
use support::sentinel::{self, SentinelGroup, MASTER_NAME};

async fn client_with(adjust: impl FnOnce(Config) -> Config) -> LockClient {
    let config = sentinel::get().config();
    LockClient::with_config(adjust(config))
        .await
        .expect("connect through the sentinels")
}

/// The owner fields of the lock hash `key` on `node`.
fn holders(node: &Node, key: &str) -> Vec<String> {
    node.cmd::<Vec<String>>(&["HKEYS", key]).unwrap()
}

/// `WAIT` commands `node` has run.
fn wait_calls(node: &Node) -> u64 {
    node.info_field("commandstats", "cmdstat_wait")
        .and_then(|stats| {
            let calls = stats.strip_prefix("calls=")?.split(',').next()?;
            calls.parse().ok()
        })
        .unwrap_or(0)
}

fn listeners(node: &Node, channel: &str) -> i64 {
    let (_, n): (String, i64) = node.cmd(&["PUBSUB", "NUMSUB", channel]).unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_taken_at_the_master_the_sentinels_name() {
    let _steady = SentinelGroup::steady().await;
    let client = client_with(|c| c).await;
    let guard = client.lock("s-basic").lock().await.unwrap();
    assert_eq!(
        holders(sentinel::get().master(), "s-basic"),
        vec![guard.owner_field()],
        "the hold is written at the master"
    );
    let replicated = support::eventually(Duration::from_secs(5), || {
        holders(sentinel::get().replica(), "s-basic") == vec![guard.owner_field()]
    })
    .await;
    assert!(replicated, "and replicated to its replica");
    guard.unlock().await.unwrap();
    assert!(holders(sentinel::get().master(), "s-basic").is_empty());
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_the_unlock_message() {
    let _steady = SentinelGroup::steady().await;
    let holder = client_with(|c| c.with_watchdog_timeout(Duration::from_secs(30))).await;
    let waiter = client_with(|c| c).await;
    let at_master = |channel: &str| listeners(sentinel::get().master(), channel);
    let what = "the waiter subscribes at the master";
    support::handover_by_message(holder, waiter, "s-wake", at_master, what).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_master_name_is_refused_at_connect() {
    let urls = sentinel::get().sentinel_urls();
    let config = Config::sentinel("no-such-master", &urls).unwrap();
    match LockClient::with_config(config).await {
        Err(Error::Config(message)) => assert!(
            message.contains("no-such-master"),
            "the error names the master: {message}"
        ),
        other => panic!("expected a config error, got {:?}", other.err()),
    }
    // No sentinel answering at all is a connection error, not a config one.
    let nobody = format!("redis://127.0.0.1:{}", support::free_port());
    let config = Config::sentinel(MASTER_NAME, [nobody])
        .unwrap()
        .with_connect_timeout(Duration::from_millis(500));
    assert!(matches!(
        LockClient::with_config(config).await,
        Err(Error::Connection(_))
    ));
}

/// A holder (watchdog) and a waiter of another client, through `SENTINEL FAILOVER`: the
/// holder's renewal goes on at the new master (its script cache empty), the waiter subscribes
/// there and is woken by the unlock published there, and new locks are written there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_moves_holders_waiters_and_writes_to_the_new_master() {
    if !support::server_info::runs_failovers(
        "sentinel::a_failover_moves_holders_waiters_and_writes_to_the_new_master",
    ) {
        return;
    }
    let _exclusive = SentinelGroup::exclusive().await;
    let spans = support::spans::install();
    // (A lease that outlasts the failover's window, in which renewals still reach the old
    // master: a shorter one may be lost there, and its holder told.)
    let lease = Duration::from_secs(5);
    let holder = client_with(|c| c.with_watchdog_timeout(lease)).await;
    let waiter = client_with(|c| c).await;
    let old = sentinel::get().master().port;
    let at_old = |channel: &str| listeners(sentinel::get().node(old), channel);
    let what = "the waiter subscribes at the old master";
    let (held, waiting) =
        support::held_and_waited(&holder, &waiter, "s-failover", at_old, what).await;
    let channel = names::lock_channel("s-failover");

    let switched = Instant::now();
    let new = tokio::task::spawn_blocking(|| sentinel::get().fail_over())
        .await
        .unwrap();
    eprintln!(
        "failover: {old} -> {new} and the group healthy again in {:?}",
        switched.elapsed()
    );
    let moved = support::eventually(Duration::from_secs(5), || {
        listeners(sentinel::get().node(new), &channel) == 1
    })
    .await;
    assert!(
        moved,
        "the waiter's subscription moved to the new master (listeners: {} at the old {old}, {} at the new {new}; the sentinels name {})",
        listeners(sentinel::get().node(old), &channel),
        listeners(sentinel::get().node(new), &channel),
        sentinel::get().master().port
    );
    // Each client followed it once, in a span saying from where to where.
    for client in [&holder, &waiter] {
        let id = client.client_id();
        let followed = (spans.closed(SPAN_FAILOVER, id, Duration::from_secs(5), |s| {
            s.field("result") == "followed"
        }))
        .await
        .expect("a failover span");
        assert_eq!(followed.field("topology"), "sentinel");
        let (from, to) = (followed.field("from"), followed.field("to"));
        assert!(from.ends_with(&format!(":{old}")) && to.ends_with(&format!(":{new}")));
    }

    // Renewed at the new master (its TTL goes back up), never lost.
    let pttl = || -> i64 {
        sentinel::get()
            .node(new)
            .cmd(&["PTTL", "s-failover"])
            .unwrap()
    };
    let (before, since) = (pttl(), Instant::now());
    let renewed = support::eventually(lease, || {
        pttl() > before - since.elapsed().as_millis() as i64 + 500
    })
    .await;
    assert!(renewed, "renewed at the new master");
    assert!(
        !held.is_lost(),
        "the holder kept its lock: {:?}",
        held.lost_reason()
    );
    // A demoted master refuses WAIT (a replica has none): that is a failover, not a server
    // without WAIT, and replica sync goes on.
    for client in [&holder, &waiter] {
        assert_eq!(client.replica_sync(), ReplicaSyncState::On);
    }
    assert_eq!(
        holders(sentinel::get().node(new), "s-failover"),
        vec![held.owner_field()]
    );
    let fresh = holder.lock("s-failover-after").lock().await.unwrap();
    assert_eq!(
        holders(sentinel::get().node(new), "s-failover-after"),
        vec![fresh.owner_field()],
        "a lock taken after the switch is written at the new master"
    );
    fresh.unlock().await.unwrap();

    let (guard, released, acquired) =
        support::release_to(held, waiting, "the waiter gets the lock").await;
    assert!(
        acquired - released < Duration::from_secs(1),
        "woken by the message at the new master, took {:?}",
        acquired - released
    );
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
}

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
/// once the replica has it. The replica is stopped while the first acquire waits, so the
/// other 31 queue behind it; once it runs again, 32 acquires took 2 `WAIT`s, not 32.
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
    let waiting = support::eventually(Duration::from_secs(10), || {
        let clients: String = sentinel::get().master().cmd(&["CLIENT", "LIST"]).unwrap();
        clients.lines().any(|l| l.contains("cmd=wait"))
    })
    .await;
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
    // 32 acquires and 32 unlocks: the acquires took 2, the unlocks (one after another) 32.
    assert!(
        waits <= 2 + 32,
        "the 31 queued acquires shared one WAIT: {waits} WAITs in all"
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
    let in_wait = || -> bool {
        let clients: String = sentinel::get().master().cmd(&["CLIENT", "LIST"]).unwrap();
        clients.lines().any(|l| l.contains("cmd=wait"))
    };
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

/// SIGSTOP of the master, as a network partition would isolate it: the sentinels promote its
/// replica while the old master, frozen, still believes it is the master. The waiter moves to
/// the new master before the old one could tell it anything (it is frozen), the holder keeps
/// its lock or is told it lost it, the waiter gets the lock once it is released, and after
/// the old master resumes (a stale master until the sentinels demote it) nothing is written
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_master_is_left_behind_and_nothing_is_written_there() {
    if !support::server_info::runs_failovers(
        "sentinel::a_frozen_master_is_left_behind_and_nothing_is_written_there",
    ) {
        return;
    }
    let _exclusive = SentinelGroup::exclusive().await;
    let lease = Duration::from_secs(8);
    let quick = |c: Config| {
        c.with_watchdog_timeout(lease)
            .with_response_timeout(Duration::from_millis(500))
    };
    let holder = client_with(quick).await;
    let waiter = client_with(quick).await;
    let old = sentinel::get().master().port;
    let at_old = |channel: &str| listeners(sentinel::get().node(old), channel);
    let what = "the waiter subscribes at the master";
    let (held, waiting) =
        support::held_and_waited(&holder, &waiter, "s-frozen", at_old, what).await;
    let channel = names::lock_channel("s-frozen");

    let frozen = Instant::now();
    let (old, new) = tokio::task::spawn_blocking(|| sentinel::get().freeze_master())
        .await
        .unwrap();
    let promoted = frozen.elapsed();
    // (Within 2 s: the follower hears +switch-master or asks the sentinels each second. The
    // frozen master cannot drop the connection, and a ping would notice only within 5.5 s.)
    let moved = support::eventually(Duration::from_secs(2), || {
        listeners(sentinel::get().node(new), &channel) == 1
    })
    .await;
    assert!(
        moved,
        "the waiter subscribed at the new master while the old one is frozen"
    );
    eprintln!(
        "frozen master {old}: replica {new} promoted after {promoted:?}, waiter moved after {:?}",
        frozen.elapsed()
    );

    // Released by its holder, or lost and told: either way the waiter gets the lock.
    let released = Instant::now();
    let was_lost = held.is_lost();
    let _ = held.unlock().await;
    let (guard, acquired) = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("the waiter gets the lock at the new master")
        .unwrap()
        .unwrap();
    eprintln!(
        "holder lost its lock: {was_lost}; waiter served {:?} after the release",
        acquired - released
    );
    assert_eq!(
        holders(sentinel::get().node(new), "s-frozen"),
        vec![guard.owner_field()]
    );

    // The old master comes back believing it is the master: nothing may be written there.
    sentinel::get().node(old).signal(libc::SIGCONT);
    let after = holder.lock("s-frozen-after").lock().await.unwrap();
    assert_eq!(
        holders(sentinel::get().node(new), "s-frozen-after"),
        vec![after.owner_field()],
        "written at the new master"
    );
    // (Once the sentinels have demoted it, the key may reach it by replication: look only
    // while it is still a stale master, as it is for a while after it resumes.)
    let (still_master, stale): (bool, i64) = {
        let group = sentinel::get();
        let node = group.node(old);
        (
            node.is_master(),
            node.cmd(&["EXISTS", "s-frozen-after"]).unwrap(),
        )
    };
    if still_master {
        assert_eq!(stale, 0, "nothing written at the stale master");
    } else {
        eprintln!("the old master was demoted before it could be looked at");
    }
    after.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
    tokio::task::spawn_blocking(move || sentinel::get().resume(old))
        .await
        .unwrap();
}

/// Connections the sentinels have accepted, together: a client's follower opens one per
/// question (sentinels keep their links to each other, and a sentinel has no commandstats).
/// Each call opens one to every sentinel too.
fn sentinel_connections() -> u64 {
    let group = support::sentinel::get();
    (group.sentinels.iter())
        .map(|node| {
            node.info_field("stats", "total_connections_received")
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// One follower per client: the watchdog's connection (its own thread and runtime) moves with
/// the client's follower instead of asking the sentinels itself, so an idle client asks them
/// about once a second (Redisson's scanInterval), not twice (two followers: about 22 in the
/// window; a loaded machine adds a few for timeouts and resubscriptions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_asks_the_sentinels_through_one_follower() {
    if !support::server_info::runs_failovers(
        "sentinel::a_client_asks_the_sentinels_through_one_follower",
    ) {
        return;
    }
    // (Exclusive: another test's clients would ask too.)
    let _exclusive = SentinelGroup::exclusive().await;
    let client = client_with(|c| c).await;
    let window = Duration::from_secs(10);
    let before = sentinel_connections();
    tokio::time::sleep(window).await;
    let sentinels = support::sentinel::get().sentinels.len() as u64;
    let asked = sentinel_connections() - before - sentinels;
    assert!(
        (6..=15).contains(&asked),
        "one follower asks about once a second: {asked} questions to the sentinels in {window:?}"
    );
    client.shutdown().await;
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
