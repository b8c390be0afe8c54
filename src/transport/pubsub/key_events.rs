//! A pub/sub connection of its own at the node that serves one key, for what a non-holder
//! hears of a lock ([`Lock::events`](crate::Lock::events)): the lock's channel (an unlock's
//! message), and the server's keyspace events for the key, which a node sends only to its own
//! subscribers. (Not through the hub: the node's `del` and `expired` key-event channels carry
//! every key's events, which no waiter or holder of the client wants.)
//!
//! The connection follows the key's node: after a drop, a failover (Sentinel names another
//! master) or a slot move (the cluster view names another), it connects again where the key
//! is served, subscribes again, and says so ([`Heard::Subscribed`] with `again`), since a
//! message may have been missed meanwhile.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{shard_each, Shard, MAX_BACKOFF, MIN_BACKOFF};
use crate::config::Config;
use crate::transport::{node_info, Connection, NodeAddr};

/// How often the connection checks that it is alive and still at the key's node.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// What the node's `notify-keyspace-events` sends for a key: `None` where the server would
/// not say (`CONFIG` refused: a managed server, an ACL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Keyspace {
    /// `del` events (`E` with `g` or `A`).
    pub(crate) del: Option<bool>,
    /// `expired` events (`E` with `x` or `A`).
    pub(crate) expired: Option<bool>,
}

impl Keyspace {
    /// Reads a `notify-keyspace-events` value (`CONFIG GET` answers it in its own letters,
    /// `A` standing for `g$lshzxetd` and more).
    pub(crate) fn of(flags: &str) -> Keyspace {
        let has = |c| flags.contains(c);
        let events = has('E');
        Keyspace {
            del: Some(events && (has('g') || has('A'))),
            expired: Some(events && (has('x') || has('A'))),
        }
    }
}

/// What the connection heard.
#[derive(Debug)]
pub(crate) enum Heard {
    /// Subscribed at the key's node, with what that node's keyspace events send: the first
    /// time, then after each reconnect (when something may have been missed).
    Subscribed { keyspace: Keyspace },
    /// A message on the lock's channel.
    Message,
    /// A keyspace event for the key: `del` or `expired`.
    KeyEvent(&'static str),
}

/// Where the key is served, how to reach it, and what to subscribe there.
pub(crate) struct KeyEvents {
    key: String,
    channel: String,
    sharded: bool,
    conn: Connection,
    base: redis::ConnectionInfo,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl KeyEvents {
    /// The events of `key` and its lock's `channel` (published with `SPUBLISH` when
    /// `sharded`), through the deployment `conn` reaches.
    pub(crate) fn new(
        config: &Config,
        conn: Connection,
        key: String,
        channel: String,
        sharded: bool,
    ) -> crate::Result<KeyEvents> {
        let connection = config.connection_info()?;
        let redis =
            (connection.redis_settings().clone()).set_protocol(redis::ProtocolVersion::RESP3);
        Ok(KeyEvents {
            key,
            channel,
            sharded,
            conn,
            base: connection.set_redis_settings(redis),
            connect_timeout: config.connect_timeout(),
            response_timeout: config.response_timeout(),
        })
    }

    /// Connects and subscribes (so that nothing after this returns is missed), then hands
    /// the connection to a task that runs until the receiver is dropped or `shutdown`.
    pub(crate) async fn start(
        self,
        shutdown: CancellationToken,
    ) -> crate::Result<mpsc::UnboundedReceiver<Heard>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let first = self
            .connect(&tx)
            .await
            .map_err(crate::transport::node::pubsub_error)?;
        tokio::spawn(self.run(first, tx, shutdown));
        Ok(rx)
    }

    /// The node serving the key now (`None`: the client's own address, one server).
    fn node(&self) -> Option<NodeAddr> {
        match &self.conn {
            Connection::Standalone(_) => None,
            Connection::Sentinel(sentinel) => Some(sentinel.master().borrow().clone()),
            Connection::Cluster { topology, .. } => topology.master_of(&self.key),
            // (Lock events are not modelled: they open a connection of their own.)
            #[cfg(feature = "model")]
            Connection::Model(_) => None,
        }
    }

