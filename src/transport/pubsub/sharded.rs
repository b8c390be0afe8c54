//! Pub/sub on a cluster: each channel is subscribed at the master of its slot (`SSUBSCRIBE` in
//! sharded mode), over one connection per master ([`Link`]) shared by all of this client's
//! waiters there, opened when a first channel needs it. A key's keyspace channel (the loss
//! watch's, where the nodes send keyspace events) is subscribed with a plain `SUBSCRIBE` at the
//! master of its key: a node sends only its own keys' events, and never as sharded messages.
//!
//! In classic mode every channel is a plain one (`SUBSCRIBE`). A `PUBLISH` reaches every node,
//! so a lock's channel would be heard anywhere; it is still placed at its slot's master, for
//! most names the node whose scripts publish on it (the channel's hash tag is the lock's name),
//! which spares the message a hop over the cluster bus and spreads the channels over the
//! masters. A keyspace channel must be at its key's master, as in sharded mode: one connection
//! at one node would hear that node's keys alone. No node pushes an `UNSUBSCRIBE` when a slot
//! moves: the channels follow the topology's reads.
//!
//! The [`Router`] decides where each channel lives, by the client's [`Topology`]. When a
//! channel may have moved (the node pushed a `SUNSUBSCRIBE` it was not asked for, as a demoted
//! master or a node that gave its slot away does; an `SSUBSCRIBE` was answered `MOVED`; a link
//! dropped) it has the topology read again; after every read (those and the topology's own
//! periodic ones) it subscribes each
//! affected channel where its slot lives now, and then wakes that channel's waiters and bumps
//! the hub's epoch: a message may have been published while the channel was nowhere, so each
//! waiter makes one attempt. (redis-rs's own subscription tracker drops a sharded channel on a
//! failover and never subscribes it again: this module replaces it.)

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, PushKind, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    node_info, shard_each, ChannelName, Command, Hub, Shard, LINGER, MAX_BACKOFF, MIN_BACKOFF,
    PING_INTERVAL,
};
use crate::transport::topology::{Topology, View};
use crate::transport::NodeAddr;

/// A node that pushed `SUNSUBSCRIBE` for a channel no longer serves its slot, whatever a slot
/// map read right after says (the other nodes may not have heard yet): the map is read again,
/// this often, for up to [`DISBELIEVE`], before the channel is subscribed there again.
const REREAD: Duration = Duration::from_millis(100);
const DISBELIEVE: Duration = Duration::from_secs(3);

/// Which link an event comes from: its node, and its number (a link that dropped is replaced
/// by a new one to the same node; the old one's last words must not touch the new one).
type From = (NodeAddr, u64);

/// What links tell the router.
enum Event {
    /// The node confirmed these channels.
    Subscribed(From, Vec<ChannelName>),
    /// The channel is no longer served here (pushed `SUNSUBSCRIBE`, `MOVED`).
    Moved(From, ChannelName),
    /// The connection could not be made, or dropped.
    Lost(From),
}

/// A link as the router keeps it.
struct LinkHandle {
    id: u64,
    orders: mpsc::UnboundedSender<Order>,
}

/// What the router asks of a link.
enum Order {
    Subscribe(Vec<ChannelName>),
    Unsubscribe(Vec<ChannelName>),
}

/// Decides which master each channel is subscribed at, and keeps it so.
pub(super) struct Router {
    hub: Arc<Hub>,
    /// Which master serves which slots.
    topology: Arc<Topology>,
    /// Login, TLS and RESP3 for node connections.
    base: redis::ConnectionInfo,
    /// `SSUBSCRIBE` (sharded mode), or plain `SUBSCRIBE` (classic mode).
    sharded: bool,
    commands: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Event>,
    inbox: mpsc::UnboundedReceiver<Event>,
    /// The topology as last read.
    view: Arc<View>,
    links: HashMap<NodeAddr, LinkHandle>,
    next_link: u64,
    connect_timeout: Duration,
    /// Where each wanted channel is subscribed, or being subscribed.
    placed: HashMap<ChannelName, NodeAddr>,
    /// Channels a node said it no longer serves, and since when.
    moved: HashMap<ChannelName, (NodeAddr, Instant)>,
    /// Whether every wanted channel was placed where the view says, with no link lost and no
    /// channel moved since: a read that finds the same slot map then has nothing to do (a
    /// client holding 100,000 watched locks has as many channels, and the topology is read
    /// every few seconds).
    settled: bool,
    shutdown: CancellationToken,
}

