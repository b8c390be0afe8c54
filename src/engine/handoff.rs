//! Local hand-off: a release that passes the lock straight to a waiter of the same client.
//!
//! A waiter normally gets a freed lock one pub/sub round after the unlock: the message reaches
//! it, it wakes, and only then sends its acquire. When the owner releasing the lock and the
//! waiter live in one client, the client knows both ends, so it puts the waiter's acquire in the
//! same write as the unlock. Redis runs the two back to back: the lock changes hands before the
//! releasing owner has read its reply, with no race and no failed attempts. The acquire is an
//! ordinary attempt, safe at any moment (it acquires, or reports the holder's TTL), so a
//! hand-off that meets a lock still held changes nothing.
//!
//! **Fairness across clients.** A waiter in another client (a Redisson JVM, another process) is
//! woken by the unlock message and races; an acquire pipelined behind the unlock would win every
//! time. So a release hands off only while this client is alone on the lock's channel: each
//! release that has local waiters also counts the channel's subscribers (`PUBSUB NUMSUB`, in
//! the same write), and that count decides the next release. A client that starts waiting
//! loses at most the one hand-off already decided; from then on every release is Redisson's
//! plain one, and every waiter is woken by the message and races.
//!
//! **One attempt per owner.** Waiters park here, in arrival order, only while they sleep, and
//! leave before any attempt of their own. A parked waiter taken by a release does not attempt
//! until that release has answered, so an owner never has two acquires in flight.
//!
//! The acquire's answer is settled here: on success the hold is registered for the waiter
//! (so other waiters keep seeing the lock as held by this client) before the waiter is woken;
//! if the waiter has gone meanwhile, the release that made the hand-off undoes it.

use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::sync::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::registry::{Lease, Registry, Ticket};
use crate::owner::Owner;
use crate::raw::Kind;
use crate::raw::{AcquireArgs, Attempt, HandOff};

/// The call's current latch, shared with its hand-off slot (a hand-off must acquire under the
/// latch the call uses now).
pub(crate) type LatchCell = Arc<Mutex<Arc<str>>>;

/// How long a key's state outlives its last use (its subscriber count goes with it).
const KEEP: Duration = Duration::from_secs(2);
/// The table is swept of stale keys when it reaches twice its size after the last sweep.
const MIN_SWEEP: usize = 64;

/// The hand-off registry of one client.
pub(crate) struct Handoffs {
    enabled: bool,
    closed: AtomicBool,
    /// Waiters parked on any key: releases skip the table while it is zero.
    parked: AtomicUsize,
    table: Mutex<Queues>,
}

#[derive(Default)]
struct Queues {
    keys: HashMap<Arc<str>, KeyState>,
    sweep_at: usize,
}

struct KeyState {
    /// Waiters asleep on the key, oldest first.
    queue: VecDeque<Arc<Place>>,
    /// Hand-offs sent and not answered yet.
    in_flight: u32,
    /// The last count found this client alone on the channel.
    alone: bool,
    used: Instant,
}

impl KeyState {
    fn is_stale(&self, now: Instant) -> bool {
        self.queue.is_empty() && self.in_flight == 0 && now.duration_since(self.used) > KEEP
    }
}

/// One waiter's place: who it acquires for, and the answer to its hand-off.
pub(crate) struct Place {
    /// The waiter's kind: only a release of the same kind hands it the lock (its acquire
    /// script is the one the release sends).
    raw: &'static Kind,
    field: Arc<str>,
    owner: Owner,
    lease: Lease,
    lease_ms: u64,
    /// The waiter's acquire latch: a hand-off acquires under it, so the waiter's own re-send
    /// after a lost answer cannot count a second hold.
    latch: LatchCell,
    state: Mutex<PlaceState>,
    ready: Notify,
}

enum PlaceState {
    /// Not parked: between rounds, or making an attempt of its own.
    Idle,
    Parked,
    /// Taken by a release: its acquire is in flight.
    Taken,
    Done(Outcome),
    /// The waiter has gone.
    Gone,
}

