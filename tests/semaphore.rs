//! The semaphore (Redisson's `RSemaphore`) on a real server: its layout (a string count, the
//! channel `redisson_sc:{name}`), waiters woken by the release that frees their permits,
//! guards that give permits back (dropped, released, or at shutdown) or keep them (`forget`),
//! exactly-once acquires and releases under lost replies, cancel safety, and bad input
//! refused with nothing changed. Against Redisson itself: `tests/interop_synchronizers.rs`.

mod support;

use std::time::Duration;

use redisson_lock::{Error, LockClient};
use support::{eventually, RedisServer};
use tokio::time::{timeout, Instant};

const PROMPT: Duration = Duration::from_secs(5);
/// A waiter that misses a release looks again after a second: a wake well inside that was the
/// message's.
const BY_MESSAGE: Duration = Duration::from_millis(600);

fn count(server: &RedisServer, key: &str) -> Option<String> {
    server.cmd(&["GET", key])
}

fn semaphore_channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

/// One acquire and release on another semaphore: loads the scripts, so that the calls a test
/// counts or cuts are the first sends (no `NOSCRIPT` round).
async fn load_scripts(client: &LockClient) {
    let warm = client.semaphore("warm-up");
    warm.add_permits(1).await.unwrap();
    warm.acquire(1).await.unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_taken_and_given_back_in_redissons_layout() {
    let server = RedisServer::start();
    let client = server.client().await;
    let pool = client.semaphore("pool");

    assert_eq!(pool.available_permits().await.unwrap(), 0, "absent reads 0");
    assert!(pool.try_set_permits(3).await.unwrap());
    assert!(!pool.try_set_permits(5).await.unwrap(), "set once only");
    assert_eq!(count(&server, "pool").as_deref(), Some("3"));
    assert_eq!(server.cmd::<i64>(&["PTTL", "pool"]), -1, "no TTL");

    let two = pool.acquire(2).await.unwrap();
    assert_eq!(two.permits(), 2);
    assert_eq!(count(&server, "pool").as_deref(), Some("1"));
    assert!(pool.try_acquire(2).await.unwrap().is_none(), "1 left");
    let started = Instant::now();
    assert!(pool
        .try_acquire_for(2, Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(200), "it waited");
    assert_eq!(pool.available_permits().await.unwrap(), 1);
    two.release().await.unwrap();
    assert_eq!(count(&server, "pool").as_deref(), Some("3"));

    // Redisson's addPermits may take permits away past zero; drain takes what is there.
    assert_eq!(pool.add_permits(-5).await.unwrap(), -2);
    assert_eq!(pool.available_permits().await.unwrap(), -2);
    assert_eq!(pool.add_permits(6).await.unwrap(), 4);
    assert_eq!(pool.drain_permits().await.unwrap(), 4);
    assert_eq!(count(&server, "pool").as_deref(), Some("0"));
    let absent = client.semaphore("never-set");
    assert_eq!(absent.drain_permits().await.unwrap(), 0);
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "never-set"]),
        0,
        "left absent"
    );
    // A release needs no acquire (permits are nobody's): it creates the count.
    assert_eq!(absent.release(2).await.unwrap(), 2);
    assert_eq!(client.held_locks(), 0);
}

