//! How many replicas each cluster master has connected, for the `WAIT` behind lock writes
//! (replica sync, [`Config::with_replica_sync`](crate::Config::with_replica_sync)).
//!
//! A task counts them (`CLUSTER SLOTS` for who serves which slots, then `INFO replication`
//! at each master) at connect, every [`RECOUNT_INTERVAL`], and at once when a `WAIT` was
//! answered by another number than the one known (as Redisson 4.x refreshes its count). Until
//! the first count, and for a slot nobody serves, a write gets no `WAIT`.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use tokio::sync::Notify;

use super::slots::{Master, SlotMap};

/// How often the counts are read again without a reason.
const RECOUNT_INTERVAL: Duration = Duration::from_secs(5);

/// The masters' replica counts, shared by every clone of one cluster connection.
#[derive(Default)]
pub(crate) struct ClusterReplicas {
    counts: RwLock<(SlotMap, HashMap<Master, u32>)>,
    recount: Arc<Notify>,
}

impl ClusterReplicas {
    /// Counts them once and keeps counting until the last handle is gone.
    pub(crate) async fn start(conn: ClusterConnection) -> Arc<ClusterReplicas> {
        let replicas = Arc::new(ClusterReplicas::default());
        let mut counter = conn;
        replicas.count(&mut counter).await;
        let recount = replicas.recount.clone();
        tokio::spawn(keep_counting(Arc::downgrade(&replicas), recount, counter));
        replicas
    }

    /// The slot map the last count was made with (empty if none was read).
    pub(crate) fn slot_map(&self) -> SlotMap {
        self.counts.read().0.clone()
    }

    /// The replicas of the master serving `key`, if known.
    pub(crate) fn of_key(&self, key: &str) -> Option<u32> {
        let counts = self.counts.read();
        let master = counts.0.master_of(key)?;
        counts.1.get(master).copied()
    }

    /// The replicas of the master at `node`, if known.
    pub(crate) fn of_node(&self, node: &Master) -> Option<u32> {
        self.counts.read().1.get(node).copied()
    }

    /// A `WAIT` after a write to `key` was answered by `acks` replicas.
    pub(crate) fn acked(&self, key: &str, acks: u32) {
        if self.of_key(key) != Some(acks) {
            self.recount.notify_one();
        }
    }

    /// Reads the slot map and each master's count; keeps the old ones on failure.
    async fn count(&self, conn: &mut ClusterConnection) {
        let map = match super::connection::cluster_slot_map(conn).await {
            Ok(map) => map,
            Err(err) => {
                tracing::debug!(error = %err, "reading the slot map to count replicas failed");
                return;
            }
        };
        let mut counts = HashMap::new();
        for (host, port) in map.masters() {
            let mut info = redis::cmd("INFO");
            info.arg("replication");
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                host: host.clone(),
                port: *port,
            });
            let reply = conn
                .route_command(info, routing)
                .await
                .and_then(|v| Ok(redis::from_redis_value::<String>(v.extract_error()?)?));
            match reply {
                Ok(info) => {
                    counts.insert((host.clone(), *port), connected_replicas(&info));
                }
                Err(err) => tracing::debug!(error = %err, host, port, "counting replicas failed"),
            }
        }
        *self.counts.write() = (map, counts);
    }
}

/// `connected_slaves` of an `INFO replication` reply (0 if absent).
pub(crate) fn connected_replicas(info: &str) -> u32 {
    info.lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn keep_counting(
    replicas: Weak<ClusterReplicas>,
    recount: Arc<Notify>,
    mut conn: ClusterConnection,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(RECOUNT_INTERVAL) => {}
            _ = recount.notified() => {}
        }
        let Some(replicas) = replicas.upgrade() else {
            return;
        };
        replicas.count(&mut conn).await;
    }
}
