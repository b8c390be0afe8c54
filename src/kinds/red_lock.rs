//! RedLock (Redisson `RedissonRedLock`): one lock over independent Redis servers, held while a
//! majority of its parts is. No keys of its own: a composition of [`Lock`]s, one per server,
//! as the multi-lock, with a quorum instead of all.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::registry::Lease;
use crate::error::{Error, Result};
use crate::kinds::guard::LockGuard;
use crate::kinds::lock::Lock;
use crate::kinds::multi::{distinct_locks, more_lost_than, release_all, round};

/// A majority of `parts`: `N/2 + 1`.
pub(crate) fn quorum_of(parts: usize) -> usize {
    parts / 2 + 1
}

/// The least a part waits in one try (Redisson's 1 ms).
const LEAST_PART_WAIT: Duration = Duration::from_millis(1);

/// A lock over independent servers (Redisson's `RedissonRedLock`): held once a majority of its
/// parts, `N/2 + 1` of `N`, is held, so one server of three may be down. A Redisson RedLock
/// over the same servers and name excludes it and is excluded by it.
///
/// **Deprecated by Redisson (since 3.25.0), and no stronger than its assumptions.** Its
/// safety rests on timing: a holder paused past its lease (a GC pause, a frozen VM), a clock
/// that jumps, or a restarted server that lost a part without persistence lets a second
/// holder in while the first still believes it holds the lock; and it hands out no fencing
/// token, so the protected resource cannot tell the stale holder's writes from the new
/// one's. Prefer a [`FencedLock`](crate::FencedLock) with a store that checks its token (see
/// the README's "Fenced lock"). It is here because fleets run it: ours takes the same parts
/// with Redisson's rules, so both sides exclude each other.
///
/// Each try takes the parts in order, each waiting at most its share of what is left
/// (`left / N`, at least 1 ms); once the failures can no longer leave a majority, it gives
/// back what it took and, if time is left, starts again from the first part. A part whose
/// server does not answer is a failure, not an error.
///
/// ```no_run
/// use redisson_lock::{LockClient, RedLock};
/// # async fn demo(a: LockClient, b: LockClient, c: LockClient) -> redisson_lock::Result<()> {
/// let red = RedLock::new([a.lock("job"), b.lock("job"), c.lock("job")])?;
/// if let Some(guard) = red.try_lock_for(std::time::Duration::from_secs(1)).await? {
///     // ... held while at least 2 of the 3 servers hold it ...
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedLock {
    locks: Vec<Lock>,
}

/// The parts a [`RedLock`] acquisition holds (a majority, at least). Dropping it releases them
/// in the background.
///
/// ```no_run
/// # async fn demo(red: redisson_lock::RedLock) -> redisson_lock::Result<()> {
/// let guard = red.lock().await?;
/// assert!(guard.guards().len() >= red.quorum());
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedGuard {
    guards: Vec<LockGuard>,
    quorum: usize,
}

impl RedLock {
    /// The parts, one lock per independent server, in the order they are taken.
    ///
    /// ```no_run
    /// # fn demo(a: redisson_lock::LockClient, b: redisson_lock::LockClient, c: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let red = redisson_lock::RedLock::new([a.lock("job"), b.lock("job"), c.lock("job")])?;
    /// assert_eq!(red.quorum(), 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no locks, or for one key of one client given twice.
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<RedLock> {
        Ok(RedLock {
            locks: distinct_locks(locks, "RedLock")?,
        })
    }

    /// How many parts make the lock held: `N/2 + 1`.
    ///
    /// ```no_run
    /// # fn demo(red: redisson_lock::RedLock) {
    /// println!("held with {} of {} servers", red.quorum(), red.locks().len());
    /// # }
    /// ```
    pub fn quorum(&self) -> usize {
        quorum_of(self.locks.len())
    }

    /// The parts, in the order they are taken.
    ///
    /// ```no_run
    /// # fn demo(red: redisson_lock::RedLock) {
    /// let names: Vec<&str> = red.locks().iter().map(|l| l.name()).collect();
    /// # }
    /// ```
    pub fn locks(&self) -> &[Lock] {
        &self.locks
    }

    crate::kinds::acquire::acquire_methods!(
        RedGuard,
        "let lock = redisson_lock::RedLock::new([client.lock(\"a\"), client.lock(\"b\"), client.lock(\"c\")])?;",
        "Cancel safe: the parts already taken are released in the background, and the one being \
         acquired leaves no hold behind, as [`Lock::acquire`]. Waiting forever takes a majority \
         in tries of `1.5 s` per part plus a random part, as Redisson's `lock()`."
    );

