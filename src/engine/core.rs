//! The client's engine: the handles every lock shares ([`Core`]), and the [`Engine`] that
//! owns them with the client's identity, its settings and its background tasks (the release
//! task, the latch sweeper, the watchdog's and the loss task's threads), from start to shutdown.

use crate::sync::atomic::{AtomicBool, Ordering};
use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, PublishMode};
use crate::engine::handoff::{Handoffs, Offer};
use crate::engine::latches::{self, SpentLatches};
use crate::engine::loss::LossWatch;
use crate::engine::registry::{Lease, LostHold, Registry};
use crate::engine::release::{self, Job, PendingReleases, Unlock};
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, Result};
use crate::observe::Observe;
use crate::raw::spent::SpentQueue;
use crate::raw::{Kind, Protocol};
use crate::transport::naming::ConnName;
use crate::transport::pubsub::Hub;
use crate::transport::replica_sync::ReplicaSync;
use crate::transport::{connect, Connection};

/// How long a shutdown keeps trying to delete spent latches when Redis is not answering (a
/// connection being re-made after a cut): each would otherwise linger for its PX.
const SHUTDOWN_SWEEP: std::time::Duration = std::time::Duration::from_secs(2);

/// The engine's shared handles, each held once: the scripts' protocol, the registry of holds,
/// the subscription hub, the hand-off queues, spent latches, pending background work, and the
/// way to the release task. Cheap to clone (the client, the release task and the watchdog
/// each have one).
#[derive(Clone)]
pub(crate) struct Core {
    pub(crate) protocol: Protocol,
    pub(crate) latches: Arc<SpentLatches>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) handoffs: Arc<Handoffs>,
    /// For holds a hand-off acquired for a waiter that had gone (weak: the release task's own
    /// copy must not keep its channel open).
    pub(crate) jobs: mpsc::WeakUnboundedSender<Job>,
    pub(crate) pending: Arc<PendingReleases>,
    /// The watchdog lease in ms (what a partial unlock resets the TTL to).
    pub(crate) watchdog_lease_ms: u64,
    /// Holds waiting to be watched for their loss (with prompt loss detection).
    pub(crate) loss: Arc<LossWatch>,
}

impl Core {
    /// Hands work to the release task (while it runs; never blocks).
    pub(crate) fn send(&self, job: Job) {
        if let Some(jobs) = self.jobs.upgrade() {
            self.send_on(&jobs, job);
        }
    }

    /// Hands work to the release task over `jobs`, counting it as pending on its hold.
    pub(crate) fn send_on(&self, jobs: &mpsc::UnboundedSender<Job>, job: Job) {
        let hold = job.hold();
        if let Some(hold) = &hold {
            self.pending.begin(hold);
        }
        if let Err(mpsc::error::SendError(job)) = jobs.send(job) {
            // After shutdown the task is gone: the hold then ends with its lease.
            if let Some(hold) = job.hold() {
                self.pending.end(&hold);
            }
        }
    }

    /// Queues the spent `latch` for the sweeper, or after shutdown (no sweeper runs then)
    /// deletes it now.
    pub(crate) async fn retire(&self, latch: String) {
        if self.latches.retire(latch) {
            self.latches.sweep(&self.protocol).await;
        }
    }

    /// Forgets the entry of `ticket` if its lock was found lost, and releases what may remain.
    pub(crate) fn forget_lost(&self, ticket: &crate::engine::registry::Ticket) {
        if let Some(lost) = self.registry.forget_lost(ticket) {
            self.release_lost(&lost);
        }
    }

    /// Wakes this client's waiters of `key`, one of whose holders of this client lost it:
    /// they may be parked on the belief that the holder will publish its unlock, which will
    /// now never come (the kind says where its waiters listen).
    pub(crate) fn wake_waiters_of(&self, raw: &Kind, key: &str) {
        self.hub
            .wake_where(|channel| raw.is_waiter_channel(key, channel));
    }

    /// Releases a hold declared lost by the lease clock: it may still be in Redis (the clock
    /// runs from the send of the last confirmed renewal, Redis from when it ran one, perhaps a
    /// later one whose answer was lost). Left there, it would block others for up to a lease,
    /// and the owner's next acquire would count it twice. One unlock per hold it had.
    pub(crate) fn release_lost(&self, lost: &LostHold) {
        self.loss.unwatch(self, lost.raw, &lost.key);
        if !lost.may_remain() {
            return;
        }
        tracing::debug!(lock = %lost.name, key = %lost.key, holds = lost.holds, "releasing a hold lost by its lease clock");
        self.release_holds(lost);
    }

    /// Has the release task release every hold `lost` had, one unlock each (the unlock
    /// script takes one hold off per call), with the watchdog lease for what remains.
    pub(crate) fn release_holds(&self, lost: &LostHold) {
        for _ in 0..lost.holds {
            let unlock = Unlock::new(
                lost.raw,
                lost.name.clone(),
                lost.key.clone(),
                lost.field.clone(),
                self.watchdog_lease_ms,
                lost.permits,
            );
            self.send(Job::Unlock(unlock));
        }
    }

