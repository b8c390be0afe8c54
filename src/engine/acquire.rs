//! The acquire loop every lock kind shares: one attempt, then (when the call may wait) the
//! subscription, the attempt once it is confirmed, parking for the unlock message, a local
//! hand-off or the holder's remaining lease, and the attempts after each wake-up (or, for a
//! kind without messages, attempts spaced by the lock's back-off). Every attempt of one call
//! carries the call's latch ([`AcquireRequest`]); an attempt in flight when the call is dropped
//! is finished in the background ([`InFlight`]); a waiter's place in the hand-off queue is
//! given back when it goes ([`Parked`]), and its place in a queueing kind's queue in Redis
//! (the fair lock's) when the call ends without the lock ([`Withdrawal`]), from before its
//! first attempt, which may already have queued it.

use crate::observe::{About, Acquired, WaitMark};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::engine::handoff::{Forgotten, Outcome, Place, Standing};
use crate::engine::hold::Hold;
use crate::engine::registry::{Lease, Ticket};
use crate::engine::release::{withdrawn, Job, PendingAttempt};
use crate::engine::request::{AcquireRequest, Terms};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::owner::Owner;
use crate::raw::{Attempt, Kind, LockOptions, Waiters};

/// Longest a waiter sleeps between attempts when the holder's key has no TTL (a writer other
/// than Redisson or this crate), or after a connection error.
const MAX_BLIND_WAIT: Duration = Duration::from_secs(1);

/// How late tokio's timer fires: it wakes a sleep on the millisecond tick after its deadline,
/// about 1.1 ms late (measured: `sleep(1 ms)` takes 2.14 ms, `sleep(0)` 1.13 ms;
/// `std::thread::sleep(1 ms)` 1.08 ms). A back-off pause is shortened by it, so that it lasts
/// what Redisson's `Thread.sleep` of the same pause lasts.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// Re-sends of one attempt whose answer was lost, before its caller hears of the error.
const ATTEMPT_RESENDS: u32 = 3;
const RESEND_PAUSE: Duration = Duration::from_millis(50);

/// What an acquire call got: the hold, and the fencing token of its acquisition (kinds that
/// issue one; a re-entry gets one too).
pub(crate) struct Granted {
    pub(crate) hold: Hold,
    pub(crate) token: Option<i64>,
}

/// The lock an acquire call is for, as its kind's handle knows it.
pub(crate) struct Target<'a> {
    /// The kind's protocol: its scripts, its channel, whether it hands off.
    pub(crate) raw: &'static Kind,
    pub(crate) shared: &'a Arc<Engine>,
    pub(crate) name: &'a Arc<str>,
    pub(crate) key: &'a Arc<str>,
    /// The lock handle's own settings (its back-off, its queue reservation).
    pub(crate) options: LockOptions,
    /// What the call's hold takes: 1 for a lock, `n` permits for a semaphore.
    pub(crate) permits: u32,
}

