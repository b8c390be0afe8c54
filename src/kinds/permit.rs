//! The semaphore whose permits expire (Redisson `RPermitExpirableSemaphore`): each permit
//! taken has an id and a lease, so a crashed holder's permit comes back when its lease ends.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::engine::registry::{Lease, LostReason};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::kinds::acquire::{checked, Wait};
use crate::kinds::guard::LockGuard;
use crate::kinds::lock::Lock;
use crate::owner::Owner;
use crate::raw::permit::{self, PERMIT};

/// A handle on one named semaphore whose permits expire, laid out exactly like Redisson's
/// `RPermitExpirableSemaphore` ([`LockClient::permit_semaphore`](crate::LockClient::permit_semaphore)):
/// the key holds the permits available, and each permit taken is listed with its id and
/// expiry beside it, so Java and Rust services take, renew and give back the same permits.
///
/// Each acquire takes one permit and returns a [`Permit`] guard with its id (the 32 hex digits
/// Java's API shows). The lease says how long the permit lasts if its holder goes away:
/// - [`Lease::Watchdog`] (beyond Redisson, which renews no permit: its issue #3046): the
///   client's watchdog renews the permit like a lock (the watchdog timeout, 30 s by default,
///   renewed every third of it) while the guard lives; a crashed holder's permit is free
///   again within that timeout;
/// - [`Lease::Fixed`]: the permit expires then unless given back first (Redisson's
///   `acquire(leaseTime)`).
///
/// A permit's expiry is written in the acquiring client's clock, and any client gives back
/// what *its* clock calls expired. A live holder keeps a watchdog-renewed permit as long as
/// the fleet's clocks agree within two thirds of the watchdog timeout (20 s by default, less
/// the round trips); a permit given back anyway (a clock far ahead, a stalled watchdog, a
/// release by id behind the holder's back) fires the guard's lost signal at the next renewal.
///
/// Nothing publishes when a permit expires: a waiter sleeps at most until the earliest expiry
/// among the permits taken (the acquire answers it), and is woken earlier by a release's
/// message.
///
/// ```no_run
/// use std::time::Duration;
/// use redisson_lock::{Lease, Wait};
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let jobs = client.permit_semaphore("jobs:export");
/// jobs.try_set_permits(4).await?; // at most 4 exports at once, fleet-wide
/// let permit = jobs.acquire(Lease::Watchdog).await?;
/// println!("running as permit {}", permit.id());
/// permit.release().await?;
///
/// let wait = Wait::AtMost(Duration::from_secs(1));
/// if let Some(p) = jobs.try_acquire(wait, Lease::Fixed(Duration::from_secs(60))).await? {
///     drop(p); // given back in the background
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    lock: Lock,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(lock: Lock) -> Self {
        PermitExpirableSemaphore {
            lock: lock.of_kind(&PERMIT),
        }
    }

    /// The semaphore's name, as given.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::LockClient) {
    /// assert_eq!(client.permit_semaphore("jobs").name(), "jobs");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Takes one permit held for `lease`, waiting as long as it takes.
    ///
    /// ```no_run
    /// use redisson_lock::Lease;
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(Lease::Watchdog).await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a lease under 1 ms or over 100 years;
    /// [`Error::WrongType`] if the key holds something else than a permit count;
    /// [`Error::Connection`] if Redis cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future at any point takes nothing (an attempt in flight is
    /// finished in the background and its permit given back if it took it).
    pub async fn acquire(&self, lease: Lease) -> Result<Permit> {
        let taken = self.try_acquire(Wait::Forever, lease).await?;
        Ok(taken.expect("a wait without end ends with the permit"))
    }

    /// Takes one permit held for `lease`, waiting as `wait` says; `None` if none came free in
    /// time ([`Wait::Never`]: one attempt).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redisson_lock::{Lease, Wait};
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let jobs = client.permit_semaphore("jobs");
    /// match jobs.try_acquire(Wait::Never, Lease::Watchdog).await? {
    ///     Some(permit) => permit.release().await?,
    ///     None => println!("all permits taken"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self, wait: Wait, lease: Lease) -> Result<Option<Permit>> {
        let lease = checked(lease)?;
        // Every acquire is an owner of its own, and its permit id is derived from it.
        let granted = self.lock.acquire_as(Owner::new(), 1, wait.limit(), lease);
        Ok(granted.await?.map(|granted| {
            let id = permit::to_hex(&permit::permit_id(&granted.hold.field()));
            Permit {
                guard: Some(LockGuard::new(granted.hold)),
                id,
            }
        }))
    }

    /// Gives back the permit `id` (anyone's: Redisson's `tryRelease`), waking a waiter:
    /// `true` if it was taken and within its lease. A permit whose lease had run out is given
    /// back all the same if no one had yet, and answers `false`, as in Redisson.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient, id: String) -> redisson_lock::Result<()> {
    /// let released = client.permit_semaphore("jobs").try_release(&id).await?;
    /// # let _ = released; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `id` is 32 hex digits; [`Error::WrongType`] if the
    /// key holds something else; [`Error::Connection`] if no answer came after re-sending it
    /// (same latch: it is given back once at most).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped mid-flight, the permit may or may not be given back (never
    /// twice).
    pub async fn try_release(&self, id: &str) -> Result<bool> {
        let id = parse_id(id)?;
        self.lock.check()?;
        let core = &self.engine().core;
        let (protocol, key) = (&core.protocol, self.lock.key());
        let sent = core
            .latches
            .send_once(&core.protocol, key, |latch| async move {
                permit::release(protocol, key, &latch, &id).await
            });
        Ok(sent.await.map_err(|e| self.error(e))? == 1)
    }

    /// Sets the lease of the permit `id` (anyone's: Redisson's `updateLeaseTime`) to `lease`
    /// from now, or to never expire for `None`: `true` if the permit is still taken. (A
    /// [`Permit`] kept by the watchdog gets the watchdog's lease again at its next renewal.)
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(client: redisson_lock::LockClient, id: String) -> redisson_lock::Result<()> {
    /// let jobs = client.permit_semaphore("jobs");
    /// let still_taken = jobs.update_lease_time(&id, Some(Duration::from_secs(30))).await?;
    /// # let _ = still_taken; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `id` is 32 hex digits or for a lease under 1 ms;
    /// [`Error::WrongType`]; [`Error::Connection`].
    pub async fn update_lease_time(&self, id: &str, lease: Option<Duration>) -> Result<bool> {
        let id = parse_id(id)?;
        if let Some(lease) = lease {
            checked(Lease::Fixed(lease))?;
        }
        self.lock.check()?;
        let lease_ms = lease.map(|d| d.as_millis().min(u64::MAX as u128) as u64);
        permit::update(self.lock.protocol(), self.lock.key(), &id, lease_ms)
            .await
            .map_err(|e| self.error(e))
    }

    /// The lease left of the permit `id` (anyone's: Redisson's `getLeaseTime`): `None` if it is
    /// not taken (unknown, given back, or expired), [`Duration::MAX`] if it never expires (a
    /// Java `acquire()` without a lease).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient, id: String) -> redisson_lock::Result<()> {
    /// match client.permit_semaphore("jobs").lease_time(&id).await? {
    ///     Some(left) => println!("{left:?} left"),
    ///     None => println!("not taken"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `id` is 32 hex digits; [`Error::WrongType`];
    /// [`Error::Connection`].
    pub async fn lease_time(&self, id: &str) -> Result<Option<Duration>> {
        let id = parse_id(id)?;
        self.lock.check()?;
        let left = permit::lease_left(self.lock.protocol(), self.lock.key(), &id).await;
        Ok(left.map_err(|e| self.error(e))?.map(|ms| match ms {
            u64::MAX => Duration::MAX,
            ms => Duration::from_millis(ms),
        }))
    }

    /// Sets the semaphore's permits if it has none yet (Redisson's `trySetPermits`): `true`
    /// if it was set, `false` if the key already existed (nothing changed).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let first = client.permit_semaphore("jobs").try_set_permits(4).await?;
    /// # let _ = first; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Connection`] if Redis cannot be reached (not re-sent: a second send would
    /// answer `false` for the first's success).
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.lock.check()?;
        let channel = crate::names::semaphore_channel(self.lock.key());
        let set = crate::raw::semaphore::try_set(
            self.lock.protocol(),
            self.lock.key(),
            &channel,
            permits,
        );
        set.await.map_err(|e| self.error(e))
    }

    /// Sets the semaphore's total permits, the ones taken included (Redisson's
    /// `setPermits`): the permits available move by the difference. Returns the permits
    /// available after it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let available = client.permit_semaphore("jobs").set_permits(8).await?;
    /// # let _ = available; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds something else; [`Error::Connection`].
    pub async fn set_permits(&self, permits: u32) -> Result<i64> {
        self.lock.check()?;
        permit::set_total(self.lock.protocol(), self.lock.key(), permits)
            .await
            .map_err(|e| self.error(e))
    }

    /// Adds `permits` to those available, or takes them away if negative (Redisson's
    /// `addPermits`; the count may go below zero). Returns the permits available after it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// client.permit_semaphore("jobs").add_permits(2).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::Connection`] if no answer came after re-sending it
    /// (same latch: it counts once).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped mid-flight, the change may or may not have happened (never
    /// twice).
    pub async fn add_permits(&self, permits: i64) -> Result<i64> {
        self.lock.check()?;
        let core = &self.engine().core;
        let (protocol, key) = (&core.protocol, self.lock.key());
        let sent = core
            .latches
            .send_once(&core.protocol, key, |latch| async move {
                permit::add(protocol, key, &latch, permits).await
            });
        sent.await.map_err(|e| self.error(e))
    }

    /// The permits available now, once the expired ones are given back (Redisson's
    /// `availablePermits`; 0 if the semaphore does not exist).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// println!("{} free", client.permit_semaphore("jobs").available_permits().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::Connection`].
    pub async fn available_permits(&self) -> Result<i64> {
        Ok(self.counts().await?.0)
    }

    /// The permits taken now, once the expired ones are given back (Redisson's
    /// `acquiredPermits`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// println!("{} taken", client.permit_semaphore("jobs").acquired_permits().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`available_permits`](Self::available_permits).
    pub async fn acquired_permits(&self) -> Result<i64> {
        Ok(self.counts().await?.1)
    }

    /// All the semaphore's permits, available and taken (Redisson's `getPermits`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// println!("{} in all", client.permit_semaphore("jobs").permits().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`available_permits`](Self::available_permits).
    pub async fn permits(&self) -> Result<i64> {
        let (available, taken) = self.counts().await?;
        Ok(available + taken)
    }

    /// The permits available and the permits taken, read together (one call: they add up to
    /// [`permits`](Self::permits) however busy the semaphore is), once the expired ones are
    /// given back.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let (available, taken) = client.permit_semaphore("jobs").counts().await?;
    /// println!("{available} free, {taken} taken");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`available_permits`](Self::available_permits).
    pub async fn counts(&self) -> Result<(i64, i64)> {
        self.lock.check()?;
        permit::count(self.lock.protocol(), self.lock.key())
            .await
            .map_err(|e| self.error(e))
    }

    fn error(&self, err: redis::RedisError) -> Error {
        Error::from_redis(self.name(), err)
    }

    fn engine(&self) -> &Arc<Engine> {
        self.lock.engine()
    }
}

