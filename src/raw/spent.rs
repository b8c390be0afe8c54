//! Spent latches waiting for their `DEL`, grouped by where they may be deleted: the next
//! writes to their node carry them.
//!
//! A latch is spent once its write's answer is read (no re-send will come); until deleted it
//! lingers for its PX. Deleted by a sweep of their own on a timer, they cost a round trip
//! and a wake-up every sweep, and on the server a `DEL` as long as its keys: on a replicated
//! cluster, a latched semaphore's acquire + release p99 was half again a client's without
//! latches, most of it the sweeps'. So a write through [`Protocol::send`] carries the `DEL`
//! of the spent latches beside it in the same write (same node, no round trip of its own),
//! once [`CARRY_MIN`] have gathered; the engine's sweeper deletes only what stays: the
//! latches of a group no latch came to since its last sweep (a key written once), and at
//! shutdown all.
//!
//! [`Protocol::send`]: super::Protocol::send

use std::collections::HashMap;
use std::sync::Arc;

use crate::sync::Mutex;
use tokio::sync::Notify;

/// Spent latches of a group gathered before a write carries their `DEL`: a `DEL` with every
/// write would cost a command each, on the client and on the server (P2's 64 owners are
/// bound by the server). With 8, P2 lost 2 % and 1 µs of client CPU a pair; with 16 it
/// gained 8 % on the sweeps it replaced.
pub(crate) const CARRY_MIN: usize = 16;

/// Most latches one `DEL` names: a `DEL` holds its server for as long as its keys take (one
/// of 340 latches, 275 µs on a cluster node, with every other client's writes behind it).
pub(crate) const LATCHES_PER_DEL: usize = 32;

/// The spent latches of one client, by group (see [`SpentQueue::group`]).
#[derive(Default)]
pub(crate) struct SpentQueue {
    inner: Mutex<Inner>,
    /// Signalled when a latch comes to an empty queue.
    pub(crate) arrived: Notify,
    /// Groups by slot (a cluster: a `DEL`'s keys must share one); else one group.
    by_slot: bool,
}

#[derive(Default)]
struct Inner {
    groups: HashMap<u16, Group>,
    count: usize,
    closed: bool,
}

#[derive(Default)]
struct Group {
    latches: Vec<String>,
    /// A latch came since the last sweep: a write to the group is likely to carry them.
    fresh: bool,
}

impl SpentQueue {
    /// An empty queue; `by_slot` on a cluster.
    pub(crate) fn new(by_slot: bool) -> SpentQueue {
        SpentQueue {
            by_slot,
            ..SpentQueue::default()
        }
    }

    /// The group of `key` (a latch, or the key a write goes to: a latch shares its lock's
    /// slot).
    fn group(&self, key: &str) -> u16 {
        match self.by_slot {
            true => crate::names::cluster_slot(key),
            false => 0,
        }
    }

    /// Queues a spent latch. `true` once closed: no sweeper runs any more, and the caller
    /// deletes it.
    #[must_use = "after shutdown the caller sweeps"]
    pub(crate) fn push(&self, latch: String) -> bool {
        let group = self.group(&latch);
        let mut inner = self.inner.lock();
        let spent = inner.groups.entry(group).or_default();
        spent.latches.push(latch);
        spent.fresh = true;
        inner.count += 1;
        if inner.count == 1 {
            self.arrived.notify_one();
        }
        inner.closed
    }

    /// The spent latches a write to `key` is to carry the `DEL` of: those of its group once
    /// there are [`CARRY_MIN`] (at most [`LATCHES_PER_DEL`]), in a guard that gives them back
    /// unless the write's `DEL` ran.
    pub(crate) fn take_for(self: &Arc<Self>, key: &str) -> Option<Carried> {
        let mut inner = self.inner.lock();
        if inner.count < CARRY_MIN {
            return None;
        }
        let group = self.group(key);
        let spent = inner.groups.get_mut(&group)?;
        if spent.latches.len() < CARRY_MIN {
            return None;
        }
        let n = spent.latches.len().min(LATCHES_PER_DEL);
        let latches: Vec<String> = spent.latches.drain(..n).collect();
        if spent.latches.is_empty() {
            inner.groups.remove(&group);
        }
        inner.count -= n;
        Some(Carried {
            queue: self.clone(),
            latches,
        })
    }

    /// For a sweep: every latch with `all`, else those of the groups no latch came to since
    /// the last sweep (the others are marked, for the next).
    pub(crate) fn take_for_sweep(&self, all: bool) -> Vec<String> {
        let mut inner = self.inner.lock();
        let mut taken = Vec::new();
        inner.groups.retain(|_, spent| {
            if spent.fresh && !all {
                spent.fresh = false;
                return true;
            }
            taken.append(&mut spent.latches);
            false
        });
        inner.count -= taken.len();
        taken
    }

