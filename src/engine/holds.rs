//! What this client holds: the in-process registry of held locks and their lock-lost signals.
//!
//! One entry per `(key, owner field)` with the number of live guards, split into watchdog
//! holds (no lease given: renewed by [`crate::engine::watchdog`]) and lease holds (a fixed lease: never
//! renewed, lost when it runs out). Each entry carries the **lock-lost signal** its guards
//! share. Unlock, guard drop and shutdown remove entries at once, before anything is sent to
//! Redis, so no renewal outlives its hold, and an entry present here means its owner has not
//! yet sent the unlock that frees the lock.
//!
//! Entries live in a slab (a `Vec` of cells). An index maps each lock key to the cell of its
//! first entry; the entries of other owners of the same key (rare) chain from there. A guard
//! and a renewal snapshot remember their entry's cell, so surrendering a hold or confirming
//! 100k renewals costs a cell access each, not a hash lookup of two strings.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// The lock-lost signal shared by the guards of one entry: why it fired, a cancellation token
/// made only when a guard asks for one (most holds never do, and a token costs more memory
/// than the rest of the entry), and the **lease clock**: the instant the hold's lease runs out
/// unless a renewal is confirmed first. Past it the hold is lost whatever Redis says later, so
/// a guard can tell from the clock alone, at once, even if nothing has run since (a frozen
/// process, a starved runtime).
#[derive(Debug, Clone, Default)]
pub(crate) struct LostSignal(Arc<LostInner>);

#[derive(Debug, Default)]
struct LostInner {
    state: Mutex<LostState>,
    /// The lease clock: nanoseconds after [`clock_base`] (0 = not set), and the reason it
    /// gives when it runs out (`CLOCK_*`).
    deadline: AtomicU64,
    clock_reason: AtomicU8,
}

const CLOCK_UNCONFIRMED: u8 = 0;
const CLOCK_LEASE: u8 = 1;

/// An instant in 8 bytes (nanoseconds after [`clock_base`], never 0, so an `Option` of it is 8
/// bytes too): the registry keeps two per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp(std::num::NonZeroU64);

impl From<Instant> for Stamp {
    fn from(at: Instant) -> Stamp {
        let nanos = at.saturating_duration_since(clock_base()).as_nanos();
        Stamp(std::num::NonZeroU64::new(nanos.clamp(1, u64::MAX as u128) as u64).expect("clamped"))
    }
}

impl Stamp {
    fn get(self) -> Instant {
        clock_base() + Duration::from_nanos(self.0.get())
    }
}

/// The instant lease clocks count from (taken on first use).
fn clock_base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

#[derive(Debug, Default)]
struct LostState {
    reason: Option<LostReason>,
    token: Option<CancellationToken>,
}

impl LostSignal {
    /// Sets the lease clock: the hold is lost at `deadline` for `reason` unless set again.
    fn set_clock(&self, deadline: Instant, reason: LostReason) {
        let nanos = deadline
            .saturating_duration_since(clock_base())
            .as_nanos()
            .clamp(1, u64::MAX as u128) as u64;
        let code = if reason == LostReason::LeaseExpired {
            CLOCK_LEASE
        } else {
            CLOCK_UNCONFIRMED
        };
        self.0.clock_reason.store(code, Ordering::Relaxed);
        self.0.deadline.store(nanos, Ordering::Release);
    }

    /// When the lease clock runs out (`None` if it was never set).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.0.deadline.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(clock_base() + Duration::from_nanos(nanos)),
        }
    }

    /// Fires the signal if the lease clock has run out at `now`; returns whether it has fired.
    pub(crate) fn check_clock(&self, now: Instant) -> bool {
        if self.is_fired() {
            return true;
        }
        match self.clock_ran_out(now) {
            Some(reason) => {
                self.fire(reason);
                true
            }
            None => false,
        }
    }

    /// Why the lease clock has run out at `now`, if it has (fires nothing).
    fn clock_ran_out(&self, now: Instant) -> Option<LostReason> {
        let deadline = self.deadline()?;
        (now >= deadline).then(|| match self.0.clock_reason.load(Ordering::Relaxed) {
            CLOCK_LEASE => LostReason::LeaseExpired,
            _ => LostReason::Unconfirmed,
        })
    }

    /// Fires the signal; the first reason given sticks.
    pub(crate) fn fire(&self, reason: LostReason) {
        let token = {
            let mut state = self.0.state.lock();
            if state.reason.is_some() {
                return;
            }
            state.reason = Some(reason);
            state.token.clone()
        };
        if let Some(token) = token {
            token.cancel();
        }
    }

    pub(crate) fn is_fired(&self) -> bool {
        self.0.state.lock().reason.is_some()
    }

    pub(crate) fn reason(&self) -> Option<LostReason> {
        self.0.state.lock().reason
    }

    /// The signal's token (made on first use), cancelled once the signal fires.
    pub(crate) fn token(&self) -> CancellationToken {
        let mut state = self.0.state.lock();
        let token = state
            .token
            .get_or_insert_with(CancellationToken::new)
            .clone();
        if state.reason.is_some() {
            token.cancel();
        }
        token
    }
}

