//! What a live view shows of the servers: the topology, its masters, and how many lock
//! scripts they have run.

use crate::error::{Error, Result};
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
}

pub(crate) async fn server_stats(conn: &Connection) -> Result<ServerStats> {
    let mut conn = conn.clone();
    let topology = conn.label();
    let mut info = redis::cmd("INFO");
    info.arg("commandstats");
    let mut stats = ServerStats {
        topology,
        masters: Vec::new(),
        script_calls: 0,
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
