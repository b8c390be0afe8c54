//! What this client holds, and the watchdog that keeps it held.
//!
//! [`Holds`] is the in-process registry of every lock this client holds, one entry per
//! `(key, owner field)` with the number of live guards, split into watchdog holds (no lease
//! given: renewed) and lease holds (a fixed lease: never renewed, lost when it runs out). Each
//! entry carries the **lock-lost signal** its guards share.
//!
//! One background task per client renews every entry with watchdog holds each interval, in
//! batched scripts, a few batches in flight at a time. A reply of 0 means the lock is no longer
//! ours: the entry is dropped and its guards are told. A failed call is retried next cycle, but
//! once a whole lease has passed since the last confirmed renewal the lock is treated as lost
//! too. Unlock, guard drop and shutdown remove entries at once, before anything is sent to
//! Redis, so no renewal outlives its hold.
//!
//! Entries live in a slab (a `Vec` of slots) indexed by a hash map from `(key, field)`: a
//! renewal snapshot remembers each entry's slot, so confirming 100k renewals a cycle costs a
//! slot access each, not a hash lookup of two strings each.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
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

/// The entries: a slab of slots, and an index from `(key, field)` to slot.
#[derive(Default)]
struct Table {
    index: HashMap<HoldKey, usize>,
    slots: Vec<Option<Entry>>,
    free: Vec<usize>,
}

impl Table {
    fn get_mut(&mut self, hold: &HoldKey) -> Option<&mut Entry> {
        self.slots[*self.index.get(hold)?].as_mut()
    }

    /// The entry in `slot` if it is still entry `id` (slots are reused, ids never are).
    fn slot_mut(&mut self, slot: usize, id: u64) -> Option<&mut Entry> {
        self.slots
            .get_mut(slot)?
            .as_mut()
            .filter(|entry| entry.id == id)
    }

    fn get_or_insert_with(&mut self, hold: HoldKey, new: impl FnOnce() -> Entry) -> &mut Entry {
        let slot = match self.index.get(&hold) {
            Some(&slot) => slot,
            None => {
                let slot = self.free.pop().unwrap_or_else(|| {
                    self.slots.push(None);
                    self.slots.len() - 1
                });
                self.slots[slot] = Some(new());
                self.index.insert(hold, slot);
                slot
            }
        };
        self.slots[slot]
            .as_mut()
            .expect("an indexed slot is occupied")
    }

    fn remove(&mut self, hold: &HoldKey) -> Option<Entry> {
        let slot = self.index.remove(hold)?;
        let entry = self.slots[slot].take();
        if self.index.is_empty() {
            // Nothing held any more: give the slab's memory back.
            self.slots = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(slot);
        }
        entry
    }

