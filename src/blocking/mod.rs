//! The blocking API: the same locks for synchronous code, one owner per OS thread.
//!
//! This mirrors Java exactly: the owner of every operation is the calling thread (unless a
//! handle is bound to an explicit [`Owner`]), so nested calls on one thread re-enter and other
//! threads wait. The client runs its own small tokio runtime for I/O and for the watchdog, so
//! renewal goes on while your threads do other work.
//!
//! # Panics
//! Every blocking call panics if made from inside an async runtime (it would block one of its
//! workers): use the async API there.
//!
//! ```no_run
//! use redisson_lock::blocking::LockClient;
//!
//! let client = LockClient::connect("redis://127.0.0.1:6379")?;
//! let lock = client.lock("nightly-report");
//! let outer = lock.lock()?;
//! let inner = lock.lock()?; // same thread: re-enters
//! assert_eq!(lock.hold_count()?, 2);
//! inner.unlock()?;
//! outer.unlock()?;
//! # Ok::<(), redisson_lock::Error>(())
//! ```

mod fenced;
mod latch;
mod multi;
mod permit;
mod read_write;
mod semaphore;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{Config, Lease, Owner, Result, Wait};

pub use fenced::{FencedGuard, FencedLock};
pub use latch::CountDownLatch;
pub use multi::{MultiGuard, MultiLock, RedGuard, RedLock};
pub use permit::{Permit, PermitExpirableSemaphore};
pub use read_write::ReadWriteLock;
pub use semaphore::{Semaphore, SemaphorePermits};

/// Owns the runtime; shuts it down without blocking an async context.
struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn block_on<F: Future>(&self, fut: F) -> F::Output {
        assert!(
            tokio::runtime::Handle::try_current().is_err(),
            "redisson_lock::blocking called from inside an async runtime; use the async API (redisson_lock::LockClient) there"
        );
        self.0
            .as_ref()
            .expect("runtime lives until drop")
            .block_on(fut)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                // Give pending background releases a moment to finish.
                rt.shutdown_timeout(Duration::from_secs(1));
            }
        }
    }
}

/// A blocking [`crate::LockClient`].
///
/// ```no_run
/// let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// println!("client id {}", client.client_id());
/// client.shutdown();
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone)]
pub struct LockClient {
    inner: crate::LockClient,
    runtime: Arc<Runtime>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::LockClient")
            .field(&self.inner)
            .finish()
    }
}

impl LockClient {
    /// Connects to `url` (see [`crate::LockClient::connect`]).
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn connect(url: &str) -> Result<LockClient> {
        Self::with_config(Config::from_url(url)?)
    }

