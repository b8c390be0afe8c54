//! A real Sentinel group for tests: a master, its replica and three sentinels (quorum 2,
//! `down-after-milliseconds 1000`), `redis-server` processes on free loopback ports, started
//! and killed like the cluster's nodes (see [`super::cluster`]).
//!
//! Why not redis-rs's `redis-test` `RedisSentinel`: it has no faults, and the tests here fail
//! the master over (`SENTINEL FAILOVER`) and kill it.
//!
//! One group serves every test of a binary ([`get`]); tests use distinct keys, and the ones
//! that fail the master over take [`SentinelGroup::exclusive`] and leave the group healthy
//! (a master with a synced replica, every sentinel agreeing on it).
#![allow(dead_code)]

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use redisson_lock::Config;

use super::cluster::{free_ports, remove_dead_runs, spawn_node, wait_for, Node};

/// The master's name in the sentinels' configuration.
pub const MASTER_NAME: &str = "rlock-master";

/// Two data nodes (either may be the master) and three sentinels.
pub struct SentinelGroup {
    pub data: Vec<Node>,
    pub sentinels: Vec<Node>,
}

/// The group of this test binary, started on first use.
pub fn get() -> MutexGuard<'static, SentinelGroup> {
    static GROUP: OnceLock<Mutex<SentinelGroup>> = OnceLock::new();
    GROUP
        .get_or_init(|| Mutex::new(SentinelGroup::start()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Failover tests take the topology exclusively; the others share it.
static TOPOLOGY: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

impl SentinelGroup {
    /// Starts the master, its replica and the sentinels; waits until the group is healthy.
    pub fn start() -> SentinelGroup {
        SentinelGroup::start_with(&[])
    }

    /// As [`SentinelGroup::start`], with `args` for both data nodes (e.g. a managed
    /// service's `--rename-command WAIT ""`).
    pub fn start_with(args: &[&str]) -> SentinelGroup {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let ports = free_ports(5);
        let root = std::env::temp_dir().join(format!(
            "rlock-sentinel-{}-{}",
            std::process::id(),
            ports[0]
        ));
        remove_dead_runs("rlock-sentinel-");
        let _ = std::fs::remove_dir_all(&root);
        let node = |port: u16| Node::new(port, root.join(port.to_string()));
        let mut data = vec![node(ports[0]), node(ports[1])];
        spawn_node(&mut data[0], args.clone());
        let replica_of = ["--replicaof", "127.0.0.1", &ports[0].to_string()].map(String::from);
        spawn_node(&mut data[1], [&replica_of[..], &args].concat());
        let mut sentinels: Vec<Node> = ports[2..].iter().map(|&p| node(p)).collect();
        for sentinel in &mut sentinels {
            let conf = root.join(sentinel.port.to_string()).join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "sentinel monitor {MASTER_NAME} 127.0.0.1 {} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 10000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    ports[0]
                ),
            )
            .unwrap();
            let args = vec![conf.to_string_lossy().into_owned(), "--sentinel".into()];
            spawn_node(sentinel, args);
        }
        let group = SentinelGroup { data, sentinels };
        group.wait_healthy();
        group
    }

    /// Waits until every sentinel names the same master, which has its replica connected and
    /// synced (online in the master's `INFO replication`), and knows the replica and the two
    /// other sentinels.
    pub fn wait_healthy(&self) {
        wait_for("a healthy sentinel group", Duration::from_secs(60), || {
            let Some(master) = self.agreed_master() else {
                return false;
            };
            let replica = self.data.iter().find(|n| n.port != master).unwrap();
            // (The master's side too: lock writes WAIT only for replicas it lists online.)
            replica_states(self.node(master)) == ["online"]
                && replica
                    .info_field("replication", "master_link_status")
                    .as_deref()
                    == Some("up")
                && replica.info_field("replication", "master_port").as_deref()
                    == Some(master.to_string().as_str())
                && self.sentinels.iter().all(|s| {
                    let fields = master_fields(s);
                    fields.get("num-slaves").map(String::as_str) == Some("1")
                        && fields.get("num-other-sentinels").map(String::as_str) == Some("2")
                        && fields.get("flags").map(String::as_str) == Some("master")
                        && replica_flags(s) == ["slave"]
                })
        });
    }

    /// The master's port, if every sentinel names the same node and it says it is a master.
    fn agreed_master(&self) -> Option<u16> {
        let named: Vec<Option<u16>> = self.sentinels.iter().map(named_master).collect();
        let first = named[0]?;
        let node = self.data.iter().find(|n| n.port == first)?;
        (named.iter().all(|n| *n == Some(first)) && node.is_master()).then_some(first)
    }

    /// Failover tests hold this for their whole run. A node a failed test left stopped is
    /// resumed and the group waited healthy first, so that the failure stays that test's.
    pub async fn exclusive() -> tokio::sync::RwLockWriteGuard<'static, ()> {
        let guard = TOPOLOGY.write().await;
        tokio::task::spawn_blocking(|| {
            let group = get();
            for node in group.data.iter().filter(|n| n.is_running()) {
                node.signal(libc::SIGCONT);
            }
            group.wait_healthy();
        })
        .await
        .expect("the sentinel group is healthy");
        guard
    }

    /// Tests that need the master to stay put hold this.
    pub async fn steady() -> tokio::sync::RwLockReadGuard<'static, ()> {
        TOPOLOGY.read().await
    }

    /// `redis://127.0.0.1:<port>` of every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Node::url).collect()
    }

    /// A client configuration through the sentinels.
    pub fn config(&self) -> Config {
        Config::sentinel(MASTER_NAME, self.sentinel_urls())
            .expect("sentinel config")
            // (Tests count a lock's waiters by its channel's subscribers, which a holder
            // listening for its loss would add to: tests/loss.rs and the fleet turn it on.)
            .with_prompt_loss_detection(false)
    }

    /// The current master (as the sentinels name it).
    pub fn master(&self) -> &Node {
        let port = named_master(&self.sentinels[0]).expect("the sentinels name a master");
        self.data.iter().find(|n| n.port == port).unwrap()
    }

    /// The current replica.
    pub fn replica(&self) -> &Node {
        let master = self.master().port;
        self.data.iter().find(|n| n.port != master).unwrap()
    }

    /// `SENTINEL FAILOVER`: waits until every sentinel names the replica and it says it is a
    /// master (the moment clients can switch), returns its port, and then until the old
    /// master is its synced replica.
    pub fn fail_over(&self) -> u16 {
        let new = self.replica().port;
        // A sentinel refuses with NOGOODSLAVE until it has fresh INFO of the replica, and a
        // failover it took can still be aborted (its promotion timing out on a loaded
        // machine): ask again until the sentinels name the replica.
        let mut asked: Option<std::time::Instant> = None;
        wait_for(
            "the sentinels to name the new master",
            Duration::from_secs(60),
            || {
                if self.agreed_master() == Some(new) {
                    return true;
                }
                if asked.is_none_or(|at| at.elapsed() > Duration::from_secs(15)) {
                    let taken = self.sentinels[0]
                        .cmd::<String>(&["SENTINEL", "FAILOVER", MASTER_NAME])
                        .is_ok();
                    asked = taken.then(std::time::Instant::now).or(asked);
                }
                false
            },
        );
        self.wait_healthy();
        new
    }

    /// SIGSTOP of the master: waits until the sentinels have promoted its replica (the old
    /// master, frozen, still believes it is the master) and returns `(old, new)` ports. Resume
    /// the old one with [`SentinelGroup::resume`].
    pub fn freeze_master(&self) -> (u16, u16) {
        let (old, new) = (self.master().port, self.replica().port);
        self.node(old).signal(libc::SIGSTOP);
        wait_for(
            "the sentinels to promote the replica",
            Duration::from_secs(30),
            || {
                self.sentinels.iter().all(|s| named_master(s) == Some(new))
                    && self.node(new).is_master()
            },
        );
        (old, new)
    }

    /// SIGCONT of the node at `port` (frozen by [`SentinelGroup::freeze_master`]); waits until
    /// the sentinels have made it a synced replica again.
    pub fn resume(&self, port: u16) {
        self.node(port).signal(libc::SIGCONT);
        self.wait_healthy();
    }

    /// Restarts the replica without its data, so that it does a full resync, with the master
    /// holding the sync back for `delay` (diskless sync's delay, as a master waits for more
    /// replicas before it streams). Returns once the master lists the replica as syncing (not
    /// `state=online`), with the master's settings to put back with
    /// [`SentinelGroup::restore_settings`].
    pub fn restart_replica_empty(&mut self, delay: Duration) -> Vec<(String, String)> {
        let master = self.master().port;
        let mut saved = Vec::new();
        for (field, value) in [
            ("repl-diskless-sync", "yes".to_string()),
            (
                "repl-diskless-sync-delay",
                delay.as_secs().max(1).to_string(),
            ),
        ] {
            let (_, was): (String, String) =
                self.node(master).cmd(&["CONFIG", "GET", field]).unwrap();
            saved.push((field.to_string(), was));
            let _: String = self
                .node(master)
                .cmd(&["CONFIG", "SET", field, &value])
                .unwrap();
        }
        let replica = self.data.iter().position(|n| n.port != master).unwrap();
        let args = ["--replicaof", "127.0.0.1", &master.to_string()]
            .map(String::from)
            .to_vec();
        self.data[replica].restart_empty(args);
        wait_for(
            "the replica to start its full resync",
            Duration::from_secs(10),
            || {
                let states = replica_states(self.node(master));
                states == ["wait_bgsave"] || states == ["send_bulk"]
            },
        );
        saved
    }

    /// Sets the master's configuration `settings` (as saved by
    /// [`SentinelGroup::restart_replica_empty`]).
    pub fn restore_settings(&self, settings: &[(String, String)]) {
        for (field, value) in settings {
            let _: String = self.master().cmd(&["CONFIG", "SET", field, value]).unwrap();
        }
    }

    /// kill -9 of the master: waits until the sentinels have promoted its replica, and
    /// returns `(old, new)` ports. Bring the old one back with [`SentinelGroup::revive`].
    pub fn kill_master(&mut self) -> (u16, u16) {
        let (old, new) = (self.master().port, self.replica().port);
        self.data.iter_mut().find(|n| n.port == old).unwrap().kill();
        wait_for(
            "the sentinels to promote the replica",
            Duration::from_secs(30),
            || {
                self.sentinels.iter().all(|s| named_master(s) == Some(new))
                    && self.node(new).is_master()
            },
        );
        (old, new)
    }

    /// Starts the killed node at `port` again, empty, as the current master's replica, and
    /// waits until the group is healthy.
    ///
    /// Until it has synced, the sentinels must not promote it: a node without persistence
    /// restarted empty and promoted would have the live master resync from it and lose every
    /// key (Redis's own warning). On a loaded machine a sentinel can take the new master for
    /// down (no `PING` answer within its 1 s while it forks the full sync) and fail it over to
    /// the first replica it finds: so the node comes back with `replica-priority 0`, which no
    /// sentinel promotes, and takes the default again once synced.
    pub fn revive(&mut self, port: u16) {
        let master = self.master().port.to_string();
        let args = [
            "--replicaof",
            "127.0.0.1",
            &master,
            "--replica-priority",
            "0",
        ]
        .map(String::from)
        .to_vec();
        let node = self.data.iter_mut().find(|n| n.port == port).unwrap();
        node.restart_empty(args);
        self.wait_healthy();
        let node = self.node(port);
        let _: () = node
            .cmd(&["CONFIG", "SET", "replica-priority", "100"])
            .expect("the revived node takes the default priority again");
    }

    /// The node at `port`.
    pub fn node(&self, port: u16) -> &Node {
        self.data
            .iter()
            .chain(&self.sentinels)
            .find(|n| n.port == port)
            .unwrap()
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        for node in self.data.iter_mut().chain(&mut self.sentinels) {
            node.kill();
        }
    }
}