/// One held lock: a key, the owner field holding it, and how.
struct Entry {
    key: Arc<str>,
    field: Arc<str>,
    /// The next entry of the same key (another owner of this client).
    next: Option<u32>,
    /// Distinguishes this entry from a later one in the same cell.
    id: u64,
    watchdog_holds: u32,
    lease_holds: u32,
    /// When the last fixed lease runs out (only consulted without watchdog holds).
    lease_deadline: Option<Stamp>,
    /// When the TTL was last set to a full watchdog lease (request send time).
    last_confirmed: Stamp,
    lost: LostSignal,
}

impl Entry {
    fn holds(&self) -> u32 {
        self.watchdog_holds + self.lease_holds
    }

    /// Sets the lease clock from what is known now: a watchdog hold lives a lease past its
    /// last confirmed renewal, a fixed lease until its deadline (the later of the two counts
    /// when both kinds are held).
    fn update_clock(&self, watchdog_lease: Duration) {
        let renewed = (self.watchdog_holds > 0).then(|| self.last_confirmed.get() + watchdog_lease);
        let fixed = self
            .lease_deadline
            .map(Stamp::get)
            .filter(|_| self.lease_holds > 0);
        match (renewed, fixed) {
            (Some(r), Some(f)) if f > r => self.lost.set_clock(f, LostReason::LeaseExpired),
            (Some(r), _) => self.lost.set_clock(r, LostReason::Unconfirmed),
            (None, Some(f)) => self.lost.set_clock(f, LostReason::LeaseExpired),
            (None, None) => {}
        }
    }
}

/// A guard's claim on an entry.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    cell: usize,
    entry_id: u64,
    pub(crate) lost: LostSignal,
}

/// What became of a hold when its guard gave it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Surrender {
    /// The hold was live: the caller must now release it in Redis. `last`: it was the
    /// owner's last hold, so the unlock frees the lock.
    Live { last: bool },
    /// The lock had already been lost. With the entry this surrender found lost (by the lease
    /// clock, so it may still be in Redis: see [`LostHold::may_remain`]).
    Lost(Option<LostHold>),
}

/// An entry taken out of the registry because its lock was lost; its signal has fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LostHold {
    pub(crate) key: Arc<str>,
    pub(crate) field: Arc<str>,
    /// How many holds the owner had (Redis counts them in the field).
    pub(crate) holds: u32,
    pub(crate) reason: LostReason,
}

impl LostHold {
    fn of(entry: Entry, reason: LostReason) -> (LostHold, LostSignal) {
        let lost = LostHold {
            holds: entry.holds(),
            key: entry.key,
            field: entry.field,
            reason,
        };
        (lost, entry.lost)
    }

    /// Lost by the lease clock rather than by Redis's answer: the hold may still be there.
    pub(crate) fn may_remain(&self) -> bool {
        matches!(
            self.reason,
            LostReason::Unconfirmed | LostReason::LeaseExpired
        )
    }
}

/// Fires the signals of entries just taken out and logs them, after the registry lock is
/// released (a mass loss must not hold up every acquire behind it).
fn announce(lost: Vec<(LostHold, LostSignal)>) -> Vec<LostHold> {
    lost.into_iter()
        .map(|(hold, signal)| {
            signal.fire(hold.reason);
            tracing::warn!(key = %hold.key, owner = %hold.field, reason = %hold.reason, "lock lost");
            hold
        })
        .collect()
}

