//! Locks on a master watched by Redis Sentinel: a master, its replica and three sentinels
//! shared by every test of this binary (`support::sentinel`), distinct keys per test. Tests
//! that fail the master over take `SentinelGroup::exclusive()` and leave the group healthy;
//! the others take `SentinelGroup::steady()`.

mod support;

use std::time::{Duration, Instant};

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
    let held = holder.lock("s-wake").lock().await.unwrap();
    let lock = waiter.lock("s-wake");
    let waiting = tokio::spawn(async move { lock.lock().await.map(|g| (g, Instant::now())) });
    let channel = names::lock_channel("s-wake");
    let subscribed = support::eventually(Duration::from_secs(5), || {
        listeners(sentinel::get().master(), &channel) == 1
    })
    .await;
    assert!(subscribed, "the waiter subscribes at the master");
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (guard, acquired) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken well before the 30 s lease")
        .unwrap()
        .unwrap();
    let took = acquired - released;
    assert!(
        took < Duration::from_secs(2),
        "woken by the message, took {took:?}"
    );
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
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
    let _exclusive = SentinelGroup::exclusive().await;
    let lease = Duration::from_millis(1500);
    let holder = client_with(|c| c.with_watchdog_timeout(lease)).await;
    let waiter = client_with(|c| c).await;
    let held = holder.lock("s-failover").lock().await.unwrap();
    let lock = waiter.lock("s-failover");
    let waiting = tokio::spawn(async move { lock.lock().await.map(|g| (g, Instant::now())) });
    let channel = names::lock_channel("s-failover");
    let old = sentinel::get().master().port;
    let subscribed = support::eventually(Duration::from_secs(5), || {
        listeners(sentinel::get().node(old), &channel) == 1
    })
    .await;
    assert!(subscribed, "the waiter subscribes at the old master");

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
    assert!(moved, "the waiter's subscription moved to the new master");

    // Two more leases: renewed at the new master, never lost.
    tokio::time::sleep(lease * 2).await;
    assert!(
        !held.is_lost(),
        "the holder kept its lock: {:?}",
        held.lost_reason()
    );
    {
        let group = sentinel::get();
        let master = group.node(new);
        assert_eq!(holders(master, "s-failover"), vec![held.owner_field()]);
        let pttl: i64 = master.cmd(&["PTTL", "s-failover"]).unwrap();
        assert!(pttl > 0, "renewed at the new master (PTTL {pttl})");
    }
    let fresh = holder.lock("s-failover-after").lock().await.unwrap();
    assert_eq!(
        holders(sentinel::get().node(new), "s-failover-after"),
        vec![fresh.owner_field()],
        "a lock taken after the switch is written at the new master"
    );
    fresh.unlock().await.unwrap();

    let released = Instant::now();
    held.unlock().await.unwrap();
    let (guard, acquired) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter gets the lock")
        .unwrap()
        .unwrap();
    assert!(
        acquired - released < Duration::from_secs(1),
        "woken by the message at the new master, took {:?}",
        acquired - released
    );
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
}

/// `rlock --sentinel URL,URL... --master-name NAME`: `status` names the master, `run` holds
/// the lock there for its command, `unlock --force` frees a lock held by another client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_works_through_the_sentinels() {
    let _steady = SentinelGroup::steady().await;
    let urls = sentinel::get().sentinel_urls().join(",");
    let rlock = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rlock"))
            .args(["--sentinel", &urls, "--master-name", MASTER_NAME])
            .args(args)
            .output()
            .expect("run rlock");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, text, err) = rlock(&["run", "s-cli", "--", "sh", "-c", "echo $RLOCK_KEY"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(text.trim(), "s-cli");

    let client = client_with(|c| c).await;
    let guard = client.lock("s-cli").lock().await.unwrap();
    let (code, json, err) = rlock(&["status", "s-cli", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let status: serde_json::Value = serde_json::from_str(&json).unwrap();
    let master = sentinel::get().master().port;
    assert_eq!(status["state"], "held");
    assert_eq!(status["node"], format!("127.0.0.1:{master}"));
    assert_eq!(status["owners"][0]["field"], guard.owner_field());

    let (code, _, err) = rlock(&["unlock", "s-cli", "--force", "--yes"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!client.lock("s-cli").is_locked().await.unwrap());
    // Without the master's name the sentinel urls mean nothing: refused as usage.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rlock"))
        .args(["--sentinel", &urls, "status", "s-cli"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("--master-name"),
        "the missing flag is named: {err}"
    );
    let _ = guard.unlock().await;
    client.shutdown().await;
}
