//! The watchdog: one background task per client that keeps its watchdog holds alive.
//!
//! Every interval it renews each entry of [`Holds`] with watchdog holds, in batched scripts, a
//! few batches in flight at a time. A reply of 0 means the lock is no longer ours: the entry is
//! dropped and its guards are told. A failed call is retried next cycle, but once a whole lease
//! has passed since the last confirmed renewal the lock is treated as lost too. The same task
//! ends fixed leases when they run out. Whenever it loses an entry it wakes this client's
//! waiters of that lock, which may have been counting on the holder's unlock message.

use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::engine::holds::{Lease, LostHold, Node};
use crate::engine::release::Core;
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
}

impl Watchdog {
    /// Runs until `shutdown` is cancelled.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut next_cycle = Instant::now() + self.interval;
        loop {
            let deadline = self.core.holds.next_lease_deadline();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(next_cycle) => {
                    let started = Instant::now();
                    self.renew_all().await;
                    next_cycle = started + self.interval;
                }
                _ = sleep_until_some(deadline) => {
                    self.after_loss(self.core.holds.expire_leases(Instant::now()));
                }
                _ = self.core.holds.changed.notified() => {}
            }
        }
    }

    /// One renewal cycle over every entry with watchdog holds: batches of `batch_size` keys,
    /// up to [`BATCHES_IN_FLIGHT`] of them sent before the first reply is read.
    async fn renew_all(&self) {
        let mut snapshot = self.core.holds.renewal_snapshot();
        let lease_ms = Lease::Watchdog.millis(self.lease);
        // One call renews holds of one kind (one script), on keys the topology lets share it.
        if snapshot.windows(2).any(|w| w[0].raw != w[1].raw) {
            snapshot.sort_by_key(|n| n.raw as *const Kind as usize);
        }
        let mut batches: Vec<&[Arc<Node>]> = Vec::new();
        for kind in snapshot.chunk_by_mut(|a, b| a.raw == b.raw) {
            let connection = self.protocol.connection();
            batches.extend(connection.batches(kind, |n| &n.key, self.batch_size));
        }
        // The owner fields of a batch, formatted into one reused buffer (guards keep owners).
        let client_id = self.core.holds.client_id();
        let mut fields = String::new();
        let mut ends = Vec::new();
        let mut next = 0;
        let mut in_flight: Vec<InFlightBatch> = Vec::with_capacity(BATCHES_IN_FLIGHT);
        let mut broken = false;
        loop {
            while !broken && next < batches.len() && in_flight.len() < BATCHES_IN_FLIGHT {
                let sent_at = Instant::now();
                let batch = batches[next];
                fields.clear();
                ends.clear();
                for node in batch {
                    node.owner.write_field(client_id, &mut fields);
                    ends.push(fields.len());
                }
                let starts = std::iter::once(0).chain(ends.iter().copied());
                let entries: Vec<(&str, &str)> = (batch.iter().zip(starts.zip(&ends)))
                    .map(|(node, (start, &end))| (&*node.key, &fields[start..end]))
                    .collect();
                let call = batch[0].raw.renew(&self.protocol, lease_ms, &entries);
                in_flight.push((next, sent_at, call));
                next += 1;
            }
            if in_flight.is_empty() {
                break;
            }
            let (index, sent_at, result) = next_reply(&mut in_flight).await;
            match result {
                Ok(renewed) => self.after_loss(self.core.holds.apply_renewals(
                    batches[index],
                    renewed,
                    sent_at,
                )),
                Err(err) => {
                    tracing::warn!(error = %err, "lock renewal failed; retrying next cycle");
                    let now = Instant::now();
                    self.after_loss(self.core.holds.expire_unconfirmed(
                        batches[index],
                        self.lease,
                        now,
                    ));
                    if crate::error::is_transient(&err) {
                        // The rest would fail the same way: send no more, check their age.
                        broken = true;
                    }
                }
            }
        }
        if broken {
            let now = Instant::now();
            for rest in &batches[next..] {
                self.after_loss(self.core.holds.expire_unconfirmed(rest, self.lease, now));
            }
        }
    }

    /// Wakes this client's waiters of each lost lock (they may be parked on the belief that a
    /// holder of this client will publish its unlock, which will now never come), and releases
    /// what the lease clock lost.
    fn after_loss(&self, lost: Vec<LostHold>) {
        for hold in lost {
            self.core.hub.wake(&hold.raw.channel(&hold.key));
            self.core.release_lost(&hold);
        }
    }
}

/// Renewal batches sent before the first reply is read. Redis runs scripts one at a time, so
/// more would only queue there (delaying the client's other commands on the shared
/// connection); a few hide the round trip.
const BATCHES_IN_FLIGHT: usize = 4;

type RenewCall = crate::engine::BoxFuture<'static, redis::RedisResult<Vec<bool>>>;
/// A batch in flight: its index in the cycle, when it was sent, and the call.
type InFlightBatch = (usize, Instant, RenewCall);

/// Waits for a batch in flight to answer, and takes it out.
async fn next_reply(
    in_flight: &mut Vec<InFlightBatch>,
) -> (usize, Instant, redis::RedisResult<Vec<bool>>) {
    std::future::poll_fn(|cx| {
        for i in 0..in_flight.len() {
            if let Poll::Ready(result) = in_flight[i].2.as_mut().poll(cx) {
                let (index, sent_at, _) = in_flight.swap_remove(i);
                return Poll::Ready((index, sent_at, result));
            }
        }
        Poll::Pending
    })
    .await
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
