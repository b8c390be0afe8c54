//! Replica sync on the cluster: every lock write waits for its master's replica, a hand-off
//! included, and a write never waits out another's `WAIT` when the spare lane is idle.

use std::time::Duration;

use redisson_lock::Owner;

use super::client_with;
use super::support::cluster::{self, key_on_master, RedisCluster};
use super::support::{self, eventually, load_scripts, server_info, skip};

/// The owner fields of the lock hash `key` on the node at `port` (a replica answers too).
fn holders(port: u16, key: &str) -> Vec<String> {
    let mut conn = cluster::get().node(port).conn().unwrap();
    let (fields,): (Vec<String>,) = redis::pipe()
        .cmd("READONLY")
        .ignore()
        .cmd("HKEYS")
        .arg(key)
        .query(&mut conn)
        .unwrap();
    fields
}

/// The ports of the master serving `key` and of its replica.
fn master_and_replica(key: &str) -> (u16, u16) {
    let group = cluster::get();
    let master = group.master_of(key);
    (master.port, group.replica_of(master).port)
}

fn signal(port: u16, signal: i32) {
    cluster::get().node(port).signal(signal);
}

/// Replica sync on a cluster, as Redisson's `checkLockSyncedSlaves`: each lock write is
/// followed by one `WAIT` at the key's master (which has a replica here); turned off, none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_writes_wait_for_the_masters_replica() {
    // (Exclusive: other tests' writes would be counted too.)
    let _exclusive = RedisCluster::exclusive().await;
    let name = key_on_master("waits", 1);
    let master = cluster::get().master_of(&name).port;
    let waits = || cluster::get().command_calls("WAIT")[&master];
    for (sync, expected) in [(true, 2), (false, 0)] {
        let client = client_with(|c| if sync { c } else { c.with_replica_sync(None) }).await;
        // (Scripts loaded first: a NOSCRIPT would add a WAIT of its own. Fixed leases: a
        // watchdog hold's renewal would too.)
        let lease = Duration::from_secs(30);
        let guard = client.lock(&name).lock_with_lease(lease).await.unwrap();
        guard.unlock().await.unwrap();
        let before = waits();
        let guard = client.lock(&name).lock_with_lease(lease).await.unwrap();
        guard.unlock().await.unwrap();
        assert_eq!(
            waits() - before,
            expected,
            "WAITs behind one acquire and one unlock (replica sync {sync})"
        );
        client.shutdown().await;
    }
}

/// Local hand-off on a cluster with replicas (sharded mode: one master's count shows every
/// listener): the unlock, the parked waiter's acquire and the listener count go in one write
/// behind one `WAIT`, so the waiter holds the lock at the replica when the release returns.
/// A hand-off the replica did not acknowledge is undone by its waiter, which waits on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_waits_for_the_replica_and_an_unacknowledged_one_is_undone() {
    let test = "a_hand_off_waits_for_the_replica_and_an_unacknowledged_one_is_undone";
    if !server_info().sharded_pubsub {
        // (In classic mode a cluster never hands off: listeners may sit on any node.)
        return skip(
            test,
            "no sharded pub/sub before Redis 7: no local hand-off on a cluster",
        );
    }
    let _exclusive = RedisCluster::exclusive().await;
    let name = key_on_master("c-hand-off", 2);
    let (master, replica) = master_and_replica(&name);
    let lease = Duration::from_secs(30);
    let client = client_with(|c| c).await;
    load_scripts(&client).await;
    let first = client.lock(&name).lock_with_lease(lease).await.unwrap();
    let owners = [Owner::new(), Owner::new(), Owner::new()];
    let mut acquired = support::waiters(&client, &name, &owners, lease);
    assert!(eventually(Duration::from_secs(5), || client.waiting() == 3).await);
    // The first release with waiters parked only counts the channel's listeners.
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), acquired.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || client.waiting() == 2).await);

    let calls = |command: &str| cluster::get().command_calls(command)[&master];
    let (waits, scripts) = (calls("WAIT"), calls("EVALSHA"));
    second.unlock().await.unwrap();
    let at_replica = holders(replica, &name);
    let third = tokio::time::timeout(Duration::from_secs(5), acquired.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        at_replica,
        vec![third.owner_field()],
        "the waiter held the lock at the replica when the release returned"
    );
    assert_eq!(
        (calls("WAIT") - waits, calls("EVALSHA") - scripts),
        (1, 2),
        "one WAIT behind the unlock and the acquire it carried; no attempt of the waiter's own"
    );

    signal(replica, libc::SIGSTOP);
    // Handed off, but unacknowledged (the WAIT waits out its 1 s): the waiter must not take it.
    third.unlock().await.unwrap();
    let early = tokio::time::timeout(Duration::from_millis(500), acquired.recv()).await;
    signal(replica, libc::SIGCONT);
    assert!(
        early.is_err(),
        "a hand-off no replica acknowledged gave the waiter the lock"
    );
    let last = tokio::time::timeout(Duration::from_secs(10), acquired.recv())
        .await
        .expect("the waiter takes the lock once the replica answers")
        .unwrap();
    assert_eq!(
        holders(replica, &name),
        vec![last.owner_field()],
        "held at the replica too, by that waiter alone"
    );
    last.unlock().await.unwrap();
    assert_eq!(client.held_locks(), 0);
    client.shutdown().await;
    tokio::task::spawn_blocking(|| cluster::get().wait_healthy())
        .await
        .unwrap();
}

/// A waiter of the same client woken by an unlock message does not wait out that unlock's
/// `WAIT` at their master: its acquire goes out at once on the spare lane. The master's
/// replica is stopped, so the unlock's `WAIT` blocks; the waiter's acquire has run at the
/// master meanwhile, and once the replica answers both return, acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_waiter_does_not_queue_behind_the_unlocks_wait() {
    let _exclusive = RedisCluster::exclusive().await;
    let name = key_on_master("c-spare-lane", 0);
    let (master, replica) = master_and_replica(&name);
    let client = client_with(|c| {
        c.with_local_handoff(false)
            .with_replica_sync(Some(Duration::from_secs(5)))
    })
    .await;
    load_scripts(&client).await;
    let held = client.lock(&name).lock().await.unwrap();
    let lock = client.lock(&name).with_owner(Owner::new());
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
    assert!(eventually(Duration::from_secs(5), || client.waiting() == 1).await);

    signal(replica, libc::SIGSTOP);
    let unlock = tokio::spawn(held.unlock());
    let taken = eventually(Duration::from_secs(3), || holders(master, &name).len() == 1).await;
    let unlock_out = !unlock.is_finished();
    signal(replica, libc::SIGCONT);
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
        holders(replica, &name),
        vec![guard.owner_field()],
        "held at the replica"
    );
    guard.unlock().await.unwrap();
    client.shutdown().await;
    tokio::task::spawn_blocking(|| cluster::get().wait_healthy())
        .await
        .unwrap();
}