impl Target<'_> {
    /// The acquire loop shared by every acquiring method of every kind. `wait: None` waits
    /// forever. How it ended is reported (a cancelled call reports nothing).
    pub(crate) async fn acquire(
        &self,
        owner: Owner,
        field: Arc<str>,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<Granted>> {
        let started = Instant::now();
        let observe = &self.shared.core.registry.observe;
        // One span per call; the loop's events (retries, late holds) are in it.
        let span = observe.acquire_span(self.about(), &field);
        let granted = (self.acquire_loop(owner, field, wait, lease))
            .instrument(span.clone())
            .await;
        let result = match &granted {
            Ok(Some(_)) => Acquired::Yes,
            Ok(None) => Acquired::TimedOut,
            Err(_) => Acquired::Failed,
        };
        observe.acquire_ended(&span, self.about(), result, started.elapsed());
        granted
    }

    /// What this call's span and events carry.
    fn about(&self) -> About<'_> {
        About {
            client_id: self.shared.core.registry.client_id(),
            lock: self.name,
            key: self.key,
            kind: self.raw.name(),
        }
    }

    async fn acquire_loop(
        &self,
        owner: Owner,
        field: Arc<str>,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<Granted>> {
        // A wait too long to represent is a wait without end.
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        // This owner's earlier holds of the lock still being released (or their lost acquire
        // answers settled) in the background: an acquire now would be counted on top of them.
        // Even `try_lock` waits that out, for as long as a reply may take.
        let hold = (self.key.clone(), field.clone());
        let settle_by =
            deadline.map(|d| d.max(Instant::now() + self.shared.config.response_timeout()));
        if !self.shared.core.pending.settled(&hold, settle_by).await {
            return Ok(None);
        }

        // Every attempt of this call sends the same latch: it holds at most once.
        let request = AcquireRequest::new(
            self.raw,
            self.shared.clone(),
            self.name.clone(),
            self.key.clone(),
            field.clone(),
            Terms {
                lease_ms: lease.millis(self.shared.config.watchdog_timeout()),
                permits: self.permits,
                wait,
                queue_wait: self.options.queue_wait(),
            },
        );
        // Armed before the first attempt: a queueing kind's first attempt may queue the owner.
        let mut withdrawal = Withdrawal {
            lock: self,
            request: &request,
            armed: !request.try_once(),
        };
        let granted = self
            .wait_for(&request, owner, field, wait, deadline, lease)
            .await;
        match granted {
            Ok(Some(_)) => withdrawal.armed = false,
            // Out of the queue before the call returns: the caller (and the waiters behind
            // it) see no trace of a wait that ended.
            _ => withdrawal.now().await,
        }
        granted
    }

    /// The attempts of one call, and its waiting between them.
    async fn wait_for(
        &self,
        request: &AcquireRequest,
        owner: Owner,
        field: Arc<str>,
        wait: Option<Duration>,
        deadline: Option<Instant>,
        lease: Lease,
    ) -> Result<Option<Granted>> {
        let hub = &self.shared.core.hub;
        let polls = matches!(self.raw.waiters(), Waiters::Poll);
        let reads = self.raw.reads();
        // No channel for a single attempt (`try_lock`): it never waits.
        let channel = (wait != Some(Duration::ZERO) && !polls)
            .then(|| self.raw.waiter_channel(self.key, &field));
        // When another waiter of this client keeps the channel subscribed, join it first: one
        // attempt, made while subscribed, then does what two (before and after) would.
        let joined = channel.as_deref().and_then(|c| hub.join_live(c, reads));
        let mut attempted = joined.is_none();
        // From here on the call is waiting (counted in the waiters' gauges until it ends).
        let (subscription, _waiting) = match (joined, channel) {
            (Some(subscription), _) => (subscription, WaitMark::start()),
            (None, channel) => {
                // First attempt before subscribing: the uncontended path costs one round trip.
                if let Ok(guard) = self.attempt(request, owner, lease).await? {
                    return Ok(Some(guard));
                }
                match channel {
                    Some(channel) => {
                        let waiting = WaitMark::start();
                        (hub.subscribe(&channel, reads).await, waiting)
                    }
                    None if polls && wait != Some(Duration::ZERO) => {
                        let _waiting = WaitMark::start();
                        return self.poll(request, owner, lease, deadline).await;
                    }
                    None => return Ok(None),
                }
            }
        };

        let handoffs = self.shared.handoffs();
        let parked = Parked {
            lock: self,
            request,
            place: Place::new(
                self.raw,
                field.clone(),
                owner,
                lease,
                request.lease_ms(),
                request.latch_cell(),
            ),
        };
        let mut failures = 0u32;
        loop {
            let epoch = hub.epoch();
            let notified = subscription.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Signalled by a hand-off's answer; a permit left from an answer already read is
            // drained first.
            let answered = parked.place.ready().notified();
            tokio::pin!(answered);
            while answered.as_mut().enable() {
                answered.set(parked.place.ready().notified());
            }

            let reply = match handoffs.leave(self.key, &parked.place) {
                Standing::Pending => {
                    // A release is acquiring for this waiter: the answer is one reply away,
                    // and an attempt of its own now could acquire twice.
                    answered.as_mut().await;
                    continue;
                }
                Standing::Answered(Outcome::Acquired(ticket, token)) => {
                    request.spent().await;
                    let hold = self.hold(lease, ticket);
                    return Ok(Some(Granted { hold, token }));
                }
                Standing::Answered(Outcome::Held { pttl_ms }) => {
                    request.answered(Instant::now());
                    Some(Ok(Err(pttl_ms)))
                }
                Standing::Answered(Outcome::Failed(err, sent_at)) => {
                    // It may have acquired: the next attempt (same latch) finds out.
                    request.answer_lost(sent_at);
                    attempted = true; // waiting already: retried like its own attempts
                    Some(Err(Error::from_redis(self.name, err)))
                }
                Standing::Answered(Outcome::NotReplicated { replicas }) => {
                    // As after an attempt of its own: the hold undone, a fresh latch, and
                    // waiting goes on.
                    request.answered(Instant::now());
                    request.release_late_hold().await;
                    attempted = true;
                    Some(Err(self.not_replicated(replicas)))
                }
                Standing::Answered(Outcome::Withdrawn) | Standing::Free => None,
                // (The hand-off's hold is released by the releaser, and the latch spent.)
                Standing::Answered(Outcome::ShutDown) => return Err(Error::Shutdown),
            };
            // An owner of this client that holds the lock has not sent its unlock yet (it
            // leaves the registry first), and a hand-off in flight registers its waiter before
            // it finishes; so with the subscription confirmed the unlock message (or the
            // hand-off) is sure to reach this waiter, and an attempt now could only fail.
            // (Should that owner lose the lock instead, the watchdog wakes this channel.) Not
            // so for a shared lock: another reader of this client does not keep this one out;
            // nor for a fair lock, whose unlock wakes only the head of its queue: this waiter
            // may not even be queued yet (a subscription joined live made no attempt).
            // An attempt made before the server confirmed the subscription (it was asked for
            // while the hub reconnected) may have missed a message: once confirmed, try again.
            let unconfirmed = !subscription.is_confirmed();
            let reply = match reply {
                Some(reply) => Some(reply),
                None if subscription.is_confirmed()
                    && ((!self.raw.is_shared()
                        && matches!(self.raw.waiters(), Waiters::Broadcast)
                        && self.shared.core.registry.held_by_other(self.key, owner))
                        || handoffs.in_flight(self.key)) =>
                {
                    None
                }
                // Retry now that the subscription is live: an unlock published before it was
                // confirmed would otherwise be missed.
                None => Some(self.attempt(request, owner, lease).await),
            };
            let pttl = match reply {
                None => self.shared.config.watchdog_timeout().as_millis() as i64,
                Some(Ok(Ok(granted))) => return Ok(Some(granted)),
                Some(Ok(Err(p))) => {
                    attempted = true;
                    failures = 0;
                    p
                }
                Some(Err(err)) if retried_while_waiting(&err) && attempted => {
                    failures += 1;
                    tracing::debug!(lock = %self.name, error = %err, "acquire attempt failed while waiting; retrying");
                    backoff(failures).as_millis() as i64
                }
                Some(Err(err)) => return Err(err),
            };

            let mut sleep = match pttl {
                p if p > 0 => Duration::from_millis(p as u64),
                -1 => MAX_BLIND_WAIT,
                _ => Duration::ZERO, // gone already: try again at once
            };
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                sleep = sleep.min(left);
            }
            if hub.epoch() != epoch {
                continue; // the pub/sub connection came back: messages may have been lost
            }
            self.shared.check_open()?;
            // Asleep, this waiter may be handed the lock by a release of this client.
            handoffs.park(self.key, &parked.place, subscription.is_confirmed());
            tokio::select! {
                _ = &mut notified => {}
                _ = &mut answered => {}
                _ = subscription.confirmed(), if unconfirmed => {}
                _ = crate::sync::time::sleep(sleep) => {}
            }
            if self.shared.is_closed() {
                return Err(Error::Shutdown);
            }
        }
    }

    /// The wait of a kind without messages: attempts spaced by the lock's back-off (which
    /// grows, with a little jitter so that waiters spread out), until acquired or `deadline`.
    async fn poll(
        &self,
        request: &AcquireRequest,
        owner: Owner,
        lease: Lease,
        deadline: Option<Instant>,
    ) -> Result<Option<Granted>> {
        let backoff = self.options.backoff();
        let mut pause = backoff.initial();
        let mut failures = 0u32;
        loop {
            let mut sleep = pause;
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                sleep = sleep.min(left);
            }
            crate::sync::time::sleep(sleep.saturating_sub(TIMER_TICK)).await;
            self.shared.check_open()?;
            match self.attempt(request, owner, lease).await {
                Ok(Ok(granted)) => return Ok(Some(granted)),
                Ok(Err(_)) => failures += 1,
                Err(err) if retried_while_waiting(&err) => {
                    tracing::debug!(lock = %self.name, error = %err, "acquire attempt failed while waiting; retrying");
                    failures += 1;
                }
                Err(err) => return Err(err),
            }
            pause = backoff.next(pause, failures);
        }
    }

    /// The error of a hold no replica acknowledged (undone by then).
    fn not_replicated(&self, replicas: u32) -> Error {
        Error::NotReplicated {
            lock: self.name.to_string(),
            replicas,
            timeout: self.shared.config.replica_sync().unwrap_or_default(),
        }
    }

    /// A hold just acquired and registered under `ticket`.
    fn hold(&self, lease: Lease, ticket: Ticket) -> Hold {
        // (A kind with no loss channel gets no watcher: `watch` checks.)
        if self.shared.config.prompt_loss_detection() {
            self.shared.core.loss.watch(&ticket);
        }
        Hold::new(self.shared.clone(), ticket, lease)
    }

    /// One acquire attempt: `Ok(Ok(hold))` acquired, `Ok(Err(pttl))` held by another.
    ///
    /// An attempt whose answer is lost is re-sent a few times with the call's latch (exact:
    /// at most one hold) before the error is returned; the call's [`AcquireRequest`] then
    /// settles it. A hold whose answer comes after its lease has run out (the process froze,
    /// Redis stalled) is released rather than handed out, and reported as free to try again.
    async fn attempt(
        &self,
        request: &AcquireRequest,
        owner: Owner,
        lease: Lease,
    ) -> Result<std::result::Result<Granted, i64>> {
        let mut resends = 0;
        loop {
            let latch = request.latch();
            let sent_at = Instant::now();
            let call = self
                .raw
                .acquire(&self.shared.core.protocol, request.args(&latch));
            let reply = InFlight {
                attempt: Some(call),
                request,
                sent_at,
            }
            .await;
            match reply {
                Ok(Attempt::Acquired { token }) => {
                    let since = request.answered(sent_at);
                    let lease_len = Duration::from_millis(request.lease_ms());
                    if Instant::now() >= since + lease_len {
                        tracing::warn!(lock = %self.name, "acquired after the lease ran out (a freeze or a stall); releasing it");
                        request.release_late_hold().await;
                        return Ok(Err(0));
                    }
                    let Some(ticket) = self.shared.core.registry.register(
                        self.raw,
                        self.key,
                        self.name,
                        (owner, request.permits()),
                        lease,
                        since,
                    ) else {
                        // The client shut down while this attempt was in flight, and its
                        // shutdown released what was held then: this hold it must not keep.
                        request.release_late_hold().await;
                        return Err(Error::Shutdown);
                    };
                    request.spent().await;
                    let hold = self.hold(lease, ticket);
                    return Ok(Ok(Granted { hold, token }));
                }
                Ok(Attempt::Held { pttl_ms }) => {
                    request.answered(sent_at);
                    return Ok(Err(pttl_ms));
                }
                Ok(Attempt::Unsynced { replicas }) => {
                    // Held at the master only: a failover could hand it to someone else while
                    // this owner believes it holds it. Undone, as Redisson 4.x does.
                    request.answered(sent_at);
                    request.release_late_hold().await;
                    return Err(self.not_replicated(replicas));
                }
                Err(err) if crate::error::is_transient(&err) => {
                    // A refused connection never carried the command, a server error is an
                    // answer: nothing to settle then.
                    if crate::error::outcome_unknown(&err) {
                        request.answer_lost(sent_at);
                    }
                    if resends < ATTEMPT_RESENDS {
                        resends += 1;
                        tracing::debug!(lock = %self.name, error = %err, "acquire answer lost; re-sending with the same latch");
                        crate::sync::time::sleep(RESEND_PAUSE * resends).await;
                        continue;
                    }
                    return Err(Error::from_redis(self.name, err));
                }
                Err(err) => return Err(Error::from_redis(self.name, err)),
            }
        }
    }
}

