//! Where the CLI's plain connections go: the server, the master the sentinels name, or on a
//! cluster the master of the slot of the key being looked at (every key of a lock shares its
//! slot).

use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::failure::{self, Failure};

/// The deployment the global flags name.
pub enum Server {
    /// `--url`.
    Standalone(String),
    /// `--cluster`: its seed URLs.
    Cluster(Vec<String>),
    /// `--sentinel` and `--master-name`.
    Sentinel {
        master_name: String,
        sentinels: Vec<String>,
    },
}

/// Where a key lives on a cluster, or which master the sentinels name.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The master serving the key, `host:port`.
    pub node: String,
    /// The key's slot (on a cluster).
    pub slot: Option<u16>,
}

/// Opens a connection to `url` with short timeouts; for `rediss://`, `tls_ca` (PEM) is the
/// root the server's certificate must chain to (the system's roots without it).
pub fn connect(
    url: impl redis::IntoConnectionInfo,
    tls_ca: Option<&[u8]>,
) -> Result<redis::Connection, Failure> {
    let timeout = Duration::from_secs(5);
    let invalid =
        |e: redis::RedisError| Failure::usage(format!("invalid redis url ({})", e.category()));
    let client = match tls_ca {
        None => redis::Client::open(url).map_err(invalid)?,
        #[cfg(feature = "tls")]
        Some(pem) => {
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.to_vec()),
            };
            redis::Client::build_with_tls(url, certs).map_err(invalid)?
        }
        #[cfg(not(feature = "tls"))]
        Some(_) => {
            return Err(Failure::usage(
                "--tls-ca needs rlock built with the `tls` feature",
            ))
        }
    };
    let conn = client
        .get_connection_with_timeout(timeout)
        .map_err(|e| Failure::new(failure::REDIS, format!("cannot connect to redis: {e}")))?;
    conn.set_read_timeout(Some(timeout))
        .and_then(|()| conn.set_write_timeout(Some(timeout)))
        .map_err(Failure::from_redis)?;
    Ok(conn)
}

/// A connection to the node serving `key`: the server, or on a cluster the master of `key`'s
/// slot (asked of the first seed that answers), with where that is.
pub fn connect_for_key(
    server: &Server,
    key: &str,
    tls_ca: Option<&[u8]>,
) -> Result<(redis::Connection, Option<Placement>), Failure> {
    let seeds = match server {
        Server::Standalone(url) => return Ok((connect(url.as_str(), tls_ca)?, None)),
        Server::Sentinel {
            master_name,
            sentinels,
        } => return connect_to_master(master_name, sentinels, tls_ca),
        Server::Cluster(seeds) => seeds,
    };
    let slot = redisson_lock::names::cluster_slot(key);
    let mut failed = Failure::usage("--cluster needs at least one url");
    for seed in seeds {
        let info = seed
            .as_str()
            .into_connection_info()
            .map_err(|e| Failure::usage(format!("invalid redis url ({})", e.category())))?;
        let mut conn = match connect(info.clone(), tls_ca) {
            Ok(conn) => conn,
            Err(err) => {
                failed = err;
                continue;
            }
        };
        let (host, port) = master_of(&mut conn, slot)?;
        let conn = connect(at(&info, &host, port), tls_ca)?;
        let node = format!("{host}:{port}");
        let slot = Some(slot);
        return Ok((conn, Some(Placement { node, slot })));
    }
    Err(failed)
}

/// A connection to the master the first answering sentinel names, with where that is.
fn connect_to_master(
    master_name: &str,
    sentinels: &[String],
    tls_ca: Option<&[u8]>,
) -> Result<(redis::Connection, Option<Placement>), Failure> {
    let mut failed = Failure::usage("--sentinel needs at least one url");
    for sentinel in sentinels {
        let info = sentinel
            .as_str()
            .into_connection_info()
            .map_err(|e| Failure::usage(format!("invalid redis url ({})", e.category())))?;
        let named: Result<Option<(String, u16)>, Failure> =
            connect(info.clone(), tls_ca).and_then(|mut conn| {
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(master_name)
                    .query(&mut conn)
                    .map_err(Failure::from_redis)
            });
        match named {
            Ok(Some((host, port))) => {
                let conn = connect(at(&info, &host, port), tls_ca)?;
                let node = format!("{host}:{port}");
                return Ok((conn, Some(Placement { node, slot: None })));
            }
            Ok(None) => {
                failed = Failure::usage(format!("no sentinel knows a master named {master_name:?}"))
            }
            Err(err) => failed = err,
        }
    }
    Err(failed)
}

/// `info` (its login and TLS) for the node at `host:port`.
fn at(info: &redis::ConnectionInfo, host: &str, port: u16) -> redis::ConnectionInfo {
    let addr = match info.addr() {
        redis::ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => redis::ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => redis::ConnectionAddr::Tcp(host.to_string(), port),
    };
    info.clone().set_addr(addr)
}

/// The master serving `slot`, from `CLUSTER SLOTS`.
fn master_of(conn: &mut redis::Connection, slot: u16) -> Result<(String, u16), Failure> {
    let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(conn)
        .map_err(Failure::from_redis)?;
    ranges
        .iter()
        .find_map(|range| {
            let first: u16 = redis::from_redis_value(range.first()?.clone()).ok()?;
            let last: u16 = redis::from_redis_value(range.get(1)?.clone()).ok()?;
            let master: Vec<redis::Value> = redis::from_redis_value(range.get(2)?.clone()).ok()?;
            let host: String = redis::from_redis_value(master.first()?.clone()).ok()?;
            let port: u16 = redis::from_redis_value(master.get(1)?.clone()).ok()?;
            (first..=last).contains(&slot).then_some((host, port))
        })
        .ok_or_else(|| {
            Failure::new(
                failure::REDIS,
                format!("no node of the cluster serves slot {slot}"),
            )
        })
}
