//! The command connection every lock operation goes through, whatever the topology.
//!
//! The scripts see one [`Connection`] (a redis-rs [`ConnectionLike`], cheap to clone), ask it
//! how to batch many keys into one call ([`Connection::batches`]), and send their calls through
//! the grouped write ([`super::write`]), which asks it how to group them by node and where to
//! send each group. A standalone server is a `ConnectionManager` (kept [`Named`]); a cluster is redis-rs's
//! async cluster connection, which routes by key and follows `MOVED` and `ASK`, beside the
//! client's view of the cluster and the direct lane to each master ([`super::direct`]); a
//! Sentinel-watched master is the current master's connection, switched when the sentinels
//! name another ([`SentinelConnection`]).

use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use std::sync::Arc;

use super::direct::Direct;
use super::naming::Named;
use super::sentinel::SentinelConnection;
use super::shared_wait::SharedWait;
use super::slots::{self, Grouping};
use super::topology::{Replicas, Topology};
use super::write::{is_stale_route, packed, Call, Target};

/// The connection scripts and queries are sent on.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One server (reconnects by itself).
    Standalone(Named),
    /// A Redis Cluster.
    Cluster {
        /// One multiplexed connection per node, kept by redis-rs (routes by key, follows
        /// `MOVED` and `ASK`).
        conn: ClusterConnection,
        /// The client's view of the cluster.
        topology: Arc<Topology>,
        /// The direct lane script calls take to their master.
        direct: Arc<Direct>,
    },
    /// The master Redis Sentinel names, followed through failovers.
    Sentinel(SentinelConnection),
    /// The model checks' in-memory stand-in for one server (`model` feature only): in every
    /// other respect a standalone server.
    #[cfg(feature = "model")]
    Model(crate::model::link::Link),
}

impl Connection {
    /// How keys may share one call: a standalone server takes any keys in one script, a
    /// cluster only keys of one slot.
    pub(crate) fn grouping(&self) -> Grouping {
        match self {
            Connection::Cluster { .. } => Grouping::BySlot,
            _ => Grouping::Any,
        }
    }