/// The entries: a slab of cells, and an index from lock key to the first cell of its chain.
#[derive(Default)]
struct Slab {
    index: HashMap<Arc<str>, usize>,
    cells: Vec<Option<Entry>>,
    free: Vec<usize>,
    len: usize,
    /// Entries with watchdog holds (kept as they change, so counting them scans nothing).
    renewed: usize,
}

impl Slab {
    /// The entries of `key`, one per owner of this client holding it.
    fn chain<'a>(&'a self, key: &str) -> impl Iterator<Item = (usize, &'a Entry)> + 'a {
        let mut next = self.index.get(key).copied();
        std::iter::from_fn(move || {
            let cell = next?;
            let entry = self.cells[cell]
                .as_ref()
                .expect("a chained cell is occupied");
            next = entry.next.map(|n| n as usize);
            Some((cell, entry))
        })
    }

    fn find(&self, key: &str, field: &str) -> Option<usize> {
        self.chain(key)
            .find(|(_, e)| *e.field == *field)
            .map(|(cell, _)| cell)
    }

    /// The entry in `cell` if it is still entry `id` (cells are reused, ids never are).
    fn cell_mut(&mut self, cell: usize, id: u64) -> Option<&mut Entry> {
        self.cells
            .get_mut(cell)?
            .as_mut()
            .filter(|entry| entry.id == id)
    }

    fn insert(&mut self, mut entry: Entry) -> usize {
        let cell = self.free.pop().unwrap_or_else(|| {
            self.cells.push(None);
            self.cells.len() - 1
        });
        assert!(cell < u32::MAX as usize, "fewer than 4 billion held locks");
        entry.next = self.index.insert(entry.key.clone(), cell).map(|c| c as u32);
        self.cells[cell] = Some(entry);
        self.len += 1;
        cell
    }

    /// Takes the entry in `cell` out of the table, if it is still entry `id`.
    fn remove(&mut self, cell: usize, id: u64) -> Option<Entry> {
        self.cell_mut(cell, id)?;
        let entry = self.cells[cell].take().expect("checked above");
        let head = self.index.get(&*entry.key).copied();
        if head == Some(cell) {
            match entry.next {
                Some(next) => *self.index.get_mut(&*entry.key).expect("indexed") = next as usize,
                None => {
                    self.index.remove(&*entry.key);
                }
            }
        } else {
            let mut at = head.expect("an entry's key is indexed");
            loop {
                let prev = self.cells[at].as_mut().expect("a chained cell is occupied");
                if prev.next == Some(cell as u32) {
                    prev.next = entry.next;
                    break;
                }
                at = prev.next.expect("an entry is on its key's chain") as usize;
            }
        }
        self.len -= 1;
        if entry.watchdog_holds > 0 {
            self.renewed -= 1;
        }
        if self.len == 0 {
            // Nothing held any more: give the memory back.
            *self = Slab::default();
        } else {
            self.free.push(cell);
        }
        Some(entry)
    }

    fn values(&self) -> impl Iterator<Item = &Entry> {
        self.cells.iter().flatten()
    }

    fn occupied(&self) -> impl Iterator<Item = (usize, &Entry)> {
        self.cells
            .iter()
            .enumerate()
            .filter_map(|(cell, e)| e.as_ref().map(|e| (cell, e)))
    }

    fn drain(&mut self) -> Vec<Entry> {
        std::mem::take(self).cells.into_iter().flatten().collect()
    }
}

/// One entry of a renewal snapshot: what to send, and where to confirm it.
pub(crate) struct Renewal {
    pub(crate) key: Arc<str>,
    pub(crate) field: Arc<str>,
    id: u64,
    cell: usize,
}

/// The registry of held locks.
pub(crate) struct Holds {
    entries: Mutex<Slab>,
    next_id: AtomicU64,
    /// The watchdog lease: how long a watchdog hold lives past its last confirmed renewal.
    watchdog_lease: Duration,
    /// Signalled when a lease deadline may have moved earlier.
    pub(crate) changed: Notify,
}

impl Default for Holds {
    fn default() -> Self {
        Holds::new(Duration::from_secs(30))
    }
}

impl Holds {
    pub(crate) fn new(watchdog_lease: Duration) -> Self {
        // Before any acquire is sent: a stamp cannot be earlier than the base.
        clock_base();
        Holds {
            entries: Mutex::default(),
            next_id: AtomicU64::new(0),
            watchdog_lease,
            changed: Notify::new(),
        }
    }

