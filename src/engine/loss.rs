//! Loss told at once: while a lock is held, its holder listens on the lock's channel (the
//! client's subscription connection, sharded where that is the mode). A message there (an
//! unlock by anyone: a forced unlock from Java or `rlock unlock --force`, another reader's
//! release) has that hold checked once (`HGET key field`); a hold found gone is lost at once,
//! within a round trip, instead of at the next renewal (a third of the watchdog timeout later,
//! or never for a fixed lease). A resubscription (a reconnect, a moved slot, a failover)
//! checks too: a message may have been missed.
//!
//! Most holds are short (a lock taken, a few writes, released), and listening costs a
//! subscription, a check and a task: paid on every hold, that was half the speed of an
//! uncontended lock+unlock. So a hold is only watched once it has lived [`SETTLE`]: one task
//! per client ([`LossWatch::run`]) looks at the holds taken since it last looked, every
//! `SETTLE`, and starts a watcher for each still held, which checks the hold at once (a loss
//! in its first moments is told then) and after every message. A hold given up within
//! `SETTLE` costs a push onto a list.
//!
//! A raw `DEL`, an expiry or an eviction send nothing on the lock's channel. Where the server
//! sends keyspace notifications (read at connect), a watch also listens on its key's keyspace
//! channel, woken by the events that may mean the hold is gone ([`may_be_gone`]).
//!
//! One watcher and one channel share per held lock (not per hold: reentrant holds share their
//! entry); on unless [`Config::with_prompt_loss_detection`](crate::Config::with_prompt_loss_detection)
//! turns it off.

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::registry::{Entry, Ticket};
use crate::engine::Core;

/// How long a hold lives before it is watched: the longest a loss goes untold (plus as much
/// again, at worst, for the look that finds it, and a round trip).
pub(crate) const SETTLE: Duration = Duration::from_millis(10);

/// The holds taken since the client's loss task last looked.
#[derive(Default)]
pub(crate) struct LossWatch {
    fresh: Mutex<Vec<Weak<Entry>>>,
    woken: Notify,
    /// The database whose keyspace notifications the server sends, if it does (see
    /// [`connect::keyspace_events`](crate::transport::connect::keyspace_events)): a watch
    /// then listens on its key's keyspace channel too.
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

    /// Hands `ticket`'s entry to the loss task, if it has no watcher yet and its kind has a
    /// channel to listen on.
    pub(crate) fn watch(&self, ticket: &Ticket) {
        if ticket.raw.loss_channel(&ticket.key).is_none() || !ticket.start_watching() {
            return;
        }
        let mut fresh = self.fresh.lock();
        fresh.push(Arc::downgrade(ticket));
        if fresh.len() == 1 {
            self.woken.notify_one();
        }
    }

    /// The client's loss task: every [`SETTLE`], starts a watcher for each hold handed to it
    /// that is still held and has lived `SETTLE`. Ends with `shutdown`.
    pub(crate) async fn run(core: Core, client_id: String, shutdown: CancellationToken) {
        let mut young: Vec<Weak<Entry>> = Vec::new();
        loop {
            if young.is_empty() {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = core.loss.woken.notified() => {}
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(SETTLE) => {}
            }
            young.append(&mut core.loss.fresh.lock());
            young.retain(|entry| match held(entry) {
                None => false,
                Some(entry) if entry.held_for() >= SETTLE => {
                    tokio::spawn(watch_entry(core.clone(), entry, client_id.clone()));
                    false
                }
                Some(_) => true,
            });
        }
    }
}

/// Watches `entry` until it is given up or found lost: checks it now, then after every
/// message on its channel, every resubscription, and, where the server sends keyspace
/// notifications, every event on its key that may mean it is gone ([`may_be_gone`]).
async fn watch_entry(core: Core, entry: Arc<Entry>, client_id: String) {
    let raw = entry.raw;
    let key = entry.key.clone();
    let Some(channel) = raw.loss_channel(&key) else {
        return;
    };
    let field = raw.hash_field(&entry.owner.field(&client_id)).into_owned();
    let entry = Arc::downgrade(&entry);
    let watch = core.hub.watch(&channel).await;
    let events = match core.loss.keyspace {
        Some(db) => {
            let channel = format!("__keyspace@{db}__:{key}");
            Some(core.hub.watch_where(&channel, Some(may_be_gone)).await)
        }
        None => None,
    };
    let never = Notify::new();
    let events = events.as_ref().map_or(&never, |events| events.notify());
    // (Subscribed only now: what was sent on the channel before is checked for at once.)
    let mut check = true;
    loop {
        let woken = watch.notify().notified();
        let told = events.notified();
        tokio::pin!(woken, told);
        // (Enabled before the check: a message from now on is not missed.)
        woken.as_mut().enable();
        told.as_mut().enable();
        if held(&entry).is_none() {
            return;
        }
        if !std::mem::take(&mut check) {
            tokio::select! {
                _ = &mut woken => {}
                _ = &mut told => {}
            }
            if held(&entry).is_none() {
                return;
            }
        }
        let sent_at = Instant::now();
        match core.protocol.hold_count(&key, &field).await {
            Ok(0) => {
                let Some(entry) = held(&entry) else { return };
                tracing::debug!(lock = entry.name(), key = %key, "the hold was found gone");
                let lost = core.registry.apply_renewals(&[entry], vec![false], sent_at);
                for hold in lost {
                    core.hub.wake(&channel);
                    core.release_lost(&hold);
                }
                return;
            }
            Ok(_) => {}
            // (The watchdog's renewal still finds it, a lease later at the latest.)
            Err(err) => {
                tracing::debug!(key = %key, error = %err, "checking a hold after a message failed")
            }
        }
    }
}

/// Whether a keyspace event on a held lock's key may mean the hold is gone: anything but what
/// taking and keeping a lock does (an acquire's `hincrby`/`hset`, a renewal's `expire`), so
/// that renewals cost no check. A raw `DEL` (`del`), an expiry (`expired`), an eviction
/// (`evicted`), an unlock (`del`, `hdel`) are checked.
fn may_be_gone(event: &[u8]) -> bool {
    !matches!(event, b"expire" | b"hincrby" | b"hset")
}

/// The entry, if it is still held.
fn held(entry: &Weak<Entry>) -> Option<Arc<Entry>> {
    entry.upgrade().filter(|e| e.is_held())
}
