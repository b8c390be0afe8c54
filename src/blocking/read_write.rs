//! The blocking read-write lock: two blocking [`Lock`]s over one name.

use super::Lock;

/// A blocking [`crate::ReadWriteLock`]: shared reads, exclusive writes; each half is a blocking
/// [`Lock`] whose owner is the calling thread.
///
/// ```no_run
/// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
/// let doc = client.read_write_lock("doc:7");
/// let write = doc.write_lock().lock()?;
/// let read = doc.read_lock().lock()?; // this thread writes, so it may read: a downgrade
/// write.unlock()?;
/// read.unlock()?;
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    pub(super) read: Lock,
    pub(super) write: Lock,
}

impl ReadWriteLock {
    /// The read half.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let guard = client.read_write_lock("doc:7").read_lock().lock()?;
    /// # drop(guard); Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn read_lock(&self) -> Lock {
        self.read.clone()
    }

    /// The write half.
    ///
    /// ```no_run
    /// # let client = redisson_lock::blocking::LockClient::connect("redis://127.0.0.1:6379")?;
    /// let guard = client.read_write_lock("doc:7").write_lock().lock()?;
    /// # drop(guard); Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn write_lock(&self) -> Lock {
        self.write.clone()
    }
}
