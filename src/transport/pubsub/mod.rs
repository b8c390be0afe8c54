//! The subscription hub: the pub/sub side of a client, shared by every waiter.
//!
//! On one server, and through Sentinel, one RESP3 connection carries every channel
//! ([`single`]). On a cluster a channel is subscribed at the master of its slot (`SSUBSCRIBE`
//! in sharded mode, `SUBSCRIBE` in classic mode), over one connection per master shared by all
//! of this client's waiters there ([`sharded`]), and follows its slot when it moves.
//!
//! Waiters of the same lock share one subscription to its channel, counted by reference. When
//! the last waiter leaves, the subscription lingers for about a second before the hub drops
//! it, so a lock that is contended again soon (a hot lock) costs no SUBSCRIBE/UNSUBSCRIBE
//! pair per hand-off. What a message means is its kind's to say, not the hub's: the first
//! waiter of a channel brings its kind's reading of payloads ([`Wake`]: one waiter, all, up to
//! *n*); a message with no waiter left is dropped.
//!
//! Holders listening for their lock's loss are not waiters: they are counted per channel
//! ([`Hub::watch`]), and news of a watched channel (a message, its subscription confirmed, a
//! resubscription) goes to the client's one loss task ([`Hub::told`]), never to a task per
//! holder.
//!
//! The hub's tasks own the connections: when one drops, its channels are subscribed again
//! (reconnecting with backoff, or where their slot lives now), the hub's epoch is bumped and
//! their waiters are woken, so none waits out a message that was published while it was away.
//! Waiters also keep a timer on the holder's TTL, so even a lost message costs at most one
//! lease, never a hang.

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::sync::Mutex;
use tokio::sync::{mpsc, Notify};

use channel::ChannelState;
pub(crate) use channel::{Reads, Subscription, Wake};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use redis::aio::MultiplexedConnection;

use crate::config::{Config, PublishMode};
use crate::transport::{node_info, Connection};

mod channel;
pub(crate) mod key_events;
#[cfg(feature = "model")]
mod model;
mod sharded;
mod single;

/// How often the hub pings its connections to notice a silent drop.
const PING_INTERVAL: Duration = Duration::from_secs(5);
/// Reconnect backoff bounds.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long a subscription nobody uses is kept (between one and two of these).
const LINGER: Duration = Duration::from_secs(1);
/// The most channels one (un)subscription round trip carries (a burst of 100,000 watched
/// holds goes out in about a hundred).
const SUBSCRIBE_BATCH: usize = 1024;

/// A channel's name: one allocation shared by the hub's map, its tasks' tables and the loss
/// watch's map (a client holding 100,000 watched locks has as many channels).
pub(crate) type ChannelName = Arc<str>;

/// Shared state between waiters and the hub task.
pub(crate) struct Hub {
    channels: Mutex<HashMap<ChannelName, ChannelState>>,
    /// Watched channels with news for their watcher (a message its filter accepts, or a
    /// (re)subscription: a message may have been missed), until it takes them ([`Hub::told`]).
    told: Mutex<Vec<ChannelName>>,
    telling: Notify,
    /// Channels that went idle (no waiter, no watcher) since the last sweep looked: the
    /// sweep looks at these only, not at every channel (a client holding 100,000 watched
    /// locks has as many channels, none idle).
    lingering: Mutex<Vec<ChannelName>>,
    /// Incremented every time all channels have been (re)subscribed after a (re)connect.
    epoch: AtomicU64,
    connected: AtomicBool,
    commands: mpsc::UnboundedSender<Command>,
    response_timeout: Duration,
    /// The client's name, given to each connection the hub opens.
    conn_name: Option<super::naming::ConnName>,
}

/// Which messages on a watched channel are news for its watchers (given the payload).
pub(crate) type WatchFilter = fn(&[u8]) -> bool;

/// What waiters ask of the hub's task.
enum Command {
    /// Channels asked for together (a watched hold's lock and keyspace channels): they go
    /// out in one batch, so their confirmations are told together.
    Subscribe(Vec<ChannelName>),
}

