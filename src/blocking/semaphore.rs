//! The blocking semaphore: [`crate::Semaphore`] for synchronous code.

use std::sync::Arc;
use std::time::Duration;

use super::Runtime;
use crate::Result;

/// A blocking [`crate::Semaphore`] (Redisson's `RSemaphore`): permits are nobody's, so no
/// thread owns them; a guard may be released from any thread.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let pool = client.semaphore("db:connections");
/// pool.try_set_permits(10)?;
/// let permits = pool.acquire(2)?;
/// permits.release()?;
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    pub(super) inner: crate::Semaphore,
    pub(super) runtime: Arc<Runtime>,
}

impl Semaphore {
    fn guard(&self, inner: crate::SemaphorePermits) -> SemaphorePermits {
        SemaphorePermits {
            inner: Some(inner),
            runtime: self.runtime.clone(),
        }
    }

    /// Takes `permits`, blocking as long as it takes. See [`crate::Semaphore::acquire`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permits = client.semaphore("pool").acquire(1)?;
    /// # drop(permits); Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn acquire(&self, permits: u32) -> Result<SemaphorePermits> {
        let taken = self.runtime.block_on(self.inner.acquire(permits))?;
        Ok(self.guard(taken))
    }

    /// Takes `permits` if available now. See [`crate::Semaphore::try_acquire`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// if let Some(permits) = client.semaphore("pool").try_acquire(1)? {
    ///     permits.release()?;
    /// }
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermits>> {
        let taken = self.runtime.block_on(self.inner.try_acquire(permits))?;
        Ok(taken.map(|t| self.guard(t)))
    }

    /// Takes `permits`, blocking at most `wait`. See [`crate::Semaphore::try_acquire_for`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// use std::time::Duration;
    /// let permits = client.semaphore("pool").try_acquire_for(1, Duration::from_secs(1))?;
    /// # drop(permits); Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn try_acquire_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<SemaphorePermits>> {
        let taken = (self.runtime).block_on(self.inner.try_acquire_for(permits, wait))?;
        Ok(taken.map(|t| self.guard(t)))
    }

    /// Gives `permits` back without a guard. See [`crate::Semaphore::release`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let available = client.semaphore("pool").release(1)?;
    /// # let _ = available; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::release`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn release(&self, permits: u32) -> Result<i64> {
        self.runtime.block_on(self.inner.release(permits))
    }

    /// Gives permits back only if the semaphore exists. See
    /// [`crate::Semaphore::release_if_exists`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let given = client.semaphore("pool").release_if_exists(1)?;
    /// # let _ = given; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::release_if_exists`].
    pub fn release_if_exists(&self, permits: u32) -> Result<bool> {
        self.runtime.block_on(self.inner.release_if_exists(permits))
    }

    /// Adds (or, negative, takes away) permits. See [`crate::Semaphore::add_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.semaphore("pool").add_permits(3)?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::add_permits`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn add_permits(&self, permits: i64) -> Result<i64> {
        self.runtime.block_on(self.inner.add_permits(permits))
    }

    /// Sets the permits if none were set. See [`crate::Semaphore::try_set_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let set = client.semaphore("pool").try_set_permits(10)?;
    /// # let _ = set; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_set_permits`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.runtime.block_on(self.inner.try_set_permits(permits))
    }

    /// The permits available now. See [`crate::Semaphore::available_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let free = client.semaphore("pool").available_permits()?;
    /// # let _ = free; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::available_permits`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.available_permits())
    }

    /// Takes every permit available. See [`crate::Semaphore::drain_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let drained = client.semaphore("pool").drain_permits()?;
    /// # let _ = drained; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::drain_permits`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn drain_permits(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.drain_permits())
    }

    /// The async semaphore underneath.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.semaphore("pool").as_async().name(), "pool");
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::Semaphore {
        &self.inner
    }
}

/// A blocking [`crate::SemaphorePermits`]; may be moved to and released from another thread.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let permits = client.semaphore("pool").acquire(2)?;
/// assert_eq!(permits.permits(), 2);
/// permits.release()?;
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[must_use = "the permits are given back as soon as the guard is dropped"]
#[derive(Debug)]
pub struct SemaphorePermits {
    inner: Option<crate::SemaphorePermits>,
    runtime: Arc<Runtime>,
}

impl SemaphorePermits {
    fn get(&self) -> &crate::SemaphorePermits {
        self.inner.as_ref().expect("guard lives until consumed")
    }

    /// How many permits the guard holds.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let n = client.semaphore("pool").acquire(2)?.permits();
    /// # let _ = n; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn permits(&self) -> u32 {
        self.get().permits()
    }

    /// Gives the permits back. See [`crate::SemaphorePermits::release`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.semaphore("pool").acquire(1)?.release()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::SemaphorePermits::release`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn release(mut self) -> Result<()> {
        let inner = self.inner.take().expect("guard lives until consumed");
        self.runtime.block_on(inner.release())
    }

    /// Keeps the permits taken. See [`crate::SemaphorePermits::forget`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let kept = client.semaphore("pool").acquire(1)?.forget();
    /// # let _ = kept; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn forget(mut self) -> u32 {
        let inner = self.inner.take().expect("guard lives until consumed");
        inner.forget()
    }

    /// The async guard underneath.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permits = client.semaphore("pool").acquire(1)?;
    /// assert_eq!(permits.as_async().permits(), 1);
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::SemaphorePermits {
        self.get()
    }
}
