//! What this client holds: the in-process registry of held locks and their lock-lost signals.
//!
//! One entry per `(key, owner)` with the number of live guards, split into watchdog holds (no
//! lease given: renewed by [`crate::engine::watchdog`]) and lease holds (a fixed lease: never
//! renewed, lost when it runs out). Each entry carries the **lock-lost signal** its guards
//! share. Unlock, guard drop and shutdown remove entries at once, before anything is sent to
//! Redis, so no renewal outlives its hold, and an entry present here means its owner has not
//! yet sent the unlock that frees the lock.
//!
//! An entry is a [`Entry`], one allocation shared by the registry and the entry's guards (their
//! [`Ticket`]): a guard carries 8 bytes of it, and surrendering a hold or confirming 100k
//! renewals needs no lookup. The registry finds nodes by key in a set keyed by the node's own
//! key (8 bytes a lock), holding the first owner of each key; further owners of a key (rare: a
//! stale holder of this client not told yet, shared holds) wait in a short list.

use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::sync::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::observe::{About, HeldGauge, Observe};
use crate::owner::Owner;
use crate::raw::Kind;

mod entry;
mod signal;
mod table;

use entry::{name_offset, stamp_ms, WARNED};
pub(crate) use entry::{Entry, Ticket};

pub use signal::LostReason;
pub(crate) use signal::LostSignal;
use signal::{clock_base, AtomicStamp};
use table::{Changing, Table};

pub(crate) use crate::config::MAX_LEASE;

/// How long a lock is held once acquired: what every kind's `acquire` takes beside its
/// [`Wait`](crate::Wait).
///
/// ```no_run
/// use std::time::Duration;
/// use redisson_lock::{Lease, Wait};
///
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// // Redisson's lock(10, SECONDS): a TTL of 10 s, never renewed.
/// let guard = client.lock("reports").acquire(Wait::Forever, Lease::Fixed(Duration::from_secs(10))).await?;
/// # drop(guard); Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Lease {
    /// The watchdog timeout (30 s by default), renewed every third of it while the guard
    /// lives (Redisson's `lock()` without a lease).
    #[default]
    Watchdog,
    /// A fixed lease, at least 1 ms and at most 100 years: never renewed; the lock expires
    /// then unless released first.
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

/// An entry taken out of the registry because its lock was lost (its signal has fired), or
/// at shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LostHold {
    pub(crate) raw: &'static Kind,
    pub(crate) key: Arc<str>,
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    /// How many holds the owner had (Redis counts them in the field).
    pub(crate) holds: u32,
    /// What each hold took ([`Entry::permits`]).
    pub(crate) permits: u32,
    pub(crate) reason: LostReason,
}

impl LostHold {
    /// Lost by the lease clock rather than by Redis's answer: the hold may still be there.
    pub(crate) fn may_remain(&self) -> bool {
        matches!(
            self.reason,
            LostReason::Unconfirmed | LostReason::LeaseExpired
        )
    }
}

/// A node just taken out, with its hold count then and why.
type Taken = (Arc<Entry>, u32, LostReason);

/// The registry of held locks.
pub(crate) struct Registry {
    table: Mutex<Table>,
    /// To name owners in what it reports (`<client_id>:<owner>`).
    client_id: Arc<str>,
    /// The watchdog lease: how long a watchdog hold lives past its last confirmed renewal.
    watchdog_lease: Duration,
    /// Signalled when a lease deadline may have moved earlier.
    pub(crate) changed: Notify,
    /// Where the engine reports what happens to locks (the registry first of all).
    pub(crate) observe: Observe,
    /// What this client last added to the held gauge.
    held: HeldGauge,
}

#[cfg(test)]
impl Default for Registry {
    /// The registry of client `u` (its owner 1 is field `u:1`), with a 30 s watchdog.
    fn default() -> Self {
        Registry::new(Duration::from_secs(30), "u")
    }
}

impl Registry {
    pub(crate) fn new(watchdog_lease: Duration, client_id: &str) -> Self {
        // Before any acquire is sent: a stamp cannot be earlier than the base.
        clock_base();
        Registry {
            table: Mutex::default(),
            client_id: client_id.into(),
            watchdog_lease,
            changed: Notify::new(),
            observe: Observe::default(),
            held: HeldGauge::default(),
        }
    }