impl Router {
    pub(super) fn new(
        hub: Arc<Hub>,
        topology: Arc<Topology>,
        base: redis::ConnectionInfo,
        sharded: bool,
        commands: mpsc::UnboundedReceiver<Command>,
        connect_timeout: Duration,
    ) -> Router {
        let (events, inbox) = mpsc::unbounded_channel();
        Router {
            hub,
            view: topology.view(),
            topology,
            base,
            sharded,
            commands,
            events,
            inbox,
            links: HashMap::new(),
            next_link: 0,
            connect_timeout,
            placed: HashMap::new(),
            moved: HashMap::new(),
            settled: false,
            shutdown: CancellationToken::new(),
        }
    }

    /// Starts the router's task, which runs until `shutdown` is cancelled (a cluster whose
    /// slot map could not be read at connect is reported now).
    pub(super) async fn start(mut self, shutdown: CancellationToken) -> redis::RedisResult<()> {
        if self.view.epoch == 0 {
            self.view = self.topology.refreshed().await?;
        }
        self.hub.connected.store(true, Ordering::Release);
        self.shutdown = shutdown;
        tokio::spawn(self.run());
        Ok(())
    }

    async fn run(mut self) {
        let mut sweep = tokio::time::interval(LINGER);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reads = self.topology.reads_watch();
        // When the slot map should be read again, and how long to wait after a failed read.
        let mut refresh_at: Option<Instant> = None;
        let mut backoff = MIN_BACKOFF;
        loop {
            let refresh = async {
                match refresh_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => break,
                command = self.commands.recv() => {
                    let Some(first) = command else { break };
                    // Every channel asked for by now, placed together (each master's share
                    // goes out pipelined).
                    let mut channels = first.batch(&mut self.commands);
                    channels.retain(|c| self.hub.is_wanted(c) && !self.placed.contains_key(c));
                    if !channels.is_empty() {
                        self.place(channels);
                    }
                }
                Some(event) = self.inbox.recv() => match event {
                    Event::Subscribed((node, _), channels) => {
                        let here: Vec<ChannelName> = channels
                            .into_iter()
                            .filter(|c| self.placed.get(c) == Some(&node))
                            .collect();
                        self.hub.mark_all_ready(&here);
                        // Published while the channel was nowhere? Each waiter looks once.
                        self.hub.rewake(&here);
                    }
                    Event::Moved((node, _), channel) => {
                        self.settled = false;
                        if self.placed.get(&channel) == Some(&node) {
                            self.hub.mark_unready(&channel);
                        }
                        self.moved.insert(channel, (node, Instant::now()));
                        refresh_at.get_or_insert_with(Instant::now);
                    }
                    Event::Lost((node, id)) => {
                        if self.links.get(&node).is_none_or(|l| l.id != id) {
                            continue; // a link already replaced
                        }
                        self.links.remove(&node);
                        self.settled = false;
                        for (channel, _) in self.placed.iter().filter(|(_, n)| **n == node) {
                            self.hub.mark_unready(channel);
                        }
                        refresh_at.get_or_insert_with(|| Instant::now() + backoff);
                    }
                },
                _ = refresh => {
                    refresh_at = None;
                    match self.topology.refreshed().await {
                        Ok(view) => {
                            self.view = view;
                            backoff = MIN_BACKOFF;
                            if self.replace_all() {
                                refresh_at = Some(Instant::now() + REREAD);
                            }
                        }
                        Err(err) => {
                            tracing::debug!(error = %err, "reading the cluster slot map failed; retrying");
                            refresh_at = Some(Instant::now() + backoff);
                            backoff = (backoff * 2).min(MAX_BACKOFF);
                        }
                    }
                }
                Ok(()) = reads.changed() => {
                    // Read by the topology's own scan (or for another reader): no I/O here.
                    let view = self.topology.view();
                    if view.epoch != self.view.epoch && refresh_at.is_none() {
                        let same = self.settled && view.slots == self.view.slots;
                        self.view = view;
                        if !same && self.replace_all() {
                            refresh_at = Some(Instant::now() + REREAD);
                        }
                    }
                }
                _ = sweep.tick() => {
                    let Some(cutoff) = Instant::now().checked_sub(LINGER) else { continue };
                    let mut leaving: HashMap<NodeAddr, Vec<ChannelName>> = HashMap::new();
                    for channel in self.hub.take_idle(cutoff) {
                        if let Some(node) = self.placed.remove(&channel) {
                            leaving.entry(node).or_default().push(channel);
                        }
                    }
                    for (node, channels) in leaving {
                        if let Some(link) = self.links.get(&node) {
                            let _ = link.orders.send(Order::Unsubscribe(channels));
                        }
                    }
                }
            }
        }
        self.hub.connected.store(false, Ordering::Release);
        self.hub.wake_all();
    }

