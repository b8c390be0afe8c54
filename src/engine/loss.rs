//! Loss told at once: while a lock is held, its holder listens on the lock's channel (the
//! client's subscription connection, sharded where that is the mode). A message there (an
//! unlock by anyone: a forced unlock from Java or `rlock unlock --force`, another reader's
//! release) has that hold checked once (`held_across.lua`); a hold found gone is lost at once,
//! within a round trip, instead of at the next renewal (a third of the watchdog timeout later,
//! or never for a fixed lease). A resubscription (a reconnect, a moved slot, a failover)
//! checks too: a message may have been missed.
//!
//! Most holds are short (a lock taken, a few writes, released), and listening costs a
//! subscription and a check: paid on every hold, that was half the speed of an uncontended
//! lock+unlock. So a hold is only watched once it has lived [`SETTLE`].
//!
//! One task per client ([`LossWatch::run`]) does it all, on a thread of its own: handing a
//! hold over must never wake a worker of the application's runtime (one such wake per
//! `SETTLE` cost a cluster with replicas about 6 µs of CPU a lock+unlock). While holds keep
//! coming, every `SETTLE` it looks at the holds taken since it last looked and watches each
//! still held: an entry in its map, and the hub's subscription to the channel. It rests when
//! none came; the next hold handed over wakes it. The hub tells it of news on a watched
//! channel (a message, the subscription confirmed, a resubscription); it then checks the holds
//! of every channel with news together, on a short task: one read-only call per node for up
//! to [`CHECK_BATCH`] holds (10,000 holds confirmed together cost 100 calls, not 10,000
//! `HGET`s). The first news is the confirmation, so a loss in a hold's first moments is told
//! then. A hold given up within `SETTLE` costs a push onto a list; a hold watched costs its
//! map entry and its share of a channel (no task, no timer), so that a client holding 100,000
//! locks pays little more for it than for their renewals.
//!
//! A raw `DEL`, an expiry or an eviction send nothing on the lock's channel. Where the server
//! sends keyspace notifications (read at connect), a watch also listens on its key's keyspace
//! channel, told of the events that may mean the hold is gone ([`may_be_gone`]). On a cluster
//! a node sends its own keys' events: the hub subscribes that channel at the key's master.
//!
//! One channel share per held lock (not per hold: reentrant holds share their entry); on
//! unless [`Config::with_prompt_loss_detection`](crate::Config::with_prompt_loss_detection)
//! turns it off.