    /// Connects with an explicit configuration.
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn with_config(config: Config) -> Result<LockClient> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| crate::Error::Config(format!("cannot start a runtime: {e}")))?;
        let runtime = Arc::new(Runtime(Some(rt)));
        let inner = runtime.block_on(crate::LockClient::with_config(config))?;
        Ok(LockClient { inner, runtime })
    }

    /// A handle on the semaphore named `name` (see [`crate::LockClient::semaphore`]).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permits = client.semaphore("pool").acquire(1)?;
    /// # drop(permits); Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore {
            inner: self.inner.semaphore(name),
            runtime: self.runtime.clone(),
        }
    }

    /// A handle on the semaphore named `name` whose permits expire (see
    /// [`crate::LockClient::permit_semaphore`]).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let permit = client.permit_semaphore("jobs").acquire(redisson_lock::Lease::Watchdog)?;
    /// # drop(permit); Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn permit_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            inner: self.inner.permit_semaphore(name),
            runtime: self.runtime.clone(),
        }
    }

    /// A handle on the count-down latch named `name` (see
    /// [`crate::LockClient::count_down_latch`]).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.count_down_latch("ready").wait()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch {
            inner: self.inner.count_down_latch(name),
            runtime: self.runtime.clone(),
        }
    }

    /// A handle on the lock named `name`.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        self.blocking(self.inner.lock(name))
    }

    /// The blocking handle on an async lock of this client.
    fn blocking(&self, inner: crate::Lock) -> Lock {
        Lock {
            inner,
            owner: None,
            runtime: self.runtime.clone(),
        }
    }

    /// A handle on the read-write lock named `name` (see
    /// [`crate::LockClient::read_write_lock`]); each half reenters per thread, as in Java.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let doc = client.read_write_lock("doc:7");
    /// let guard = doc.read_lock().lock()?;
    /// guard.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        let rw = self.inner.read_write_lock(name);
        ReadWriteLock {
            read: self.blocking(rw.read_lock()),
            write: self.blocking(rw.write_lock()),
        }
    }

    /// A handle on the fair lock named `name` (see [`crate::LockClient::fair_lock`]):
    /// threads are served in the order they came, across clients and languages.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let guard = client.fair_lock("jobs:serial").lock()?;
    /// guard.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock {
        self.blocking(self.inner.fair_lock(name))
    }

    /// A handle on the non-reentrant fair lock named `name` (see
    /// [`crate::LockClient::non_reentrant_fair_lock`]).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let lock = client.non_reentrant_fair_lock("once");
    /// let guard = lock.lock()?;
    /// assert!(lock.try_lock().unwrap_err().is_non_reentrant());
    /// guard.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> Lock {
        self.blocking(self.inner.non_reentrant_fair_lock(name))
    }

    /// A handle on the non-reentrant lock named `name` (see
    /// [`crate::LockClient::non_reentrant_lock`]).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let lock = client.non_reentrant_lock("once");
    /// let guard = lock.lock()?;
    /// assert!(lock.try_lock().unwrap_err().is_non_reentrant());
    /// guard.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> Lock {
        self.blocking(self.inner.non_reentrant_lock(name))
    }

    /// A handle on the spin lock named `name` (see [`crate::LockClient::spin_lock`]).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let guard = client.spin_lock("cache:refill").lock()?;
    /// guard.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn spin_lock(&self, name: impl Into<String>) -> Lock {
        self.blocking(self.inner.spin_lock(name))
    }

    /// A spin lock whose waiters pause by `backoff` (see
    /// [`crate::LockClient::spin_lock_with_backoff`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let backoff = redisson_lock::BackOff::constant(Duration::from_millis(20));
    /// let guard = client.spin_lock_with_backoff("cache:refill", backoff).lock()?;
    /// guard.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn spin_lock_with_backoff(&self, name: impl Into<String>, backoff: crate::BackOff) -> Lock {
        self.blocking(self.inner.spin_lock_with_backoff(name, backoff))
    }

    /// A handle on the fenced lock named `name` (see [`crate::LockClient::fenced_lock`]).
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let guard = client.fenced_lock("ledger").lock()?;
    /// println!("token {}", guard.token());
    /// guard.unlock()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        FencedLock::new(self.inner.fenced_lock(name), self.runtime.clone())
    }

    /// This client's UUID.
    pub fn client_id(&self) -> &str {
        self.inner.client_id()
    }

    /// The async client underneath, sharing connection, identity and watchdog.
    pub fn as_async(&self) -> &crate::LockClient {
        &self.inner
    }

    /// Releases everything still held and stops the client (see
    /// [`crate::LockClient::shutdown`]).
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn shutdown(&self) {
        self.runtime.block_on(self.inner.shutdown())
    }
}

/// A blocking [`crate::Lock`]: operations are made by the calling thread's owner.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// use std::time::Duration;
/// let lock = client.lock("imports");
/// match lock.try_lock_for(Duration::from_secs(1))? {
///     Some(guard) => guard.unlock()?,
///     None => println!("busy"),
/// }
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Lock {
    inner: crate::Lock,
    owner: Option<Owner>,
    runtime: Arc<Runtime>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runtime")
    }
}

impl Lock {
    /// The same lock, operated as `owner` from any thread.
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The owner operations use: the bound one, else the calling thread's.
    pub fn owner(&self) -> Owner {
        self.owner.unwrap_or_else(Owner::for_current_thread)
    }

