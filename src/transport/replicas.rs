//! How many replicas of each cluster master can acknowledge a write, for the `WAIT` behind lock writes
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

    /// A `WAIT` after a write to `key` was answered by `acks` replicas: if that is not the
    /// count known, it is read again in the background.
    pub(crate) fn acked(&self, key: &str, acks: u32) {
        if self.of_key(key) != Some(acks) {
            self.recount.notify_one();
        }
    }

    /// Counts the replicas of `key`'s master again now (after a `WAIT` no replica answered:
    /// one may have gone, or be in a full resync), and keeps the count.
    pub(crate) async fn recount_now(&self, conn: &mut ClusterConnection, key: &str) -> Option<u32> {
        let master = self.counts.read().0.master_of(key).cloned()?;
        match count_at(conn, &master).await {
            Ok(n) => {
                self.counts.write().1.insert(master, n);
                Some(n)
            }
            Err(err) => {
                tracing::debug!(error = %err, "counting replicas failed");
                None
            }
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
        for master in map.masters() {
            match count_at(conn, master).await {
                Ok(n) => {
                    counts.insert(master.clone(), n);
                }
                Err(err) => {
                    tracing::debug!(error = %err, host = master.0, port = master.1, "counting replicas failed")
                }
            }
        }
        *self.counts.write() = (map, counts);
    }
}

/// The replicas of the master at `master` that can acknowledge a write.
async fn count_at(conn: &mut ClusterConnection, master: &Master) -> redis::RedisResult<u32> {
    let mut info = redis::cmd("INFO");
    info.arg("replication");
    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
        host: master.0.clone(),
        port: master.1,
    });
    let reply = conn.route_command(info, routing).await?.extract_error()?;
    Ok(online_replicas(&redis::from_redis_value::<String>(reply)?))
}

/// The replicas of an `INFO replication` reply that can acknowledge a write: its `slaveN:`
/// lines with `state=online`. `connected_slaves` also counts a replica still in its full
/// resync (`wait_bgsave`, `send_bulk`): it holds none of the data yet and answers no `WAIT`, so
/// waiting for it would fail every lock write while protecting nothing.
pub(crate) fn online_replicas(info: &str) -> u32 {
    let online = info
        .lines()
        .filter(|line| {
            line.strip_prefix("slave")
                .and_then(|rest| rest.split_once(':'))
                .is_some_and(|(index, fields)| {
                    index.bytes().all(|b| b.is_ascii_digit())
                        && fields
                            .split(',')
                            .any(|field| field.trim() == "state=online")
                })
        })
        .count();
    u32::try_from(online).unwrap_or(u32::MAX)
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

#[cfg(test)]
mod tests {
    use super::online_replicas;

    #[test]
    fn only_online_replicas_count() {
        // As a master answers while one replica does its full resync (Redis 7.0).
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
            slave0:ip=127.0.0.1,port=7001,state=wait_bgsave,offset=0,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7002,state=online,offset=4242,lag=1\r\n\
            master_failover_state:no-failover\r\nslave_read_only:1\r\n";
        assert_eq!(online_replicas(info), 1);
        let syncing = info.replace("state=online", "state=send_bulk");
        assert_eq!(online_replicas(&syncing), 0);
        assert_eq!(online_replicas("role:master\r\nconnected_slaves:0\r\n"), 0);
        // A replica's own INFO (`slave_read_only`, `slave_repl_offset`) counts nothing.
        assert_eq!(
            online_replicas("role:slave\r\nslave_repl_offset:10\r\nslave_read_only:1\r\n"),
            0
        );
    }
}
