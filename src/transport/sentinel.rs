//! Redis Sentinel: the command connection to the master the sentinels name, following it
//! through failovers.
//!
//! redis-rs's `SentinelClient` finds the master once and follows nothing (redis-rs #1438), so
//! following is ours. A follower task asks the sentinels where the master is
//! (`SENTINEL GET-MASTER-ADDR-BY-NAME`) every [`SCAN_INTERVAL`] (Redisson's `scanInterval`),
//! at once when a sentinel announces `+switch-master`, and at once when a command fails in a
//! way that says its node may not be the master any more (`READONLY`, a dropped or refused
//! connection).
//!
//! The switch happens as soon as the sentinels name another node that answers `ROLE` as a
//! master: a demoted master goes on accepting writes for seconds until the sentinels turn it
//! into a replica, and those writes are lost, so no command may go there once a new master is
//! known. Each switch is published on a [`watch`] channel: the subscription hub moves to the new
//! master and wakes every waiter (a message published during the switch may be lost).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{AsyncConnectionConfig, Cmd, ConnectionInfo, Pipeline, PushKind, RedisFuture, Value};
use tokio::sync::{mpsc, watch, Notify};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::transport::node::{connect_error, connect_manager};
use crate::transport::{node_info, NodeAddr};

/// How often the sentinels are asked where the master is (Redisson's `scanInterval`).
const SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// How often the master's replicas are counted again without a reason (a replica that came
/// back, or finished its full resync, is waited for again within this).
const RECOUNT_INTERVAL: Duration = Duration::from_secs(5);
/// The channel sentinels announce a new master on: `<name> <old-ip> <old-port> <ip> <port>`.
const SWITCH_MASTER: &str = "+switch-master";

/// The command connection to the current master (cheap to clone).
#[derive(Clone)]
pub(crate) struct SentinelConnection {
    shared: Arc<Shared>,
    /// A clone of the current master's connection, taken when this handle last sent.
    conn: ConnectionManager,
}

struct Shared {
    current: RwLock<(ConnectionManager, NodeAddr)>,
    master: watch::Sender<NodeAddr>,
    /// Asks the follower to look at once.
    suspect: Notify,
    /// The replicas connected to the current master (`INFO replication`), which lock writes
    /// `WAIT` for.
    replicas: AtomicU32,
    /// Asks the follower to count them again.
    recount: Notify,
}

impl Shared {
    /// Counts the replicas of the master at `conn` again, and keeps the count.
    async fn recount(&self, conn: &mut ConnectionManager) -> Option<u32> {
        match count_replicas(conn).await {
            Ok(n) => {
                self.replicas.store(n, Ordering::Release);
                Some(n)
            }
            Err(err) => {
                tracing::debug!(error = %err, "counting replicas failed");
                None
            }
        }
    }
}

/// What the follower needs to find and reach masters.
struct Sentinels {
    master_name: String,
    sentinels: Vec<ConnectionInfo>,
    /// Login, TLS and database of the data nodes (its address is replaced).
    node_base: ConnectionInfo,
    config: Config,
}

impl SentinelConnection {
    /// Asks the sentinels for the master, connects to it, and starts the follower (which ends
    /// when the last handle is dropped).
    pub(crate) async fn open(
        config: &Config,
        master_name: &str,
        sentinels: &[ConnectionInfo],
    ) -> Result<SentinelConnection> {
        let sentinels = Sentinels {
            master_name: master_name.to_string(),
            sentinels: sentinels
                .iter()
                .map(|info| config.with_transport_settings(info.clone()))
                .collect::<Result<_>>()?,
            node_base: config.connection_info()?,
            config: config.clone(),
        };
        let addr = sentinels.master_addr(0).await?;
        let (conn, replicas) = sentinels.connect_master(&addr).await?;
        let (master, _) = watch::channel(addr.clone());
        let shared = Arc::new(Shared {
            current: RwLock::new((conn.clone(), addr)),
            master,
            suspect: Notify::new(),
            replicas: AtomicU32::new(replicas),
            recount: Notify::new(),
        });
        tokio::spawn(follow(Arc::downgrade(&shared), sentinels));
        Ok(SentinelConnection { shared, conn })
    }