    async fn connect(&self, tx: &mpsc::UnboundedSender<Heard>) -> redis::RedisResult<Connected> {
        let node = self.node();
        let info = match &node {
            Some((host, port)) => node_info(&self.base, host, *port),
            None => self.base.clone(),
        };
        let (pushes, heard) = mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_push_sender(pushes);
        let client = redis::Client::open(info)?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let keyspace = keyspace_of(&mut conn).await;
        let db = self.base.redis_settings().db();
        let mut classic = Vec::new();
        if keyspace.del != Some(false) {
            classic.push(format!("__keyevent@{db}__:del"));
        }
        if keyspace.expired != Some(false) {
            classic.push(format!("__keyevent@{db}__:expired"));
        }
        if self.sharded {
            let channel = [self.channel.as_str().into()];
            let answers = shard_each(&mut conn, Shard::Subscribe, true, &channel);
            answers
                .await?
                .into_iter()
                .collect::<redis::RedisResult<()>>()?;
        } else {
            classic.push(self.channel.clone());
        }
        // (A bare SUBSCRIBE is an error: on a sharded cluster without keyspace events there is
        // no classic channel to hear.)
        if !classic.is_empty() {
            conn.subscribe(&classic).await?;
        }
        let _ = tx.send(Heard::Subscribed { keyspace });
        Ok(Connected { conn, heard, node })
    }

    async fn run(
        self,
        mut connected: Connected,
        tx: mpsc::UnboundedSender<Heard>,
        shutdown: CancellationToken,
    ) {
        let mut check = tokio::time::interval(CHECK_INTERVAL);
        loop {
            // Hear until the connection drops or the key's node changes.
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tx.closed() => return,
                    push = connected.heard.recv() => match push {
                        // The node dropped the sharded channel (its slot moved) or the
                        // connection: subscribe again where the key is served now.
                        Some(push) if matches!(push.kind, PushKind::SUnsubscribe | PushKind::Disconnection) => break,
                        Some(push) => {
                            if let Some(heard) = self.read(push) {
                                let _ = tx.send(heard);
                            }
                        }
                        None => break,
                    },
                    _ = check.tick() => {
                        let alive = redis::cmd("PING").query_async::<Value>(&mut connected.conn).await;
                        if alive.is_err() || self.node() != connected.node {
                            break;
                        }
                    }
                }
            }
            // Connect again where the key is served, with backoff.
            let mut backoff = MIN_BACKOFF;
            connected = loop {
                // On a cluster, where the key is served is read again first (the view that led
                // here may be the stale one).
                if let Some(topology) = self.conn.topology() {
                    if let Err(err) = topology.refreshed().await {
                        tracing::debug!(key = %self.key, error = %err, "lock events: cannot read the cluster's slots");
                    }
                }
                match self.connect(&tx).await {
                    Ok(connected) => break connected,
                    Err(err) => {
                        tracing::debug!(key = %self.key, error = %err, "lock events: cannot subscribe; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tx.closed() => return,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            };
        }
    }

    /// What a push means for this key, if anything.
    fn read(&self, push: PushInfo) -> Option<Heard> {
        if !matches!(push.kind, PushKind::Message | PushKind::SMessage) {
            return None;
        }
        let mut data = push.data.into_iter();
        let channel: String = redis::from_redis_value(data.next()?).ok()?;
        let payload: Vec<u8> = redis::from_redis_value(data.next()?).ok()?;
        if channel == self.channel {
            return Some(Heard::Message);
        }
        if payload != self.key.as_bytes() {
            return None;
        }
        if channel.ends_with("__:del") {
            Some(Heard::KeyEvent("del"))
        } else if channel.ends_with("__:expired") {
            Some(Heard::KeyEvent("expired"))
        } else {
            None
        }
    }
}

struct Connected {
    conn: MultiplexedConnection,
    heard: mpsc::UnboundedReceiver<PushInfo>,
    node: Option<NodeAddr>,
}

/// What the node's keyspace events send, from `CONFIG GET` (unknown where refused).
async fn keyspace_of(conn: &mut MultiplexedConnection) -> Keyspace {
    let mut get = redis::cmd("CONFIG");
    get.arg("GET").arg("notify-keyspace-events");
    // (A map in RESP3, pairs in RESP2: both read as one.)
    let reply = get.query_async::<std::collections::HashMap<String, String>>(conn);
    match reply
        .await
        .ok()
        .and_then(|mut m| m.remove("notify-keyspace-events"))
    {
        Some(flags) => Keyspace::of(&flags),
        None => Keyspace {
            del: None,
            expired: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keyspace_setting_reads_as_the_server_spells_it() {
        let on = |del, expired| Keyspace {
            del: Some(del),
            expired: Some(expired),
        };
        assert_eq!(Keyspace::of(""), on(false, false));
        assert_eq!(Keyspace::of("gxE"), on(true, true));
        assert_eq!(Keyspace::of("AE"), on(true, true));
        assert_eq!(Keyspace::of("xE"), on(false, true));
        assert_eq!(
            Keyspace::of("gxK"),
            on(false, false),
            "keyspace, not keyevent"
        );
    }
}