    /// Removes the entry in `slot` (indexed by `hold`) if it is still entry `id`.
    fn remove_slot(&mut self, hold: &HoldKey, slot: usize, id: u64) -> Option<Entry> {
        self.slot_mut(slot, id)?;
        self.remove(hold)
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn values(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().flatten()
    }

    fn drain(&mut self) -> Vec<(HoldKey, Entry)> {
        let index = std::mem::take(&mut self.index);
        let mut slots = std::mem::take(&mut self.slots);
        self.free = Vec::new();
        index
            .into_iter()
            .filter_map(|(hold, slot)| slots[slot].take().map(|entry| (hold, entry)))
            .collect()
    }
}

/// One entry of a renewal snapshot: what to send, and where to confirm it.
struct Renewal {
    hold: HoldKey,
    id: u64,
    slot: usize,
}

/// The registry of held locks.
#[derive(Default)]
pub(crate) struct Holds {
    entries: Mutex<Table>,
    next_id: AtomicU64,
    /// Signalled when a lease deadline may have moved earlier.
    changed: Notify,
}

impl Holds {
    /// Records one more hold of `hold` acquired with `lease`, by a request sent at `sent_at`.
    pub(crate) fn register(&self, hold: HoldKey, lease: Lease, sent_at: Instant) -> Ticket {
        let mut entries = self.entries.lock();
        let entry = entries.get_or_insert_with(hold, || Entry {
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

    /// Declares an entry lost: fires its signal and forgets it. (The watchdog itself loses
    /// entries by slot, see `settle`; this is for the unit tests.)
    #[cfg(test)]
    pub(crate) fn lose(&self, hold: &HoldKey, entry_id: u64, reason: LostReason) {
        let mut entries = self.entries.lock();
        if entries.get_mut(hold).is_some_and(|e| e.id == entry_id) {
            if let Some(entry) = entries.remove(hold) {
                entry.lost.fire(reason);
            }
        }
    }

    /// Removes every entry (shutdown), firing their signals; returns what was held and how often.
    pub(crate) fn drain(&self) -> Vec<(HoldKey, u32)> {
        let drained = self.entries.lock().drain();
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

    fn renewal_snapshot(&self) -> Vec<Renewal> {
        let entries = self.entries.lock();
        let mut snapshot = Vec::with_capacity(entries.len());
        for (hold, &slot) in &entries.index {
            if let Some(entry) = &entries.slots[slot] {
                if entry.watchdog_holds > 0 {
                    snapshot.push(Renewal {
                        hold: hold.clone(),
                        id: entry.id,
                        slot,
                    });
                }
            }
        }
        snapshot
    }

    /// Applies one batch's replies: confirms the renewed entries (as of `sent_at`) and loses
    /// the others. One lock for the batch, one slot access per entry.
    fn settle(&self, batch: &[Renewal], renewed: Vec<bool>, sent_at: Instant) {
        let mut entries = self.entries.lock();
        for (renewal, ok) in batch.iter().zip(renewed) {
            if ok {
                if let Some(entry) = entries.slot_mut(renewal.slot, renewal.id) {
                    if entry.last_confirmed < sent_at {
                        entry.last_confirmed = sent_at;
                    }
                }
            } else if let Some(entry) = entries.remove_slot(&renewal.hold, renewal.slot, renewal.id)
            {
                tracing::warn!(key = %renewal.hold.key, "lock lost: renewal found it gone");
                entry.lost.fire(LostReason::Gone);
            }
        }
    }

    /// Loses every entry in `batch` whose last confirmation is a whole lease old.
    fn expire_unconfirmed(&self, batch: &[Renewal], lease: Duration, now: Instant) {
        let mut entries = self.entries.lock();
        for renewal in batch {
            let stale = entries
                .slot_mut(renewal.slot, renewal.id)
                .is_some_and(|e| e.watchdog_holds > 0 && now >= e.last_confirmed + lease);
            if stale {
                if let Some(entry) = entries.remove(&renewal.hold) {
                    tracing::warn!(key = %renewal.hold.key, "lock lost: no renewal confirmed for a whole lease");
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
            .index
            .iter()
            .filter(|(_, &slot)| {
                entries.slots[slot].as_ref().is_some_and(|e| {
                    e.watchdog_holds == 0 && e.lease_deadline.is_some_and(|d| d <= now)
                })
            })
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

    /// One renewal cycle over every entry with watchdog holds: batches of `batch_size` keys,
    /// up to [`BATCHES_IN_FLIGHT`] of them sent before the first reply is read.
    async fn renew_all(&self) {
        let snapshot = self.holds.renewal_snapshot();
        let lease_ms = Lease::Watchdog.millis(self.lease);
        let batches: Vec<&[Renewal]> = snapshot.chunks(self.batch_size.max(1)).collect();
        let mut next = 0;
        let mut in_flight: Vec<InFlightBatch> = Vec::with_capacity(BATCHES_IN_FLIGHT);
        let mut broken = false;
        loop {
            while !broken && next < batches.len() && in_flight.len() < BATCHES_IN_FLIGHT {
                let sent_at = Instant::now();
                let call = self.protocol.renew(
                    lease_ms,
                    batches[next].iter().map(|r| (&*r.hold.key, &*r.hold.field)),
                );
                in_flight.push((next, sent_at, Box::pin(call)));
                next += 1;
            }
            if in_flight.is_empty() {
                break;
            }
            let (index, sent_at, result) = next_reply(&mut in_flight).await;
            match result {
                Ok(renewed) => self.holds.settle(batches[index], renewed, sent_at),
                Err(err) => {
                    tracing::warn!(error = %err, "lock renewal failed; retrying next cycle");
                    let now = Instant::now();
                    self.holds
                        .expire_unconfirmed(batches[index], self.lease, now);
                    if crate::error::is_connection_error(&err) {
                        // The rest would fail the same way: send no more, check their age.
                        broken = true;
                    }
                }
            }
        }
        if broken {
            let now = Instant::now();
            for rest in &batches[next..] {
                self.holds.expire_unconfirmed(rest, self.lease, now);
            }
        }
    }
}

/// Renewal batches sent before the first reply is read. Redis runs scripts one at a time, so
/// more would only queue there (delaying the client's other commands on the shared
/// connection); a few hide the round trip.
const BATCHES_IN_FLIGHT: usize = 4;

type RenewCall = Pin<Box<dyn Future<Output = redis::RedisResult<Vec<bool>>> + Send>>;
/// A batch in flight: its index in the cycle, when it was sent, and the call.
type InFlightBatch = (usize, Instant, RenewCall);

/// Waits for a batch in flight to answer, and takes it out.
async fn next_reply(
    in_flight: &mut Vec<InFlightBatch>,
) -> (usize, Instant, redis::RedisResult<Vec<bool>>) {
    std::future::poll_fn(|cx| {
        for i in 0..in_flight.len() {
            if let Poll::Ready(result) = in_flight[i].2.as_mut().poll(cx) {
                let (index, sent_at, _) = in_flight.swap_remove(i);
                return Poll::Ready((index, sent_at, result));
            }
        }
        Poll::Pending
    })
    .await
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