    /// `standalone`, `cluster` or `sentinel`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Connection::Standalone(_) => "standalone",
            Connection::Cluster { .. } => "cluster",
            Connection::Sentinel(_) => "sentinel",
            #[cfg(feature = "model")]
            Connection::Model(_) => "model",
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster { .. })
    }

    /// Whether this topology counts replicas for writes to `WAIT` for (a standalone server
    /// never does, as Redisson's single-server mode sends no `WAIT`).
    pub(crate) fn counts_replicas(&self) -> bool {
        match self {
            Connection::Standalone(_) => false,
            #[cfg(feature = "model")]
            Connection::Model(_) => false,
            _ => true,
        }
    }

    /// How many replicas a write to `target` should `WAIT` for, if known.
    pub(super) fn replicas_at(&self, target: &Target) -> Option<u32> {
        match (self, target) {
            (Connection::Sentinel(conn), _) => Some(conn.replicas()),
            (Connection::Cluster { topology, .. }, Target::Node(node)) => {
                topology.replicas_of(node)
            }
            _ => None,
        }
    }

    /// `calls` grouped by the node that serves them, in order within each group: one group on
    /// one master; on a cluster one per master of the view (a key whose master the view does
    /// not know is grouped by its slot, and the view is read again).
    pub(super) fn group(&self, calls: &[Call]) -> Vec<(Target, Vec<usize>)> {
        let Some(topology) = self.topology() else {
            return vec![(Target::Master, (0..calls.len()).collect())];
        };
        let view = topology.view();
        let mut groups: Vec<(Target, Vec<usize>)> = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let target = match view.slots.master_of(&call.key) {
                Some(master) => Target::Node(master.clone()),
                None => {
                    topology.suspect();
                    Target::Slot(crate::names::cluster_slot(&call.key))
                }
            };
            match groups.iter_mut().find(|(t, _)| *t == target) {
                Some((_, members)) => members.push(i),
                None => groups.push((target, vec![i])),
            }
        }
        groups
    }

    /// Sends one command to `target` (on a cluster over the direct lane when its link is
    /// open; a stale answer there sends it again through the cluster connection). An error
    /// reply is an `Err`.
    pub(crate) async fn send_one(&mut self, target: &Target, cmd: &Cmd) -> RedisResult<Value> {
        if let (
            Connection::Cluster {
                conn: cluster,
                topology,
                direct,
            },
            Target::Node(node),
        ) = (&mut *self, target)
        {
            if let Some(mut link) = direct.link(node) {
                let answer = link
                    .req_packed_command(cmd)
                    .await
                    .and_then(Value::extract_error);
                match answer {
                    Err(err) if is_stale_route(&err) => topology.suspect(),
                    answer => return answer,
                }
            }
            // (Routed by its key: the cluster connection follows where the slot is now.)
            return cluster
                .req_packed_command(cmd)
                .await
                .and_then(Value::extract_error);
        }
        self.send_to_node(target, cmd).await
    }

    /// Sends the keyless command `cmd` (`SCAN`, `PUBSUB NUMSUB`, `CLIENT LIST`, `INFO`) to
    /// the node `target` itself: redis-rs would route a keyless command to any node. An
    /// error reply is an `Err`.
    pub(crate) async fn send_to_node(&mut self, target: &Target, cmd: &Cmd) -> RedisResult<Value> {
        match (self, target) {
            (
                Connection::Cluster {
                    conn: cluster,
                    direct,
                    ..
                },
                Target::Node(node),
            ) => {
                if let Some(mut link) = direct.link(node) {
                    return link
                        .req_packed_command(cmd)
                        .await
                        .and_then(Value::extract_error);
                }
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: node.0.clone(),
                    port: node.1,
                });
                cluster
                    .route_command(cmd.clone(), routing)
                    .await?
                    .extract_error()
            }
            (Connection::Cluster { conn: cluster, .. }, Target::Slot(slot)) => {
                let route = Route::new(*slot, SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                cluster
                    .route_command(cmd.clone(), routing)
                    .await?
                    .extract_error()
            }
            (conn, _) => conn
                .req_packed_command(cmd)
                .await
                .and_then(Value::extract_error),
        }
    }

    /// Sends `pipe` in one write to `target`, with one answer per command (an error reply
    /// fails only its command). On a cluster over the direct lane when its link is open; a
    /// write that failed there goes again through the cluster connection, routed by
    /// `first_key`'s slot.
    pub(crate) async fn send_many(
        &mut self,
        target: &Target,
        pipe: &Pipeline,
        first_key: &str,
    ) -> RedisResult<Vec<RedisResult<Value>>> {
        match self {
            Connection::Cluster {
                conn: cluster,
                topology,
                direct,
            } => {
                if let Target::Node(node) = target {
                    if let Some(mut link) = direct.link(node) {
                        match packed(&mut link, pipe).await {
                            Err(err) if is_stale_route(&err) => topology.suspect(),
                            replies => return replies,
                        }
                    }
                }
                let slot = target_slot(target, crate::names::cluster_slot(first_key));
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                // (By value: a cycle's renewals to a master are megabytes at 100k locks.)
                let replies = cluster
                    .route_pipeline(pipe.clone(), 0, pipe.len(), route)
                    .await?;
                Ok(replies.into_iter().map(Value::extract_error).collect())
            }
            conn => packed(conn, pipe).await,
        }
    }

    /// Sends `cmd` through redis-rs's routing (on a cluster: by its first key, following
    /// `MOVED` and `ASK`). An error reply is an `Err`.
    pub(crate) async fn routed(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        self.req_packed_command(cmd)
            .await
            .and_then(Value::extract_error)
    }

    /// Whether a write to `key` that `WAIT`ed for its master's replicas was acknowledged:
    /// by `acks` of them. None is still enough when the master, counted again at once, has
    /// replicas but none that can acknowledge (in a full resync since the last count: there
    /// was nothing to wait for); not when it has none left at all, which is also how a
    /// failover begins (see [`Replicas::excuse_no_ack`]). A count that differs from the one
    /// known is read again.
    pub(crate) async fn replicated(&mut self, key: &str, acks: u32) -> bool {
        match self {
            Connection::Sentinel(conn) if acks == 0 => {
                conn.recount().await.is_some_and(Replicas::excuse_no_ack)
            }
            Connection::Sentinel(conn) => {
                conn.acked(acks);
                true
            }
            Connection::Cluster {
                conn: cluster,
                topology,
                ..
            } if acks == 0 => {
                let counted = topology.recount(cluster, key).await;
                if counted.is_some_and(|c| c.listed == 0) {
                    topology.suspect();
                }
                counted.is_some_and(Replicas::excuse_no_ack)
            }
            Connection::Cluster { topology, .. } => {
                topology.acked(key, acks);
                true
            }
            _ => true,
        }
    }

    /// Splits `items` into batches of at most `max` that one call may carry (reordering them
    /// so that each batch is one slice).
    pub(crate) fn batches<'a, T>(
        &self,
        items: &'a mut [T],
        key: impl Fn(&T) -> &str,
        max: usize,
    ) -> Vec<&'a [T]> {
        slots::batches(items, key, max, self.grouping())
    }

    /// Splits `items` into batches of at most `max` keys one cluster master serves, whatever
    /// their slots, as the view has it (a key whose master it does not know is batched with
    /// its slot's alone); on one server, any keys. For a script that touches only the keys it
    /// is handed and answers for each the node does not serve (a renewal across slots).
    pub(crate) fn master_batches<'a, T>(
        &self,
        items: &'a mut [T],
        key: impl Fn(&T) -> &str,
        max: usize,
    ) -> Vec<&'a [T]> {
        let Some(topology) = self.topology() else {
            return slots::batches(items, key, max, Grouping::Any);
        };
        let view = topology.view();
        let masters = view.slots.masters();
        slots::batches_by(items, key, max, |k| {
            let master = view.slots.master_of(k);
            match master.and_then(|m| masters.binary_search(&m).ok()) {
                Some(i) => i as u32,
                None => 0x1_0000 + u32::from(crate::names::cluster_slot(k)),
            }
        })
    }

    /// Runs a keyless command on one master (any of them on a cluster). An error reply is an
    /// `Err` (redis-rs hands a routed command's error reply back as a value).
    pub(crate) async fn on_any_master(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let reply = match self {
            Connection::Standalone(conn) => cmd.query_async(conn).await?,
            Connection::Sentinel(conn) => cmd.query_async(conn).await?,
            Connection::Cluster { conn, .. } => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
                conn.route_command(cmd.clone(), routing).await?
            }
            #[cfg(feature = "model")]
            Connection::Model(conn) => conn.req_packed_command(cmd).await?,
        };
        reply.extract_error()
    }

    /// Every master: the one, or each master of the cluster as the view has it.
    pub(crate) fn masters(&self) -> Vec<Target> {
        match self.topology() {
            Some(topology) => (topology.view().slots.masters().into_iter())
                .map(|m| Target::Node(m.clone()))
                .collect(),
            None => vec![Target::Master],
        }
    }

    /// The master serving `key`.
    pub(crate) fn target_of(&self, key: &str) -> Target {
        match self.topology() {
            Some(topology) => match topology.master_of(key) {
                Some(master) => Target::Node(master),
                None => Target::Slot(crate::names::cluster_slot(key)),
            },
            None => Target::Master,
        }
    }

    /// Where `target` is, `host:port`, on a cluster or through Sentinel (`None` for a
    /// standalone server: the address the client was given).
    pub(crate) fn address_of(&self, target: &Target) -> Option<String> {
        match (self, target) {
            (Connection::Sentinel(conn), _) => {
                let master = conn.master().borrow().clone();
                Some(format!("{}:{}", master.0, master.1))
            }
            (Connection::Cluster { .. }, Target::Node(node)) => {
                Some(format!("{}:{}", node.0, node.1))
            }
            _ => None,
        }
    }

    /// The queues of writes that share a `WAIT` (none on a standalone server, which is never
    /// waited for).
    pub(super) fn shared_wait(&self) -> Option<&Arc<SharedWait>> {
        match self {
            Connection::Cluster { direct, .. } => Some(&direct.shared_wait),
            Connection::Sentinel(conn) => Some(conn.shared_wait()),
            _ => None,
        }
    }

    /// The client's view of the cluster (`None` on one server).
    pub(crate) fn topology(&self) -> Option<&Arc<Topology>> {
        match self {
            Connection::Cluster { topology, .. } => Some(topology),
            _ => None,
        }
    }
}

