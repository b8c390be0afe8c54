//! The observability seam: every event, span and metric the engine reports goes through here,
//! from the engine's single points (the acquire loop, a release's answer, a forced unlock, the
//! watchdog's cycle, the lost-lock announcement, a hand-off, a missing replica
//! acknowledgement, a failover followed), with the same fields everywhere: `client_id`, `lock`
//! (the name), `key`, `owner`, `kind`. Nothing secret (no password, no URL) is ever among them.
//!
//! Events and spans go to `tracing`; the spans' names are the `SPAN_*` constants, their fields
//! are declared here only (results are recorded on them when known). Without a subscriber a
//! span is a level check: no field is formatted (the owner field is formatted only when a
//! subscriber records it). Metrics go to the [`metrics`] facade with the `metrics` feature (no
//! exporter is forced on the library: a service installs its own recorder, such as
//! `metrics-exporter-prometheus`); their names, types and labels are the `METRIC_*` constants
//! and the README's table. Labels are low-cardinality (`kind`, `result`, `reason`, `op`,
//! `topology`); the lock name is a label only where the client opts in
//! ([`Config::with_lock_names_in_metrics`](crate::Config::with_lock_names_in_metrics)).
//!
//! A new metric is a constant and a line in one of these functions (and the README's table); a
//! new span, a constant and the function that opens it (and the README's Spans paragraph).

use std::fmt::Display;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tracing::field::Empty;
use tracing::Span;

/// Span around an acquire call (every acquiring method of every kind): `client_id`, `lock`,
/// `key`, `owner`, `kind`, then `result` (`acquired`, `timed_out`, `error`) and `waited_ms`.
/// Level `debug`. A cancelled call's span closes without a result.
///
/// ```
/// use redisson_lock::observe::SPAN_ACQUIRE;
/// // e.g. a `tracing_subscriber` filter: `redisson_lock[acquire]=debug`
/// assert_eq!(SPAN_ACQUIRE, "acquire");
/// ```
pub const SPAN_ACQUIRE: &str = "acquire";
/// Span around an unlock call (`LockGuard::unlock`, and what unlocks through it):
/// `client_id`, `lock`, `key`, `owner`, `kind`, then `result` (`released`, `not_held`: Redis
/// no longer shows the owner, `lost`: known lost before, nothing sent, `error`). Level
/// `debug`. A dropped guard's background release has no span.
///
/// ```
/// assert_eq!(redisson_lock::observe::SPAN_UNLOCK, "unlock");
/// ```
pub const SPAN_UNLOCK: &str = "unlock";
/// Span around a forced unlock: `client_id`, `lock`, `key`, `kind`, then `result`
/// (`released`: it was held, `not_held`, `error`). Level `info`.
///
/// ```
/// assert_eq!(redisson_lock::observe::SPAN_FORCE_UNLOCK, "force_unlock");
/// ```
pub const SPAN_FORCE_UNLOCK: &str = "force_unlock";
/// Span around one watchdog cycle that has locks to renew: `client_id`, `locks` (entries
/// renewed), then `renewed`, `gone`, `failed`, `unconfirmed` (as [`METRIC_RENEWALS`]). Level
/// `debug`. A cycle with nothing to renew has none.
///
/// ```
/// assert_eq!(redisson_lock::observe::SPAN_RENEWAL_CYCLE, "renewal_cycle");
/// ```
pub const SPAN_RENEWAL_CYCLE: &str = "renewal_cycle";
/// Span around following a failover: `client_id`, `topology` (`sentinel`, `cluster`), `from`
/// and `to` (masters as `host:port`, a cluster's joined by `,`), then `result` (`followed`,
/// `error`: the new master did not answer yet, tried again at the next look). Level `info`.
///
/// ```
/// assert_eq!(redisson_lock::observe::SPAN_FAILOVER, "failover");
/// ```
pub const SPAN_FAILOVER: &str = "failover";

