//! Exactly-once acquire: one acquire call's identity on the wire, and who settles it when an
//! answer is lost.
//!
//! Every attempt of one acquire call (its first try, the attempts after each wake-up, a local
//! hand-off's pipelined acquire) carries the call's **acquire latch**. The script writes the
//! latch together with the hold and answers "acquired" without a second hold when it finds the
//! latch, so re-sending an attempt whose reply was lost is exact: the call gets at most one
//! hold, whichever send took it. (The unlock latch does the same for releases.)
//!
//! An answer lost to a cut connection or a timeout leaves the call *unanswered since* that
//! send. The next attempt of the same call settles it; if the call ends first (an error
//! return, a timeout, a cancelled future), the request hands itself to the release task, which
//! asks Redis whether the latch exists and releases the hold if it does. So an error return, a
//! retry or a cancellation never leaves a hold without a guard, and never counts one twice.
//! Exactly one party settles a latch: the call itself, a hand-off in flight for it, or the
//! release task.

use std::sync::Arc;

use crate::sync::Mutex;
use tokio::time::Instant;

use crate::engine::handoff::LatchCell;
use crate::engine::release::{Job, PendingAttempt, Unlock, Unsettled};
use crate::engine::Engine;
use crate::names;
use crate::raw::AcquireArgs;
use crate::raw::Kind;

/// What one acquire call asks for.
pub(crate) struct Terms {
    /// The lease of the hold, in ms.
    pub(crate) lease_ms: u64,
    /// What the hold takes ([`AcquireArgs::permits`]).
    pub(crate) permits: u32,
    /// The call's wait (`None`: without end; zero: a single attempt).
    pub(crate) wait: Option<std::time::Duration>,
    /// The lock's queue reservation for a wait without end ([`LockOptions::queue_wait`];
    /// zero for kinds that queue nothing).
    ///
    /// [`LockOptions::queue_wait`]: crate::raw::LockOptions
    pub(crate) queue_wait: std::time::Duration,
}

/// One acquire call, as Redis sees it.
pub(crate) struct AcquireRequest {
    raw: &'static Kind,
    shared: Arc<Engine>,
    name: Arc<str>,
    key: Arc<str>,
    field: Arc<str>,
    lease_ms: u64,
    permits: u32,
    /// A single attempt (`try_lock`): a queueing kind does not queue it.
    try_once: bool,
    /// The place its attempts reserve in a queueing kind's queue, in ms.
    queue_wait_ms: u64,
    latch: LatchCell,
    state: Mutex<State>,
}

struct State {
    /// The first send whose answer was lost, while no later answer has been read.
    unanswered_since: Option<Instant>,
    /// Someone else settles the latch now (a cancelled attempt's background task, or a
    /// hand-off in flight for a waiter that went away).
    handed_over: bool,
}

impl AcquireRequest {
    pub(crate) fn new(
        raw: &'static Kind,
        shared: Arc<Engine>,
        name: Arc<str>,
        key: Arc<str>,
        field: Arc<str>,
        terms: Terms,
    ) -> Self {
        let Terms {
            lease_ms,
            permits,
            wait,
            queue_wait,
        } = terms;
        let latch = fresh_latch(&key);
        // Redisson reserves a bounded call's wait, else its fairLockWaitTimeout.
        let reserved = wait.filter(|w| !w.is_zero()).unwrap_or(queue_wait);
        AcquireRequest {
            raw,
            shared,
            name,
            key,
            field,
            lease_ms,
            permits,
            try_once: wait == Some(std::time::Duration::ZERO),
            queue_wait_ms: u64::try_from(reserved.as_millis()).unwrap_or(u64::MAX),
            latch: Arc::new(Mutex::new(latch)),
            state: Mutex::new(State {
                unanswered_since: None,
                handed_over: false,
            }),
        }
    }

    /// The call's latch (shared with a hand-off that acquires for it).
    pub(crate) fn latch(&self) -> Arc<str> {
        self.latch.lock().clone()
    }

    /// The latch cell, for the call's hand-off slot.
    pub(crate) fn latch_cell(&self) -> LatchCell {
        self.latch.clone()
    }

    /// The lease of the hold, in ms.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// What the hold takes ([`AcquireArgs::permits`]).
    pub(crate) fn permits(&self) -> u32 {
        self.permits
    }

    /// The place its attempts reserve in a queueing kind's queue, in ms.
    pub(crate) fn queue_wait_ms(&self) -> u64 {
        self.queue_wait_ms
    }

