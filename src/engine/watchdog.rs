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
use crate::raw::Protocol;
use crate::raw::{Kind, Renewal};

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
                _ = crate::sync::time::sleep_until(next_cycle) => {
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
    ///
    /// On a cluster a kind whose renewal may cross slots ([`RawLock::renews_across_slots`])
    /// is renewed in calls of one master's keys, whatever their slots. A key its master no
    /// longer serves (the view is stale: a moved or migrating slot) answers
    /// [`Renewal::Elsewhere`], and is sent again in the same cycle in a call of its slot's keys
    /// alone, which the grouped write routes by the slot and redirects as the cluster says;
    /// still elsewhere then, it counts as a failed renewal (the lease clock decides), never as
    /// not held.
    async fn renew(&self, snapshot: Vec<Arc<Entry>>) -> Cycle {
        if let Some(limit) = self.hold_warning {
            self.core.registry.warn_long_holds(limit);
        }
        let mut cycle = Cycle {
            held: self.core.registry.len(),
            waiters: self.core.handoffs.parked(),
            ..Cycle::default()
        };
        let client_id = self.core.registry.client_id();
        let mut failed = None;
        let mut pending = snapshot;
        for across in [true, false] {
            if pending.is_empty() {
                break;
            }
            let elsewhere = self
                .round(&mut pending, across, &mut cycle, &mut failed)
                .await;
            if !elsewhere.is_empty() {
                if let Some(topology) = self.protocol.connection().topology() {
                    topology.suspect();
                }
            }
            pending = elsewhere;
        }
        if !pending.is_empty() {
            // (Still elsewhere after a call of their slot alone: tried again next cycle.)
            cycle.failed += pending.len();
            let err = redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "renewal keys not served where their slot was sent",
            ));
            failed.get_or_insert(err);
            self.unconfirmed(&pending);
        }
        if let Some(err) = failed {
            tracing::warn!(client_id, error = %err, "lock renewal failed; retrying next cycle");
        }
        cycle
    }

    /// One round of a cycle, all its calls sent at once: the `first` in batches (one master's
    /// keys per call where the kind allows, else one slot's), the second one key per call
    /// (each routed and redirected by its own slot: a batch of a migrating slot whose keys
    /// are half moved is refused with `TRYAGAIN` until the migration ends). Settles each
    /// answer and returns the entries that answered [`Renewal::Elsewhere`].
    async fn round(
        &self,
        entries: &mut [Arc<Entry>],
        first: bool,
        cycle: &mut Cycle,
        failed: &mut Option<redis::RedisError>,
    ) -> Vec<Arc<Entry>> {
        if entries.windows(2).any(|w| w[0].raw != w[1].raw) {
            entries.sort_by_key(|n| n.raw as *const Kind as usize);
        }
        let connection = self.protocol.connection();
        let mut batches: Vec<(&[Arc<Entry>], bool)> = Vec::new();
        for kind in entries.chunk_by_mut(|a, b| a.raw == b.raw) {
            let across = first && connection.is_cluster() && kind[0].raw.renews_across_slots();
            let max = if first { self.batch_size } else { 1 };
            let split = match across {
                true => connection.master_batches(kind, |n| &n.key, max),
                false => connection.batches(kind, |n| &n.key, max),
            };
            batches.extend(split.into_iter().map(|batch| (batch, across)));
        }
        if batches.is_empty() {
            return Vec::new();
        }
        let lease_ms = Lease::Watchdog.millis(self.lease);
        let client_id = self.core.registry.client_id();
        let mut fields = String::new();
        let calls = batches
            .iter()
            .map(|(batch, across)| {
                with_entries(batch, client_id, &mut fields, |entries| {
                    batch[0].raw.renew_call(lease_ms, entries, *across)
                })
            })
            .collect();
        let sent_at = Instant::now();
        let answers = self.protocol.send_all(calls).await;
        let mut elsewhere = Vec::new();
        for ((batch, _), answer) in batches.into_iter().zip(answers) {
            let renewed = answer
                .reply
                .and_then(|r| batch[0].raw.renewed(r, batch.len()));
            let renewed = match renewed {
                Ok(renewed) => renewed,
                Err(err) => {
                    cycle.failed += batch.len();
                    failed.get_or_insert_with(|| err.clone());
                    self.unconfirmed(batch);
                    continue;
                }
            };
            // (Nothing was done to a key answered elsewhere: it goes to its master, whatever
            // this node's replicas said.)
            let (mut here, mut answers) = (Vec::new(), Vec::new());
            for (entry, renewal) in batch.iter().zip(renewed) {
                match renewal {
                    Renewal::Elsewhere => elsewhere.push(entry.clone()),
                    renewal => {
                        here.push(entry.clone());
                        answers.push(renewal == Renewal::Renewed);
                    }
                }
            }
            match answer.synced {
                Synced::Yes => {
                    let yes = answers.iter().filter(|r| **r).count();
                    cycle.renewed += yes;
                    cycle.gone += answers.len() - yes;
                    let lost = self.core.registry.apply_renewals(&here, answers, sent_at);
                    self.after_loss(lost);
                }
                // Renewed at the master only: its replicas' TTLs run on, so unconfirmed.
                Synced::No { replicas } => {
                    crate::observe::replica_ack_missing("renew", replicas);
                    cycle.unconfirmed += here.len();
                    failed.get_or_insert_with(|| not_replicated(replicas));
                    self.unconfirmed(&here);
                }
            }
        }
        elsewhere
    }

    /// Entries whose renewal is not confirmed this cycle: lost if unconfirmed for a whole
    /// lease (the rest are tried again next cycle).
    fn unconfirmed(&self, entries: &[Arc<Entry>]) {
        let now = Instant::now();
        self.after_loss(
            self.core
                .registry
                .expire_unconfirmed(entries, self.lease, now),
        );
    }

    /// Wakes this client's waiters of each lost lock (they may be parked on the belief that a
    /// holder of this client will publish its unlock, which will now never come), and releases
    /// what the lease clock lost.
    fn after_loss(&self, lost: Vec<LostHold>) {
        for hold in lost {
            self.core.wake_waiters_of(hold.raw, &hold.key);
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
        Some(d) => crate::sync::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