/// Acquire calls, by `kind` and `result` (`acquired`, `timed_out`, `error`). Counter.
pub const METRIC_ACQUIRES: &str = "redisson_lock_acquires_total";
/// How long acquire calls took, by `kind` and `result`. Histogram, seconds.
pub const METRIC_ACQUIRE_WAIT: &str = "redisson_lock_acquire_wait_seconds";
/// How long an owner held a lock (first acquire to last release), by `kind`. Histogram,
/// seconds.
pub const METRIC_HOLD: &str = "redisson_lock_hold_seconds";
/// Renewals sent by the watchdog, by `result` (`renewed`, `gone`, `failed`, `unconfirmed`: a
/// write no replica acknowledged). Counter, one per lock renewed.
pub const METRIC_RENEWALS: &str = "redisson_lock_renewals_total";
/// Locks lost while held, by `kind` and `reason` (`gone`, `unconfirmed`, `lease_expired`).
/// Counter: should stay 0; alarm otherwise.
pub const METRIC_LOST: &str = "redisson_lock_lost_total";
/// Unlocks that found the lock no longer held by their owner (the unlock script answered
/// "not held": the lock was lost while held), by `kind`. Counter: should stay 0.
pub const METRIC_UNLOCK_NOT_HELD: &str = "redisson_lock_unlock_not_held_total";
/// Locks handed to a waiter of the same client with the releasing write, by `kind`. Counter.
pub const METRIC_HANDOFFS: &str = "redisson_lock_handoffs_total";
/// Lock writes no replica acknowledged within the replica-sync timeout, by `op` (`acquire`,
/// `unlock`, `renew`, `force_unlock`). Counter.
pub const METRIC_REPLICA_ACK_MISSING: &str = "redisson_lock_replica_ack_missing_total";
/// Master switches followed (Sentinel) and cluster views read with other masters, by
/// `topology` (`sentinel`, `cluster`). Counter.
pub const METRIC_FAILOVERS: &str = "redisson_lock_failovers_followed_total";
/// Locks found held longer than the client's hold warning
/// ([`Config::with_hold_warning`](crate::Config::with_hold_warning)), once per hold, by
/// `kind` [, `lock`]. Counter.
pub const METRIC_HELD_TOO_LONG: &str = "redisson_lock_held_too_long_total";
/// Locks held by the clients of the process: one per lock and owner holding it (however many
/// times re-entered), counted from the acquire's answer to the hold's end (its last unlock, its
/// loss, the client's shutdown). Moves as locks are taken and given up. Gauge.
pub const METRIC_HELD: &str = "redisson_lock_held";
/// Acquire calls of the process waiting for a lock: counted from the first attempt that found
/// the lock taken to the end of the call (acquired, timed out, failed or cancelled). Every way
/// of waiting counts: parked for the unlock message or a local hand-off, queued in a fair
/// lock's queue, polling a spin lock. A `try_lock` (one attempt) never counts. Moves as
/// waits start and end. Gauge.
pub const METRIC_WAITERS: &str = "redisson_lock_waiters";
/// When the longest-waiting acquire call of the process (as [`METRIC_WAITERS`] counts them)
/// began to wait, in seconds since the Unix epoch; 0 while none waits. Its age is
/// `time() - (redisson_lock_oldest_wait_start_seconds > 0)`. Gauge.
pub const METRIC_OLDEST_WAIT_START: &str = "redisson_lock_oldest_wait_start_seconds";

/// Histogram buckets, in seconds, for [`METRIC_ACQUIRE_WAIT`] and [`METRIC_HOLD`]: from an
/// uncontended acquire on a local network (a fraction of a millisecond) to holds and waits of
/// minutes. The `metrics` facade leaves buckets to the exporter; this is what `rlock` and
/// `examples/prometheus.rs` give theirs, and what a service can give its own:
///
/// ```no_run
/// use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
/// use redisson_lock::observe::LOCK_SECONDS_BUCKETS;
///
/// PrometheusBuilder::new()
///     .set_buckets_for_metric(Matcher::Prefix("redisson_lock_".into()), LOCK_SECONDS_BUCKETS)
///     .unwrap()
///     .install()
///     .unwrap();
/// ```
///
/// (Without buckets, that exporter renders histograms as summaries: quantiles per process,
/// which no query can add up across a fleet.)
pub const LOCK_SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0, 600.0,
];

/// Which lock an event is about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct About<'a> {
    pub(crate) client_id: &'a str,
    pub(crate) lock: &'a str,
    pub(crate) key: &'a str,
    pub(crate) kind: &'static str,
}

/// How an acquire call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    Yes,
    TimedOut,
    Failed,
}