/// The master's port as `sentinel` names it.
fn named_master(sentinel: &Node) -> Option<u16> {
    let addr: Option<(String, u16)> = sentinel
        .cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])
        .ok()?;
    addr.map(|(_, port)| port)
}

/// The `flags` of each replica `sentinel` knows (`slave` when it is up and synced).
fn replica_flags(sentinel: &Node) -> Vec<String> {
    let replicas: Vec<Vec<String>> = sentinel
        .cmd(&["SENTINEL", "REPLICAS", MASTER_NAME])
        .unwrap_or_default();
    replicas
        .iter()
        .filter_map(|flat| {
            flat.chunks(2)
                .find(|kv| kv[0] == "flags")
                .and_then(|kv| kv.get(1).cloned())
        })
        .collect()
}

/// `SENTINEL MASTER <name>` as field → value.
fn master_fields(sentinel: &Node) -> std::collections::HashMap<String, String> {
    let flat: Vec<String> = sentinel
        .cmd(&["SENTINEL", "MASTER", MASTER_NAME])
        .unwrap_or_default();
    flat.chunks(2)
        .filter_map(|kv| match kv {
            [k, v] => Some((k.clone(), v.clone())),
            _ => None,
        })
        .collect()
}

/// The `state=` of each replica the master at `node` lists (`online`, `wait_bgsave`,
/// `send_bulk`, ...).
pub fn replica_states(node: &Node) -> Vec<String> {
    let info: String = node.cmd(&["INFO", "replication"]).unwrap_or_default();
    info.lines()
        .filter(|l| l.starts_with("slave") && l.contains("state="))
        .filter_map(|l| {
            let state = l.split(',').find_map(|f| f.strip_prefix("state="))?;
            Some(state.trim().to_string())
        })
        .collect()
}

