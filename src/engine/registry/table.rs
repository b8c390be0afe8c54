//! The registry's table: its entries by key, the count of renewed ones, and the deadline the
//! watchdog sleeps until; changed only through [`Changing`], which keeps the held gauge.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::sync::atomic::Ordering::Relaxed;
use tokio::time::Instant;

use super::Entry;
use crate::observe::HeldGauge;

/// A node in the set of first owners, found by its key.
struct ByKey(Arc<Entry>);

impl Hash for ByKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that lookups by `&str` find it.
        (*self.0.key).hash(state)
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for ByKey {}

impl Borrow<str> for ByKey {
    fn borrow(&self) -> &str {
        &self.0.key
    }
}

/// The registered nodes.
#[derive(Default)]
pub(super) struct Table {
    /// The first owner of each key.
    first: HashSet<ByKey>,
    /// Further owners of keys in `first`.
    more: Vec<Arc<Entry>>,
    /// Nodes with watchdog holds (kept as they change, so counting them scans nothing).
    pub(super) renewed: usize,
    /// Drained by shutdown: nothing registers any more (a hold acquired after the drain
    /// would escape the shutdown's releases).
    pub(super) closed: bool,
    /// No later than the fixed-lease deadline the watchdog sleeps until (`None`: it sleeps
    /// without one). Only a deadline before it wakes the watchdog: an acquire with a lease
    /// that ends later (a semaphore's permits, whose lease never ends) wakes nothing.
    pub(super) armed: Option<Instant>,
}

impl Table {
    /// An empty table that registers nothing more (shutdown's).
    pub(super) fn closed() -> Table {
        Table {
            closed: true,
            ..Table::default()
        }
    }

    pub(super) fn len(&self) -> usize {
        self.first.len() + self.more.len()
    }

    /// The nodes of `key`, one per owner of this client holding it.
    pub(super) fn of_key<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Arc<Entry>> + 'a {
        let more = self.more.iter().filter(move |n| *n.key == *key);
        self.first.get(key).map(|b| &b.0).into_iter().chain(more)
    }

    pub(super) fn insert(&mut self, node: Arc<Entry>) {
        node.registered.store(true, Relaxed);
        if self.first.contains(&*node.key) {
            self.more.push(node);
        } else {
            self.first.insert(ByKey(node));
        }
    }

    /// Takes `node` out, if it is still in.
    pub(super) fn remove(&mut self, node: &Arc<Entry>) -> bool {
        if !node.registered.swap(false, Relaxed) {
            return false;
        }
        let first = self.first.get(&*node.key).map(|b| &b.0);
        if first.is_some_and(|f| Arc::ptr_eq(f, node)) {
            self.first.remove(&*node.key);
            if let Some(i) = self.more.iter().position(|n| n.key == node.key) {
                self.first.insert(ByKey(self.more.swap_remove(i)));
            }
        } else {
            let i = self.more.iter().position(|n| Arc::ptr_eq(n, node));
            self.more
                .swap_remove(i.expect("a registered node is in the table"));
        }
        if node.watchdog() > 0 {
            self.renewed -= 1;
        }
        if self.len() == 0 {
            // Nothing held any more: give the memory back. (`armed` stays: the watchdog
            // still sleeps until it.)
            *self = Table {
                closed: self.closed,
                armed: self.armed,
                ..Table::default()
            };
        }
        true
    }

    /// Every node, the table given up (shutdown's drain).
    pub(super) fn into_nodes(self) -> impl Iterator<Item = Arc<Entry>> {
        self.first.into_iter().map(|b| b.0).chain(self.more)
    }

    pub(super) fn nodes(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.first.iter().map(|b| &b.0).chain(&self.more)
    }

    /// A lease deadline was set: `true` if it comes before the one the watchdog sleeps
    /// until, which it then is (`Registry::arm` wakes the watchdog to look again).
    #[must_use = "the watchdog must be woken"]
    pub(super) fn arm(&mut self, deadline: Instant) -> bool {
        let earlier = self.armed.is_none_or(|armed| deadline < armed);
        if earlier {
            self.armed = Some(deadline);
        }
        earlier
    }
}

/// The table, locked by a method that may change it: on drop, its size goes to the held gauge
/// (swapped in under the lock, added after it is released).
pub(super) struct Changing<'a> {
    pub(super) table: Option<crate::sync::MutexGuard<'a, Table>>,
    pub(super) held: &'a HeldGauge,
}

impl std::ops::Deref for Changing<'_> {
    type Target = Table;
    fn deref(&self) -> &Table {
        self.table.as_ref().expect("locked until dropped")
    }
}

impl std::ops::DerefMut for Changing<'_> {
    fn deref_mut(&mut self) -> &mut Table {
        self.table.as_mut().expect("locked until dropped")
    }
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        let table = self.table.take().expect("dropped once");
        let delta = self.held.swap(table.len());
        drop(table);
        HeldGauge::add(delta);
    }
}
