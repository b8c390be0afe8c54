//! Releasing holds: the unlock with its retries, and the background task that finishes what
//! `Drop` and cancelled futures cannot await.
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
//! Spent latches go to [`SpentLatches`](crate::engine::latches::SpentLatches).

use crate::sync::atomic::{AtomicUsize, Ordering};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::sync::{JoinSet, Mutex};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;

use crate::engine::handoff::Offer;
use crate::engine::Core;
use crate::names;
use crate::raw::protocol::resend_deadline;
use crate::raw::Kind;
use crate::raw::{Attempt, Release, UnlockArgs, Waiters};

/// Re-sends of one unlock after a connection error or timeout, all with the same latch. Kept
/// well inside the latch's lifetime, so a re-send can never release twice.
const UNLOCK_ATTEMPTS: u32 = 3;
const RETRY_PAUSE: Duration = Duration::from_millis(100);

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
    pub(crate) fn begin(&self, hold: &HoldKey) {
        *self.by_hold.lock().entry(hold.clone()).or_default() += 1;
        self.total.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn end(&self, hold: &HoldKey) {
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
                    if crate::sync::time::timeout_at(deadline, done).await.is_err() {
                        return !self.is_pending(hold);
                    }
                }
                None => done.await,
            }
        }
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
    /// What the hold gives back ([`AcquireArgs::permits`](crate::raw::AcquireArgs)).
    pub(crate) permits: u32,
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
        permits: u32,
    ) -> Self {
        Unlock {
            raw,
            name,
            key,
            field,
            lease_ms,
            permits,
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
        offer: Option<Offer>,
    ) -> redis::RedisResult<(Release, Instant)> {
        let Some(offer) = offer else {
            return self.run_alone(ctx, 1).await;
        };
        let channel = self.raw.channel(&self.key);
        let latch = names::unlock_latch(&self.key, &self.request_id);
        let sent_at = Instant::now();
        match self
            .hand_off(ctx, self.args(&channel, &latch), offer, sent_at)
            .await
        {
            Ok(release) => {
                ctx.retire(latch).await;
                Ok((release, sent_at))
            }
            Err(err) if crate::error::is_transient(&err) => {
                tracing::debug!(lock = %self.name, error = %err, "unlock reply lost; re-sending with the same latch");
                crate::sync::time::sleep(RETRY_PAUSE).await;
                self.run_alone(ctx, 2).await
            }
            Err(err) => {
                ctx.retire(latch).await;
                Err(err)
            }
        }
    }

    /// The unlock's sends from its `attempt`th on, without a hand-off (see [`Unlock::run`]).
    async fn run_alone(
        &self,
        ctx: &Core,
        mut attempt: u32,
    ) -> redis::RedisResult<(Release, Instant)> {
        let channel = self.raw.channel(&self.key);
        let latch = names::unlock_latch(&self.key, &self.request_id);
        loop {
            let sent_at = Instant::now();
            match self
                .raw
                .unlock(&ctx.protocol, self.args(&channel, &latch))
                .await
            {
                Ok(release) => {
                    ctx.retire(latch).await;
                    return Ok((release, sent_at));
                }
                Err(err) if attempt < UNLOCK_ATTEMPTS && crate::error::is_transient(&err) => {
                    tracing::debug!(lock = %self.name, error = %err, "unlock reply lost; re-sending with the same latch");
                    attempt += 1;
                    crate::sync::time::sleep(RETRY_PAUSE).await;
                }
                Err(err) => {
                    // No re-send follows: whether or not a send ran, its latch is spent.
                    ctx.retire(latch).await;
                    return Err(err);
                }
            }
        }
    }

    fn args<'a>(&'a self, channel: &'a str, latch: &'a str) -> UnlockArgs<'a> {
        UnlockArgs {
            key: &self.key,
            channel,
            latch,
            lease_ms: self.lease_ms,
            field: &self.field,
            permits: self.permits,
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
        let sent = (offer.hand_off())
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
        let (orphan, missed) = offer.settle(listeners, attempt, &ctx.registry, self.raw, sent_at);
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
                1, // (kinds that hand off take one hold per acquire)
            );
            let job = if orphan.acquired {
                ctx.retire(orphan.latch.to_string()).await;
                if ctx.handoffs.is_closed() {
                    // (The waiter's call ends at shutdown: this release leaves nothing
                    // behind it.)
                    if let Err(err) = undo.run_alone(ctx, 1).await {
                        tracing::warn!(lock = %self.name, error = %err, "releasing a hold taken after shutdown failed; it ends with its lease");
                    }
                    return release;
                }
                Job::Unlock(undo)
            } else {
                Job::Resolve(Unsettled {
                    unlock: undo,
                    latch: orphan.latch,
                    since: sent_at,
                    queued: None,
                })
            };
            ctx.send(job);
        }
        release
    }
}

