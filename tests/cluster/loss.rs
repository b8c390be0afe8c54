//! Loss told at once on the cluster: the loss watch's batched checks across a migrating slot,
//! and keyspace events (a raw `DEL`, an expiry) heard at each key's master, in either publish
//! mode.

use std::time::{Duration, Instant};

use redisson_lock::{names, LockClient, LostReason, PublishMode};

use super::support::cluster::{self, key_on_master, slot_of, RedisCluster};
use super::support::{self, server_info};
use super::{client_with, listeners};

/// The loss watch's checks meet a slot half migrated: a hold whose key already moved answers
/// "not served here" at its old master and is read again where it lives now, never taken for
/// gone; one whose key was deleted there is found gone at once. (Every held lock is checked
/// when its subscription comes back: the holder's subscription connections are killed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_across_a_migrating_slot_never_takes_a_moved_hold_for_gone() {
    let _exclusive = RedisCluster::exclusive().await;
    let sharded = server_info().sharded_pubsub;
    // (A watchdog of 30 s: no renewal finds the loss first.)
    let client = client_with(|c| {
        c.with_prompt_loss_detection(true)
            .with_watchdog_timeout(Duration::from_secs(30))
    })
    .await;
    let slot = slot_of("{checked}");
    let names: Vec<String> = (0..20).map(|i| format!("{{checked}}:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).lock().await.unwrap());
    }
    let all_listened = support::eventually(Duration::from_secs(10), || {
        (names.iter()).all(|n| listeners(n, &names::lock_channel(n), sharded) == 1)
    })
    .await;
    assert!(all_listened, "every held lock is listened for");
    let from = cluster::get().master_of_slot(slot).port;
    // The acquires' latches are swept before keys move: Redis 6.2 hands a slot's keys out in
    // name order, and `redisson_lock_acquire_latch:…` sorts before `{checked}:…`, so with them
    // still there the keys moved could all be latches.
    let only_locks = support::eventually(Duration::from_secs(10), || {
        let count: i64 = (cluster::get().node(from))
            .cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
            .unwrap();
        count == names.len() as i64
    })
    .await;
    assert!(only_locks, "the slot holds the locks and nothing else");
    let to = (cluster::get().masters().iter())
        .find(|m| m.port != from)
        .unwrap()
        .port;
    let moved: Vec<usize> = tokio::task::block_in_place(|| {
        let cluster = cluster::get();
        cluster.start_migration(slot, to);
        assert_eq!(cluster.move_keys(slot, to, 10), 10);
        let source = cluster.node(from);
        (0..names.len())
            // (The source answers ASK for a key of the slot it no longer has.)
            .filter(|&i| source.cmd::<i64>(&["EXISTS", &names[i]]).unwrap_or(0) == 0)
            .collect()
    });
    assert!(
        (2..names.len()).contains(&moved.len()),
        "some locks moved, not all: {moved:?}"
    );
    let victim = moved[0];
    let hgets_before = cluster::get().command_calls("hget")[&to];
    tokio::task::block_in_place(|| {
        let target = cluster::get().node(to).conn().unwrap();
        let ((), deleted): ((), i64) = redis::pipe()
            .cmd("ASKING")
            .cmd("DEL")
            .arg(&names[victim])
            .query(&mut { target })
            .unwrap();
        assert_eq!(deleted, 1);
        for master in cluster::get().masters() {
            let _: redis::RedisResult<i64> = master.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
        }
    });
    tokio::time::timeout(Duration::from_secs(5), guards[victim].lost())
        .await
        .expect("the hold deleted at its new master is told lost");
    assert_eq!(
        guards[victim].lost_reason(),
        Some(redisson_lock::LostReason::Gone)
    );
    // Every moved hold was read again at the target (an `HGET` each, through `ASK`).
    let read_again = support::eventually(Duration::from_secs(5), || {
        cluster::get().command_calls("hget")[&to] >= hgets_before + moved.len() as u64
    })
    .await;
    let lost: Vec<&str> = (guards.iter().filter(|g| g.is_lost()))
        .map(|g| g.name())
        .collect();
    assert_eq!(
        lost,
        [names[victim].as_str()],
        "only the deleted hold is lost"
    );
    assert!(read_again, "the moved holds were read where they live");
    tokio::task::block_in_place(|| {
        let cluster = cluster::get();
        cluster.move_keys(slot, to, usize::MAX);
        cluster.finish_migration(slot, to);
    });
    for guard in guards.into_iter().filter(|g| !g.is_lost()) {
        guard.unlock().await.unwrap();
    }
    tokio::task::block_in_place(|| cluster::get().migrate_slot(slot, from));
    client.shutdown().await;
}

/// Sets `notify-keyspace-events` on every node for as long as it lives (Redis ships it empty).
struct KeyspaceEvents;

impl KeyspaceEvents {
    fn on(flags: &str) -> KeyspaceEvents {
        for node in cluster::get().masters() {
            let _: () = node
                .cmd(&["CONFIG", "SET", "notify-keyspace-events", flags])
                .unwrap();
        }
        KeyspaceEvents
    }
}

