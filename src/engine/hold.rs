//! One hold as the engine sees it: what a live guard owns, how it is given up (the lease
//! clock first: a hold already lost sends nothing), and the release of it, finished by the
//! background task if its caller goes away. The public `LockGuard` of every kind wraps one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::Instant;
use tracing::Instrument;

use crate::engine::registry::{Lease, Surrender, Ticket};
use crate::engine::release::{Job, Unlock};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::observe::Unlocked;
use crate::owner::Owner;
use crate::raw::Kind;
use crate::raw::Release;

/// Everything a live guard owns: its client, its entry in the registry (kind, key, owner and
/// lost signal live there, shared with the owner's other guards of the lock), and its lease.
/// 24 bytes: a program holding 100k locks keeps 100k of these.
pub(crate) struct Hold {
    pub(crate) shared: Arc<Engine>,
    pub(crate) ticket: Ticket,
    lease: PackedLease,
}

/// A [`Lease`] in 8 bytes: a fixed lease in nanoseconds (at most [`MAX_LEASE`](crate::engine::registry::MAX_LEASE),
/// well inside a `u64`), 0 for the watchdog.
#[derive(Clone, Copy)]
struct PackedLease(u64);

impl From<Lease> for PackedLease {
    fn from(lease: Lease) -> Self {
        match lease {
            Lease::Watchdog => PackedLease(0),
            Lease::Fixed(d) => PackedLease((d.as_nanos() as u64).max(1)),
        }
    }
}

impl Hold {
    pub(crate) fn new(shared: Arc<Engine>, ticket: Ticket, lease: Lease) -> Hold {
        Hold {
            shared,
            ticket,
            lease: lease.into(),
        }
    }

    pub(crate) fn lease(&self) -> Lease {
        match self.lease.0 {
            0 => Lease::Watchdog,
            nanos => Lease::Fixed(std::time::Duration::from_nanos(nanos)),
        }
    }