impl Acquired {
    fn label(self) -> &'static str {
        match self {
            Acquired::Yes => "acquired",
            Acquired::TimedOut => "timed_out",
            Acquired::Failed => "error",
        }
    }
}

/// How an unlock call (or a forced unlock) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// A hold released (a forced unlock: the lock was held, and deleted).
    Released,
    /// Redis did not show the owner (a forced unlock: nothing held).
    NotHeld,
    /// Known lost before the call: nothing was sent.
    Lost,
    Failed,
}

impl Unlocked {
    fn label(self) -> &'static str {
        match self {
            Unlocked::Released => "released",
            Unlocked::NotHeld => "not_held",
            Unlocked::Lost => "lost",
            Unlocked::Failed => "error",
        }
    }
}

/// Per-client settings of the seam.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Observe {
    /// Whether metrics about one lock carry its name as a `lock` label.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) lock_names: bool,
}

impl Observe {
    /// The span of an acquire call by `owner` (the owner field, formatted only if recorded).
    pub(crate) fn acquire_span(&self, about: About<'_>, owner: &dyn Display) -> Span {
        tracing::debug_span!(
            SPAN_ACQUIRE,
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            owner = %owner,
            kind = about.kind,
            result = Empty,
            waited_ms = Empty,
        )
    }

    /// An acquire call (its span `span`) ended after `waited`.
    pub(crate) fn acquire_ended(
        &self,
        span: &Span,
        about: About<'_>,
        result: Acquired,
        waited: Duration,
    ) {
        let waited_ms = waited.as_millis() as u64;
        record(span, "result", result.label());
        record(span, "waited_ms", waited_ms);
        tracing::debug!(
            parent: span,
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            kind = about.kind,
            result = result.label(),
            waited_ms,
            "acquire ended"
        );
        #[cfg(feature = "metrics")]
        {
            let labels = [("kind", about.kind), ("result", result.label())];
            metrics::counter!(METRIC_ACQUIRES, &labels).increment(1);
            metrics::histogram!(METRIC_ACQUIRE_WAIT, &labels).record(waited.as_secs_f64());
        }
    }

    /// An owner's last hold of a lock was given up after `held`.
    pub(crate) fn hold_ended(&self, about: About<'_>, held: Duration) {
        let _ = (about, held);
        #[cfg(feature = "metrics")]
        metrics::histogram!(METRIC_HOLD, "kind" => about.kind).record(held.as_secs_f64());
    }

    /// A lock was lost while held (`reason` as [`LostReason`](crate::LostReason) names it).
    pub(crate) fn lost(&self, about: About<'_>, owner: &str, reason: &'static str, why: &str) {
        tracing::warn!(
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            kind = about.kind,
            owner,
            reason,
            "lock lost: {why}"
        );
        #[cfg(feature = "metrics")]
        self.count_about(METRIC_LOST, about, Some(("reason", reason)));
    }

    /// The span of an unlock call by `owner` (formatted only if recorded).
    pub(crate) fn unlock_span(&self, about: About<'_>, owner: &dyn Display) -> Span {
        tracing::debug_span!(
            SPAN_UNLOCK,
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            owner = %owner,
            kind = about.kind,
            result = Empty,
        )
    }

    /// An unlock call (its span `span`) ended.
    pub(crate) fn unlock_ended(&self, span: &Span, result: Unlocked) {
        record(span, "result", result.label());
    }

    /// The span of a forced unlock.
    pub(crate) fn force_unlock_span(&self, about: About<'_>) -> Span {
        tracing::info_span!(
            SPAN_FORCE_UNLOCK,
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            kind = about.kind,
            result = Empty,
        )
    }

    /// A forced unlock (its span `span`) ended: `Released` if it deleted a held lock.
    pub(crate) fn force_unlock_ended(&self, span: &Span, about: About<'_>, result: Unlocked) {
        record(span, "result", result.label());
        tracing::info!(
            parent: span,
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            kind = about.kind,
            result = result.label(),
            "forced unlock"
        );
    }

    /// An unlock found the lock no longer held by its owner.
    pub(crate) fn unlock_not_held(&self, about: About<'_>, owner: &str) {
        tracing::warn!(
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            kind = about.kind,
            owner,
            "unlock found the lock no longer held by its owner (lost while held)"
        );
        #[cfg(feature = "metrics")]
        self.count_about(METRIC_UNLOCK_NOT_HELD, about, None);
    }

