//! The read-write lock (Redisson `RReadWriteLock`): shared reads and exclusive writes in one
//! hash, Redisson's layout (`mode`, reader fields, `<owner>:write` fields, per-hold reader
//! timeout keys), wake-ups by the `redisson_rwlock:{N}` channel (`1` wakes every waiter after a
//! write unlock, `0` one after the last read unlock), the watchdog over both halves, and the
//! exactly-once acquire through a lost reply.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redisson_lock::{LostReason, Owner};
use support::RedisServer;

const PROMPT: Duration = Duration::from_secs(5);
const LONG_LEASE: Duration = Duration::from_secs(30);

fn channel(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

fn hash(server: &RedisServer, name: &str) -> HashMap<String, String> {
    server.cmd(&["HGETALL", name])
}

fn timeout_key(name: &str, field: &str, hold: u32) -> String {
    format!("{{{name}}}:{field}:rwlock_timeout:{hold}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_exclude_writers_in_redissons_layout() {
    let server = RedisServer::start();
    let client = server.client().await;
    let rw = client.read_write_lock("doc");
    let (a, b, w) = (Owner::new(), Owner::new(), Owner::new());

    let ra = rw.read_lock().with_owner(a).lock().await.unwrap();
    let ra2 = rw.read_lock().with_owner(a).lock().await.unwrap();
    let rb = rw
        .read_lock()
        .with_owner(b)
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    assert_eq!(
        hash(&server, "doc"),
        HashMap::from([
            ("mode".to_string(), "read".to_string()),
            (ra.owner_field(), "2".to_string()),
            (rb.owner_field(), "1".to_string()),
        ])
    );
    // One timeout key per hold, each with its hold's lease.
    for (field, hold) in [
        (ra.owner_field(), 1),
        (ra.owner_field(), 2),
        (rb.owner_field(), 1),
    ] {
        let pttl: i64 = server.cmd(&["PTTL", &timeout_key("doc", &field, hold)]);
        assert!(pttl > 0, "{field} hold {hold}: {pttl}");
    }
    assert!(rw.read_lock().is_locked().await.unwrap());
    assert!(!rw.write_lock().is_locked().await.unwrap());
    assert_eq!(rw.read_lock().hold_count_of(a).await.unwrap(), 2);
    assert_eq!(rw.write_lock().hold_count_of(a).await.unwrap(), 0);

    // Nobody writes while anyone reads, not even a reader (no upgrade).
    for owner in [w, a] {
        let write = rw.write_lock().with_owner(owner);
        assert!(write.try_lock().await.unwrap().is_none());
    }
    // A plain RLock of the same name finds the hash held (and leaves it alone).
    assert!(client.lock("doc").try_lock().await.unwrap().is_none());

    // The hash lives as long as its longest reader lease: b's 30 s, once a's are released.
    drop(ra2);
    ra.unlock().await.unwrap();
    assert!(support::eventually(PROMPT, || hash(&server, "doc").len() == 2).await);
    let pttl: i64 = server.cmd(&["PTTL", "doc"]);
    assert!(pttl > 20_000, "the hash's TTL follows b's lease: {pttl}");
    rb.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "doc"]), 0);
    let keys: Vec<String> = server.cmd(&["KEYS", "*rwlock_timeout*"]);
    assert!(keys.is_empty(), "timeout keys left: {keys:?}");

    // A writer's field is `<owner>:write`.
    let write = rw.write_lock().with_owner(w).lock().await.unwrap();
    assert_eq!(
        hash(&server, "doc"),
        HashMap::from([
            ("mode".to_string(), "write".to_string()),
            (format!("{}:write", write.owner_field()), "1".to_string()),
        ])
    );
    assert!(rw.write_lock().is_locked().await.unwrap());
    assert!(!rw.read_lock().is_locked().await.unwrap());
    assert_eq!(rw.write_lock().hold_count_of(w).await.unwrap(), 1);
    assert!(rw
        .read_lock()
        .with_owner(a)
        .try_lock()
        .await
        .unwrap()
        .is_none());
    write.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_unlock_wakes_every_waiting_reader_of_another_client() {
    let server = RedisServer::start();
    let (writer, readers) = (server.client().await, server.client().await);
    let held = writer
        .read_write_lock("feed")
        .write_lock()
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let read = readers.read_write_lock("feed").read_lock();
            tokio::spawn(async move { read.lock().await.unwrap() })
        })
        .collect();
    server.until_subscribers(&channel("feed"), 1).await;
    held.unlock().await.unwrap();
    // All three, well inside the 30 s lease: only the wake-all message explains it.
    let mut guards = Vec::new();
    for waiter in waiting {
        guards.push(tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap());
    }
    assert_eq!(hash(&server, "feed").len(), 4, "mode and three readers");
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert_eq!(server.cmd::<i64>(&["EXISTS", "feed"]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_read_unlock_wakes_a_waiting_writer() {
    let server = RedisServer::start();
    let (readers, writer) = (server.client().await, server.client().await);
    let rw = readers.read_write_lock("queue");
    let first = rw.read_lock().lock_with_lease(LONG_LEASE).await.unwrap();
    let second = rw.read_lock().lock_with_lease(LONG_LEASE).await.unwrap();
    let write = writer.read_write_lock("queue").write_lock();
    let waiter = tokio::spawn(async move { write.lock().await.unwrap() });
    server.until_subscribers(&channel("queue"), 1).await;
    first.unlock().await.unwrap();
    assert!(!waiter.is_finished(), "a reader is left");
    second.unlock().await.unwrap();
    let guard = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(writer
        .read_write_lock("queue")
        .write_lock()
        .is_locked()
        .await
        .unwrap());
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_downgrades_to_reading_and_other_readers_are_woken() {
    let server = RedisServer::start();
    let (client, other) = (server.client().await, server.client().await);
    let rw = client.read_write_lock("report").with_owner(Owner::new());
    let write = rw.write_lock().lock().await.unwrap();
    let read = rw.read_lock().lock().await.unwrap(); // the writer may read
    assert!(
        rw.read_lock().is_locked().await.unwrap(),
        "write mode with a reader"
    );

    let elsewhere = other.read_write_lock("report").read_lock();
    let reader = tokio::spawn(async move { elsewhere.lock().await.unwrap() });
    server.until_subscribers(&channel("report"), 1).await;
    write.unlock().await.unwrap();
    let theirs = tokio::time::timeout(PROMPT, reader).await.unwrap().unwrap();
    assert_eq!(hash(&server, "report")["mode"], "read");
    assert!(other
        .read_write_lock("report")
        .write_lock()
        .try_lock()
        .await
        .unwrap()
        .is_none());
    read.unlock().await.unwrap();
    theirs.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "report"]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_of_the_same_client_is_not_kept_waiting_by_another_reader() {
    let server = RedisServer::start();
    let client = server.client().await;
    let rw = client.read_write_lock("local");
    let writer = rw.clone().with_owner(Owner::new());
    let write = writer.write_lock().lock().await.unwrap();
    let read = writer.read_lock().lock().await.unwrap();
    let other = rw.read_lock().with_owner(Owner::new());
    let waiter = tokio::spawn(async move { other.lock().await.unwrap() });
    server.until_subscribers(&channel("local"), 1).await;
    // The writer keeps reading: this client still holds the lock, but for reading, which
    // shares; the woken waiter must try rather than wait for that reader's unlock.
    write.unlock().await.unwrap();
    let theirs = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    theirs.unlock().await.unwrap();
    read.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_both_halves_and_tells_a_reader_whose_lease_ran_out() {
    let server = RedisServer::start();
    let client = server.client().await;
    let watchdog = server.config().watchdog_timeout();
    let rw = client.read_write_lock("kept");
    let read = rw.read_lock().lock().await.unwrap();
    let field = read.owner_field();
    // Past two leases: only renewal keeps the hash and the reader's timeout key.
    tokio::time::sleep(watchdog * 2).await;
    assert!(!read.is_lost());
    assert_eq!(hash(&server, "kept")[&field], "1");
    let pttl: i64 = server.cmd(&["PTTL", &timeout_key("kept", &field, 1)]);
    assert!(pttl > 0, "the reader's timeout key is renewed: {pttl}");

    // A reader whose timeout key is gone (its lease ran out once, as after a long pause) is
    // no reader any more: another reader's unlock may free the lock under it.
    server.cmd::<i64>(&["DEL", &timeout_key("kept", &field, 1)]);
    tokio::time::timeout(watchdog * 2, read.lost())
        .await
        .unwrap();
    assert_eq!(read.lost_reason(), Some(LostReason::Gone));
    drop(read);

    let write = rw.write_lock().lock().await.unwrap();
    tokio::time::sleep(watchdog * 2).await;
    assert!(!write.is_lost());
    assert_eq!(hash(&server, "kept")["mode"], "write");
    write.unlock().await.unwrap();
    assert!(
        support::eventually(PROMPT, || server.cmd::<i64>(&["EXISTS", "kept"]) == 0).await,
        "the lost reader's release and the writer's unlock leave nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_half_forces_only_its_own_mode_and_other_kinds_are_left_alone() {
    let server = RedisServer::start();
    let client = server.client().await;
    let rw = client.read_write_lock("forced");
    let read = rw.read_lock().lock().await.unwrap();
    assert!(
        !rw.write_lock().force_unlock().await.unwrap(),
        "held for reading"
    );
    assert!(rw.read_lock().force_unlock().await.unwrap());
    assert_eq!(server.cmd::<i64>(&["EXISTS", "forced"]), 0);
    tokio::time::timeout(PROMPT, read.lost()).await.unwrap();

    // An RLock of the same name: neither half takes it or writes into it.
    let plain = client.lock("forced").lock().await.unwrap();
    let before = hash(&server, "forced");
    assert!(rw.read_lock().try_lock().await.unwrap().is_none());
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    assert_eq!(hash(&server, "forced"), before);
    plain.unlock().await.unwrap();

    // A key of another type: a typed error, nothing changed.
    server.cmd::<()>(&["SET", "forced", "x"]);
    for half in [rw.read_lock(), rw.write_lock()] {
        assert!(half.try_lock().await.unwrap_err().is_wrong_type());
    }
    assert_eq!(server.cmd::<String>(&["GET", "forced"]), "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_counts_one_read_hold() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    // Load the read acquire first, so the cut reply is the script's own.
    let warm_up = client.read_write_lock("warm-up").read_lock();
    warm_up.lock().await.unwrap().unlock().await.unwrap();
    let sha = support::script_sha("read_acquire");

    proxy.cut_after_reply(&[&sha, "lost"], 1);
    let guard = client
        .read_write_lock("lost")
        .read_lock()
        .lock()
        .await
        .unwrap();
    assert_eq!(proxy.cuts(), 1, "the fault fired");
    assert_eq!(hash(&server, "lost")[&guard.owner_field()], "1", "one hold");
    let keys: Vec<String> = server.cmd(&["KEYS", "{lost}:*rwlock_timeout*"]);
    assert_eq!(keys.len(), 1, "one timeout key: {keys:?}");
    guard.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "lost"]), 0);
}