    async fn acquire_within(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<RedGuard>> {
        let n = self.locks.len();
        let allowed_failures = n - self.quorum();
        loop {
            let window = wait.unwrap_or_else(|| round(n));
            // (A wait too long to represent is a wait without end.)
            let deadline = Instant::now().checked_add(window);
            match self
                .try_window(wait, deadline, lease, allowed_failures)
                .await?
            {
                Some(guard) => return Ok(Some(guard)),
                None if wait.is_some() => return Ok(None),
                None => {}
            }
        }
    }

    /// Tries until `deadline`, starting again from the first part whenever the failures rule
    /// out a majority (a single try without waiting when `wait` is zero).
    async fn try_window(
        &self,
        wait: Option<Duration>,
        deadline: Option<Instant>,
        lease: Lease,
        allowed_failures: usize,
    ) -> Result<Option<RedGuard>> {
        let n = self.locks.len();
        'again: loop {
            let mut guards = Vec::with_capacity(n);
            let mut failures_left = allowed_failures;
            for lock in &self.locks {
                let part_wait = match (wait, deadline) {
                    (Some(Duration::ZERO), _) => Some(Duration::ZERO),
                    (_, Some(deadline)) => {
                        let left = deadline.saturating_duration_since(Instant::now());
                        Some((left / n as u32).max(LEAST_PART_WAIT).min(left))
                    }
                    (_, None) => None,
                };
                match lock.acquire_within(part_wait, lease).await {
                    Ok(Some(guard)) => guards.push(guard),
                    Err(err) if err.is_invalid_input() => {
                        release_all(guards).await;
                        return Err(err);
                    }
                    failed => {
                        if let Err(err) = failed {
                            tracing::debug!(lock = lock.name(), error = %err, "a RedLock part failed");
                        }
                        if n - guards.len() == allowed_failures {
                            // (Redisson's rule: the parts taken are already a majority.)
                            break;
                        }
                        if failures_left == 0 {
                            release_all(guards).await;
                            let time_left = deadline.is_none_or(|d| Instant::now() < d);
                            if wait != Some(Duration::ZERO) && time_left {
                                continue 'again;
                            }
                            return Ok(None);
                        }
                        failures_left -= 1;
                    }
                }
                if deadline.is_some_and(|d| Instant::now() >= d) && wait != Some(Duration::ZERO) {
                    break;
                }
            }
            if guards.len() >= self.quorum() {
                return Ok(Some(RedGuard {
                    guards,
                    quorum: self.quorum(),
                }));
            }
            release_all(guards).await;
            return Ok(None);
        }
    }
}

impl RedGuard {
    /// The guards of the parts held, in the RedLock's order (a majority, at least).
    ///
    /// ```no_run
    /// # async fn demo(red: redisson_lock::RedLock) -> redisson_lock::Result<()> {
    /// let guard = red.lock().await?;
    /// for part in guard.guards() {
    ///     println!("{} held", part.name());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Whether so many parts were lost that the rest are no majority.
    ///
    /// ```no_run
    /// # async fn demo(red: redisson_lock::RedLock) -> redisson_lock::Result<()> {
    /// let guard = red.lock().await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        let held = self.guards.iter().filter(|g| !g.is_lost()).count();
        held < self.quorum
    }

    /// Completes when so many parts are lost that the rest are no majority.
    ///
    /// ```no_run
    /// # async fn demo(red: redisson_lock::RedLock) -> redisson_lock::Result<()> {
    /// # async fn work() {}
    /// let guard = red.lock().await?;
    /// tokio::select! {
    ///     _ = guard.lost() => eprintln!("no majority any more: stop"),
    ///     _ = work() => guard.unlock().await?,
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        more_lost_than(&self.guards, self.guards.len().saturating_sub(self.quorum))
    }

    /// Releases every part held. As Redisson's, a part that cannot be released (its server
    /// down, its lease run out) does not fail the unlock while a majority was released.
    ///
    /// ```no_run
    /// # async fn demo(red: redisson_lock::RedLock) -> redisson_lock::Result<()> {
    /// red.lock().await?.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first part's error when fewer than a majority were released as held: the RedLock
    /// was lost before its unlock.
    ///
    /// # Cancel safety
    /// The parts not yet released when the future is dropped are released in the background.
    pub async fn unlock(self) -> Result<()> {
        let mut released = 0;
        let mut first: Option<Error> = None;
        for guard in self.guards {
            let name = guard.name().to_string();
            match guard.unlock().await {
                Ok(()) => released += 1,
                Err(err) => {
                    tracing::debug!(lock = %name, error = %err, "a RedLock part was not released");
                    first.get_or_insert(err);
                }
            }
        }
        match first {
            Some(err) if released < self.quorum => Err(err),
            _ => Ok(()),
        }
    }
}
