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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

mod signal;

pub use signal::LostReason;
pub(crate) use signal::LostSignal;
use signal::{clock_base, Stamp};

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
mod tests;
