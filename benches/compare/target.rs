//! What a run is measured against: one standalone server, a Redis Cluster (masters only, or a
//! replica per master), or a Sentinel-watched master with a replica. Server-side counters of a
//! cluster are summed over its masters; a key's own counters are read at its slot's master.
//! With replicas, every client waits for them after each lock write (`WAIT`): the crate and
//! Redisson by default, the floor in the same write as its script.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, Value};
use redisson_lock::{names, Config};

use crate::redis_util::parse_commandstats;

#[derive(Clone, Debug)]
pub(crate) enum Target {
    Single(String),
    /// The masters' URLs; every slot lives on one of them. `replicas`: each master has one.
    Cluster {
        masters: Vec<String>,
        replicas: bool,
    },
    /// The master the sentinels know as `name` (with one replica), and where it is now.
    Sentinel {
        name: String,
        sentinels: Vec<String>,
        master: String,
    },
}

impl Target {
    /// A Sentinel group from `NAME@URL,URL,...` (the sentinels), its master asked of them.
    pub(crate) fn sentinel(spec: &str) -> Target {
        let (name, urls) = spec.split_once('@').expect("--sentinel NAME@URL,URL,...");
        let sentinels: Vec<String> = urls.split(',').map(|s| s.trim().to_string()).collect();
        let (host, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name)
            .query(&mut sync_conn(&sentinels[0]))
            .expect("the sentinels name a master");
        Target::Sentinel {
            name: name.to_string(),
            sentinels,
            master: format!("redis://{host}:{port}"),
        }
    }

    /// This target as the orchestrator's command-line arguments (for the P4 child).
    pub(crate) fn args(&self) -> [String; 2] {
        match self {
            Target::Single(url) => ["--redis".into(), url.clone()],
            Target::Cluster { masters, replicas } => [
                if *replicas {
                    "--cluster-replicas"
                } else {
                    "--cluster"
                }
                .into(),
                masters.join(","),
            ],
            Target::Sentinel {
                name, sentinels, ..
            } => [
                "--sentinel".into(),
                format!("{name}@{}", sentinels.join(",")),
            ],
        }
    }

    /// The heading of this target's table.
    pub(crate) fn title(&self) -> String {
        match self {
            Target::Single(_) => "Standalone".into(),
            Target::Cluster {
                masters,
                replicas: false,
            } => format!("Redis Cluster: {} masters, no replicas", masters.len()),
            Target::Cluster {
                masters,
                replicas: true,
            } => format!(
                "Redis Cluster: {} masters, one replica each (replica sync on)",
                masters.len()
            ),
            Target::Sentinel { .. } => {
                "Sentinel: one master, one replica, 3 sentinels (replica sync on)".into()
            }
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster { .. })
    }

    /// Whether every master has a replica: lock writes then wait for it (`WAIT 1 <1 s>`).
    pub(crate) fn has_replicas(&self) -> bool {
        matches!(
            self,
            Target::Cluster { replicas: true, .. } | Target::Sentinel { .. }
        )
    }

    /// The servers that hold data (masters: a replica follows its master's `FLUSHALL`).
    pub(crate) fn nodes(&self) -> &[String] {
        match self {
            Target::Single(url) | Target::Sentinel { master: url, .. } => std::slice::from_ref(url),
            Target::Cluster { masters, .. } => masters,
        }
    }

