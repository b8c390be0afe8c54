//! Loss told at once: while a lock is held, its holder listens on the lock's channel (the
//! client's subscription connection, sharded where that is the mode). A message there (an
//! unlock by anyone: a forced unlock from Java or `rlock unlock --force`, another reader's
//! release) has that hold checked once (`HGET key field`); a hold found gone is lost at once,
//! within a round trip, instead of at the next renewal (a third of the watchdog timeout later,
//! or never for a fixed lease). A resubscription (a reconnect, a moved slot, a failover)
//! checks too: a message may have been missed.
//!
//! One task and one channel share per held lock (not per hold: reentrant holds share their
//! entry); off unless [`Config::with_prompt_loss_detection`](crate::Config::with_prompt_loss_detection).

use std::sync::{Arc, Weak};

use tokio::time::Instant;

use crate::engine::registry::{Entry, Ticket};
use crate::engine::Core;

/// Starts the watcher of `ticket`'s entry if it has none yet.
pub(crate) fn watch(core: &Core, ticket: &Ticket, client_id: &str) {
    if !ticket.start_watching() {
        return;
    }
    let raw = ticket.raw;
    let key = ticket.key.clone();
    let Some(channel) = raw.loss_channel(&key) else {
        return;
    };
    let field = raw.hash_field(&ticket.owner.field(client_id)).into_owned();
    let (core, entry) = (core.clone(), Arc::downgrade(ticket));
    tokio::spawn(async move {
        let watch = core.hub.watch(&channel).await;
        loop {
            let woken = watch.notify().notified();
            tokio::pin!(woken);
            // (Enabled before the check: a message from now on is not missed.)
            woken.as_mut().enable();
            if held(&entry).is_none() {
                return;
            }
            woken.await;
            if held(&entry).is_none() {
                return;
            }
            let sent_at = Instant::now();
            match core.protocol.hold_count(&key, &field).await {
                Ok(0) => {
                    let Some(entry) = held(&entry) else { return };
                    tracing::debug!(lock = entry.name(), key = %key, "a message on the lock's channel found the hold gone");
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
    });
}

/// The entry, if it is still held.
fn held(entry: &Weak<Entry>) -> Option<Arc<Entry>> {
    entry.upgrade().filter(|e| e.is_held())
}