    /// The master's address, updated at each switch.
    pub(crate) fn master(&self) -> watch::Receiver<NodeAddr> {
        self.shared.master.subscribe()
    }

    /// The replicas connected to the current master, as last counted.
    pub(crate) fn replicas(&self) -> u32 {
        self.shared.replicas.load(Ordering::Acquire)
    }

    /// A `WAIT` was answered by `acks` replicas: if that is not the count known, the follower
    /// counts them again (as Redisson 4.x refreshes its count when `WAIT` disagrees).
    pub(crate) fn acked(&self, acks: u32) {
        if acks != self.replicas() {
            self.shared.recount.notify_one();
        }
    }

    /// Counts the current master's replicas again now (after a `WAIT` no replica answered:
    /// one may have gone, or be in a full resync), and keeps the count.
    pub(crate) async fn recount(&mut self) -> Option<u32> {
        let shared = self.shared.clone();
        shared.recount(self.current()).await
    }

    /// The current master's connection (refreshed in this handle).
    fn current(&mut self) -> &mut ConnectionManager {
        self.conn = self.shared.current.read().0.clone();
        &mut self.conn
    }
}

/// Whether `err` says the node answering may not be the master any more (a stopped or
/// unreachable master times out).
fn suspicious(err: &redis::RedisError) -> bool {
    use redis::ServerErrorKind::{BusyLoading, MasterDown, ReadOnly};
    matches!(
        err.kind(),
        redis::ErrorKind::Server(ReadOnly | MasterDown | BusyLoading)
    ) || crate::error::has_code(err, "READONLY")
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.kind() == redis::ErrorKind::Io
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let shared = self.shared.clone();
        let conn = self.current();
        Box::pin(async move {
            let reply = conn.req_packed_command(cmd).await;
            if let Err(err) = &reply {
                if suspicious(err) {
                    shared.suspect.notify_one();
                }
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let shared = self.shared.clone();
        let conn = self.current();
        Box::pin(async move {
            let replies = conn.req_packed_commands(cmd, offset, count).await;
            let suspect = match &replies {
                Err(err) => suspicious(err),
                // (A pipeline's error replies are values.)
                Ok(values) => values
                    .iter()
                    .any(|v| matches!(v, Value::ServerError(e) if e.code() == "READONLY")),
            };
            if suspect {
                shared.suspect.notify_one();
            }
            replies
        })
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

impl Sentinels {
    /// The master's address from the first sentinel that knows it, trying them in turn from
    /// `start`.
    async fn master_addr(&self, start: usize) -> Result<NodeAddr> {
        let mut last_err = None;
        let mut unknown = 0;
        for i in 0..self.sentinels.len() {
            let sentinel = &self.sentinels[(start + i) % self.sentinels.len()];
            let mut ask = redis::cmd("SENTINEL");
            ask.arg("GET-MASTER-ADDR-BY-NAME").arg(&self.master_name);
            match self.query::<Option<(String, u16)>>(sentinel, &ask).await {
                Ok(Some(addr)) => return Ok(addr),
                Ok(None) => unknown += 1,
                Err(err) => last_err = Some(err),
            }
        }
        match last_err {
            Some(err) if unknown == 0 => Err(connect_error(err)),
            _ => Err(Error::Config(format!(
                "no sentinel knows a master named {:?} ({unknown} of {} answered that they do not)",
                self.master_name,
                self.sentinels.len()
            ))),
        }
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        node: &ConnectionInfo,
        cmd: &Cmd,
    ) -> redis::RedisResult<T> {
        let client = redis::Client::open(node.clone())?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.connect_timeout()))
            .set_response_timeout(Some(self.config.response_timeout()));
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        cmd.query_async(&mut conn).await
    }

    /// A connection to the node at `addr`, once it says it is a master, and the number of
    /// replicas connected to it.
    async fn connect_master(&self, addr: &NodeAddr) -> Result<(ConnectionManager, u32)> {
        let info = node_info(&self.node_base, &addr.0, addr.1);
        let client = redis::Client::open(info).map_err(|e| Error::Config(e.to_string()))?;
        let mut conn = connect_manager(client, &self.config).await?;
        let role: Vec<Value> = redis::cmd("ROLE")
            .query_async(&mut conn)
            .await
            .map_err(connect_error)?;
        match role.first() {
            Some(Value::BulkString(role)) if role.as_slice() == b"master" => {
                let replicas = count_replicas(&mut conn).await.map_err(connect_error)?;
                Ok((conn, replicas))
            }
            _ => Err(Error::Connection(redis::RedisError::from((
                redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
                "the node the sentinels name is not a master (yet)",
                format!("{}:{}", addr.0, addr.1),
            )))),
        }
    }

    /// A subscription to `+switch-master` on the sentinel at `index`.
    async fn switches(&self, index: usize) -> redis::RedisResult<Switches> {
        let (tx, rx) = mpsc::unbounded_channel();
        let node = &self.sentinels[index % self.sentinels.len()];
        let redis = node
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let client = redis::Client::open(node.clone().set_redis_settings(redis))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.connect_timeout()))
            .set_response_timeout(Some(self.config.response_timeout()))
            .set_push_sender(tx);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        conn.subscribe(SWITCH_MASTER).await?;
        Ok((conn, rx))
    }
}

