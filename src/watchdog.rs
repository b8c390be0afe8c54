//! What this client holds, and the watchdog that keeps it held.
//!
//! [`Holds`] is the in-process registry of every lock this client holds, one entry per
//! `(key, owner field)` with the number of live guards, split into watchdog holds (no lease
//! given: renewed) and lease holds (a fixed lease: never renewed, lost when it runs out). Each
//! entry carries the **lock-lost signal** its guards share.
//!
//! One background task per client renews every entry with watchdog holds each interval, in
//! batched scripts. A reply of 0 means the lock is no longer ours: the entry is dropped and its
//! guards are told. A failed call is retried next cycle, but once a whole lease has passed since
//! the last confirmed renewal the lock is treated as lost too. Unlock, guard drop and shutdown
//! remove entries at once, before anything is sent to Redis, so no renewal outlives its hold.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::protocol::Protocol;

/// The longest lease accepted: 100 years. Redis refuses an expiry past the end of its clock
/// with an error *after* the script's earlier writes, so the bound is checked before sending.
pub(crate) const MAX_LEASE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How a hold's lease is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// No lease given: the watchdog timeout, renewed while held.
    Watchdog,
    /// A fixed lease: never renewed.
    Fixed(Duration),
}

impl Lease {
    /// The TTL in ms the scripts set for this hold.
    pub(crate) fn millis(self, watchdog_timeout: Duration) -> u64 {
        let d = match self {
            Lease::Watchdog => watchdog_timeout,
            Lease::Fixed(d) => d,
        };
        d.as_millis().min(i64::MAX as u128) as u64
    }
}

/// Why a lock was lost (see [`LockGuard::lost_reason`](crate::LockGuard::lost_reason)).
///
/// ```
/// use redisson_lock::LostReason;
///
/// let reason = LostReason::Gone;
/// assert_eq!(reason.to_string(), "renewal found the lock deleted or held by another owner");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// Renewal found the lock deleted, expired, or held by another owner.
    Gone,
    /// A whole lease passed without a confirmed renewal (Redis unreachable or too slow), so the
    /// lock may have expired.
    Unconfirmed,
    /// The fixed lease ran out.
    LeaseExpired,
    /// The client shut down and released it.
    Shutdown,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Gone => "renewal found the lock deleted or held by another owner",
            LostReason::Unconfirmed => "no renewal was confirmed for a whole lease",
            LostReason::LeaseExpired => "the fixed lease ran out",
            LostReason::Shutdown => "the client shut down",
        })
    }
}

/// The lock-lost signal shared by the guards of one entry: a token, and why it fired.
#[derive(Debug, Clone, Default)]
pub(crate) struct LostSignal {
    token: CancellationToken,
    reason: Arc<OnceLock<LostReason>>,
}

impl LostSignal {
    /// Fires the signal; the first reason given sticks.
    pub(crate) fn fire(&self, reason: LostReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    pub(crate) fn is_fired(&self) -> bool {
        self.token.is_cancelled()
    }

    pub(crate) fn reason(&self) -> Option<LostReason> {
        self.reason.get().copied()
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

/// Identifies one entry: a lock key and the owner field holding it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HoldKey {
    pub(crate) key: Arc<str>,
    pub(crate) field: Arc<str>,
}

struct Entry {
    /// Distinguishes this entry from a later one for the same key and field.
    id: u64,
    watchdog_holds: u32,
    lease_holds: u32,
    /// When the last fixed lease runs out (only consulted without watchdog holds).
    lease_deadline: Option<Instant>,
    /// When the TTL was last set to a full watchdog lease (request send time).
    last_confirmed: Instant,
    lost: LostSignal,
}

impl Entry {
    fn holds(&self) -> u32 {
        self.watchdog_holds + self.lease_holds
    }
}

/// A guard's claim on an entry.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    pub(crate) entry_id: u64,
    pub(crate) lost: LostSignal,
}

/// What became of a hold when its guard gave it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surrender {
    /// The hold was live: the caller must now release it in Redis.
    Live,
    /// The lock had already been lost: there is nothing to release.
    Lost,
}

/// The registry of held locks.
#[derive(Default)]
pub(crate) struct Holds {
    entries: Mutex<HashMap<HoldKey, Entry>>,
    next_id: AtomicU64,
    /// Signalled when a lease deadline may have moved earlier.
    changed: Notify,
}

