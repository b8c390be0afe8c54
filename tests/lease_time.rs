//! Lease logic on tokio's paused clock (the `model` feature): the engine, its watchdog task
//! included, runs on a test's current-thread runtime against the in-memory stand-in server,
//! whose clock follows the runtime's. Minutes of lease time pass in milliseconds, and every
//! figure is exact: no real sleep, no scheduler noise.

#![cfg(feature = "model")]

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redisson_lock::model::link::{Fault, FaultPlan, Link};
use redisson_lock::model::server::{Server, Value};
use redisson_lock::{BackOff, Config, Lease, LockClient, LostReason, Owner, Wait};
use tokio::time::Instant;

/// A stand-in whose clock follows the runtime's (paused) clock, 10 ms at a time.
fn server() -> Arc<Server> {
    let server = Arc::new(Server::new());
    let ticking = server.clone();
    tokio::spawn(async move {
        let start = Instant::now();
        let mut told = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let now = start.elapsed().as_millis() as u64;
            ticking.advance(now - told);
            told = now;
        }
    });
    server
}

async fn client(link: Link, adjust: impl FnOnce(Config) -> Config) -> LockClient {
    let config = adjust(Config::from_url("redis://model.invalid:6379").expect("a valid URL"));
    LockClient::on_model(config, link)
        .await
        .expect("a client on the stand-in")
}

/// The SHA-1 `EVALSHA` names a script of the crate by.
fn sha(code: &str) -> Vec<u8> {
    redis::Script::new(code).get_hash().as_bytes().to_vec()
}

/// Calls of `script` (by SHA) in the server's history.
fn calls(server: &Server, script: &[u8]) -> usize {
    let history = server.history();
    history
        .iter()
        .filter(|(args, _)| args.get(1).map(Vec::as_slice) == Some(script))
        .count()
}

/// The metrics this binary's clients report (installed once: one recorder per process).
fn metrics() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    })
}

fn counter(snapshotter: &Snapshotter, name: &str) -> u64 {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == name)
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

/// Ten minutes of a watchdog lock: renewed every third of the 30 s watchdog timeout, never
/// lost, its TTL never below two thirds of a lease.
#[tokio::test(start_paused = true)]
async fn the_watchdog_keeps_a_lock_for_ten_minutes() {
    let server = server();
    let a = client(Link::new(server.clone()), |c| c).await;
    let guard = a.lock("t1").lock().await.expect("a free lock");
    let start = Instant::now();
    let mut lowest = i64::MAX;
    while start.elapsed() < Duration::from_secs(605) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pttl = server.snapshot()[&b"t1"[..]].pttl.expect("a TTL");
        lowest = lowest.min(pttl);
    }
    assert!(!guard.is_lost(), "lost: {:?}", guard.lost_reason());
    let renewals = calls(&server, &sha(include_str!("../scripts/lua/renew.lua")))
        + calls(
            &server,
            &sha(include_str!("../scripts/lua/renew_across.lua")),
        );
    assert_eq!(renewals, 60, "one renewal every 10 s for 605 s");
    assert!(
        lowest >= 19_500,
        "the TTL fell to {lowest} ms between renewals"
    );
    guard.unlock().await.expect("unlocked");
    a.shutdown().await;
}

/// A hold whose renewals all fail (each refused by the network) is lost a whole lease after
/// its last confirmation (the acquire), not before, as `Unconfirmed`.
#[tokio::test(start_paused = true)]
async fn a_hold_whose_renewals_fail_is_lost_a_lease_after_its_acquire() {
    let server = server();
    let renew = sha(include_str!("../scripts/lua/renew.lua"));
    let across = sha(include_str!("../scripts/lua/renew_across.lua"));
    let refuse: FaultPlan = Arc::new(move |args: &[Vec<u8>]| {
        let script = args.get(1).map(Vec::as_slice);
        match script == Some(&renew[..]) || script == Some(&across[..]) {
            true => Fault::Refuse,
            false => Fault::None,
        }
    });
    let a = client(Link::new(server.clone()).with_faults(refuse), |c| c).await;
    let start = Instant::now();
    let guard = a.lock("t2").lock().await.expect("a free lock");
    guard.lost().await;
    let after = start.elapsed();
    assert_eq!(guard.lost_reason(), Some(LostReason::Unconfirmed));
    assert!(
        after >= Duration::from_secs(30) && after <= Duration::from_millis(30_100),
        "lost after {after:?}, not at the 30 s lease"
    );
    a.shutdown().await;
}