    /// Whether the call makes a single attempt.
    pub(crate) fn try_once(&self) -> bool {
        self.try_once
    }

    /// The owner field acquiring.
    pub(crate) fn field(&self) -> &Arc<str> {
        &self.field
    }

    /// What to send for one attempt, with `latch` from [`AcquireRequest::latch`].
    pub(crate) fn args<'a>(&'a self, latch: &'a str) -> AcquireArgs<'a> {
        AcquireArgs {
            key: &self.key,
            latch,
            lease_ms: self.lease_ms,
            field: &self.field,
            permits: self.permits,
            try_once: self.try_once,
            queue_wait_ms: self.queue_wait_ms,
            now_ms: crate::raw::now_ms(),
        }
    }

    /// An attempt sent at `sent_at` got no answer: it may have acquired.
    pub(crate) fn answer_lost(&self, sent_at: Instant) {
        self.state.lock().unanswered_since.get_or_insert(sent_at);
    }

    /// An answer was read (the latch's state is known again). Returns the first send that may
    /// have taken the hold, for the lease clock: the earliest unanswered send, else `sent_at`.
    pub(crate) fn answered(&self, sent_at: Instant) -> Instant {
        self.state.lock().unanswered_since.take().unwrap_or(sent_at)
    }

    /// The call's hold was taken and is accounted for (a guard, or a release): its answer is
    /// known and the latch is spent. `true` after shutdown: the caller deletes it
    /// ([`SpentLatches::sweep`](crate::engine::latches::SpentLatches::sweep)).
    pub(crate) fn spend(&self) -> bool {
        self.state.lock().unanswered_since = None;
        self.shared.core.latches.retire(self.latch().to_string())
    }

    /// [`AcquireRequest::spend`], deleting the latch at once after shutdown.
    pub(crate) async fn spent(&self) {
        if self.spend() {
            let core = &self.shared.core;
            core.latches.sweep(&core.protocol).await;
        }
    }

    /// The hold just taken came too late to use: releases it, and gives later attempts of the
    /// call a latch of their own. Resolves once the release is done: the next attempt waits
    /// for it, or it would count the owner's hold twice. (The release task runs it, so a
    /// cancelled wait still releases.)
    pub(crate) fn release_late_hold(&self) -> impl std::future::Future<Output = ()> {
        let sweep = self.spend().then(|| self.shared.core.clone());
        *self.latch.lock() = fresh_latch(&self.key);
        let (done, released) = tokio::sync::oneshot::channel();
        self.shared.send_job(Job::UnlockThen(self.unlock(), done));
        async move {
            let _ = released.await;
            if let Some(core) = sweep {
                core.latches.sweep(&core.protocol).await;
            }
        }
    }

    /// Another party settles the latch from now on.
    pub(crate) fn hand_over(&self) {
        self.state.lock().handed_over = true;
    }

    /// An attempt sent at `sent_at` whose caller went away before its answer: the release task
    /// finishes it and settles the latch.
    pub(crate) fn abandon(&self, attempt: PendingAttempt, sent_at: Instant) {
        let since = {
            let mut state = self.state.lock();
            state.handed_over = true;
            state.unanswered_since.unwrap_or(sent_at)
        };
        self.shared
            .send_job(Job::FinishAttempt(attempt, self.unsettled(since)));
    }

    /// The release of one hold of this call's owner.
    fn unlock(&self) -> Unlock {
        Unlock::new(
            self.raw,
            self.name.clone(),
            self.key.clone(),
            self.field.clone(),
            self.lease_ms,
            self.permits,
        )
    }

    /// What the release task needs to settle this request's latch.
    fn unsettled(&self, since: Instant) -> Unsettled {
        Unsettled {
            unlock: self.unlock(),
            latch: self.latch(),
            since,
            queued: (!self.try_once).then_some(self.queue_wait_ms),
        }
    }
}

fn fresh_latch(key: &str) -> Arc<str> {
    names::acquire_latch(key, &names::new_request_id()).into()
}

impl Drop for AcquireRequest {
    fn drop(&mut self) {
        let state = self.state.get_mut();
        if state.handed_over {
            return;
        }
        if let Some(since) = state.unanswered_since {
            tracing::debug!(lock = %self.name, "acquire ended with an answer lost; settling it in the background");
            let unsettled = self.unsettled(since);
            self.shared.send_job(Job::Resolve(unsettled));
        }
    }
}
