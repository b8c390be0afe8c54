//! A real Redis Cluster for tests: 6 `redis-server` processes (3 masters, 3 replicas) on free
//! loopback ports, formed by commands (`CLUSTER MEET`, `ADDSLOTS`, `REPLICATE`), so it works
//! with every server of the matrix (Redis 6.2 has no `ADDSLOTSRANGE`).
//!
//! Why not redis-rs's `redis-test` fixtures: they pick any free port (the cluster bus is
//! port + 10000, so a port above 55535 breaks the bus), and they have no faults: the tests here
//! kill -9 one node and start it again on its port, fail a master over, and move slots.
//!
//! One cluster serves every test of a binary ([`get`]); tests use distinct keys, and the ones
//! that change the topology take [`RedisCluster::exclusive`] and leave it healed. The nodes are
//! started from a thread that lives as long as the test process, with a parent-death signal, so
//! they die with the process even though a `static` is never dropped.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use redisson_lock::Config;

/// Slots of the three masters.
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// One node: its port, its folder (its `nodes.conf` survives a restart), its process.
pub struct Node {
    pub port: u16,
    /// The port it tells clients to use instead of its own (a proxy in front of it).
    announced: Option<u16>,
    dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    /// A node to start on `port`, in `dir` (created).
    pub fn new(port: u16, dir: PathBuf) -> Node {
        std::fs::create_dir_all(&dir).unwrap();
        Node {
            port,
            announced: None,
            dir,
            child: None,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))
    }

    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut self.conn()?)
    }

    /// kill -9 of its process (it can be started again on its port, in its folder).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// kill -9 of its process, then starts it again with nothing on disk (a new node, or one
    /// whose disk was lost), with `args` after the common ones.
    pub fn restart_empty(&mut self, args: Vec<String>) {
        self.kill();
        for entry in std::fs::read_dir(&self.dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".rdb") || name.starts_with("appendonly") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        spawn_node(self, args);
    }

    /// Sends `signal` (`libc::SIGSTOP`, `SIGCONT`) to its process.
    pub fn signal(&self, signal: i32) {
        let pid = self.child.as_ref().expect("a running node").id();
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// This node's cluster id.
    pub fn id(&self) -> String {
        self.cmd(&["CLUSTER", "MYID"]).expect("CLUSTER MYID")
    }

    /// A field of `INFO <section>`, or of `CLUSTER INFO` for section `cluster`.
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let args = match section {
            "cluster" => ["CLUSTER", "INFO"],
            _ => ["INFO", section],
        };
        let info: String = self.cmd(&args).ok()?;
        let prefix = format!("{field}:");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map(|v| v.trim().to_string())
    }

    pub fn is_master(&self) -> bool {
        self.info_field("replication", "role").as_deref() == Some("master")
    }
}

/// A 6-node cluster, killed with the test process.
pub struct RedisCluster {
    pub nodes: Vec<Node>,
}

