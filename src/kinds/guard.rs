//! The RAII guard of one hold of a lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use tokio_util::sync::CancellationToken;

use crate::client::Shared;
use crate::engine::holds::{Lease, LostReason, Surrender, Ticket};
use crate::engine::release::{Job, Unlock};
use crate::error::{Error, Result};
use crate::owner::Owner;
use crate::raw::rlock::Release;

/// Proof of one hold of a lock; releasing it releases that hold.
///
/// The guard owns what it needs (`Send + 'static`): move it into another task and unlock it
/// there. Prefer [`LockGuard::unlock`], which reports errors. Dropping the guard also releases
/// the hold, without blocking: renewal stops at once and the unlock is sent by the client's
/// background task (errors there are logged; the lock then ends with its lease).
///
/// Each guard carries the **lock-lost signal**: it fires when the watchdog finds the lock gone
/// (deleted or taken over behind the holder's back), when a whole lease passes without a
/// confirmed renewal, when a fixed lease runs out, or when the client shuts down. Race your
/// work against it:
///
/// ```no_run
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// # async fn do_work() {}
/// let guard = client.lock("jobs:import").lock().await?;
/// tokio::select! {
///     _ = do_work() => guard.unlock().await?,
///     _ = guard.lost() => eprintln!("lock lost: stopping work"),
/// }
/// # Ok(()) }
/// ```
#[must_use = "the hold is released as soon as the guard is dropped"]
pub struct LockGuard {
    hold: Option<Hold>,
}

/// Everything a live guard owns.
pub(crate) struct Hold {
    pub(crate) shared: Arc<Shared>,
    pub(crate) name: Arc<str>,
    pub(crate) key: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) owner: Owner,
    pub(crate) lease: Lease,
    pub(crate) ticket: Ticket,
}

impl Hold {
    /// Reads the lease clock; a hold it finds lost is renewed no more.
    fn check_clock(&self) -> bool {
        let lost = self.ticket.lost.check_clock(Instant::now());
        if lost {
            self.shared.releaser.forget_lost(&self.ticket);
        }
        lost
    }

    /// Gives up the hold locally (renewal stops now) and returns the unlock to send, or
    /// `None` if the lock was already lost.
    fn surrender(&self) -> Option<Unlock> {
        match self.shared.holds.surrender(&self.ticket, self.lease) {
            Surrender::Lost(lost) => {
                if let Some(lost) = lost {
                    self.shared.releaser.release_lost(&lost);
                }
                None
            }
            Surrender::Live { last } => Some(
                Unlock::new(
                    self.name.clone(),
                    self.key.clone(),
                    self.field.clone(),
                    self.lease.millis(self.shared.config.watchdog_timeout()),
                )
                .freeing(last),
            ),
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("LockGuard");
        if let Some(h) = &self.hold {
            d.field("name", &h.name)
                .field("owner", &h.field)
                .field("lease", &h.lease)
                .field("lost", &h.ticket.lost.reason());
        }
        d.finish()
    }
}

impl LockGuard {
    pub(crate) fn new(hold: Hold) -> Self {
        LockGuard { hold: Some(hold) }
    }

    fn hold(&self) -> &Hold {
        self.hold
            .as_ref()
            .expect("a LockGuard holds until consumed")
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.hold().name
    }

    /// The owner holding this hold.
    pub fn owner(&self) -> Owner {
        self.hold().owner
    }

    /// The owner field in the lock's hash, `<client-uuid>:<owner-id>`.
    pub fn owner_field(&self) -> &str {
        &self.hold().field
    }

    /// The fixed lease this hold was taken with, or `None` for a watchdog-renewed hold.
    pub fn lease(&self) -> Option<Duration> {
        match self.hold().lease {
            Lease::Watchdog => None,
            Lease::Fixed(d) => Some(d),
        }
    }

    /// `true` once the lock-lost signal has fired, or as soon as the hold's lease has run out
    /// since its last confirmed send (the acquire, or a renewal confirmed by Redis): that is
    /// read from the clock, at once, even if nothing else has run meanwhile (a process frozen
    /// past its lease sees `true` on its first call after it resumes). A cheap check: ask it
    /// before each write the lock protects.
    pub fn is_lost(&self) -> bool {
        self.hold().check_clock()
    }

    /// Why the lock was lost, once the lock-lost signal has fired (`None` before).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.hold().check_clock();
        self.hold().ticket.lost.reason()
    }

