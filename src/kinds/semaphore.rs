//! The distributed semaphore (Redisson `RSemaphore`): a count of permits in one key, shared
//! with Java services; acquiring takes permits, releasing gives them back.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::hold::Hold;
use crate::engine::registry::Lease;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::kinds::lock::Lock;
use crate::owner::Owner;
use crate::raw::semaphore::{self, SEMAPHORE};

/// The lease a semaphore's hold is registered with: permits do not expire (Redisson's
/// `RSemaphore` keeps no TTL), so nothing renews or ends them but a release.
const NO_LEASE: Lease = Lease::Fixed(Duration::from_secs(100 * 365 * 24 * 3600));

/// A handle on one named semaphore, laid out exactly like Redisson's `RSemaphore`
/// ([`LockClient::semaphore`](crate::LockClient::semaphore)): the key holds the permits
/// available, and Java and Rust services take and give them back alike.
///
/// Permits belong to nobody: an acquire returns a [`SemaphorePermits`] guard that gives its
/// permits back when released or dropped, and [`release`](Semaphore::release) gives permits
/// back without a guard (what a Java service does after its `acquire`). Nothing expires: a
/// process that dies holding permits keeps them taken (as in Redisson).
///
/// A waiter subscribes to the semaphore's channel and is woken by a release that makes
/// permits available (however many at once), with a one-second fallback should the message
/// be missed. Waiters are not queued: a waiter for many permits may be overtaken by waiters
/// for fewer, as in Redisson.
///
/// Each acquire and each release is exactly-once: a re-sent acquire whose first answer was
/// lost never takes its permits twice, and a re-sent release never gives them back twice
/// (latch keys beside the semaphore, which Java never reads and which change nothing it sees).
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let pool = client.semaphore("db:connections");
/// pool.try_set_permits(10).await?; // only if it has none yet
/// let permits = pool.acquire(2).await?;
/// // ... use two connections ...
/// permits.release().await?;
///
/// if let Some(one) = pool.try_acquire_for(1, Duration::from_millis(500)).await? {
///     drop(one); // given back in the background
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    lock: Lock,
}

impl Semaphore {
    pub(crate) fn new(lock: Lock) -> Self {
        Semaphore {
            lock: lock.of_kind(&SEMAPHORE),
        }
    }

    /// The semaphore's name, as given.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::LockClient) {
    /// assert_eq!(client.semaphore("pool").name(), "pool");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Takes `permits`, waiting as long as it takes for them.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permits = client.semaphore("pool").acquire(1).await?;
    /// permits.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 permits; [`Error::WrongType`] if the key holds
    /// something else than a permit count; [`Error::Connection`] if Redis cannot be reached.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future at any point takes nothing (an attempt in flight is
    /// finished in the background and its permits given back if it took them).
    pub async fn acquire(&self, permits: u32) -> Result<SemaphorePermits> {
        let taken = self.take(permits, None).await?;
        Ok(taken.expect("a wait without end ends with the permits"))
    }

    /// Takes `permits` if they are available now, in one attempt.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// match client.semaphore("pool").try_acquire(3).await? {
    ///     Some(permits) => permits.release().await?,
    ///     None => println!("fewer than 3 available"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Semaphore::acquire).
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermits>> {
        self.take(permits, Some(Duration::ZERO)).await
    }

    /// Takes `permits`, waiting at most `wait` for them; `None` if they were not available
    /// in time.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let pool = client.semaphore("pool");
    /// if let Some(permits) = pool.try_acquire_for(2, Duration::from_secs(1)).await? {
    ///     permits.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Semaphore::acquire).
    pub async fn try_acquire_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<SemaphorePermits>> {
        self.take(permits, Some(wait)).await
    }