/// The cluster of this test binary, started on first use (a test that panicked while looking
/// at it does not lock the others out).
pub fn get() -> MutexGuard<'static, RedisCluster> {
    static CLUSTER: OnceLock<Mutex<RedisCluster>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| Mutex::new(RedisCluster::start()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Tests that change the topology (failover, slot moves) take it exclusively; the others share
/// it, so none of them runs through a failover it did not ask for.
static TOPOLOGY: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

impl RedisCluster {
    /// Starts 6 nodes and forms the cluster; waits for `cluster_state:ok` and one synced
    /// replica per master.
    pub fn start() -> RedisCluster {
        RedisCluster::start_on(&free_ports(6), None)
    }

    /// A cluster on `ports` (from [`free_ports`]; the first three are the masters, the next
    /// three, if given, their replicas). With `announce: Some((i, port))`, node `i` tells
    /// clients to reach it on `port` (a fault proxy in front of it), while the other nodes talk
    /// to it on its cluster bus directly. (A replica of that node would replicate through the
    /// proxy too, which relays only RESP: give such a cluster no replicas.)
    pub fn start_on(ports: &[u16], announce: Option<(usize, u16)>) -> RedisCluster {
        let root =
            std::env::temp_dir().join(format!("rlock-cluster-{}-{}", std::process::id(), ports[0]));
        remove_dead_runs("rlock-cluster-");
        let _ = std::fs::remove_dir_all(&root);
        let mut nodes: Vec<Node> = ports
            .iter()
            .enumerate()
            .map(|(i, &port)| {
                let dir = root.join(port.to_string());
                std::fs::create_dir_all(&dir).unwrap();
                Node {
                    port,
                    announced: announce.filter(|(at, _)| *at == i).map(|(_, p)| p),
                    dir,
                    child: None,
                }
            })
            .collect();
        for node in &mut nodes {
            spawn(node);
        }
        let cluster = RedisCluster { nodes };
        cluster.form();
        cluster
    }

    fn form(&self) {
        let first = &self.nodes[0];
        for node in &self.nodes[1..] {
            let _: () = first
                .cmd(&["CLUSTER", "MEET", "127.0.0.1", &node.port.to_string()])
                .unwrap();
        }
        for (node, (start, end)) in self.nodes.iter().zip(RANGES) {
            let slots: Vec<String> = (start..=end).map(|s| s.to_string()).collect();
            let mut cmd = redis::cmd("CLUSTER");
            cmd.arg("ADDSLOTS").arg(&slots);
            let _: () = cmd.query(&mut node.conn().unwrap()).unwrap();
        }
        // Every node must know every other before a replica can name its master.
        wait_for("all nodes to meet", Duration::from_secs(20), || {
            self.nodes.iter().all(|n| {
                n.cmd::<String>(&["CLUSTER", "NODES"])
                    .is_ok_and(|nodes| nodes.lines().count() == self.nodes.len())
            })
        });
        // (A cluster of 3 nodes has masters only.)
        for i in (0..3).filter(|i| i + 3 < self.nodes.len()) {
            let master = self.nodes[i].id();
            wait_for(
                "the replica to accept its master",
                Duration::from_secs(20),
                || {
                    self.nodes[i + 3]
                        .cmd::<()>(&["CLUSTER", "REPLICATE", &master])
                        .is_ok()
                },
            );
        }
        self.wait_healthy();
    }

    /// Waits until every running node says `cluster_state:ok` and every master has a replica
    /// whose link is up.
    pub fn wait_healthy(&self) {
        wait_for(
            "cluster_state:ok with a replica per master",
            Duration::from_secs(60),
            || {
                self.nodes
                    .iter()
                    .filter(|n| n.is_running())
                    .all(|n| n.info_field("cluster", "cluster_state").as_deref() == Some("ok"))
                    && self.masters().len() == 3
                    && self.masters().iter().all(|m| {
                        let replicas = if self.nodes.len() > 3 { "1" } else { "0" };
                        m.info_field("replication", "connected_slaves").as_deref() == Some(replicas)
                    })
                    && self
                        .nodes
                        .iter()
                        .filter(|n| n.is_running() && !n.is_master())
                        .all(|r| {
                            r.info_field("replication", "master_link_status").as_deref()
                                == Some("up")
                        })
            },
        );
    }

    /// Takes the cluster for a test that changes its topology (a panicking holder still
    /// lets the next one in), healed first: a test that failed midway (a master left killed
    /// or stopped) fails alone, not every topology test after it.
    pub async fn exclusive() -> tokio::sync::RwLockWriteGuard<'static, ()> {
        let guard = TOPOLOGY.write().await;
        tokio::task::spawn_blocking(|| {
            let mut cluster = get();
            for node in cluster.nodes.iter().filter(|n| n.is_running()) {
                node.signal(libc::SIGCONT);
            }
            cluster.heal();
        })
        .await
        .expect("the cluster heals");
        guard
    }

    /// Shares the cluster with the other tests that keep its topology as it is.
    pub async fn steady() -> tokio::sync::RwLockReadGuard<'static, ()> {
        TOPOLOGY.read().await
    }

    /// The seed URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// A cluster [`Config`] with a short watchdog, so watchdog tests run fast.
    pub fn config(&self) -> Config {
        Config::cluster(self.urls())
            .expect("valid cluster urls")
            .with_watchdog_timeout(Duration::from_millis(1500))
            // (Tests count a lock's waiters by its channel's subscribers, which a holder
            // listening for its loss would add to: tests/loss.rs and the fleet turn it on.)
            .with_prompt_loss_detection(false)
    }

    /// The running masters.
    pub fn masters(&self) -> Vec<&Node> {
        self.nodes
            .iter()
            .filter(|n| n.is_running() && n.is_master())
            .collect()
    }

    /// The master serving `slot`, as the cluster says now.
    pub fn master_of_slot(&self, slot: u16) -> &Node {
        let any = self.nodes.iter().find(|n| n.is_running()).unwrap();
        let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut any.conn().unwrap())
            .unwrap();
        let port = ranges
            .iter()
            .find_map(|range| {
                let start: u16 = redis::from_redis_value(range[0].clone()).ok()?;
                let end: u16 = redis::from_redis_value(range[1].clone()).ok()?;
                let master: Vec<redis::Value> = redis::from_redis_value(range[2].clone()).ok()?;
                let port: u16 = redis::from_redis_value(master[1].clone()).ok()?;
                (start..=end).contains(&slot).then_some(port)
            })
            .expect("every slot is served");
        self.node(port)
    }

    /// The master serving `key`.
    pub fn master_of(&self, key: &str) -> &Node {
        self.master_of_slot(slot_of(key))
    }

    /// The replica of `master`.
    pub fn replica_of(&self, master: &Node) -> &Node {
        let id = master.id();
        self.nodes
            .iter()
            .filter(|n| n.is_running() && n.port != master.port)
            .find(|n| {
                n.cmd::<String>(&["CLUSTER", "NODES"]).is_ok_and(|nodes| {
                    nodes
                        .lines()
                        .any(|l| l.contains("myself") && l.contains(&format!("slave {id}")))
                })
            })
            .expect("the master has a replica")
    }

    /// `CLUSTER FAILOVER` at the replica of the master serving `slot`; returns once the
    /// replica serves it and the cluster is healthy, with the new master's port. A manual
    /// failover gives up on its own when the old master is slow to hand over (a loaded
    /// machine): it is asked again, and the third time with `FORCE`.
    pub fn fail_over(&self, slot: u16) -> u16 {
        let old = self.master_of_slot(slot).port;
        let replica = self.replica_of(self.master_of_slot(slot)).port;
        for attempt in 0..3 {
            let args: &[&str] = if attempt < 2 {
                &["CLUSTER", "FAILOVER"]
            } else {
                &["CLUSTER", "FAILOVER", "FORCE"]
            };
            let _: () = self.node(replica).cmd(args).expect("CLUSTER FAILOVER");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if self.master_of_slot(slot).port != old && self.node(replica).is_master() {
                    self.wait_healthy();
                    return replica;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("the replica on {replica} never took over slot {slot} from {old}");
    }

    /// Moves `slot`, keys and all, to the master on `to`, as an operator resharding does:
    /// `SETSLOT IMPORTING` on the target, `MIGRATING` on the source, `MIGRATE` of its keys,
    /// then `SETSLOT NODE` on every master. Returns once every node says `to` serves it.
    pub fn migrate_slot(&self, slot: u16, to: u16) {
        self.start_migration(slot, to);
        self.move_keys(slot, to, usize::MAX);
        self.finish_migration(slot, to);
    }

    /// The first step of [`migrate_slot`](Self::migrate_slot): `slot` importing at `to`,
    /// migrating at its master.
    pub fn start_migration(&self, slot: u16, to: u16) {
        let source = self.master_of_slot(slot);
        let target = self.node(to);
        let (source_id, target_id) = (source.id(), target.id());
        let slot_arg = slot.to_string();
        let _: () = target
            .cmd(&["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &source_id])
            .unwrap();
        let _: () = source
            .cmd(&["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &target_id])
            .unwrap();
    }

    /// `MIGRATE`s up to `at_most` keys of `slot` (mid-migration) from its master to `to`;
    /// returns how many moved.
    pub fn move_keys(&self, slot: u16, to: u16, at_most: usize) -> usize {
        let source = self.master_of_slot(slot);
        let slot_arg = slot.to_string();
        let mut moved = 0;
        while moved < at_most {
            let batch = (at_most - moved).min(100).to_string();
            let keys: Vec<String> = source
                .cmd(&["CLUSTER", "GETKEYSINSLOT", &slot_arg, &batch])
                .unwrap();
            if keys.is_empty() {
                break;
            }
            let to_arg = to.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &to_arg, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: String = source.cmd(&args).unwrap();
            moved += keys.len();
        }
        moved
    }

    /// The last step of [`migrate_slot`](Self::migrate_slot): `SETSLOT NODE` on every master;
    /// returns once every node says `to` serves `slot`.
    pub fn finish_migration(&self, slot: u16, to: u16) {
        let source = self.master_of_slot(slot);
        let target = self.node(to);
        let target_id = target.id();
        let slot_arg = slot.to_string();
        for node in [target, source].into_iter().chain(
            self.masters()
                .into_iter()
                .filter(|m| m.port != to && m.port != source.port),
        ) {
            let _: () = node
                .cmd(&["CLUSTER", "SETSLOT", &slot_arg, "NODE", &target_id])
                .unwrap();
        }
        wait_for(
            "every node to see the slot moved",
            Duration::from_secs(20),
            || {
                self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                    let ranges: Vec<Vec<redis::Value>> =
                        n.cmd(&["CLUSTER", "SLOTS"]).unwrap_or_default();
                    ranges.iter().any(|range| {
                        let first: u16 = redis::from_redis_value(range[0].clone()).unwrap_or(1);
                        let last: u16 = redis::from_redis_value(range[1].clone()).unwrap_or(0);
                        let master: Vec<redis::Value> =
                            redis::from_redis_value(range[2].clone()).unwrap_or_default();
                        let port: u16 = master
                            .get(1)
                            .and_then(|p| redis::from_redis_value(p.clone()).ok())
                            .unwrap_or(0);
                        (first..=last).contains(&slot) && port == to
                    })
                })
            },
        );
    }

    /// The node on `port` (its own, or the one it announces).
    pub fn node(&self, port: u16) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.port == port || n.announced == Some(port))
            .expect("a node of this cluster")
    }

    /// kill -9 of the node on `port` (its data is lost; its `nodes.conf` stays).
    pub fn kill(&mut self, port: u16) {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap()
            .kill();
    }

    /// Starts every killed node again on its port (each rejoins from its `nodes.conf`) and
    /// waits until the cluster is healthy.
    pub fn heal(&mut self) {
        for node in self.nodes.iter_mut().filter(|n| n.child.is_none()) {
            spawn(node);
        }
        self.wait_healthy();
    }

    /// Subscribers of `channel`: `PUBSUB SHARDNUMSUB` at `key`'s master (sharded), or
    /// `NUMSUB` summed over the running nodes (classic: subscribers may sit on any node, replicas
    /// too, since a `PUBLISH` reaches them all).
    pub fn listeners(&self, key: &str, channel: &str, sharded: bool) -> i64 {
        let sub = if sharded { "SHARDNUMSUB" } else { "NUMSUB" };
        let nodes: Vec<&Node> = if sharded {
            vec![self.master_of(key)]
        } else {
            self.nodes.iter().filter(|n| n.is_running()).collect()
        };
        nodes
            .iter()
            .map(|node| {
                let (_, n): (String, i64) = node.cmd(&["PUBSUB", sub, channel]).unwrap();
                n
            })
            .sum()
    }

    /// Per node port: how often `command` ran there (`INFO commandstats`).
    pub fn command_calls(&self, command: &str) -> HashMap<u16, u64> {
        let field = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
        self.info_numbers("commandstats", &field)
    }

    /// Per running node port: the number after `field` in `INFO section` (up to a `,`), 0
    /// where the node has none.
    pub fn info_numbers(&self, section: &str, field: &str) -> HashMap<u16, u64> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .map(|n| {
                let info: String = n.cmd(&["INFO", section]).unwrap_or_default();
                let number = info
                    .lines()
                    .find_map(|l| l.strip_prefix(field))
                    .and_then(|rest| rest.split(',').next()?.trim().parse().ok())
                    .unwrap_or(0);
                (n.port, number)
            })
            .collect()
    }

    /// kill -9 of the master serving `slot`, then waits until its replica is promoted;
    /// returns the killed master's port.
    pub fn kill_master_of(&mut self, slot: u16) -> u16 {
        let master = self.master_of_slot(slot).port;
        self.kill(master);
        wait_for("a replica to be promoted", Duration::from_secs(30), || {
            self.master_of_slot(slot).port != master
        });
        master
    }
}

