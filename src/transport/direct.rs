//! The direct lane on a cluster: a script call (`EVALSHA`/`EVAL` with keys: every acquire and
//! unlock) goes straight to its slot's master over a multiplexed connection of our own, instead
//! of through redis-rs's cluster connection, whose routing task costs a few tens of µs a round
//! trip (measured: 65 µs more per `GET` at p50 in a debug build). A woken waiter's acquire is
//! one such round trip, so this is what its wake-up costs.
//!
//! The lane routes by the client's [`Topology`] and only ever short-cuts: anything it cannot
//! vouch for goes through the cluster connection as before, which follows `MOVED` and `ASK`,
//! reconnects and retries. A master not known yet, or whose link is still opening, is skipped
//! (the link opens in the background); an answer that says the map is stale (`MOVED`, `ASK`,
//! `TRYAGAIN`, `CLUSTERDOWN`, `READONLY`) or an I/O error sends the same call again through
//! the cluster connection and has the topology read again. Every lock command is idempotent
//! by its latch, so sending it again is exact, as for redis-rs's own re-sends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, RedisResult, RetryMethod, Value};
use tokio::time::Instant;

use super::topology::Topology;
use super::NodeAddr;

/// How soon a link that failed to open is tried again.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// Links to the cluster's masters, chosen by the client's topology.
pub(crate) struct Direct {
    /// Login, TLS and timeouts for node connections.
    base: redis::ConnectionInfo,
    config: AsyncConnectionConfig,
    topology: Arc<Topology>,
    links: Mutex<Links>,
}

#[derive(Default)]
struct Links {
    by_node: HashMap<NodeAddr, Link>,
    /// The topology's epoch the links were last pruned at.
    epoch: u64,
}

enum Link {
    Opening,
    Ready(MultiplexedConnection),
    Failed(Instant),
}

impl Direct {
    /// The lane over the masters `topology` names, `base` giving login and TLS.
    pub(crate) fn new(
        topology: Arc<Topology>,
        base: redis::ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Arc<Direct> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(response_timeout));
        Arc::new(Direct {
            base,
            config,
            topology,
            links: Mutex::default(),
        })
    }

    /// The link a script call to `key` may take: its master's, if open.
    pub(crate) fn route(self: &Arc<Self>, key: &str) -> Option<MultiplexedConnection> {
        let view = self.topology.view();
        let Some(master) = view.slots.master_of(key) else {
            // A slot the view does not know (no map read yet, or mid-failover).
            self.topology.suspect();
            return None;
        };
        let mut links = self.links.lock();
        if links.epoch != view.epoch {
            // Links to nodes that are no longer masters go (a demoted master answers MOVED).
            let masters = view.slots.masters();
            links.by_node.retain(|node, _| masters.contains(&node));
            links.epoch = view.epoch;
        }
        match links.by_node.get(master) {
            Some(Link::Ready(conn)) => return Some(conn.clone()),
            Some(Link::Opening) => return None,
            Some(Link::Failed(at)) if at.elapsed() < REOPEN_AFTER => return None,
            _ => {}
        }
        links.by_node.insert(master.clone(), Link::Opening);
        tokio::spawn(self.clone().open(master.clone()));
        None
    }

    /// Whether an answer through the lane stands, or the call must go through the cluster
    /// connection (the topology is read again then).
    pub(crate) fn stands(&self, answer: &RedisResult<Value>) -> bool {
        let stale = match answer {
            Ok(_) => false,
            Err(err) => !matches!(err.retry_method(), RetryMethod::NoRetry),
        };
        if stale {
            self.topology.suspect();
        }
        !stale
    }

    async fn open(self: Arc<Self>, master: NodeAddr) {
        let info = super::node_info(&self.base, &master.0, master.1);
        let conn = match redis::Client::open(info) {
            Ok(client) => {
                client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await
            }
            Err(err) => Err(err),
        };
        let link = match conn {
            Ok(conn) => Link::Ready(conn),
            Err(err) => {
                tracing::debug!(node = %format!("{}:{}", master.0, master.1), error = %err, "direct link to a master did not open; the cluster connection serves it");
                Link::Failed(Instant::now())
            }
        };
        if let Some(slot) = self.links.lock().by_node.get_mut(&master) {
            *slot = link;
        }
    }
}

/// The first key of a script call (`EVALSHA`/`EVAL` with at least one key), the only calls the
/// lane takes.
fn script_key(cmd: &Cmd) -> Option<&str> {
    let mut args = cmd.args_iter().map(|arg| match arg {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()??;
    if !name.eq_ignore_ascii_case(b"EVALSHA") && !name.eq_ignore_ascii_case(b"EVAL") {
        return None;
    }
    let _script = args.next()??;
    let numkeys: usize = std::str::from_utf8(args.next()??).ok()?.parse().ok()?;
    if numkeys == 0 {
        return None;
    }
    std::str::from_utf8(args.next()??).ok()
}

/// Sends `cmd` over the lane when it may, else (or when the lane's answer does not stand)
/// through `cluster`.
pub(crate) async fn send(
    direct: &Arc<Direct>,
    cluster: &mut ClusterConnection,
    cmd: &Cmd,
) -> RedisResult<Value> {
    if let Some(mut link) = script_key(cmd).and_then(|key| direct.route(key)) {
        // (A server's error reply as an `Err`, as `query_async` reads it anyway.)
        let answer = link
            .req_packed_command(cmd)
            .await
            .and_then(Value::extract_error);
        if direct.stands(&answer) {
            return answer;
        }
    }
    cluster.req_packed_command(cmd).await
}

#[cfg(test)]
mod tests {
    use super::script_key;

    #[test]
    fn only_script_calls_with_keys_take_the_lane() {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg("abc").arg(2).arg("lock").arg("latch").arg(30_000);
        assert_eq!(script_key(&eval), Some("lock"));
        let mut keyless = redis::cmd("EVALSHA");
        keyless.arg("abc").arg(0);
        assert_eq!(script_key(&keyless), None);
        let mut get = redis::cmd("GET");
        get.arg("lock");
        assert_eq!(script_key(&get), None);
    }
}