/// A fixed lease is never renewed and is lost when it runs out: not at 59.9 s, at 60 s.
#[tokio::test(start_paused = true)]
async fn a_fixed_lease_is_lost_when_it_runs_out() {
    let server = server();
    let a = client(Link::new(server.clone()), |c| c).await;
    let start = Instant::now();
    let guard = a
        .lock("t3")
        .acquire(Wait::Never, Lease::Fixed(Duration::from_secs(60)))
        .await
        .expect("an attempt")
        .expect("a free lock");
    tokio::time::sleep_until(start + Duration::from_millis(59_900)).await;
    assert!(!guard.is_lost(), "lost before its lease ran out");
    assert!(server.snapshot().contains_key(&b"t3"[..]));
    guard.lost().await;
    let after = start.elapsed();
    assert_eq!(guard.lost_reason(), Some(LostReason::LeaseExpired));
    assert!(
        after <= Duration::from_millis(60_100),
        "lost after {after:?}"
    );
    // (The client's clock runs from the acquire's send, Redis's from its run: the key goes
    // at the stand-in's next tick.)
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !server.snapshot().contains_key(&b"t3"[..]),
        "expired in Redis too"
    );
    a.shutdown().await;
}

/// The hold-time warning fires once for a lock held past it (2 min), in the watchdog's cycle
/// that first sees it, and not before.
#[tokio::test(start_paused = true)]
async fn the_hold_warning_fires_once_past_its_limit() {
    let snapshotter = metrics();
    let server = server();
    let limit = Duration::from_secs(120);
    let a = client(Link::new(server.clone()), |c| {
        c.with_hold_warning(Some(limit))
    })
    .await;
    let before = counter(snapshotter, redisson_lock::observe::METRIC_HELD_TOO_LONG);
    let guard = a.lock("t4").lock().await.expect("a free lock");
    tokio::time::sleep(Duration::from_secs(119)).await;
    let early = counter(snapshotter, redisson_lock::observe::METRIC_HELD_TOO_LONG) - before;
    tokio::time::sleep(Duration::from_secs(181)).await;
    let warned = counter(snapshotter, redisson_lock::observe::METRIC_HELD_TOO_LONG) - before;
    assert_eq!(
        (early, warned),
        (0, 1),
        "warnings before 2 min, and after 5 min"
    );
    guard.unlock().await.expect("unlocked");
    a.shutdown().await;
}

/// A spin lock's waiter keeps to its back-off: 100 ms, doubling, at most 800 ms (plus its
/// few ms of jitter) between attempts, while another owner holds the lock for 5 s.
#[tokio::test(start_paused = true)]
async fn a_spin_waiter_keeps_to_its_back_off() {
    let server = server();
    let acquire = sha(include_str!("../scripts/lua/acquire.lua"));
    let attempts: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = attempts.clone();
    let count: FaultPlan = Arc::new(move |args: &[Vec<u8>]| {
        if args.get(1) == Some(&acquire) {
            seen.lock().unwrap().push(Instant::now());
        }
        Fault::None
    });
    let a = client(Link::new(server.clone()), |c| c).await;
    let b = client(Link::new(server.clone()).with_faults(count), |c| c).await;
    let backoff = BackOff::exponential(Duration::from_millis(100), Duration::from_millis(800), 2);
    let held = a.spin_lock("t5").lock().await.expect("a free lock");
    let waiter = b
        .spin_lock_with_backoff("t5", backoff)
        .with_owner(Owner::new());
    let waiting = tokio::spawn(async move { waiter.lock().await });
    tokio::time::sleep(Duration::from_secs(5)).await;
    held.unlock().await.expect("unlocked");
    let guard = waiting.await.expect("the waiter").expect("the lock");
    let at = attempts.lock().unwrap().clone();
    let gaps: Vec<u64> = at
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis() as u64)
        .collect();
    let expected = [100, 200, 400, 800];
    for (i, gap) in gaps.iter().enumerate() {
        let want = expected.get(i).copied().unwrap_or(800);
        assert!(
            (want - 1..=want + 20).contains(gap),
            "pause {i} was {gap} ms, the back-off says {want}: {gaps:?}"
        );
    }
    assert!(gaps.len() >= 8, "attempts over 5 s: {gaps:?}");
    guard.unlock().await.expect("unlocked");
    a.shutdown().await;
    b.shutdown().await;
}

