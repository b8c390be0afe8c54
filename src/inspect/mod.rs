//! Looking at locks without touching them: what Redis holds under a lock's name
//! ([`LockClient::inspect`](crate::LockClient::inspect)), every lock matching a pattern
//! ([`LockClient::scan`](crate::LockClient::scan)), and who the holders are
//! ([`ClientName`]: the name each client gives its connections). `rlock status` and
//! `rlock top` are views of it.
//!
//! Everything here reads; nothing writes. The work per call is bounded (`SCAN` with a
//! `COUNT`, never `KEYS`; a lock's fields, queue and deadlines read up to a limit), so it is
//! safe against a production server. Any Redisson lock is recognised, whoever wrote it.

mod clients;
mod read;
mod scan;
mod stats;

pub use clients::ClientName;
pub(crate) use read::inspect;
pub use scan::Scan;
pub(crate) use stats::server_stats;
pub use stats::{ReplicaSyncState, ServerStats};

/// Whether a lock's key holds a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// No key: nobody holds the lock.
    Free,
    /// A hash: held by the holders listed.
    Held,
    /// A string holding an integer: a count of Redisson's synchronizers (a semaphore's
    /// permits available, a count-down latch's count), not a lock one holds.
    Count,
    /// The key holds another type of value: not a lock.
    NotALock,
}

impl LockState {
    /// `free`, `held`, `count` or `not_a_lock`.
    ///
    /// ```
    /// assert_eq!(redisson_lock::inspect::LockState::Held.as_str(), "held");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LockState::Free => "free",
            LockState::Held => "held",
            LockState::Count => "count",
            LockState::NotALock => "not_a_lock",
        }
    }
}

/// Which of Redisson's layouts a lock's keys show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// `RLock`: a hash of `<client id>:<owner id>` fields.
    Lock,
    /// `RFencedLock`: the same hash, and a token counter beside it.
    Fenced,
    /// `RReadWriteLock`: a hash with a `mode` field.
    ReadWrite,
    /// `RFairLock`: the same hash as `RLock`, and a queue and deadlines beside it.
    Fair,
    /// `RSemaphore` or `RCountDownLatch`: a string count (the two layouts are the same; only
    /// the channel their users listen on differs).
    Count,
    /// `RPermitExpirableSemaphore`: a string count, and the permits taken listed beside it.
    PermitSemaphore,
}

impl LockKind {
    /// `lock`, `fenced`, `read_write`, `fair`, `count` or `permit_semaphore`.
    ///
    /// ```
    /// assert_eq!(redisson_lock::inspect::LockKind::ReadWrite.as_str(), "read_write");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Lock => "lock",
            LockKind::Fenced => "fenced",
            LockKind::ReadWrite => "read_write",
            LockKind::Fair => "fair",
            LockKind::Count => "count",
            LockKind::PermitSemaphore => "permit_semaphore",
        }
    }

    /// The kind in words, with its Redisson name.
    ///
    /// ```
    /// use redisson_lock::inspect::LockKind;
    /// assert_eq!(LockKind::Lock.describe(), "reentrant lock (Redisson RLock)");
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            LockKind::Lock => "reentrant lock (Redisson RLock)",
            LockKind::Fenced => "fenced lock (Redisson RFencedLock)",
            LockKind::ReadWrite => "read-write lock (Redisson RReadWriteLock)",
            LockKind::Fair => "fair lock (Redisson RFairLock)",
            LockKind::Count => {
                "semaphore or count-down latch (Redisson RSemaphore / RCountDownLatch)"
            }
            LockKind::PermitSemaphore => {
                "semaphore with expiring permits (Redisson RPermitExpirableSemaphore)"
            }
        }
    }
}

/// One holder of a lock: a field of its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The hash field, `<client id>:<owner id>` (`:write` after it for a writer).
    pub field: String,
    /// The client part of the field: a Redisson client's or a [`LockClient`]'s id.
    ///
    /// [`LockClient`]: crate::LockClient
    pub client_id: Option<String>,
    /// The owner part (Java's thread id, an [`Owner`](crate::Owner)'s id).
    pub owner_id: Option<i64>,
    /// The hold count (re-entries), the field's value.
    pub holds: Option<i64>,
    /// `Some("read")` or `Some("write")` on a read-write lock.
    pub mode: Option<&'static str>,
    /// The client's host, process and address, when it names its connections (every
    /// [`LockClient`](crate::LockClient) does) and the server lets us list them.
    pub client: Option<ClientName>,
}

/// An owner waiting in a fair lock's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The waiter's owner field.
    pub field: String,
    /// When it gives up its place (epoch ms, from the deadlines), if listed there.
    pub deadline_ms: Option<i64>,
}

/// One permit taken from a semaphore with expiring permits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitTaken {
    /// The permit's id, as Redisson's Java API shows it (32 hex digits).
    pub id: String,
    /// When it expires (ms since the epoch, in the acquiring client's clock); `None` for a
    /// permit taken without a lease (Redisson's `acquire()`: it never expires).
    pub expires_ms: Option<i64>,
}

/// What Redis holds under one lock's name: a snapshot, read in one call.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let info = client.inspect("orders:42").await?;
/// for holder in &info.holders {
///     println!("{:?} holds it {:?} times", holder.client, holder.holds);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The lock's name.
    pub name: String,
    /// Its key (the name with the client's key prefix).
    pub key: String,
    /// Free, held or not a lock.
    pub state: LockState,
    /// The layout recognised (`None` when nothing identifies one).
    pub kind: Option<LockKind>,
    /// The key's Redis type (`hash`, `none`, `string`, ...).
    pub redis_type: String,
    /// A read-write lock's `mode` field (`read`, `write`).
    pub mode: Option<String>,
    /// The holders, by field. Empty for a hash too large to be a lock (not read).
    pub holders: Vec<Holder>,
    /// The key's `PTTL` in ms while held: the lease left, `-1` for a key without a TTL
    /// (never written so by Redisson).
    pub lease_left_ms: Option<i64>,
    /// The clients waiting for the lock: subscribers of its channel (classic and sharded,
    /// at the nodes asked), less the holders' clients that listen for their loss (named
    /// `:watch`). One per client, however many of its tasks wait; a client that holds the
    /// lock, listens, and has a task waiting for it too counts none. `None` when the server
    /// refused to say.
    pub waiters: Option<u64>,
    /// A fair lock's queue, first in line first (waiters only in the deadlines after them).
    pub queue: Vec<Queued>,
    /// A fenced lock's last token handed out.
    pub fencing_token: Option<i64>,
    /// A semaphore's permits available, or a latch's count ([`LockState::Count`]).
    pub count: Option<i64>,
    /// A semaphore with expiring permits: the permits taken (at most 64 listed, earliest
    /// expiry first), and how many there are.
    pub permits: Vec<PermitTaken>,
    /// How many permits are taken, where the semaphore lists them.
    pub permits_taken: Option<u64>,
    /// The master serving the key (`host:port`), on a cluster or through Sentinel.
    pub node: Option<String>,
    /// The key's slot, on a cluster.
    pub slot: Option<u16>,
}

/// The most fields, queue entries and deadlines read of one lock: a lock has a handful, so
/// a larger hash is something else, and its reading is not worth the server's time.
pub(crate) const READ_LIMIT: usize = 64;