    async fn take(&self, permits: u32, wait: Option<Duration>) -> Result<Option<SemaphorePermits>> {
        if permits == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore acquire takes at least 1 permit".into(),
            ));
        }
        // Every acquire is an owner of its own: permits are not reentrant holds.
        let granted = self.lock.acquire_as(Owner::new(), permits, wait, NO_LEASE);
        Ok(granted.await?.map(|granted| SemaphorePermits {
            hold: Some(granted.hold),
            permits,
        }))
    }

    /// Gives `permits` back (Redisson's `release(n)`): anyone may, whoever took them. Returns
    /// the permits available after it, and wakes waiters that many permits can serve.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let pool = client.semaphore("pool");
    /// pool.acquire(1).await?.forget(); // taken, as a Java `acquire()` takes it
    /// let now = pool.release(1).await?;
    /// # let _ = now; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 permits; [`Error::WrongType`] if the key holds
    /// something else; [`Error::Connection`] if no answer came after re-sending it (same
    /// latch: it counts once).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped mid-flight, the release may or may not have happened (never
    /// twice). Release a [`SemaphorePermits`] guard instead where that matters.
    pub async fn release(&self, permits: u32) -> Result<i64> {
        if permits == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore release gives back at least 1 permit".into(),
            ));
        }
        self.change(permits.into()).await
    }

    /// Gives `permits` back only if the semaphore exists (Redisson 4's `releaseIfExists`):
    /// `false`, and nothing changed, if its key does not (deleted, or never set).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let given = client.semaphore("pool").release_if_exists(1).await?;
    /// # let _ = given; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`release`](Semaphore::release).
    ///
    /// # Cancel safety
    /// As [`release`](Semaphore::release).
    pub async fn release_if_exists(&self, permits: u32) -> Result<bool> {
        if permits == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore release gives back at least 1 permit".into(),
            ));
        }
        self.lock.check()?;
        let core = &self.engine().core;
        let (protocol, key, channel) = (&core.protocol, self.lock.key(), &self.channel());
        let by = i64::from(permits);
        let sent = core
            .latches
            .send_once(&core.protocol, key, |latch| async move {
                semaphore::release_if_exists(protocol, key, channel, &latch, by).await
            });
        Ok(sent.await.map_err(|e| self.error(e))?.is_some())
    }

    /// Adds `permits` to the semaphore, or takes them away if negative (Redisson's
    /// `addPermits`; the count may go below zero). Returns the permits available after it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let pool = client.semaphore("pool");
    /// pool.add_permits(5).await?;
    /// pool.add_permits(-2).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`release`](Semaphore::release) (0 is accepted and changes nothing).
    ///
    /// # Cancel safety
    /// As [`release`](Semaphore::release).
    pub async fn add_permits(&self, permits: i64) -> Result<i64> {
        self.change(permits).await
    }

    /// Sets the semaphore's permits if it has none yet (Redisson's `trySetPermits`): `true`
    /// if it was set, `false` if the key already existed (nothing changed).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let first = client.semaphore("pool").try_set_permits(10).await?;
    /// # let _ = first; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Connection`] if Redis cannot be reached (it is not re-sent: a second send
    /// would answer `false` for the first's success).
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.lock.check()?;
        let channel = self.channel();
        semaphore::try_set(self.lock.protocol(), self.lock.key(), &channel, permits)
            .await
            .map_err(|e| self.error(e))
    }

    /// The permits available now (Redisson's `availablePermits`; 0 if the key does not
    /// exist, below 0 if permits were taken away past it).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// println!("{} free", client.semaphore("pool").available_permits().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds something else; [`Error::Connection`].
    pub async fn available_permits(&self) -> Result<i64> {
        self.lock.check()?;
        let available = semaphore::available(self.lock.protocol(), self.lock.key()).await;
        available.map_err(|e| self.error(e))
    }

    /// Takes every permit available and returns how many there were (Redisson's
    /// `drainPermits`). The permits drained are nobody's: give them back with
    /// [`release`](Semaphore::release).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let drained = client.semaphore("pool").drain_permits().await?;
    /// # let _ = drained; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`available_permits`](Semaphore::available_permits); not re-sent.
    pub async fn drain_permits(&self) -> Result<i64> {
        self.lock.check()?;
        semaphore::drain(self.lock.protocol(), self.lock.key())
            .await
            .map_err(|e| self.error(e))
    }

    fn channel(&self) -> String {
        crate::names::semaphore_channel(self.lock.key())
    }

    fn error(&self, err: redis::RedisError) -> Error {
        Error::from_redis(self.name(), err)
    }

    fn engine(&self) -> &Arc<Engine> {
        self.lock.engine()
    }

    /// Adds `by` permits (negative: takes them away), exactly once.
    async fn change(&self, by: i64) -> Result<i64> {
        self.lock.check()?;
        let core = &self.engine().core;
        let (protocol, key, channel) = (&core.protocol, self.lock.key(), &self.channel());
        let sent = core
            .latches
            .send_once(&core.protocol, key, |latch| async move {
                semaphore::release(protocol, key, channel, &latch, by).await
            });
        sent.await.map_err(|e| self.error(e))
    }
}

/// Permits taken from a [`Semaphore`]; releasing the guard gives them back.
///
/// The guard owns what it needs (`Send + 'static`): move it into another task and release it
/// there. Dropping it also gives the permits back, without blocking (the client's background
/// task sends the release; errors there are logged). [`forget`](SemaphorePermits::forget)
/// keeps them taken, for whoever releases them later (a Java service, or
/// [`Semaphore::release`]). Permits have no lease: nothing renews them and they never
/// expire.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let permits = client.semaphore("pool").acquire(2).await?;
/// assert_eq!(permits.permits(), 2);
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "the permits are given back as soon as the guard is dropped"]
pub struct SemaphorePermits {
    hold: Option<Hold>,
    permits: u32,
}

impl std::fmt::Debug for SemaphorePermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("SemaphorePermits");
        if let Some(hold) = &self.hold {
            d.field("semaphore", &hold.name());
        }
        d.field("permits", &self.permits).finish()
    }
}

impl SemaphorePermits {
    /// How many permits the guard holds.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permits = client.semaphore("pool").acquire(3).await?;
    /// assert_eq!(permits.permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let permits = client.semaphore("pool").acquire(1).await?;
    /// assert_eq!(permits.name(), "pool");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.hold().name()
    }

    fn hold(&self) -> &Hold {
        self.hold.as_ref().expect("the guard holds until consumed")
    }

    /// Gives the permits back and reports the outcome.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// client.semaphore("pool").acquire(1).await?.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::LockLost`] if the client shut down meanwhile (which gave them back);
    /// [`Error::Connection`] if no answer came after re-sending the same release a few times
    /// (same latch: they are given back at most once).
    ///
    /// # Cancel safety
    /// If this future is dropped before the answer, the same release (same latch) is finished
    /// by the background task.
    pub async fn release(mut self) -> Result<()> {
        let hold = self.hold.take().expect("the guard holds until consumed");
        hold.release().await
    }

    /// Keeps the permits taken and gives up the guard: they stay taken until someone
    /// releases them ([`Semaphore::release`], or a Java service). Returns how many.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let pool = client.semaphore("pool");
    /// let taken = pool.acquire(1).await?.forget();
    /// pool.release(taken).await?;
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) -> u32 {
        if let Some(hold) = self.hold.take() {
            // Out of the client's registry; the release it would send is dropped unsent.
            drop(hold.surrender());
        }
        self.permits
    }
}

impl Drop for SemaphorePermits {
    fn drop(&mut self) {
        if let Some(hold) = self.hold.take() {
            hold.abandon();
        }
    }
}
