//! The subscription hub: one RESP3 pub/sub connection per client, shared by every waiter.
//!
//! Waiters of the same lock share one subscription to its channel, counted by reference. When
//! the last waiter leaves, the subscription lingers for about a second before the hub drops
//! it, so a lock that is contended again soon (a hot lock) costs no SUBSCRIBE/UNSUBSCRIBE
//! pair per hand-off. A `0` message wakes one local waiter (only one can win the lock), a `1`
//! wakes them all; a message with no waiter left is dropped.
//!
//! The hub's own task owns the connection: when it drops, the task reconnects with backoff on
//! its own (no user traffic needed), subscribes every channel again, bumps the hub's epoch and
//! wakes every waiter, so none waits out a message that was published while it was away.
//! Waiters also keep a timer on the holder's TTL, so even a lost message costs at most one
//! lease, never a hang.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, PushInfo, PushKind, Value};
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::PublishMode;

/// How often the hub pings its connection to notice a silent drop.
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
}

struct ChannelState {
    refs: usize,
    notify: Arc<Notify>,
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

impl Hub {
    /// Creates the hub, makes its first connection (so a server that cannot serve pub/sub is
    /// reported now, not discovered by a waiter later), and starts its task, which runs until
    /// `shutdown` is cancelled.
    pub(crate) async fn start(
        connection: redis::ConnectionInfo,
        mode: PublishMode,
        connect_timeout: Duration,
        response_timeout: Duration,
        shutdown: CancellationToken,
    ) -> redis::RedisResult<Arc<Hub>> {
        let (commands, rx) = mpsc::unbounded_channel();
        let hub = Arc::new(Hub {
            channels: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            commands,
            response_timeout,
        });
        let redis = connection
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let info = connection.set_redis_settings(redis);
        let task = HubTask {
            hub: hub.clone(),
            info,
            sharded: mode.resolved() == PublishMode::SPublish,
            connect_timeout,
            response_timeout,
            commands: rx,
        };
        let first = task.connect().await?;
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

    /// Joins the subscription to `channel`, waiting (bounded by the response timeout) until the
    /// server has confirmed it, so that an acquire attempt made afterwards cannot miss the
    /// unlock message. If the hub is disconnected it returns at once: the waiter then relies on
    /// its TTL timer and on the wake-up that follows the reconnect.
    pub(crate) async fn subscribe(self: &Arc<Self>, channel: &str) -> Subscription {
        let mut subscription = {
            let mut channels = self.channels.lock();
            let state = channels.entry(channel.to_string()).or_insert_with(|| {
                let _ = self.commands.send(Command::Subscribe(channel.to_string()));
                ChannelState {
                    refs: 0,
                    notify: Arc::new(Notify::new()),
                    ready: watch::Sender::new(false),
                    idle_since: None,
                }
            });
            state.join(self, channel)
        };
        if self.connected.load(Ordering::Acquire) {
            let confirmed = subscription.ready.wait_for(|r| *r);
            let _ = tokio::time::timeout(self.response_timeout, confirmed).await;
        }
        subscription
    }

    /// Wakes every waiter of `channel` now (a holder of this client lost the lock, so its
    /// unlock message will never come).
    pub(crate) fn wake(&self, channel: &str) {
        if let Some(state) = self.channels.lock().get(channel) {
            state.notify.notify_waiters();
        }
    }

    /// Delivers one message to the channel's waiters.
    fn dispatch(&self, channel: &[u8], payload: &[u8]) {
        let Ok(channel) = std::str::from_utf8(channel) else {
            return;
        };
        let channels = self.channels.lock();
        let Some(state) = channels.get(channel).filter(|s| s.refs > 0) else {
            return;
        };
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
            let keep = state.refs > 0 || state.idle_since.is_none_or(|t| t > cutoff);
            if !keep {
                idle.push(channel.clone());
            }
            keep
        });
        idle
    }

    fn mark_ready(&self, channel: &str) {
        if let Some(state) = self.channels.lock().get(channel) {
            state.ready.send_replace(true);
        }
    }
}

/// A live pub/sub connection and the pushes it delivers.
type Connected = (MultiplexedConnection, mpsc::UnboundedReceiver<PushInfo>);

struct HubTask {
    hub: Arc<Hub>,
    info: redis::ConnectionInfo,
    sharded: bool,
    connect_timeout: Duration,
    response_timeout: Duration,
    commands: mpsc::UnboundedReceiver<Command>,
}