/// A lost answer to settle in the background: does the latch exist? If so, release the hold.
pub(crate) struct Unsettled {
    pub(crate) unlock: Unlock,
    pub(crate) latch: Arc<str>,
    pub(crate) since: Instant,
    /// The place the acquire reserved in its kind's queue, if it may have queued its owner
    /// (a waiting attempt of a queueing kind): taken out again unless the hold was taken.
    pub(crate) queued: Option<u64>,
}

/// An acquire whose caller went away while it was in flight.
pub(crate) type PendingAttempt = crate::future::BoxFuture<'static, redis::RedisResult<Attempt>>;

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
    Finish(HoldKey, crate::future::BoxFuture<'static, ()>),
    /// Answer once every job sent before this one has finished.
    Flush(oneshot::Sender<()>),
}

impl Job {
    /// The hold the job works on, if any.
    pub(crate) fn hold(&self) -> Option<HoldKey> {
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
fn spawn_job(ctx: &Core, running: &mut JoinSet, job: Job) {
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
            // Found held: the latch was not there, so no send of the call took the lock; it
            // may have queued its owner, though, after the call's own withdrawal ran.
            Ok(Attempt::Held { .. }) => withdraw(&ctx, &unsettled).await,
            Err(_) => {
                withdraw(&ctx, &unsettled).await;
                resolve(&ctx, unsettled).await;
            }
        },
        Job::Resolve(unsettled) => {
            withdraw(&ctx, &unsettled).await;
            resolve(&ctx, unsettled).await;
        }
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
                crate::sync::time::sleep(pause).await;
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

/// Takes the owner of an acquire whose caller is gone out of its kind's queue, if the acquire
/// may have queued it (see [`Queueing::withdraw`](crate::raw::Queueing::withdraw)).
async fn withdraw(ctx: &Core, unsettled: &Unsettled) {
    let Some(queue_wait_ms) = unsettled.queued else {
        return;
    };
    let unlock = &unsettled.unlock;
    if let Waiters::Queue(queue) = unlock.raw.waiters() {
        let withdraw = queue.withdraw(&ctx.protocol, &unlock.key, &unlock.field, queue_wait_ms);
        withdrawn(&unlock.name, withdraw).await;
    }
}

/// Awaits a kind's withdrawal of a waiter of `lock`; a failure is logged: the waiter's place
/// in the queue then ends with its deadline.
pub(crate) async fn withdrawn(
    lock: &str,
    withdraw: crate::future::BoxFuture<'static, redis::RedisResult<()>>,
) {
    if let Err(err) = withdraw.await {
        tracing::debug!(lock, error = %err, "withdrawing a waiter failed; its place in the queue ends with its deadline");
    }
}

/// Releases the hold an acquire took for a caller that is gone, and spends its latch.
async fn undo(ctx: &Core, unsettled: &Unsettled) {
    release_quietly(ctx, &unsettled.unlock).await;
    ctx.retire(unsettled.latch.to_string()).await;
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
