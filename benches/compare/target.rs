//! What a run is measured against: one standalone server, or a Redis Cluster of masters only
//! (no replicas, so no client waits for replica acknowledgements). Server-side counters of a
//! cluster are summed over its masters; a key's own counters are read at its slot's master.

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
    /// The masters' URLs; every slot lives on one of them.
    Cluster(Vec<String>),
}

impl Target {
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// The servers that hold data.
    pub(crate) fn nodes(&self) -> &[String] {
        match self {
            Target::Single(url) => std::slice::from_ref(url),
            Target::Cluster(masters) => masters,
        }
    }

    /// The URL of the master that holds `key`.
    pub(crate) fn node_of(&self, key: &str) -> String {
        let Target::Cluster(masters) = self else {
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
            Target::Cluster(masters) => Config::cluster(masters).unwrap(),
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
    /// `stats_key` first (Bench reads its per-key counters at the first URL).
    pub(crate) fn java_url(&self, stats_key: &str) -> String {
        match self {
            Target::Single(url) => url.clone(),
            Target::Cluster(masters) => {
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
            Target::Single(url) => FloorConn::Single(multiplexed(url).await),
            Target::Cluster(masters) => {
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
