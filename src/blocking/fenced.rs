//! The blocking fenced lock: [`crate::FencedLock`] for synchronous code, one owner per thread.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{LockGuard, Runtime};
use crate::{Lease, Owner, Result, Wait};

/// A blocking [`crate::FencedLock`]: operations are made by the calling thread's owner.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// use std::time::Duration;
/// if let Some(guard) = client.fenced_lock("ledger").try_lock_for(Duration::from_secs(1))? {
///     println!("writing with token {}", guard.token());
///     guard.unlock()?;
/// }
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FencedLock {
    inner: crate::FencedLock,
    owner: Option<Owner>,
    runtime: Arc<Runtime>,
}

/// A blocking [`crate::FencedGuard`]: a [`LockGuard`] (reached through `Deref`) and the
/// acquisition's fencing token.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let guard = client.fenced_lock("ledger").lock()?;
/// assert!(!guard.is_lost());
/// let token = guard.token();
/// guard.unlock()?;
/// # let _ = token; Ok::<(), redisson_lock::Error>(())
/// ```
#[must_use = "the hold is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct FencedGuard {
    guard: LockGuard,
    token: i64,
}

impl FencedGuard {
    /// The fencing token of this acquisition.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let token = client.fenced_lock("ledger").lock()?.token();
    /// # let _ = token; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Releases this hold. See [`crate::LockGuard::unlock`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.fenced_lock("ledger").lock()?.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn unlock(self) -> Result<()> {
        self.guard.unlock()
    }
}

impl std::ops::Deref for FencedGuard {
    type Target = LockGuard;

    fn deref(&self) -> &LockGuard {
        &self.guard
    }
}

impl FencedLock {
    pub(super) fn new(inner: crate::FencedLock, runtime: Arc<Runtime>) -> Self {
        FencedLock {
            inner,
            owner: None,
            runtime,
        }
    }

    /// The same lock, operated as `owner` from any thread.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let lock = client.fenced_lock("ledger").with_owner(redisson_lock::Owner::new());
    /// # let _ = lock; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    fn run<'a, T, F>(&'a self, op: impl FnOnce(crate::FencedLock) -> F) -> T
    where
        F: Future<Output = T> + 'a,
    {
        let owner = self.owner.unwrap_or_else(Owner::for_current_thread);
        let lock = self.inner.clone().with_owner(owner);
        self.runtime.block_on(op(lock))
    }

    fn guard(&self, guard: crate::FencedGuard) -> FencedGuard {
        let token = guard.token();
        FencedGuard {
            guard: LockGuard {
                inner: Some(guard.into_guard()),
                runtime: self.runtime.clone(),
            },
            token,
        }
    }

    /// Acquires the lock, blocking as `wait` says, held for `lease`; `None` when a bounded
    /// wait ends without it. See [`crate::FencedLock::acquire`].
    ///
    /// ```no_run
    /// use redisson_lock::{Lease, Wait};
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// if let Some(guard) = client.fenced_lock("ledger").acquire(Wait::Never, Lease::Watchdog)? {
    ///     println!("token {}", guard.token());
    /// }
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::FencedLock::acquire`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn acquire(&self, wait: Wait, lease: Lease) -> Result<Option<FencedGuard>> {
        let g = self.run(|l| async move { l.acquire(wait, lease).await })?;
        Ok(g.map(|g| self.guard(g)))
    }

    crate::kinds::acquire::blocking_acquire_methods!(
        FencedGuard,
        "let lock = client.fenced_lock(\"ledger\");"
    );

    /// The newest token issued for this name. See [`crate::FencedLock::token`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let newest = client.fenced_lock("ledger").token()?;
    /// # let _ = newest; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn token(&self) -> Result<Option<i64>> {
        self.run(|l| async move { l.token().await })
    }

    /// Whether the calling thread (or the bound owner) holds the lock.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let mine = client.fenced_lock("ledger").is_held_by_current_thread()?;
    /// # let _ = mine; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.run(|l| async move { l.is_held_by_current().await })
    }

    /// Whether any owner holds the lock. See [`crate::FencedLock::is_locked`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let held = client.fenced_lock("ledger").is_locked()?;
    /// # let _ = held; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.run(|l| async move { l.is_locked().await })
    }

    /// The remaining lease. See [`crate::FencedLock::remaining_lease`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let left = client.fenced_lock("ledger").remaining_lease()?;
    /// # let _ = left; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.run(|l| async move { l.remaining_lease().await })
    }

    /// The calling thread's (or the bound owner's) hold count.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let holds = client.fenced_lock("ledger").hold_count()?;
    /// # let _ = holds; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn hold_count(&self) -> Result<u32> {
        self.run(|l| async move { l.hold_count().await })
    }

    /// Deletes the lock whoever holds it. See [`crate::FencedLock::force_unlock`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let was_held = client.fenced_lock("ledger").force_unlock()?;
    /// # let _ = was_held; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.run(|l| async move { l.force_unlock().await })
    }
}
