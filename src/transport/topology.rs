//! The client's one view of a cluster: which master serves which slots ([`SlotMap`]) and how
//! many replicas of each can acknowledge a write (for the `WAIT` behind lock writes, see
//! [`Config::with_replica_sync`](crate::Config::with_replica_sync)).
//!
//! One task reads it (`CLUSTER SLOTS`, then `INFO replication` at each master): at connect,
//! every [`SCAN_INTERVAL`] (Redisson's `scanInterval`), and at once when a reader says it is
//! stale (a `MOVED`, a dropped link, a slot nobody serves, a `WAIT` answered by another number
//! of replicas), at most every [`REREAD_AFTER`]. Everyone reads the same view: the direct lane
//! routes by it, the sharded pub/sub router places channels by it, lock writes `WAIT` by its
//! counts and the watchdog groups renewals by it, the watchdog's thread included (it keeps
//! connections of its own, not a view of its own).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{RedisResult, Value};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tracing::Span;

use super::slots::SlotMap;
use super::NodeAddr;

/// How often the view is read again without a reason.
pub(crate) const SCAN_INTERVAL: Duration = Duration::from_secs(5);
/// The view is read again at most this often, however many readers ask.
pub(crate) const REREAD_AFTER: Duration = Duration::from_millis(100);

/// The cluster at one moment.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Which master serves which slots.
    pub(crate) slots: SlotMap,
    /// Each master's replicas that can acknowledge a write (masters not counted: absent).
    pub(crate) replicas: HashMap<NodeAddr, u32>,
    /// Counts up with every read (0: none yet).
    pub(crate) epoch: u64,
}

/// The view, shared by every handle of one client (and its watchdog).
pub(crate) struct Topology {
    /// To read the view (any node answers `CLUSTER SLOTS`; `INFO` goes to each master).
    conn: ClusterConnection,
    view: RwLock<Arc<View>>,
    /// Asks the task to read the view now.
    stale: Arc<Notify>,
    /// Announces each read, and whether it succeeded (a failed one keeps the old view).
    read: watch::Sender<bool>,
    /// The client's id, if known (its failover spans carry it).
    client_id: Option<Arc<str>>,
}

impl Topology {
    /// Reads the view once (an unreachable cluster leaves it empty: readers then take the
    /// cluster connection's own routing) and keeps reading it until the last handle is gone.
    /// `client_id`: the client's, for what it reports.
    pub(crate) async fn start(conn: ClusterConnection, client_id: Option<&str>) -> Arc<Topology> {
        let (read, _) = watch::channel(true);
        let topology = Arc::new(Topology {
            conn,
            view: RwLock::default(),
            stale: Arc::default(),
            read,
            client_id: client_id.map(Arc::from),
        });
        topology.read_view().await;
        let stale = topology.stale.clone();
        tokio::spawn(keep_reading(Arc::downgrade(&topology), stale));
        topology
    }

    /// The view as last read.
    pub(crate) fn view(&self) -> Arc<View> {
        self.view.read().clone()
    }

    /// The master serving `key`'s slot, as last read.
    pub(crate) fn master_of(&self, key: &str) -> Option<NodeAddr> {
        self.view.read().slots.master_of(key).cloned()
    }

    /// The replicas of the master at `node` that can acknowledge a write, if counted.
    pub(crate) fn replicas_of(&self, node: &NodeAddr) -> Option<u32> {
        self.view.read().replicas.get(node).copied()
    }

    /// The replicas of the master serving `key`, if counted.
    pub(crate) fn replicas_for(&self, key: &str) -> Option<u32> {
        let view = self.view.read();
        let master = view.slots.master_of(key)?;
        view.replicas.get(master).copied()
    }

    /// Says the view may be stale: the task reads it again soon.
    pub(crate) fn suspect(&self) {
        self.stale.notify_one();
    }

