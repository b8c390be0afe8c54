//! Whether lock writes wait for replicas (`WAIT` behind each), shared by every connection of
//! a client (the client's and its watchdog's), and what happens on a server without `WAIT`.
//!
//! Some managed Redis and Valkey services refuse `WAIT` (renamed away, or not offered). With
//! replica sync left at its default, the client then carries on without it, as Redisson does
//! since 3.26.1, and says so once (a `warn` event, and
//! [`LockClient::replica_sync`](crate::LockClient::replica_sync)): at connect when
//! `COMMAND INFO` shows no `WAIT`, or, where the ACL hides `COMMAND`, at a `WAIT` the server
//! refuses before any was answered (once one was, the server has `WAIT`, and a refusal is a
//! failover's demoted master). A replica sync the user asked for ([`Config::with_replica_sync`]) is
//! refused at connect instead ([`Error::Unsupported`](crate::Error::Unsupported)), and where
//! that check could not be made each write the server refuses to `WAIT` for counts as not
//! replicated.
//!
//! [`Config::with_replica_sync`]: crate::Config::with_replica_sync

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::config::Config;

/// Replica sync as a client runs it.
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    /// `WAIT`'s timeout, ms.
    timeout_ms: u64,
    /// Asked for by the user: never given up.
    required: bool,
    /// The server has no `WAIT` (only ever set when not required): writes carry none.
    unavailable: AtomicBool,
    /// The server is known to have `WAIT` (`COMMAND INFO` at connect, or a `WAIT` answered):
    /// a refused `WAIT` is then never read as a server without one (a master demoted in a
    /// failover refuses it too).
    confirmed: AtomicBool,
}

impl ReplicaSync {
    /// Replica sync for `config` on a topology whose masters may have replicas
    /// (`counts_replicas`); `None` when off or on a standalone server.
    pub(crate) fn new(config: &Config, counts_replicas: bool) -> Option<Arc<ReplicaSync>> {
        let timeout = config.replica_sync().filter(|_| counts_replicas)?;
        Some(Arc::new(ReplicaSync {
            timeout_ms: u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            required: config.replica_sync_required(),
            unavailable: AtomicBool::new(false),
            confirmed: AtomicBool::new(false),
        }))
    }

    /// `WAIT`'s timeout in ms, or `None` once the server turned out to have no `WAIT`.
    pub(crate) fn timeout_ms(&self) -> Option<u64> {
        (!self.unavailable.load(Ordering::Relaxed)).then_some(self.timeout_ms)
    }

    /// The server has `WAIT`: from now on a refused one is never read as a server without it.
    pub(crate) fn confirm(&self) {
        self.confirmed.store(true, Ordering::Relaxed);
    }

    /// Whether the server is known to have `WAIT`.
    pub(crate) fn confirmed(&self) -> bool {
        self.confirmed.load(Ordering::Relaxed)
    }

    /// Whether the server turned out to have no `WAIT`, and writes go on without one.
    pub(crate) fn unavailable(&self) -> bool {
        self.unavailable.load(Ordering::Relaxed)
    }

    /// The server has no `WAIT` for us (`why`). Unless replica sync was asked for, writes go
    /// on without it from now on, said once in a `warn` event: returns `true`. Asked for, it
    /// returns `false` (the caller fails or counts the write as not replicated).
    pub(crate) fn refused(&self, why: &dyn Display) -> bool {
        if self.required {
            tracing::warn!(
                reason = %why,
                "the server refuses WAIT, and replica sync was asked for \
                 (Config::with_replica_sync): lock writes count as not replicated"
            );
            return false;
        }
        if !self.unavailable.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                reason = %why,
                "the server has no WAIT: lock writes go on without waiting for replicas \
                 (replica sync was left at its default; ask for it with \
                 Config::with_replica_sync to refuse such a server instead)"
            );
        }
        true
    }
}
