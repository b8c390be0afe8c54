//! The metrics the library reports (the `metrics` feature), read back through `metrics-util`'s
//! debugging recorder while real operations run against a real server, faults included: a
//! lock deleted under its holder, an unlock that finds the lock gone, a hand-off, a timed-out
//! acquire. One test: the recorder is global to the process, and each step reads the deltas
//! since the last.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redisson_lock::observe::*;
use redisson_lock::{Error, LockGuard, Owner};
use support::{eventually, RedisServer};
use tokio::sync::mpsc;

/// Each metric of a snapshot, by name and sorted labels (`k=v,...`).
struct Seen(HashMap<(String, String), DebugValue>);

impl Seen {
    fn take(snapshotter: &Snapshotter) -> Seen {
        let mut seen = HashMap::new();
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let mut labels: Vec<String> = (key.key().labels())
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            seen.insert((key.key().name().to_string(), labels.join(",")), value);
        }
        Seen(seen)
    }

    fn counter(&self, name: &str, labels: &str) -> u64 {
        match self.0.get(&(name.to_string(), labels.to_string())) {
            Some(DebugValue::Counter(n)) => *n,
            _ => 0,
        }
    }

    fn samples(&self, name: &str, labels: &str) -> Vec<f64> {
        match self.0.get(&(name.to_string(), labels.to_string())) {
            Some(DebugValue::Histogram(values)) => values.iter().map(|v| v.0).collect(),
            _ => Vec::new(),
        }
    }

    fn gauge(&self, name: &str) -> Option<f64> {
        match self.0.get(&(name.to_string(), String::new())) {
            Some(DebugValue::Gauge(v)) => Some(v.0),
            _ => None,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_and_faults_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let server = RedisServer::start();
    let lease = Duration::from_millis(1500);
    let client = server
        .client_with(|c| {
            c.with_watchdog_timeout(lease)
                .with_lock_names_in_metrics(true)
                .with_hold_warning(Some(lease))
        })
        .await;
    let other = server.client().await;
    let _ = Seen::take(&snapshotter);

    // An acquire, and another client's try_lock that finds it held.
    let held = client.lock("m-held").lock().await.unwrap();
    assert!(other.lock("m-held").try_lock().await.unwrap().is_none());
    let seen = Seen::take(&snapshotter);
    assert_eq!(
        seen.counter(METRIC_ACQUIRES, "kind=lock,result=acquired"),
        1
    );
    assert_eq!(
        seen.counter(METRIC_ACQUIRES, "kind=lock,result=timed_out"),
        1
    );
    let waited = seen.samples(METRIC_ACQUIRE_WAIT, "kind=lock,result=acquired");
    assert_eq!(waited.len(), 1);
    assert!(waited[0] < 1.0, "an uncontended acquire: {waited:?}");
    // The held gauge moved with the acquire, not at a watchdog cycle. (The debugging
    // recorder zeroes what it reports: a gauge's snapshots add up to its value.)
    let mut held_gauge = seen.gauge(METRIC_HELD).unwrap_or(0.0);
    assert_eq!(held_gauge, 1.0, "one lock held, at once");
    assert_eq!(seen.gauge(METRIC_WAITERS), None, "a try_lock never waits");

    // A cycle of the watchdog renews the lock.
    let mut renewals = 0;
    let renewed = eventually(lease * 2, || {
        let seen = Seen::take(&snapshotter);
        renewals += seen.counter(METRIC_RENEWALS, "result=renewed");
        held_gauge += seen.gauge(METRIC_HELD).unwrap_or(0.0);
        renewals >= 1
    })
    .await;
    assert!(renewed, "renewals counted ({renewals})");
    assert_eq!(held_gauge, 1.0, "still one lock held");

    // The lock deleted under its holder: the next renewal finds it gone.
    let _: i64 = server.cmd(&["DEL", "m-held"]);
    tokio::time::timeout(lease * 2, held.lost()).await.unwrap();
    let seen = Seen::take(&snapshotter);
    assert_eq!(
        seen.counter(METRIC_LOST, "kind=lock,lock=m-held,reason=gone"),
        1
    );
    held_gauge += seen.gauge(METRIC_HELD).unwrap_or(0.0);
    assert_eq!(held_gauge, 0.0, "a lost lock is no longer counted as held");
    // The cycle counts its renewals after it has settled them (the loss is told first).
    let mut gone = seen.counter(METRIC_RENEWALS, "result=gone");
    let counted = eventually(lease, || {
        gone += Seen::take(&snapshotter).counter(METRIC_RENEWALS, "result=gone");
        gone >= 1
    })
    .await;
    assert!(counted, "a renewal that found the lock gone is counted");

    // An unlock that finds the lock gone. (A fixed lease: no renewal can find it gone first,
    // which made this unlock answer LockLost, the loss already told, once in a CI run.)
    let fixed = Duration::from_secs(30);
    let gone = other.lock("m-gone").lock_with_lease(fixed).await.unwrap();
    let _: i64 = server.cmd(&["DEL", "m-gone"]);
    let err = gone.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotOwner { .. }), "{err}");
    let seen = Seen::take(&snapshotter);
    assert_eq!(seen.counter(METRIC_UNLOCK_NOT_HELD, "kind=lock"), 1);
    let held_for = seen.samples(METRIC_HOLD, "kind=lock");
    assert_eq!(held_for.len(), 1, "the hold ended");

    // A hand-off: the second release of a relay passes the lock to the parked waiter.
    // The two waiters are counted while they wait, and no longer once served.
    let first = client.lock("m-relay").lock().await.unwrap();
    let _ = Seen::take(&snapshotter);
    let (tx, mut rx) = mpsc::unbounded_channel::<LockGuard>();
    for owner in [Owner::new(), Owner::new()] {
        let (lock, tx) = (client.lock("m-relay").with_owner(owner), tx.clone());
        tokio::spawn(async move {
            let _ = tx.send(lock.lock().await.unwrap());
        });
    }
    assert!(eventually(Duration::from_secs(5), || client.waiting() == 2).await);
    let mut waiters = Seen::take(&snapshotter)
        .gauge(METRIC_WAITERS)
        .unwrap_or(0.0);
    assert_eq!(waiters, 2.0, "two acquire calls waiting");
    first.unlock().await.unwrap();
    let second = rx.recv().await.unwrap();
    assert!(eventually(Duration::from_secs(5), || client.waiting() == 1).await);
    waiters += Seen::take(&snapshotter)
        .gauge(METRIC_WAITERS)
        .unwrap_or(0.0);
    second.unlock().await.unwrap();
    let third = rx.recv().await.unwrap();
    let seen = Seen::take(&snapshotter);
    assert_eq!(seen.counter(METRIC_HANDOFFS, "kind=lock"), 1);
    third.unlock().await.unwrap();
    waiters += seen.gauge(METRIC_WAITERS).unwrap_or(0.0);
    assert_eq!(waiters, 0.0, "both waiters were served");

    // A lock held past the hold warning (the watchdog's lease here) is reported once.
    let long = client.lock("m-long").lock().await.unwrap();
    let mut warned = 0;
    let reported = eventually(lease * 3, || {
        let seen = Seen::take(&snapshotter);
        warned += seen.counter(METRIC_HELD_TOO_LONG, "kind=lock,lock=m-long");
        warned == 1
    })
    .await;
    assert!(reported, "held too long, reported {warned} times");
    // Two more cycles (0.5 s apart): not reported again.
    tokio::time::sleep(lease).await;
    let seen = Seen::take(&snapshotter);
    assert_eq!(
        seen.counter(METRIC_HELD_TOO_LONG, "kind=lock,lock=m-long"),
        0
    );
    long.unlock().await.unwrap();

    // The synchronizers report through the same seam, under their kind: a semaphore's
    // acquire, a permit's, and a permit taken back behind its holder (told as lost).
    let _ = Seen::take(&snapshotter);
    let pool = client.semaphore("m-pool");
    pool.try_set_permits(1).await.unwrap();
    pool.acquire(1).await.unwrap().release().await.unwrap();
    let jobs = client.permit_semaphore("m-jobs");
    jobs.try_set_permits(1).await.unwrap();
    let permit = jobs.acquire(redisson_lock::Lease::Watchdog).await.unwrap();
    let seen = Seen::take(&snapshotter);
    assert_eq!(
        seen.counter(METRIC_ACQUIRES, "kind=semaphore,result=acquired"),
        1
    );
    assert_eq!(
        seen.counter(METRIC_ACQUIRES, "kind=permit,result=acquired"),
        1
    );
    assert!(other
        .permit_semaphore("m-jobs")
        .try_release(permit.id())
        .await
        .unwrap());
    tokio::time::timeout(lease * 2, permit.lost())
        .await
        .unwrap();
    let seen = Seen::take(&snapshotter);
    assert_eq!(
        seen.counter(METRIC_LOST, "kind=permit,lock=m-jobs,reason=gone"),
        1
    );

    client.shutdown().await;
    other.shutdown().await;
}
