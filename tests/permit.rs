//! The semaphore whose permits expire (Redisson's `RPermitExpirableSemaphore`) on a real
//! server: its layout (a string count, the zset `{name}:timeout` of permit ids scored by
//! expiry), permits that come back when their lease ends (a waiter sleeps until the earliest
//! expiry, as nothing publishes it), permits the watchdog keeps alive past their timeout and
//! tells as lost when taken from behind, exactly-once acquires and releases under lost
//! replies, cancel safety, and bad input refused with nothing changed. Against Redisson
//! itself: `tests/interop_synchronizers.rs`.

mod support;

use std::time::Duration;

use redisson_lock::{Error, Lease, LockClient, Wait};
use support::{eventually, RedisServer};
use tokio::time::{timeout, Instant};

const PROMPT: Duration = Duration::from_secs(5);
/// The watchdog timeout of the test servers' clients (`RedisServer::config`).
const WATCHDOG: Duration = Duration::from_millis(1500);
/// A waiter that misses a release looks again after a second: a wake well inside that was the
/// message's.
const BY_MESSAGE: Duration = Duration::from_millis(600);

fn count(server: &RedisServer, key: &str) -> Option<String> {
    server.cmd(&["GET", key])
}

fn timeouts(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

/// The permits taken, as `(hex id, expiry in ms since the epoch)`.
fn taken(server: &RedisServer, name: &str) -> Vec<(String, u64)> {
    let members: Vec<(Vec<u8>, f64)> =
        server.cmd(&["ZRANGE", &timeouts(name), "0", "-1", "WITHSCORES"]);
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    members
        .into_iter()
        .map(|(id, score)| (hex(&id), score as u64))
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One acquire and release on another semaphore: loads the scripts, so that the calls a test
/// cuts are the first sends (no `NOSCRIPT` round).
async fn load_scripts(client: &LockClient) {
    let warm = client.permit_semaphore("warm-up");
    warm.add_permits(1).await.unwrap();
    let permit = warm.acquire(Lease::Watchdog).await.unwrap();
    warm.try_release(permit.id()).await.unwrap();
    permit.forget();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_taken_by_id_and_given_back_in_redissons_layout() {
    let server = RedisServer::start();
    let client = server.client().await;
    let jobs = client.permit_semaphore("jobs");

    assert_eq!(jobs.available_permits().await.unwrap(), 0, "absent reads 0");
    assert!(jobs.try_set_permits(3).await.unwrap());
    assert!(!jobs.try_set_permits(5).await.unwrap(), "set once only");

    let before = now_ms();
    let leased = jobs
        .acquire(Lease::Fixed(Duration::from_secs(10)))
        .await
        .unwrap();
    let kept = jobs.acquire(Lease::Watchdog).await.unwrap();
    assert_eq!(count(&server, "jobs").as_deref(), Some("1"));
    assert_ne!(leased.id(), kept.id());
    assert_eq!(leased.lease(), Some(Duration::from_secs(10)));
    assert_eq!(kept.lease(), None);
    let mut listed = taken(&server, "jobs");
    listed.sort_by_key(|(_, expiry)| *expiry);
    assert_eq!(listed.len(), 2, "{listed:?}");
    // Each id as Java shows it; expiries in the acquiring client's clock.
    assert_eq!(listed[0].0, kept.id());
    assert!(listed[0].1 >= before + WATCHDOG.as_millis() as u64 - 50);
    assert!(listed[0].1 <= now_ms() + WATCHDOG.as_millis() as u64);
    assert_eq!(listed[1].0, leased.id());
    assert!(listed[1].1 >= before + 10_000 && listed[1].1 <= now_ms() + 10_000);

    assert_eq!(jobs.available_permits().await.unwrap(), 1);
    assert_eq!(jobs.acquired_permits().await.unwrap(), 2);
    assert_eq!(jobs.permits().await.unwrap(), 3);
    assert_eq!(jobs.set_permits(5).await.unwrap(), 3, "5 in all, 2 taken");
    assert_eq!(jobs.add_permits(-1).await.unwrap(), 2);
    assert_eq!(jobs.permits().await.unwrap(), 4);

    // The lease left of each, as Redisson's getLeaseTime reads it; one set never to expire.
    let left = jobs.lease_time(leased.id()).await.unwrap().unwrap();
    assert!(
        left > Duration::from_secs(9) && left <= Duration::from_secs(10),
        "{left:?}"
    );
    let left = jobs.lease_time(kept.id()).await.unwrap().unwrap();
    assert!(left <= WATCHDOG, "{left:?}");
    assert_eq!(jobs.lease_time(&"00".repeat(16)).await.unwrap(), None);
    assert!(jobs.update_lease_time(leased.id(), None).await.unwrap());
    let never = jobs.lease_time(leased.id()).await.unwrap();
    assert_eq!(never, Some(Duration::MAX));

    // Anyone may give a permit back by its id, once.
    let id = leased.forget();
    assert!(jobs.try_release(&id).await.unwrap());
    assert!(!jobs.try_release(&id).await.unwrap(), "already given back");
    assert_eq!(count(&server, "jobs").as_deref(), Some("3"));
    kept.release().await.unwrap();
    assert_eq!(count(&server, "jobs").as_deref(), Some("4"));
    assert!(taken(&server, "jobs").is_empty());
    assert_eq!(server.cmd::<i64>(&["PTTL", "jobs"]), -1, "no TTL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_permit_comes_back_and_its_waiter_wakes_at_the_expiry() {
    let server = RedisServer::start();
    let client = server.client().await;
    let holder = server.client().await;
    let jobs = client.permit_semaphore("expiring");
    jobs.try_set_permits(1).await.unwrap();
    let lease = Duration::from_millis(400);
    let theirs = holder.permit_semaphore("expiring");
    // A holder gone quiet (as a crashed one): nothing of it gives the permit back.
    let id = theirs.acquire(Lease::Fixed(lease)).await.unwrap().forget();
    let taken_at = Instant::now();

    // Nothing publishes the expiry: the acquire's hint, the earliest expiry, times the wake,
    // well before the one-second fallback.
    let second = jobs
        .try_acquire(Wait::AtMost(PROMPT), Lease::Watchdog)
        .await
        .unwrap()
        .expect("the expired permit came back");
    let waited = taken_at.elapsed();
    assert!(waited >= lease - Duration::from_millis(50), "{waited:?}");
    assert!(waited < Duration::from_millis(900), "{waited:?}");
    assert_eq!(taken(&server, "expiring").len(), 1, "only the new one");

    assert!(!theirs.try_release(&id).await.unwrap(), "reclaimed");
    assert!(!jobs.try_release("00".repeat(16).as_str()).await.unwrap());
    second.release().await.unwrap();
    assert_eq!(count(&server, "expiring").as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_by_its_message() {
    let server = RedisServer::start();
    let client = server.client().await;
    let jobs = client.permit_semaphore("woken");
    jobs.try_set_permits(1).await.unwrap();
    let holder = jobs
        .acquire(Lease::Fixed(Duration::from_secs(60)))
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let jobs = jobs.clone();
        async move {
            let permit = jobs.acquire(Lease::Watchdog).await.unwrap();
            (Instant::now(), permit.forget())
        }
    });
    server.until_subscribers("redisson_sc:{woken}", 1).await;
    let released = Instant::now();
    holder.release().await.unwrap();
    let (woke, _) = timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(woke - released < BY_MESSAGE, "{:?}", woke - released);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_permit_and_a_stopped_holders_comes_back() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let jobs = holder.permit_semaphore("kept");
    jobs.try_set_permits(1).await.unwrap();
    let permit = jobs.acquire(Lease::Watchdog).await.unwrap();

    // Past two watchdog timeouts, the permit is still taken and its expiry moved on.
    tokio::time::sleep(WATCHDOG * 2).await;
    let theirs = other.permit_semaphore("kept");
    let none = theirs.try_acquire(Wait::Never, Lease::Watchdog).await;
    assert!(none.unwrap().is_none(), "the watchdog kept it");
    let expiry = taken(&server, "kept")[0].1;
    assert!(expiry > now_ms(), "renewed ahead");
    assert!(!permit.is_lost());

    // A holder that stops renewing (forget: as a crashed one) loses it within the timeout.
    let stopped = Instant::now();
    permit.forget();
    let back = theirs
        .try_acquire(Wait::AtMost(PROMPT), Lease::Watchdog)
        .await
        .unwrap()
        .expect("the stopped holder's permit came back");
    let took = stopped.elapsed();
    assert!(took <= WATCHDOG + Duration::from_millis(700), "{took:?}");
    back.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_given_back_behind_its_holders_back_is_told_as_lost() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let jobs = holder.permit_semaphore("taken-back");
    jobs.try_set_permits(1).await.unwrap();
    let permit = jobs.acquire(Lease::Watchdog).await.unwrap();

    let theirs = other.permit_semaphore("taken-back");
    assert!(theirs.try_release(permit.id()).await.unwrap());
    // The next renewal (every third of the timeout) finds it gone.
    timeout(WATCHDOG, permit.lost())
        .await
        .expect("the lost signal fired");
    assert!(permit.lost_reason().is_some());
    assert!(matches!(
        permit.release().await,
        Err(Error::LockLost { .. })
    ));
    assert_eq!(count(&server, "taken-back").as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_takes_and_gives_back_a_permit_once() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    load_scripts(&client).await;
    let jobs = client.permit_semaphore("once");
    jobs.try_set_permits(5).await.unwrap();

    proxy.cut_after_reply(&[&support::script_sha("permit_acquire"), "once"], 1);
    let permit = jobs.acquire(Lease::Watchdog).await.unwrap();
    assert_eq!(proxy.cuts(), 1, "the fault fired");
    assert_eq!(count(&server, "once").as_deref(), Some("4"), "taken once");
    assert_eq!(taken(&server, "once").len(), 1);

    proxy.cut_after_reply(&[&support::script_sha("permit_release"), "once"], 1);
    permit.release().await.unwrap();
    assert_eq!(proxy.cuts(), 2, "the fault fired");
    assert_eq!(count(&server, "once").as_deref(), Some("5"), "back once");

    let id = jobs.acquire(Lease::Watchdog).await.unwrap().forget();
    proxy.cut_after_reply(&[&support::script_sha("permit_release"), "once"], 1);
    assert!(jobs.try_release(&id).await.unwrap(), "the first answer");
    assert_eq!(proxy.cuts(), 3, "the fault fired");
    assert_eq!(count(&server, "once").as_deref(), Some("5"), "back once");

    proxy.cut_after_reply(&[&support::script_sha("permit_add"), "once"], 1);
    assert_eq!(jobs.add_permits(2).await.unwrap(), 7);
    assert_eq!(proxy.cuts(), 4, "the fault fired");
    assert_eq!(count(&server, "once").as_deref(), Some("7"), "added once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_whose_answer_is_lost_takes_nothing() {
    let server = RedisServer::start();
    let (proxy, client) = support::proxied_client(&server).await;
    load_scripts(&client).await;
    let jobs = client.permit_semaphore("dropped");
    jobs.try_set_permits(1).await.unwrap();

    proxy.cut_after_reply(&[&support::script_sha("permit_acquire"), "dropped"], 1);
    proxy.set_delay(Duration::from_millis(300));
    let cancelled = timeout(Duration::from_millis(100), jobs.acquire(Lease::Watchdog)).await;
    assert!(cancelled.is_err(), "the call was still in flight");
    assert!(
        eventually(PROMPT, || proxy.cuts() == 1).await,
        "the fault fired"
    );
    proxy.set_delay(Duration::ZERO);
    assert!(
        eventually(PROMPT, || count(&server, "dropped").as_deref() == Some("1")
            && taken(&server, "dropped").is_empty())
        .await,
        "the permit the cancelled call took was never given back"
    );
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_changes_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let jobs = client.permit_semaphore("bad");
    jobs.try_set_permits(2).await.unwrap();
    for id in ["", "xyz", &"g".repeat(32), &"ab".repeat(17)] {
        assert!(matches!(
            jobs.try_release(id).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            jobs.update_lease_time(id, None).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    let zero = Lease::Fixed(Duration::ZERO);
    assert!(matches!(
        jobs.acquire(zero).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(count(&server, "bad").as_deref(), Some("2"));

    // A key of another type, or a string that is no count: typed errors, nothing written.
    let _: i64 = server.cmd(&["HSET", "a-hash", "f", "1"]);
    let _: String = server.cmd(&["SET", "a-word", "many"]);
    for name in ["a-hash", "a-word"] {
        let other = client.permit_semaphore(name);
        let results = [
            other
                .try_acquire(Wait::Never, Lease::Watchdog)
                .await
                .map(|p| p.map(|p| p.forget()).is_some()),
            other.add_permits(1).await.map(|_| false),
            other.available_permits().await.map(|_| false),
            other.set_permits(3).await.map(|_| false),
        ];
        for result in results {
            assert!(
                matches!(result, Err(Error::WrongType { .. })),
                "{name}: {result:?}"
            );
        }
    }
    assert_eq!(server.cmd::<String>(&["HGET", "a-hash", "f"]), "1");
    assert_eq!(count(&server, "a-word").as_deref(), Some("many"));

    // A string Lua would read as a number but INCRBY would not: refused before any write (an
    // expired permit listed beside it stays listed, nothing is published).
    for odd in ["1.5", "1e3", " 7", "01", "99999999999999999999"] {
        let _: String = server.cmd(&["SET", "odd", odd]);
        let _: i64 = server.cmd(&["ZADD", &timeouts("odd"), "1", "expired-one"]);
        let odd_one = client.permit_semaphore("odd");
        let results = [
            odd_one.counts().await.map(|_| ()),
            odd_one
                .try_acquire(Wait::Never, Lease::Watchdog)
                .await
                .map(|p| drop(p.map(|p| p.forget()))),
            odd_one
                .update_lease_time(&"ab".repeat(16), None)
                .await
                .map(|_| ()),
        ];
        for result in results {
            assert!(
                matches!(result, Err(Error::WrongType { .. })),
                "{odd:?}: {result:?}"
            );
        }
        assert_eq!(count(&server, "odd").as_deref(), Some(odd));
        assert_eq!(
            server.cmd::<i64>(&["ZCARD", &timeouts("odd")]),
            1,
            "{odd:?}"
        );
    }
}

/// An acquire that finds its own permit id listed already (an earlier hold of the same owner
/// whose release never happened) renews it and takes nothing more: the script, sent as the
/// engine sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_finding_its_own_id_listed_takes_no_second_permit() {
    let server = RedisServer::start();
    let script = support::script("permit_acquire");
    let acquire = |latch: &str, expiry: u64| -> Option<i64> {
        server.cmd(&[
            "EVAL",
            &script,
            "4",
            "mine",
            &timeouts("mine"),
            "redisson_sc:{mine}",
            latch,
            "0123456789abcdef",
            &expiry.to_string(),
            &now_ms().to_string(),
            "publish",
            "922337203685477",
            "60000",
        ])
    };
    let _: String = server.cmd(&["SET", "mine", "2"]);
    assert_eq!(acquire("latch:1", now_ms() + 10_000), None, "taken");
    assert_eq!(count(&server, "mine").as_deref(), Some("1"));
    let later = now_ms() + 20_000;
    assert_eq!(acquire("latch:2", later), None, "found listed");
    assert_eq!(
        count(&server, "mine").as_deref(),
        Some("1"),
        "not taken twice"
    );
    let listed = taken(&server, "mine");
    assert_eq!(listed.len(), 1);
    assert!(listed[0].1 >= later - 1, "renewed to the new expiry");
}

#[test]
fn the_blocking_permit_semaphore_takes_waits_and_gives_back_across_threads() {
    let server = RedisServer::start();
    let client = redisson_lock::blocking::LockClient::connect(&server.url()).unwrap();
    let jobs = client.permit_semaphore("blocking");
    assert!(jobs.try_set_permits(1).unwrap());
    let permit = jobs.acquire(Lease::Watchdog).unwrap();
    assert!(jobs
        .try_acquire(Wait::Never, Lease::Watchdog)
        .unwrap()
        .is_none());
    let waiter = std::thread::spawn({
        let jobs = jobs.clone();
        move || jobs.acquire(Lease::Watchdog).unwrap().forget()
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(!waiter.is_finished(), "no permit yet");
    permit.release().unwrap();
    let id = waiter.join().unwrap();
    assert_eq!(jobs.acquired_permits().unwrap(), 1);
    assert!(jobs.try_release(&id).unwrap());
    client.shutdown();
    assert_eq!(count(&server, "blocking").as_deref(), Some("1"));
}
