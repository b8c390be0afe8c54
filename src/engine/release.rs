//! Releasing holds: the unlock with its retries, the background task that finishes what
//! `Drop` and cancelled futures cannot await, and the sweeper of spent unlock latches.
//!
//! `Drop` never blocks and never spawns: it sends a [`Job`] down an unbounded channel to the
//! client's release task, which runs each job on its own task. An unlock is re-sent with the
//! same request id (so the same latch) when its reply is lost, which makes the retry idempotent.
//!
//! An unlock that frees a lock while waiters of this client are parked on it carries a
//! [`Offer`] (see [`crate::engine::handoff`]): the first send puts the oldest waiter's acquire and a
//! listener count in the same write, and settles their answers. That work must finish even if
//! the caller goes away, so an explicit unlock with an offer runs as a future of its own, which
//! a dropped caller hands to the release task ([`Job::Finish`]).
//!
//! Once an unlock's answer is read its latch is spent (no re-send will come), but it would
//! linger until its PX runs out. Spent latches are gathered for [`LATCH_SWEEP`] and deleted
//! together in one `DEL`: under load that is one command per sweep instead of one per unlock,
//! and the unlock itself costs exactly its script call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::handoff::{Handoffs, Offer};
use crate::engine::holds::{Holds, LostHold};
use crate::engine::request::Unsettled;
use crate::engine::{join_all, BoxFuture};
use crate::names;
use crate::raw::protocol::resend_deadline;
use crate::raw::Kind;
use crate::raw::{Attempt, Protocol, Release, UnlockArgs};
use crate::transport::pubsub::Hub;

/// Re-sends of one unlock after a connection error or timeout, all with the same latch. Kept
/// well inside the latch's lifetime, so a re-send can never release twice.
const UNLOCK_ATTEMPTS: u32 = 3;
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How long spent latches are gathered before one `DEL` removes them (far inside their PX).
const LATCH_SWEEP: Duration = Duration::from_millis(50);
/// Most latches one `DEL` names.
const LATCHES_PER_DEL: usize = 512;
/// `DEL`s of a sweep sent before the first answer is awaited.
const DELS_IN_FLIGHT: usize = 64;

/// Unlock latches whose answers have been read, waiting for the next sweep.
#[derive(Default)]
pub(crate) struct SpentLatches {
    pending: Mutex<Vec<String>>,
    /// Signalled when the first latch of a sweep arrives.
    arrived: Notify,
    /// Held by the sweep in flight: a sweep at shutdown must wait for the sweeper's, whose
    /// latches are out of `pending` until its `DEL`s answer (or are put back).
    sweeping: tokio::sync::Mutex<()>,
}

impl SpentLatches {
    /// Queues a spent latch for deletion (never blocks, never sends).
    pub(crate) fn retire(&self, latch: String) {
        let mut pending = self.pending.lock();
        pending.push(latch);
        if pending.len() == 1 {
            self.arrived.notify_one();
        }
    }

    /// Deletes every latch queued so far, each `DEL` confirmed. A `DEL` that fails puts its
    /// latches back for the next sweep (`false`): a latch left behind would linger for its
    /// whole PX, long after every fault has healed.
    pub(crate) async fn sweep(&self, protocol: &Protocol) -> bool {
        let _sweeping = self.sweeping.lock().await;
        let mut spent = std::mem::take(&mut *self.pending.lock());
        // (One `DEL`'s keys must be ones the topology lets share a call.)
        let batches = protocol
            .connection()
            .batches(&mut spent, |l| l, LATCHES_PER_DEL);
        // [`DELS_IN_FLIGHT`] at once: what is queued for one node goes out in one write (on a
        // cluster each slot's `DEL` is its own command), without a future per slot held at
        // once (thousands after a burst of acquires over many slots).
        let mut swept = true;
        for group in batches.chunks(DELS_IN_FLIGHT) {
            let deletes = group
                .iter()
                .map(|batch| -> BoxFuture<'_, _> {
                    Box::pin(async move { (*batch, protocol.delete_latches(batch).await) })
                })
                .collect();
            for (batch, deleted) in join_all(deletes).await {
                if deleted.is_err() {
                    swept = false;
                    self.pending.lock().extend_from_slice(batch);
                }
            }
        }
        swept
    }

    /// [`SpentLatches::sweep`] again after each failure, pausing between tries, until every
    /// queued latch is deleted or `budget` has passed (a latch left then lingers for its PX).
    pub(crate) async fn sweep_until(&self, protocol: &Protocol, budget: Duration) -> bool {
        let deadline = Instant::now() + budget;
        let mut pause = LATCH_SWEEP;
        loop {
            if self.sweep(protocol).await {
                return true;
            }
            if Instant::now() + pause > deadline {
                tracing::warn!(
                    latches = self.pending.lock().len(),
                    "spent latches could not be deleted; they expire by themselves"
                );
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(400));
        }
    }
}