/// A waiter's place in the hand-off queue. Dropped (the wait is over, or its future was
/// cancelled), it leaves the queue; a hold a hand-off acquired for it that it never read is
/// released, like a dropped guard, and a hand-off still in flight settles its own answer.
struct Parked<'a> {
    lock: &'a Target<'a>,
    request: &'a AcquireRequest,
    place: Arc<Place>,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let lock = self.lock;
        match lock.shared.handoffs().forget(lock.key, &self.place) {
            Forgotten::Unread(Outcome::Acquired(ticket, _)) => {
                tracing::debug!(lock = %lock.name, "releasing a hold handed to a cancelled waiter");
                // (A latch spent after shutdown lingers for its PX here: no await in a drop.)
                let _ = self.request.spend();
                lock.hold(self.place.lease(), ticket).abandon();
            }
            Forgotten::Unread(Outcome::Failed(_, sent_at)) => self.request.answer_lost(sent_at),
            Forgotten::Unread(Outcome::NotReplicated { .. }) => {
                // (Released by the release task: nothing to await here.)
                drop(self.request.release_late_hold());
            }
            Forgotten::Unread(Outcome::Held { .. }) => {
                self.request.answered(Instant::now());
            }
            Forgotten::InFlight => self.request.hand_over(),
            Forgotten::Unread(Outcome::Withdrawn | Outcome::ShutDown) | Forgotten::Nothing => {}
        }
    }
}

