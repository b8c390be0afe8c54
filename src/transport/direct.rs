//! The direct lane on a cluster: a group of the grouped write ([`super::write`]: every acquire,
//! unlock, hand-off and renewal cycle) goes straight to its master over a multiplexed
//! connection of our own, instead of through redis-rs's cluster connection, whose routing task costs a few tens of µs a round
//! trip (measured: 65 µs more per `GET` at p50 in a debug build). A woken waiter's acquire is
//! one such round trip, so this is what its wake-up costs.
//!
//! The lane keeps links by the client's [`Topology`] and only ever short-cuts: a master whose
//! link is still opening is served by the cluster connection meanwhile (the link opens in the
//! background), and what the grouped write cannot vouch for (an answer that says the map is
//! stale: `MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, `READONLY`; an I/O error) goes again
//! through the cluster connection, which follows redirects, reconnects and retries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use tokio::time::Instant;

use super::naming::{ConnName, Renamer};
use super::shared_wait::SharedWait;
use super::topology::Topology;
use super::NodeAddr;
use crate::config::Config;
use crate::error::Result;

/// How soon a link that failed to open is tried again.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// Links to the cluster's masters, chosen by the client's topology.
pub(crate) struct Direct {
    /// Login, TLS and timeouts for node connections.
    base: redis::ConnectionInfo,
    config: AsyncConnectionConfig,
    topology: Arc<Topology>,
    links: Mutex<Links>,
    /// Writes queued behind another's `WAIT` to the same master.
    pub(super) shared_wait: Arc<SharedWait>,
    /// The client's name, given to each link, and to the cluster connection's node
    /// connections again after one drops.
    pub(crate) name: Option<ConnName>,
    pub(crate) renamer: Option<Renamer>,
}

#[derive(Default)]
struct Links {
    by_node: HashMap<NodeAddr, LinkState>,
    /// The topology's epoch the links were last pruned at.
    epoch: u64,
}

enum LinkState {
    Opening,
    Ready(MultiplexedConnection),
    Failed(Instant),
}

impl Direct {
    /// The lane over the masters `topology` names, with `config`'s login, TLS, timeouts and
    /// connection name.
    pub(crate) fn new(topology: Arc<Topology>, config: &Config) -> Result<Arc<Direct>> {
        let name = config.conn_name.clone();
        Ok(Arc::new(Direct {
            base: config.connection_info()?,
            config: AsyncConnectionConfig::new()
                .set_connection_timeout(Some(config.connect_timeout()))
                .set_response_timeout(Some(config.response_timeout())),
            topology,
            links: Mutex::default(),
            shared_wait: Arc::default(),
            renamer: name.clone().map(Renamer::new),
            name,
        }))
    }

    /// The link to the master at `master`, if open (a link not opened yet starts opening in
    /// the background; meanwhile the cluster connection serves the master).
    pub(crate) fn link(self: &Arc<Self>, master: &NodeAddr) -> Option<MultiplexedConnection> {
        let epoch = self.topology.view().epoch;
        let mut links = self.links.lock();
        if links.epoch != epoch {
            // Links to nodes that are no longer masters go (a demoted master answers MOVED).
            let view = self.topology.view();
            let masters = view.slots.masters();
            links.by_node.retain(|node, _| masters.contains(&node));
            links.epoch = epoch;
        }
        match links.by_node.get(master) {
            Some(LinkState::Ready(conn)) => return Some(conn.clone()),
            Some(LinkState::Opening) => return None,
            Some(LinkState::Failed(at)) if at.elapsed() < REOPEN_AFTER => return None,
            _ => {}
        }
        links.by_node.insert(master.clone(), LinkState::Opening);
        tokio::spawn(self.clone().open(master.clone()));
        None
    }

    async fn open(self: Arc<Self>, master: NodeAddr) {
        let info = super::node_info(&self.base, &master.0, master.1);
        let conn = match redis::Client::open(info) {
            Ok(client) => {
                let conn = client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await;
                match (conn, &self.name) {
                    (Ok(mut conn), Some(name)) => name.apply(&mut conn).await.map(|()| conn),
                    (conn, _) => conn,
                }
            }
            Err(err) => Err(err),
        };
        let link = match conn {
            Ok(conn) => LinkState::Ready(conn),
            Err(err) => {
                tracing::debug!(node = %format!("{}:{}", master.0, master.1), error = %err, "direct link to a master did not open; the cluster connection serves it");
                LinkState::Failed(Instant::now())
            }
        };
        if let Some(slot) = self.links.lock().by_node.get_mut(&master) {
            *slot = link;
        }
    }
}