    /// The table, for a change (see [`Changing`]).
    fn change(&self) -> Changing<'_> {
        Changing {
            table: Some(self.table.lock()),
            held: &self.held,
        }
    }

    /// With what the engine reports set by `observe`.
    pub(crate) fn observed(mut self, observe: Observe) -> Self {
        self.observe = observe;
        self
    }

    /// What events about `entry` carry.
    pub(crate) fn about<'a>(&'a self, entry: &'a Entry) -> About<'a> {
        About {
            client_id: &self.client_id,
            lock: entry.name(),
            key: &entry.key,
            kind: entry.raw.name(),
        }
    }

    /// The client id owner fields are formatted with.
    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Records one more hold of `key` (a lock of kind `raw`) by `owner`, taking `permits` (1
    /// for a lock), acquired with `lease` by a request sent at `sent_at`. `None` once shutdown
    /// has drained the registry: the caller releases the hold it took.
    pub(crate) fn register(
        &self,
        raw: &'static Kind,
        key: &Arc<str>,
        name: &Arc<str>,
        (owner, permits): (Owner, u32),
        lease: Lease,
        sent_at: Instant,
    ) -> Option<Ticket> {
        let mut table = self.change();
        if table.closed {
            return None;
        }
        // (One owner may hold both halves of a read-write lock: one node each.)
        let found = (table.of_key(key))
            .find(|n| n.owner == owner && n.raw == raw)
            .cloned();
        let node = found.unwrap_or_else(|| {
            let node = Arc::new(Entry {
                raw,
                key: key.clone(),
                name_at: name_offset(key, name),
                owner,
                watchdog_holds: AtomicU32::new(0),
                lease_holds: AtomicU32::new(0),
                lease_deadline: AtomicStamp::default(),
                last_confirmed: AtomicStamp::new(sent_at),
                since_ms: stamp_ms(sent_at),
                permits,
                registered: AtomicBool::new(false),
                flags: AtomicU8::new(0),
                lost: LostSignal::default(),
            });
            table.insert(node.clone());
            node
        });
        match lease {
            Lease::Watchdog => {
                if node.watchdog_holds.fetch_add(1, Relaxed) == 0 {
                    table.renewed += 1;
                }
                node.last_confirmed.set(sent_at);
            }
            Lease::Fixed(d) => {
                let earlier = node.lease_holds.fetch_add(1, Relaxed) > 0;
                // Every acquire resets the TTL to its own lease, unless the earlier holds'
                // leases run on (see `RawLock::keeps_first_lease`).
                if !(earlier && raw.keeps_first_lease()) {
                    node.lease_deadline.set(sent_at + d);
                    self.arm(&mut table, sent_at + d);
                }
            }
        }
        node.update_clock(self.watchdog_lease);
        Some(node)
    }

    /// Gives up one hold. Renewal of the entry stops at once when it was the last.
    pub(crate) fn surrender(&self, ticket: &Ticket, lease: Lease) -> Surrender {
        let mut table = self.change();
        if !ticket.is_registered() {
            return Surrender::Lost(None);
        }
        let lost = ticket.lost.reason();
        if let Some(reason) = lost.or_else(|| ticket.lost.clock_ran_out(Instant::now())) {
            let holds = ticket.holds();
            table.remove(ticket);
            drop(table);
            let taken = vec![(ticket.clone(), holds, reason)];
            return Surrender::Lost(self.announce(taken).pop());
        }
        let counter = match lease {
            Lease::Watchdog => &ticket.watchdog_holds,
            Lease::Fixed(_) => &ticket.lease_holds,
        };
        let before = counter.load(Relaxed);
        counter.store(before.saturating_sub(1), Relaxed);
        if matches!(lease, Lease::Watchdog) && before == 1 {
            table.renewed -= 1;
        }
        let last = ticket.holds() == 0;
        if last {
            table.remove(ticket);
        } else {
            ticket.update_clock(self.watchdog_lease);
            // The last watchdog hold gone, the fixed leases left decide when it ends.
            let deadline = ticket.lease_deadline.get();
            if let Some(deadline) = deadline.filter(|_| ticket.watchdog() == 0) {
                self.arm(&mut table, deadline);
            }
        }
        Surrender::Live { last }
    }

    /// Forgets the entry of `ticket` if its signal has fired (the lease clock ran out before
    /// the watchdog noticed): renewal of a hold declared lost stops at once. Returns the entry
    /// taken out, for its release.
    pub(crate) fn forget_lost(&self, ticket: &Ticket) -> Option<LostHold> {
        let mut table = self.change();
        let reason = ticket.lost.reason()?;
        let holds = ticket.holds();
        if !table.remove(ticket) {
            return None;
        }
        drop(table);
        // (Fired already: announcing again only logs.)
        self.announce(vec![(ticket.clone(), holds, reason)]).pop()
    }

    /// A partial unlock reset the key's TTL to a fixed lease at `sent_at`.
    pub(crate) fn lease_reset(&self, ticket: &Ticket, lease: Lease, sent_at: Instant) {
        if let Lease::Fixed(d) = lease {
            if ticket.raw.keeps_first_lease() {
                return; // the holds left keep their own leases
            }
            let mut table = self.table.lock();
            if ticket.is_registered() {
                ticket.lease_deadline.set(sent_at + d);
                ticket.update_clock(self.watchdog_lease);
                self.arm(&mut table, sent_at + d);
            }
        }
    }

    /// Whether an owner of this client other than `owner` holds `key`. Such a holder has not
    /// sent its unlock yet, so its unlock message is still to come.
    pub(crate) fn held_by_other(&self, key: &str, owner: Owner) -> bool {
        self.table.lock().of_key(key).any(|n| n.owner != owner)
    }

    /// Declares an entry lost: fires its signal and forgets it. (The watchdog loses entries
    /// through `apply_renewals` and the `expire_*` methods; this is for the unit tests.)
    #[cfg(test)]
    pub(crate) fn lose(&self, ticket: &Ticket, reason: LostReason) {
        if self.change().remove(ticket) {
            ticket.lost.fire(reason);
        }
    }

    /// Removes every entry (shutdown), firing their signals, and closes the registry: a hold
    /// acquired from now on is not registered ([`Registry::register`]). Returns what was held.
    pub(crate) fn drain(&self) -> Vec<LostHold> {
        let table = {
            let mut table = self.change();
            // (Under the lock: a surrender that finds its entry still registered must find it
            // in the table it changes, or it would count against an empty one.)
            for node in table.nodes() {
                node.registered.store(false, Relaxed);
            }
            std::mem::replace(&mut *table, Table::closed())
        };
        let taken = (table.into_nodes())
            .map(|node| {
                let holds = node.holds();
                (node, holds, LostReason::Shutdown)
            })
            .collect();
        self.announce(taken)
    }

    /// Number of entries (locks held by this client).
    pub(crate) fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Number of entries the watchdog renews.
    pub(crate) fn renewed_len(&self) -> usize {
        self.table.lock().renewed
    }

    /// Every entry with watchdog holds, as it stands.
    /// Reports each entry held longer than `limit` and not reported yet (one pass over the
    /// registry, from the watchdog's cycle: no timer per lock). Returns how many.
    pub(crate) fn warn_long_holds(&self, limit: Duration) -> usize {
        let long: Vec<Arc<Entry>> = {
            let table = self.table.lock();
            (table.nodes())
                .filter(|n| n.flags.load(Relaxed) & WARNED == 0 && n.held_for() > limit)
                .cloned()
                .collect()
        };
        for entry in &long {
            entry.flags.fetch_or(WARNED, Relaxed);
            let owner = entry.owner.field(&self.client_id);
            (self.observe).held_too_long(self.about(entry), &owner, entry.held_for(), limit);
        }
        long.len()
    }

    pub(crate) fn renewal_snapshot(&self) -> Vec<Arc<Entry>> {
        let table = self.table.lock();
        let mut snapshot = Vec::with_capacity(table.renewed);
        // (A hold its guard found lost by the clock is never renewed again.)
        snapshot.extend(
            table
                .nodes()
                .filter(|n| n.watchdog() > 0 && !n.lost.is_fired())
                .cloned(),
        );
        snapshot
    }

    /// Applies one batch's replies: confirms the renewed entries (as of `sent_at`) and loses
    /// the others. One lock for the batch. Returns the holds lost.
    pub(crate) fn apply_renewals(
        &self,
        batch: &[Arc<Entry>],
        renewed: Vec<bool>,
        sent_at: Instant,
    ) -> Vec<LostHold> {
        let mut lost = Vec::new();
        let mut table = self.change();
        for (node, ok) in batch.iter().zip(renewed) {
            if !ok {
                let holds = node.holds();
                if table.remove(node) {
                    lost.push((node.clone(), holds, LostReason::Gone));
                }
            } else if node.is_registered()
                && node.last_confirmed.get().is_some_and(|at| at < sent_at)
            {
                node.last_confirmed.set(sent_at);
                node.update_clock(self.watchdog_lease);
            }
        }
        drop(table);
        self.announce(lost)
    }

    /// Loses every entry in `batch` whose last confirmation is a whole lease old. Returns the
    /// holds lost.
    pub(crate) fn expire_unconfirmed(
        &self,
        batch: &[Arc<Entry>],
        lease: Duration,
        now: Instant,
    ) -> Vec<LostHold> {
        let mut lost = Vec::new();
        let mut table = self.change();
        for node in batch {
            let stale = node.is_registered()
                && node.watchdog() > 0
                && node
                    .last_confirmed
                    .get()
                    .is_some_and(|at| now >= at + lease);
            let holds = node.holds();
            if stale && table.remove(node) {
                lost.push((node.clone(), holds, LostReason::Unconfirmed));
            }
        }
        drop(table);
        self.announce(lost)
    }

    /// A lease deadline was set under `table`'s lock: wakes the watchdog if it comes before
    /// the one the watchdog sleeps until.
    fn arm(&self, table: &mut Table, deadline: Instant) {
        if table.arm(deadline) {
            self.changed.notify_one();
        }
    }

    /// When the first lease-only entry's lease runs out: the watchdog's question before it
    /// sleeps, so the answer is what an earlier deadline must wake it from.
    pub(crate) fn next_lease_deadline(&self) -> Option<Instant> {
        let mut table = self.table.lock();
        let next = (table.nodes())
            .filter(|n| n.watchdog() == 0)
            .filter_map(|n| n.lease_deadline.get())
            .min();
        table.armed = next;
        next
    }

    /// Loses every lease-only entry whose lease has run out. Returns the holds lost.
    pub(crate) fn expire_leases(&self, now: Instant) -> Vec<LostHold> {
        let mut table = self.change();
        let expired: Vec<Arc<Entry>> = table
            .nodes()
            .filter(|n| n.watchdog() == 0 && n.lease_deadline.get().is_some_and(|d| d <= now))
            .cloned()
            .collect();
        let mut lost = Vec::with_capacity(expired.len());
        for node in expired {
            let holds = node.holds();
            if table.remove(&node) {
                lost.push((node, holds, LostReason::LeaseExpired));
            }
        }
        drop(table);
        self.announce(lost)
    }

    /// Fires the signals of nodes just taken out and logs them, after the registry lock is
    /// released (a mass loss must not hold up every acquire behind it).
    fn announce(&self, taken: Vec<Taken>) -> Vec<LostHold> {
        taken
            .into_iter()
            .map(|(node, holds, reason)| {
                // (Reported before the holder is told: what it then reads is counted.)
                let field: Arc<str> = node.owner.field(&self.client_id).into();
                if reason != LostReason::Shutdown {
                    let why = reason.to_string();
                    (self.observe).lost(self.about(&node), &field, reason.label(), &why);
                }
                node.lost.fire(reason);
                LostHold {
                    raw: node.raw,
                    key: node.key.clone(),
                    name: node.name_arc(),
                    field,
                    holds,
                    permits: node.permits,
                    reason,
                }
            })
            .collect()
    }
}

impl Drop for Registry {
    /// A client dropped without `shutdown` takes its entries back from the held gauge.
    fn drop(&mut self) {
        HeldGauge::add(self.held.swap(0));
    }
}

#[cfg(test)]
mod tests;