/// Redisson 4's `releaseIfExists`: a semaphore that does not exist is left so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_if_exists_gives_back_only_to_a_semaphore_that_exists() {
    let server = RedisServer::start();
    let client = server.client().await;
    let pool = client.semaphore("maybe");
    assert!(!pool.release_if_exists(2).await.unwrap());
    assert_eq!(count(&server, "maybe"), None, "still absent");
    assert!(pool.try_set_permits(0).await.unwrap());
    assert!(pool.release_if_exists(2).await.unwrap());
    assert_eq!(count(&server, "maybe").as_deref(), Some("2"));
    assert!(matches!(
        pool.release_if_exists(0).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_changes_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let pool = client.semaphore("bad");
    pool.try_set_permits(2).await.unwrap();
    assert!(matches!(
        pool.acquire(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        pool.release(0).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(count(&server, "bad").as_deref(), Some("2"));

    // A key of another type, or a string that is no count: typed errors, nothing written.
    let _: i64 = server.cmd(&["HSET", "a-hash", "f", "1"]);
    let _: String = server.cmd(&["SET", "a-word", "many"]);
    for name in ["a-hash", "a-word"] {
        let other = client.semaphore(name);
        for result in [
            other.try_acquire(1).await.map(|p| p.map(|p| p.forget())),
            other.release(1).await.map(|_| None),
            other.drain_permits().await.map(|_| None),
            other.available_permits().await.map(|_| None),
        ] {
            assert!(
                matches!(result, Err(Error::WrongType { .. })),
                "{name}: {result:?}"
            );
        }
    }
    assert_eq!(server.cmd::<String>(&["HGET", "a-hash", "f"]), "1");
    assert_eq!(count(&server, "a-word").as_deref(), Some("many"));
    assert!(matches!(
        client.semaphore("").acquire(1).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_n_permits_is_woken_by_the_release_that_frees_them() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    let pool = client.semaphore("wide");
    pool.try_set_permits(1).await.unwrap();

    let waiter = tokio::spawn({
        let pool = other.semaphore("wide");
        async move {
            let permits = pool.acquire(3).await.unwrap();
            (Instant::now(), permits)
        }
    });
    server
        .until_subscribers(&semaphore_channel("wide"), 1)
        .await;
    // One more is not enough: the waiter, woken, finds 2 and waits on.
    assert_eq!(pool.release(1).await.unwrap(), 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "2 permits do not serve a waiter for 3"
    );
    let released = Instant::now();
    assert_eq!(pool.release(1).await.unwrap(), 3);
    let (acquired, permits) = timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(
        acquired - released < BY_MESSAGE,
        "woken by the release's message, {:?} after it",
        acquired - released
    );
    assert_eq!(permits.permits(), 3);
    assert_eq!(count(&server, "wide").as_deref(), Some("0"));
    permits.release().await.unwrap();
    assert_eq!(count(&server, "wide").as_deref(), Some("3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_release_of_many_permits_wakes_as_many_waiters() {
    let server = RedisServer::start();
    let client = server.client().await;
    let waiters_client = server.client().await;
    load_scripts(&client).await;
    load_scripts(&waiters_client).await;
    let pool = client.semaphore("many");
    pool.try_set_permits(0).await.unwrap();
    let scripts = || server.command_calls("evalsha");
    let before = scripts();

    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let pool = waiters_client.semaphore("many");
            tokio::spawn(async move {
                let permits = pool.acquire(1).await.unwrap();
                (Instant::now(), permits.forget())
            })
        })
        .collect();
    // Every waiter makes an attempt once subscribed (the first also one before): all three
    // found no permit and wait when the one release comes.
    server
        .until_subscribers(&semaphore_channel("many"), 1)
        .await;
    assert!(
        eventually(PROMPT, || scripts() >= before + 4).await,
        "every waiter made its attempts"
    );
    let released = Instant::now();
    assert_eq!(pool.release(3).await.unwrap(), 3);
    for waiter in waiters {
        let (acquired, taken) = timeout(PROMPT, waiter).await.unwrap().unwrap();
        assert_eq!(taken, 1);
        assert!(
            acquired - released < BY_MESSAGE,
            "every waiter woken by the one message, {:?} after it",
            acquired - released
        );
    }
    assert_eq!(count(&server, "many").as_deref(), Some("0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_guards_give_permits_back_and_forgotten_ones_keep_them() {
    let server = RedisServer::start();
    let client = server.client().await;
    let pool = client.semaphore("guarded");
    pool.try_set_permits(4).await.unwrap();

    let dropped = pool.acquire(2).await.unwrap();
    assert_eq!(client.held_locks(), 1);
    drop(dropped);
    assert!(
        eventually(PROMPT, || count(&server, "guarded").as_deref() == Some("4")).await,
        "a dropped guard gives its permits back"
    );
    let kept = pool.acquire(3).await.unwrap().forget();
    assert_eq!(kept, 3);
    assert_eq!(
        client.held_locks(),
        0,
        "forgotten: out of the client's holds"
    );
    assert_eq!(count(&server, "guarded").as_deref(), Some("1"));

    // Shutdown gives back what live guards hold, not what was forgotten.
    let live = pool.acquire(1).await.unwrap();
    client.shutdown().await;
    assert_eq!(count(&server, "guarded").as_deref(), Some("1"));
    assert!(matches!(live.release().await, Err(Error::LockLost { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_takes_and_gives_back_permits_once() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    load_scripts(&client).await;
    let pool = client.semaphore("once");
    pool.try_set_permits(5).await.unwrap();

    proxy.cut_after_reply(&[&support::script_sha("semaphore_acquire"), "once"], 1);
    let two = pool.acquire(2).await.unwrap();
    assert_eq!(proxy.cuts(), 1, "the fault fired");
    assert_eq!(count(&server, "once").as_deref(), Some("3"), "taken once");

    proxy.cut_after_reply(&[&support::script_sha("semaphore_release"), "once"], 1);
    two.release().await.unwrap();
    assert_eq!(proxy.cuts(), 2, "the fault fired");
    assert_eq!(
        count(&server, "once").as_deref(),
        Some("5"),
        "given back once"
    );

    proxy.cut_after_reply(&[&support::script_sha("semaphore_release"), "once"], 1);
    assert_eq!(pool.release(1).await.unwrap(), 6);
    assert_eq!(proxy.cuts(), 3, "the fault fired");
    assert_eq!(
        count(&server, "once").as_deref(),
        Some("6"),
        "released once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_whose_answer_is_lost_takes_nothing() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    load_scripts(&client).await;
    let pool = client.semaphore("dropped");
    pool.try_set_permits(2).await.unwrap();

    proxy.cut_after_reply(&[&support::script_sha("semaphore_acquire"), "dropped"], 1);
    proxy.set_delay(Duration::from_millis(300));
    let cancelled = timeout(Duration::from_millis(100), pool.acquire(2)).await;
    assert!(cancelled.is_err(), "the call was still in flight");
    assert!(
        eventually(PROMPT, || proxy.cuts() == 1).await,
        "the fault fired"
    );
    proxy.set_delay(Duration::ZERO);
    assert!(
        eventually(PROMPT, || count(&server, "dropped").as_deref() == Some("2")).await,
        "the permits the cancelled call took were never given back"
    );
    assert_eq!(client.held_locks(), 0);
}

#[test]
fn the_blocking_semaphore_takes_waits_and_gives_back_across_threads() {
    let server = RedisServer::start();
    let counted = {
        let client = redisson_lock::blocking::LockClient::connect(&server.url()).unwrap();
        let pool = client.semaphore("blocking");
        assert!(pool.try_set_permits(2).unwrap());
        let both = pool.acquire(2).unwrap();
        assert!(pool.try_acquire(1).unwrap().is_none());
        // Another thread blocks for one; this one releases both (guards are nobody's).
        let waiter = std::thread::spawn({
            let pool = pool.clone();
            move || pool.acquire(1).unwrap().forget()
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!waiter.is_finished(), "no permit yet");
        both.release().unwrap();
        assert_eq!(waiter.join().unwrap(), 1);
        let drained = pool.drain_permits().unwrap();
        client.shutdown();
        drained
    };
    assert_eq!(counted, 1, "one of two was taken and kept");
    assert_eq!(count(&server, "blocking").as_deref(), Some("0"));
}