use std::collections::{hash_map, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::sync::Mutex;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::registry::{Entry, Ticket};
use crate::engine::Core;
use crate::raw::{Kind, Renewal};
use crate::transport::pubsub::ChannelName;

/// How long a hold lives before it is watched: the longest a loss goes untold (plus as much
/// again, at worst, for the look that finds it, and a round trip).
pub(crate) const SETTLE: Duration = Duration::from_millis(10);

/// How many batches of checks run at once.
const CHECKS_AT_ONCE: usize = 16;

/// The most holds one check call carries (as the watchdog's default renewal batch).
const CHECK_BATCH: usize = crate::Config::DEFAULT_RENEWAL_BATCH_SIZE;

/// The holds handed to the loss task, and those it watches.
#[derive(Default)]
pub(crate) struct LossWatch {
    fresh: Mutex<Fresh>,
    woken: Notify,
    /// The watched holds by the channels whose news has them checked: their lock's channel,
    /// and their key's keyspace channel where the server sends keyspace notifications.
    watched: Mutex<HashMap<ChannelName, Watchers>>,
    /// The database whose keyspace notifications the server sends, if it does (see
    /// [`connect::keyspace_events`](crate::transport::connect::keyspace_events)).
    keyspace: Option<i64>,
}

impl LossWatch {
    /// `keyspace`: the database whose keyspace notifications to listen to, if the server
    /// sends them.
    pub(crate) fn new(keyspace: Option<i64>) -> LossWatch {
        LossWatch {
            keyspace,
            ..LossWatch::default()
        }
    }

    /// Hands `ticket`'s entry to the loss task, if it is not watched yet. (Nothing more on
    /// this path, which every acquire takes: whether its kind has a channel to listen on is
    /// for the loss task to find out, for the few holds that live long enough.)
    pub(crate) fn watch(&self, ticket: &Ticket) {
        if !ticket.start_watching() {
            return;
        }
        if self.fresh.lock().hand(Arc::downgrade(ticket)) {
            self.woken.notify_one();
        }
    }

    /// Stops watching the holds of `key` no longer held (given up or lost), and gives up the
    /// channels no other watched hold of this client needs.
    pub(crate) fn unwatch(&self, core: &Core, raw: &Kind, key: &str) {
        for channel in self.channels(raw, key) {
            // (The hub's share goes with the map entry, under the map's lock: a watch
            // starting at the same time cannot leave a share behind.)
            let mut watched = self.watched.lock();
            let Some(entries) = watched.get_mut(&channel) else {
                continue;
            };
            let (before, left) = entries.keep_held();
            if left == 0 {
                watched.remove(&channel);
            }
            for _ in left..before {
                core.hub.unwatch(&channel);
            }
        }
    }

    /// The channels whose news has the holds of `key` checked (none for a kind whose lock's
    /// channel tells its holder nothing).
    fn channels(&self, raw: &Kind, key: &str) -> Vec<ChannelName> {
        let Some(lock) = raw.loss_channel(key) else {
            return Vec::new();
        };
        let keyspace = self
            .keyspace
            .map(|db| crate::names::keyspace_channel(db, key));
        std::iter::once(lock)
            .chain(keyspace)
            .map(Into::into)
            .collect()
    }

    /// The client's loss task: every [`SETTLE`] watches the holds handed to it that are still
    /// held and have lived `SETTLE`, and checks the holds of each channel the hub has news
    /// of. Ends with `shutdown`.
    pub(crate) async fn run(core: Core, client_id: String, shutdown: CancellationToken) {
        let mut young: Vec<Weak<Entry>> = Vec::new();
        let checks = Arc::new(Semaphore::new(CHECKS_AT_ONCE));
        let client_id: Arc<str> = client_id.into();
        // When to look at the young holds next (none: resting, nothing handed over).
        let mut look_at: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = core.loss.woken.notified(), if look_at.is_none() => {
                    look_at = Some(Instant::now() + SETTLE);
                }
                _ = sleep_until(look_at), if look_at.is_some() => {
                    let (handed, looking) = core.loss.fresh.lock().take(young.is_empty());
                    young.extend(handed);
                    young.retain(|entry| match held(entry) {
                        None => false,
                        Some(entry) if entry.held_for() >= SETTLE => {
                            core.loss.start(&core, &entry);
                            false
                        }
                        Some(_) => true,
                    });
                    look_at = looking.then(|| Instant::now() + SETTLE);
                }
                told = core.hub.told() => core.loss.check(&core, told, &client_id, &checks),
            }
        }
    }

    /// Watches `entry`: its map entries, and a share of each channel at the hub (whose
    /// confirmation is the first news: the hold is checked then).
    fn start(&self, core: &Core, entry: &Arc<Entry>) {
        let channels = self.channels(entry.raw, &entry.key);
        if channels.is_empty() || !entry.set_listened() {
            return; // nothing to listen on, or given up since (its holder saw the flag)
        }
        let filtered: Vec<_> = channels
            .into_iter()
            .map(|channel| {
                let keyspace = crate::names::keyspace_key(&channel).is_some();
                (channel, keyspace.then_some(may_be_gone as _))
            })
            .collect();
        {
            // (Under the map's lock, as unwatch gives the hub's shares up under it.)
            let mut watched = self.watched.lock();
            for (channel, _) in &filtered {
                let entry = Arc::downgrade(entry);
                match watched.entry(channel.clone()) {
                    hash_map::Entry::Occupied(mut watchers) => watchers.get_mut().push(entry),
                    hash_map::Entry::Vacant(vacant) => drop(vacant.insert(Watchers::One(entry))),
                }
            }
            core.hub.watch(&filtered);
        }
        // Given up or lost meanwhile: its unwatch may have come before the map had it.
        if !entry.is_held() {
            self.unwatch(core, entry.raw, &entry.key);
        }
    }

    /// Checks the holds watched on each of `channels`, all together on a task of their own.
    fn check(
        &self,
        core: &Core,
        mut channels: Vec<ChannelName>,
        client_id: &Arc<str>,
        checks: &Arc<Semaphore>,
    ) {
        channels.sort_unstable();
        channels.dedup();
        let mut due: Vec<Arc<Entry>> = {
            let watched = self.watched.lock();
            channels
                .iter()
                .filter_map(|channel| watched.get(channel))
                .flat_map(Watchers::iter)
                .filter_map(held)
                .collect()
        };
        if due.is_empty() {
            return;
        }
        // (A lock's channel and its keyspace channel may both have news.)
        due.sort_unstable_by_key(Arc::as_ptr);
        due.dedup_by_key(|e| Arc::as_ptr(e));
        let (core, client_id, checks) = (core.clone(), client_id.clone(), checks.clone());
        crate::sync::spawn(async move {
            let Ok(_turn) = checks.acquire().await else {
                return;
            };
            check_all(&core, due, &client_id).await;
        });
    }
}

