//! The crate's single error type.

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with a lock operation.
///
/// Callers rarely need to match on variants: the `is_*` helpers classify an error the way a
/// retry loop or a log line wants it.
///
/// ```
/// use redisson_lock::Error;
///
/// let err = Error::NotOwner { lock: "orders".into(), owner: "6f1c...:7".into() };
/// assert!(err.is_not_owner());
/// assert!(!err.is_connection());
/// assert_eq!(
///     err.to_string(),
///     "lock `orders` is not held by owner 6f1c...:7"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An unlock was attempted by an owner that does not hold the lock (Redisson's
    /// `IllegalMonitorStateException`). Nothing was changed in Redis.
    #[error("lock `{lock}` is not held by owner {owner}")]
    NotOwner {
        /// The lock's name.
        lock: String,
        /// The owner field (`<client-uuid>:<owner-id>`) that tried to unlock.
        owner: String,
    },

    /// The guard's hold was already gone (renewal found the lock deleted, its lease ran out, or
    /// the client shut down) before it was unlocked. Nothing was changed in Redis.
    #[error("lock `{lock}` was lost before it was unlocked (owner {owner})")]
    LockLost {
        /// The lock's name.
        lock: String,
        /// The owner field that held it.
        owner: String,
    },

    /// The holder of a non-reentrant lock tried to acquire it again (Redisson's
    /// `NON_REENTRANT_REACQUIRE`, its `IllegalMonitorStateException`). Nothing was changed.
    #[error("lock `{lock}` is non-reentrant and is already held by this owner")]
    NonReentrant {
        /// The lock's name.
        lock: String,
    },

    /// The key exists but holds something else than the primitive keeps there: not a lock
    /// hash (Redis `WRONGTYPE`), not a count (a semaphore's permits, a latch's count, a
    /// fenced lock's token counter that is no integer). Nothing was changed.
    #[error("key `{lock}` holds a value of another type than this lock or semaphore keeps")]
    WrongType {
        /// The lock's name.
        lock: String,
    },

    /// An argument was refused before anything was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// On a cluster, a lock name whose derived keys (its channel, its latches) would hash to
    /// another slot than the lock's key, so no script could touch them together (Redisson
    /// fails such names with `CROSSSLOT` when it first runs one). Refused before anything is
    /// sent. It happens when the name has a `{` that opens no hash tag (no `}` after it, or
    /// `{}`); a standalone server accepts such names, as Redisson does.
    ///
    /// ```
    /// let err = redisson_lock::Error::CrossSlot {
    ///     lock: "bad{".into(),
    ///     key_slot: 1,
    ///     derived: "redisson_lock__channel:bad{".into(),
    ///     derived_slot: 2,
    /// };
    /// assert!(err.is_invalid_input());
    /// assert!(err.to_string().contains("slot 1"));
    /// ```
    #[error(
        "lock `{lock}` cannot be used on a cluster: its key is in slot {key_slot} but `{derived}` is in slot {derived_slot} (a `{{` in the name that opens no hash tag)"
    )]
    CrossSlot {
        /// The lock's name.
        lock: String,
        /// The slot of the lock's key.
        key_slot: u16,
        /// A key or channel derived from the name.
        derived: String,
        /// The slot `derived` hashes to.
        derived_slot: u16,
    },

    /// No replica of the master acknowledged a lock write within the replica sync timeout
    /// ([`Config::with_replica_sync`](crate::Config::with_replica_sync); Redisson's
    /// `NoSyncedSlavesException`), so a failover could lose it. For an acquire, the hold it
    /// took has been released again: the caller does not hold the lock.
    ///
    /// ```
    /// use std::time::Duration;
    /// let err = redisson_lock::Error::NotReplicated {
    ///     lock: "orders".into(),
    ///     replicas: 2,
    ///     timeout: Duration::from_secs(1),
    /// };
    /// assert!(err.is_not_replicated());
    /// assert!(err.to_string().contains("none of the master's 2 replicas"));
    /// ```
    #[error(
        "lock `{lock}`: none of the master's {replicas} replicas acknowledged the write within {timeout:?}, so a failover could lose it, and the acquire was undone (Redisson: NoSyncedSlavesException); raise Config::with_replica_sync, or turn it off with with_replica_sync(None) if losing locks to a failover is acceptable"
    )]
    NotReplicated {
        /// The lock's name.
        lock: String,
        /// Replicas the master had connected.
        replicas: u32,
        /// How long the write waited for them.
        timeout: std::time::Duration,
    },

    /// The configuration or URL is not usable.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// The server lacks a command the configured mode needs (e.g. `SPUBLISH` for
    /// [`PublishMode::SPublish`](crate::PublishMode::SPublish) on Redis 6). Refused at connect,
    /// before any lock is touched.
    #[error("the server has no `{command}` command, which {needed_by} needs")]
    Unsupported {
        /// The missing command, as Redis spells it (`SPUBLISH`).
        command: String,
        /// What needs it, and what to do instead.
        needed_by: String,
    },

    /// The client was shut down; no further operations are possible.
    #[error("the lock client has been shut down")]
    Shutdown,

    /// Redis could not be reached, the connection dropped, or a reply timed out.
    #[error("connection to redis failed: {0}")]
    Connection(#[source] redis::RedisError),

    /// Redis refused the credentials (wrong user or password, or no `AUTH` given). The
    /// password never appears in this error.
    #[error("redis refused the login: {0}")]
    Authentication(#[source] redis::RedisError),

    /// Redis answered with an error this crate does not classify further.
    #[error("redis error: {0}")]
    Redis(#[source] redis::RedisError),
}

impl Error {
    /// The unlock was refused because the lock is not held by this owner.
    pub fn is_not_owner(&self) -> bool {
        matches!(self, Error::NotOwner { .. })
    }

    /// The guard's lock had been lost before the operation.
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, Error::LockLost { .. })
    }

    /// No replica acknowledged the lock write in time ([`Error::NotReplicated`]).
    pub fn is_not_replicated(&self) -> bool {
        matches!(self, Error::NotReplicated { .. })
    }

    /// Whether a non-reentrant lock's holder tried to acquire it again.
    ///
    /// ```
    /// let err = redisson_lock::Error::NonReentrant { lock: "once".into() };
    /// assert!(err.is_non_reentrant());
    /// ```
    pub fn is_non_reentrant(&self) -> bool {
        matches!(self, Error::NonReentrant { .. })
    }

    /// The key holds something that is not a lock.
    pub fn is_wrong_type(&self) -> bool {
        matches!(self, Error::WrongType { .. })
    }

    /// The caller passed an invalid argument or configuration.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidArgument(_) | Error::Config(_) | Error::CrossSlot { .. }
        )
    }

    /// The server lacks a command the configuration needs (see [`Error::Unsupported`]).
    ///
    /// ```
    /// use redisson_lock::Error;
    ///
    /// let err = Error::Unsupported { command: "SPUBLISH".into(), needed_by: "sharded pub/sub".into() };
    /// assert!(err.is_unsupported());
    /// assert!(err.to_string().contains("SPUBLISH"));
    /// ```
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Error::Unsupported { .. })
    }

    /// A network or connection failure: the operation may succeed if retried.
    pub fn is_connection(&self) -> bool {
        match self {
            Error::Connection(_) => true,
            Error::Redis(e) => is_transient(e),
            _ => false,
        }
    }

    /// A reply did not arrive in time.
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Connection(e) | Error::Redis(e) => e.is_timeout(),
            _ => false,
        }
    }

    /// Redis refused the login.
    pub fn is_authentication(&self) -> bool {
        matches!(self, Error::Authentication(_))
    }

    /// The client was shut down.
    pub fn is_shutdown(&self) -> bool {
        matches!(self, Error::Shutdown)
    }

    /// Redis refused a write because it is out of memory (`maxmemory` with `noeviction`).
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            Error::Redis(e) => has_code(e, "OOM"),
            _ => false,
        }
    }

    /// Builds the error for a Redis failure on lock `lock`, classifying it.
    pub(crate) fn from_redis(lock: &str, err: redis::RedisError) -> Self {
        // An answer that does not read as what the primitive keeps there (a counter that is
        // no integer): the key holds something else.
        if err.kind() == redis::ErrorKind::Parse {
            return Error::WrongType {
                lock: lock.to_string(),
            };
        }
        if is_transient(&err) {
            return Error::Connection(err);
        }
        if has_code(&err, "NON_REENTRANT_REACQUIRE") {
            return Error::NonReentrant {
                lock: lock.to_string(),
            };
        }
        if has_code(&err, "WRONGTYPE") || has_code(&err, "NOT_A_COUNT") {
            return Error::WrongType {
                lock: lock.to_string(),
            };
        }
        Error::Redis(err)
    }
}