impl HubTask {
    async fn run(mut self, first: Connected, shutdown: CancellationToken) {
        let mut backoff = MIN_BACKOFF;
        let mut first = Some(first);
        loop {
            let session = async {
                let connected = match first.take() {
                    Some(connected) => Ok(connected),
                    None => self.connect().await,
                };
                match connected {
                    Ok((conn, pushes)) => {
                        backoff = MIN_BACKOFF;
                        self.serve(conn, pushes).await
                    }
                    Err(err) => tracing::debug!(error = %err, "pub/sub connect failed"),
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = session => {}
            }
            self.hub.connected.store(false, Ordering::Release);
            self.hub.set_all_ready(false);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        self.hub.connected.store(false, Ordering::Release);
        // Let waiters notice the shutdown instead of waiting out their timers.
        self.hub.wake_all();
    }

    async fn connect(&self) -> redis::RedisResult<Connected> {
        let (tx, rx) = mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_push_sender(tx);
        let client = redis::Client::open(self.info.clone())?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        // Everything the waiters want now, in one command.
        let channels = self.hub.channel_names();
        if !channels.is_empty() {
            self.subscribe(&mut conn, &channels).await?;
        }
        self.hub.connected.store(true, Ordering::Release);
        self.hub.set_all_ready(true);
        self.hub.wake_all();
        Ok((conn, rx))
    }

    async fn subscribe(
        &self,
        conn: &mut MultiplexedConnection,
        channels: &[String],
    ) -> redis::RedisResult<()> {
        if self.sharded {
            // Sharded subscriptions need no special client support in RESP3: the confirmation
            // arrives as a push, and the command's reply resolves once it does.
            redis::cmd("SSUBSCRIBE")
                .arg(channels)
                .exec_async(conn)
                .await
        } else {
            conn.subscribe(channels).await
        }
    }

    async fn unsubscribe(
        &self,
        conn: &mut MultiplexedConnection,
        channels: &[String],
    ) -> redis::RedisResult<()> {
        if self.sharded {
            redis::cmd("SUNSUBSCRIBE")
                .arg(channels)
                .exec_async(conn)
                .await
        } else {
            conn.unsubscribe(channels).await
        }
    }

    /// Serves one connection until it fails.
    async fn serve(
        &mut self,
        mut conn: MultiplexedConnection,
        mut pushes: mpsc::UnboundedReceiver<PushInfo>,
    ) {
        let mut ping = tokio::time::interval(PING_INTERVAL);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.tick().await;
        let mut sweep = tokio::time::interval(LINGER);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        sweep.tick().await;
        loop {
            tokio::select! {
                biased;
                push = pushes.recv() => {
                    let Some(push) = push else { return };
                    match push.kind {
                        PushKind::Disconnection => return,
                        PushKind::Message | PushKind::SMessage => {
                            if let [Value::BulkString(channel), Value::BulkString(payload), ..] =
                                push.data.as_slice()
                            {
                                self.hub.dispatch(channel, payload);
                            }
                        }
                        _ => {}
                    }
                }
                command = self.commands.recv() => {
                    let Some(command) = command else { return };
                    let result = match command {
                        Command::Subscribe(channel) if self.hub.is_wanted(&channel) => {
                            let result = self.subscribe(&mut conn, std::slice::from_ref(&channel)).await;
                            if result.is_ok() {
                                self.hub.mark_ready(&channel);
                            }
                            result
                        }
                        _ => Ok(()),
                    };
                    if let Err(err) = result {
                        tracing::debug!(error = %err, "pub/sub command failed; reconnecting");
                        return;
                    }
                }
                _ = sweep.tick() => {
                    let Some(cutoff) = Instant::now().checked_sub(LINGER) else { continue };
                    let idle = self.hub.take_idle(cutoff);
                    if !idle.is_empty() {
                        if let Err(err) = self.unsubscribe(&mut conn, &idle).await {
                            tracing::debug!(error = %err, "pub/sub unsubscribe failed; reconnecting");
                            return;
                        }
                    }
                }
                _ = ping.tick() => {
                    let pong: redis::RedisResult<Value> = redis::cmd("PING").query_async(&mut conn).await;
                    if let Err(err) = pong {
                        tracing::debug!(error = %err, "pub/sub ping failed; reconnecting");
                        return;
                    }
                }
            }
        }
    }
}