/// Checks that each of `due` is still held in Redis: one read-only call per node for up to
/// [`CHECK_BATCH`] holds (after a reconnect every watched hold is due at once), all sent
/// together. Those found gone are lost; a key its node no longer serves (a moved slot) is
/// checked again alone ([`check_entry`]), routed by its slot. A failed call loses nothing:
/// the watchdog's renewal still finds a lost hold, a lease later at the latest.
async fn check_all(core: &Core, mut due: Vec<Arc<Entry>>, client_id: &str) {
    due.retain(|entry| entry.is_held());
    let connection = core.protocol.connection();
    let batches = connection.master_batches(&mut due, |e| &e.key, CHECK_BATCH);
    let fields: Vec<Vec<String>> = batches
        .iter()
        .map(|batch| batch.iter().map(|e| field_of(e, client_id)).collect())
        .collect();
    let pairs: Vec<Vec<(&str, &str)>> = (batches.iter().zip(&fields))
        .map(|(batch, fields)| {
            let keys = batch.iter().map(|e| &*e.key);
            keys.zip(fields.iter().map(String::as_str)).collect()
        })
        .collect();
    let sent_at = Instant::now();
    let answers = core.protocol.held_across(&pairs).await;
    let (mut gone, mut elsewhere) = (Vec::new(), Vec::new());
    for (batch, answer) in batches.iter().zip(answers) {
        match answer {
            Ok(held) => {
                for (entry, held) in batch.iter().zip(held) {
                    match held {
                        Renewal::Renewed => {}
                        Renewal::Gone => gone.push(entry.clone()),
                        Renewal::Elsewhere => elsewhere.push(entry.clone()),
                    }
                }
            }
            Err(err) => {
                tracing::debug!(holds = batch.len(), error = %err, "checking holds after news failed")
            }
        }
    }
    lose(core, gone, sent_at);
    for entry in elsewhere {
        check_entry(core, &entry, client_id).await;
    }
}

/// Checks that `entry` is still held in Redis (`HGET key field`, routed by its key's slot);
/// one found gone is lost.
async fn check_entry(core: &Core, entry: &Arc<Entry>, client_id: &str) {
    if !entry.is_held() {
        return;
    }
    let sent_at = Instant::now();
    match (core.protocol)
        .hold_count(&entry.key, &field_of(entry, client_id))
        .await
    {
        Ok(0) => lose(core, vec![entry.clone()], sent_at),
        Ok(_) => {}
        Err(err) => {
            tracing::debug!(key = %entry.key, error = %err, "checking a hold after news failed")
        }
    }
}

/// The field `entry`'s owner holds its lock by, in the lock's hash.
fn field_of(entry: &Entry, client_id: &str) -> String {
    entry
        .raw
        .hash_field(&entry.owner.field(client_id))
        .into_owned()
}

/// Loses the holds of `gone` (found not held by a read sent at `sent_at`) still held here.
fn lose(core: &Core, mut gone: Vec<Arc<Entry>>, sent_at: Instant) {
    gone.retain(|entry| entry.is_held());
    if gone.is_empty() {
        return;
    }
    for entry in &gone {
        tracing::debug!(lock = entry.name(), key = %entry.key, "the hold was found gone");
    }
    let answers = vec![false; gone.len()];
    for hold in core.registry.apply_renewals(&gone, answers, sent_at) {
        core.wake_waiters_of(hold.raw, &hold.key);
        core.release_lost(&hold);
    }
}

/// Whether a keyspace event on a held lock's key may mean the hold is gone: anything but what
/// taking and keeping a lock does (an acquire's `hincrby`/`hset`, a renewal's `expire`), so
/// that renewals cost no check. A raw `DEL` (`del`), an expiry (`expired`), an eviction
/// (`evicted`), an unlock (`del`, `hdel`) are checked.
fn may_be_gone(event: &[u8]) -> bool {
    !matches!(event, b"expire" | b"hincrby" | b"hset")
}

/// Sleeps until `at` (forever without one).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => crate::sync::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The holds handed to the loss task since it last looked.
#[derive(Default)]
struct Fresh {
    holds: Vec<Weak<Entry>>,
    /// Whether the loss task looks again within `SETTLE` (else the next hold wakes it).
    looking: bool,
}

