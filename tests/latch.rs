//! The count-down latch (Redisson's `RCountDownLatch`) on a real server: its layout (a string
//! count, deleted at zero; the channel `redisson_countdownlatch__channel__{name}`), waiters
//! woken by the count-down that opens it (or a delete), a bounded wait, an exactly-once
//! count-down under a lost reply, and bad input refused with nothing changed. Against Redisson
//! itself: `tests/interop_synchronizers.rs`.

mod support;

use std::time::Duration;

use redisson_lock::Error;
use support::RedisServer;
use tokio::time::{timeout, Instant};

const PROMPT: Duration = Duration::from_secs(5);
/// A waiter that misses a message looks again after a second: a wake well inside that was the
/// message's.
const BY_MESSAGE: Duration = Duration::from_millis(600);

fn count(server: &RedisServer, key: &str) -> Option<String> {
    server.cmd(&["GET", key])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_counts_down_in_redissons_layout() {
    let server = RedisServer::start();
    let client = server.client().await;
    let ready = client.count_down_latch("ready");

    assert_eq!(ready.count().await.unwrap(), 0, "absent: open");
    assert!(
        ready.wait_for(Duration::ZERO).await.unwrap(),
        "open at once"
    );
    assert!(ready.try_set_count(2).await.unwrap());
    assert!(!ready.try_set_count(5).await.unwrap(), "set once only");
    assert_eq!(count(&server, "ready").as_deref(), Some("2"));
    assert_eq!(server.cmd::<i64>(&["PTTL", "ready"]), -1, "no TTL");
    assert_eq!(ready.count_down().await.unwrap(), 1);
    assert_eq!(ready.count().await.unwrap(), 1);
    assert_eq!(ready.count_down().await.unwrap(), 0, "this one opened it");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "ready"]),
        0,
        "deleted at zero"
    );
    assert_eq!(ready.count_down().await.unwrap(), -1, "open already");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "ready"]),
        0,
        "and stays absent"
    );
    assert!(!ready.delete().await.unwrap());
    assert!(ready.try_set_count(1).await.unwrap(), "a new round");
    assert!(ready.delete().await.unwrap());
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_changes_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let latch = client.count_down_latch("bad");
    assert!(matches!(
        latch.try_set_count(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(server.cmd::<i64>(&["EXISTS", "bad"]), 0);

    let _: i64 = server.cmd(&["HSET", "a-hash", "f", "1"]);
    let _: String = server.cmd(&["SET", "a-word", "many"]);
    for name in ["a-hash", "a-word"] {
        let other = client.count_down_latch(name);
        let counted = other.count_down().await;
        assert!(
            matches!(counted, Err(Error::WrongType { .. })),
            "{name}: {counted:?}"
        );
        let waited = other.wait_for(Duration::from_millis(10)).await;
        assert!(
            matches!(waited, Err(Error::WrongType { .. })),
            "{name}: {waited:?}"
        );
    }
    assert_eq!(server.cmd::<String>(&["HGET", "a-hash", "f"]), "1");
    assert_eq!(count(&server, "a-word").as_deref(), Some("many"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_the_count_down_that_opens_it() {
    let server = RedisServer::start();
    let client = server.client().await;
    let waiters_client = server.client().await;
    let gate = client.count_down_latch("gate");
    gate.try_set_count(2).await.unwrap();

    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let gate = waiters_client.count_down_latch("gate");
            tokio::spawn(async move {
                gate.wait().await.unwrap();
                Instant::now()
            })
        })
        .collect();
    server
        .until_subscribers("redisson_countdownlatch__channel__{gate}", 1)
        .await;
    assert_eq!(gate.count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "1 to go: closed");
    let opened = Instant::now();
    assert_eq!(gate.count_down().await.unwrap(), 0);
    for waiter in waiters {
        let at = timeout(PROMPT, waiter).await.unwrap().unwrap();
        assert!(
            at - opened < BY_MESSAGE,
            "woken by the opening message, {:?} after it",
            at - opened
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_wait_ends_closed_and_a_delete_opens_the_latch() {
    let server = RedisServer::start();
    let client = server.client().await;
    let gate = client.count_down_latch("bounded");
    gate.try_set_count(1).await.unwrap();

    let started = Instant::now();
    assert!(!gate.wait_for(Duration::from_millis(200)).await.unwrap());
    assert!(started.elapsed() >= Duration::from_millis(200), "it waited");

    let waiter = tokio::spawn({
        let gate = gate.clone();
        async move {
            let opened = gate.wait_for(Duration::from_secs(30)).await.unwrap();
            (Instant::now(), opened)
        }
    });
    server
        .until_subscribers("redisson_countdownlatch__channel__{bounded}", 1)
        .await;
    let deleted = Instant::now();
    assert!(gate.delete().await.unwrap());
    let (at, opened) = timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(opened, "a deleted latch is open");
    assert!(at - deleted < BY_MESSAGE, "woken by the delete's message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_counts_down_once() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    let warm = client.count_down_latch("warm-up");
    warm.try_set_count(1).await.unwrap();
    warm.count_down().await.unwrap();

    let latch = client.count_down_latch("once");
    latch.try_set_count(3).await.unwrap();
    proxy.cut_after_reply(&[&support::script_sha("latch_count_down"), "once"], 1);
    assert_eq!(latch.count_down().await.unwrap(), 2);
    assert_eq!(proxy.cuts(), 1, "the fault fired");
    assert_eq!(count(&server, "once").as_deref(), Some("2"), "counted once");
}

#[test]
fn the_blocking_latch_opens_for_a_thread_waiting_on_it() {
    let server = RedisServer::start();
    let client = redisson_lock::blocking::LockClient::connect(&server.url()).unwrap();
    let gate = client.count_down_latch("blocking");
    assert!(gate.try_set_count(1).unwrap());
    let waiter = std::thread::spawn({
        let gate = gate.clone();
        move || gate.wait_for(Duration::from_secs(30)).unwrap()
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(!waiter.is_finished(), "closed");
    assert_eq!(gate.count_down().unwrap(), 0);
    assert!(waiter.join().unwrap(), "opened");
    assert_eq!(gate.count().unwrap(), 0);
    client.shutdown();
}
