//! One pub/sub connection for all of a client's channels: to the server, or to the master the
//! sentinels name (moving with it). It reconnects with backoff on its own, subscribes every
//! wanted channel again, bumps the hub's epoch and wakes every waiter, so none waits out a
//! message that was published while it was away.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, PushInfo, PushKind, Value};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    names, shard_each, ChannelName, Command, Hub, Shard, LINGER, MAX_BACKOFF, MIN_BACKOFF,
    PING_INTERVAL,
};
use crate::transport::{node_info, NodeAddr};

/// Where the connection goes.
pub(super) enum Endpoint {
    /// The one server.
    Fixed(redis::ConnectionInfo),
    /// The master the sentinels name now, with the login and TLS of `base`; a switch ends
    /// the connection to the old one.
    SentinelMaster {
        base: redis::ConnectionInfo,
        master: watch::Receiver<NodeAddr>,
    },
}

impl Endpoint {
    async fn resolve(&mut self) -> redis::RedisResult<redis::ConnectionInfo> {
        match self {
            Endpoint::Fixed(info) => Ok(info.clone()),
            Endpoint::SentinelMaster { base, master } => {
                let (host, port) = master.borrow_and_update().clone();
                Ok(node_info(base, &host, port))
            }
        }
    }

    /// Resolves when the node connected to is no longer the right one (never, but on Sentinel).
    async fn moved(&mut self) {
        match self {
            Endpoint::SentinelMaster { master, .. } => {
                if master.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            _ => std::future::pending().await,
        }
    }
}

/// A live pub/sub connection and the pushes it delivers.
pub(super) type Connected = (MultiplexedConnection, mpsc::UnboundedReceiver<PushInfo>);

pub(super) struct HubTask {
    pub(super) hub: Arc<Hub>,
    pub(super) endpoint: Endpoint,
    pub(super) sharded: bool,
    pub(super) connect_timeout: Duration,
    pub(super) response_timeout: Duration,
    pub(super) commands: mpsc::UnboundedReceiver<Command>,
}

impl HubTask {
    pub(super) async fn run(mut self, first: Connected, shutdown: CancellationToken) {
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

    pub(super) async fn connect(&mut self) -> redis::RedisResult<Connected> {
        let (tx, rx) = mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_push_sender(tx);
        let client = redis::Client::open(self.endpoint.resolve().await?)?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        if let Some(name) = &self.hub.conn_name {
            name.apply(&mut conn).await?;
        }
        // Everything the waiters want now, in one command.
        let channels = self.hub.channel_names();
        if !channels.is_empty() {
            self.subscribe(&mut conn, &channels).await?;
        }
        self.hub.connected.store(true, Ordering::Release);
        // Only what was subscribed: a channel a waiter asked for during the round trip is
        // confirmed by its own command, or the waiter would take it as live, attempt, and
        // sleep through a message published before the server had it.
        self.hub.mark_all_ready(&channels);
        self.hub.wake_all();
        Ok((conn, rx))
    }

    async fn subscribe(
        &self,
        conn: &mut MultiplexedConnection,
        channels: &[ChannelName],
    ) -> redis::RedisResult<()> {
        if self.sharded {
            shard_each(conn, Shard::Subscribe, true, channels)
                .await?
                .into_iter()
                .collect()
        } else {
            conn.subscribe(names(channels)).await
        }
    }

    async fn unsubscribe(
        &self,
        conn: &mut MultiplexedConnection,
        channels: &[ChannelName],
    ) -> redis::RedisResult<()> {
        if self.sharded {
            shard_each(conn, Shard::Unsubscribe, true, channels)
                .await?
                .into_iter()
                .collect()
        } else {
            conn.unsubscribe(names(channels)).await
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
                    let Some(first) = command else { return };
                    // Every channel asked for by now, in one command (a burst of holds
                    // watched, or of waiters on many locks, costs one round trip).
                    let mut channels = first.batch(&mut self.commands);
                    channels.retain(|channel| self.hub.is_wanted(channel));
                    if channels.is_empty() {
                        continue;
                    }
                    if let Err(err) = self.subscribe(&mut conn, &channels).await {
                        tracing::debug!(error = %err, "pub/sub command failed; reconnecting");
                        return;
                    }
                    self.hub.mark_all_ready(&channels);
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
                _ = self.endpoint.moved() => {
                    tracing::debug!("the master moved; subscribing at the new one");
                    return;
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
