//! The read-write lock (Redisson `RReadWriteLock`): one name, two [`Lock`]s over the same hash,
//! driven by the read and write halves of `raw/read_write.rs`. Everything a `Lock` does
//! (waiting, leases, the watchdog, the lock-lost signal, owners, re-entry) holds for each half.

use crate::kinds::lock::Lock;
use crate::raw::read_write::{READ_LOCK, WRITE_LOCK};

/// A handle on one named read-write lock, laid out exactly like Redisson's `RReadWriteLock`, so
/// Java readers and writers of the same name share it with this crate's.
///
/// - [`read_lock`](ReadWriteLock::read_lock): any number of owners read at once, while nobody
///   writes.
/// - [`write_lock`](ReadWriteLock::write_lock): one owner writes, while nobody else reads or
///   writes.
///
/// Both halves are reentrant per [`Owner`](crate::Owner). The writer may also take the read
/// lock (a **downgrade**: release the write lock after, and it keeps reading); a reader can
/// never take the write lock (no upgrade: its `lock()` would wait for itself, as in Java).
/// A write unlock wakes every waiter (readers may all enter); the last read unlock wakes one.
/// Neither half hands the lock off locally.
///
/// Each half is a [`Lock`]: its guards, queries ([`Lock::is_locked`] says whether that half
/// holds it, [`Lock::hold_count`] counts that half's holds) and
/// [`Lock::force_unlock`] (deletes the lock only while held in that half's mode) are that
/// half's.
///
/// ```no_run
/// use redisson_lock::Owner;
///
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let doc = client.read_write_lock("doc:7");
/// let a = doc.read_lock().lock().await?;
/// let b = doc.read_lock().lock().await?; // another owner reads beside it
/// assert!(doc.write_lock().try_lock().await?.is_none()); // but nobody writes
/// drop((a, b));
///
/// // Downgrade: write, then read, then let go of the write half.
/// Owner::new().scope(async {
///     let write = doc.write_lock().lock().await?;
///     let read = doc.read_lock().lock().await?;
///     write.unlock().await?; // readers elsewhere are woken; this owner keeps reading
///     read.unlock().await
/// }).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new(lock: Lock) -> Self {
        ReadWriteLock {
            read: lock.clone().of_kind(&READ_LOCK),
            write: lock.of_kind(&WRITE_LOCK),
        }
    }

    /// The read half (Redisson's `readLock()`): shared with other readers, excluded by a
    /// writer other than the owner itself.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let guard = client.read_write_lock("doc:7").read_lock().lock().await?;
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn read_lock(&self) -> Lock {
        self.read.clone()
    }

    /// The write half (Redisson's `writeLock()`): excludes every other owner's reads and
    /// writes.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let guard = client.read_write_lock("doc:7").write_lock().lock().await?;
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn write_lock(&self) -> Lock {
        self.write.clone()
    }

    /// The lock's name, as given.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::LockClient) {
    /// assert_eq!(client.read_write_lock("doc:7").name(), "doc:7");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The same lock, always acquired and queried as `owner` in both halves.
    ///
    /// ```no_run
    /// use redisson_lock::Owner;
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let doc = client.read_write_lock("doc:7").with_owner(Owner::new());
    /// let write = doc.write_lock().lock().await?;
    /// let read = doc.read_lock().lock().await?; // the same owner: a downgrade
    /// # drop((write, read)); Ok(()) }
    /// ```
    pub fn with_owner(self, owner: crate::Owner) -> Self {
        ReadWriteLock {
            read: self.read.with_owner(owner),
            write: self.write.with_owner(owner),
        }
    }
}