    /// The URL of the master that holds `key`.
    pub(crate) fn node_of(&self, key: &str) -> String {
        let Target::Cluster { masters, .. } = self else {
            return self.nodes()[0].clone();
        };
        let slot = names::cluster_slot(key) as i64;
        let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut sync_conn(&masters[0]))
            .expect("CLUSTER SLOTS");
        for range in slots {
            let num = |v: &redis::Value| -> i64 { redis::from_redis_value_ref(v).unwrap() };
            if num(&range[0]) <= slot && slot <= num(&range[1]) {
                let node: Vec<redis::Value> = redis::from_redis_value_ref(&range[2]).unwrap();
                let host: String = redis::from_redis_value_ref(&node[0]).unwrap();
                return format!("redis://{host}:{}", num(&node[1]));
            }
        }
        panic!("slot {slot} of {key} is served by no master");
    }

    /// The crate's settings for this target (Auto publish mode, as Redisson decides).
    pub(crate) fn config(&self) -> Config {
        match self {
            Target::Single(url) => Config::from_url(url).unwrap(),
            Target::Cluster { masters, .. } => Config::cluster(masters).unwrap(),
            Target::Sentinel {
                name, sentinels, ..
            } => Config::sentinel(name, sentinels).unwrap(),
        }
    }

    /// The command the floor publishes unlock messages with: what `PublishMode::Auto` picks
    /// (the bench's servers are Redis 7, so sharded on a cluster).
    pub(crate) fn publish_command(&self) -> &'static str {
        if self.is_cluster() {
            "spublish"
        } else {
            "publish"
        }
    }

    /// The URL argument of `interop.Bench`: `cluster:` and the masters, the one holding
    /// `stats_key` first (Bench reads its per-key counters at the first URL), or `sentinel:`,
    /// the master's name, `@` and the sentinels (Bench asks them for the master).
    pub(crate) fn java_url(&self, stats_key: &str) -> String {
        match self {
            Target::Single(url) => url.clone(),
            Target::Sentinel {
                name, sentinels, ..
            } => format!("sentinel:{name}@{}", sentinels.join(",")),
            Target::Cluster { masters, .. } => {
                let first = self.node_of(stats_key);
                let mut all = vec![first.clone()];
                all.extend(masters.iter().filter(|m| **m != first).cloned());
                format!("cluster:{}", all.join(","))
            }
        }
    }

    pub(crate) fn flushall(&self) {
        for node in self.nodes() {
            let _: () = redis::cmd("FLUSHALL").query(&mut sync_conn(node)).unwrap();
        }
    }

    pub(crate) fn dbsize(&self) -> u64 {
        self.nodes()
            .iter()
            .map(|node| {
                redis::cmd("DBSIZE")
                    .query::<u64>(&mut sync_conn(node))
                    .unwrap()
            })
            .sum()
    }

    /// One synchronous connection per node, for counters sampled in a loop.
    pub(crate) fn sync_conns(&self) -> Vec<redis::Connection> {
        self.nodes().iter().map(|n| sync_conn(n)).collect()
    }
}

pub(crate) fn sync_conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .unwrap()
        .get_connection()
        .expect("connect to the bench redis")
}

/// `INFO commandstats` summed over `conns`, as command → calls.
pub(crate) fn commandstats(conns: &mut [redis::Connection]) -> HashMap<String, u64> {
    let mut total: HashMap<String, u64> = HashMap::new();
    for conn in conns {
        let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
        for (name, calls) in parse_commandstats(&info) {
            *total.entry(name).or_default() += calls;
        }
    }
    total
}

/// `total_reads_processed` of each node: read events the server handled (a pipelined write
/// of many kilobytes arrives in several).
pub(crate) fn reads_processed(conns: &mut [redis::Connection]) -> Vec<u64> {
    conns
        .iter_mut()
        .map(|conn| {
            let info: String = redis::cmd("INFO").arg("stats").query(conn).unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("total_reads_processed:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        })
        .collect()
}

/// The floor's command connection: one multiplexed connection, or redis-rs's cluster
/// connection (which routes each script by its first key), with TCP_NODELAY as the crate has.
#[derive(Clone)]
pub(crate) enum FloorConn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl FloorConn {
    pub(crate) async fn open(target: &Target) -> FloorConn {
        match target {
            // Through Sentinel: straight to the master (asking the sentinels is once per client).
            Target::Single(url) | Target::Sentinel { master: url, .. } => {
                FloorConn::Single(multiplexed(url).await)
            }
            Target::Cluster { masters, .. } => {
                let tcp = redis::io::tcp::TcpSettings::default().set_nodelay(true);
                let client = redis::cluster::ClusterClientBuilder::new(masters.clone())
                    .response_timeout(Duration::from_secs(10))
                    .tcp_settings(tcp)
                    .build()
                    .unwrap();
                FloorConn::Cluster(
                    client
                        .get_async_connection()
                        .await
                        .expect("floor cluster connection"),
                )
            }
        }
    }
}

/// One multiplexed connection to one server, TCP_NODELAY on.
pub(crate) async fn multiplexed(url: &str) -> MultiplexedConnection {
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    let info = url.into_connection_info().unwrap();
    let tcp = info.tcp_settings().clone().set_nodelay(true);
    redis::Client::open(info.set_tcp_settings(tcp))
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("floor connection")
}

impl ConnectionLike for FloorConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            FloorConn::Single(c) => c.req_packed_command(cmd),
            FloorConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            FloorConn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            FloorConn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }
}