/// Background work on an owner's holds of a lock (a release, the settling of a lost acquire
/// answer), counted per `(key, field)` until it is done.
///
/// An owner's next acquire of that lock waits for it: the unlock script decrements by owner
/// field, so a release that landed after the owner had taken the lock again would count the new
/// hold down (or, if the old hold had expired meanwhile, release the new one), and an acquire
/// that landed on a hold still to be released would count the owner twice.
#[derive(Default)]
pub(crate) struct PendingReleases {
    /// Jobs in flight over all holds: the acquire path reads only this when it is 0.
    total: AtomicUsize,
    by_hold: Mutex<HashMap<HoldKey, usize>>,
    done: Notify,
}

/// A lock key and an owner field.
pub(crate) type HoldKey = (Arc<str>, Arc<str>);

impl PendingReleases {
    fn begin(&self, hold: &HoldKey) {
        *self.by_hold.lock().entry(hold.clone()).or_default() += 1;
        self.total.fetch_add(1, Ordering::AcqRel);
    }

    fn end(&self, hold: &HoldKey) {
        {
            let mut by_hold = self.by_hold.lock();
            if let Some(n) = by_hold.get_mut(hold) {
                *n -= 1;
                if *n == 0 {
                    by_hold.remove(hold);
                }
            }
        }
        self.total.fetch_sub(1, Ordering::AcqRel);
        self.done.notify_waiters();
    }

    fn is_pending(&self, hold: &HoldKey) -> bool {
        self.total.load(Ordering::Acquire) > 0 && self.by_hold.lock().contains_key(hold)
    }

    /// Waits until no background work on `hold` is in flight, or `deadline` passes (then
    /// `false`).
    pub(crate) async fn settled(&self, hold: &HoldKey, deadline: Option<Instant>) -> bool {
        if !self.is_pending(hold) {
            return true; // (the acquire path: one atomic load when nothing is pending)
        }
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !self.is_pending(hold) {
                return true;
            }
            match deadline {
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, done).await.is_err() {
                        return !self.is_pending(hold);
                    }
                }
                None => done.await,
            }
        }
    }
}

/// Deletes spent latches a sweep at a time until `shutdown`, then once more.
pub(crate) async fn run_latch_sweeper(
    protocol: Protocol,
    latches: Arc<SpentLatches>,
    shutdown: CancellationToken,
) {
    let mut swept = true;
    while !shutdown.is_cancelled() {
        // After a failed sweep the latches are still queued: retry without waiting for more.
        if swept {
            tokio::select! {
                _ = latches.arrived.notified() => {}
                _ = shutdown.cancelled() => break,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(LATCH_SWEEP) => {}
            _ = shutdown.cancelled() => {}
        }
        swept = latches.sweep(&protocol).await;
    }
    latches.sweep(&protocol).await;
}

/// The engine's shared handles, each held once: the scripts' protocol, the registry of holds,
/// the subscription hub, the hand-off queues, spent latches, pending background work, and the
/// way to the release task. Cheap to clone (the client, the release task and the watchdog
/// each have one).
#[derive(Clone)]
pub(crate) struct Core {
    pub(crate) protocol: Protocol,
    pub(crate) latches: Arc<SpentLatches>,
    pub(crate) holds: Arc<Holds>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) handoffs: Arc<Handoffs>,
    /// For holds a hand-off acquired for a waiter that had gone (weak: the release task's own
    /// copy must not keep its channel open).
    pub(crate) jobs: mpsc::WeakUnboundedSender<Job>,
    pub(crate) pending: Arc<PendingReleases>,
    /// The client's key prefix, to name a lock from its key in logs.
    pub(crate) key_prefix: Arc<str>,
    /// The watchdog lease in ms (what a partial unlock resets the TTL to).
    pub(crate) watchdog_lease_ms: u64,
}