impl Command {
    /// This command's channel and those of every command queued behind it by now, up to
    /// [`SUBSCRIBE_BATCH`]: asked for together, they go out together.
    fn batch(self, commands: &mut mpsc::UnboundedReceiver<Command>) -> Vec<ChannelName> {
        let Command::Subscribe(mut channels) = self;
        while channels.len() < SUBSCRIBE_BATCH {
            match commands.try_recv() {
                Ok(Command::Subscribe(more)) => channels.extend(more),
                Err(_) => break,
            }
        }
        channels
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
            told: Mutex::new(Vec::new()),
            telling: Notify::new(),
            lingering: Mutex::new(Vec::new()),
            epoch: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            commands,
            response_timeout,
            conn_name: config.conn_name.clone(),
        });
        #[cfg(feature = "model")]
        if let Connection::Model(link) = conn {
            crate::sync::spawn(model::run(hub.clone(), link, rx, shutdown));
            return Ok(hub);
        }
        let connection = config.connection_info()?;
        let redis = connection
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let base = connection.set_redis_settings(redis);
        let sharded = mode == PublishMode::SPublish;
        let endpoint = match conn {
            Connection::Cluster { topology, .. } => {
                let router =
                    sharded::Router::new(hub.clone(), topology, base, sharded, rx, connect_timeout);
                router
                    .start(shutdown)
                    .await
                    .map_err(crate::transport::node::pubsub_error)?;
                return Ok(hub);
            }
            Connection::Sentinel(sentinel) => single::Endpoint::SentinelMaster {
                base,
                master: sentinel.master(),
            },
            Connection::Standalone(_) => single::Endpoint::Fixed(base),
            #[cfg(feature = "model")]
            Connection::Model(_) => unreachable!("the model's hub started above"),
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
    pub(crate) fn join_live(self: &Arc<Self>, channel: &str, reads: Reads) -> Option<Subscription> {
        if !self.connected.load(Ordering::Acquire) {
            return None;
        }
        let mut channels = self.channels.lock();
        let name = channels.get_key_value(channel)?.0.clone();
        let state = channels.get_mut(channel)?;
        if !state.confirmed {
            return None;
        }
        Some(state.join(self, &name, reads))
    }

    /// `channel`'s state, made (and its subscription asked of the hub's task) if new.
    fn state<'a>(
        &self,
        channels: &'a mut HashMap<ChannelName, ChannelState>,
        channel: &ChannelName,
    ) -> &'a mut ChannelState {
        channels.entry(channel.clone()).or_insert_with(|| {
            let _ = self
                .commands
                .send(Command::Subscribe(vec![channel.clone()]));
            ChannelState::new()
        })
    }

    /// Joins the subscription to `channel`, waiting (bounded by the response timeout) until the
    /// server has confirmed it, so that an acquire attempt made afterwards cannot miss the
    /// unlock message. If the hub is disconnected it returns at once: the waiter then relies on
    /// its TTL timer and on the wake-up that follows the reconnect.
    pub(crate) async fn subscribe(self: &Arc<Self>, channel: &str, reads: Reads) -> Subscription {
        let mut subscription = {
            let mut channels = self.channels.lock();
            let name = match channels.get_key_value(channel) {
                Some((known, _)) => known.clone(),
                None => channel.into(),
            };
            self.state(&mut channels, &name).join(self, &name, reads)
        };
        if self.connected.load(Ordering::Acquire) {
            let confirmed = subscription.ready.wait_for(|r| *r);
            let _ = crate::sync::time::timeout(self.response_timeout, confirmed).await;
        }
        subscription
    }

    /// Watches each of `channels` for a holder of this client: from now on every message on
    /// it that its filter accepts (`None`: all), the server's confirmation of the
    /// subscription, and every resubscription (a message may have been missed) is told by
    /// [`Hub::told`]; at once if the channel is confirmed already. The channels new here are
    /// asked for in one request, so that their confirmations are told together (one check of
    /// a hold, not one per channel). One [`Hub::unwatch`] per channel ends it.
    pub(crate) fn watch(&self, channels: &[(ChannelName, Option<WatchFilter>)]) {
        let mut confirmed = Vec::new();
        {
            let mut states = self.channels.lock();
            let mut new = Vec::new();
            for (channel, filter) in channels {
                let state = states.entry(channel.clone()).or_insert_with(|| {
                    new.push(channel.clone());
                    ChannelState::new()
                });
                state.watch_filter = *filter;
                state.watchers += 1;
                state.idle_since = None;
                if state.confirmed {
                    confirmed.push(channel.clone());
                }
            }
            if !new.is_empty() {
                let _ = self.commands.send(Command::Subscribe(new));
            }
        }
        self.tell(confirmed);
    }

    /// Ends one [`Hub::watch`] of `channel`.
    pub(crate) fn unwatch(&self, channel: &str) {
        let mut channels = self.channels.lock();
        let Some((name, _)) = channels.get_key_value(channel) else {
            return;
        };
        let name = name.clone();
        let state = channels.get_mut(channel).expect("found above");
        state.watchers = state.watchers.saturating_sub(1);
        if state.is_idle() {
            state.idle_since = Some(Instant::now());
            self.lingering.lock().push(name);
        }
    }

    /// The watched channels with news since the last call, waiting for some.
    pub(crate) async fn told(&self) -> Vec<ChannelName> {
        loop {
            let told = self.telling.notified();
            let news = std::mem::take(&mut *self.told.lock());
            if !news.is_empty() {
                return news;
            }
            told.await;
        }
    }

    fn tell(&self, channels: impl IntoIterator<Item = ChannelName>) {
        let mut told = self.told.lock();
        let was = told.len();
        told.extend(channels);
        if was == 0 && !told.is_empty() {
            self.telling.notify_one();
        }
    }

    /// Wakes every waiter of `channel` now (a holder of this client lost the lock, so its
    /// unlock message will never come).
    pub(crate) fn wake(&self, channel: &str) {
        if let Some(state) = self.channels.lock().get(channel) {
            state.wake();
        }
    }

    /// Wakes every waiter of each channel `of_lock` picks (a lock's waiters, when a holder of
    /// this client lost it: its unlock message will never come; the kind says which channels
    /// its waiters listen on).
    pub(crate) fn wake_where(&self, of_lock: impl Fn(&str) -> bool) {
        for (channel, state) in self.channels.lock().iter() {
            if of_lock(channel) {
                state.wake();
            }
        }
    }

    /// Delivers one message to the channel's waiters.
    fn dispatch(&self, channel: &[u8], payload: &[u8]) {
        let Ok(channel) = std::str::from_utf8(channel) else {
            return;
        };
        let told = {
            let channels = self.channels.lock();
            let Some((name, state)) = channels.get_key_value(channel) else {
                return;
            };
            if let Some(waiters) = &state.waiters {
                match (waiters.reads)(payload) {
                    Wake::One => waiters.notify.notify_one(),
                    Wake::All => waiters.notify.notify_waiters(),
                    // (No more than there are: a permit stored past them would wake a later
                    // waiter for nothing.)
                    Wake::Up(n) => {
                        for _ in 0..(n as usize).min(waiters.refs) {
                            waiters.notify.notify_one();
                        }
                    }
                    Wake::Nobody => {}
                }
            }
            let told =
                state.watchers > 0 && state.watch_filter.is_none_or(|wanted| wanted(payload));
            told.then(|| name.clone())
        };
        if let Some(channel) = told {
            self.tell([channel]);
        }
    }

    fn set_all_ready(&self, ready: bool) {
        for state in self.channels.lock().values_mut() {
            state.set_confirmed(ready);
        }
    }

    /// After a (re)subscription: bump the epoch, then wake every waiter and tell every
    /// watcher.
    fn wake_all(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let mut watched = Vec::new();
        for (channel, state) in self.channels.lock().iter() {
            state.wake();
            if state.watchers > 0 {
                watched.push(channel.clone());
            }
        }
        self.tell(watched);
    }

    fn channel_names(&self) -> Vec<ChannelName> {
        self.channels.lock().keys().cloned().collect()
    }

    fn is_wanted(&self, channel: &str) -> bool {
        self.channels.lock().contains_key(channel)
    }

    /// Forgets the channels idle since `cutoff` or earlier, returning them to unsubscribe.
    fn take_idle(&self, cutoff: Instant) -> Vec<ChannelName> {
        let candidates = std::mem::take(&mut *self.lingering.lock());
        if candidates.is_empty() {
            return Vec::new();
        }
        let mut idle = Vec::new();
        let mut young = Vec::new();
        {
            let mut channels = self.channels.lock();
            for channel in candidates {
                let Some(state) = channels.get(&channel) else {
                    continue; // (listed twice: forgotten already)
                };
                if !state.is_idle() {
                    continue; // in use again: listed anew when it next goes idle
                }
                if state.idle_since.is_none_or(|t| t > cutoff) {
                    young.push(channel);
                } else {
                    channels.remove(&channel);
                    idle.push(channel);
                }
            }
        }
        self.lingering.lock().extend(young);
        idle
    }

    /// Marks `channels` confirmed; the watchers of those newly confirmed are told, at once
    /// (what was sent before a subscription is for them to check; one check of a hold whose
    /// lock and keyspace channels were confirmed together).
    fn mark_all_ready(&self, channels: &[ChannelName]) {
        let mut told = Vec::new();
        {
            let mut states = self.channels.lock();
            for channel in channels {
                if let Some(state) = states.get_mut(channel) {
                    if !state.confirmed && state.watchers > 0 {
                        told.push(channel.clone());
                    }
                    state.set_confirmed(true);
                }
            }
        }
        self.tell(told);
    }

    /// Marks `channel` no longer confirmed (its subscription is gone or moving).
    fn mark_unready(&self, channel: &str) {
        if let Some(state) = self.channels.lock().get_mut(channel) {
            state.set_confirmed(false);
        }
    }

    fn is_ready(&self, channel: &str) -> bool {
        self.channels
            .lock()
            .get(channel)
            .is_some_and(|state| state.confirmed)
    }

    /// After `channels` were subscribed again somewhere: bump the epoch, then wake their
    /// waiters (a message may have been published while they were nowhere).
    fn rewake(&self, channels: &[ChannelName]) {
        if channels.is_empty() {
            return;
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let mut watched = Vec::new();
        {
            let states = self.channels.lock();
            for channel in channels {
                if let Some(state) = states.get(channel) {
                    state.wake();
                    if state.watchers > 0 {
                        watched.push(channel.clone());
                    }
                }
            }
        }
        self.tell(watched);
    }
}

