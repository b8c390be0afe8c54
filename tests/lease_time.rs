//! Lease logic on tokio's paused clock (the `model` feature): the engine, its watchdog task
//! included, runs on a test's current-thread runtime against the in-memory stand-in server,
//! whose clock follows the runtime's. Minutes of lease time pass in milliseconds, and every
//! figure is exact: no real sleep, no scheduler noise.

#![cfg(feature = "model")]

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redisson_lock::model::link::{Fault, FaultPlan, Link};
use redisson_lock::model::server::Server;
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
