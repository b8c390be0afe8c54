//! The watchdog: one background task per client that keeps its watchdog holds alive.
//!
//! Every interval it renews each entry of [`Registry`] with watchdog holds, in batched scripts
//! (as many keys per call as the topology lets share one) handed to the grouped write, which
//! sends each node's batches in one write. A reply of 0 means the lock is no longer ours: the
//! entry is dropped and its guards are told. A failed call is retried next cycle, but once a whole lease
//! has passed since the last confirmed renewal the lock is treated as lost too. The same task
//! ends fixed leases when they run out. Whenever it loses an entry it wakes this client's
//! waiters of that lock, which may have been counting on the holder's unlock message.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::engine::registry::{Entry, Lease, LostHold};
use crate::engine::Core;
use crate::observe::Cycle;
use crate::raw::protocol::{not_replicated, Synced};
use crate::raw::Kind;
use crate::raw::Protocol;

/// Settings of the watchdog task.
pub(crate) struct Watchdog {
    /// Its own connection (on the watchdog's thread), not the core's.
    pub(crate) protocol: Protocol,
    /// The registry it renews, the hub it wakes waiters through when a lock is lost, and the
    /// release of holds lost by the lease clock (they may still be in Redis).
    pub(crate) core: Core,
    pub(crate) lease: Duration,
    pub(crate) interval: Duration,
    pub(crate) batch_size: usize,
    /// Locks held longer than this are reported, each once (`Config::with_hold_warning`).
    pub(crate) hold_warning: Option<Duration>,
}

impl Watchdog {
    /// Runs until `shutdown` is cancelled.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut next_cycle = Instant::now() + self.interval;
        loop {
            let deadline = self.core.registry.next_lease_deadline();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(next_cycle) => {
                    let started = Instant::now();
                    self.renew_all().await;
                    next_cycle = started + self.interval;
                }
                _ = sleep_until_some(deadline) => {
                    self.after_loss(self.core.registry.expire_leases(Instant::now()));
                }
                _ = self.core.registry.changed.notified() => {}
            }
        }
    }

    /// One renewal cycle over every entry with watchdog holds, in batches of `batch_size`
    /// keys of one kind (one script) that the topology lets share a call, all handed to the
    /// grouped write at once.
    async fn renew_all(&self) {
        let (registry, started) = (&self.core.registry, Instant::now());
        let (observe, client_id) = (&registry.observe, registry.client_id());
        let snapshot = registry.renewal_snapshot();
        let span = observe.renewal_span(client_id, snapshot.len());
        let cycle = self.renew(snapshot).instrument(span.clone()).await;
        observe.renewal_cycle(&span, client_id, cycle, started.elapsed());
    }

    /// The body of [`Watchdog::renew_all`], in its span: what the cycle did.
    async fn renew(&self, mut snapshot: Vec<Arc<Entry>>) -> Cycle {
        if let Some(limit) = self.hold_warning {
            self.core.registry.warn_long_holds(limit);
        }
        if snapshot.windows(2).any(|w| w[0].raw != w[1].raw) {
            snapshot.sort_by_key(|n| n.raw as *const Kind as usize);
        }
        let mut batches: Vec<&[Arc<Entry>]> = Vec::new();
        for kind in snapshot.chunk_by_mut(|a, b| a.raw == b.raw) {
            let connection = self.protocol.connection();
            batches.extend(connection.batches(kind, |n| &n.key, self.batch_size));
        }
        let mut cycle = Cycle {
            held: self.core.registry.len(),
            waiters: self.core.handoffs.parked(),
            ..Cycle::default()
        };
        if batches.is_empty() {
            return cycle;
        }
        let lease_ms = Lease::Watchdog.millis(self.lease);
        let client_id = self.core.registry.client_id();
        let mut fields = String::new();
        let calls = batches
            .iter()
            .map(|batch| {
                with_entries(batch, client_id, &mut fields, |entries| {
                    batch[0].raw.renew_call(lease_ms, entries)
                })
            })
            .collect();
        let sent_at = Instant::now();
        let answers = self.protocol.send_all(calls).await;
        let mut failed = None;
        for (batch, answer) in batches.into_iter().zip(answers) {
            let renewed = match (answer.reply, answer.synced) {
                // Renewed at the master only: its replicas' TTLs run on, so unconfirmed.
                (Ok(_), Synced::No { replicas }) => {
                    crate::observe::replica_ack_missing("renew", replicas);
                    cycle.unconfirmed += batch.len();
                    Err(not_replicated(replicas))
                }
                (Ok(reply), Synced::Yes) => batch[0].raw.renewed(reply, batch.len()),
                (Err(err), _) => Err(err),
            };
            match &renewed {
                Ok(renewed) => {
                    let yes = renewed.iter().filter(|r| **r).count();
                    cycle.renewed += yes;
                    cycle.gone += renewed.len() - yes;
                }
                Err(err) => {
                    if !matches!(answer.synced, Synced::No { .. }) {
                        cycle.failed += batch.len();
                    }
                    failed.get_or_insert_with(|| err.clone());
                }
            }
            self.settle(batch, renewed, sent_at);
        }
        if let Some(err) = failed {
            tracing::warn!(client_id, error = %err, "lock renewal failed; retrying next cycle");
        }
        cycle
    }

    /// Applies one batch's answer: confirms or loses its entries, or on an error loses those
    /// unconfirmed for a whole lease (the rest are tried again next cycle).
    fn settle(
        &self,
        batch: &[Arc<Entry>],
        result: redis::RedisResult<Vec<bool>>,
        sent_at: Instant,
    ) {
        match result {
            Ok(renewed) => {
                self.after_loss(self.core.registry.apply_renewals(batch, renewed, sent_at));
            }
            Err(_) => {
                let now = Instant::now();
                self.after_loss(
                    self.core
                        .registry
                        .expire_unconfirmed(batch, self.lease, now),
                );
            }
        }
    }

    /// Wakes this client's waiters of each lost lock (they may be parked on the belief that a
    /// holder of this client will publish its unlock, which will now never come), and releases
    /// what the lease clock lost.
    fn after_loss(&self, lost: Vec<LostHold>) {
        for hold in lost {
            self.core.hub.wake_lock(&hold.raw.channel(&hold.key));
            self.core.release_lost(&hold);
        }
    }
}

/// Calls `f` with `batch` as `(key, owner field)` pairs, the fields formatted into `buf` (one
/// buffer for a whole cycle: guards keep owners, not fields).
fn with_entries<R>(
    batch: &[Arc<Entry>],
    client_id: &str,
    buf: &mut String,
    f: impl FnOnce(&[(&str, &str)]) -> R,
) -> R {
    buf.clear();
    let mut ends = Vec::with_capacity(batch.len());
    for node in batch {
        node.owner.write_field(client_id, buf);
        ends.push(buf.len());
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let entries: Vec<(&str, &str)> = (batch.iter().zip(starts.zip(&ends)))
        .map(|(node, (start, &end))| (&*node.key, &buf[start..end]))
        .collect();
    f(&entries)
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