/// Runs other tasks until `done` holds, without letting the paused clock move (the runtime
/// never idles while this task yields); `what` is the failure if it never does.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

/// A fair lock's queue, head first, and each waiter's deadline in ms from `epoch` (the
/// client's clock when the test began).
fn queue(server: &Server, name: &str, epoch: u64) -> Vec<(String, i64)> {
    let snapshot = server.snapshot();
    let get = |key: String| {
        snapshot
            .get(key.as_bytes())
            .map(|stored| stored.value.clone())
    };
    let Some(Value::List(queue)) = get(format!("redisson_lock_queue:{{{name}}}")) else {
        return Vec::new();
    };
    let Some(Value::ZSet(deadlines)) = get(format!("redisson_lock_timeout:{{{name}}}")) else {
        panic!("a queue without deadlines: {queue:?}");
    };
    queue
        .iter()
        .map(|waiter| {
            let (_, at) = deadlines
                .iter()
                .find(|(member, _)| member == waiter)
                .expect("a deadline for every queued waiter");
            (
                String::from_utf8_lossy(waiter).into_owned(),
                *at as i64 - epoch as i64,
            )
        })
        .collect()
}

/// A fair lock's waiter that stops answering (its client gone) keeps its place only until its
/// deadline: the holder's lease plus the queue wait. The waiter behind it, asleep until that
/// deadline, takes the lock then: not when the holder unlocks (the unlock wakes the dead
/// head), and not a lease later.
#[tokio::test(start_paused = true)]
async fn a_dead_fair_waiter_is_passed_at_its_deadline() {
    let server = server();
    let dead = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gone = dead.clone();
    let silence: FaultPlan =
        Arc::new(
            move |_: &[Vec<u8>]| match gone.load(std::sync::atomic::Ordering::SeqCst) {
                true => Fault::Refuse,
                false => Fault::None,
            },
        );
    let wait = |c: Config| c.with_fair_lock_wait_timeout(Duration::from_secs(10));
    let a = client(Link::new(server.clone()), wait).await;
    let b = client(Link::new(server.clone()).with_faults(silence), wait).await;
    let c = client(Link::new(server.clone()), wait).await;
    let start = Instant::now();
    let epoch = redisson_lock::model::now_ms();
    let held = a.fair_lock("f1").lock().await.expect("a free lock");

    let b_lock = b.fair_lock("f1");
    let b_waiting = tokio::spawn(async move { b_lock.lock().await.map(drop) });
    until("B queued", || queue(&server, "f1", epoch).len() == 1).await;
    let c_lock = c.fair_lock("f1");
    let c_waiting = tokio::spawn(async move {
        let guard = c_lock.lock().await;
        (guard, Instant::now())
    });
    until("C queued", || queue(&server, "f1", epoch).len() == 2).await;
    let places: Vec<i64> = queue(&server, "f1", epoch).iter().map(|w| w.1).collect();
    assert_eq!(places, [40_000, 50_000], "lease + wait, then a wait more");

    dead.store(true, std::sync::atomic::Ordering::SeqCst);
    b_waiting.abort();
    tokio::time::sleep_until(start + Duration::from_secs(5)).await;
    held.unlock().await.expect("unlocked");
    tokio::time::sleep_until(start + Duration::from_millis(39_900)).await;
    assert!(!c_waiting.is_finished(), "C passed B before B's deadline");
    let (guard, at) = tokio::time::timeout(Duration::from_secs(300), c_waiting)
        .await
        .expect("C takes the lock within 5 min")
        .expect("C's task");
    let guard = guard.expect("the lock");
    let after = at - start;
    assert!(
        after >= Duration::from_secs(40) && after <= Duration::from_millis(40_100),
        "C took the lock after {after:?}, not at B's deadline (40 s)"
    );
    assert_eq!(queue(&server, "f1", epoch), [], "B left the queue");
    guard.unlock().await.expect("unlocked");
    a.shutdown().await;
    c.shutdown().await;
}

