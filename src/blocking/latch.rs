//! The blocking count-down latch: [`crate::CountDownLatch`] for synchronous code.

use std::sync::Arc;
use std::time::Duration;

use super::Runtime;
use crate::Result;

/// A blocking [`crate::CountDownLatch`] (Redisson's `RCountDownLatch`).
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let ready = client.count_down_latch("shards:ready");
/// ready.try_set_count(2)?;
/// ready.count_down()?;
/// ready.count_down()?;
/// ready.wait()?; // open
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    pub(super) inner: crate::CountDownLatch,
    pub(super) runtime: Arc<Runtime>,
}

impl CountDownLatch {
    /// Sets the count if none is set. See [`crate::CountDownLatch::try_set_count`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let set = client.count_down_latch("ready").try_set_count(3)?;
    /// # let _ = set; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::try_set_count`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.runtime.block_on(self.inner.try_set_count(count))
    }

    /// Counts down by one. See [`crate::CountDownLatch::count_down`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let left = client.count_down_latch("ready").count_down()?;
    /// # let _ = left; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count_down`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn count_down(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.count_down())
    }

    /// The count now. See [`crate::CountDownLatch::count`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let left = client.count_down_latch("ready").count()?;
    /// # let _ = left; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn count(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.count())
    }

    /// Deletes the latch. See [`crate::CountDownLatch::delete`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.count_down_latch("ready").delete()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::delete`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn delete(&self) -> Result<bool> {
        self.runtime.block_on(self.inner.delete())
    }

    /// Blocks until the latch is open. See [`crate::CountDownLatch::wait`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// client.count_down_latch("ready").wait()?;
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::wait`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn wait(&self) -> Result<()> {
        self.runtime.block_on(self.inner.wait())
    }

    /// Blocks at most `wait` for the latch to open: `true` if it did. See
    /// [`crate::CountDownLatch::wait_for`].
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// use std::time::Duration;
    /// let opened = client.count_down_latch("ready").wait_for(Duration::from_secs(5))?;
    /// # let _ = opened; Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::wait`].
    ///
    /// # Panics
    /// If called from inside an async runtime.
    pub fn wait_for(&self, wait: Duration) -> Result<bool> {
        self.runtime.block_on(self.inner.wait_for(wait))
    }

    /// The async latch underneath.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// assert_eq!(client.count_down_latch("ready").as_async().name(), "ready");
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::CountDownLatch {
        &self.inner
    }
}