    /// The master serving `channel`'s slot, per the slot map (a keyspace channel's: its
    /// key's, since a node sends its own keys' events).
    fn node_of(&self, channel: &str) -> Option<NodeAddr> {
        let routed = crate::names::keyspace_key(channel).unwrap_or(channel);
        self.view.slots.master_of(routed).cloned()
    }

    /// Subscribes `channels` at their masters, opening links as needed.
    fn place(&mut self, channels: Vec<ChannelName>) {
        let mut by_node: HashMap<NodeAddr, Vec<ChannelName>> = HashMap::new();
        for channel in channels {
            match self.node_of(&channel) {
                Some(node) => {
                    self.placed.insert(channel.clone(), node.clone());
                    by_node.entry(node).or_default().push(channel);
                }
                // A slot nobody serves (mid-failover): looked at again on the next refresh.
                None => {
                    self.placed.remove(&channel);
                    self.settled = false;
                }
            }
        }
        for (node, channels) in by_node {
            let link = self.link(&node);
            let _ = link.send(Order::Subscribe(channels));
        }
    }

    /// After a new slot map: every wanted channel whose master changed, or that is not
    /// confirmed where it is, is subscribed (again) where its slot lives now. Returns whether
    /// the map looked stale (it still names a node that gave a channel up), so should be read
    /// again soon.
    fn replace_all(&mut self) -> bool {
        self.settled = true;
        let wanted = self.hub.channel_names();
        let mut moving = Vec::new();
        let mut stale = false;
        for channel in wanted {
            let now = self.node_of(&channel);
            if let Some((gone_from, since)) = self.moved.get(&channel) {
                if now.as_ref() == Some(gone_from) && since.elapsed() < DISBELIEVE {
                    stale = true;
                    continue;
                }
                self.moved.remove(&channel);
            }
            let was = self.placed.get(&channel).cloned();
            let linked = now.as_ref().is_some_and(|n| self.links.contains_key(n));
            if was != now || !linked || !self.hub.is_ready(&channel) {
                if let (Some(was), true) = (&was, was != now) {
                    if let Some(link) = self.links.get(was) {
                        let _ = link.orders.send(Order::Unsubscribe(vec![channel.clone()]));
                    }
                }
                self.hub.mark_unready(&channel);
                moving.push(channel);
            }
        }
        // Links to nodes that no longer serve a slot (demoted, gone) are closed.
        let masters: HashSet<NodeAddr> = self.view.slots.masters().into_iter().cloned().collect();
        // (Dropping a handle ends its link, whose loss report then finds it replaced.)
        self.links.retain(|node, _| masters.contains(node));
        if !moving.is_empty() {
            tracing::debug!(
                channels = moving.len(),
                "re-subscribing sharded channels after a topology change"
            );
            self.place(moving);
        }
        self.moved
            .retain(|channel, _| self.placed.contains_key(channel) || self.hub.is_wanted(channel));
        self.settled &= !stale;
        stale
    }

    fn link(&mut self, node: &NodeAddr) -> mpsc::UnboundedSender<Order> {
        if let Some(link) = self.links.get(node) {
            if !link.orders.is_closed() {
                return link.orders.clone();
            }
        }
        let (orders, inbox) = mpsc::unbounded_channel();
        self.next_link += 1;
        let id = self.next_link;
        let link = Link {
            from: (node.clone(), id),
            connect_timeout: self.connect_timeout,
            info: node_info(&self.base, &node.0, node.1),
            sharded: self.sharded,
            hub: self.hub.clone(),
            orders: inbox,
            events: self.events.clone(),
            subscribed: HashSet::new(),
            leaving: HashSet::new(),
        };
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = link.run() => {}
            }
        });
        self.links.insert(
            node.clone(),
            LinkHandle {
                id,
                orders: orders.clone(),
            },
        );
        orders
    }
}

