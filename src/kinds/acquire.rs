//! One way to ask for a lock: [`Wait`] and [`Lease`](crate::Lease) as values, taken by every
//! kind's `acquire`, and the named conveniences over it (`lock`, `lock_with_lease`,
//! `try_lock`, `try_lock_for`, `try_lock_for_with_lease`), written once here for every async
//! kind ([`acquire_methods!`]) and once for every blocking kind ([`blocking_acquire_methods!`]).
//! A kind provides `acquire_within(wait: Option<Duration>, lease) -> Result<Option<Guard>>`
//! (a blocking kind, `acquire(Wait, Lease)`), and its `# Cancel safety` text.

use std::time::Duration;

use crate::engine::registry::{Lease, MAX_LEASE};
use crate::error::{Error, Result};

/// How long an acquire call may wait for a lock held by someone else.
///
/// ```no_run
/// use std::time::Duration;
/// use redisson_lock::{Lease, Wait};
///
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let lock = client.lock("orders:42");
/// // Redisson's tryLock(2, 10, SECONDS):
/// let wait = Wait::AtMost(Duration::from_secs(2));
/// if let Some(guard) = lock.acquire(wait, Lease::Fixed(Duration::from_secs(10))).await? {
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Wait {
    /// One attempt, no waiting (Redisson's `tryLock()`).
    Never,
    /// At most this long (Redisson's `tryLock(wait, unit)`); `AtMost(Duration::ZERO)` is
    /// [`Wait::Never`].
    AtMost(Duration),
    /// As long as it takes (Redisson's `lock()`): the call ends only with the lock or an error.
    #[default]
    Forever,
}

impl Wait {
    /// `Some(limit)` for a bounded wait, `None` for [`Wait::Forever`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_lock::Wait;
    ///
    /// assert_eq!(Wait::Never.limit(), Some(Duration::ZERO));
    /// assert_eq!(Wait::Forever.limit(), None);
    /// ```
    pub fn limit(self) -> Option<Duration> {
        match self {
            Wait::Never => Some(Duration::ZERO),
            Wait::AtMost(wait) => Some(wait),
            Wait::Forever => None,
        }
    }

    /// A bounded wait of `limit`, or [`Wait::Forever`] for `None` (a command line's
    /// optional `--wait`, say).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_lock::Wait;
    ///
    /// assert_eq!(Wait::from_limit(None), Wait::Forever);
    /// assert_eq!(Wait::from_limit(Some(Duration::ZERO)), Wait::AtMost(Duration::ZERO));
    /// ```
    pub fn from_limit(limit: Option<Duration>) -> Wait {
        limit.map_or(Wait::Forever, Wait::AtMost)
    }
}

/// `lease` if a Redis TTL can carry it: a fixed lease of at least 1 ms and at most 100 years.
pub(crate) fn checked(lease: Lease) -> Result<Lease> {
    match lease {
        Lease::Fixed(d) if d < Duration::from_millis(1) => Err(Error::InvalidArgument(format!(
            "lease must be at least 1 ms, got {d:?}"
        ))),
        Lease::Fixed(d) if d > MAX_LEASE => Err(Error::InvalidArgument(format!(
            "lease {d:?} is longer than the maximum of 100 years"
        ))),
        lease => Ok(lease),
    }
}

