//! Opening the command connection for the configured topology, and what is checked before
//! any lock is touched: which publish mode the deployment gets, and that the server has the
//! commands that mode needs.

use super::node::{connect_error, connect_manager};
use super::replica_sync::ReplicaSync;
use super::sentinel::SentinelConnection;
use super::topology::Topology;
use super::Connection;
use crate::config::{Config, Deployment, PublishMode};
use crate::error::{Error, Result};

/// Gives `conn` its spare lane for writes that wait for replicas (see
/// [`SharedWait`](super::shared_wait::SharedWait)): through the sentinels a second connection
/// to the master, following it as `conn` does; on a cluster links of its own to the masters,
/// over `conn`'s view and cluster connection. Nothing on a standalone server.
pub(crate) async fn add_spare_lane(config: &Config, conn: &Connection) -> Result<()> {
    let spare = match conn {
        Connection::Sentinel(client) => {
            Connection::Sentinel(SentinelConnection::beside(client, config).await?)
        }
        Connection::Cluster { conn, topology, .. } => Connection::Cluster {
            conn: conn.clone(),
            topology: topology.clone(),
            direct: super::direct::Direct::new(topology.clone(), config)?,
        },
        _ => return Ok(()),
    };
    if let Some(shared) = conn.shared_wait() {
        shared.set_spare(spare);
    }
    Ok(())
}

/// Opens a command connection: to the server, to the cluster through its seeds, or to the
/// master the sentinels name. A connection opened for the client reads the cluster's
/// [`Topology`] or follows the sentinels; another of the same client (the watchdog's, on its
/// own runtime) is opened `beside` it: connections of its own, the client's view.
pub(crate) async fn open(config: &Config, beside: Option<&Connection>) -> Result<Connection> {
    let seeds = match config.deployment() {
        Deployment::Standalone => {
            let info = config.connection_info()?;
            let client = redis::Client::open(info).map_err(|e| Error::Config(e.to_string()))?;
            return Ok(Connection::Standalone(
                connect_manager(client, config).await?,
            ));
        }
        Deployment::Sentinel {
            master_name,
            sentinels,
        } => {
            let conn = match beside {
                Some(Connection::Sentinel(client)) => {
                    SentinelConnection::beside(client, config).await?
                }
                _ => SentinelConnection::open(config, master_name, sentinels).await?,
            };
            return Ok(Connection::Sentinel(conn));
        }
        Deployment::Cluster { seeds } => seeds,
    };
    let tcp = redis::io::tcp::TcpSettings::default().set_nodelay(true);
    #[allow(unused_mut)]
    let mut builder = redis::cluster::ClusterClientBuilder::new(seeds.to_vec())
        .connection_timeout(config.connect_timeout())
        .response_timeout(config.response_timeout())
        .tcp_settings(tcp)
        // redis-rs re-sends a command after an I/O error, a MOVED or a failover. Every lock
        // command is idempotent by its latch, so that is safe; a few re-sends are enough, and
        // keep a failure's report within a few response timeouts.
        .retries(2)
        .min_retry_wait(50)
        .max_retry_wait(500);
    #[cfg(feature = "tls")]
    if let Some(pem) = config.tls_root_cert() {
        builder = builder.certs(redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.to_vec()),
        });
    }
    let client = builder
        .build()
        .map_err(|e| Error::Config(format!("unusable cluster settings: {e}")))?;
    let mut conn = client.get_async_connection().await.map_err(connect_error)?;
    if let Some(name) = &config.conn_name {
        name.apply(&mut conn).await.map_err(connect_error)?;
    }
    let topology = match beside.and_then(Connection::topology) {
        Some(topology) => topology.clone(),
        None => {
            let client_id = config.conn_name.as_ref().map(|n| n.client_id());
            Topology::start(conn.clone(), client_id).await
        }
    };
    let direct = super::direct::Direct::new(topology.clone(), config)?;
    Ok(Connection::Cluster {
        conn,
        topology,
        direct,
    })
}

/// The publish mode this deployment gets (see [`PublishMode::Auto`]), refusing a forced
/// sharded mode on servers without sharded pub/sub.
pub(crate) async fn publish_mode(conn: &mut Connection, config: &Config) -> Result<PublishMode> {
    let sharded_ok = match (config.publish_mode(), conn.is_cluster()) {
        // As Redisson 4.x decides: sharded when `PUBSUB SHARDNUMSUB` is known.
        (PublishMode::Auto, true) => {
            let mut probe = redis::cmd("PUBSUB");
            probe.arg("SHARDNUMSUB");
            conn.on_any_master(&probe).await.is_ok()
        }
        _ => false,
    };
    let mode = config
        .publish_mode()
        .resolved(conn.is_cluster(), sharded_ok);
    if mode == PublishMode::SPublish {
        require_commands(conn, SHARDED_COMMANDS, SHARDED_NEEDED_BY).await?;
    }
    Ok(mode)
}