impl Fresh {
    /// Hands `hold` over: whether to wake the loss task (resting until now).
    fn hand(&mut self, hold: Weak<Entry>) -> bool {
        self.holds.push(hold);
        !std::mem::replace(&mut self.looking, true)
    }

    /// The holds handed over since the last look, and whether to look again. With none, and
    /// no young hold left to look at (`rest`), the loss task rests: the next hold handed over
    /// wakes it. (Taking the list and resting under one lock, no hold is handed to a task
    /// that is not coming back.)
    fn take(&mut self, rest: bool) -> (Vec<Weak<Entry>>, bool) {
        if self.holds.is_empty() && rest {
            self.looking = false;
        }
        (std::mem::take(&mut self.holds), self.looking)
    }
}

/// The holds watched on one channel: almost always one (a lock held by one owner of this
/// client), kept without a list of its own (a list of one takes an allocation of four).
enum Watchers {
    One(Weak<Entry>),
    Many(Vec<Weak<Entry>>),
}

impl Watchers {
    fn push(&mut self, entry: Weak<Entry>) {
        match self {
            Watchers::One(first) => {
                let first = std::mem::replace(first, Weak::new());
                *self = Watchers::Many(vec![first, entry]);
            }
            Watchers::Many(all) => all.push(entry),
        }
    }

    fn iter(&self) -> std::slice::Iter<'_, Weak<Entry>> {
        match self {
            Watchers::One(entry) => std::slice::from_ref(entry).iter(),
            Watchers::Many(all) => all.iter(),
        }
    }

    /// Keeps the holds still held: `(how many before, how many left)`.
    fn keep_held(&mut self) -> (usize, usize) {
        match self {
            Watchers::One(entry) if held(entry).is_none() => {
                *self = Watchers::Many(Vec::new());
                (1, 0)
            }
            Watchers::One(_) => (1, 1),
            Watchers::Many(all) => {
                let before = all.len();
                all.retain(|e| held(e).is_some());
                (before, all.len())
            }
        }
    }
}

/// The entry, if it is still held.
fn held(entry: &Weak<Entry>) -> Option<Arc<Entry>> {
    entry.upgrade().filter(|e| e.is_held())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::registry::{Lease, Registry};
    use crate::owner::Owner;
    use crate::raw::rlock::RLOCK;

    #[test]
    fn the_loss_task_is_woken_only_from_rest() {
        let mut fresh = Fresh::default();
        assert!(fresh.hand(Weak::new()), "the first hold wakes it");
        assert!(!fresh.hand(Weak::new()), "no wake while it looks again");
        let (holds, looking) = fresh.take(true);
        assert_eq!(
            (holds.len(), looking),
            (2, true),
            "holds came: it looks again"
        );
        assert!(!fresh.hand(Weak::new()), "still looking: no wake");
        assert_eq!(fresh.take(false).0.len(), 1);
        let (holds, looking) = fresh.take(false);
        assert!(
            holds.is_empty() && looking,
            "young holds to look at again: no rest"
        );
        let (holds, looking) = fresh.take(true);
        assert!(holds.is_empty() && !looking, "nothing to look at: it rests");
        assert!(fresh.hand(Weak::new()), "the next hold wakes it again");
    }

    #[test]
    fn one_watched_hold_takes_no_list_and_those_given_up_leave() {
        assert!(
            std::mem::size_of::<Watchers>() <= 24,
            "no bigger than a Vec"
        );
        let holds = Registry::default();
        let hold = |owner: i64| {
            let key: Arc<str> = "k".into();
            let (owner, now) = (Owner::from_id(owner), Instant::now());
            let taken = holds.register(&RLOCK, &key, &key, (owner, 1), Lease::Watchdog, now);
            taken.expect("an open registry")
        };
        let (first, second) = (hold(1), hold(2));
        let mut watchers = Watchers::One(Arc::downgrade(&first));
        assert!(matches!(watchers, Watchers::One(_)));
        assert_eq!(watchers.keep_held(), (1, 1));
        watchers.push(Arc::downgrade(&second));
        assert_eq!(watchers.iter().count(), 2);
        holds.surrender(&first, Lease::Watchdog);
        assert_eq!(watchers.keep_held(), (2, 1), "the hold given up leaves");
        assert!(Arc::ptr_eq(
            &held(watchers.iter().next().unwrap()).unwrap(),
            &second
        ));
        holds.surrender(&second, Lease::Watchdog);
        assert_eq!(watchers.keep_held(), (1, 0));
        let mut one = Watchers::One(Weak::new());
        assert_eq!(one.keep_held(), (1, 0), "a hold dropped entirely");
        assert_eq!(one.iter().count(), 0);
    }
}