impl Core {
    /// Hands work to the release task (while it runs; never blocks).
    pub(crate) fn send(&self, job: Job) {
        if let Some(jobs) = self.jobs.upgrade() {
            self.send_on(&jobs, job);
        }
    }

    /// Hands work to the release task over `jobs`, counting it as pending on its hold.
    pub(crate) fn send_on(&self, jobs: &mpsc::UnboundedSender<Job>, job: Job) {
        let hold = job.hold();
        if let Some(hold) = &hold {
            self.pending.begin(hold);
        }
        if let Err(mpsc::error::SendError(job)) = jobs.send(job) {
            // After shutdown the task is gone: the hold then ends with its lease.
            if let Some(hold) = job.hold() {
                self.pending.end(&hold);
            }
        }
    }

    /// Forgets the entry of `ticket` if its lock was found lost, and releases what may remain.
    pub(crate) fn forget_lost(&self, ticket: &crate::engine::holds::Ticket) {
        if let Some(lost) = self.holds.forget_lost(ticket) {
            self.release_lost(&lost);
        }
    }

    /// Releases a hold declared lost by the lease clock: it may still be in Redis (the clock
    /// runs from the send of the last confirmed renewal, Redis from when it ran one, perhaps a
    /// later one whose answer was lost). Left there, it would block others for up to a lease,
    /// and the owner's next acquire would count it twice. One unlock per hold it had.
    pub(crate) fn release_lost(&self, lost: &LostHold) {
        if !lost.may_remain() {
            return;
        }
        tracing::debug!(key = %lost.key, holds = lost.holds, "releasing a hold lost by its lease clock");
        self.release_holds(lost);
    }

    /// The lock name of `key` (the key without the client's prefix; the same allocation when
    /// there is none).
    pub(crate) fn name_of(&self, key: &Arc<str>) -> Arc<str> {
        match key.strip_prefix(&*self.key_prefix) {
            Some(name) if !self.key_prefix.is_empty() => name.into(),
            _ => key.clone(),
        }
    }

    /// Has the release task release every hold `lost` had, one unlock each (the unlock
    /// script takes one hold off per call), with the watchdog lease for what remains.
    pub(crate) fn release_holds(&self, lost: &LostHold) {
        let name = self.name_of(&lost.key);
        for _ in 0..lost.holds {
            let unlock = Unlock::new(
                lost.raw,
                name.clone(),
                lost.key.clone(),
                lost.field.clone(),
                self.watchdog_lease_ms,
            );
            self.send(Job::Unlock(unlock));
        }
    }

    /// The hand-off to attempt with `unlock`, if it frees the lock and waiters of this client
    /// are parked on it.
    pub(crate) fn offer(&self, unlock: &Unlock) -> Option<Offer> {
        // (A hand-off's pipeline carries no `WAIT`: where writes wait for replicas, releases
        // do not hand off.)
        if !unlock.frees || !unlock.raw.hands_off() || self.protocol.wait_for(&unlock.key).is_some()
        {
            return None;
        }
        self.handoffs
            .offer(&unlock.key, unlock.raw, self.hub.is_connected())
    }
}

/// One logical unlock: a hold of `key` by `field`, with its request id fixed once.
#[derive(Debug, Clone)]
pub(crate) struct Unlock {
    /// The kind whose unlock this is.
    pub(crate) raw: &'static Kind,
    pub(crate) name: Arc<str>,
    pub(crate) key: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) lease_ms: u64,
    /// It releases the owner's last hold, so it frees the lock: a hand-off may follow it.
    pub(crate) frees: bool,
    request_id: String,
}

impl Unlock {
    pub(crate) fn new(
        raw: &'static Kind,
        name: Arc<str>,
        key: Arc<str>,
        field: Arc<str>,
        lease_ms: u64,
    ) -> Self {
        Unlock {
            raw,
            name,
            key,
            field,
            lease_ms,
            frees: false,
            request_id: names::new_request_id(),
        }
    }

    /// The same unlock, marked as freeing the lock (see [`Unlock::frees`]).
    pub(crate) fn freeing(mut self, frees: bool) -> Self {
        self.frees = frees;
        self
    }

