//! The subscription hub: the pub/sub side of a client, shared by every waiter.
//!
//! On one server, and on a cluster in classic mode, one RESP3 connection carries every
//! channel ([`single`]). On a cluster in sharded mode a channel is subscribed at the master of
//! its slot, over one connection per master shared by all of this client's waiters there
//! ([`sharded`]), and follows its slot when it moves.
//!
//! Waiters of the same lock share one subscription to its channel, counted by reference. When
//! the last waiter leaves, the subscription lingers for about a second before the hub drops
//! it, so a lock that is contended again soon (a hot lock) costs no SUBSCRIBE/UNSUBSCRIBE
//! pair per hand-off. A `0` message wakes one local waiter (only one can win the lock), a `1`
//! wakes them all; a message with no waiter left is dropped.
//!
//! The hub's tasks own the connections: when one drops, its channels are subscribed again
//! (reconnecting with backoff, or where their slot lives now), the hub's epoch is bumped and
//! their waiters are woken, so none waits out a message that was published while it was away.
//! Waiters also keep a timer on the holder's TTL, so even a lost message costs at most one
//! lease, never a hang.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, PublishMode};
use crate::transport::{node_info, Connection};

mod sharded;
mod single;

/// How often the hub pings its connections to notice a silent drop.
const PING_INTERVAL: Duration = Duration::from_secs(5);
/// Reconnect backoff bounds.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long a subscription nobody uses is kept (between one and two of these).
const LINGER: Duration = Duration::from_secs(1);

/// Shared state between waiters and the hub task.
pub(crate) struct Hub {
    channels: Mutex<HashMap<String, ChannelState>>,
    /// Incremented every time all channels have been (re)subscribed after a (re)connect.
    epoch: AtomicU64,
    connected: AtomicBool,
    commands: mpsc::UnboundedSender<Command>,
    response_timeout: Duration,
    /// The client's name, given to each connection the hub opens.
    conn_name: Option<super::naming::ConnName>,
}

struct ChannelState {
    refs: usize,
    notify: Arc<Notify>,
    /// Holders of this client watching the channel for their lock's loss (any message, and
    /// every resubscription, wakes them all; they are not waiters, so a `0` never goes to
    /// them instead of a waiter).
    watchers: usize,
    watch: Arc<Notify>,
    /// Which messages wake the watchers (`None`: all). A keyspace channel's watchers want
    /// only the events that may mean a lock is gone, not each renewal's.
    watch_filter: Option<fn(&[u8]) -> bool>,
    /// `true` once the server confirmed the subscription on the current connection.
    ready: watch::Sender<bool>,
    /// When the last waiter left; the hub unsubscribes once this is [`LINGER`] old.
    idle_since: Option<Instant>,
}

impl ChannelState {
    /// One more waiter of `channel` (this state's key in `hub`'s map).
    fn join(&mut self, hub: &Arc<Hub>, channel: &str) -> Subscription {
        self.refs += 1;
        self.idle_since = None;
        Subscription {
            hub: hub.clone(),
            channel: channel.to_string(),
            notify: self.notify.clone(),
            ready: self.ready.subscribe(),
        }
    }
}

/// What waiters ask of the hub's task.
enum Command {
    Subscribe(String),
}

/// One waiter's share of a channel subscription; dropping it releases the share.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    channel: String,
    notify: Arc<Notify>,
    ready: watch::Receiver<bool>,
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
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.hub.channels.lock();
        if let Some(state) = channels.get_mut(&self.channel) {
            state.refs -= 1;
            if state.refs == 0 {
                state.idle_since = Some(Instant::now());
                // A permit left by a message no waiter took would wake the next one for nothing.
                state.notify = Arc::new(Notify::new());
            }
        }
    }
}

/// A holder's watch on its lock's channel; dropping it releases the share.
pub(crate) struct Watch {
    hub: Arc<Hub>,
    channel: String,
    notify: Arc<Notify>,
}

impl Watch {
    /// Woken by every message on the channel and every resubscription.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut channels = self.hub.channels.lock();
        if let Some(state) = channels.get_mut(&self.channel) {
            state.watchers -= 1;
            if state.refs == 0 && state.watchers == 0 {
                state.idle_since = Some(Instant::now());
            }
        }
    }
}