/// Whether sending the command again is the way on: its answer was lost (see
/// [`outcome_unknown`]), or redis-rs's [`retry_method`](redis::RedisError::retry_method) says the
/// server will take it later or elsewhere (`LOADING`, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`,
/// `READONLY`, `MOVED`, `ASK`), or the connection must be made again. Every command this crate
/// re-sends is idempotent (a latch, or a read), so re-sending is exact.
pub(crate) fn is_transient(err: &redis::RedisError) -> bool {
    use redis::RetryMethod;
    if err.kind() == redis::ErrorKind::AuthenticationFailed {
        return false; // (redis-rs would reconnect; wrong credentials stay wrong)
    }
    if err.kind() == redis::ErrorKind::Parse {
        // redis-rs would reconnect, but its value conversions fail with this kind too: an
        // answer came, of another shape (a counter that is no integer), and a re-send
        // would read the same.
        return false;
    }
    err.is_timeout()
        || err.is_connection_refusal()
        // (Redis 6 wraps a replica's READONLY inside a script's `ERR Error running script`.)
        || has_code(err, "READONLY")
        || matches!(
            err.retry_method(),
            RetryMethod::Reconnect
                | RetryMethod::RetryImmediately
                | RetryMethod::WaitAndRetry
                | RetryMethod::MovedRedirect
                | RetryMethod::AskRedirect
                | RetryMethod::ReconnectFromInitialConnections
                | RetryMethod::RefreshSlotsAndRetry
        )
}

/// Whether the command may have run although no answer came: it was written to a connection
/// that then broke or timed out. (A refused connection never carried it, and a server error
/// is an answer: the command did not run.)
pub(crate) fn outcome_unknown(err: &redis::RedisError) -> bool {
    err.is_timeout()
        || (err.kind() == redis::ErrorKind::Io && !err.is_connection_refusal())
        || err.is_connection_dropped()
}

/// Whether the server answered with error `code`. Redis 6 wraps an error raised inside a
/// script as `ERR Error running script ...: @user_script:17: <CODE> ...` (or `-<CODE>`), so
/// the code is looked for there too.
pub(crate) fn has_code(err: &redis::RedisError, code: &str) -> bool {
    match err.code() {
        Some(c) if c == code => true,
        Some("ERR") => err.detail().is_some_and(|d| {
            d.contains("@user_script")
                && (d.contains(&format!(": {code} ")) || d.contains(&format!(": -{code} ")))
        }),
        _ => false,
    }
}