    /// Sends the unlock, re-sending it (same latch) after connection errors, and retires the
    /// latch once an answer is read. With an `offer`, the first send carries the hand-off's
    /// acquire and subscriber count in the same write, and settles their answers (re-sends
    /// are plain unlocks). Returns the answer and the send time of the attempt that answered.
    pub(crate) async fn run(
        &self,
        ctx: &Core,
        mut offer: Option<Offer>,
    ) -> redis::RedisResult<(Release, Instant)> {
        let channel = self.raw.channel(&self.key);
        let latch = names::unlock_latch(&self.key, &self.request_id);
        let args = UnlockArgs {
            key: &self.key,
            channel: &channel,
            latch: &latch,
            lease_ms: self.lease_ms,
            field: &self.field,
        };
        let mut attempt = 1;
        loop {
            let sent_at = Instant::now();
            let reply = match offer.take() {
                None => self.raw.unlock(&ctx.protocol, args).await,
                Some(offer) => self.hand_off(ctx, args, offer, sent_at).await,
            };
            match reply {
                Ok(release) => {
                    ctx.latches.retire(latch);
                    return Ok((release, sent_at));
                }
                Err(err) if attempt < UNLOCK_ATTEMPTS && crate::error::is_transient(&err) => {
                    tracing::debug!(lock = %self.name, error = %err, "unlock reply lost; re-sending with the same latch");
                    attempt += 1;
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(err) => {
                    // No re-send follows: whether or not a send ran, its latch is spent.
                    ctx.latches.retire(latch);
                    return Err(err);
                }
            }
        }
    }

    /// The unlock with the offer's acquire and count behind it; settles the offer.
    async fn hand_off(
        &self,
        ctx: &Core,
        args: UnlockArgs<'_>,
        offer: Offer,
        sent_at: Instant,
    ) -> redis::RedisResult<Release> {
        let sent = self
            .raw
            .unlock_handing_off(&ctx.protocol, args, offer.waiter())
            .await;
        let (release, listeners, attempt) = match sent {
            Ok(answers) => (Ok(answers.release), answers.listeners, answers.attempt),
            // Whether the acquire ran is unknown: its waiter handles the error as its own.
            Err(err) => {
                let attempt = offer.waiter().map(|_| Err(err.clone()));
                (Err(err), None, attempt)
            }
        };
        let (orphan, missed) = offer.settle(listeners, attempt, &ctx.holds, self.raw, sent_at);
        if missed {
            // Waiters that skipped their attempts while the hand-off was in flight look again.
            ctx.hub.wake(args.channel);
        }
        if let Some(orphan) = orphan {
            let undo = Unlock::new(
                self.raw,
                self.name.clone(),
                self.key.clone(),
                orphan.field,
                orphan.lease_ms,
            );
            let job = if orphan.acquired {
                ctx.latches.retire(orphan.latch.to_string());
                Job::Unlock(undo)
            } else {
                Job::Resolve(Unsettled {
                    unlock: undo,
                    latch: orphan.latch,
                    since: sent_at,
                })
            };
            ctx.send(job);
        }
        release
    }
}

/// An acquire whose caller went away while it was in flight.
pub(crate) type PendingAttempt = crate::engine::BoxFuture<'static, redis::RedisResult<Attempt>>;

/// Work for the release task.
pub(crate) enum Job {
    /// Release one hold (a guard was dropped, or an explicit unlock was cancelled).
    Unlock(Unlock),
    /// Release one hold and say when it is done (an acquire that came too late waits for it,
    /// or its next attempt would count the owner's hold twice).
    UnlockThen(Unlock, oneshot::Sender<()>),
    /// Finish an abandoned acquire; if it turns out to have acquired, release that hold.
    FinishAttempt(PendingAttempt, Unsettled),
    /// An acquire call ended with an answer lost: find out from its latch whether it took a
    /// hold, and release that hold if it did.
    Resolve(Unsettled),
    /// Finish an unlock of `HoldKey` with a hand-off whose caller went away (its answers must be
    /// settled).
    Finish(HoldKey, crate::engine::BoxFuture<'static, ()>),
    /// Answer once every job sent before this one has finished.
    Flush(oneshot::Sender<()>),
}

impl Job {
    /// The hold the job works on, if any.
    fn hold(&self) -> Option<HoldKey> {
        let unlock = match self {
            Job::Unlock(unlock) | Job::UnlockThen(unlock, _) => unlock,
            Job::FinishAttempt(_, unsettled) | Job::Resolve(unsettled) => &unsettled.unlock,
            Job::Finish(hold, _) => return Some(hold.clone()),
            Job::Flush(_) => return None,
        };
        Some((unlock.key.clone(), unlock.field.clone()))
    }
}

/// Runs jobs until every sender is gone, then finishes the ones in flight.
pub(crate) async fn run_release_task(ctx: Core, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            job = jobs.recv() => match job {
                None => break,
                Some(Job::Flush(done)) => {
                    // Jobs in flight may send follow-ups (a hand-off's orphan to settle): they
                    // finish before the answer too.
                    loop {
                        while running.join_next().await.is_some() {}
                        let mut followed = false;
                        while let Ok(job) = jobs.try_recv() {
                            followed = true;
                            spawn_job(&ctx, &mut running, job);
                        }
                        if !followed {
                            break;
                        }
                    }
                    let _ = done.send(());
                }
                Some(job) => spawn_job(&ctx, &mut running, job),
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    while running.join_next().await.is_some() {}
}

/// Runs `job` on a task of its own, counted as pending from its send until the task ends.
fn spawn_job(ctx: &Core, running: &mut JoinSet<()>, job: Job) {
    let done = job.hold().map(|hold| Done(ctx.pending.clone(), hold));
    let work = run_job(ctx.clone(), job);
    running.spawn(async move {
        work.await;
        drop(done);
    });
}

/// Ends a job's pending count when dropped (done, or its task aborted).
struct Done(Arc<PendingReleases>, HoldKey);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.end(&self.1);
    }
}

async fn run_job(ctx: Core, job: Job) {
    match job {
        Job::Unlock(unlock) => release_quietly(&ctx, &unlock).await,
        Job::UnlockThen(unlock, done) => {
            release_quietly(&ctx, &unlock).await;
            let _ = done.send(());
        }
        Job::FinishAttempt(attempt, unsettled) => match attempt.await {
            Ok(Attempt::Acquired { .. } | Attempt::Unsynced { .. }) => {
                tracing::debug!(lock = %unsettled.unlock.name, "releasing a hold acquired by a cancelled call");
                undo(&ctx, &unsettled).await;
            }
            // Found held: the latch was not there, so no send of the call took the lock.
            Ok(Attempt::Held { .. } | Attempt::NotRun) => {}
            Err(_) => resolve(&ctx, unsettled).await,
        },
        Job::Resolve(unsettled) => resolve(&ctx, unsettled).await,
        Job::Finish(_, unlock) => unlock.await,
        Job::Flush(done) => {
            let _ = done.send(());
        }
    }
}

/// Settles an acquire whose answer was lost: asks whether its latch exists (on a connection
/// behind any send still in flight, so the answer is final) and releases the hold if it does.
/// Gives up when the latch could have expired: a hold the acquire took then ends with its
/// lease, never renewed.
async fn resolve(ctx: &Core, unsettled: Unsettled) {
    let deadline = resend_deadline(unsettled.since, unsettled.unlock.lease_ms);
    let mut pause = RETRY_PAUSE;
    loop {
        match ctx.protocol.acquired(&unsettled.latch).await {
            Ok(true) => {
                tracing::debug!(lock = %unsettled.unlock.name, "an acquire whose answer was lost took the lock; releasing it");
                undo(ctx, &unsettled).await;
                return;
            }
            Ok(false) => return,
            // (At shutdown, with Redis unreachable, waiting on would hold up `shutdown()`.)
            Err(err)
                if crate::error::is_transient(&err)
                    && Instant::now() < deadline
                    && !ctx.handoffs.is_closed() =>
            {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(err) => {
                tracing::warn!(
                    lock = %unsettled.unlock.name, error = %err,
                    "cannot tell whether an acquire whose answer was lost took the lock; such a hold ends with its lease"
                );
                return;
            }
        }
    }
}

/// Releases the hold an acquire took for a caller that is gone, and spends its latch.
async fn undo(ctx: &Core, unsettled: &Unsettled) {
    release_quietly(ctx, &unsettled.unlock).await;
    ctx.latches.retire(unsettled.latch.to_string());
}

async fn release_quietly(ctx: &Core, unlock: &Unlock) {
    match unlock.run(ctx, ctx.offer(unlock)).await {
        Ok((Release::NotHeld, _)) => {
            tracing::debug!(lock = %unlock.name, "background unlock: hold was already gone");
        }
        Ok(_) => {}
        Err(err) => tracing::warn!(
            lock = %unlock.name, error = %err,
            "background unlock failed; the lock expires when its lease runs out"
        ),
    }
}