    /// The hand-off to attempt with `unlock`, if it frees the lock and waiters of this client
    /// are parked on it.
    pub(crate) fn offer(&self, unlock: &Unlock) -> Option<Offer> {
        // (Where writes wait for replicas, the hand-off's write carries its `WAIT` as any
        // other: one acknowledges both the unlock and the waiter's acquire.)
        if !unlock.frees {
            return None;
        }
        self.handoffs.offer(
            &unlock.key,
            &unlock.name,
            unlock.raw,
            self.hub.is_connected(),
        )
    }
}

/// One client's engine: its identity, settings, the handles every lock shares and its
/// background tasks. The client's handles, its locks and their guards hold it.
pub(crate) struct Engine {
    pub(crate) config: Config,
    pub(crate) client_id: String,
    /// Every handle the engine shares, held once (the release task and the watchdog have
    /// their own copies of it).
    pub(crate) core: Core,
    jobs: mpsc::UnboundedSender<Job>,
    closed: AtomicBool,
    /// Set once a shutdown has finished.
    shut: tokio::sync::watch::Sender<bool>,
    tasks: CancellationToken,
}

impl Engine {
    /// Hands work to the release task; never blocks (safe in `Drop`).
    pub(crate) fn send_job(&self, job: Job) {
        self.core.send_on(&self.jobs, job);
    }

