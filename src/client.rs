//! The client: one connection, one identity, and the background tasks every lock shares.

use std::sync::Arc;

use crate::config::Config;
use crate::engine::Engine;
use crate::error::Result;
use crate::inspect::{LockInfo, ReplicaSyncState, Scan, ServerStats};
use crate::kinds::fenced::FencedLock;
use crate::kinds::lock::Lock;
use crate::kinds::read_write::ReadWriteLock;

/// A connection to Redis that hands out Redisson-compatible locks.
///
/// One client is one Redisson client instance: it has one random UUID (the first half of every
/// owner field it writes), one multiplexed command connection, one pub/sub connection shared by
/// all its waiters, and one watchdog task renewing all its locks. Clones are cheap and share
/// all of that. The background tasks run on the tokio runtime the client was created in.
///
/// ```no_run
/// use redisson_lock::LockClient;
///
/// # async fn demo() -> redisson_lock::Result<()> {
/// let client = LockClient::connect("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("orders:42").lock().await?; // watchdog-renewed until unlocked
/// // ... critical section ...
/// guard.unlock().await?;
/// client.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClient")
            .field("client_id", &self.engine.client_id)
            .field("config", &self.engine.config)
            .finish()
    }
}

impl LockClient {
    /// Connects to the server at `url` with default settings (see [`Config::from_url`]).
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) for a malformed URL, [`Error::Connection`](crate::Error::Connection) if the server cannot be
    /// reached (after a few quick retries: this never hangs), [`Error::Redis`](crate::Error::Redis) for a refused
    /// login.
    pub async fn connect(url: &str) -> Result<LockClient> {
        Self::with_config(Config::from_url(url)?).await
    }

    /// Connects with an explicit configuration.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redisson_lock::{Config, LockClient};
    ///
    /// # async fn demo() -> redisson_lock::Result<()> {
    /// let config = Config::from_url("redis://127.0.0.1:6379")?
    ///     .with_watchdog_timeout(Duration::from_secs(10));
    /// let client = LockClient::with_config(config).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`LockClient::connect`], plus [`Error::Config`](crate::Error::Config) for unusable settings.
    pub async fn with_config(config: Config) -> Result<LockClient> {
        Ok(LockClient {
            engine: Engine::start(config).await?,
        })
    }

    /// A client on the model checks' stand-in server (`model` feature only; `tests/model.rs`):
    /// `config` as for [`LockClient::with_config`], its server address unused. Under that
    /// feature the engine runs only inside a shuttle model.
    #[cfg(feature = "model")]
    #[doc(hidden)]
    pub async fn on_model(config: Config, link: crate::model::link::Link) -> Result<LockClient> {
        Ok(LockClient {
            engine: Engine::start_model(config, link).await?,
        })
    }

    /// A handle on the lock named `name` (Redisson's `getLock(name)`). Creating it costs
    /// nothing and sends nothing; the name is checked when the handle is used.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let lock = client.lock("reports:nightly");
    /// if let Some(guard) = lock.try_lock().await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.engine.clone(), name.into())
    }

    /// A handle on the semaphore named `name` (Redisson's `getSemaphore(name)`): permits
    /// shared with Java services in one key. Sends nothing until used.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let pool = client.semaphore("db:connections");
    /// let permits = pool.acquire(1).await?;
    /// # drop(permits); Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>) -> crate::Semaphore {
        crate::Semaphore::new(self.lock(name))
    }

    /// A handle on the semaphore named `name` whose permits expire (Redisson's
    /// `getPermitExpirableSemaphore(name)`): permits with ids and leases, shared with Java
    /// services. Sends nothing until used.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let jobs = client.permit_semaphore("jobs:export");
    /// let permit = jobs.acquire(redisson_lock::Lease::Watchdog).await?;
    /// # drop(permit); Ok(()) }
    /// ```
    pub fn permit_semaphore(&self, name: impl Into<String>) -> crate::PermitExpirableSemaphore {
        crate::PermitExpirableSemaphore::new(self.lock(name))
    }

    /// A handle on the count-down latch named `name` (Redisson's `getCountDownLatch(name)`):
    /// a count shared with Java services, waited on until it reaches zero. Sends nothing until
    /// used.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let ready = client.count_down_latch("shards:ready");
    /// ready.wait().await?;
    /// # Ok(()) }
    /// ```
    pub fn count_down_latch(&self, name: impl Into<String>) -> crate::CountDownLatch {
        crate::CountDownLatch::new(self.lock(name))
    }

    /// A handle on the fenced lock named `name` (Redisson's `getFencedLock(name)`): a lock
    /// whose every acquisition carries a fencing token. Sends nothing until used.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let guard = client.fenced_lock("ledger").lock().await?;
    /// println!("token {}", guard.token());
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        FencedLock::new(self.lock(name))
    }

    /// A handle on the read-write lock named `name` (Redisson's `getReadWriteLock(name)`):
    /// shared reads, exclusive writes. Sends nothing until used.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let doc = client.read_write_lock("doc:7");
    /// let guard = doc.read_lock().lock().await?;
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.lock(name))
    }

    /// A handle on the fair lock named `name` (Redisson's `getFairLock(name)`): waiters are
    /// served in the order they came, across clients and languages. Sends nothing until used.
    ///
    /// The lock is RLock's hash; waiting calls queue their owner in `redisson_lock_queue:{name}`
    /// with the time its place ends in `redisson_lock_timeout:{name}` (the call's wait, or
    /// [`Config::with_fair_lock_wait_timeout`](crate::Config::with_fair_lock_wait_timeout) for
    /// calls that wait without end), and each waiter is woken on a channel of its own when it
    /// reaches the head. A single attempt ([`Lock::try_lock`]) never queues and takes the lock
    /// only when nobody waits. A waiter that gives up (its wait ran out, its future was
    /// dropped, an error) leaves the queue at once. No local hand-off: a waiter of this client
    /// waits its turn like any other.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let jobs = client.fair_lock("jobs:serial");
    /// let guard = jobs.lock().await?; // after every waiter that came first
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock {
        self.lock(name).of_kind(&crate::raw::fair::FAIR)
    }

    /// A handle on the non-reentrant fair lock named `name` (Redisson 4.4+'s
    /// `getNonReentrantFairLock(name)`): a [fair lock](LockClient::fair_lock) whose holder's
    /// second acquire fails with [`Error::NonReentrant`](crate::Error::NonReentrant), changing
    /// nothing.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let lock = client.non_reentrant_fair_lock("once");
    /// let guard = lock.lock().await?;
    /// assert!(lock.try_lock().await.unwrap_err().is_non_reentrant());
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> Lock {
        self.lock(name)
            .of_kind(&crate::raw::fair::NON_REENTRANT_FAIR)
    }

    /// A handle on the non-reentrant lock named `name` (Redisson 4.4+'s
    /// `getNonReentrantLock(name)`): RLock's layout, but the holder's second acquire fails
    /// with [`Error::NonReentrant`](crate::Error::NonReentrant), changing nothing.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let lock = client.non_reentrant_lock("once");
    /// let guard = lock.lock().await?;
    /// assert!(lock.try_lock().await.unwrap_err().is_non_reentrant());
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> Lock {
        self.lock(name).of_kind(&crate::raw::rlock::NON_REENTRANT)
    }

    /// A handle on the spin lock named `name` (Redisson's `getSpinLock(name)`): RLock's layout
    /// without pub/sub. Its waiters poll with Redisson's default back-off (1 ms doubling to
    /// 128 ms, with jitter) and subscribe to nothing; its unlock publishes nothing (an RLock
    /// waiter on the same key notices a spin release only by its timer, as in Redisson).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let guard = client.spin_lock("cache:refill").lock().await?;
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn spin_lock(&self, name: impl Into<String>) -> Lock {
        self.lock(name).of_kind(&crate::raw::spin::SPIN)
    }

    /// A [spin lock](LockClient::spin_lock) whose waiters pause by `backoff` (Redisson's
    /// `getSpinLock(name, backOff)`).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redisson_lock::BackOff;
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let lock = client.spin_lock_with_backoff("cache:refill", BackOff::constant(Duration::from_millis(20)));
    /// let guard = lock.lock().await?;
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn spin_lock_with_backoff(&self, name: impl Into<String>, backoff: crate::BackOff) -> Lock {
        self.spin_lock(name).with_backoff(backoff)
    }

    /// This client's UUID: the `<client-uuid>` part of every owner field it writes.
    pub fn client_id(&self) -> &str {
        &self.engine.client_id
    }

    /// The configuration the client runs with.
    pub fn config(&self) -> &Config {
        &self.engine.config
    }

    /// How many locks (distinct keys and owners) this client holds right now.
    pub fn held_locks(&self) -> usize {
        self.engine.core.registry.len()
    }

    /// How many acquire calls of this client are asleep right now, waiting for a lock to be
    /// released (each is woken by the unlock message, a local hand-off, or its timer).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) {
    /// if client.waiting() > 100 {
    ///     eprintln!("lock contention: {} tasks waiting", client.waiting());
    /// }
    /// # }
    /// ```
    pub fn waiting(&self) -> usize {
        self.engine.handoffs().parked()
    }

    /// What Redis holds under the lock `name`, of any Redisson kind and whoever wrote it:
    /// holders (with their host and process where they name their connections), lease left,
    /// waiters, fair queue, last fencing token, and the node serving it. Reads only.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let info = client.inspect("orders:42").await?;
    /// println!("{:?}, {} holder(s), {:?} waiting", info.state, info.holders.len(), info.waiters);
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self, name: &str) -> Result<LockInfo> {
        let conn = self.engine.core.protocol.connection();
        crate::inspect::inspect(conn, self.engine.config.key_prefix(), name).await
    }

    /// The held locks whose names match the glob `pattern` (`*` for all), on every master,
    /// a bounded page at a time: see [`Scan`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let mut scan = client.scan("orders:*");
    /// while let Some(info) = scan.next().await {
    ///     println!("{}", info?.name);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn scan(&self, pattern: &str) -> Scan {
        let conn = self.engine.core.protocol.connection().clone();
        Scan::new(conn, self.engine.config.key_prefix(), pattern)
    }

    /// The servers behind this client: topology, masters, lock scripts run so far (see
    /// [`ServerStats`]). One `INFO commandstats` per master.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// println!("{}", client.server_stats().await?.script_calls);
    /// # Ok(()) }
    /// ```
    pub async fn server_stats(&self) -> Result<ServerStats> {
        let protocol = &self.engine.core.protocol;
        crate::inspect::server_stats(protocol.connection(), self.replica_sync()).await
    }

    /// Whether this client's lock writes wait for replicas right now: off, on, or
    /// unavailable (left at its default on a server without `WAIT`, which the client found at
    /// connect or at the first `WAIT` the server refused; see
    /// [`Config::with_replica_sync`](crate::Config::with_replica_sync)).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) {
    /// println!("replica sync: {}", client.replica_sync().as_str());
    /// # }
    /// ```
    pub fn replica_sync(&self) -> ReplicaSyncState {
        ReplicaSyncState::of(self.engine.core.protocol.replica_sync().map(|s| &**s))
    }

    /// How many held locks the watchdog is renewing right now.
    pub fn renewed_locks(&self) -> usize {
        self.engine.core.registry.renewed_len()
    }

    /// Releases every lock this client still holds, waits for pending background releases,
    /// deletes the spent unlock latches not yet swept, and stops the client's tasks. Guards
    /// still alive see their lock-lost signal fire; any later operation fails with
    /// [`Error::Shutdown`](crate::Error::Shutdown). Idempotent, and each call waits for the
    /// background releases sent before it: a call racing the shutdown (an acquire whose hold
    /// came after it, a waiter that gave up) leaves its hold released by then.
    ///
    /// Release failures (Redis unreachable) are logged, not returned: those locks end when
    /// their lease runs out, since nothing renews them any more.
    ///
    /// # Cancel safety
    /// Cancel safe: the work runs on a task of its own, which a dropped call leaves running to
    /// the end. A later call (or one made concurrently) returns once that work is done.
    pub async fn shutdown(&self) {
        self.engine.shutdown().await;
    }
}