/// The acquire family of an async kind: `acquire(Wait, Lease)` over the kind's
/// `acquire_within`, and the five named conveniences over `acquire`, each documented.
///
/// `$guard`: the guard type; `$example`: a statement making `lock`, a handle of the kind,
/// from `client` (a `LockClient`); `$cancel`: the kind's `# Cancel safety` text.
macro_rules! acquire_methods {
    ($guard:ty, $example:literal, $cancel:literal) => {
        /// Acquires the lock, waiting as `wait` says, held for `lease`: the one acquire every
        /// other acquiring method is a shorthand for. `None` when a bounded wait ends without
        /// the lock (never for [`Wait::Forever`](crate::Wait::Forever)).
        ///
        /// [`Lease::Watchdog`](crate::Lease::Watchdog) keeps the lock while the guard lives
        /// (renewed every third of the watchdog timeout); a
        /// [`Lease::Fixed`](crate::Lease::Fixed) lease is never renewed: the lock expires
        /// then unless released first, and the guard's lock-lost signal fires.
        ///
        #[doc = concat!(
            "```no_run\n",
            "use std::time::Duration;\n",
            "use redisson_lock::{Lease, Wait};\n",
            "# async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let wait = Wait::AtMost(Duration::from_secs(2));\n",
            "if let Some(guard) = lock.acquire(wait, Lease::Watchdog).await? {\n",
            "    guard.unlock().await?;\n",
            "}\n",
            "# Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a fixed lease under
        /// 1 ms or over 100 years, before anything is sent;
        /// [`Error::WrongType`](crate::Error::WrongType) if a key holds something else;
        /// [`Error::Connection`](crate::Error::Connection) if Redis cannot be reached for the
        /// first attempt (later connection errors while waiting are retried);
        /// [`Error::Shutdown`](crate::Error::Shutdown) after the client's shutdown.
        ///
        /// # Cancel safety
        #[doc = $cancel]
        pub async fn acquire(
            &self,
            wait: crate::kinds::acquire::Wait,
            lease: crate::engine::registry::Lease,
        ) -> crate::error::Result<Option<$guard>> {
            let lease = crate::kinds::acquire::checked(lease)?;
            self.acquire_within(wait.limit(), lease).await
        }

        /// Acquires the lock, waiting as long as it takes; the watchdog keeps it while held.
        /// Shorthand for `acquire(Wait::Forever, Lease::Watchdog)`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock.lock().await?;\n",
            "guard.unlock().await?;\n",
            "# Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn lock(&self) -> crate::error::Result<$guard> {
            let guard = self
                .acquire(crate::kinds::acquire::Wait::Forever, crate::engine::registry::Lease::Watchdog)
                .await?;
            Ok(guard.expect("an unbounded wait ends only by acquiring"))
        }

        /// Acquires the lock with a fixed `lease` (no watchdog), waiting as long as it takes.
        /// Shorthand for `acquire(Wait::Forever, Lease::Fixed(lease))`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock.lock_with_lease(std::time::Duration::from_secs(10)).await?;\n",
            "# drop(guard); Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn lock_with_lease(&self, lease: std::time::Duration) -> crate::error::Result<$guard> {
            let guard = self
                .acquire(crate::kinds::acquire::Wait::Forever, crate::engine::registry::Lease::Fixed(lease))
                .await?;
            Ok(guard.expect("an unbounded wait ends only by acquiring"))
        }

        /// One attempt, no waiting: `None` if held elsewhere (watchdog-renewed once held).
        /// Shorthand for `acquire(Wait::Never, Lease::Watchdog)`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "if let Some(guard) = lock.try_lock().await? {\n",
            "    guard.unlock().await?;\n",
            "}\n",
            "# Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn try_lock(&self) -> crate::error::Result<Option<$guard>> {
            self.acquire(crate::kinds::acquire::Wait::Never, crate::engine::registry::Lease::Watchdog)
                .await
        }

        /// Waits at most `wait` for the lock (watchdog-renewed once held); `None` on timeout.
        /// Shorthand for `acquire(Wait::AtMost(wait), Lease::Watchdog)`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock.try_lock_for(std::time::Duration::from_secs(1)).await?;\n",
            "# drop(guard); Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn try_lock_for(
            &self,
            wait: std::time::Duration,
        ) -> crate::error::Result<Option<$guard>> {
            self.acquire(crate::kinds::acquire::Wait::AtMost(wait), crate::engine::registry::Lease::Watchdog)
                .await
        }

        /// Waits at most `wait` for the lock, held for a fixed `lease` (no watchdog); `None`
        /// on timeout (Redisson's `tryLock(wait, lease, unit)`). Shorthand for
        /// `acquire(Wait::AtMost(wait), Lease::Fixed(lease))`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "use std::time::Duration;\n",
            "# async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock\n",
            "    .try_lock_for_with_lease(Duration::from_secs(1), Duration::from_secs(5))\n",
            "    .await?;\n",
            "# drop(guard); Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// As [`acquire`](Self::acquire).
        pub async fn try_lock_for_with_lease(
            &self,
            wait: std::time::Duration,
            lease: std::time::Duration,
        ) -> crate::error::Result<Option<$guard>> {
            self.acquire(crate::kinds::acquire::Wait::AtMost(wait), crate::engine::registry::Lease::Fixed(lease))
                .await
        }
    };
}