/// Removes the folders (named `<prefix><pid>-...`) of earlier test processes that are gone (a
/// `static` is never dropped).
pub fn remove_dead_runs(prefix: &str) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
        {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        if let Some(root) = self.nodes.first().and_then(|n| n.dir.parent()) {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

/// `n` free loopback ports whose cluster bus port (+10000) is free too; never the same twice
/// in one process. All of them, bus ports included, lie below the kernel's ephemeral range
/// (32768 and up), so no outgoing connection can take one between the pick and the bind.
pub fn free_ports(n: usize) -> Vec<u16> {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let base = 10000 + (std::process::id() % 1000) as u16 * 12;
    let _ = NEXT.compare_exchange(
        0,
        base,
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut ports = Vec::new();
    while ports.len() < n {
        let candidate = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        assert!(candidate + 10000 < 32768, "no free ports for a cluster");
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(candidate) && free(candidate + 10000) {
            ports.push(candidate);
        }
    }
    ports
}

/// Starts `node`'s process from the keeper thread (see the module docs).
fn spawn(node: &mut Node) {
    let port = node.port;
    let mut args: Vec<String> = match node.announced {
        Some(to) => vec![
            "--cluster-announce-port".into(),
            to.to_string(),
            "--cluster-announce-bus-port".into(),
            (port + 10000).to_string(),
        ],
        None => Vec::new(),
    };
    args.extend(
        [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "2000",
        ]
        .map(String::from),
    );
    spawn_node(node, args);
}

/// Starts `node`'s `redis-server` on its port and in its folder, with `args` after the
/// common ones (no persistence), from the keeper thread; waits until it answers `PING`. A
/// first argument ending in `.conf` is passed first, as the config file.
pub fn spawn_node(node: &mut Node, args: Vec<String>) {
    let port = node.port;
    let dir = node.dir.clone();
    let child = keeper(move || {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("redis-server");
        let (conf, args) = match args.split_first() {
            Some((conf, rest)) if conf.ends_with(".conf") => (Some(conf.clone()), rest.to_vec()),
            _ => (None, args),
        };
        cmd.args(conf)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; it only asks for SIGKILL when the keeper thread
        // (which never exits before the process does) goes away.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        cmd.spawn().expect("redis-server must be on PATH")
    });
    node.child = Some(child);
    wait_for("the node to answer PING", Duration::from_secs(10), || {
        node.cmd::<String>(&["PING"]).is_ok()
    });
}

/// Runs `spawn` on the keeper thread: a parent-death signal fires when the *thread* that
/// forked the child exits, so every node is forked from one thread that never exits.
pub fn keeper(spawn: impl FnOnce() -> Child + Send + 'static) -> Child {
    type Job = (
        Box<dyn FnOnce() -> Child + Send>,
        std::sync::mpsc::Sender<Child>,
    );
    static KEEPER: OnceLock<Mutex<std::sync::mpsc::Sender<Job>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for (job, reply) in rx {
                let _ = reply.send(job());
            }
            // (The sender lives in a static: this loop never ends.)
        });
        Mutex::new(tx)
    });
    let (reply, child) = std::sync::mpsc::channel();
    keeper
        .lock()
        .unwrap()
        .send((Box::new(spawn), reply))
        .unwrap();
    child.recv().expect("the keeper thread spawns")
}

/// Polls `ready` every 20 ms until it holds, or panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The cluster slot of `key` (the crate's own CRC16, which the cluster tests check against
/// the server's slot map: a key is always found at the master `CLUSTER SLOTS` names).
pub fn slot_of(key: &str) -> u16 {
    redisson_lock::names::cluster_slot(key)
}

/// A key named after `prefix` that lives on the master of `RANGES[master]`.
pub fn key_on_master(prefix: &str, master: usize) -> String {
    let (start, end) = RANGES[master];
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|k| (start..=end).contains(&slot_of(k)))
        .unwrap()
}