impl Holds {
    /// Records one more hold of `hold` acquired with `lease`, by a request sent at `sent_at`.
    pub(crate) fn register(&self, hold: HoldKey, lease: Lease, sent_at: Instant) -> Ticket {
        let mut entries = self.entries.lock();
        let entry = entries.entry(hold).or_insert_with(|| Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            watchdog_holds: 0,
            lease_holds: 0,
            lease_deadline: None,
            last_confirmed: sent_at,
            lost: LostSignal::default(),
        });
        match lease {
            Lease::Watchdog => {
                entry.watchdog_holds += 1;
                entry.last_confirmed = sent_at;
            }
            Lease::Fixed(d) => {
                entry.lease_holds += 1;
                // Every acquire resets the TTL to its own lease.
                entry.lease_deadline = Some(sent_at + d);
                self.changed.notify_one();
            }
        }
        Ticket {
            entry_id: entry.id,
            lost: entry.lost.clone(),
        }
    }

    /// Gives up one hold. Renewal of the entry stops at once when it was the last.
    pub(crate) fn surrender(&self, hold: &HoldKey, entry_id: u64, lease: Lease) -> Surrender {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.get_mut(hold) else {
            return Surrender::Lost;
        };
        if entry.id != entry_id || entry.lost.is_fired() {
            return Surrender::Lost;
        }
        match lease {
            Lease::Watchdog => entry.watchdog_holds = entry.watchdog_holds.saturating_sub(1),
            Lease::Fixed(_) => entry.lease_holds = entry.lease_holds.saturating_sub(1),
        }
        if entry.holds() == 0 {
            entries.remove(hold);
        }
        Surrender::Live
    }

    /// A partial unlock reset the key's TTL to a fixed lease at `sent_at`.
    pub(crate) fn lease_reset(
        &self,
        hold: &HoldKey,
        entry_id: u64,
        lease: Lease,
        sent_at: Instant,
    ) {
        if let Lease::Fixed(d) = lease {
            if let Some(entry) = self.entries.lock().get_mut(hold) {
                if entry.id == entry_id {
                    entry.lease_deadline = Some(sent_at + d);
                }
            }
        }
    }

    /// Declares an entry lost: fires its signal and forgets it.
    pub(crate) fn lose(&self, hold: &HoldKey, entry_id: u64, reason: LostReason) {
        let mut entries = self.entries.lock();
        if entries.get(hold).is_some_and(|e| e.id == entry_id) {
            if let Some(entry) = entries.remove(hold) {
                entry.lost.fire(reason);
            }
        }
    }

    /// Removes every entry (shutdown), firing their signals; returns what was held and how often.
    pub(crate) fn drain(&self) -> Vec<(HoldKey, u32)> {
        let drained: Vec<_> = self.entries.lock().drain().collect();
        drained
            .into_iter()
            .map(|(hold, entry)| {
                entry.lost.fire(LostReason::Shutdown);
                (hold, entry.holds())
            })
            .collect()
    }

    /// Number of entries (locks held by this client).
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Number of entries the watchdog renews.
    pub(crate) fn renewed_len(&self) -> usize {
        self.entries
            .lock()
            .values()
            .filter(|e| e.watchdog_holds > 0)
            .count()
    }

    fn renewal_snapshot(&self) -> Vec<(HoldKey, u64)> {
        self.entries
            .lock()
            .iter()
            .filter(|(_, e)| e.watchdog_holds > 0)
            .map(|(k, e)| (k.clone(), e.id))
            .collect()
    }

    fn confirm(&self, hold: &HoldKey, entry_id: u64, sent_at: Instant) {
        if let Some(entry) = self.entries.lock().get_mut(hold) {
            if entry.id == entry_id && entry.last_confirmed < sent_at {
                entry.last_confirmed = sent_at;
            }
        }
    }

    /// Loses every entry in `batch` whose last confirmation is a whole lease old.
    fn expire_unconfirmed(&self, batch: &[(HoldKey, u64)], lease: Duration, now: Instant) {
        let mut entries = self.entries.lock();
        for (hold, id) in batch {
            let stale = entries.get(hold).is_some_and(|e| {
                e.id == *id && e.watchdog_holds > 0 && now >= e.last_confirmed + lease
            });
            if stale {
                if let Some(entry) = entries.remove(hold) {
                    tracing::warn!(key = %hold.key, "lock lost: no renewal confirmed for a whole lease");
                    entry.lost.fire(LostReason::Unconfirmed);
                }
            }
        }
    }

    fn next_lease_deadline(&self) -> Option<Instant> {
        self.entries
            .lock()
            .values()
            .filter(|e| e.watchdog_holds == 0)
            .filter_map(|e| e.lease_deadline)
            .min()
    }

    /// Loses every lease-only entry whose lease has run out.
    fn expire_leases(&self, now: Instant) {
        let mut entries = self.entries.lock();
        let expired: Vec<HoldKey> = entries
            .iter()
            .filter(|(_, e)| e.watchdog_holds == 0 && e.lease_deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for hold in expired {
            if let Some(entry) = entries.remove(&hold) {
                entry.lost.fire(LostReason::LeaseExpired);
            }
        }
    }
}

/// Settings of the watchdog task.
pub(crate) struct Watchdog {
    pub(crate) holds: Arc<Holds>,
    pub(crate) protocol: Protocol,
    pub(crate) lease: Duration,
    pub(crate) interval: Duration,
    pub(crate) batch_size: usize,
}