/// What a hand-off did for a waiter.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The waiter holds the lock; the hold is registered under this ticket (with the
    /// acquisition's fencing token, from kinds that issue one).
    Acquired(Ticket, Option<i64>),
    /// Someone else holds it (the unlock did not free it).
    Held { pttl_ms: i64 },
    /// The acquire failed (sent at the instant given); the waiter handles it as the failure of
    /// its own attempt, which may have acquired.
    Failed(redis::RedisError, Instant),
    /// The acquire took the lock at the master but no replica acknowledged it: the hold is
    /// the waiter's to undo, as after an attempt of its own (`Attempt::Unsynced`).
    NotReplicated { replicas: u32 },
    /// Nothing ran for the waiter: the release was abandoned before its write, or the
    /// server did not know the script.
    Withdrawn,
    /// The acquire took the lock after the client's shutdown had released what it held: the
    /// release that handed it off releases that hold too, and the waiter's call ends.
    ShutDown,
}

/// What a waiter going away leaves behind.
#[derive(Debug)]
pub(crate) enum Forgotten {
    Nothing,
    /// An answer it never read (an acquired hold there must be released by the caller).
    Unread(Outcome),
    /// A hand-off for it is in flight: the release that sent it settles its answer.
    InFlight,
}

/// Where a waiter stands when it looks at its place.
#[derive(Debug)]
pub(crate) enum Standing {
    /// Free to attempt (it has left the queue, if it was in it).
    Free,
    /// A release is acquiring for it: wait for [`Place::ready`].
    Pending,
    /// A hand-off has answered.
    Answered(Outcome),
}

impl Place {
    pub(crate) fn new(
        raw: &'static Kind,
        field: Arc<str>,
        owner: Owner,
        lease: Lease,
        lease_ms: u64,
        latch: LatchCell,
    ) -> Arc<Place> {
        Arc::new(Place {
            raw,
            field,
            owner,
            lease,
            lease_ms,
            latch,
            state: Mutex::new(PlaceState::Idle),
            ready: Notify::new(),
        })
    }

    /// The lease the waiter acquires with.
    pub(crate) fn lease(&self) -> Lease {
        self.lease
    }

    /// Signalled once a hand-off for this waiter has answered.
    pub(crate) fn ready(&self) -> &Notify {
        &self.ready
    }
}

impl Handoffs {
    pub(crate) fn new(enabled: bool) -> Self {
        Handoffs {
            enabled,
            closed: AtomicBool::new(false),
            parked: AtomicUsize::new(0),
            table: Mutex::new(Queues::default()),
        }
    }

    /// No more hand-offs (the client is shutting down).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the client is shutting down.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Parks an idle waiter on `key` until a release takes it or it [`leave`](Self::leave)s.
    /// Only a waiter whose subscription is `confirmed` is queued for hand-offs (the counts
    /// that allow them must include it); others, and all with hand-off off, are only counted.
    pub(crate) fn park(&self, key: &Arc<str>, place: &Arc<Place>, confirmed: bool) {
        let mut table = self.table.lock();
        let mut state = place.state.lock();
        if !matches!(*state, PlaceState::Idle) {
            return;
        }
        *state = PlaceState::Parked;
        if self.enabled && confirmed {
            table.entry(key).queue.push_back(place.clone());
        }
        self.parked.fetch_add(1, Ordering::Relaxed);
    }

    /// Waiters parked right now, on any key.
    pub(crate) fn parked(&self) -> usize {
        self.parked.load(Ordering::Relaxed)
    }

    /// Takes the waiter out of the queue and reports where it stands.
    pub(crate) fn leave(&self, key: &str, place: &Arc<Place>) -> Standing {
        let mut table = self.table.lock();
        let mut state = place.state.lock();
        match std::mem::replace(&mut *state, PlaceState::Idle) {
            PlaceState::Parked => {
                table.unqueue(key, place);
                self.parked.fetch_sub(1, Ordering::Relaxed);
                Standing::Free
            }
            PlaceState::Idle | PlaceState::Gone => Standing::Free,
            PlaceState::Taken => {
                *state = PlaceState::Taken;
                Standing::Pending
            }
            PlaceState::Done(outcome) => Standing::Answered(outcome),
        }
    }

    /// The waiter is going away: takes it out of the queue and tells what is left to settle.
    pub(crate) fn forget(&self, key: &str, place: &Arc<Place>) -> Forgotten {
        let mut table = self.table.lock();
        let mut state = place.state.lock();
        match std::mem::replace(&mut *state, PlaceState::Gone) {
            PlaceState::Parked => {
                table.unqueue(key, place);
                self.parked.fetch_sub(1, Ordering::Relaxed);
                Forgotten::Nothing
            }
            PlaceState::Done(outcome) => Forgotten::Unread(outcome),
            PlaceState::Taken => Forgotten::InFlight,
            PlaceState::Idle | PlaceState::Gone => Forgotten::Nothing,
        }
    }

