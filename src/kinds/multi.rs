//! The multi-lock (Redisson `RedissonMultiLock`): several locks taken as one, all or none. No
//! keys of its own: a composition of [`Lock`]s, which may belong to different clients (and so
//! to different Redis deployments), each speaking its own protocol.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::engine::registry::Lease;
use crate::error::{Error, Result};
use crate::kinds::guard::LockGuard;
use crate::kinds::lock::Lock;

/// Per lock, the budget of one round of [`MultiLock::lock`] (Redisson's 1500 ms per lock).
const ROUND_PER_LOCK: Duration = Duration::from_millis(1500);

/// Several [`Lock`]s acquired together: a [`MultiGuard`] holds every one of them, or the call
/// holds none. Redisson's `RedissonMultiLock` over the same names excludes it and is excluded
/// by it, since each part is a plain `RLock`.
///
/// The locks are taken in the order given, each waiting at most what is left of the call's
/// wait; when one cannot be had, the ones taken are released before the call returns (or, for
/// [`lock`](MultiLock::lock), before it tries again from the first, after a round of
/// `1.5 s` per lock plus a random part so that two multi-locks taking shared locks in different
/// orders cannot keep refusing each other in step). Prefer one order for the same locks
/// everywhere: it makes those rounds rare.
///
/// ```no_run
/// use redisson_lock::MultiLock;
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let both = MultiLock::new([client.lock("account:1"), client.lock("account:2")])?;
/// let guard = both.lock().await?;
/// // ... move money between the two accounts ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    locks: Vec<Lock>,
}

/// Every hold of a [`MultiLock`] acquisition. Dropping it releases them all in the background.
///
/// ```no_run
/// # async fn demo(both: redisson_lock::MultiLock) -> redisson_lock::Result<()> {
/// let guard = both.lock().await?;
/// assert_eq!(guard.guards().len(), 2);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiLock {
    /// The locks to take together, in this order.
    ///
    /// ```no_run
    /// # fn demo(a: redisson_lock::LockClient, b: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// // Locks of two clients (two deployments) are fine:
    /// let both = redisson_lock::MultiLock::new([a.lock("x"), b.lock("x")])?;
    /// # let _ = both; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no locks, or for one key of one client given twice (the
    /// second would re-enter or wait for the first forever).
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<MultiLock> {
        Ok(MultiLock {
            locks: distinct_locks(locks, "multi-lock")?,
        })
    }

    /// The locks, in the order they are taken.
    ///
    /// ```no_run
    /// # fn demo(both: redisson_lock::MultiLock) {
    /// let names: Vec<&str> = both.locks().iter().map(|l| l.name()).collect();
    /// # }
    /// ```
    pub fn locks(&self) -> &[Lock] {
        &self.locks
    }

    crate::kinds::acquire::acquire_methods!(
        MultiGuard,
        "let lock = redisson_lock::MultiLock::new([client.lock(\"a\"), client.lock(\"b\")])?;",
        "Cancel safe: the locks already taken are released in the background, and the one being \
         acquired leaves no hold behind, as [`Lock::acquire`]."
    );

    /// Whether the current owner holds every one of the locks (Redisson's `isHeldByThread`).
    ///
    /// ```no_run
    /// # async fn demo(both: redisson_lock::MultiLock) -> redisson_lock::Result<()> {
    /// let mine = both.is_held_by_current().await?;
    /// # let _ = mine; Ok(()) }
    /// ```
    pub async fn is_held_by_current(&self) -> Result<bool> {
        for lock in &self.locks {
            if !lock.is_held_by_current().await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn acquire_within(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<MultiGuard>> {
        loop {
            let round = wait.unwrap_or_else(|| round(self.locks.len()));
            // (A wait too long to represent is a wait without end.)
            let deadline = Instant::now().checked_add(round);
            let mut guards = Vec::with_capacity(self.locks.len());
            for lock in &self.locks {
                let left = match (wait, deadline) {
                    (Some(Duration::ZERO), _) => Some(Duration::ZERO),
                    (_, Some(deadline)) => Some(deadline.saturating_duration_since(Instant::now())),
                    (_, None) => None,
                };
                match lock.acquire_within(left, lease).await {
                    Ok(Some(guard)) => guards.push(guard),
                    Ok(None) => break,
                    Err(err) => {
                        release_all(guards).await;
                        return Err(err);
                    }
                }
            }
            if guards.len() == self.locks.len() {
                return Ok(Some(MultiGuard { guards }));
            }
            release_all(guards).await;
            if wait.is_some() {
                return Ok(None);
            }
        }
    }
}

/// One round of an unbounded wait over `locks` locks: 1.5 s per lock, plus up to as much
/// again at random.
pub(crate) fn round(locks: usize) -> Duration {
    let base = ROUND_PER_LOCK * locks as u32;
    base + base.mul_f64(rand::rng().random::<f64>())
}

/// `locks`, refused when empty or when one key of one client is given twice (the second would
/// re-enter or wait for the first forever); `what` names the composition in the error.
pub(crate) fn distinct_locks(
    locks: impl IntoIterator<Item = Lock>,
    what: &str,
) -> Result<Vec<Lock>> {
    let locks: Vec<Lock> = locks.into_iter().collect();
    if locks.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "a {what} needs at least one lock"
        )));
    }
    for (i, lock) in locks.iter().enumerate() {
        let twice = locks[..i]
            .iter()
            .any(|other| other.client_id() == lock.client_id() && other.key() == lock.key());
        if twice {
            return Err(Error::InvalidArgument(format!(
                "lock {:?} is given twice to one {what}",
                lock.name()
            )));
        }
    }
    Ok(locks)
}