impl Watchdog {
    /// Runs until `shutdown` is cancelled.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut next_cycle = Instant::now() + self.interval;
        loop {
            let deadline = self.holds.next_lease_deadline();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(next_cycle) => {
                    let started = Instant::now();
                    self.renew_all().await;
                    next_cycle = started + self.interval;
                }
                _ = sleep_until_some(deadline) => self.holds.expire_leases(Instant::now()),
                _ = self.holds.changed.notified() => {}
            }
        }
    }

    /// One renewal cycle over every entry with watchdog holds.
    async fn renew_all(&self) {
        let snapshot = self.holds.renewal_snapshot();
        let lease_ms = Lease::Watchdog.millis(self.lease);
        let mut batches = snapshot.chunks(self.batch_size);
        while let Some(batch) = batches.next() {
            let sent_at = Instant::now();
            let result = self
                .protocol
                .renew(lease_ms, batch.iter().map(|(h, _)| (&*h.key, &*h.field)))
                .await;
            match result {
                Ok(renewed) => {
                    for ((hold, id), ok) in batch.iter().zip(renewed) {
                        if ok {
                            self.holds.confirm(hold, *id, sent_at);
                        } else {
                            tracing::warn!(key = %hold.key, "lock lost: renewal found it gone");
                            self.holds.lose(hold, *id, LostReason::Gone);
                        }
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "lock renewal failed; retrying next cycle");
                    let now = Instant::now();
                    self.holds.expire_unconfirmed(batch, self.lease, now);
                    if crate::error::is_connection_error(&err) {
                        // The rest would fail the same way: check their age and move on.
                        for rest in batches.by_ref() {
                            self.holds.expire_unconfirmed(rest, self.lease, now);
                        }
                    }
                }
            }
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(k: &str) -> HoldKey {
        HoldKey {
            key: k.into(),
            field: "u:1".into(),
        }
    }

    #[test]
    fn reentrant_holds_share_one_entry_and_signal() {
        let holds = Holds::default();
        let now = Instant::now();
        let a = holds.register(hold("k"), Lease::Watchdog, now);
        let b = holds.register(hold("k"), Lease::Watchdog, now);
        assert_eq!(a.entry_id, b.entry_id);
        assert_eq!(holds.len(), 1);
        assert_eq!(
            holds.surrender(&hold("k"), a.entry_id, Lease::Watchdog),
            Surrender::Live
        );
        assert_eq!(holds.renewed_len(), 1, "one hold left: still renewed");
        assert_eq!(
            holds.surrender(&hold("k"), b.entry_id, Lease::Watchdog),
            Surrender::Live
        );
        assert_eq!(holds.len(), 0, "last hold gone: renewal stops");
    }

    #[test]
    fn a_lost_entry_is_not_confused_with_a_later_one() {
        let holds = Holds::default();
        let now = Instant::now();
        let old = holds.register(hold("k"), Lease::Watchdog, now);
        holds.lose(&hold("k"), old.entry_id, LostReason::Gone);
        assert_eq!(old.lost.reason(), Some(LostReason::Gone));
        let new = holds.register(hold("k"), Lease::Watchdog, now);
        assert_ne!(old.entry_id, new.entry_id);
        // The stale guard neither releases nor disturbs the new entry.
        assert_eq!(
            holds.surrender(&hold("k"), old.entry_id, Lease::Watchdog),
            Surrender::Lost
        );
        holds.lose(&hold("k"), old.entry_id, LostReason::Gone);
        assert!(!new.lost.is_fired());
        assert_eq!(holds.len(), 1);
    }

    #[test]
    fn unconfirmed_for_a_whole_lease_is_lost() {
        let holds = Holds::default();
        let t0 = Instant::now();
        let t = holds.register(hold("k"), Lease::Watchdog, t0);
        let batch = holds.renewal_snapshot();
        let lease = Duration::from_secs(30);
        holds.expire_unconfirmed(&batch, lease, t0 + Duration::from_secs(29));
        assert!(!t.lost.is_fired());
        holds.expire_unconfirmed(&batch, lease, t0 + lease);
        assert_eq!(t.lost.reason(), Some(LostReason::Unconfirmed));
    }

    #[test]
    fn fixed_leases_expire_and_are_never_renewed() {
        let holds = Holds::default();
        let t0 = Instant::now();
        let t = holds.register(hold("k"), Lease::Fixed(Duration::from_secs(5)), t0);
        assert_eq!(holds.renewed_len(), 0);
        assert_eq!(
            holds.next_lease_deadline(),
            Some(t0 + Duration::from_secs(5))
        );
        holds.expire_leases(t0 + Duration::from_secs(4));
        assert!(!t.lost.is_fired());
        holds.expire_leases(t0 + Duration::from_secs(5));
        assert_eq!(t.lost.reason(), Some(LostReason::LeaseExpired));
    }
}