/// A fair lock's waiter whose wait is bounded gives up at its end, exactly, and is withdrawn:
/// the waiter behind it moves its deadline forward by the reservation it no longer waits
/// behind, becomes the head, and the holder's unlock hands it the lock at once.
#[tokio::test(start_paused = true)]
async fn a_fair_waiter_that_gives_up_moves_the_queue_up() {
    let server = server();
    let wait = |c: Config| c.with_fair_lock_wait_timeout(Duration::from_secs(10));
    let a = client(Link::new(server.clone()), wait).await;
    let b = client(Link::new(server.clone()), wait).await;
    let c = client(Link::new(server.clone()), wait).await;
    let start = Instant::now();
    let epoch = redisson_lock::model::now_ms();
    let held = a.fair_lock("f2").lock().await.expect("a free lock");

    let b_lock = b.fair_lock("f2");
    let b_waiting = tokio::spawn(async move {
        let got = b_lock
            .acquire(Wait::AtMost(Duration::from_secs(8)), Lease::Watchdog)
            .await;
        (got.map(|g| g.is_some()), Instant::now())
    });
    until("B queued", || queue(&server, "f2", epoch).len() == 1).await;
    let c_lock = c.fair_lock("f2");
    let c_waiting = tokio::spawn(async move {
        let guard = c_lock.lock().await;
        (guard, Instant::now())
    });
    until("C queued", || queue(&server, "f2", epoch).len() == 2).await;
    let places: Vec<i64> = queue(&server, "f2", epoch).iter().map(|w| w.1).collect();
    assert_eq!(
        places,
        [38_000, 48_000],
        "B reserves its 8 s wait, C the 10 s queue wait"
    );

    let (got, at) = b_waiting.await.expect("B's task");
    assert!(!got.expect("an answer"), "B could not have the lock");
    let gave_up = at - start;
    assert!(
        gave_up >= Duration::from_secs(8) && gave_up <= Duration::from_millis(8_020),
        "B gave up after {gave_up:?}, not at its 8 s wait"
    );
    until("B withdrawn", || queue(&server, "f2", epoch).len() == 1).await;
    let places: Vec<i64> = queue(&server, "f2", epoch).iter().map(|w| w.1).collect();
    assert_eq!(
        places,
        [40_000],
        "C's place moved up by B's 8 s reservation"
    );

    tokio::time::sleep_until(start + Duration::from_secs(15)).await;
    held.unlock().await.expect("unlocked");
    let (guard, at) = tokio::time::timeout(Duration::from_secs(300), c_waiting)
        .await
        .expect("C takes the lock within 5 min")
        .expect("C's task");
    let guard = guard.expect("the lock");
    assert!(
        at - start <= Duration::from_millis(15_010),
        "C took the lock after {:?}, not at the unlock (15 s)",
        at - start
    );
    guard.unlock().await.expect("unlocked");
    a.shutdown().await;
    b.shutdown().await;
    c.shutdown().await;
}