    pub(crate) fn raw(&self) -> &'static Kind {
        self.ticket.raw
    }

    /// The lock's name.
    pub(crate) fn name(&self) -> &str {
        self.ticket.name()
    }

    pub(crate) fn key(&self) -> &Arc<str> {
        &self.ticket.key
    }

    pub(crate) fn owner(&self) -> Owner {
        self.ticket.owner
    }

    /// The owner field in the lock's hash (formatted when asked: guards don't keep it).
    pub(crate) fn field(&self) -> String {
        self.ticket.owner.field(&self.shared.client_id)
    }

    /// Reads the lease clock; a hold it finds lost is renewed no more.
    pub(crate) fn check_clock(&self) -> bool {
        let lost = self.ticket.lost.check_clock(Instant::now());
        if lost {
            self.shared.core.forget_lost(&self.ticket);
        }
        lost
    }

    /// Gives up the hold locally (renewal stops now) and returns the unlock to send, or
    /// `None` if the lock was already lost.
    pub(crate) fn surrender(&self) -> Option<Unlock> {
        match self
            .shared
            .core
            .registry
            .surrender(&self.ticket, self.lease())
        {
            Surrender::Lost(lost) => {
                if let Some(lost) = lost {
                    self.shared.core.release_lost(&lost);
                }
                None
            }
            Surrender::Live { last } => {
                if last {
                    // (Its loss watch, if any, ends.)
                    if self.ticket.is_listened() {
                        let core = &self.shared.core;
                        core.loss.unwatch(core, self.raw(), self.key());
                    }
                    let registry = &self.shared.core.registry;
                    let about = registry.about(&self.ticket);
                    (registry.observe).hold_ended(about, self.ticket.held_for());
                }
                Some(
                    Unlock::new(
                        self.raw(),
                        self.ticket.name_arc(),
                        self.key().clone(),
                        self.field().into(),
                        self.lease().millis(self.shared.config.watchdog_timeout()),
                        self.ticket.permits,
                    )
                    .freeing(last),
                )
            }
        }
    }

    /// Gives the hold up and has the background task release it (a dropped guard, a hold
    /// handed to a waiter that is gone).
    pub(crate) fn abandon(self) {
        if let Some(unlock) = self.surrender() {
            self.shared.send_job(Job::Unlock(unlock));
        }
    }

    /// Gives the hold up and releases it in Redis (the body of `LockGuard::unlock`).
    ///
    /// # Cancel safety
    /// If this future is dropped before the reply arrives, the same unlock (same latch, so it
    /// cannot release twice) is finished by the background task.
    pub(crate) async fn release(self) -> Result<()> {
        let registry = &self.shared.core.registry;
        let owner = self.owner().shown_field(registry.client_id());
        let span = (registry.observe).unlock_span(registry.about(&self.ticket), &owner);
        let released = self.release_in_redis().instrument(span.clone()).await;
        let result = match &released {
            Ok(()) => Unlocked::Released,
            Err(Error::NotOwner { .. }) => Unlocked::NotHeld,
            Err(Error::LockLost { .. }) => Unlocked::Lost,
            Err(_) => Unlocked::Failed,
        };
        (registry.observe).unlock_ended(&span, result);
        released
    }

    /// The body of [`Hold::release`], in its span.
    async fn release_in_redis(&self) -> Result<()> {
        let hold = self;
        let Some(unlock) = hold.surrender() else {
            return Err(Error::LockLost {
                lock: hold.name().to_string(),
                owner: hold.field(),
            });
        };
        let shared = &*hold.shared;
        let result = match shared.core.offer(&unlock) {
            None => {
                // If this future is dropped mid-flight, the armed job finishes the unlock.
                let mut pending = ArmedJob {
                    shared,
                    unlock: Some(unlock.clone()),
                };
                let result = unlock.run(&shared.core, None).await;
                pending.unlock = None;
                result
            }
            Some(offer) => {
                // A hand-off's answers must be settled even if this future is dropped, so the
                // release runs as a future of its own, finished by the release task if so.
                let ctx = shared.core.clone();
                Finishing {
                    shared,
                    hold: (unlock.key.clone(), unlock.field.clone()),
                    release: Some(Box::pin(async move { unlock.run(&ctx, Some(offer)).await })),
                }
                .await
            }
        };
        match result {
            Ok((Release::Released, _)) => Ok(()),
            Ok((Release::StillHeld, sent_at)) => {
                hold.shared
                    .core
                    .registry
                    .lease_reset(&hold.ticket, hold.lease(), sent_at);
                Ok(())
            }
            Ok((Release::NotHeld, _)) => {
                let registry = &hold.shared.core.registry;
                let owner = hold.field();
                (registry.observe).unlock_not_held(registry.about(&hold.ticket), &owner);
                Err(Error::NotOwner {
                    lock: hold.name().to_string(),
                    owner,
                })
            }
            Err(err) => Err(Error::from_redis(hold.name(), err)),
        }
    }
}

/// Sends its unlock to the background task if dropped while still armed.
struct ArmedJob<'a> {
    shared: &'a Engine,
    unlock: Option<Unlock>,
}

impl Drop for ArmedJob<'_> {
    fn drop(&mut self) {
        if let Some(unlock) = self.unlock.take() {
            self.shared.send_job(Job::Unlock(unlock));
        }
    }
}

/// An unlock with a hand-off, in flight.
type Releasing = crate::future::BoxFuture<'static, redis::RedisResult<(Release, Instant)>>;

/// Awaits a [`Releasing`]; dropped before it is done, hands it to the release task to finish.
struct Finishing<'a> {
    shared: &'a Engine,
    hold: crate::engine::release::HoldKey,
    release: Option<Releasing>,
}

impl Future for Finishing<'_> {
    type Output = redis::RedisResult<(Release, Instant)>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let release = self.release.as_mut().expect("polled after completion");
        let answer = std::task::ready!(release.as_mut().poll(cx));
        self.release = None;
        Poll::Ready(answer)
    }
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            self.shared.send_job(Job::Finish(
                self.hold.clone(),
                Box::pin(async move {
                    let _ = release.await;
                }),
            ));
        }
    }
}