fn parse_id(id: &str) -> Result<[u8; 16]> {
    permit::from_hex(id)
        .ok_or_else(|| Error::InvalidArgument(format!("a permit id is 32 hex digits, got {id:?}")))
}

/// One permit taken from a [`PermitExpirableSemaphore`]; releasing the guard gives it back.
///
/// It carries the lost signal a [`LockGuard`] does: it fires when the renewal finds the
/// permit gone (given back by id behind the holder's back, or reclaimed by a client whose
/// clock called it expired), when a whole lease passes without a confirmed renewal, when a
/// fixed lease runs out, or when the client shuts down.
///
/// The guard owns what it needs (`Send + 'static`). Dropping it gives the permit back without
/// blocking (the client's background task sends the release); [`forget`](Permit::forget)
/// keeps it taken until its lease ends or someone releases its id.
///
/// ```no_run
/// use redisson_lock::Lease;
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// # async fn export() {}
/// let permit = client.permit_semaphore("jobs").acquire(Lease::Watchdog).await?;
/// tokio::select! {
///     _ = export() => permit.release().await?,
///     _ = permit.lost() => eprintln!("permit {} lost: stopping", permit.id()),
/// }
/// # Ok(()) }
/// ```
#[must_use = "the permit is given back as soon as the guard is dropped"]
pub struct Permit {
    guard: Option<LockGuard>,
    id: String,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("id", &self.id)
            .field("guard", &self.guard)
            .finish()
    }
}