    /// A lock has been held longer than `limit` (the hold warning).
    pub(crate) fn held_too_long(
        &self,
        about: About<'_>,
        owner: &str,
        held: Duration,
        limit: Duration,
    ) {
        tracing::warn!(
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            kind = about.kind,
            owner,
            held_ms = held.as_millis() as u64,
            limit_ms = limit.as_millis() as u64,
            "lock held longer than the hold warning"
        );
        #[cfg(feature = "metrics")]
        self.count_about(METRIC_HELD_TOO_LONG, about, None);
    }

    /// A release handed the lock to a waiter of this client.
    pub(crate) fn handed_off(&self, about: About<'_>) {
        tracing::debug!(
            client_id = about.client_id,
            lock = about.lock,
            key = about.key,
            kind = about.kind,
            "lock handed to a waiter of this client"
        );
        #[cfg(feature = "metrics")]
        metrics::counter!(METRIC_HANDOFFS, "kind" => about.kind).increment(1);
    }

    /// The span of a watchdog cycle renewing `locks` entries (none for a cycle without any).
    pub(crate) fn renewal_span(&self, client_id: &str, locks: usize) -> Span {
        if locks == 0 {
            return Span::none();
        }
        tracing::debug_span!(
            SPAN_RENEWAL_CYCLE,
            client_id,
            locks,
            renewed = Empty,
            gone = Empty,
            failed = Empty,
            unconfirmed = Empty,
        )
    }

    /// One watchdog cycle (its span `span`): locks renewed, found gone, failed (no answer),
    /// unconfirmed (no replica acknowledged), and the registry's and waiters' sizes (for the
    /// log line: the gauges move as locks are taken and waited for, not once a cycle).
    pub(crate) fn renewal_cycle(&self, span: &Span, client_id: &str, cycle: Cycle, took: Duration) {
        record(span, "renewed", cycle.renewed);
        record(span, "gone", cycle.gone);
        record(span, "failed", cycle.failed);
        record(span, "unconfirmed", cycle.unconfirmed);
        if cycle.renewed + cycle.gone + cycle.failed + cycle.unconfirmed > 0 {
            tracing::debug!(
                parent: span,
                client_id,
                renewed = cycle.renewed,
                gone = cycle.gone,
                failed = cycle.failed,
                unconfirmed = cycle.unconfirmed,
                held = cycle.held,
                waiters = cycle.waiters,
                took_ms = took.as_millis() as u64,
                "renewal cycle"
            );
        }
        #[cfg(feature = "metrics")]
        {
            for (result, n) in [
                ("renewed", cycle.renewed),
                ("gone", cycle.gone),
                ("failed", cycle.failed),
                ("unconfirmed", cycle.unconfirmed),
            ] {
                if n > 0 {
                    metrics::counter!(METRIC_RENEWALS, "result" => result).increment(n as u64);
                }
            }
        }
    }

    /// Counts `name` for `about`, with its kind, `extra`, and its name where opted in.
    #[cfg(feature = "metrics")]
    fn count_about(&self, name: &'static str, about: About<'_>, extra: Option<(&str, &str)>) {
        let mut labels: Vec<metrics::Label> = vec![metrics::Label::new("kind", about.kind)];
        if let Some((k, v)) = extra {
            labels.push(metrics::Label::new(k.to_string(), v.to_string()));
        }
        if self.lock_names {
            labels.push(metrics::Label::new("lock", about.lock.to_string()));
        }
        metrics::counter!(name, labels).increment(1);
    }
}

/// What one client's registry last added to [`METRIC_HELD`]: the registry swaps its size in
/// under its own lock and adds the difference after releasing it. Additions commute, so
/// however the threads that changed the registry interleave after its lock, the gauge ends at
/// the sum of the clients' sizes.
#[derive(Debug, Default)]
pub(crate) struct HeldGauge {
    held: AtomicUsize,
}

impl HeldGauge {
    /// The registry now holds `len` entries (called under its lock): what the gauge must add.
    pub(crate) fn swap(&self, len: usize) -> isize {
        len as isize - self.held.swap(len, Ordering::Relaxed) as isize
    }