    /// Whether a hand-off of `key` is in flight: the lock is about to belong to a waiter of
    /// this client, whose hold is registered as soon as the answer is read.
    pub(crate) fn in_flight(&self, key: &str) -> bool {
        if !self.enabled {
            return false;
        }
        self.table
            .lock()
            .keys
            .get(key)
            .is_some_and(|k| k.in_flight > 0)
    }

    /// For a release that frees `key`: an [`Offer`] when waiters of this client are parked on
    /// it, handing the lock to the oldest if the last count found this client alone on the
    /// channel and `subscribed` (its own subscription is live, so the count included it).
    /// Only a waiter of the releasing kind `raw` is handed the lock.
    pub(crate) fn offer(
        self: &Arc<Self>,
        key: &Arc<str>,
        name: &Arc<str>,
        raw: &'static Kind,
        subscribed: bool,
    ) -> Option<Offer> {
        let hand_off = raw.hand_off()?;
        if !self.enabled
            || self.parked.load(Ordering::Relaxed) == 0
            || self.closed.load(Ordering::Acquire)
        {
            return None;
        }
        let mut table = self.table.lock();
        let state = table.keys.get_mut(key)?;
        if state.queue.is_empty() {
            return None;
        }
        state.used = Instant::now();
        let mut waiter = None;
        if state.alone && subscribed && state.queue.front().is_some_and(|p| p.raw == raw) {
            let place = state.queue.pop_front().expect("not empty");
            *place.state.lock() = PlaceState::Taken;
            self.parked.fetch_sub(1, Ordering::Relaxed);
            state.in_flight += 1;
            let latch = place.latch.lock().clone();
            waiter = Some((place, latch));
        }
        Some(Offer {
            hand_off,
            handoffs: self.clone(),
            key: key.clone(),
            name: name.clone(),
            waiter,
            settled: false,
        })
    }
}

impl Queues {
    fn entry(&mut self, key: &Arc<str>) -> &mut KeyState {
        let now = Instant::now();
        if !self.keys.contains_key(key) && self.keys.len() >= self.sweep_at {
            self.keys.retain(|_, k| !k.is_stale(now));
            self.sweep_at = (self.keys.len() * 2).max(MIN_SWEEP);
        }
        let state = self.keys.entry(key.clone()).or_insert_with(|| KeyState {
            queue: VecDeque::new(),
            in_flight: 0,
            alone: false,
            used: now,
        });
        state.used = now;
        state
    }

    fn unqueue(&mut self, key: &str, place: &Arc<Place>) {
        if let Some(state) = self.keys.get_mut(key) {
            // (Not there when it was only counted.)
            state.queue.retain(|s| !Arc::ptr_eq(s, place));
        }
    }
}

/// A release's part in a hand-off: send the unlock with [`Offer::waiter`]'s acquire behind it
/// (when there is one) and a subscriber count, then [`settle`](Offer::settle) the answers.
/// Dropped unsettled (the write was never made), it gives the waiter back.
pub(crate) struct Offer {
    /// The releasing kind's hand-off (only kinds that have one are offered).
    hand_off: &'static dyn HandOff,
    handoffs: Arc<Handoffs>,
    key: Arc<str>,
    name: Arc<str>,
    /// The waiter taken, and the latch it acquires under.
    waiter: Option<(Arc<Place>, Arc<str>)>,
    settled: bool,
}

/// A hold acquired by a hand-off for a waiter that had gone: the release must undo it.
#[derive(Debug)]
pub(crate) struct Orphan {
    pub(crate) field: Arc<str>,
    pub(crate) lease_ms: u64,
    /// Its latch, spent once the hold is released.
    pub(crate) latch: Arc<str>,
    /// `true`: the acquire answered that it took the hold; `false`: its answer was lost, and
    /// the latch tells whether it did.
    pub(crate) acquired: bool,
}

