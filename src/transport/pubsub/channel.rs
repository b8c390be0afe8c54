//! One wanted channel's state in the hub, and a waiter's share of it.

use std::sync::Arc;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::{ChannelName, Hub, WatchFilter};

/// One wanted channel. Small: a held lock watched for its loss keeps one (two with keyspace
/// events) for as long as it is held, and a client may hold 100,000 locks.
pub(super) struct ChannelState {
    /// Whether the server confirmed the subscription on the current connection.
    pub(super) confirmed: bool,
    /// This client's waiters on the channel, while there are any.
    pub(super) waiters: Option<Box<Waiters>>,
    /// Holds of this client watched for their loss on this channel: while there are any,
    /// news of it goes to [`Hub::told`] (they are not waiters: a `0` never goes to them
    /// instead of a waiter).
    pub(super) watchers: u32,
    /// Which messages are news for the watchers (`None`: all). A keyspace channel's watchers
    /// want only the events that may mean a lock is gone, not each renewal's.
    pub(super) watch_filter: Option<WatchFilter>,
    /// When the last waiter or watcher left; the hub unsubscribes once this is [`LINGER`] old.
    pub(super) idle_since: Option<Instant>,
}

/// A channel's waiters: what a message wakes, how their kind reads a message, and the
/// confirmation they wait for.
pub(super) struct Waiters {
    pub(super) refs: usize,
    pub(super) notify: Arc<Notify>,
    pub(super) ready: watch::Sender<bool>,
    pub(super) reads: Reads,
}

/// Whom a message on a channel wakes, as the kind of its waiters reads the payload (the hub
/// knows no payload of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// One waiter: only one can take what was freed (a lock's unlock).
    One,
    /// Every waiter (a write unlock readers may all share; a latch reaching zero).
    All,
    /// Up to `n` waiters (a semaphore's release, its payload the permits now available).
    Up(u32),
    /// Nobody: the message frees nothing.
    Nobody,
}

/// How a kind reads its channel's payloads.
pub(crate) type Reads = fn(&[u8]) -> Wake;

impl ChannelState {
    pub(super) fn new() -> ChannelState {
        ChannelState {
            confirmed: false,
            waiters: None,
            watchers: 0,
            watch_filter: None,
            idle_since: None,
        }
    }

    /// One more waiter of `channel` (this state's key in `hub`'s map), whose kind reads
    /// payloads with `reads` (the channel's first waiter sets it: kinds that share a channel
    /// share its messages' meaning).
    pub(super) fn join(
        &mut self,
        hub: &Arc<Hub>,
        channel: &ChannelName,
        reads: Reads,
    ) -> Subscription {
        let confirmed = self.confirmed;
        let waiters = self.waiters.get_or_insert_with(|| {
            Box::new(Waiters {
                refs: 0,
                notify: Arc::new(Notify::new()),
                ready: watch::Sender::new(confirmed),
                reads,
            })
        });
        waiters.refs += 1;
        self.idle_since = None;
        Subscription {
            hub: hub.clone(),
            channel: channel.clone(),
            notify: waiters.notify.clone(),
            ready: waiters.ready.subscribe(),
        }
    }

    pub(super) fn set_confirmed(&mut self, confirmed: bool) {
        self.confirmed = confirmed;
        if let Some(waiters) = &self.waiters {
            waiters.ready.send_replace(confirmed);
        }
    }

    /// Wakes every waiter.
    pub(super) fn wake(&self) {
        if let Some(waiters) = &self.waiters {
            waiters.notify.notify_waiters();
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        self.waiters.is_none() && self.watchers == 0
    }
}

/// One waiter's share of a channel subscription; dropping it releases the share.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    channel: ChannelName,
    notify: Arc<Notify>,
    pub(super) ready: watch::Receiver<bool>,
}

impl Subscription {
    /// The notifier a `0`/`1` message on this channel (or a reconnect) signals.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }

    /// Whether the server has confirmed the subscription on the current connection: from then
    /// on, every message published to the channel reaches this waiter.
    pub(crate) fn is_confirmed(&self) -> bool {
        *self.ready.borrow()
    }

    /// Resolves once the subscription is confirmed (at once if it is).
    pub(crate) fn confirmed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut ready = self.ready.clone();
        async move {
            let _ = ready.wait_for(|ready| *ready).await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.hub.channels.lock();
        if let Some(state) = channels.get_mut(&self.channel) {
            let Some(waiters) = &mut state.waiters else {
                return;
            };
            waiters.refs -= 1;
            if waiters.refs == 0 {
                // (A permit left by a message no waiter took would wake the next one for
                // nothing: the next waiter gets a new notifier.)
                state.waiters = None;
                if state.is_idle() {
                    state.idle_since = Some(Instant::now());
                    self.hub.lingering.lock().push(self.channel.clone());
                }
            }
        }
    }
}
