//! What a live view shows of the servers: the topology, its masters, and how many lock
//! scripts they have run.

use crate::error::{Error, Result};
use crate::transport::replica_sync::ReplicaSync;
use crate::transport::Connection;

/// The servers behind a client, as an operator's view heads them: from
/// [`LockClient::server_stats`](crate::LockClient::server_stats). Take two and divide the
/// difference of [`ServerStats::script_calls`] by the time between them for scripts per
/// second (`rlock top` does).
///
/// ```no_run
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let stats = client.server_stats().await?;
/// println!("{} ({} masters): {} scripts run", stats.topology, stats.masters.len(), stats.script_calls);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStats {
    /// `standalone`, `cluster` or `sentinel`.
    pub topology: &'static str,
    /// The masters, `host:port` (empty for a standalone server: the address given).
    pub masters: Vec<String>,
    /// `EVAL` and `EVALSHA` calls so far, summed over the masters (`INFO commandstats`;
    /// every Redisson lock operation is one, as is every operation of this crate).
    pub script_calls: u64,
    /// Whether this client's lock writes wait for replicas.
    pub replica_sync: ReplicaSyncState,
}

/// Whether a client's lock writes wait for the master's replicas
/// ([`Config::with_replica_sync`](crate::Config::with_replica_sync)), as it runs:
/// [`LockClient::replica_sync`](crate::LockClient::replica_sync).
///
/// ```no_run
/// use redisson_lock::inspect::ReplicaSyncState;
/// # async fn demo(client: redisson_lock::LockClient) {
/// if client.replica_sync() == ReplicaSyncState::Unavailable {
///     eprintln!("this server has no WAIT: a failover may lose a lock");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaSyncState {
    /// Off (turned off, or a standalone server, where no client waits for replicas).
    Off,
    /// Each lock write waits for the replicas (`WAIT`).
    On,
    /// Left at its default on a server without `WAIT` (some managed services): given up.
    Unavailable,
}

impl ReplicaSyncState {
    /// `off`, `on` or `unavailable`.
    ///
    /// ```
    /// use redisson_lock::inspect::ReplicaSyncState;
    /// assert_eq!(ReplicaSyncState::Unavailable.as_str(), "unavailable");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaSyncState::Off => "off",
            ReplicaSyncState::On => "on",
            ReplicaSyncState::Unavailable => "unavailable",
        }
    }

    /// The state of `sync` (a client's replica sync, `None` when off).
    pub(crate) fn of(sync: Option<&ReplicaSync>) -> ReplicaSyncState {
        match sync {
            None => ReplicaSyncState::Off,
            Some(sync) if sync.unavailable() => ReplicaSyncState::Unavailable,
            Some(_) => ReplicaSyncState::On,
        }
    }
}

pub(crate) async fn server_stats(
    conn: &Connection,
    replica_sync: ReplicaSyncState,
) -> Result<ServerStats> {
    let mut conn = conn.clone();
    let topology = conn.label();
    let mut info = redis::cmd("INFO");
    info.arg("commandstats");
    let mut stats = ServerStats {
        topology,
        masters: Vec::new(),
        script_calls: 0,
        replica_sync,
    };
    for node in conn.masters() {
        stats.masters.extend(conn.address_of(&node));
        let reply = conn
            .send_to_node(&node, &info)
            .await
            .map_err(Error::Redis)?;
        let text: String = redis::from_redis_value(reply).map_err(|e| Error::Redis(e.into()))?;
        stats.script_calls += script_calls(&text);
    }
    Ok(stats)
}

/// The `EVAL` and `EVALSHA` calls an `INFO commandstats` reply counts.
fn script_calls(info: &str) -> u64 {
    info.lines()
        .filter_map(|line| {
            let rest = (line.strip_prefix("cmdstat_evalsha:"))
                .or_else(|| line.strip_prefix("cmdstat_eval:"))?;
            rest.strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn eval_and_evalsha_calls_are_summed() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=30,usec_per_call=2.5\r\n\
                    cmdstat_eval:calls=3,usec=9\r\ncmdstat_get:calls=100,usec=1\r\n";
        assert_eq!(super::script_calls(info), 15);
    }
}