    /// Records one more hold of `key` by `field`, acquired with `lease` by a request sent at
    /// `sent_at`.
    pub(crate) fn register(
        &self,
        key: &Arc<str>,
        field: &Arc<str>,
        lease: Lease,
        sent_at: Instant,
    ) -> Ticket {
        let mut entries = self.entries.lock();
        let cell = match entries.find(key, field) {
            Some(cell) => cell,
            None => entries.insert(Entry {
                key: key.clone(),
                field: field.clone(),
                next: None,
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                watchdog_holds: 0,
                lease_holds: 0,
                lease_deadline: None,
                last_confirmed: sent_at.into(),
                lost: LostSignal::default(),
            }),
        };
        let slab = &mut *entries;
        let entry = slab.cells[cell].as_mut().expect("just found or made");
        match lease {
            Lease::Watchdog => {
                if entry.watchdog_holds == 0 {
                    slab.renewed += 1;
                }
                entry.watchdog_holds += 1;
                entry.last_confirmed = sent_at.into();
            }
            Lease::Fixed(d) => {
                entry.lease_holds += 1;
                // Every acquire resets the TTL to its own lease.
                entry.lease_deadline = Some((sent_at + d).into());
                self.changed.notify_one();
            }
        }
        entry.update_clock(self.watchdog_lease);
        Ticket {
            cell,
            entry_id: entry.id,
            lost: entry.lost.clone(),
        }
    }

    /// Gives up one hold. Renewal of the entry stops at once when it was the last.
    pub(crate) fn surrender(&self, ticket: &Ticket, lease: Lease) -> Surrender {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.cell_mut(ticket.cell, ticket.entry_id) else {
            return Surrender::Lost(None);
        };
        let lost = entry.lost.reason();
        if let Some(reason) = lost.or_else(|| entry.lost.clock_ran_out(Instant::now())) {
            let entry = entries
                .remove(ticket.cell, ticket.entry_id)
                .expect("found above");
            drop(entries);
            return Surrender::Lost(announce(vec![LostHold::of(entry, reason)]).pop());
        }
        let stops_renewal = matches!(lease, Lease::Watchdog) && entry.watchdog_holds == 1;
        match lease {
            Lease::Watchdog => entry.watchdog_holds = entry.watchdog_holds.saturating_sub(1),
            Lease::Fixed(_) => entry.lease_holds = entry.lease_holds.saturating_sub(1),
        }
        let last = entry.holds() == 0;
        if !last {
            entry.update_clock(self.watchdog_lease);
        }
        if stops_renewal {
            entries.renewed -= 1;
        }
        if last {
            entries.remove(ticket.cell, ticket.entry_id);
        }
        Surrender::Live { last }
    }

    /// Forgets the entry of `ticket` if its signal has fired (the lease clock ran out before
    /// the watchdog noticed): renewal of a hold declared lost stops at once. Returns the entry
    /// taken out, for its release.
    pub(crate) fn forget_lost(&self, ticket: &Ticket) -> Option<LostHold> {
        let mut entries = self.entries.lock();
        let entry = entries.cell_mut(ticket.cell, ticket.entry_id)?;
        let reason = entry.lost.reason()?;
        let entry = entries.remove(ticket.cell, ticket.entry_id)?;
        drop(entries);
        // (Fired already: announcing again only logs.)
        announce(vec![LostHold::of(entry, reason)]).pop()
    }

    /// A partial unlock reset the key's TTL to a fixed lease at `sent_at`.
    pub(crate) fn lease_reset(&self, ticket: &Ticket, lease: Lease, sent_at: Instant) {
        if let Lease::Fixed(d) = lease {
            if let Some(entry) = self.entries.lock().cell_mut(ticket.cell, ticket.entry_id) {
                entry.lease_deadline = Some((sent_at + d).into());
                entry.update_clock(self.watchdog_lease);
            }
        }
    }

    /// Whether an owner of this client other than `field` holds `key`. Such a holder has not
    /// sent its unlock yet, so its unlock message is still to come.
    pub(crate) fn held_by_other(&self, key: &str, field: &str) -> bool {
        self.entries
            .lock()
            .chain(key)
            .any(|(_, e)| *e.field != *field)
    }