impl Drop for KeyspaceEvents {
    fn drop(&mut self) {
        for node in cluster::get().masters() {
            let _ = node.cmd::<()>(&["CONFIG", "SET", "notify-keyspace-events", ""]);
        }
    }
}

/// Where the nodes send keyspace events, a raw `DEL` and an expiry of a held lock's key are
/// told at once on a cluster too, on every master, in sharded and in classic mode: each key's
/// keyspace channel is subscribed at the master serving the key (a node sends only its own
/// keys' events), not where the channel's name would hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_del_or_an_expiry_is_told_at_once_on_every_master() {
    // (Exclusive: other tests' clients would listen to keyspace channels too.)
    let _exclusive = RedisCluster::exclusive().await;
    let _events = KeyspaceEvents::on("Kgxe");
    // Classic mode is what a Redis 6.2 cluster gets; on 7 and newer it is forced too.
    let mut modes = vec![PublishMode::Publish];
    if server_info().sharded_pubsub {
        modes.push(PublishMode::SPublish);
    }
    for mode in modes {
        let client = client_with(|c| {
            c.with_watchdog_timeout(Duration::from_secs(30))
                .with_prompt_loss_detection(true)
                .with_publish_mode(mode)
        })
        .await;
        for master in 0..3 {
            for what in ["del", "expiry"] {
                let name = key_on_master(&format!("c-keyspace-{what}-{mode:?}"), master);
                told_at_once(&client, &name, what).await;
            }
        }
        client.shutdown().await;
    }
}

/// Holds `name`, waits for its keyspace channel to be subscribed at its master, then has the
/// key deleted (`what` = `del`) or expire there, and asserts the lost signal comes at once.
async fn told_at_once(client: &LockClient, name: &str, what: &str) {
    let channel = names::keyspace_channel(0, name);
    assert_ne!(
        slot_of(&channel),
        slot_of(name),
        "the channel's name hashes elsewhere"
    );
    let guard = client.lock(name).lock().await.unwrap();
    let at_master = || {
        let group = cluster::get();
        let (_, n): (String, i64) = group
            .master_of(name)
            .cmd(&["PUBSUB", "NUMSUB", &channel])
            .unwrap();
        n
    };
    assert!(
        support::eventually(Duration::from_secs(5), || at_master() == 1).await,
        "{name}'s keyspace channel is subscribed at its master"
    );
    let at = Instant::now();
    let args = match what {
        "del" => vec!["DEL", name],
        _ => vec!["PEXPIRE", name, "50"],
    };
    let _: i64 = cluster::get().master_of(name).cmd(&args).unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .unwrap_or_else(|_| {
            panic!("a raw {what} of {name} told well before the next renewal (10 s away)")
        });
    eprintln!("{name}: raw {what} to lost signal {:?}", at.elapsed());
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// In classic mode no node pushes an `UNSUBSCRIBE` when a slot moves: a held lock's keyspace
/// channel follows its key to the new master at the client's next read of the slot map, and a
/// raw `DEL` there is told at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyspace_channel_follows_its_keys_slot_in_classic_mode() {
    let _exclusive = RedisCluster::exclusive().await;
    let _events = KeyspaceEvents::on("Kgxe");
    let client = client_with(|c| {
        c.with_watchdog_timeout(Duration::from_secs(30))
            .with_prompt_loss_detection(true)
            .with_publish_mode(PublishMode::Publish)
    })
    .await;
    let name = key_on_master("c-keyspace-moved", 0);
    let channel = names::keyspace_channel(0, &name);
    let slot = slot_of(&name);
    let from = cluster::get().master_of_slot(slot).port;
    let to = (cluster::get().masters().iter())
        .find(|m| m.port != from)
        .unwrap()
        .port;
    let subscribers_at = |port: u16| {
        let (_, n): (String, i64) = cluster::get()
            .node(port)
            .cmd(&["PUBSUB", "NUMSUB", &channel])
            .unwrap();
        n
    };
    let guard = client.lock(&name).lock().await.unwrap();
    assert!(
        support::eventually(Duration::from_secs(5), || subscribers_at(from) == 1).await,
        "{name}'s keyspace channel is subscribed at its master"
    );
    // The client reads the slot map every 5 s: one read finding it unchanged first (a client
    // in its steady state; the time passing is the scenario, nothing is waited for by it).
    tokio::time::sleep(Duration::from_secs(6)).await;
    tokio::task::block_in_place(|| cluster::get().migrate_slot(slot, to));
    let followed = support::eventually(Duration::from_secs(15), || {
        subscribers_at(to) == 1 && subscribers_at(from) == 0
    })
    .await;
    assert!(followed, "the keyspace channel moved with its key's slot");
    let _: i64 = cluster::get().node(to).cmd(&["DEL", &name]).unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("a raw DEL at the key's new master is told at once");
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    client.shutdown().await;
    tokio::task::block_in_place(|| cluster::get().migrate_slot(slot, from));
}