    /// Cancelled when the client shuts down: the end of every task the client started.
    pub(crate) fn tasks(&self) -> &CancellationToken {
        &self.tasks
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

impl Drop for Engine {
    fn drop(&mut self) {
        // The last handle and the last guard are gone: stop the watchdog and the hub. The
        // release task ends by itself once it has finished the jobs already sent.
        self.tasks.cancel();
    }
}

impl Engine {
    /// Connects as `config` says, and starts the background tasks.
    pub(crate) async fn start(mut config: Config) -> Result<Arc<Engine>> {
        config.validate()?;
        let client_id = uuid::Uuid::new_v4().to_string();
        config.conn_name = Some(ConnName::new(
            &client_id,
            &config.service_name(),
            config.prompt_loss_detection(),
        ));
        let conn = connect::open(&config, None).await?;
        Engine::start_on(config, client_id, conn).await
    }

    /// Starts the engine of client `client_id` on `conn`, as `config` says.
    async fn start_on(
        config: Config,
        client_id: String,
        mut conn: Connection,
    ) -> Result<Arc<Engine>> {
        let mode = connect::publish_mode(&mut conn, &config).await?;
        let replica_sync = ReplicaSync::new(&config, conn.counts_replicas());
        connect::check_replica_sync(&mut conn, replica_sync.as_deref()).await?;
        if replica_sync
            .as_ref()
            .is_some_and(|s| s.timeout_ms().is_some())
        {
            connect::add_spare_lane(&config, &conn).await?;
        }
        let keyspace = match config.prompt_loss_detection() {
            true => connect::keyspace_events(&mut conn).await,
            false => None,
        };
        let cluster = conn.is_cluster();
        let spent = Arc::new(SpentQueue::new(cluster));
        let protocol = Protocol::new(
            conn.clone(),
            mode.publish_command(),
            replica_sync.clone(),
            spent.clone(),
        );

        let tasks = CancellationToken::new();
        let hub = Hub::start(&config, conn, mode, tasks.clone()).await?;
        let observe = Observe {
            lock_names: config.lock_names_in_metrics(),
        };
        let holds =
            Arc::new(Registry::new(config.watchdog_timeout(), &client_id).observed(observe));
        let (jobs, rx) = mpsc::unbounded_channel();
        let latches = Arc::new(SpentLatches::new(spent));
        let core = Core {
            protocol: protocol.clone(),
            latches: latches.clone(),
            registry: holds,
            hub,
            // On a cluster in classic mode, a channel's listeners may sit on any node: one
            // node's count cannot show this client alone, so releases never hand off there.
            handoffs: Arc::new(Handoffs::new(
                config.local_handoff() && !(cluster && mode == PublishMode::Publish),
            )),
            jobs: jobs.downgrade(),
            pending: Arc::default(),
            watchdog_lease_ms: Lease::Watchdog.millis(config.watchdog_timeout()),
            loss: Arc::new(LossWatch::new(keyspace)),
        };
        spawn_watchdog(core.clone(), &config, tasks.clone()).await?;
        if config.prompt_loss_detection() {
            let task = LossWatch::run(core.clone(), client_id.clone(), tasks.clone());
            if let Err(err) = spawn_loss_task(task) {
                tasks.cancel(); // (the watchdog's thread ends with it)
                return Err(err);
            }
        }
        crate::sync::spawn(release::run_release_task(core.clone(), rx));
        crate::sync::spawn(latches::run_latch_sweeper(protocol, latches, tasks.clone()));
        tracing::debug!(client_id, "lock client connected");
        Ok(Arc::new(Engine {
            config,
            client_id,
            core,
            jobs,
            closed: AtomicBool::new(false),
            shut: tokio::sync::watch::channel(false).0,
            tasks,
        }))
    }

    /// Releases every hold, waits for the background releases, sweeps the spent latches and
    /// stops the tasks; a second call waits for the first. The work runs on a task of its
    /// own, so a caller that goes away does not leave it half done.
    pub(crate) async fn shutdown(self: &Arc<Self>) {
        let mut shut = self.shut.subscribe();
        if !self.closed.swap(true, Ordering::AcqRel) {
            let engine = self.clone();
            crate::sync::spawn(async move {
                engine.close().await;
                engine.shut.send_replace(true);
            });
        }
        let _ = shut.wait_for(|shut| *shut).await;
        // Work handed to the release task since (a call that ended while the shutdown ran
        // settles its acquire there) is waited for too: every shutdown call returns with
        // nothing of this client's left held.
        self.flush().await;
    }

    /// Waits until the release task has finished every job sent before.
    async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        self.send_job(Job::Flush(done));
        let _ = flushed.await;
    }

    async fn close(&self) {
        self.handoffs().close();
        for held in self.core.registry.drain() {
            self.core.release_holds(&held);
        }
        self.flush().await;
        self.core.latches.close();
        // The sweeper's last sweep may have met the fault that made this shutdown (a cut
        // connection is still reconnecting): try again, pausing, for a bounded time.
        self.core
            .latches
            .sweep_until(&self.core.protocol, SHUTDOWN_SWEEP)
            .await;
        self.tasks.cancel();
    }
}

/// A client's engine on the model checks' stand-in server (`model` feature only).
#[cfg(feature = "model")]
impl Engine {
    /// Starts an engine as `config` says, on `link` instead of the server `config` names.
    pub(crate) async fn start_model(
        config: Config,
        link: crate::model::link::Link,
    ) -> Result<Arc<Engine>> {
        config.validate()?;
        let client_id = uuid::Uuid::new_v4().to_string();
        Engine::start_on(config, client_id, Connection::Model(link)).await
    }
}

/// The loss task under a model: a task of the client's (a model has no threads of its own to
/// give it; shuttle decides when it runs).
#[cfg(feature = "model")]
fn spawn_loss_task(task: impl Future<Output = ()> + Send + 'static) -> Result<()> {
    crate::sync::spawn(task);
    Ok(())
}

/// Runs the loss task on a thread of its own, with its own small runtime. Not on the
/// application's runtime: handing a hold over would wake its workers (that cost a cluster with
/// replicas about 6 µs of CPU a lock+unlock). Not on the watchdog's thread either: what it
/// keeps (a map entry and a channel name a watched lock) then shared the watchdog's malloc
/// arena, and glibc could give the watchdog's per-cycle buffers back to the kernel after every
/// cycle, to fault them in again the next (a probe holding 10,000 locks: 348 page faults a
/// cycle). Started once the watchdog is: a client that fails to connect leaves no thread.
#[cfg(not(feature = "model"))]
fn spawn_loss_task(task: impl Future<Output = ()> + Send + 'static) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| Error::Config(format!("loss task runtime: {err}")))?;
    std::thread::Builder::new()
        .name("redisson-lock-loss".into())
        .spawn(move || runtime.block_on(task))
        .map(drop)
        .map_err(|err| Error::Config(format!("cannot start the loss task's thread: {err}")))
}

/// The watchdog under a model: a task of the client's, on the client's connection.
#[cfg(feature = "model")]
async fn spawn_watchdog(core: Core, config: &Config, shutdown: CancellationToken) -> Result<()> {
    let watchdog = Watchdog {
        protocol: core.protocol.clone(),
        core,
        lease: config.watchdog_timeout(),
        interval: config.renewal_interval(),
        batch_size: config.renewal_batch_size(),
        hold_warning: config.hold_warning(),
    };
    crate::sync::spawn(watchdog.run(shutdown));
    Ok(())
}

/// Runs the watchdog on a thread of its own, with its own small runtime and its own connection:
/// an application that blocks every worker of its runtime (a `std::thread::sleep` in a task, a
/// long computation) must not stall renewal, or its locks would expire under it. (Redisson
/// renews from Netty's threads for the same reason.) Returns once the connection is made.
#[cfg(not(feature = "model"))]
async fn spawn_watchdog(core: Core, config: &Config, shutdown: CancellationToken) -> Result<()> {
    let config = config.clone();
    let publish = core.protocol.publish_command();
    // (One replica sync for the client: a server found without WAIT is so for both.)
    let replica_sync = core.protocol.replica_sync().cloned();
    let spent = core.protocol.spent().clone();
    // (Its own connections, the client's view of the cluster or the sentinels' master.)
    let client_conn = core.protocol.connection().clone();
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
                let opened = connect::open(&config, Some(&client_conn)).await;
                // (Only its view is kept: the client's own handles must not outlive it here.)
                drop(client_conn);
                match opened {
                    Ok(conn) => {
                        let watchdog = Watchdog {
                            protocol: Protocol::new(conn, publish, replica_sync, spent),
                            core,
                            lease: config.watchdog_timeout(),
                            interval: config.renewal_interval(),
                            batch_size: config.renewal_batch_size(),
                            hold_warning: config.hold_warning(),
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