/// A call's place in its kind's queue in Redis (a fair lock queues a waiting attempt's owner
/// when it cannot take the lock). Dropped armed (the call timed out, failed or was cancelled,
/// at any point from its first attempt on), it takes the owner out of the queue at once, in
/// the background, so no dead entry holds up the waiters behind it; the owner's next acquire
/// waits for that. (An attempt still in flight then is withdrawn again once it answers.)
struct Withdrawal<'a> {
    lock: &'a Target<'a>,
    request: &'a AcquireRequest,
    /// `false` once the call got the lock (which took it out of the queue) or for a single
    /// attempt, which never queues.
    armed: bool,
}

impl Withdrawal<'_> {
    /// The kind's withdrawal of this call's owner, if it has one.
    fn withdraw(&self) -> Option<crate::future::BoxFuture<'static, redis::RedisResult<()>>> {
        let Waiters::Queue(queue) = self.lock.raw.waiters() else {
            return None;
        };
        let protocol = &self.lock.shared.core.protocol;
        let (key, field) = (self.lock.key, self.request.field());
        Some(queue.withdraw(protocol, key, field, self.request.queue_wait_ms()))
    }

    /// Withdraws now, for a call that ended without the lock while its caller waits. (Armed
    /// until done: cancelled meanwhile, the drop withdraws in the background, idempotently.)
    async fn now(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(withdraw) = self.withdraw() {
            withdrawn(self.lock.name, withdraw).await;
        }
        self.armed = false;
    }
}