    /// Latches whose `DEL` failed: the next sweep takes them.
    pub(crate) fn put_back(&self, latches: Vec<String>) {
        if latches.is_empty() {
            return;
        }
        let mut inner = self.inner.lock();
        let was_empty = inner.count == 0;
        inner.count += latches.len();
        for latch in latches {
            let group = self.group(&latch);
            inner.groups.entry(group).or_default().latches.push(latch);
        }
        if was_empty {
            self.arrived.notify_one();
        }
    }

    /// Whether no latch waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.lock().count == 0
    }

    /// How many latches wait.
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().count
    }

    /// The client shuts down: a latch spent from now on is for its spender to delete. (Under
    /// the queue's lock: a latch is either queued before the last sweep or swept by its
    /// spender.)
    pub(crate) fn close(&self) {
        self.inner.lock().closed = true;
    }
}

/// Gives the latches of a carried `DEL` back unless [`Carried::done`]: a write cancelled or
/// failed leaves them to the sweeper, never lingering for their PX.
pub(crate) struct Carried {
    queue: Arc<SpentQueue>,
    latches: Vec<String>,
}

impl Carried {
    /// The `DEL` to send in the carrying write.
    pub(crate) fn del(&self) -> redis::Cmd {
        delete(&self.latches)
    }

    /// The `DEL` ran: nothing to give back.
    pub(crate) fn done(mut self) {
        self.latches.clear();
    }
}

/// One `DEL` of `latches`.
pub(crate) fn delete(latches: &[String]) -> redis::Cmd {
    let mut del = redis::cmd("DEL");
    del.arg(latches);
    del
}

impl Drop for Carried {
    fn drop(&mut self) {
        self.queue.put_back(std::mem::take(&mut self.latches));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latch(key: &str, i: usize) -> String {
        crate::names::unlock_latch(key, &format!("{i:032x}"))
    }

    #[test]
    fn a_write_carries_its_groups_latches_once_enough_gathered() {
        let queue = Arc::new(SpentQueue::new(true));
        for i in 0..CARRY_MIN - 1 {
            assert!(!queue.push(latch("a", i)));
        }
        assert!(queue.take_for("a").is_none(), "fewer than CARRY_MIN");
        assert!(!queue.push(latch("a", 99)));
        assert!(queue.take_for("b").is_none(), "another slot's write");
        let taken = queue.take_for("a").expect("carried");
        assert_eq!(taken.latches.len(), CARRY_MIN);
        assert!(taken
            .latches
            .iter()
            .all(|l| crate::names::cluster_slot(l) == crate::names::cluster_slot("a")));
        taken.done();
        assert!(queue.is_empty());
    }

    #[test]
    fn a_carried_del_takes_at_most_a_del_of_latches() {
        let queue = Arc::new(SpentQueue::new(false));
        for i in 0..LATCHES_PER_DEL + 5 {
            let _ = queue.push(latch(&format!("k{i}"), i));
        }
        // (One group off a cluster: any write carries any latch.)
        let taken = queue.take_for("other").unwrap();
        assert_eq!(taken.latches.len(), LATCHES_PER_DEL);
        assert_eq!(
            taken.del().args_iter().count(),
            LATCHES_PER_DEL + 1,
            "one DEL of them"
        );
        taken.done();
        assert_eq!(queue.len(), 5);
    }

    #[test]
    fn a_sweep_leaves_the_groups_written_to_since_the_last_one() {
        let queue = SpentQueue::new(true);
        let _ = queue.push(latch("a", 1));
        let _ = queue.push(latch("b", 2));
        assert!(queue.take_for_sweep(false).is_empty(), "both fresh");
        let _ = queue.push(latch("a", 3));
        assert_eq!(queue.take_for_sweep(false), vec![latch("b", 2)]);
        assert_eq!(
            queue.take_for_sweep(false),
            vec![latch("a", 1), latch("a", 3)]
        );
        let _ = queue.push(latch("c", 4));
        assert_eq!(queue.take_for_sweep(true), vec![latch("c", 4)], "all");
        assert!(queue.is_empty());
    }

    #[test]
    fn a_carried_del_not_done_gives_its_latches_back() {
        let queue = Arc::new(SpentQueue::new(false));
        for i in 0..CARRY_MIN {
            let _ = queue.push(latch("a", i));
        }
        drop(queue.take_for("a").unwrap());
        assert_eq!(queue.len(), CARRY_MIN);
        assert_eq!(
            queue.take_for_sweep(false).len(),
            CARRY_MIN,
            "not fresh: swept next"
        );
        let _ = queue.push(latch("a", 1));
        let latches = vec![latch("a", 1)];
        let _ = queue.take_for_sweep(true);
        Carried {
            queue: queue.clone(),
            latches,
        }
        .done();
        assert!(queue.is_empty());
    }

    #[test]
    fn closed_tells_the_spender_to_delete() {
        let queue = SpentQueue::new(false);
        assert!(!queue.push(latch("a", 1)));
        queue.close();
        assert!(queue.push(latch("a", 2)));
    }
}