    /// Completes when the lock is lost (see the type's docs), at the latest when the hold's
    /// lease runs out without a confirmed renewal (from the clock, like [`is_lost`](Self::is_lost)).
    /// Never completes while the hold is intact. The future owns its state, so it can outlive
    /// the guard.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes the signal.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let (releaser, ticket) = (
            self.hold().shared.releaser.clone(),
            self.hold().ticket.clone(),
        );
        let lost = ticket.lost.clone();
        let token = lost.token();
        async move {
            loop {
                if lost.check_clock(Instant::now()) {
                    releaser.forget_lost(&ticket);
                    return;
                }
                // The clock moves later with each confirmed renewal: look again when it runs out.
                let deadline = lost.deadline();
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = async {
                        match deadline {
                            Some(d) => tokio::time::sleep_until(d).await,
                            None => std::future::pending().await,
                        }
                    } => {}
                }
            }
        }
    }

    /// A cancellation token cancelled when the lock is lost, for code that already speaks
    /// `tokio_util` tokens. Cancelling it yourself does not affect the lock or other guards.
    /// It is cancelled by the client's watchdog, or by an [`is_lost`](Self::is_lost) or
    /// [`lost`](Self::lost) that reads the lease clock first.
    pub fn lost_token(&self) -> CancellationToken {
        self.hold().ticket.lost.token().child_token()
    }

    /// Releases this hold and reports the outcome.
    ///
    /// # Errors
    /// - [`Error::LockLost`] if the lock had been lost before (nothing is sent to Redis);
    /// - [`Error::NotOwner`] if Redis no longer shows this owner (the lock expired or was
    ///   force-unlocked and no renewal had noticed yet); nothing was changed;
    /// - [`Error::Connection`] if no reply came after re-sending the same unlock a few times
    ///   (renewal has stopped, so the lock ends with its lease).
    ///
    /// # Cancel safety
    /// If this future is dropped before the reply arrives, the same unlock (same latch, so it
    /// cannot release twice) is finished by the background task.
    pub async fn unlock(mut self) -> Result<()> {
        let hold = self.hold.take().expect("a LockGuard holds until consumed");
        let span = tracing::debug_span!(
            "unlock",
            client_id = %hold.shared.client_id,
            lock = %hold.name,
            key = %hold.key,
            owner = %hold.field,
        );
        Self::release(hold).instrument(span).await
    }

    async fn release(hold: Hold) -> Result<()> {
        let Some(unlock) = hold.surrender() else {
            return Err(Error::LockLost {
                lock: hold.name.to_string(),
                owner: hold.field.to_string(),
            });
        };
        let shared = &*hold.shared;
        let result = match shared.releaser.offer(&unlock) {
            None => {
                // If this future is dropped mid-flight, the armed job finishes the unlock.
                let mut pending = ArmedJob {
                    shared,
                    unlock: Some(unlock.clone()),
                };
                let result = unlock.run(&shared.releaser, None).await;
                pending.unlock = None;
                result
            }
            Some(offer) => {
                // A hand-off's answers must be settled even if this future is dropped, so the
                // release runs as a future of its own, finished by the release task if so.
                let ctx = shared.releaser.clone();
                Finishing {
                    shared,
                    hold: (hold.key.clone(), hold.field.clone()),
                    release: Some(Box::pin(async move { unlock.run(&ctx, Some(offer)).await })),
                }
                .await
            }
        };
        match result {
            Ok((Release::Released, _)) => Ok(()),
            Ok((Release::StillHeld, sent_at)) => {
                hold.shared
                    .holds
                    .lease_reset(&hold.ticket, hold.lease, sent_at);
                Ok(())
            }
            Ok((Release::NotHeld, _)) => Err(Error::NotOwner {
                lock: hold.name.to_string(),
                owner: hold.field.to_string(),
            }),
            Err(err) => Err(Error::from_redis(&hold.name, err)),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            if let Some(unlock) = hold.surrender() {
                hold.shared.send_job(Job::Unlock(unlock));
            }
        }
    }
}

/// Sends its unlock to the background task if dropped while still armed.
struct ArmedJob<'a> {
    shared: &'a Shared,
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
type Releasing = Pin<Box<dyn Future<Output = redis::RedisResult<(Release, Instant)>> + Send>>;

/// Awaits a [`Releasing`]; dropped before it is done, hands it to the release task to finish.
struct Finishing<'a> {
    shared: &'a Shared,
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