impl Offer {
    /// The releasing kind's hand-off, which sends the unlock with [`Offer::waiter`].
    pub(crate) fn hand_off(&self) -> &'static dyn HandOff {
        self.hand_off
    }

    /// The acquire to send for the waiter; `None`: count only.
    pub(crate) fn waiter(&self) -> Option<AcquireArgs<'_>> {
        self.waiter.as_ref().map(|(s, latch)| AcquireArgs {
            key: &self.key,
            latch,
            lease_ms: s.lease_ms,
            field: &s.field,
            // (Kinds that hand off take one hold per acquire, and do not queue.)
            permits: 1,
            try_once: false,
            queue_wait_ms: 0,
            now_ms: 0,
        })
    }

    /// Records the answers of the write: `listeners` (the channel's subscriber count, if it
    /// was read) decides the next release, and the waiter, if any, gets its outcome; an
    /// acquired hold is registered in the registry first, with `sent_at` as its confirmation time.
    /// Returns the hold to release if the waiter had gone, and whether the waiter did not get
    /// the lock (its neighbours, who skipped their attempts meanwhile, should look again).
    pub(crate) fn settle(
        mut self,
        listeners: Option<i64>,
        attempt: Option<redis::RedisResult<Attempt>>,
        holds: &Registry,
        raw: &'static Kind,
        sent_at: Instant,
    ) -> (Option<Orphan>, bool) {
        self.settled = true;
        let mut orphan = None;
        let mut missed = false;
        if let (Some((place, latch)), Some(attempt)) = (&self.waiter, attempt) {
            let mut state = place.state.lock();
            let orphan_of = |acquired| Orphan {
                field: place.field.clone(),
                lease_ms: place.lease_ms,
                latch: latch.clone(),
                acquired,
            };
            let outcome = match attempt {
                // The waiter went away while its hand-off was in flight: this release settles
                // what the acquire did (held at the master, acknowledged or not).
                Ok(Attempt::Acquired { .. } | Attempt::Unsynced { .. })
                    if matches!(*state, PlaceState::Gone) =>
                {
                    orphan = Some(orphan_of(true));
                    None
                }
                Err(_) if matches!(*state, PlaceState::Gone) => {
                    orphan = Some(orphan_of(false));
                    None
                }
                _ if matches!(*state, PlaceState::Gone) => None,
                Ok(Attempt::Acquired { token }) => {
                    let (owner, lease) = (place.owner, place.lease);
                    match holds.register(raw, &self.key, &self.name, (owner, 1), lease, sent_at) {
                        Some(ticket) => {
                            holds.observe.handed_off(holds.about(&ticket));
                            Some(Outcome::Acquired(ticket, token))
                        }
                        None => {
                            orphan = Some(orphan_of(true));
                            Some(Outcome::ShutDown)
                        }
                    }
                }
                // Held at the master only: never registered (a failover could give it to
                // someone else); the waiter undoes it and its latch, as after its own attempt.
                Ok(Attempt::Unsynced { replicas }) => Some(Outcome::NotReplicated { replicas }),
                Ok(Attempt::Held { pttl_ms }) => Some(Outcome::Held { pttl_ms }),
                Err(err) => Some(Outcome::Failed(err, sent_at)),
            };
            missed = !matches!(outcome, Some(Outcome::Acquired(..)));
            if let Some(outcome) = outcome {
                *state = PlaceState::Done(outcome);
            }
            drop(state);
            place.ready.notify_one();
        }
        // This client's own subscription is one of the listeners; an unread count is not 1.
        self.finish(Some(listeners == Some(1)));
        (orphan, missed)
    }

    /// Ends the hand-off; `alone` (when the write was made) is what its count found.
    fn finish(&self, alone: Option<bool>) {
        let mut table = self.handoffs.table.lock();
        if let Some(state) = table.keys.get_mut(&self.key) {
            if self.waiter.is_some() {
                state.in_flight -= 1;
            }
            if let Some(alone) = alone {
                state.alone = alone;
            }
            state.used = Instant::now();
        }
    }
}

impl Drop for Offer {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        if let Some((place, _)) = &self.waiter {
            let mut state = place.state.lock();
            if matches!(*state, PlaceState::Taken) {
                *state = PlaceState::Done(Outcome::Withdrawn);
            }
            drop(state);
            place.ready.notify_one();
        }
        self.finish(None);
    }
}

#[cfg(test)]
mod tests;