    /// Asks for a read and waits for it; `Err` if that read failed (the old view stays).
    pub(crate) async fn refreshed(&self) -> RedisResult<Arc<View>> {
        let mut read = self.read.subscribe();
        read.borrow_and_update();
        self.suspect();
        match read.changed().await {
            Ok(()) if *read.borrow() => Ok(self.view()),
            Ok(()) => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "reading the cluster slot map failed",
            ))),
            // (The task ends only with the last handle, and this is one.)
            Err(_) => Ok(self.view()),
        }
    }

    /// Announces each read (whether it succeeded).
    pub(crate) fn reads_watch(&self) -> watch::Receiver<bool> {
        self.read.subscribe()
    }

    /// A `WAIT` after a write to `key` was answered by `acks` replicas: if that is not the
    /// count known, the view is read again.
    pub(crate) fn acked(&self, key: &str, acks: u32) {
        if self.replicas_for(key) != Some(acks) {
            self.suspect();
        }
    }

    /// Counts the replicas of `key`'s master again now, over `conn` (the caller's own: the
    /// watchdog's thread must not wait on the client's runtime), after a `WAIT` no replica
    /// answered (one may have gone, or be in a full resync), and keeps the count.
    pub(crate) async fn recount(&self, conn: &ClusterConnection, key: &str) -> Option<Replicas> {
        let master = self.master_of(key)?;
        match count_at(&mut conn.clone(), &master).await {
            Ok(counted) => {
                let n = counted.online;
                let mut view = self.view.write();
                let mut next = View {
                    slots: view.slots.clone(),
                    replicas: view.replicas.clone(),
                    epoch: view.epoch,
                };
                next.replicas.insert(master, n);
                *view = Arc::new(next);
                Some(counted)
            }
            Err(err) => {
                tracing::debug!(error = %err, "counting replicas failed");
                None
            }
        }
    }

    /// Reads the slot map and each master's count; keeps the old view on failure.
    async fn read_view(&self) -> bool {
        let mut conn = self.conn.clone();
        let slots = match read_slot_map(&mut conn).await {
            Ok(slots) => slots,
            Err(err) => {
                tracing::debug!(error = %err, "reading the cluster slot map failed");
                self.read.send_replace(false);
                return false;
            }
        };
        let mut replicas = HashMap::new();
        let before = self.view();
        for master in slots.masters() {
            match count_at(&mut conn, master).await {
                Ok(n) => {
                    let known = before.replicas.get(master).copied();
                    replicas.insert(master.clone(), n.periodic(known));
                }
                Err(err) => {
                    tracing::debug!(error = %err, node = %format!("{}:{}", master.0, master.1), "counting replicas failed")
                }
            }
        }
        let (was, now) = (before.slots.masters(), slots.masters());
        let followed = (before.epoch > 0 && was != now).then(|| {
            let names = |m: &[&NodeAddr]| {
                let names: Vec<String> = m.iter().map(|(h, p)| format!("{h}:{p}")).collect();
                names.join(",")
            };
            (names(&was), names(&now))
        });
        // Following a cluster failover is taking the new view (nothing awaited from here).
        let span = followed.as_ref().map_or_else(Span::none, |(from, to)| {
            crate::observe::failover_span(self.client_id.as_deref(), "cluster", from, to)
        });
        let _following = span.enter();
        if let Some((from, to)) = &followed {
            crate::observe::failover_followed(&span, "cluster", from, to);
        }
        {
            let mut view = self.view.write();
            let epoch = view.epoch + 1;
            *view = Arc::new(View {
                slots,
                replicas,
                epoch,
            });
        }
        self.read.send_replace(true);
        true
    }
}

/// Reads the view every [`SCAN_INTERVAL`], and when asked (at most every [`REREAD_AFTER`]).
async fn keep_reading(topology: Weak<Topology>, stale: Arc<Notify>) {
    let mut next_scan = Instant::now() + SCAN_INTERVAL;
    let mut last_read = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next_scan) => {}
            _ = stale.notified() => {
                tokio::time::sleep_until(last_read + REREAD_AFTER).await;
            }
        }
        let Some(topology) = topology.upgrade() else {
            return;
        };
        last_read = Instant::now();
        next_scan = last_read + SCAN_INTERVAL;
        topology.read_view().await;
    }
}

/// The cluster's slot map, from `CLUSTER SLOTS` of any node.
async fn read_slot_map(conn: &mut ClusterConnection) -> RedisResult<SlotMap> {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SLOTS");
    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let reply = conn.route_command(cmd, routing).await?.extract_error()?;
    let ranges: Vec<Vec<Value>> = redis::from_redis_value(reply)?;
    ranges
        .into_iter()
        .filter(|range| range.len() >= 3)
        .map(|range| {
            let mut range = range.into_iter();
            let first: u16 = redis::from_redis_value(range.next().unwrap())?;
            let last: u16 = redis::from_redis_value(range.next().unwrap())?;
            let master: Vec<Value> = redis::from_redis_value(range.next().unwrap())?;
            let mut master = master.into_iter();
            let host: String = redis::from_redis_value(master.next().unwrap_or(Value::Nil))?;
            let port: u16 = redis::from_redis_value(master.next().unwrap_or(Value::Nil))?;
            Ok((first, last, (host, port)))
        })
        .collect::<RedisResult<_>>()
        .map(SlotMap::new)
}