/// One connection to one master, carrying the channels of its slots.
struct Link {
    from: From,
    connect_timeout: Duration,
    info: redis::ConnectionInfo,
    /// As the router's.
    sharded: bool,
    hub: Arc<Hub>,
    orders: mpsc::UnboundedReceiver<Order>,
    events: mpsc::UnboundedSender<Event>,
    /// Confirmed here.
    subscribed: HashSet<ChannelName>,
    /// Asked to leave (their `SUNSUBSCRIBE` confirmations are expected).
    leaving: HashSet<ChannelName>,
}

impl Link {
    /// Serves until the connection fails or the router lets the link go; reports the loss.
    async fn run(mut self) {
        if let Err(err) = self.serve().await {
            tracing::debug!(node = ?self.from.0, error = %err, "sharded pub/sub link lost");
        }
        let _ = self.events.send(Event::Lost(self.from.clone()));
    }

    async fn serve(&mut self) -> redis::RedisResult<()> {
        let (tx, mut pushes) = mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.hub.response_timeout))
            .set_push_sender(tx);
        let client = redis::Client::open(self.info.clone())?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        if let Some(name) = &self.hub.conn_name {
            name.apply(&mut conn).await?;
        }
        let mut ping = tokio::time::interval(PING_INTERVAL);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ping.tick().await;
        loop {
            tokio::select! {
                biased;
                push = pushes.recv() => {
                    let Some(push) = push else { return Ok(()) };
                    match push.kind {
                        PushKind::Disconnection => return Ok(()),
                        PushKind::SMessage | PushKind::Message => {
                            if let [Value::BulkString(channel), Value::BulkString(payload), ..] =
                                push.data.as_slice()
                            {
                                self.hub.dispatch(channel, payload);
                            }
                        }
                        PushKind::SUnsubscribe | PushKind::Unsubscribe => {
                            if let Some(Value::BulkString(channel)) = push.data.first() {
                                self.unsubscribed(&String::from_utf8_lossy(channel));
                            }
                        }
                        _ => {}
                    }
                }
                order = self.orders.recv() => {
                    let Some(order) = order else { return Ok(()) };
                    match order {
                        Order::Subscribe(channels) => self.subscribe(&mut conn, channels).await?,
                        Order::Unsubscribe(mut channels) => {
                            channels.retain(|channel| self.subscribed.remove(channel));
                            self.leaving.extend(channels.iter().cloned());
                            // (A channel the node no longer serves answers `MOVED`: gone anyway.)
                            shard_each(&mut conn, Shard::Unsubscribe, self.sharded, &channels).await?;
                        }
                    }
                }
                _ = ping.tick() => {
                    redis::cmd("PING").query_async::<Value>(&mut conn).await?;
                }
            }
        }
    }

    /// Subscribes `channels`, pipelined (one channel per command, so one slot each, as a
    /// cluster requires), and tells the router which were confirmed and which moved.
    async fn subscribe(
        &mut self,
        conn: &mut MultiplexedConnection,
        channels: Vec<ChannelName>,
    ) -> redis::RedisResult<()> {
        for channel in &channels {
            self.leaving.remove(channel);
        }
        let answers = shard_each(conn, Shard::Subscribe, self.sharded, &channels).await?;
        let mut confirmed = Vec::with_capacity(channels.len());
        for (channel, answer) in channels.into_iter().zip(answers) {
            match answer {
                Ok(()) => {
                    self.subscribed.insert(channel.clone());
                    confirmed.push(channel);
                }
                // Not this node's slot (any more): the router looks again.
                Err(err)
                    if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved) =>
                {
                    let _ = self.events.send(Event::Moved(self.from.clone(), channel));
                }
                Err(err) => return Err(err),
            }
        }
        let _ = self
            .events
            .send(Event::Subscribed(self.from.clone(), confirmed));
        Ok(())
    }

    /// A `SUNSUBSCRIBE` push: ours (a channel let go), or the server's (the slot moved, or the
    /// node was demoted), which the router must hear of.
    fn unsubscribed(&mut self, channel: &str) {
        if self.leaving.remove(channel) {
            return;
        }
        if let Some(channel) = self.subscribed.take(channel) {
            let _ = self.events.send(Event::Moved(self.from.clone(), channel));
        }
    }
}
