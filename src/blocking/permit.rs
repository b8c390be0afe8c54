//! The blocking semaphore whose permits expire: [`crate::PermitExpirableSemaphore`] for
//! synchronous code.

use std::sync::Arc;
use std::time::Duration;

use super::Runtime;
use crate::{Lease, Result, Wait};

/// A blocking [`crate::PermitExpirableSemaphore`] (Redisson's `RPermitExpirableSemaphore`):
/// permits have ids and leases and belong to no thread; a guard may be released from any
/// thread.
///
/// ```no_run
/// use redisson_lock::Lease;
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let jobs = client.permit_semaphore("jobs:export");
/// jobs.try_set_permits(4)?;
/// let permit = jobs.acquire(Lease::Watchdog)?;
/// permit.release()?;
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    pub(super) inner: crate::PermitExpirableSemaphore,
    pub(super) runtime: Arc<Runtime>,
}

impl PermitExpirableSemaphore {
    fn guard(&self, inner: crate::Permit) -> Permit {
        Permit {
            inner: Some(inner),
            runtime: self.runtime.clone(),
        }
    }

    /// Takes one permit, blocking as long as it takes. See
    /// [`crate::PermitExpirableSemaphore::acquire`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?;
    /// # drop(permit); Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn acquire(&self, lease: Lease) -> Result<Permit> {
        let taken = self.runtime.block_on(self.inner.acquire(lease))?;
        Ok(self.guard(taken))
    }

    /// Takes one permit, blocking as `wait` says. See
    /// [`crate::PermitExpirableSemaphore::try_acquire`].
    ///
    /// ```no_run
    /// use redisson_lock::{Lease, Wait};
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// if let Some(permit) = client.permit_semaphore("jobs").try_acquire(Wait::Never, Lease::Watchdog)? {
    ///     permit.release()?;
    /// }
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire`].
    pub fn try_acquire(&self, wait: Wait, lease: Lease) -> Result<Option<Permit>> {
        let taken = self.runtime.block_on(self.inner.try_acquire(wait, lease))?;
        Ok(taken.map(|t| self.guard(t)))
    }

    /// Gives back the permit `id`. See [`crate::PermitExpirableSemaphore::try_release`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// # let id = String::new();
    /// client.permit_semaphore("jobs").try_release(&id)?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_release`].
    pub fn try_release(&self, id: &str) -> Result<bool> {
        self.runtime.block_on(self.inner.try_release(id))
    }

    /// Sets the lease of the permit `id`. See
    /// [`crate::PermitExpirableSemaphore::update_lease_time`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// # let id = String::new();
    /// client.permit_semaphore("jobs").update_lease_time(&id, Some(Duration::from_secs(30)))?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::update_lease_time`].
    pub fn update_lease_time(&self, id: &str, lease: Option<Duration>) -> Result<bool> {
        self.runtime
            .block_on(self.inner.update_lease_time(id, lease))
    }

    /// The lease left of the permit `id`. See [`crate::PermitExpirableSemaphore::lease_time`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// # let id = String::new();
    /// let left = client.permit_semaphore("jobs").lease_time(&id)?;
    /// # let _ = left; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::lease_time`].
    pub fn lease_time(&self, id: &str) -> Result<Option<Duration>> {
        self.runtime.block_on(self.inner.lease_time(id))
    }

    /// Sets the permits if none yet. See [`crate::PermitExpirableSemaphore::try_set_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.permit_semaphore("jobs").try_set_permits(4)?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.runtime.block_on(self.inner.try_set_permits(permits))
    }

    /// Sets the total permits. See [`crate::PermitExpirableSemaphore::set_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.permit_semaphore("jobs").set_permits(8)?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::set_permits`].
    pub fn set_permits(&self, permits: u32) -> Result<i64> {
        self.runtime.block_on(self.inner.set_permits(permits))
    }

    /// Adds permits (negative: takes them away). See
    /// [`crate::PermitExpirableSemaphore::add_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.permit_semaphore("jobs").add_permits(2)?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::add_permits`].
    pub fn add_permits(&self, permits: i64) -> Result<i64> {
        self.runtime.block_on(self.inner.add_permits(permits))
    }

    /// The permits available. See [`crate::PermitExpirableSemaphore::available_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let free = client.permit_semaphore("jobs").available_permits()?;
    /// # let _ = free; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.available_permits())
    }

    /// The permits taken. See [`crate::PermitExpirableSemaphore::acquired_permits`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let taken = client.permit_semaphore("jobs").acquired_permits()?;
    /// # let _ = taken; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquired_permits`].
    pub fn acquired_permits(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.acquired_permits())
    }

    /// The permits available and taken, read together. See
    /// [`crate::PermitExpirableSemaphore::counts`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let (free, taken) = client.permit_semaphore("jobs").counts()?;
    /// # let _ = (free, taken); Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::counts`].
    pub fn counts(&self) -> Result<(i64, i64)> {
        self.runtime.block_on(self.inner.counts())
    }

    /// The async semaphore this wraps.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.permit_semaphore("jobs").as_async().name(), "jobs");
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::PermitExpirableSemaphore {
        &self.inner
    }
}

/// A blocking [`crate::Permit`]: one permit taken; releasing or dropping the guard gives it
/// back.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?;
/// println!("permit {}", permit.id());
/// permit.release()?;
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[must_use = "the permit is given back as soon as the guard is dropped"]
#[derive(Debug)]
pub struct Permit {
    inner: Option<crate::Permit>,
    runtime: Arc<Runtime>,
}

impl Permit {
    fn get(&self) -> &crate::Permit {
        self.inner.as_ref().expect("guard lives until consumed")
    }

    /// The permit's id (32 hex digits). See [`crate::Permit::id`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?;
    /// assert_eq!(permit.id().len(), 32);
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn id(&self) -> &str {
        self.get().id()
    }

    /// Whether the permit is lost. See [`crate::Permit::is_lost`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?;
    /// assert!(!permit.is_lost());
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Gives the permit back. See [`crate::Permit::release`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?.release()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Permit::release`].
    pub fn release(mut self) -> Result<()> {
        let inner = self.inner.take().expect("guard lives until consumed");
        self.runtime.block_on(inner.release())
    }

    /// Keeps the permit taken and returns its id. See [`crate::Permit::forget`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let id = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?.forget();
    /// # let _ = id; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn forget(mut self) -> String {
        let inner = self.inner.take().expect("guard lives until consumed");
        inner.forget()
    }

    /// The async guard this wraps (for its lost signal).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?;
    /// let token = permit.as_async().lost_token();
    /// # let _ = token; Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::Permit {
        self.get()
    }
}