/// The replicas of the master at `master`.
async fn count_at(conn: &mut ClusterConnection, master: &NodeAddr) -> RedisResult<Replicas> {
    let mut info = redis::cmd("INFO");
    info.arg("replication");
    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
        host: master.0.clone(),
        port: master.1,
    });
    let reply = conn.route_command(info, routing).await?.extract_error()?;
    Ok(Replicas::of(&redis::from_redis_value::<String>(reply)?))
}

/// A master's replicas, as its `INFO replication` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replicas {
    /// Those that can acknowledge a write ([`online_replicas`]).
    pub(crate) online: u32,
    /// Every replica connected, online or in its full resync.
    pub(crate) listed: u32,
}

impl Replicas {
    pub(crate) fn of(info: &str) -> Replicas {
        let listed = info
            .lines()
            .filter(|line| replica_line(line).is_some())
            .count();
        Replicas {
            online: online_replicas(info),
            listed: u32::try_from(listed).unwrap_or(u32::MAX),
        }
    }

    /// The count a periodic read keeps, `known` the count before it. A master left with no
    /// replica at all keeps its old count: the next write still waits, and the `WAIT` path
    /// decides (that write fails, then the count drops), so that a replica's promotion never
    /// lets writes to the old master go unwaited-for between two reads.
    pub(crate) fn periodic(self, known: Option<u32>) -> u32 {
        match known {
            Some(known) if self.listed == 0 && known > 0 => known,
            _ => self.online,
        }
    }

    /// Whether a write no replica acknowledged stands: only when a replica is connected but
    /// none can acknowledge (a full resync: it holds none of the data, so there was nothing
    /// to wait for). With none connected at all, the replica that was there may have been
    /// promoted while this master still takes writes (a failover's first moments): the write
    /// does not stand, as Redisson's does not, and the next count sends no `WAIT`.
    pub(crate) fn excuse_no_ack(self) -> bool {
        self.online == 0 && self.listed > 0
    }
}

/// The fields of a master's `slaveN:` line.
fn replica_line(line: &str) -> Option<&str> {
    let (index, fields) = line.strip_prefix("slave")?.split_once(':')?;
    index.bytes().all(|b| b.is_ascii_digit()).then_some(fields)
}

/// The replicas of an `INFO replication` reply that can acknowledge a write: its `slaveN:`
/// lines with `state=online`. `connected_slaves` also counts a replica still in its full
/// resync (`wait_bgsave`, `send_bulk`): it holds none of the data yet and answers no `WAIT`, so
/// waiting for it would fail every lock write while protecting nothing.
pub(crate) fn online_replicas(info: &str) -> u32 {
    let online = info
        .lines()
        .filter_map(replica_line)
        .filter(|fields| fields.split(',').any(|f| f.trim() == "state=online"))
        .count();
    u32::try_from(online).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::{online_replicas, Replicas};

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
        let counted = Replicas::of(&syncing);
        assert_eq!((counted.online, counted.listed), (0, 2));
        assert!(counted.excuse_no_ack(), "replicas in their full resync");
        let none = Replicas::of("role:master\r\nconnected_slaves:0\r\n");
        assert!(
            !none.excuse_no_ack(),
            "the replica went away: maybe promoted"
        );
        assert_eq!(none.periodic(Some(1)), 1, "left to the next WAIT");
        assert_eq!(counted.periodic(Some(1)), 0, "a resync lowers it at once");
        assert_eq!(Replicas::of(info).periodic(Some(0)), 1, "raised at once");
        assert_eq!(online_replicas("role:master\r\nconnected_slaves:0\r\n"), 0);
        // A replica's own INFO (`slave_read_only`, `slave_repl_offset`) counts nothing.
        assert_eq!(
            online_replicas("role:slave\r\nslave_repl_offset:10\r\nslave_read_only:1\r\n"),
            0
        );
    }
}