impl Hub {
    /// Creates the hub for the deployment `conn` reaches, with the resolved publish `mode`,
    /// makes its first connection (so a server that cannot serve pub/sub is reported now, not
    /// discovered by a waiter later), and starts its task, which runs until `shutdown` is
    /// cancelled.
    pub(crate) async fn start(
        config: &Config,
        conn: Connection,
        mode: PublishMode,
        shutdown: CancellationToken,
    ) -> crate::Result<Arc<Hub>> {
        let (connect_timeout, response_timeout) =
            (config.connect_timeout(), config.response_timeout());
        let (commands, rx) = mpsc::unbounded_channel();
        let hub = Arc::new(Hub {
            channels: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            commands,
            response_timeout,
            conn_name: config.conn_name.clone(),
        });
        let connection = config.connection_info()?;
        let redis = connection
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let base = connection.set_redis_settings(redis);
        let sharded = mode == PublishMode::SPublish;
        if let (Some(topology), true) = (conn.topology(), sharded) {
            let router =
                sharded::Router::new(hub.clone(), topology.clone(), base, rx, connect_timeout);
            router
                .start(shutdown)
                .await
                .map_err(crate::transport::node::pubsub_error)?;
            return Ok(hub);
        }
        let endpoint = match conn {
            Connection::Cluster(_, topology, _) => single::Endpoint::AnyMaster {
                base,
                topology,
                turn: 0,
            },
            Connection::Sentinel(sentinel) => single::Endpoint::SentinelMaster {
                base,
                master: sentinel.master(),
            },
            Connection::Standalone(_) => single::Endpoint::Fixed(base),
        };
        let mut task = single::HubTask {
            hub: hub.clone(),
            endpoint,
            sharded,
            connect_timeout,
            response_timeout,
            commands: rx,
        };
        let first = task
            .connect()
            .await
            .map_err(crate::transport::node::pubsub_error)?;
        tokio::spawn(task.run(first, shutdown));
        Ok(hub)
    }

    /// Whether the connection is up with every wanted channel subscribed.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// The current epoch: a waiter that sees it change must retry at once.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Joins the subscription to `channel` if the server has confirmed it already (another
    /// waiter of this client has it, or had it a moment ago): no command, no waiting.
    pub(crate) fn join_live(self: &Arc<Self>, channel: &str) -> Option<Subscription> {
        if !self.connected.load(Ordering::Acquire) {
            return None;
        }
        let mut channels = self.channels.lock();
        let state = channels.get_mut(channel)?;
        if !*state.ready.borrow() {
            return None;
        }
        Some(state.join(self, channel))
    }

