//! The command connection every lock operation goes through, whatever the topology.
//!
//! The engine and the scripts see one [`Connection`] (a redis-rs [`ConnectionLike`], cheap to
//! clone), ask it how to batch many keys into one call ([`Connection::batches`]), and send a
//! pipeline of one key's commands to that key's node ([`Connection::pipeline_for`]). A
//! standalone server is a `ConnectionManager`; a cluster is redis-rs's async cluster
//! connection, which routes each script by its first key to that slot's master and follows
//! `MOVED` and `ASK` (script calls take a direct lane to their master first: [`super::direct`]); a Sentinel-watched master is the current master's connection, switched
//! when the sentinels name another ([`SentinelConnection`]).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use std::sync::Arc;

use super::direct::Direct;
use super::sentinel::SentinelConnection;
use super::slots::{self, Grouping};
use super::topology::Topology;
use super::NodeAddr;

/// The connection scripts and queries are sent on.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One server (reconnects by itself).
    Standalone(ConnectionManager),
    /// A Redis Cluster: one multiplexed connection per node, kept by redis-rs, the client's
    /// view of the cluster, and the direct lane script calls take to their master.
    Cluster(ClusterConnection, Arc<Topology>, Arc<Direct>),
    /// The master Redis Sentinel names, followed through failovers.
    Sentinel(SentinelConnection),
}

impl Connection {
    /// How keys may share one call: a standalone server takes any keys in one script, a
    /// cluster only keys of one slot.
    pub(crate) fn grouping(&self) -> Grouping {
        match self {
            Connection::Standalone(_) | Connection::Sentinel(_) => Grouping::Any,
            Connection::Cluster(..) => Grouping::BySlot,
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(..))
    }

    /// Whether this topology counts replicas for writes to `WAIT` for (a standalone server
    /// never does, as Redisson's single-server mode sends no `WAIT`).
    pub(crate) fn counts_replicas(&self) -> bool {
        !matches!(self, Connection::Standalone(_))
    }

    /// How many replicas a write to `key` should `WAIT` for: those connected to its master,
    /// if known.
    pub(crate) fn replicas_for(&self, key: &str) -> Option<u32> {
        match self {
            Connection::Sentinel(conn) => Some(conn.replicas()),
            Connection::Cluster(_, topology, _) => topology.replicas_for(key),
            Connection::Standalone(_) => None,
        }
    }

    /// The replicas connected to the cluster master at `node`, if known.
    pub(crate) fn replicas_of_node(&self, node: &NodeAddr) -> Option<u32> {
        match self {
            Connection::Cluster(_, topology, _) => topology.replicas_of(node),
            Connection::Sentinel(conn) => Some(conn.replicas()),
            Connection::Standalone(_) => None,
        }
    }

    /// Whether a write to `key` that `WAIT`ed for its master's replicas was acknowledged:
    /// by `acks` of them. None is still enough when the master, counted again at once, has no
    /// replica that can acknowledge (one went away or is in a full resync since the last
    /// count): there was nothing to wait for, as a fresh count would have sent no `WAIT`. A
    /// count that differs from the one known is read again.
    pub(crate) async fn replicated(&mut self, key: &str, acks: u32) -> bool {
        match self {
            Connection::Sentinel(conn) if acks == 0 => conn.recount().await == Some(0),
            Connection::Sentinel(conn) => {
                conn.acked(acks);
                true
            }
            Connection::Cluster(cluster, topology, _) if acks == 0 => {
                topology.recount(cluster, key).await == Some(0)
            }
            Connection::Cluster(_, topology, _) => {
                topology.acked(key, acks);
                true
            }
            Connection::Standalone(_) => true,
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

    /// Runs a keyless command on one master (any of them on a cluster). An error reply is an
    /// `Err` (redis-rs hands a routed command's error reply back as a value).
    pub(crate) async fn on_any_master(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let reply = match self {
            Connection::Standalone(conn) => cmd.query_async(conn).await?,
            Connection::Sentinel(conn) => cmd.query_async(conn).await?,
            Connection::Cluster(conn, ..) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary);
                conn.route_command(cmd.clone(), routing).await?
            }
        };
        reply.extract_error()
    }

    /// The client's view of the cluster (`None` on one server).
    pub(crate) fn topology(&self) -> Option<&Arc<Topology>> {
        match self {
            Connection::Cluster(_, topology, _) => Some(topology),
            _ => None,
        }
    }

    /// Sends `pipe` in one write to the cluster node `host:port` (commands whose keys it
    /// serves), with one answer per command. On one master (standalone, sentinel), to it.
    pub(crate) async fn pipeline_to(
        &mut self,
        pipe: Pipeline,
        host: &str,
        port: u16,
    ) -> RedisResult<Vec<RedisResult<Value>>> {
        let count = pipe.len();
        let replies = match self {
            Connection::Standalone(conn) => conn.req_packed_commands(&pipe, 0, count).await?,
            Connection::Sentinel(conn) => conn.req_packed_commands(&pipe, 0, count).await?,
            Connection::Cluster(conn, ..) => {
                let route = SingleNodeRoutingInfo::ByAddress {
                    host: host.to_string(),
                    port,
                };
                // (By value: a cycle's pipeline to a master is megabytes at 100k locks.)
                conn.route_pipeline(pipe, 0, count, route).await?
            }
        };
        Ok(replies.into_iter().map(Value::extract_error).collect())
    }

    /// Sends `pipe` (commands about `key` only, or keyless ones such as `PUBSUB`) in one write
    /// to `key`'s node, with one answer per command: an error reply fails only its command.
    pub(crate) async fn pipeline_for(
        &mut self,
        pipe: &Pipeline,
        key: &str,
    ) -> RedisResult<Vec<RedisResult<Value>>> {
        let replies = match self {
            Connection::Standalone(conn) => conn.req_packed_commands(pipe, 0, pipe.len()).await?,
            Connection::Sentinel(conn) => conn.req_packed_commands(pipe, 0, pipe.len()).await?,
            Connection::Cluster(conn, ..) => {
                // redis-rs would route a pipeline by its first keyed command, and refuse one
                // whose keyless `PUBSUB` it routes elsewhere: name the node.
                let route = Route::new(crate::names::cluster_slot(key), SlotAddr::Master);
                conn.route_pipeline(
                    pipe.clone(),
                    0,
                    pipe.len(),
                    SingleNodeRoutingInfo::SpecificNode(route),
                )
                .await?
            }
        };
        Ok(replies.into_iter().map(Value::extract_error).collect())
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Standalone(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn, _, direct) => {
                Box::pin(super::direct::send(direct, conn, cmd))
            }
            Connection::Sentinel(conn) => conn.req_packed_command(cmd),
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
            Connection::Cluster(conn, ..) => conn.req_packed_commands(cmd, offset, count),
            Connection::Sentinel(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Standalone(conn) => conn.get_db(),
            Connection::Sentinel(conn) => conn.get_db(),
            Connection::Cluster(..) => 0,
        }
    }
}