/// The database whose keyspace notifications a holder can listen to for its lock's key (a raw
/// `DEL`, an expiry, an eviction send no message on the lock's channel): where the server sends
/// them (`notify-keyspace-events` with `K` and any of `g`, `x`, `e` or `A`; Redis ships it
/// empty; on a cluster, as any master answers: the hub subscribes each key's channel at its
/// master, since a node sends only its own keys' events). `None` where `CONFIG GET` is
/// refused, or where they are off.
pub(crate) async fn keyspace_events(conn: &mut Connection) -> Option<i64> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("notify-keyspace-events");
    let reply = conn.on_any_master(&cmd).await.ok()?;
    let config: std::collections::HashMap<String, String> = redis::from_redis_value(reply).ok()?;
    let flags = config.get("notify-keyspace-events")?;
    let on = flags.contains('K') && flags.chars().any(|c| "gxeA".contains(c));
    on.then(|| redis::aio::ConnectionLike::get_db(conn))
}

/// Checks, at connect, that the masters have `WAIT` when lock writes are to wait for replicas
/// (some managed services have none): refused if replica sync was asked for, else given up
/// (see [`ReplicaSync`]). Where the ACL hides `COMMAND`, the first `WAIT`'s answer decides.
pub(crate) async fn check_replica_sync(
    conn: &mut Connection,
    sync: Option<&ReplicaSync>,
) -> Result<()> {
    let Some(sync) = sync else { return Ok(()) };
    match missing_command(conn, &["WAIT"]).await? {
        Checked::AllThere => sync.confirm(),
        Checked::Missing(_) if sync.refused(&"COMMAND INFO shows no WAIT") => {}
        Checked::Missing(command) => return Err(unsupported(command, REPLICA_SYNC_NEEDED_BY)),
        Checked::Hidden => {}
    }
    Ok(())
}

const REPLICA_SYNC_NEEDED_BY: &str =
    "replica sync as asked for (Config::with_replica_sync; left at its default, it is given up on a server without WAIT; turn it off with with_replica_sync(None))";

/// What the sharded publish mode sends: unlock scripts publish with the first, waiters
/// subscribe and leave with the others.
const SHARDED_COMMANDS: &[&str] = &["SPUBLISH", "SSUBSCRIBE", "SUNSUBSCRIBE"];
const SHARDED_NEEDED_BY: &str =
    "PublishMode::SPublish (sharded pub/sub: Redis or Valkey 7.0 or newer; use PublishMode::Publish)";

/// Refuses a server that lacks one of `commands` with [`Error::Unsupported`], at connect rather
/// than on the first unlock. If the ACL refuses `COMMAND` itself, the check is skipped: scripts
/// publish before they write, so a missing command still fails an unlock with nothing changed.
async fn require_commands(conn: &mut Connection, commands: &[&str], needed_by: &str) -> Result<()> {
    match missing_command(conn, commands).await? {
        Checked::Missing(command) => Err(unsupported(command, needed_by)),
        Checked::AllThere | Checked::Hidden => Ok(()),
    }
}

/// The refusal of a server without `command`, which `needed_by` needs.
fn unsupported(command: &str, needed_by: &str) -> Error {
    Error::Unsupported {
        command: command.to_string(),
        needed_by: needed_by.to_string(),
    }
}

/// What `COMMAND INFO` says of some commands.
enum Checked<'a> {
    AllThere,
    /// The first one the server does not know.
    Missing(&'a str),
    /// The ACL refuses `COMMAND`: nothing is known.
    Hidden,
}

/// Asks `COMMAND INFO` about `commands` (it answers nil for a command the server does not know).
async fn missing_command<'a>(conn: &mut Connection, commands: &[&'a str]) -> Result<Checked<'a>> {
    let mut command_info = redis::cmd("COMMAND");
    command_info.arg("INFO").arg(commands);
    let info = conn
        .on_any_master(&command_info)
        .await
        .and_then(|reply| Ok(redis::from_redis_value::<Vec<redis::Value>>(reply)?));
    let info = match info {
        Ok(info) => info,
        Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) => {
            tracing::debug!(error = %err, "COMMAND INFO refused; commands not checked at connect");
            return Ok(Checked::Hidden);
        }
        Err(err) => return Err(connect_error(err)),
    };
    let missing = (commands.iter())
        .zip(info.iter().chain(std::iter::repeat(&redis::Value::Nil)))
        .find(|(_, info)| matches!(info, redis::Value::Nil));
    Ok(missing.map_or(Checked::AllThere, |(command, _)| Checked::Missing(command)))
}