/// The acquire family of a blocking kind: the five named conveniences over the kind's own
/// `acquire(Wait, Lease)`, each documented. `$example` makes `lock` from `client` (a
/// `blocking::LockClient`).
macro_rules! blocking_acquire_methods {
    ($guard:ty, $example:literal) => {
        /// Blocks until acquired; the watchdog keeps the lock while held. Shorthand for
        /// `acquire(Wait::Forever, Lease::Watchdog)`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# fn demo(client: redisson_lock::blocking::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock.lock()?;\n",
            "guard.unlock()?;\n",
            "# Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Panics
        /// If called from inside an async runtime.
        pub fn lock(&self) -> crate::error::Result<$guard> {
            let guard = self.acquire(crate::kinds::acquire::Wait::Forever, crate::engine::registry::Lease::Watchdog)?;
            Ok(guard.expect("an unbounded wait ends only by acquiring"))
        }

        /// Blocks until acquired, with a fixed `lease` (no watchdog). Shorthand for
        /// `acquire(Wait::Forever, Lease::Fixed(lease))`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# fn demo(client: redisson_lock::blocking::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock.lock_with_lease(std::time::Duration::from_secs(10))?;\n",
            "# drop(guard); Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Panics
        /// If called from inside an async runtime.
        pub fn lock_with_lease(&self, lease: std::time::Duration) -> crate::error::Result<$guard> {
            let guard = self.acquire(crate::kinds::acquire::Wait::Forever, crate::engine::registry::Lease::Fixed(lease))?;
            Ok(guard.expect("an unbounded wait ends only by acquiring"))
        }

        /// One attempt, no waiting: `None` if held elsewhere. Shorthand for
        /// `acquire(Wait::Never, Lease::Watchdog)`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# fn demo(client: redisson_lock::blocking::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "if let Some(guard) = lock.try_lock()? {\n",
            "    guard.unlock()?;\n",
            "}\n",
            "# Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Panics
        /// If called from inside an async runtime.
        pub fn try_lock(&self) -> crate::error::Result<Option<$guard>> {
            self.acquire(crate::kinds::acquire::Wait::Never, crate::engine::registry::Lease::Watchdog)
        }

        /// Blocks at most `wait` for the lock; `None` on timeout. Shorthand for
        /// `acquire(Wait::AtMost(wait), Lease::Watchdog)`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "# fn demo(client: redisson_lock::blocking::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock.try_lock_for(std::time::Duration::from_secs(1))?;\n",
            "# drop(guard); Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Panics
        /// If called from inside an async runtime.
        pub fn try_lock_for(&self, wait: std::time::Duration) -> crate::error::Result<Option<$guard>> {
            self.acquire(crate::kinds::acquire::Wait::AtMost(wait), crate::engine::registry::Lease::Watchdog)
        }

        /// Blocks at most `wait` for the lock, held for a fixed `lease`; `None` on timeout.
        /// Shorthand for `acquire(Wait::AtMost(wait), Lease::Fixed(lease))`.
        ///
        #[doc = concat!(
            "```no_run\n",
            "use std::time::Duration;\n",
            "# fn demo(client: redisson_lock::blocking::LockClient) -> redisson_lock::Result<()> {\n",
            $example, "\n",
            "let guard = lock.try_lock_for_with_lease(Duration::from_secs(1), Duration::from_secs(5))?;\n",
            "# drop(guard); Ok(()) }\n",
            "```"
        )]
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Panics
        /// If called from inside an async runtime.
        pub fn try_lock_for_with_lease(
            &self,
            wait: std::time::Duration,
            lease: std::time::Duration,
        ) -> crate::error::Result<Option<$guard>> {
            self.acquire(crate::kinds::acquire::Wait::AtMost(wait), crate::engine::registry::Lease::Fixed(lease))
        }
    };
}

pub(crate) use {acquire_methods, blocking_acquire_methods};
