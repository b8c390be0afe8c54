//! The blocking compositions: [`crate::MultiLock`] and [`crate::RedLock`] for synchronous
//! code, over blocking [`Lock`]s (of one client or of several), the parts' owner being the
//! calling thread's (or the one each part is bound to).

use std::sync::Arc;

use super::{Lock, Runtime};
use crate::Result;

/// A blocking [`crate::MultiLock`]: every lock or none.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// use redisson_lock::blocking::MultiLock;
/// let both = MultiLock::new([client.lock("account:1"), client.lock("account:2")])?;
/// let guard = both.lock()?;
/// guard.unlock()?;
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    parts: Vec<Lock>,
    runtime: Arc<Runtime>,
}

/// A blocking [`crate::MultiGuard`]: every hold of one acquisition.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// # let both = redisson_lock::blocking::MultiLock::new([client.lock("a"), client.lock("b")])?;
/// let guard = both.lock()?;
/// assert!(!guard.is_lost());
/// guard.unlock()?;
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[must_use = "the holds are released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct MultiGuard {
    inner: Option<crate::MultiGuard>,
    runtime: Arc<Runtime>,
}

/// A blocking [`crate::RedLock`]: held with a majority of independent servers. Deprecated by
/// Redisson, and why: see [`crate::RedLock`].
///
/// ```no_run
/// # let (a, b, c) = (redisson_lock::blocking::LockClient::connect("redis://10.0.0.1")?,
/// #     redisson_lock::blocking::LockClient::connect("redis://10.0.0.2")?,
/// #     redisson_lock::blocking::LockClient::connect("redis://10.0.0.3")?);
/// use redisson_lock::blocking::RedLock;
/// let red = RedLock::new([a.lock("job"), b.lock("job"), c.lock("job")])?;
/// if let Some(guard) = red.try_lock_for(std::time::Duration::from_secs(1))? {
///     guard.unlock()?;
/// }
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct RedLock {
    parts: Vec<Lock>,
    runtime: Arc<Runtime>,
}

/// A blocking [`crate::RedGuard`]: the parts one acquisition holds.
///
/// ```no_run
/// # fn demo(red: redisson_lock::blocking::RedLock) -> redisson_lock::Result<()> {
/// let guard = red.lock()?;
/// assert!(!guard.is_lost());
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[must_use = "the holds are released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct RedGuard {
    inner: Option<crate::RedGuard>,
    runtime: Arc<Runtime>,
}

/// The parts as async locks, each operated by its owner as of now (the calling thread's, or
/// its bound one), and the first part's runtime to drive them on.
fn async_parts(parts: &[Lock]) -> Vec<crate::Lock> {
    (parts.iter())
        .map(|l| l.inner.clone().with_owner(l.owner()))
        .collect()
}

fn runtime_of(parts: &[Lock]) -> Result<Arc<Runtime>> {
    match parts.first() {
        Some(first) => Ok(first.runtime.clone()),
        None => Err(crate::Error::InvalidArgument(
            "a multi-lock needs at least one lock".into(),
        )),
    }
}

/// The acquire methods both compositions share, each blocking the calling thread.
macro_rules! acquire_methods {
    ($async:ty, $guard:ident, $example:literal) => {
        fn run<T>(&self, op: impl AsyncFnOnce($async) -> Result<T>) -> Result<T> {
            let inner = <$async>::new(async_parts(&self.parts))?;
            self.runtime.block_on(op(inner))
        }

        fn guard(&self, inner: <$guard as Wrap>::Inner) -> $guard {
            $guard {
                inner: Some(inner),
                runtime: self.runtime.clone(),
            }
        }

        /// Acquires every part (a majority, for a RedLock), blocking as `wait` says, each
        /// held for `lease`; `None` (and nothing held) when a bounded wait ends without them.
        /// See the async kind's `acquire`.
        ///
        /// # Errors
        /// As the async kind's `acquire`.
        ///
        /// # Panics
        /// If called from inside an async runtime.
        pub fn acquire(&self, wait: crate::Wait, lease: crate::Lease) -> Result<Option<$guard>> {
            let g = self.run(async |l| l.acquire(wait, lease).await)?;
            Ok(g.map(|g| self.guard(g)))
        }

        crate::kinds::acquire::blocking_acquire_methods!($guard, $example);
    };
}

/// Which async guard a blocking guard wraps.
trait Wrap {
    type Inner;
}

impl Wrap for MultiGuard {
    type Inner = crate::MultiGuard;
}

impl Wrap for RedGuard {
    type Inner = crate::RedGuard;
}

impl MultiLock {
    /// The locks to take together, in this order (see [`crate::MultiLock::new`]).
    ///
    /// # Errors
    /// As [`crate::MultiLock::new`].
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<MultiLock> {
        let parts: Vec<Lock> = locks.into_iter().collect();
        let runtime = runtime_of(&parts)?;
        crate::MultiLock::new(async_parts(&parts))?;
        Ok(MultiLock { parts, runtime })
    }

    acquire_methods!(
        crate::MultiLock,
        MultiGuard,
        "let lock = redisson_lock::blocking::MultiLock::new([client.lock(\"a\"), client.lock(\"b\")])?;"
    );
}

impl RedLock {
    /// The parts, one lock per independent server (see [`crate::RedLock::new`]).
    ///
    /// # Errors
    /// As [`crate::RedLock::new`].
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<RedLock> {
        let parts: Vec<Lock> = locks.into_iter().collect();
        let runtime = runtime_of(&parts)?;
        crate::RedLock::new(async_parts(&parts))?;
        Ok(RedLock { parts, runtime })
    }

    /// How many parts make the lock held: `N/2 + 1`.
    pub fn quorum(&self) -> usize {
        crate::kinds::red_lock::quorum_of(self.parts.len())
    }

    acquire_methods!(
        crate::RedLock,
        RedGuard,
        "let lock = redisson_lock::blocking::RedLock::new([client.lock(\"a\"), client.lock(\"b\"), client.lock(\"c\")])?;"
    );
}

impl MultiGuard {
    super::guard_methods!(crate::MultiGuard);
}

impl RedGuard {
    super::guard_methods!(crate::RedGuard);
}