/// Completes once more than `can_lose` of `guards` are lost (see [`LockGuard::lost`]).
pub(crate) fn more_lost_than(
    guards: &[LockGuard],
    can_lose: usize,
) -> impl Future<Output = ()> + Send + 'static {
    type Signal = Pin<Box<dyn Future<Output = ()> + Send>>;
    let mut signals: Vec<Option<Signal>> = (guards.iter())
        .map(|g| Some(Box::pin(g.lost()) as Signal))
        .collect();
    let mut lost = 0;
    std::future::poll_fn(move |cx| {
        // Each signal is polled until it fires, then dropped (a finished future is not
        // polled again); those still pending have registered their wakers.
        for slot in signals.iter_mut() {
            if let Some(signal) = slot {
                if signal.as_mut().poll(cx).is_ready() {
                    *slot = None;
                    lost += 1;
                }
            }
        }
        match lost > can_lose {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    })
}

/// Gives back the holds of a round that could not take every lock.
pub(crate) async fn release_all(guards: Vec<LockGuard>) {
    for guard in guards {
        let name = guard.name().to_string();
        if let Err(err) = guard.unlock().await {
            // (The hold ends with its lease: nothing renews it any more.)
            tracing::warn!(lock = %name, error = %err, "a multi-lock could not give back a lock it took");
        }
    }
}

impl MultiGuard {
    /// The guard of each lock, in the multi-lock's order.
    ///
    /// ```no_run
    /// # async fn demo(both: redisson_lock::MultiLock) -> redisson_lock::Result<()> {
    /// let guard = both.lock().await?;
    /// for part in guard.guards() {
    ///     println!("{} held", part.name());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Whether any of the locks was lost.
    ///
    /// ```no_run
    /// # async fn demo(both: redisson_lock::MultiLock) -> redisson_lock::Result<()> {
    /// let guard = both.lock().await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// Completes when any of the locks is lost (see [`LockGuard::lost`]).
    ///
    /// ```no_run
    /// # async fn demo(both: redisson_lock::MultiLock) -> redisson_lock::Result<()> {
    /// # async fn work() {}
    /// let guard = both.lock().await?;
    /// tokio::select! {
    ///     _ = guard.lost() => eprintln!("one of the locks is gone: stop"),
    ///     _ = work() => guard.unlock().await?,
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        more_lost_than(&self.guards, 0)
    }

    /// Releases every hold. All are released even when one fails; the first error is
    /// returned.
    ///
    /// ```no_run
    /// # async fn demo(both: redisson_lock::MultiLock) -> redisson_lock::Result<()> {
    /// both.lock().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`LockGuard::unlock`], for the first lock whose unlock failed.
    ///
    /// # Cancel safety
    /// The holds not yet released when the future is dropped are released in the background.
    pub async fn unlock(self) -> Result<()> {
        let mut first = Ok(());
        for guard in self.guards {
            let result = guard.unlock().await;
            if first.is_ok() {
                first = result;
            }
        }
        first
    }
}
