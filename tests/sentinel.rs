//! Locks on a master watched by Redis Sentinel: a master, its replica and three sentinels
//! shared by every test of this binary (`support::sentinel`), distinct keys per test. Tests
//! that fail the master over take `SentinelGroup::exclusive()` and leave the group healthy;
//! the others take `SentinelGroup::steady()`.

mod support;

#[path = "sentinel/replica_sync.rs"]
mod replica_sync;

use std::time::{Duration, Instant};

use redisson_lock::inspect::ReplicaSyncState;
use redisson_lock::observe::SPAN_FAILOVER;
use redisson_lock::{names, Config, Error, LockClient};
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

/// Calls of `command` (`INFO commandstats` name, e.g. `evalsha`) `node` has run.
fn calls(node: &Node, command: &str) -> u64 {
    node.info_field("commandstats", &format!("cmdstat_{command}"))
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
