//! The distributed count-down latch (Redisson `RCountDownLatch`): a count in one key, shared
//! with Java services; waiters wait for it to reach zero.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::kinds::lock::Lock;
use crate::names;
use crate::raw::latch;

/// Longest a waiter sleeps between looks at the count, should a message be missed.
const MAX_BLIND_WAIT: Duration = Duration::from_secs(1);

/// A handle on one named count-down latch, laid out exactly like Redisson's `RCountDownLatch`
/// ([`LockClient::count_down_latch`](crate::LockClient::count_down_latch)): the key holds the
/// count, deleted when it reaches zero; Java and Rust services count it down and wait on it
/// alike.
///
/// A waiter subscribes to the latch's channel and is woken by the count-down that opens it
/// (or by a new count, or the latch deleted: it looks again), with a one-second fallback
/// should the message be missed. A latch whose key does not exist is open.
///
/// A count-down is exactly-once: re-sent after a lost answer, it counts once (a request latch
/// beside the count, which Java never reads).
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let ready = client.count_down_latch("shards:ready");
/// ready.try_set_count(3).await?;            // only if none is set
/// // ... in each of three workers, Java or Rust:
/// ready.count_down().await?;
/// // ... and where the work goes on:
/// if ready.wait_for(Duration::from_secs(30)).await? {
///     println!("every shard is ready");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    lock: Lock,
}

impl CountDownLatch {
    pub(crate) fn new(lock: Lock) -> Self {
        CountDownLatch { lock }
    }

    /// The latch's name, as given.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::LockClient) {
    /// assert_eq!(client.count_down_latch("ready").name(), "ready");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Sets the count if the latch has none (Redisson's `trySetCount`), telling its waiters:
    /// `true` if set, `false` if a count was set already (nothing changed).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let set = client.count_down_latch("ready").try_set_count(3).await?;
    /// # let _ = set; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a count of 0 (a latch of 0 is an open one: it has no
    /// key); [`Error::Connection`] if Redis cannot be reached (not re-sent: a second send
    /// would answer `false` for the first's success).
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 {
            return Err(Error::InvalidArgument(
                "a count-down latch is set to a count of at least 1".into(),
            ));
        }
        self.check()?;
        latch::try_set(
            self.lock.protocol(),
            self.lock.key(),
            &self.channel(),
            count,
        )
        .await
        .map_err(|e| self.error(e))
    }

    /// Counts the latch down by one (Redisson's `countDown`) and returns the count after it:
    /// 0 when this count-down opened it (its waiters are woken), below 0 if it was open
    /// already (nothing changes then).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let left = client.count_down_latch("ready").count_down().await?;
    /// # let _ = left; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds something else than a count;
    /// [`Error::Connection`] if no answer came after re-sending it (same request latch: it
    /// counts once).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped mid-flight, the count-down may or may not have happened
    /// (never twice).
    pub async fn count_down(&self) -> Result<i64> {
        self.check()?;
        let core = &self.lock.engine().core;
        let (protocol, key, channel) = (&core.protocol, self.lock.key(), &self.channel());
        let sent = core
            .latches
            .send_once(&core.protocol, key, |request| async move {
                latch::count_down(protocol, key, channel, &request).await
            });
        sent.await.map_err(|e| self.error(e))
    }

    /// The count now (Redisson's `getCount`; 0 once open).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// println!("{} to go", client.count_down_latch("ready").count().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds something else; [`Error::Connection`].
    pub async fn count(&self) -> Result<i64> {
        self.check()?;
        let count = latch::count(self.lock.protocol(), self.lock.key()).await;
        count.map_err(|e| self.error(e))
    }

    /// Deletes the latch (Redisson's `delete`), telling its waiters: `true` if it existed. A
    /// deleted latch is open.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// client.count_down_latch("ready").delete().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Connection`] if Redis cannot be reached.
    pub async fn delete(&self) -> Result<bool> {
        self.check()?;
        latch::delete(self.lock.protocol(), self.lock.key(), &self.channel())
            .await
            .map_err(|e| self.error(e))
    }

    /// Waits until the latch is open (its count reached zero, or it does not exist).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// client.count_down_latch("ready").wait().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds something else; [`Error::Connection`] if the
    /// count cannot be read; [`Error::Shutdown`] if the client shuts down meanwhile.
    ///
    /// # Cancel safety
    /// Cancel safe: waiting takes nothing.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(None).await.map(drop)
    }

    /// Waits at most `wait` for the latch to open: `true` if it did.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let opened = client.count_down_latch("ready").wait_for(Duration::from_secs(5)).await?;
    /// # let _ = opened; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`wait`](CountDownLatch::wait).
    ///
    /// # Cancel safety
    /// Cancel safe: waiting takes nothing.
    pub async fn wait_for(&self, wait: Duration) -> Result<bool> {
        self.wait_until(Instant::now().checked_add(wait)).await
    }

    /// Looks at the count, then (while it is above zero) subscribes and looks again at each
    /// message, and at least every second, until it is zero or `deadline` passes.
    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        if self.count().await? <= 0 {
            return Ok(true);
        }
        let engine = self.lock.engine();
        let channel = self.channel();
        let subscribe = engine.core.hub.subscribe(&channel, latch::latch_message);
        let subscription = match deadline {
            None => subscribe.await,
            Some(deadline) => match crate::sync::time::timeout_at(deadline, subscribe).await {
                Ok(subscription) => subscription,
                Err(_) => return Ok(self.count().await? <= 0),
            },
        };
        loop {
            // Armed before the look: a message during it is not missed.
            let notified = subscription.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count().await? <= 0 {
                return Ok(true);
            }
            let mut sleep = MAX_BLIND_WAIT;
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                sleep = sleep.min(left);
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = crate::sync::time::sleep(sleep) => {}
            }
            engine.check_open()?;
        }
    }

    fn channel(&self) -> String {
        names::latch_channel(self.lock.key())
    }

    /// The handle is usable and, on a cluster, the latch's channel and request latches share
    /// its key's slot.
    fn check(&self) -> Result<()> {
        let key = self.lock.key();
        (self.lock)
            .check_with(|sample_id| vec![self.channel(), names::unlock_latch(key, sample_id)])
    }

    fn error(&self, err: redis::RedisError) -> Error {
        Error::from_redis(self.name(), err)
    }
}
