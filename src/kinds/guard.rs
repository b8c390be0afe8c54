//! The RAII guard of one hold of a lock.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::engine::hold::Hold;
use crate::engine::registry::{Lease, LostReason};
use crate::error::Result;
use crate::owner::Owner;

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

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("LockGuard");
        if let Some(h) = &self.hold {
            d.field("name", &h.name())
                .field("owner", &h.field())
                .field("lease", &h.lease())
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
        self.hold().name()
    }

    /// The owner holding this hold.
    pub fn owner(&self) -> Owner {
        self.hold().owner()
    }

    /// The owner field in the lock's hash, `<client-uuid>:<owner-id>` (formatted when asked:
    /// a guard keeps the owner, not the string).
    pub fn owner_field(&self) -> String {
        self.hold().field()
    }

    /// The fixed lease this hold was taken with, or `None` for a watchdog-renewed hold.
    pub fn lease(&self) -> Option<Duration> {
        match self.hold().lease() {
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
        let (releaser, ticket) = (self.hold().shared.core.clone(), self.hold().ticket.clone());
        let token = ticket.lost.token();
        async move {
            let lost = &ticket.lost;
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
                            Some(d) => crate::sync::time::sleep_until(d).await,
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
    /// - [`Error::LockLost`](crate::Error::LockLost) if the lock had been lost before (nothing is sent to Redis);
    /// - [`Error::NotOwner`](crate::Error::NotOwner) if Redis no longer shows this owner (the lock expired or was
    ///   force-unlocked and no renewal had noticed yet); nothing was changed;
    /// - [`Error::Connection`](crate::Error::Connection) if no reply came after re-sending the same unlock a few times
    ///   (renewal has stopped, so the lock ends with its lease).
    ///
    /// # Cancel safety
    /// If this future is dropped before the reply arrives, the same unlock (same latch, so it
    /// cannot release twice) is finished by the background task.
    pub async fn unlock(mut self) -> Result<()> {
        let hold = self.hold.take().expect("a LockGuard holds until consumed");
        hold.release().await
    }
}

impl LockGuard {
    /// Gives up the guard and keeps the hold in Redis: out of the client's registry (nothing
    /// renews it), the release it would send dropped unsent.
    pub(crate) fn forget(mut self) {
        if let Some(hold) = self.hold.take() {
            drop(hold.surrender());
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            hold.abandon();
        }
    }
}
