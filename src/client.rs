//! The client: one connection, one identity, and the background tasks every lock shares.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, PublishMode};
use crate::engine::handoff::Handoffs;
use crate::engine::holds::{Holds, Lease};
use crate::engine::release::{self, Core, Job, SpentLatches};
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, Result};
use crate::kinds::fenced::FencedLock;
use crate::kinds::lock::Lock;
use crate::kinds::read_write::ReadWriteLock;
use crate::raw::Protocol;
use crate::transport::connect;
use crate::transport::pubsub::Hub;

/// How long [`LockClient::shutdown`] keeps trying to delete spent latches when Redis is not
/// answering (a connection being re-made after a cut): each would otherwise linger for its PX.
const SHUTDOWN_SWEEP: std::time::Duration = std::time::Duration::from_secs(2);

/// State shared by the client handles, its locks and their guards.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) client_id: String,
    /// Every handle the engine shares, held once (the release task and the watchdog have
    /// their own copies of it).
    pub(crate) core: Core,
    jobs: mpsc::UnboundedSender<Job>,
    closed: AtomicBool,
    tasks: CancellationToken,
}

impl Shared {
    /// Hands work to the release task; never blocks (safe in `Drop`).
    pub(crate) fn send_job(&self, job: Job) {
        self.core.send_on(&self.jobs, job);
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Shutdown)
        } else {
            Ok(())
        }
    }

    /// Waiters of this client parked on locks, for releases to hand off to.
    pub(crate) fn handoffs(&self) -> &Handoffs {
        &self.core.handoffs
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last handle and the last guard are gone: stop the watchdog and the hub. The
        // release task ends by itself once it has finished the jobs already sent.
        self.tasks.cancel();
    }
}

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
    shared: Arc<Shared>,
}

#[cfg(test)]
impl LockClient {
    /// The engine's handles, for unit tests that drive it with kinds of their own.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClient")
            .field("client_id", &self.shared.client_id)
            .field("config", &self.shared.config)
            .finish()
    }
}

impl LockClient {
    /// Connects to the server at `url` with default settings (see [`Config::from_url`]).
    ///
    /// # Errors
    /// [`Error::Config`] for a malformed URL, [`Error::Connection`] if the server cannot be
    /// reached (after a few quick retries: this never hangs), [`Error::Redis`] for a refused
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
    /// As [`LockClient::connect`], plus [`Error::Config`] for unusable settings.
    pub async fn with_config(config: Config) -> Result<LockClient> {
        config.validate()?;
        let mut conn = connect::open(&config, None).await?;
        let mode = connect::publish_mode(&mut conn, &config).await?;
        connect::require_replica_sync(&mut conn, &config).await?;
        let cluster = conn.is_cluster();
        let protocol = Protocol::new(conn.clone(), mode.publish_command(), config.replica_sync());

        let tasks = CancellationToken::new();
        let hub = Hub::start(&config, conn, mode, tasks.clone()).await?;
        let client_id = uuid::Uuid::new_v4().to_string();
        let holds = Arc::new(Holds::new(config.watchdog_timeout(), &client_id));
        let (jobs, rx) = mpsc::unbounded_channel();
        let latches = Arc::new(SpentLatches::default());
        let releaser = Core {
            protocol: protocol.clone(),
            latches: latches.clone(),
            holds: holds.clone(),
            hub: hub.clone(),
            // On a cluster in classic mode, a channel's listeners may sit on any node: one
            // node's count cannot show this client alone, so releases never hand off there.
            handoffs: Arc::new(Handoffs::new(
                config.local_handoff() && !(cluster && mode == PublishMode::Publish),
            )),
            jobs: jobs.downgrade(),
            pending: Arc::default(),
            key_prefix: config.key_prefix().into(),
            watchdog_lease_ms: Lease::Watchdog.millis(config.watchdog_timeout()),
        };
        spawn_watchdog(releaser.clone(), &config, tasks.clone()).await?;
        tokio::spawn(release::run_release_task(releaser.clone(), rx));
        tokio::spawn(release::run_latch_sweeper(
            protocol.clone(),
            latches.clone(),
            tasks.clone(),
        ));

        tracing::debug!(client_id, "lock client connected");
        Ok(LockClient {
            shared: Arc::new(Shared {
                config,
                client_id,
                core: releaser,
                jobs,
                closed: AtomicBool::new(false),
                tasks,
            }),
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
        Lock::new(self.shared.clone(), name.into())
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

    /// This client's UUID: the `<client-uuid>` part of every owner field it writes.
    pub fn client_id(&self) -> &str {
        &self.shared.client_id
    }

    /// The configuration the client runs with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// How many locks (distinct keys and owners) this client holds right now.
    pub fn held_locks(&self) -> usize {
        self.shared.core.holds.len()
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
        self.shared.handoffs().parked()
    }

    /// How many held locks the watchdog is renewing right now.
    pub fn renewed_locks(&self) -> usize {
        self.shared.core.holds.renewed_len()
    }

    /// Releases every lock this client still holds, waits for pending background releases,
    /// deletes the spent unlock latches not yet swept, and stops the client's tasks. Guards
    /// still alive see their lock-lost signal fire; any later operation fails with
    /// [`Error::Shutdown`]. Idempotent.
    ///
    /// Release failures (Redis unreachable) are logged, not returned: those locks end when
    /// their lease runs out, since nothing renews them any more.
    pub async fn shutdown(&self) {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let shared = &self.shared;
        shared.handoffs().close();
        for held in shared.core.holds.drain() {
            shared.core.release_holds(&held);
        }
        let (done, flushed) = oneshot::channel();
        shared.send_job(Job::Flush(done));
        let _ = flushed.await;
        // The sweeper's last sweep may have met the fault that made this shutdown (a cut
        // connection is still reconnecting): try again, pausing, for a bounded time.
        shared
            .core
            .latches
            .sweep_until(&shared.core.protocol, SHUTDOWN_SWEEP)
            .await;
        shared.tasks.cancel();
    }
}

/// Runs the watchdog on a thread of its own, with its own small runtime and its own connection:
/// an application that blocks every worker of its runtime (a `std::thread::sleep` in a task, a
/// long computation) must not stall renewal, or its locks would expire under it. (Redisson
/// renews from Netty's threads for the same reason.) Returns once the connection is made.
async fn spawn_watchdog(core: Core, config: &Config, shutdown: CancellationToken) -> Result<()> {
    let config = config.clone();
    let publish = core.protocol.publish_command();
    // (Its own connections, the client's view of the cluster.)
    let topology = core.protocol.connection().topology().cloned();
    let (ready, connected) = oneshot::channel();
    std::thread::Builder::new()
        .name("redisson-lock-watchdog".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    let _ = ready.send(Err(Error::Config(format!("watchdog runtime: {err}"))));
                    return;
                }
            };
            runtime.block_on(async move {
                match connect::open(&config, topology.as_ref()).await {
                    Ok(conn) => {
                        let watchdog = Watchdog {
                            protocol: Protocol::new(conn, publish, config.replica_sync()),
                            core,
                            lease: config.watchdog_timeout(),
                            interval: config.renewal_interval(),
                            batch_size: config.renewal_batch_size(),
                        };
                        let _ = ready.send(Ok(()));
                        watchdog.run(shutdown).await;
                    }
                    Err(err) => {
                        let _ = ready.send(Err(err));
                    }
                }
            });
        })
        .map_err(|err| Error::Config(format!("cannot start the watchdog thread: {err}")))?;
    connected
        .await
        .unwrap_or_else(|_| Err(Error::Config("the watchdog thread ended".into())))
}
