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
//!
//! One follower per client: the watchdog's connection (on its own thread and runtime) is
//! opened [`beside`](SentinelConnection::beside) the client's, with a connection of its own that
//! moves when the client's follower switches, not a second follower asking the sentinels.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;
use redis::aio::ConnectionLike;
use redis::{AsyncConnectionConfig, Cmd, ConnectionInfo, Pipeline, PushKind, RedisFuture, Value};
use tokio::sync::{mpsc, watch, Notify};
use tracing::Instrument;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::transport::naming::Named;
use crate::transport::node::{connect_error, connect_manager};
use crate::transport::shared_wait::SharedWait;
use crate::transport::topology::Replicas;
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
    conn: Named,
}

struct Shared {
    /// This handle's connection to the master, and that master.
    current: RwLock<(Named, NodeAddr)>,
    /// The client's view, shared by the connections opened beside this one.
    view: Arc<View>,
    /// Writes queued behind another's `WAIT` on this handle's connection.
    shared_wait: Arc<SharedWait>,
}

/// Where the master is and how many replicas it has, as the client's one follower knows it.
struct View {
    master: watch::Sender<NodeAddr>,
    /// Asks the follower to look at once.
    suspect: Notify,
    /// The replicas connected to the current master (`INFO replication`), which lock writes
    /// `WAIT` for.
    replicas: AtomicU32,
    /// Asks the follower to count them again.
    recount: Notify,
}