    /// Adds what [`HeldGauge::swap`] returned (called after the registry's lock is released).
    pub(crate) fn add(delta: isize) {
        let _ = delta;
        #[cfg(feature = "metrics")]
        if delta != 0 {
            metrics::gauge!(METRIC_HELD).increment(delta as f64);
        }
    }
}

/// One acquire call waiting for a lock, counted in [`METRIC_WAITERS`] and
/// [`METRIC_OLDEST_WAIT_START`] until dropped (the call ended, or was cancelled).
#[must_use = "the wait is counted until this is dropped"]
pub(crate) struct WaitMark {
    #[cfg(feature = "metrics")]
    key: (u128, u64),
}

/// Start times of the waits in progress in the process, oldest first (unique by a sequence).
#[cfg(feature = "metrics")]
static WAITS: parking_lot::Mutex<std::collections::BTreeSet<(u128, u64)>> =
    parking_lot::Mutex::new(std::collections::BTreeSet::new());

impl WaitMark {
    /// A wait begins now.
    pub(crate) fn start() -> WaitMark {
        #[cfg(feature = "metrics")]
        {
            static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let since_epoch = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let key = (since_epoch.as_micros(), SEQ.fetch_add(1, Ordering::Relaxed));
            metrics::gauge!(METRIC_WAITERS).increment(1.0);
            WaitMark::oldest_after(|waits| {
                waits.insert(key);
            });
            WaitMark { key }
        }
        #[cfg(not(feature = "metrics"))]
        WaitMark {}
    }

    /// Changes the set of waits by `change` and sets the oldest-wait gauge from what is left.
    /// (Set under the set's own small lock, taken only by calls that wait: two changes can
    /// then never leave the gauge at an older set's value.)
    #[cfg(feature = "metrics")]
    fn oldest_after(change: impl FnOnce(&mut std::collections::BTreeSet<(u128, u64)>)) {
        let mut waits = WAITS.lock();
        change(&mut waits);
        let oldest = waits
            .first()
            .map_or(0.0, |(micros, _)| *micros as f64 / 1e6);
        metrics::gauge!(METRIC_OLDEST_WAIT_START).set(oldest);
    }
}

impl Drop for WaitMark {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        {
            metrics::gauge!(METRIC_WAITERS).decrement(1.0);
            let key = self.key;
            WaitMark::oldest_after(|waits| {
                waits.remove(&key);
            });
        }
    }
}

/// What one watchdog cycle did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cycle {
    pub(crate) renewed: usize,
    pub(crate) gone: usize,
    pub(crate) failed: usize,
    pub(crate) unconfirmed: usize,
    pub(crate) held: usize,
    pub(crate) waiters: usize,
}

/// Records `value` as `span`'s `field`, without even looking the field up when no subscriber
/// keeps the span (the acquire path's case).
fn record(span: &Span, field: &str, value: impl tracing::Value) {
    if !span.is_disabled() {
        span.record(field, value);
    }
}

/// A lock write no replica acknowledged (`op`: `acquire`, `unlock`, `renew`, `force_unlock`).
pub(crate) fn replica_ack_missing(op: &'static str, replicas: u32) {
    tracing::debug!(op, replicas, "no replica acknowledged a lock write");
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_REPLICA_ACK_MISSING, "op" => op).increment(1);
}

/// The span of following a failover of client `client_id` (if known) from the masters `from`
/// to `to` (`topology`: `sentinel`, `cluster`).
pub(crate) fn failover_span(
    client_id: Option<&str>,
    topology: &'static str,
    from: &str,
    to: &str,
) -> Span {
    tracing::info_span!(SPAN_FAILOVER, client_id, topology, from, to, result = Empty)
}

/// The client followed a failover (its span `span`): the sentinels named another master, or a
/// cluster view read with other masters than the last.
pub(crate) fn failover_followed(span: &Span, topology: &'static str, from: &str, to: &str) {
    record(span, "result", "followed");
    tracing::info!(parent: span, topology, from, to, "followed a failover");
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_FAILOVERS, "topology" => topology).increment(1);
}

/// Following a failover (its span `span`) failed for now: the next look tries again.
pub(crate) fn failover_failed(span: &Span, error: &dyn Display) {
    record(span, "result", "error");
    tracing::debug!(parent: span, error = %error, "the new master is not ready");
}
