//! The connection side, the seam between the lock kinds and the topology: the command
//! [`Connection`] (a standalone server, a cluster, or a master that Sentinel watches
//! ([`sentinel`]), with no change to the kinds or the engine), the client's one view of a
//! cluster ([`topology`]), how many keys one call may carry ([`slots`]), and the subscription
//! hub every waiter of a client shares ([`pubsub`]).

pub(crate) mod connect;
mod connection;
mod direct;
pub(crate) mod naming;
mod node;
pub(crate) mod pubsub;
pub(crate) mod replica_sync;
pub(crate) mod sentinel;
mod shared_wait;
pub(crate) mod slots;
pub(crate) mod topology;
pub(crate) mod write;

pub(crate) use connection::Connection;

/// A node's address, `(host, port)`: a cluster master, the master Sentinel names.
pub(crate) type NodeAddr = (String, u16);

/// `base` (its login, TLS and protocol) for the node at `host:port`.
pub(crate) fn node_info(
    base: &redis::ConnectionInfo,
    host: &str,
    port: u16,
) -> redis::ConnectionInfo {
    let addr = match base.addr() {
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
    base.clone().set_addr(addr)
}
