//! One entry of the registry: one held lock of one owner (its kind, key and owner, how it is
//! held, its lease clock and lost signal), shared by the registry and its guards.

use crate::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU8, Ordering::Relaxed, Ordering::SeqCst,
};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::signal::{clock_base, AtomicStamp, LostReason, LostSignal};
use crate::owner::Owner;
use crate::raw::Kind;

/// One held lock: its kind, key and owner, how it is held, and its lost signal.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The kind holding it: what renews and releases it.
    pub(crate) raw: &'static Kind,
    pub(crate) key: Arc<str>,
    /// Where the lock's name (as its user gave it) starts in `key`, after the client's
    /// prefix: kept from the lock, not found again by stripping (an offset keeps the entry
    /// inside its 128-byte allocation; see the registry's size test). A prefix longer than
    /// 64 KiB leaves it at 0: the name is then shown with the prefix.
    pub(super) name_at: u16,
    pub(crate) owner: Owner,
    // Written only under the registry lock; atomics so that guards can share the node.
    pub(super) watchdog_holds: AtomicU32,
    pub(super) lease_holds: AtomicU32,
    /// When the last fixed lease runs out (only consulted without watchdog holds).
    pub(super) lease_deadline: AtomicStamp,
    /// When the TTL was last set to a full watchdog lease (request send time).
    pub(super) last_confirmed: AtomicStamp,
    /// When the entry's first hold was asked for, in ms after the clock base, wrapping (for
    /// how long locks are held: right for holds shorter than 49 days; 4 bytes, so that the
    /// entry stays inside its 128-byte allocation).
    pub(super) since_ms: u32,
    /// What the hold took ([`AcquireArgs::permits`](crate::raw::AcquireArgs)): 1 for a
    /// lock, and what its release gives back for a semaphore (whose every acquire is an owner
    /// of its own).
    pub(crate) permits: u32,
    /// In the registry (taken out once, never put back: a new hold makes a new node).
    pub(super) registered: AtomicBool,
    /// [`WARNED`] (reported as held longer than the hold warning, once per entry),
    /// [`WATCHED`] (handed to the loss watch) and [`LISTENED`] (the loss watch listens for
    /// it: given up, it is to be unwatched).
    pub(super) flags: AtomicU8,
    pub(crate) lost: LostSignal,
}

/// Where `name` starts in `key` (the key is the client's prefix and the name).
pub(super) fn name_offset(key: &str, name: &str) -> u16 {
    debug_assert!(key.ends_with(name));
    u16::try_from(key.len() - name.len()).unwrap_or(0)
}

/// `at` in ms after the clock base, wrapping at `u32`.
pub(super) fn stamp_ms(at: Instant) -> u32 {
    at.saturating_duration_since(clock_base()).as_millis() as u32
}

pub(super) const WARNED: u8 = 1;
pub(super) const WATCHED: u8 = 2;
pub(super) const LISTENED: u8 = 4;

/// A guard's claim on its entry: the entry itself.
pub(crate) type Ticket = Arc<Entry>;

impl Entry {
    /// Marks the entry watched; `true` if it was not yet (its first hold: start the watcher).
    pub(crate) fn start_watching(&self) -> bool {
        self.flags.fetch_or(WATCHED, Relaxed) & WATCHED == 0
    }

    /// Marks the entry listened for by the loss watch, and says whether it is still held.
    /// (With [`Entry::is_listened`] after the entry left the registry: the fences make sure
    /// that at least one of the two sides sees the other, so that one of them unwatches it.)
    pub(crate) fn set_listened(&self) -> bool {
        self.flags.fetch_or(LISTENED, Relaxed);
        fence(SeqCst);
        self.is_held()
    }

    /// Whether the loss watch listens for the entry (short holds never are); asked once the
    /// entry left the registry.
    pub(crate) fn is_listened(&self) -> bool {
        fence(SeqCst);
        self.flags.load(Relaxed) & LISTENED != 0
    }

    /// Whether the entry is still in the registry (its holds not all given up or lost).
    pub(crate) fn is_held(&self) -> bool {
        self.is_registered() && !self.lost.is_fired()
    }

    /// How long since the entry's first hold was asked for.
    pub(crate) fn held_for(&self) -> Duration {
        let now = stamp_ms(Instant::now());
        Duration::from_millis(u64::from(now.wrapping_sub(self.since_ms)))
    }

    /// The lock's name.
    pub(crate) fn name(&self) -> &str {
        &self.key[self.name_at as usize..]
    }

    /// The lock's name, shared (the key itself when the client has no prefix).
    pub(crate) fn name_arc(&self) -> Arc<str> {
        match self.name_at {
            0 => self.key.clone(),
            _ => self.name().into(),
        }
    }

    pub(super) fn watchdog(&self) -> u32 {
        self.watchdog_holds.load(Relaxed)
    }

    pub(super) fn holds(&self) -> u32 {
        self.watchdog() + self.lease_holds.load(Relaxed)
    }

    pub(super) fn is_registered(&self) -> bool {
        self.registered.load(Relaxed)
    }

    /// Sets the lease clock from what is known now: a watchdog hold lives a lease past its
    /// last confirmed renewal, a fixed lease until its deadline (the later of the two counts
    /// when both kinds are held).
    pub(super) fn update_clock(&self, watchdog_lease: Duration) {
        let renewed = (self.watchdog() > 0)
            .then(|| self.last_confirmed.get())
            .flatten()
            .map(|at| at + watchdog_lease);
        let fixed = self
            .lease_deadline
            .get()
            .filter(|_| self.lease_holds.load(Relaxed) > 0);
        match (renewed, fixed) {
            (Some(r), Some(f)) if f > r => self.lost.set_clock(f, LostReason::LeaseExpired),
            (Some(r), _) => self.lost.set_clock(r, LostReason::Unconfirmed),
            (None, Some(f)) => self.lost.set_clock(f, LostReason::LeaseExpired),
            (None, None) => {}
        }
    }
}