/// `channels` as redis-rs takes them (it writes no `Arc<str>`).
fn names(channels: &[ChannelName]) -> Vec<&str> {
    channels.iter().map(|channel| &**channel).collect()
}

/// A sharded (un)subscription command.
#[derive(Clone, Copy)]
enum Shard {
    Subscribe,
    Unsubscribe,
}

/// Sends `SSUBSCRIBE` (or `SUNSUBSCRIBE`; `SUBSCRIBE`, `UNSUBSCRIBE` where not `sharded`, and
/// for a keyspace channel) for each of `channels`, one channel per command,
/// pipelined [`SUBSCRIBE_BATCH`] at a time, and returns each channel's answer in order. One
/// command per channel, because a command naming several must keep to one slot on a cluster,
/// and because redis-rs 1.8 takes the first of a raw command's confirmations as its whole
/// reply (the others would answer the connection's next commands: a later subscription would
/// read as confirmed before the server made it).
async fn shard_each(
    conn: &mut MultiplexedConnection,
    shard: Shard,
    sharded: bool,
    channels: &[ChannelName],
) -> redis::RedisResult<Vec<redis::RedisResult<()>>> {
    let mut answers = Vec::with_capacity(channels.len());
    for batch in channels.chunks(SUBSCRIBE_BATCH) {
        let mut pipe = redis::pipe();
        for channel in batch {
            // (A keyspace channel is no shard channel: a node publishes its own keys' events
            // to plain subscribers.)
            let plain = !sharded || crate::names::keyspace_key(channel).is_some();
            let name = match (shard, plain) {
                (Shard::Subscribe, false) => "SSUBSCRIBE",
                (Shard::Unsubscribe, false) => "SUNSUBSCRIBE",
                (Shard::Subscribe, true) => "SUBSCRIBE",
                (Shard::Unsubscribe, true) => "UNSUBSCRIBE",
            };
            pipe.cmd(name).arg(&**channel);
        }
        let replies: Vec<redis::RedisResult<redis::Value>> =
            pipe.ignore_errors().query_async(conn).await?;
        if replies.len() != batch.len() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "pipelined sharded subscriptions answered short",
            )));
        }
        answers.extend(replies.into_iter().map(|reply| reply.map(drop)));
    }
    Ok(answers)
}