impl View {
    /// Counts the replicas of the master at `conn` again, and keeps the count.
    /// `periodic`: a count taken without a reason, which keeps a count that dropped to no
    /// replica at all for the next `WAIT` to decide ([`Replicas::periodic`]).
    async fn recount(&self, conn: &mut Named, periodic: bool) -> Option<Replicas> {
        match count_replicas(conn).await {
            Ok(n) => {
                let known = self.replicas.load(Ordering::Acquire);
                let count = if periodic {
                    n.periodic(Some(known))
                } else {
                    n.online
                };
                self.replicas.store(count, Ordering::Release);
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
        let view = Arc::new(View {
            master,
            suspect: Notify::new(),
            replicas: AtomicU32::new(replicas),
            recount: Notify::new(),
        });
        let shared = Arc::new(Shared {
            current: RwLock::new((conn.clone(), addr)),
            view,
            shared_wait: Arc::default(),
        });
        tokio::spawn(follow(Arc::downgrade(&shared), sentinels));
        Ok(SentinelConnection { shared, conn })
    }

    /// A connection of its own (on the caller's runtime) to the master `client` follows: it
    /// moves when `client`'s follower switches, and tells that follower what it suspects and
    /// counts. Its task ends with it, or with `client`'s follower.
    pub(crate) async fn beside(
        client: &SentinelConnection,
        config: &Config,
    ) -> Result<SentinelConnection> {
        let mut master = client.master();
        let addr = master.borrow_and_update().clone();
        let base = config.connection_info()?;
        let conn = connect_node(&base, &addr, config).await?;
        let shared = Arc::new(Shared {
            current: RwLock::new((conn.clone(), addr)),
            view: client.shared.view.clone(),
            shared_wait: Arc::default(),
        });
        tokio::spawn(track(Arc::downgrade(&shared), master, base, config.clone()));
        Ok(SentinelConnection { shared, conn })
    }

    /// The master's address, updated at each switch.
    pub(crate) fn master(&self) -> watch::Receiver<NodeAddr> {
        self.shared.view.master.subscribe()
    }

    /// The replicas connected to the current master, as last counted.
    pub(crate) fn replicas(&self) -> u32 {
        self.shared.view.replicas.load(Ordering::Acquire)
    }

    /// A `WAIT` was answered by `acks` replicas: if that is not the count known, the follower
    /// counts them again (as Redisson 4.x refreshes its count when `WAIT` disagrees).
    pub(crate) fn acked(&self, acks: u32) {
        if acks != self.replicas() {
            self.shared.view.recount.notify_one();
        }
    }

    /// Counts the current master's replicas again now (after a `WAIT` no replica answered:
    /// one may have gone, or be in a full resync), and keeps the count. With none connected,
    /// the follower asks the sentinels at once: the replica may have just been promoted.
    pub(crate) async fn recount(&mut self) -> Option<Replicas> {
        let view = self.shared.view.clone();
        let counted = view.recount(self.current(), false).await;
        if counted.is_some_and(|c| c.listed == 0) {
            view.suspect.notify_one();
        }
        counted
    }

    /// The queues of writes sharing a `WAIT` on this handle's connection.
    pub(super) fn shared_wait(&self) -> &Arc<SharedWait> {
        &self.shared.shared_wait
    }

    /// The current master's connection (refreshed in this handle).
    fn current(&mut self) -> &mut Named {
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
                    shared.view.suspect.notify_one();
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
                shared.view.suspect.notify_one();
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
    async fn connect_master(&self, addr: &NodeAddr) -> Result<(Named, u32)> {
        let mut conn = connect_node(&self.node_base, addr, &self.config).await?;
        let role: Vec<Value> = redis::cmd("ROLE")
            .query_async(&mut conn)
            .await
            .map_err(connect_error)?;
        match role.first() {
            Some(Value::BulkString(role)) if role.as_slice() == b"master" => {
                let replicas = count_replicas(&mut conn).await.map_err(connect_error)?;
                Ok((conn, replicas.online))
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

/// A connection to the data node at `addr` (`base` giving login, TLS and database).
async fn connect_node(base: &ConnectionInfo, addr: &NodeAddr, config: &Config) -> Result<Named> {
    let info = node_info(base, &addr.0, addr.1);
    let client = redis::Client::open(info).map_err(|e| Error::Config(e.to_string()))?;
    connect_manager(client, config).await
}

/// Moves a connection opened beside the client's to each master the client's follower
/// switches to, until the connection or the follower is gone.
async fn track(
    shared: Weak<Shared>,
    mut master: watch::Receiver<NodeAddr>,
    base: ConnectionInfo,
    config: Config,
) {
    while master.changed().await.is_ok() {
        let addr = master.borrow_and_update().clone();
        loop {
            if shared.strong_count() == 0 {
                return;
            }
            match connect_node(&base, &addr, &config).await {
                Ok(conn) => {
                    if let Some(shared) = shared.upgrade() {
                        *shared.current.write() = (conn, addr);
                    }
                    break;
                }
                // (Another switch since: follow that one instead.)
                Err(_) if master.has_changed().unwrap_or(true) => break,
                Err(err) => {
                    tracing::debug!(error = %err, "the new master is not reachable yet");
                    tokio::time::sleep(RETRY_CONNECT).await;
                }
            }
        }
    }
}

/// How soon a connection beside the client's tries the new master again.
const RETRY_CONNECT: Duration = Duration::from_millis(100);

/// The master's replicas that can acknowledge a write (`INFO replication`, see
/// [`online_replicas`](crate::transport::topology::online_replicas)).
async fn count_replicas(conn: &mut Named) -> redis::RedisResult<Replicas> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await?;
    Ok(Replicas::of(&info))
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
            _ = strong.view.suspect.notified() => {}
            _ = async {
                tokio::select! {
                    _ = strong.view.recount.notified() => {}
                    _ = recount.tick() => {}
                }
            } => {
                let mut conn = strong.current.read().0.clone();
                strong.view.recount(&mut conn, true).await;
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
            Ok(addr) if addr != known => {
                let (from, to) = (
                    format!("{}:{}", known.0, known.1),
                    format!("{}:{}", addr.0, addr.1),
                );
                let client_id = sentinels.config.conn_name.as_ref().map(|n| n.client_id());
                let span = crate::observe::failover_span(client_id, "sentinel", &from, &to);
                match sentinels
                    .connect_master(&addr)
                    .instrument(span.clone())
                    .await
                {
                    Ok((conn, replicas)) => {
                        let _following = span.enter(); // (nothing awaited from here)
                        crate::observe::failover_followed(&span, "sentinel", &from, &to);
                        *strong.current.write() = (conn, addr.clone());
                        strong.view.replicas.store(replicas, Ordering::Release);
                        strong.view.master.send_replace(addr);
                    }
                    Err(err) => crate::observe::failover_failed(&span, &err),
                }
            }
            Ok(_) => {}
            Err(err) => {
                turn += 1;
                tracing::debug!(error = %err, "no sentinel answered");
            }
        }
        drop(strong);
    }
}