    /// `channel`'s state, made (and its subscription asked of the hub's task) if new.
    fn state<'a>(
        &self,
        channels: &'a mut HashMap<String, ChannelState>,
        channel: &str,
    ) -> &'a mut ChannelState {
        channels.entry(channel.to_string()).or_insert_with(|| {
            let _ = self.commands.send(Command::Subscribe(channel.to_string()));
            ChannelState {
                refs: 0,
                notify: Arc::new(Notify::new()),
                watchers: 0,
                watch: Arc::new(Notify::new()),
                watch_filter: None,
                ready: watch::Sender::new(false),
                idle_since: None,
            }
        })
    }

    /// Joins the subscription to `channel`, waiting (bounded by the response timeout) until the
    /// server has confirmed it, so that an acquire attempt made afterwards cannot miss the
    /// unlock message. If the hub is disconnected it returns at once: the waiter then relies on
    /// its TTL timer and on the wake-up that follows the reconnect.
    pub(crate) async fn subscribe(self: &Arc<Self>, channel: &str) -> Subscription {
        let mut subscription = {
            let mut channels = self.channels.lock();
            let state = self.state(&mut channels, channel);
            state.join(self, channel)
        };
        if self.connected.load(Ordering::Acquire) {
            let confirmed = subscription.ready.wait_for(|r| *r);
            let _ = tokio::time::timeout(self.response_timeout, confirmed).await;
        }
        subscription
    }

    /// Watches `channel` for a holder of this client: the returned share is woken by every
    /// message on it and every resubscription (a message may have been missed), and keeps the
    /// subscription while it lives. Returns once the server confirmed the subscription (or
    /// the response timeout passed).
    pub(crate) async fn watch(self: &Arc<Self>, channel: &str) -> Watch {
        self.watch_where(channel, None).await
    }

    /// [`Hub::watch`], woken only by the messages `filter` accepts (and every resubscription).
    pub(crate) async fn watch_where(
        self: &Arc<Self>,
        channel: &str,
        filter: Option<fn(&[u8]) -> bool>,
    ) -> Watch {
        let (mut ready, watch) = {
            let mut channels = self.channels.lock();
            let state = self.state(&mut channels, channel);
            state.watch_filter = filter;
            state.watchers += 1;
            state.idle_since = None;
            (state.ready.subscribe(), state.watch.clone())
        };
        if self.connected.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(self.response_timeout, ready.wait_for(|r| *r)).await;
        }
        Watch {
            hub: self.clone(),
            channel: channel.to_string(),
            notify: watch,
        }
    }

    /// Wakes every watcher of `channel` (a holder of this client gave its last hold up: its
    /// watcher ends).
    pub(crate) fn nudge_watchers(&self, channel: &str) {
        if let Some(state) = self.channels.lock().get(channel) {
            state.watch.notify_waiters();
        }
    }

    /// Wakes every waiter of `channel` now (a holder of this client lost the lock, so its
    /// unlock message will never come).
    pub(crate) fn wake(&self, channel: &str) {
        if let Some(state) = self.channels.lock().get(channel) {
            state.notify.notify_waiters();
        }
    }

    /// Wakes every waiter of the lock whose channel is `base`: those on `base` and those on a
    /// channel of their own under it (`base:<field>`, a fair lock's), whose unlock message
    /// will never come either.
    pub(crate) fn wake_lock(&self, base: &str) {
        for (channel, state) in self.channels.lock().iter() {
            let own = channel
                .strip_prefix(base)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'));
            if own {
                state.notify.notify_waiters();
            }
        }
    }

    /// Delivers one message to the channel's waiters.
    fn dispatch(&self, channel: &[u8], payload: &[u8]) {
        let Ok(channel) = std::str::from_utf8(channel) else {
            return;
        };
        let channels = self.channels.lock();
        let Some(state) = channels.get(channel) else {
            return;
        };
        if state.watch_filter.is_none_or(|wanted| wanted(payload)) {
            state.watch.notify_waiters();
        }
        if state.refs == 0 {
            return;
        }
        match payload {
            b"0" => state.notify.notify_one(),
            b"1" => state.notify.notify_waiters(),
            _ => {}
        }
    }

    fn set_all_ready(&self, ready: bool) {
        for state in self.channels.lock().values() {
            state.ready.send_replace(ready);
        }
    }

    /// After a (re)subscription: bump the epoch, then wake every waiter.
    fn wake_all(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        for state in self.channels.lock().values() {
            state.notify.notify_waiters();
            state.watch.notify_waiters();
        }
    }

    fn channel_names(&self) -> Vec<String> {
        self.channels.lock().keys().cloned().collect()
    }

    fn is_wanted(&self, channel: &str) -> bool {
        self.channels.lock().contains_key(channel)
    }

    /// Forgets the channels idle since `cutoff` or earlier, returning them to unsubscribe.
    fn take_idle(&self, cutoff: Instant) -> Vec<String> {
        let mut idle = Vec::new();
        self.channels.lock().retain(|channel, state| {
            let keep =
                state.refs > 0 || state.watchers > 0 || state.idle_since.is_none_or(|t| t > cutoff);
            if !keep {
                idle.push(channel.clone());
            }
            keep
        });
        idle
    }

    fn mark_ready(&self, channel: &str) {
        self.set_ready(channel, true);
    }

    fn set_ready(&self, channel: &str, ready: bool) {
        if let Some(state) = self.channels.lock().get(channel) {
            state.ready.send_replace(ready);
        }
    }

    fn is_ready(&self, channel: &str) -> bool {
        self.channels
            .lock()
            .get(channel)
            .is_some_and(|state| *state.ready.borrow())
    }

    /// After `channels` were subscribed again somewhere: bump the epoch, then wake their
    /// waiters (a message may have been published while they were nowhere).
    fn rewake(&self, channels: &[String]) {
        if channels.is_empty() {
            return;
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let states = self.channels.lock();
        for channel in channels {
            if let Some(state) = states.get(channel) {
                state.notify.notify_waiters();
                state.watch.notify_waiters();
            }
        }
    }
}