    fn run<'a, T, F>(&'a self, op: impl FnOnce(crate::Lock) -> F) -> T
    where
        F: Future<Output = T> + 'a,
    {
        let lock = self.inner.clone().with_owner(self.owner());
        self.runtime.block_on(op(lock))
    }

    fn guard(&self, guard: crate::LockGuard) -> LockGuard {
        LockGuard {
            inner: Some(guard),
            runtime: self.runtime.clone(),
        }
    }

    /// Acquires the lock, blocking as `wait` says, held for `lease`; `None` when a bounded
    /// wait ends without it. See [`crate::Lock::acquire`].
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redisson_lock::{Lease, Wait};
    /// # fn demo(client: redisson_lock::blocking::LockClient) -> redisson_lock::Result<()> {
    /// let lock = client.lock("orders:42");
    /// if let Some(guard) = lock.acquire(Wait::AtMost(Duration::from_secs(2)), Lease::Watchdog)? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::Lock::acquire`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn acquire(&self, wait: Wait, lease: Lease) -> Result<Option<LockGuard>> {
        let g = self.run(|l| async move { l.acquire(wait, lease).await })?;
        Ok(g.map(|g| self.guard(g)))
    }

    crate::kinds::acquire::blocking_acquire_methods!(
        LockGuard,
        "let lock = client.lock(\"orders:42\");"
    );

    /// Runs `body` under the lock: acquires it (blocking until acquired, watchdog-renewed),
    /// calls `body` with the guard, and releases the lock when `body` returns.
    ///
    /// Unlike [`crate::Lock::with_lock`], a running closure cannot be stopped from outside:
    /// if the lock is lost while it runs, it runs on to its end, and then the call returns
    /// [`Error::LockLost`](crate::Error::LockLost) (its output is discarded: its effects were
    /// not protected by the lock). Check `guard.is_lost()` before each write the lock
    /// protects (a cheap check that reads the lease clock) to stop early.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::LockClient) -> redisson_lock::Result<()> {
    /// let total = client.lock("ledger").with_lock(|guard| {
    ///     let mut total = 0;
    ///     for entry in [1, 2, 3] {
    ///         if guard.is_lost() {
    ///             break; // the call returns Error::LockLost
    ///         }
    ///         total += entry; // a write the lock protects
    ///     }
    ///     total
    /// })?;
    /// # let _ = total; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::Lock::with_lock`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn with_lock<T>(&self, body: impl FnOnce(&LockGuard) -> T) -> Result<T> {
        let guard = self.lock()?;
        let output = body(&guard);
        if guard.is_lost() {
            return Err(crate::Error::LockLost {
                lock: self.inner.name().to_string(),
                owner: guard.owner_field().to_string(),
            });
        }
        match guard.unlock() {
            Ok(()) => Ok(output),
            Err(err) if err.is_connection() => {
                tracing::warn!(lock = %self.inner.name(), error = %err, "unlock after with_lock failed; the lock ends with its lease");
                Ok(output)
            }
            Err(err) => Err(err),
        }
    }

    /// Deletes the lock whoever holds it. See [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.run(|l| async move { l.force_unlock().await })
    }

    /// Whether any owner holds the lock.
    pub fn is_locked(&self) -> Result<bool> {
        self.run(|l| async move { l.is_locked().await })
    }

    /// Whether the calling thread (or the bound owner) holds the lock (Java's
    /// `isHeldByCurrentThread`).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.run(|l| async move { l.is_held_by_current().await })
    }

    /// The calling thread's (or the bound owner's) hold count.
    pub fn hold_count(&self) -> Result<u32> {
        self.run(|l| async move { l.hold_count().await })
    }

    /// The remaining lease. See [`crate::Lock::remaining_lease`].
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.run(|l| async move { l.remaining_lease().await })
    }
}

/// The methods every blocking guard has over the async guard it wraps (`inner`, taken by
/// `unlock`) and the runtime that drives it: the lock, the multi-lock and the RedLock guard.
macro_rules! guard_methods {
    ($inner:ty) => {
        fn get(&self) -> &$inner {
            self.inner.as_ref().expect("guard lives until consumed")
        }

        /// Releases what this guard holds (see the async guard's `unlock`).
        ///
        /// # Panics
        /// If called from inside an async runtime.
        pub fn unlock(mut self) -> crate::Result<()> {
            let inner = self.inner.take().expect("guard lives until consumed");
            self.runtime.block_on(inner.unlock())
        }

        /// `true` once the lock-lost signal fired (see the async guard's `is_lost`).
        pub fn is_lost(&self) -> bool {
            self.get().is_lost()
        }

        /// Blocks until the acquisition is lost, or `timeout` passes; `true` if it was lost.
        pub fn wait_lost(&self, timeout: std::time::Duration) -> bool {
            let lost = self.get().lost();
            self.runtime
                .block_on(async { tokio::time::timeout(timeout, lost).await.is_ok() })
        }

        /// The async guard underneath.
        pub fn as_async(&self) -> &$inner {
            self.get()
        }
    };
}

pub(crate) use guard_methods;

/// A blocking [`crate::LockGuard`]; may be moved to and unlocked from another thread.
#[must_use = "the hold is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct LockGuard {
    inner: Option<crate::LockGuard>,
    runtime: Arc<Runtime>,
}

impl LockGuard {
    guard_methods!(crate::LockGuard);

    /// The owner field in the lock's hash.
    pub fn owner_field(&self) -> String {
        self.get().owner_field()
    }
}