impl Permit {
    fn guard(&self) -> &LockGuard {
        self.guard.as_ref().expect("a Permit holds until consumed")
    }

    /// The permit's id, as Redisson's Java API shows ids (32 lower-case hex digits): a Java
    /// service may `tryRelease` or `updateLeaseTime` it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// assert_eq!(permit.id().len(), 32);
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The semaphore's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// assert_eq!(permit.name(), "jobs");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.guard().name()
    }

    /// The fixed lease the permit was taken with, or `None` if the watchdog keeps it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// assert_eq!(permit.lease(), None);
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> Option<Duration> {
        self.guard().lease()
    }

    /// `true` once the lost signal has fired, or as soon as the lease has run out since the
    /// last confirmed send (see [`LockGuard::is_lost`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// assert!(!permit.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.guard().is_lost()
    }

    /// Why the permit was lost, once the lost signal has fired (`None` before).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// assert_eq!(permit.lost_reason(), None);
    /// # Ok(()) }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.guard().lost_reason()
    }

    /// Completes when the permit is lost (see [`LockGuard::lost`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// let lost = permit.lost();
    /// tokio::spawn(async move { lost.await; eprintln!("permit lost") });
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes the signal.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard().lost()
    }

    /// A cancellation token cancelled when the permit is lost (see
    /// [`LockGuard::lost_token`]).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// let token = permit.lost_token();
    /// assert!(!token.is_cancelled());
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self) -> CancellationToken {
        self.guard().lost_token()
    }

    /// Gives the permit back and reports the outcome.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::LockLost`] if the permit had been lost before (nothing is sent);
    /// [`Error::NotOwner`] if Redis no longer lists it (its lease ran out, or it was given
    /// back by id); [`Error::Connection`] if no answer came after re-sending the same release
    /// (same latch: it is given back once at most).
    ///
    /// # Cancel safety
    /// If this future is dropped before the answer, the same release is finished by the
    /// background task.
    pub async fn release(mut self) -> Result<()> {
        let guard = self.guard.take().expect("a Permit holds until consumed");
        guard.unlock().await
    }

    /// The guard as a plain [`LockGuard`] (its lost signal, its release), for code written
    /// for locks; the id is returned beside it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog).await?;
    /// let (guard, id) = permit.into_guard();
    /// println!("permit {id}");
    /// guard.unlock().await?; // gives the permit back
    /// # Ok(()) }
    /// ```
    pub fn into_guard(mut self) -> (LockGuard, String) {
        let guard = self.guard.take().expect("a Permit holds until consumed");
        (guard, std::mem::take(&mut self.id))
    }

    /// Keeps the permit taken and gives up the guard: nothing renews it any more, so it stays
    /// taken until its lease ends (the watchdog's timeout, or the fixed lease) or someone
    /// releases its id. Returns the id.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let jobs = client.permit_semaphore("jobs");
    /// let id = jobs.acquire(redisson_lock::Lease::Watchdog).await?.forget();
    /// jobs.try_release(&id).await?;
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) -> String {
        if let Some(guard) = self.guard.take() {
            guard.forget();
        }
        std::mem::take(&mut self.id)
    }
}