/// The slot a group goes to through the cluster connection: its own, or `fallback` (the
/// first key's) for a master the lane knows by address.
fn target_slot(target: &Target, fallback: u16) -> u16 {
    match target {
        Target::Slot(slot) => *slot,
        _ => fallback,
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Standalone(conn) => conn.req_packed_command(cmd),
            Connection::Cluster { conn, direct, .. } => match &direct.renamer {
                Some(renamer) => Box::pin(async move {
                    let reply = conn.req_packed_command(cmd).await;
                    if let Err(err) = &reply {
                        renamer.after(err, conn);
                    }
                    reply
                }),
                None => conn.req_packed_command(cmd),
            },
            Connection::Sentinel(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "model")]
            Connection::Model(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Standalone(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Cluster { conn, direct, .. } => match &direct.renamer {
                Some(renamer) => Box::pin(async move {
                    let replies = conn.req_packed_commands(cmd, offset, count).await;
                    if let Err(err) = &replies {
                        renamer.after(err, conn);
                    }
                    replies
                }),
                None => conn.req_packed_commands(cmd, offset, count),
            },
            Connection::Sentinel(conn) => conn.req_packed_commands(cmd, offset, count),
            #[cfg(feature = "model")]
            Connection::Model(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Standalone(conn) => conn.get_db(),
            Connection::Sentinel(conn) => conn.get_db(),
            Connection::Cluster { .. } => 0,
            #[cfg(feature = "model")]
            Connection::Model(conn) => conn.get_db(),
        }
    }
}