    /// Declares an entry lost: fires its signal and forgets it. (The watchdog loses entries
    /// through `apply_renewals` and the `expire_*` methods; this is for the unit tests.)
    #[cfg(test)]
    pub(crate) fn lose(&self, ticket: &Ticket, reason: LostReason) {
        if let Some(entry) = self.entries.lock().remove(ticket.cell, ticket.entry_id) {
            entry.lost.fire(reason);
        }
    }

    /// Removes every entry (shutdown), firing their signals; returns what was held and how
    /// often, as `(key, field, holds)`.
    pub(crate) fn drain(&self) -> Vec<(Arc<str>, Arc<str>, u32)> {
        let drained = self.entries.lock().drain();
        drained
            .into_iter()
            .map(|entry| {
                entry.lost.fire(LostReason::Shutdown);
                let holds = entry.holds();
                (entry.key, entry.field, holds)
            })
            .collect()
    }

    /// Number of entries (locks held by this client).
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len
    }

    /// Number of entries the watchdog renews.
    pub(crate) fn renewed_len(&self) -> usize {
        self.entries.lock().renewed
    }

    /// Every entry with watchdog holds, as it stands.
    pub(crate) fn renewal_snapshot(&self) -> Vec<Renewal> {
        let entries = self.entries.lock();
        let mut snapshot = Vec::with_capacity(entries.len);
        for (cell, entry) in entries.occupied() {
            // (A hold its guard found lost by the clock is never renewed again.)
            if entry.watchdog_holds > 0 && !entry.lost.is_fired() {
                snapshot.push(Renewal {
                    key: entry.key.clone(),
                    field: entry.field.clone(),
                    id: entry.id,
                    cell,
                });
            }
        }
        snapshot
    }

    /// Applies one batch's replies: confirms the renewed entries (as of `sent_at`) and loses
    /// the others. One lock for the batch, one cell access per entry. Returns the holds lost.
    pub(crate) fn apply_renewals(
        &self,
        batch: &[Renewal],
        renewed: Vec<bool>,
        sent_at: Instant,
    ) -> Vec<LostHold> {
        let mut lost = Vec::new();
        let mut entries = self.entries.lock();
        for (renewal, ok) in batch.iter().zip(renewed) {
            if ok {
                if let Some(entry) = entries.cell_mut(renewal.cell, renewal.id) {
                    if entry.last_confirmed.get() < sent_at {
                        entry.last_confirmed = sent_at.into();
                        entry.update_clock(self.watchdog_lease);
                    }
                }
            } else if let Some(entry) = entries.remove(renewal.cell, renewal.id) {
                lost.push(LostHold::of(entry, LostReason::Gone));
            }
        }
        drop(entries);
        announce(lost)
    }

    /// Loses every entry in `batch` whose last confirmation is a whole lease old. Returns the
    /// holds lost.
    pub(crate) fn expire_unconfirmed(
        &self,
        batch: &[Renewal],
        lease: Duration,
        now: Instant,
    ) -> Vec<LostHold> {
        let mut lost = Vec::new();
        let mut entries = self.entries.lock();
        for renewal in batch {
            let stale = entries
                .cell_mut(renewal.cell, renewal.id)
                .is_some_and(|e| e.watchdog_holds > 0 && now >= e.last_confirmed.get() + lease);
            if stale {
                if let Some(entry) = entries.remove(renewal.cell, renewal.id) {
                    lost.push(LostHold::of(entry, LostReason::Unconfirmed));
                }
            }
        }
        drop(entries);
        announce(lost)
    }

    /// When the first lease-only entry's lease runs out.
    pub(crate) fn next_lease_deadline(&self) -> Option<Instant> {
        self.entries
            .lock()
            .values()
            .filter(|e| e.watchdog_holds == 0)
            .filter_map(|e| e.lease_deadline.map(Stamp::get))
            .min()
    }

    /// Loses every lease-only entry whose lease has run out. Returns the holds lost.
    pub(crate) fn expire_leases(&self, now: Instant) -> Vec<LostHold> {
        let mut entries = self.entries.lock();
        let expired: Vec<(usize, u64)> = entries
            .occupied()
            .filter(|(_, e)| {
                e.watchdog_holds == 0 && e.lease_deadline.is_some_and(|d| d.get() <= now)
            })
            .map(|(cell, e)| (cell, e.id))
            .collect();
        let lost = expired
            .into_iter()
            .filter_map(|(cell, id)| entries.remove(cell, id))
            .map(|entry| LostHold::of(entry, LostReason::LeaseExpired))
            .collect();
        drop(entries);
        announce(lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(holds: &Holds, key: &str, field: &str, lease: Lease, at: Instant) -> Ticket {
        holds.register(&key.into(), &field.into(), lease, at)
    }

    #[test]
    fn reentrant_holds_share_one_entry_and_signal() {
        let holds = Holds::default();
        let now = Instant::now();
        let a = register(&holds, "k", "u:1", Lease::Watchdog, now);
        let b = register(&holds, "k", "u:1", Lease::Watchdog, now);
        assert_eq!((a.cell, a.entry_id), (b.cell, b.entry_id));
        assert_eq!(holds.len(), 1);
        assert_eq!(
            holds.surrender(&a, Lease::Watchdog),
            Surrender::Live { last: false }
        );
        assert_eq!(holds.renewed_len(), 1, "one hold left: still renewed");
        assert_eq!(
            holds.surrender(&b, Lease::Watchdog),
            Surrender::Live { last: true }
        );
        assert_eq!(holds.len(), 0, "last hold gone: renewal stops");
    }

    #[test]
    fn a_lost_entry_is_not_confused_with_a_later_one() {
        let holds = Holds::default();
        let now = Instant::now();
        let old = register(&holds, "k", "u:1", Lease::Watchdog, now);
        holds.lose(&old, LostReason::Gone);
        assert_eq!(old.lost.reason(), Some(LostReason::Gone));
        let new = register(&holds, "k", "u:1", Lease::Watchdog, now);
        assert_eq!(old.cell, new.cell, "the cell is reused");
        assert_ne!(old.entry_id, new.entry_id);
        // The stale guard neither releases nor disturbs the new entry.
        assert_eq!(
            holds.surrender(&old, Lease::Watchdog),
            Surrender::Lost(None)
        );
        holds.lose(&old, LostReason::Gone);
        assert!(!new.lost.is_fired());
        assert_eq!(holds.len(), 1);
    }

    #[test]
    fn owners_of_one_key_chain_and_unlink_in_any_order() {
        let holds = Holds::default();
        let now = Instant::now();
        let a = register(&holds, "k", "u:1", Lease::Watchdog, now);
        let b = register(&holds, "k", "u:2", Lease::Watchdog, now);
        let c = register(&holds, "k", "u:3", Lease::Watchdog, now);
        let other = register(&holds, "j", "u:1", Lease::Watchdog, now);
        assert_eq!(holds.len(), 4);
        assert!(holds.held_by_other("k", "u:1"));
        assert!(!holds.held_by_other("j", "u:1"), "only its own hold");
        assert!(!holds.held_by_other("free", "u:1"));
        // Middle, head, then last of the chain.
        assert_eq!(
            holds.surrender(&b, Lease::Watchdog),
            Surrender::Live { last: true }
        );
        assert_eq!(
            holds.surrender(&c, Lease::Watchdog),
            Surrender::Live { last: true }
        );
        assert!(!holds.held_by_other("k", "u:1"));
        assert!(holds.held_by_other("k", "u:2"));
        assert_eq!(
            holds.surrender(&a, Lease::Watchdog),
            Surrender::Live { last: true }
        );
        assert!(!holds.held_by_other("k", "u:2"));
        assert_eq!(holds.len(), 1);
        assert_eq!(
            holds.surrender(&other, Lease::Watchdog),
            Surrender::Live { last: true }
        );
        assert_eq!(holds.len(), 0);
    }

    #[test]
    fn unconfirmed_for_a_whole_lease_is_lost() {
        let holds = Holds::default();
        let t0 = Instant::now();
        let t = register(&holds, "k", "u:1", Lease::Watchdog, t0);
        let batch = holds.renewal_snapshot();
        let lease = Duration::from_secs(30);
        assert!(holds
            .expire_unconfirmed(&batch, lease, t0 + Duration::from_secs(29))
            .is_empty());
        assert!(!t.lost.is_fired());
        let lost = holds.expire_unconfirmed(&batch, lease, t0 + lease);
        assert_eq!(lost.len(), 1);
        assert_eq!(
            (&*lost[0].key, lost[0].reason),
            ("k", LostReason::Unconfirmed)
        );
        assert!(lost[0].may_remain(), "lost by the clock: it is released");
        assert_eq!(t.lost.reason(), Some(LostReason::Unconfirmed));
    }

    #[test]
    fn the_renewed_count_follows_watchdog_holds_without_a_scan() {
        let holds = Holds::default();
        let now = Instant::now();
        let w = register(&holds, "k", "u:1", Lease::Watchdog, now);
        let f = register(
            &holds,
            "k",
            "u:1",
            Lease::Fixed(Duration::from_secs(5)),
            now,
        );
        let other = register(&holds, "j", "u:1", Lease::Watchdog, now);
        assert_eq!(holds.renewed_len(), 2);
        holds.surrender(&w, Lease::Watchdog);
        assert_eq!(holds.renewed_len(), 1, "k has only a fixed lease left");
        assert_eq!(holds.len(), 2);
        holds.lose(&other, LostReason::Gone);
        assert_eq!(holds.renewed_len(), 0);
        holds.surrender(&f, Lease::Fixed(Duration::from_secs(5)));
        assert_eq!((holds.len(), holds.renewed_len()), (0, 0));
        let again = register(&holds, "k", "u:2", Lease::Watchdog, now);
        assert_eq!(holds.renewed_len(), 1);
        holds.lose(&again, LostReason::Gone);
        assert_eq!(holds.renewed_len(), 0);
    }

    #[test]
    fn fixed_leases_expire_and_are_never_renewed() {
        let holds = Holds::default();
        let t0 = Instant::now();
        let t = register(&holds, "k", "u:1", Lease::Fixed(Duration::from_secs(5)), t0);
        assert_eq!(holds.renewed_len(), 0);
        assert_eq!(
            holds.next_lease_deadline(),
            Some(t0 + Duration::from_secs(5))
        );
        assert!(holds.expire_leases(t0 + Duration::from_secs(4)).is_empty());
        assert!(!t.lost.is_fired());
        assert_eq!(holds.expire_leases(t0 + Duration::from_secs(5)).len(), 1);
        assert_eq!(t.lost.reason(), Some(LostReason::LeaseExpired));
    }

    #[test]
    fn the_lease_clock_loses_a_hold_a_lease_after_its_last_confirmation() {
        let holds = Holds::new(Duration::from_secs(30));
        let t0 = Instant::now();
        let watchdog = register(&holds, "k", "u:1", Lease::Watchdog, t0);
        assert!(!watchdog.lost.check_clock(t0 + Duration::from_secs(29)));
        let batch = holds.renewal_snapshot();
        holds.apply_renewals(&batch, vec![true], t0 + Duration::from_secs(10));
        assert!(
            !watchdog.lost.check_clock(t0 + Duration::from_secs(39)),
            "a confirmed renewal moves the clock"
        );
        assert!(watchdog.lost.check_clock(t0 + Duration::from_secs(40)));
        assert_eq!(watchdog.lost.reason(), Some(LostReason::Unconfirmed));
        // Lost by the clock, it may still be in Redis: the entry goes, to be released.
        let Surrender::Lost(Some(lost)) = holds.surrender(&watchdog, Lease::Watchdog) else {
            panic!("the clock says lost");
        };
        assert_eq!((&*lost.field, lost.holds), ("u:1", 1));
        assert!(lost.may_remain());
        assert_eq!(
            holds.len(),
            0,
            "forgotten: a new acquire makes a fresh entry"
        );

        let fixed = register(&holds, "j", "u:1", Lease::Fixed(Duration::from_secs(5)), t0);
        assert!(!fixed.lost.check_clock(t0 + Duration::from_millis(4999)));
        assert!(fixed.lost.check_clock(t0 + Duration::from_secs(5)));
        assert_eq!(fixed.lost.reason(), Some(LostReason::LeaseExpired));
    }

    #[test]
    fn a_token_asked_for_after_the_signal_fired_is_already_cancelled() {
        let signal = LostSignal::default();
        let before = signal.token();
        assert!(!before.is_cancelled());
        signal.fire(LostReason::Gone);
        signal.fire(LostReason::Shutdown);
        assert!(before.is_cancelled());
        assert!(signal.token().is_cancelled());
        assert_eq!(
            signal.reason(),
            Some(LostReason::Gone),
            "the first reason sticks"
        );
        let late = LostSignal::default();
        late.fire(LostReason::LeaseExpired);
        assert!(late.token().is_cancelled(), "made after firing");
    }
}
