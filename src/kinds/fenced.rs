//! The fenced lock (Redisson `RFencedLock`): a reentrant lock whose every acquisition is
//! numbered. A thin layer over [`Lock`]: the same hash, channel, unlock, watchdog and hand-off,
//! with the fenced kind's acquire, which also increments the lock's token counter.

use std::future::Future;
use std::time::Duration;

use crate::engine::acquire::Granted;
use crate::engine::registry::Lease;
use crate::error::{Error, Result};
use crate::kinds::guard::LockGuard;
use crate::kinds::lock::{run_guarded, Lock};
use crate::names;
use crate::owner::Owner;
use crate::raw::fenced::FENCED;

/// A handle on one named fenced lock, laid out exactly like Redisson's `RFencedLock`: an
/// `RLock` (so it excludes Redisson `RLock` and `RFencedLock` holders of the same name) plus a
/// counter, `redisson_lock_token:{name}`, that every acquisition increments, re-entries
/// included.
///
/// Each acquire returns a [`FencedGuard`] carrying its **fencing token**: a number greater than
/// every token issued before it for this name, by this crate or by Redisson. Pass it to the
/// storage the lock protects and have that storage refuse writes carrying a smaller token than
/// one it has seen: a holder that lost its lock without knowing it (a long pause, a partition)
/// is then refused, which no lease can guarantee alone.
///
/// Everything else (waiting, leases, the watchdog, the lock-lost signal, owners) is as for
/// [`Lock`].
///
/// ```no_run
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// # async fn write_if_newer(_token: i64) {}
/// let lock = client.fenced_lock("ledger");
/// let guard = lock.lock().await?;
/// write_if_newer(guard.token()).await; // storage refuses tokens older than the newest it saw
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FencedLock {
    lock: Lock,
}

/// An acquisition of a [`FencedLock`]: a [`LockGuard`] (its methods are reached through
/// `Deref`) and the acquisition's fencing token. Dropping it releases the hold in the
/// background, as dropping a `LockGuard` does.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let guard = client.fenced_lock("ledger").lock().await?;
/// println!("holding {} with token {}", guard.name(), guard.token());
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FencedGuard {
    guard: LockGuard,
    token: i64,
}

impl FencedGuard {
    /// The fencing token of this acquisition.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let first = client.fenced_lock("ledger").lock().await?;
    /// let token = first.token();
    /// # drop(first); Ok(()) }
    /// ```
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Releases this hold, as [`LockGuard::unlock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// client.fenced_lock("ledger").lock().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`LockGuard::unlock`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`].
    pub async fn unlock(self) -> Result<()> {
        self.guard.unlock().await
    }

    /// The plain guard, giving up the token.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::LockGuard = client.fenced_lock("ledger").lock().await?.into_guard();
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn into_guard(self) -> LockGuard {
        self.guard
    }
}

impl std::ops::Deref for FencedGuard {
    type Target = LockGuard;

    fn deref(&self) -> &LockGuard {
        &self.guard
    }
}

impl FencedLock {
    pub(crate) fn new(lock: Lock) -> Self {
        FencedLock {
            lock: lock.of_kind(&FENCED),
        }
    }

    /// The same lock, always acquired and queried as `owner`, as [`Lock::with_owner`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let me = redisson_lock::Owner::new();
    /// let guard = client.fenced_lock("ledger").with_owner(me).lock().await?;
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn with_owner(self, owner: Owner) -> Self {
        FencedLock {
            lock: self.lock.with_owner(owner),
        }
    }

    /// The lock's name, as given.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::LockClient) {
    /// assert_eq!(client.fenced_lock("ledger").name(), "ledger");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The Redis key of the lock (the name with the configured prefix).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::LockClient) {
    /// println!("{}", client.fenced_lock("ledger").key());
    /// # }
    /// ```
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    crate::kinds::acquire::acquire_methods!(
        FencedGuard,
        "let lock = client.fenced_lock(\"ledger\");",
        "As [`Lock::acquire`]: a dropped call leaves no hold behind (the token it may have been \
         given is spent: tokens only ever grow, with gaps)."
    );

    /// Runs `body` under the lock, given the acquisition's token, as [`Lock::with_lock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// # async fn write_if_newer(_token: i64) {}
    /// client.fenced_lock("ledger").with_lock(|token| write_if_newer(token)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Lock::with_lock`].
    ///
    /// # Cancel safety
    /// As [`Lock::with_lock`].
    pub async fn with_lock<F, Fut, T>(&self, body: F) -> Result<T>
    where
        F: FnOnce(i64) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.lock().await?;
        let token = guard.token();
        run_guarded(self.name(), guard.into_guard(), body(token)).await
    }

    /// The newest token issued for this name (by any client, Redisson's included): `None` if
    /// none ever was (Redisson's `getToken()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let newest = client.fenced_lock("ledger").token().await?;
    /// # let _ = newest; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] if the counter key holds something else.
    pub async fn token(&self) -> Result<Option<i64>> {
        self.lock.check()?;
        let key = names::token_key(self.key());
        self.lock
            .protocol()
            .counter(&key)
            .await
            .map_err(|e| Error::from_redis(self.name(), e))
    }

    /// Deletes the lock whoever holds it and wakes its waiters, as [`Lock::force_unlock`]. The
    /// token counter stays: tokens keep growing.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let was_held = client.fenced_lock("ledger").force_unlock().await?;
    /// # let _ = was_held; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Lock::force_unlock`].
    pub async fn force_unlock(&self) -> Result<bool> {
        self.lock.force_unlock().await
    }

    /// Whether any owner holds the lock, as [`Lock::is_locked`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let held = client.fenced_lock("ledger").is_locked().await?;
    /// # let _ = held; Ok(()) }
    /// ```
    pub async fn is_locked(&self) -> Result<bool> {
        self.lock.is_locked().await
    }

    /// Whether `owner` holds the lock, as [`Lock::is_held_by`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let me = redisson_lock::Owner::new();
    /// let mine = client.fenced_lock("ledger").is_held_by(me).await?;
    /// # let _ = mine; Ok(()) }
    /// ```
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        self.lock.is_held_by(owner).await
    }

    /// Whether the current owner holds the lock (Redisson's `isHeldByCurrentThread`), as
    /// [`Lock::is_held_by_current`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let mine = client.fenced_lock("ledger").is_held_by_current().await?;
    /// # let _ = mine; Ok(()) }
    /// ```
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.lock.is_held_by_current().await
    }

    /// The current owner's hold count, as [`Lock::hold_count`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let holds = client.fenced_lock("ledger").hold_count().await?;
    /// # let _ = holds; Ok(()) }
    /// ```
    pub async fn hold_count(&self) -> Result<u32> {
        self.lock.hold_count().await
    }

    /// The lock's remaining lease, as [`Lock::remaining_lease`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let left = client.fenced_lock("ledger").remaining_lease().await?;
    /// # let _ = left; Ok(()) }
    /// ```
    pub async fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.lock.remaining_lease().await
    }

    async fn acquire_within(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<FencedGuard>> {
        let Some(Granted { hold, token }) = self.lock.acquire_granted(wait, lease).await? else {
            return Ok(None);
        };
        let guard = LockGuard::new(hold);
        match token {
            Some(token) => Ok(Some(FencedGuard { guard, token })),
            // (Every fenced acquire answers its token; dropping the guard releases the hold.)
            None => Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "a fenced acquire answered no token",
            )))),
        }
    }
}