/// The master's replicas that can acknowledge a write (`INFO replication`, see
/// [`online_replicas`](crate::transport::topology::online_replicas)).
async fn count_replicas(conn: &mut ConnectionManager) -> redis::RedisResult<u32> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await?;
    Ok(crate::transport::topology::online_replicas(&info))
}

/// A sentinel connection subscribed to `+switch-master`, and its pushes.
type Switches = (
    redis::aio::MultiplexedConnection,
    mpsc::UnboundedReceiver<redis::PushInfo>,
);

/// Follows the master until every handle is gone.
async fn follow(shared: Weak<Shared>, sentinels: Sentinels) {
    let mut scan = tokio::time::interval(SCAN_INTERVAL);
    scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut recount = tokio::time::interval(RECOUNT_INTERVAL);
    recount.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut turn = 0;
    let mut switches: Option<Switches> = None;
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        if switches.is_none() {
            turn += 1;
            switches = sentinels.switches(turn).await.ok();
        }
        let pushed = async {
            match &mut switches {
                Some((_, pushes)) => pushes.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = scan.tick() => {}
            _ = strong.suspect.notified() => {}
            _ = async {
                tokio::select! {
                    _ = strong.recount.notified() => {}
                    _ = recount.tick() => {}
                }
            } => {
                let mut conn = strong.current.read().0.clone();
                strong.recount(&mut conn).await;
                continue;
            }
            push = pushed => match push.map(|p| p.kind) {
                Some(PushKind::Message) => {}
                // (The sentinel went away: subscribe at the next one.)
                Some(PushKind::Disconnection) | None => switches = None,
                Some(_) => continue,
            },
        }
        let known = strong.current.read().1.clone();
        match sentinels.master_addr(turn).await {
            Ok(addr) if addr != known => match sentinels.connect_master(&addr).await {
                Ok((conn, replicas)) => {
                    tracing::info!(
                        master = %sentinels.master_name,
                        from = %format!("{}:{}", known.0, known.1),
                        to = %format!("{}:{}", addr.0, addr.1),
                        "sentinels named a new master; switching to it"
                    );
                    *strong.current.write() = (conn, addr.clone());
                    strong.replicas.store(replicas, Ordering::Release);
                    strong.master.send_replace(addr);
                }
                Err(err) => tracing::debug!(error = %err, "the new master is not ready"),
            },
            Ok(_) => {}
            Err(err) => {
                turn += 1;
                tracing::debug!(error = %err, "no sentinel answered");
            }
        }
        drop(strong);
    }
}