/// A connection to whichever node the sentinels name master, for a test's own commands
/// through a failover (redis-rs's sentinel client finds the master once): after an I/O error or
/// a `READONLY` it asks the sentinels again on its next command. Each write (anything but
/// `GET`) is followed by `WAIT 1` in the same write and fails unless the replica acknowledged
/// it: a write that a failover may lose is reported, as the lock writes' are (a master keeps
/// taking writes for a moment after its replica was promoted, and loses them).
#[derive(Clone)]
pub struct MasterConnection {
    sentinels: Vec<String>,
    current: Arc<tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>>,
}

impl MasterConnection {
    pub fn new(sentinels: Vec<String>) -> MasterConnection {
        MasterConnection {
            sentinels,
            current: Arc::default(),
        }
    }

    async fn conn(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        let mut current = self.current.lock().await;
        if let Some(conn) = &*current {
            return Ok(conn.clone());
        }
        let mut last = None;
        for url in &self.sentinels {
            let asked = async {
                let mut sentinel = redis::Client::open(url.as_str())?
                    .get_multiplexed_async_connection()
                    .await?;
                let (host, port): (String, u16) = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(MASTER_NAME)
                    .query_async(&mut sentinel)
                    .await?;
                redis::Client::open(format!("redis://{host}:{port}"))?
                    .get_multiplexed_async_connection()
                    .await
            };
            match asked.await {
                Ok(conn) => {
                    *current = Some(conn.clone());
                    return Ok(conn);
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.expect("at least one sentinel"))
    }

    /// Forgets the connection after a reply that says it may not reach the master.
    async fn check<T>(&self, reply: &redis::RedisResult<T>) {
        if let Err(err) = reply {
            if err.is_io_error()
                || err.is_connection_dropped()
                || err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
            {
                *self.current.lock().await = None;
            }
        }
    }
}

impl redis::aio::ConnectionLike for MasterConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let is_read = matches!(cmd.args_iter().next(), Some(redis::Arg::Simple(name)) if name.eq_ignore_ascii_case(b"GET"));
            let reply = if is_read {
                let mut reply = conn
                    .req_packed_command(cmd)
                    .await
                    .and_then(redis::Value::extract_error);
                // (A read is sent again once, to the master asked for anew.)
                if reply
                    .as_ref()
                    .is_err_and(|e| e.is_io_error() || e.is_connection_dropped())
                {
                    *self.current.lock().await = None;
                    reply = self
                        .conn()
                        .await?
                        .req_packed_command(cmd)
                        .await
                        .and_then(redis::Value::extract_error);
                }
                reply
            } else {
                durable(&mut conn, cmd).await
            };
            self.check(&reply).await;
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipe: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let reply = conn.req_packed_commands(pipe, offset, count).await;
            self.check(&reply).await;
            reply
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// `cmd`, then `WAIT 1 1000` in the same write: its reply if the replica acknowledged it.
async fn durable(
    conn: &mut redis::aio::MultiplexedConnection,
    cmd: &redis::Cmd,
) -> redis::RedisResult<redis::Value> {
    let mut pipe = redis::pipe();
    pipe.add_command(cmd.clone()).cmd("WAIT").arg(1).arg(1000);
    use redis::aio::ConnectionLike;
    let mut replies = conn.req_packed_commands(&pipe, 0, 2).await?.into_iter();
    let reply = replies
        .next()
        .unwrap_or(redis::Value::Nil)
        .extract_error()?;
    let acks: i64 = redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil))?;
    if acks < 1 {
        return Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "the replica did not acknowledge the write",
        )));
    }
    Ok(reply)
}
