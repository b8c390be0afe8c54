//! The watchdog: one background task per client that keeps its watchdog holds alive.
//!
//! Every interval it renews each entry of [`Holds`] with watchdog holds, in batched scripts: on
//! one server a few batches in flight at a time, on a cluster each master's batches (one slot
//! each) in one pipelined write per cycle. A reply of 0 means the lock is no longer ours: the entry is
//! dropped and its guards are told. A failed call is retried next cycle, but once a whole lease
//! has passed since the last confirmed renewal the lock is treated as lost too. The same task
//! ends fixed leases when they run out. Whenever it loses an entry it wakes this client's
//! waiters of that lock, which may have been counting on the holder's unlock message.

use std::collections::HashMap;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::engine::holds::{Lease, LostHold, Node};
use crate::engine::Core;
use crate::raw::protocol::{is_no_script, not_replicated};
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

    /// One renewal cycle over every entry with watchdog holds, in batches of `batch_size`
    /// keys of one kind (one script) that the topology lets share a call. On one server up to
    /// [`BATCHES_IN_FLIGHT`] batches are sent before the first reply is read; on a cluster each
    /// master gets all its batches in one pipelined write, the masters at once.
    async fn renew_all(&self) {
        let mut snapshot = self.core.holds.renewal_snapshot();
        if snapshot.windows(2).any(|w| w[0].raw != w[1].raw) {
            snapshot.sort_by_key(|n| n.raw as *const Kind as usize);
        }
        let mut batches: Vec<&[Arc<Node>]> = Vec::new();
        for kind in snapshot.chunk_by_mut(|a, b| a.raw == b.raw) {
            let connection = self.protocol.connection();
            batches.extend(connection.batches(kind, |n| &n.key, self.batch_size));
        }
        if self.protocol.connection().is_cluster() && self.renew_by_node(&batches).await {
            return;
        }
        self.renew_in_flight(&batches).await;
    }

    /// Renewal on one server (or a cluster whose slot map has not been read): a few batches in
    /// flight on the watchdog's connection.
    async fn renew_in_flight(&self, batches: &[&[Arc<Node>]]) {
        let lease_ms = Lease::Watchdog.millis(self.lease);
        let client_id = self.core.holds.client_id();
        let mut fields = String::new();
        let mut next = 0;
        let mut in_flight: Vec<InFlightBatch> = Vec::with_capacity(BATCHES_IN_FLIGHT);
        let mut broken = false;
        loop {
            while !broken && next < batches.len() && in_flight.len() < BATCHES_IN_FLIGHT {
                let sent_at = Instant::now();
                let batch = batches[next];
                let call = with_entries(batch, client_id, &mut fields, |entries| {
                    batch[0].raw.renew(&self.protocol, lease_ms, entries)
                });
                in_flight.push((next, sent_at, call));
                next += 1;
            }
            if in_flight.is_empty() {
                break;
            }
            let (index, sent_at, result) = next_reply(&mut in_flight).await;
            let transient = result
                .as_ref()
                .err()
                .is_some_and(crate::error::is_transient);
            self.settle(batches[index], result, sent_at);
            if transient {
                // The rest would fail the same way: send no more, check their age.
                broken = true;
            }
        }
        if broken {
            let now = Instant::now();
            for rest in &batches[next..] {
                self.after_loss(self.core.holds.expire_unconfirmed(rest, self.lease, now));
            }
        }
    }

    /// Renewal on a cluster: the batches of each master in one pipelined write to it, all
    /// masters at once. The batches a master answers `NOSCRIPT` (a promoted replica, a
    /// restarted node: nothing ran) go to it again as `EVAL`, again in one write; a batch
    /// whose answer is another error (`MOVED` after a slot moved) is sent again alone, routed
    /// by its key. Returns `false` (nothing sent) when no slot map has been read.
    async fn renew_by_node(&self, batches: &[&[Arc<Node>]]) -> bool {
        let conn = self.protocol.connection().clone();
        let Some(view) = conn.topology().map(|t| t.view()).filter(|v| v.epoch > 0) else {
            return false;
        };
        let mut by_node: HashMap<Option<(String, u16)>, Vec<usize>> = HashMap::new();
        for (i, batch) in batches.iter().enumerate() {
            let master = view.slots.master_of(&batch[0].key).cloned();
            by_node.entry(master).or_default().push(i);
        }
        let lease_ms = Lease::Watchdog.millis(self.lease);
        let client_id = self.core.holds.client_id();
        let mut fields = String::new();
        let mut round: Vec<_> = by_node.into_iter().collect();
        let mut alone = Vec::new();
        for as_eval in [false, true] {
            let mut writes: Vec<NodeWrite> = Vec::new();
            for (node, members) in round.drain(..) {
                let Some((host, port)) = node else {
                    alone.extend(members);
                    continue;
                };
                let mut pipe = redis::pipe();
                for &i in &members {
                    let batch = batches[i];
                    let call = with_entries(batch, client_id, &mut fields, |entries| {
                        batch[0].raw.renew_call(lease_ms, entries)
                    });
                    pipe.add_command(if as_eval { call.as_eval() } else { call.cmd });
                }
                // One `WAIT` behind the master's whole write covers every renewal in it.
                let wait = self.protocol.wait_for_node(&(host.clone(), port));
                if let Some(wait) = wait {
                    pipe.cmd("WAIT").arg(wait.replicas).arg(wait.timeout_ms);
                }
                let mut conn = conn.clone();
                let first_key = batches[members[0]][0].key.clone();
                let sent_at = Instant::now();
                writes.push(Box::pin(async move {
                    let mut replies = conn.pipeline_to(pipe, &host, port).await;
                    let mut unsynced = None;
                    if let (Some(wait), Ok(replies)) = (wait, &mut replies) {
                        let acks = take_acks(replies);
                        let replicated = conn.replicated(&first_key, acks).await;
                        unsynced = (!replicated).then_some(wait.replicas);
                    }
                    ((host, port), members, sent_at, replies, unsynced)
                }));
            }
            for (node, members, sent_at, replies, unsynced) in crate::future::join_all(writes).await
            {
                let replies = match replies {
                    Ok(replies) => replies,
                    Err(err) => {
                        for i in members {
                            self.settle(batches[i], Err(err.clone()), sent_at);
                        }
                        continue;
                    }
                };
                let mut unknown_script = Vec::new();
                for (i, reply) in members.into_iter().zip(replies) {
                    let batch = batches[i];
                    match reply {
                        // Renewed at the master only: unconfirmed (see `Kind::renew`).
                        Ok(_) if unsynced.is_some() => {
                            let replicas = unsynced.unwrap_or_default();
                            self.settle(batch, Err(not_replicated(replicas)), sent_at);
                        }
                        Ok(value) => {
                            let renewed = batch[0].raw.renewed(value, batch.len());
                            self.settle(batch, renewed, sent_at);
                        }
                        Err(err) if !as_eval && is_no_script(&err) => unknown_script.push(i),
                        Err(_) => alone.push(i),
                    }
                }
                if !unknown_script.is_empty() {
                    round.push((Some(node), unknown_script));
                }
            }
        }
        for i in alone {
            let (renewed, sent_at) = self.renew_alone(batches[i], &mut fields).await;
            self.settle(batches[i], renewed, sent_at);
        }
        true
    }

    /// One batch sent alone, routed by its key; with when it was sent.
    async fn renew_alone(
        &self,
        batch: &[Arc<Node>],
        fields: &mut String,
    ) -> (redis::RedisResult<Vec<bool>>, Instant) {
        let lease_ms = Lease::Watchdog.millis(self.lease);
        let client_id = self.core.holds.client_id();
        let sent_at = Instant::now();
        let call = with_entries(batch, client_id, fields, |entries| {
            batch[0].raw.renew(&self.protocol, lease_ms, entries)
        });
        (call.await, sent_at)
    }

    /// Applies one batch's answer: confirms or loses its entries, or on an error loses those
    /// unconfirmed for a whole lease (the rest are tried again next cycle).
    fn settle(&self, batch: &[Arc<Node>], result: redis::RedisResult<Vec<bool>>, sent_at: Instant) {
        match result {
            Ok(renewed) => {
                self.after_loss(self.core.holds.apply_renewals(batch, renewed, sent_at));
            }
            Err(err) => {
                tracing::warn!(error = %err, "lock renewal failed; retrying next cycle");
                let now = Instant::now();
                self.after_loss(self.core.holds.expire_unconfirmed(batch, self.lease, now));
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

type RenewCall = crate::future::BoxFuture<'static, redis::RedisResult<Vec<bool>>>;
/// A batch in flight: its index in the cycle, when it was sent, and the call.
type InFlightBatch = (usize, Instant, RenewCall);

/// One master's pipelined write of a cycle: the master, the batches it carries, when it was
/// sent, one answer per batch, and whether its replicas failed to acknowledge it.
type NodeWrite = crate::future::BoxFuture<
    'static,
    (
        (String, u16),
        Vec<usize>,
        Instant,
        redis::RedisResult<Vec<redis::RedisResult<redis::Value>>>,
        // `Some(replicas)`: none of them acknowledged the write.
        Option<u32>,
    ),
>;

/// Takes the `WAIT` answer (the replicas that acknowledged) off the end of a master's
/// renewal replies.
fn take_acks(replies: &mut Vec<redis::RedisResult<redis::Value>>) -> u32 {
    match replies.pop() {
        Some(Ok(value)) => redis::from_redis_value::<u32>(value).unwrap_or(0),
        _ => 0,
    }
}

/// Calls `f` with `batch` as `(key, owner field)` pairs, the fields formatted into `buf` (one
/// buffer for a whole cycle: guards keep owners, not fields).
fn with_entries<R>(
    batch: &[Arc<Node>],
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