impl Drop for Withdrawal<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let lock = self.lock;
        let field = self.request.field();
        if let Some(withdraw) = self.withdraw() {
            let name = lock.name.clone();
            let hold = (lock.key.clone(), field.clone());
            lock.shared.send_job(Job::Finish(
                hold,
                Box::pin(async move { withdrawn(&name, withdraw).await }),
            ));
        }
    }
}

/// An acquire script call in flight. Dropped before its reply, it hands the call to the
/// background task, which awaits it and releases the hold if it was acquired (asking the
/// latch if the answer is lost): a cancelled acquire never leaves a hold without a guard.
struct InFlight<'a> {
    attempt: Option<PendingAttempt>,
    request: &'a AcquireRequest,
    sent_at: Instant,
}

impl Future for InFlight<'_> {
    type Output = redis::RedisResult<Attempt>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let attempt = self.attempt.as_mut().expect("polled after completion");
        let reply = std::task::ready!(attempt.as_mut().poll(cx));
        self.attempt = None;
        Poll::Ready(reply)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(attempt) = self.attempt.take() {
            self.request.abandon(attempt, self.sent_at);
        }
    }
}

fn backoff(failures: u32) -> Duration {
    let ms = 50u64.saturating_mul(1 << failures.min(5));
    Duration::from_millis(ms).min(MAX_BLIND_WAIT)
}

/// Whether an attempt's error leaves a waiting acquire waiting: a lost connection, or a hold
/// undone because no replica acknowledged it. The second is how a cluster failover's first
/// moments look: a write counted for the old master's replica lands at the new one, which has
/// none; the count is read again, and the next attempt waits for the right number.
fn retried_while_waiting(err: &Error) -> bool {
    err.is_connection() || err.is_not_replicated()
}
