//! Client configuration: where Redis is, and the knobs that must match a Redisson fleet.

use std::fmt;
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::error::{Error, Result};

/// The longest lease accepted: 100 years. Redis refuses an expiry past the end of its clock
/// with an error *after* the script's earlier writes, so the bound is checked before sending.
/// Redisson's `fairLockWaitTimeout`: how long a fair lock's waiter keeps its place in the
/// queue when its call waits without end, 5 min.
pub(crate) const DEFAULT_FAIR_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(300);

pub(crate) const MAX_LEASE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Which command an unlock uses to wake waiters, and so which kind of subscription waiters make.
///
/// Redisson uses `PUBLISH`/`SUBSCRIBE` everywhere except on a Redis ≥ 7 cluster, where it
/// defaults to sharded `SPUBLISH`/`SSUBSCRIBE`. Both sides of a fleet must agree, or waiters
/// fall back to their TTL timer (still correct, only slower).
///
/// ```
/// use redisson_lock::{Config, PublishMode};
///
/// let config = Config::from_url("redis://127.0.0.1:6379")?.with_publish_mode(PublishMode::Publish);
/// assert_eq!(config.publish_mode(), PublishMode::Publish);
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublishMode {
    /// What Redisson does by default for this deployment: `PUBLISH` on a standalone server;
    /// on a cluster, `SPUBLISH` when its nodes have sharded pub/sub (Redis and Valkey ≥ 7),
    /// `PUBLISH` otherwise.
    #[default]
    Auto,
    /// Always `PUBLISH` / `SUBSCRIBE`.
    Publish,
    /// Always sharded `SPUBLISH` / `SSUBSCRIBE` (Redis ≥ 7).
    SPublish,
}

impl PublishMode {
    /// The mode actually used against a standalone server (or a cluster, `sharded_ok`: whether
    /// its nodes have sharded pub/sub).
    pub(crate) fn resolved(self, cluster: bool, sharded_ok: bool) -> PublishMode {
        match self {
            PublishMode::Auto if cluster && sharded_ok => PublishMode::SPublish,
            PublishMode::Auto => PublishMode::Publish,
            other => other,
        }
    }

    /// The publish command name as the unlock scripts receive it (of a resolved mode).
    pub(crate) fn publish_command(self) -> &'static str {
        match self {
            PublishMode::SPublish => "spublish",
            _ => "publish",
        }
    }
}

/// Configuration of a [`LockClient`](crate::LockClient).
///
/// Plain data with consuming `with_*` setters and Redisson's defaults. Passwords in the URL are
/// kept out of `Debug` output.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::Config;
///
/// let config = Config::from_url("redis://:secret@127.0.0.1:6379")?
///     .with_watchdog_timeout(Duration::from_secs(10))
///     .with_key_prefix("prod:");
/// assert_eq!(config.renewal_interval(), Duration::from_secs(10) / 3);
/// assert!(!format!("{config:?}").contains("secret"));
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone)]
pub struct Config {
    /// The server, or the first cluster seed or sentinel (its login and TLS apply to every
    /// node).
    pub(crate) connection: redis::ConnectionInfo,
    deployment: Deployment,
    watchdog_timeout: Duration,
    renewal_interval: Option<Duration>,
    renewal_batch_size: usize,
    publish_mode: PublishMode,
    key_prefix: String,
    response_timeout: Duration,
    connect_timeout: Duration,
    tls_root_cert: Option<Vec<u8>>,
    local_handoff: bool,
    replica_sync: Option<Duration>,
    /// Replica sync set by [`Config::with_replica_sync`], not left at its default.
    replica_sync_required: bool,
    lock_names_in_metrics: bool,
    hold_warning: Option<Duration>,
    fair_lock_wait_timeout: Duration,
    prompt_loss_detection: bool,
    service_name: Option<String>,
    /// The name the client's connections carry, set by the client at connect.
    pub(crate) conn_name: Option<crate::transport::naming::ConnName>,
}

/// How the deployment is reached, beyond [`Config::connection`]. (No `Debug`: a
/// `ConnectionInfo` shows its password.)
#[derive(Clone)]
pub(crate) enum Deployment {
    /// One server.
    Standalone,
    /// A Redis Cluster, through these seed nodes.
    Cluster { seeds: Vec<redis::ConnectionInfo> },
    /// A master watched by Redis Sentinel: these sentinels name it.
    Sentinel {
        master_name: String,
        sentinels: Vec<redis::ConnectionInfo>,
    },
}

impl Config {
    /// Redisson's default lock watchdog timeout: 30 s.
    pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
    /// Redisson's renewal batch size: 100 keys per script call.
    pub const DEFAULT_RENEWAL_BATCH_SIZE: usize = 100;
    /// Redisson's `slavesSyncTimeout`: how long a lock write waits for its replicas, 1 s.
    pub const DEFAULT_REPLICA_SYNC_TIMEOUT: Duration = Duration::from_secs(1);

    /// A configuration for the server at `url` (`redis://[user:password@]host[:port][/db]` or
    /// `rediss://...`), with Redisson's defaults for everything else.
    ///
    /// # Errors
    /// [`Error::Config`] if the URL cannot be parsed (the message never contains the password).
    pub fn from_url(url: &str) -> Result<Self> {
        Ok(Self::from_connection_info(parse_url(url)?))
    }

    /// A configuration for the Redis Cluster reached through `seed_urls` (any of its nodes;
    /// the others are discovered), with Redisson's defaults for everything else. All seeds
    /// must share one scheme and one login, which every node is reached with.
    ///
    /// ```
    /// use redisson_lock::Config;
    ///
    /// let config = Config::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])?;
    /// assert!(config.is_cluster());
    /// assert!(Config::cluster(Vec::<String>::new()).is_err());
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] if there is no seed, a URL cannot be parsed, one names a database
    /// other than 0 (a cluster has only 0), or the seeds disagree on TLS or login.
    pub fn cluster<I>(seed_urls: I) -> Result<Self>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let seeds = same_login(seed_urls, "cluster seed")?;
        if seeds.iter().any(|seed| seed.redis_settings().db() != 0) {
            return Err(Error::Config(
                "a cluster has only database 0: drop the /db from the seed urls".into(),
            ));
        }
        let mut config = Self::from_connection_info(seeds[0].clone());
        config.deployment = Deployment::Cluster { seeds };
        Ok(config)
    }

    /// A configuration for the master that the Redis Sentinels at `sentinel_urls` know as
    /// `master_name` (Redisson's `useSentinelServers()`), with Redisson's defaults for
    /// everything else. The client asks the sentinels where the master is, and follows it
    /// when they fail it over. The urls' scheme and login (and `/db`) apply to the sentinels
    /// and to the master alike, as Redisson's `password` does without a `sentinelPassword`.
    ///
    /// ```
    /// use redisson_lock::Config;
    ///
    /// let config = Config::sentinel("mymaster", ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"])?;
    /// assert!(config.is_sentinel());
    /// assert!(Config::sentinel("", ["redis://10.0.0.1:26379"]).is_err());
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] if the master name is empty, there is no sentinel url, one cannot be
    /// parsed, or they disagree on TLS, login or database.
    pub fn sentinel<I>(master_name: &str, sentinel_urls: I) -> Result<Self>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        if master_name.is_empty() {
            return Err(Error::Config(
                "a sentinel configuration needs the master's name".into(),
            ));
        }
        let sentinels = same_login(sentinel_urls, "sentinel")?;
        let mut config = Self::from_connection_info(sentinels[0].clone());
        config.deployment = Deployment::Sentinel {
            master_name: master_name.to_string(),
            sentinels,
        };
        Ok(config)
    }

    /// Whether this configuration is for a Redis Cluster ([`Config::cluster`]).
    pub fn is_cluster(&self) -> bool {
        matches!(self.deployment, Deployment::Cluster { .. })
    }

    /// Whether this configuration is for a master watched by Sentinel ([`Config::sentinel`]).
    pub fn is_sentinel(&self) -> bool {
        matches!(self.deployment, Deployment::Sentinel { .. })
    }

    /// How the deployment is reached.
    pub(crate) fn deployment(&self) -> &Deployment {
        &self.deployment
    }

    /// The private CA to trust, if one was given.
    #[cfg(feature = "tls")]
    pub(crate) fn tls_root_cert(&self) -> Option<&[u8]> {
        self.tls_root_cert.as_deref()
    }

    /// A configuration from redis-rs connection info.
    pub fn from_connection_info(connection: redis::ConnectionInfo) -> Self {
        Config {
            connection,
            deployment: Deployment::Standalone,
            watchdog_timeout: Self::DEFAULT_WATCHDOG_TIMEOUT,
            renewal_interval: None,
            renewal_batch_size: Self::DEFAULT_RENEWAL_BATCH_SIZE,
            publish_mode: PublishMode::Auto,
            key_prefix: String::new(),
            response_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(5),
            tls_root_cert: None,
            local_handoff: true,
            replica_sync: Some(Self::DEFAULT_REPLICA_SYNC_TIMEOUT),
            replica_sync_required: false,
            lock_names_in_metrics: false,
            hold_warning: None,
            fair_lock_wait_timeout: DEFAULT_FAIR_LOCK_WAIT_TIMEOUT,
            prompt_loss_detection: true,
            service_name: None,
            conn_name: None,
        }
    }

    /// The lease of a lock taken without an explicit one, renewed by the watchdog (default 30 s,
    /// Redisson's `lockWatchdogTimeout`). Must be at least 3 ms.
    pub fn with_watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
    }

    /// How long a waiter of a [fair lock](crate::LockClient::fair_lock) whose call waits
    /// without end keeps its place in the queue (default 5 min, Redisson's
    /// `fairLockWaitTimeout`). Its place ends this long after the waiter ahead of it may take
    /// the lock, unless renewed by its next attempt: a waiter that died (kill -9) holds up
    /// those behind it for at most this long. A call with a bounded wait reserves its own
    /// wait instead. Must be at least 1 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redisson_lock::Config::from_url("redis://127.0.0.1:6379")?
    ///     .with_fair_lock_wait_timeout(Duration::from_secs(60));
    /// assert_eq!(config.fair_lock_wait_timeout(), Duration::from_secs(60));
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_fair_lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.fair_lock_wait_timeout = timeout;
        self
    }

    /// How long a fair lock's waiter keeps its place ([`Config::with_fair_lock_wait_timeout`]).
    pub fn fair_lock_wait_timeout(&self) -> Duration {
        self.fair_lock_wait_timeout
    }

    /// Whether a release may pass the lock straight to a waiter of this client (default
    /// `true`).
    ///
    /// When an owner releases its last hold and another task of the same client is waiting,
    /// the waiter's acquire is sent right behind the unlock, in the same write: Redis runs the
    /// two back to back, so the lock changes hands with no pub/sub round and no race. It is
    /// done only while no other client listens on the lock's channel (counted with
    /// `PUBSUB NUMSUB` alongside each such release); as soon as one does, releases go back to
    /// Redisson's behaviour, where every waiter is woken by the message and races. Turn it off
    /// to get that behaviour always.
    ///
    /// ```
    /// let config = redisson_lock::Config::from_url("redis://127.0.0.1")?.with_local_handoff(false);
    /// assert!(!config.local_handoff());
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_local_handoff(mut self, enabled: bool) -> Self {
        self.local_handoff = enabled;
        self
    }

    /// Whether lock writes wait for the master's replicas, and how long (default 1 s on, as
    /// Redisson's `checkLockSyncedSlaves` and `slavesSyncTimeout`). `None` turns it off.
    ///
    /// Through Sentinel and on a cluster, each script that writes a lock (acquire, unlock,
    /// renewal) is followed by `WAIT <replicas> <timeout>` in the same write to the key's
    /// master, `<replicas>` being the replicas connected to it (on a cluster, one `WAIT`
    /// behind each master's pipelined renewals). When none acknowledges in time, the write may be lost to a
    /// failover: an acquire is undone and fails with [`Error::NotReplicated`], a renewal counts
    /// as unconfirmed (a whole lease of them and the holder is told its lock is lost), an
    /// unlock is logged. A master without replicas gets no `WAIT`; a standalone server never
    /// does (nor does Redisson's single-server mode). Releases that would `WAIT` do not hand
    /// off locally.
    ///
    /// A server without `WAIT` (some managed services refuse it): left at its default, replica
    /// sync is given up there, said once in a `warn` event and by
    /// [`LockClient::replica_sync`](crate::LockClient::replica_sync), as Redisson does since
    /// 3.26.1; set here (`Some`), the client refuses to connect to it
    /// ([`Error::Unsupported`](crate::Error::Unsupported)), and where the ACL hides `COMMAND`
    /// so that cannot be checked, each write the server refuses to `WAIT` for counts as not
    /// replicated.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redisson_lock::Config::sentinel("mymaster", ["redis://10.0.0.1:26379"])?
    ///     .with_replica_sync(Some(Duration::from_secs(3)));
    /// assert_eq!(config.replica_sync(), Some(Duration::from_secs(3)));
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_replica_sync(mut self, timeout: Option<Duration>) -> Self {
        self.replica_sync = timeout;
        self.replica_sync_required = timeout.is_some();
        self
    }

    /// Whether replica sync was asked for with [`Config::with_replica_sync`] (then a server
    /// without `WAIT` is refused) rather than left at its default (then it is given up there).
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redisson_lock::Config::sentinel("mymaster", ["redis://10.0.0.1:26379"])?;
    /// assert!(config.replica_sync().is_some() && !config.replica_sync_required());
    /// let config = config.with_replica_sync(Some(Duration::from_secs(1)));
    /// assert!(config.replica_sync_required());
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn replica_sync_required(&self) -> bool {
        self.replica_sync_required
    }

    /// How long lock writes wait for replicas, if they do ([`Config::with_replica_sync`]).
    pub fn replica_sync(&self) -> Option<Duration> {
        self.replica_sync
    }

    /// Whether the metrics about one lock (locks lost, unlocks that found the lock gone) carry
    /// its name as a `lock` label (default: off, as a label per lock name can make many
    /// series). See the README's metrics table.
    ///
    /// ```
    /// let config = redisson_lock::Config::from_url("redis://127.0.0.1/")?
    ///     .with_lock_names_in_metrics(true);
    /// assert!(config.lock_names_in_metrics());
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_lock_names_in_metrics(mut self, on: bool) -> Self {
        self.lock_names_in_metrics = on;
        self
    }

    /// Whether per-lock metrics carry the lock's name ([`Config::with_lock_names_in_metrics`]).
    pub fn lock_names_in_metrics(&self) -> bool {
        self.lock_names_in_metrics
    }

    /// Reports a lock held longer than `limit`: a `warn` event and the
    /// `redisson_lock_held_too_long_total` metric, once per hold, noticed by the watchdog's
    /// cycle (so up to one renewal interval late; no timer per lock). Default: off.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redisson_lock::Config::from_url("redis://127.0.0.1/")?
    ///     .with_hold_warning(Some(Duration::from_secs(60)));
    /// assert_eq!(config.hold_warning(), Some(Duration::from_secs(60)));
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_hold_warning(mut self, limit: Option<Duration>) -> Self {
        self.hold_warning = limit;
        self
    }

    /// How long a lock may be held before it is reported ([`Config::with_hold_warning`]).
    pub fn hold_warning(&self) -> Option<Duration> {
        self.hold_warning
    }

    /// Loss told at once: while a lock is held, its holder listens on the lock's channel, and
    /// a message there (a forced unlock by anyone, Java included) has the hold checked; a hold
    /// found gone is lost within a round trip instead of at the next renewal (a third of the
    /// watchdog timeout later, or never for a fixed lease). Where the server sends keyspace
    /// notifications, a raw `DEL`, an expiry and an eviction are told too. A hold is watched
    /// once it has lived 10 ms (most holds are shorter, and pay nothing for it), and checked
    /// then: a loss in its first 10 ms is told at about 10-20 ms. Default: on. A lock held
    /// longer costs a share of a channel subscription and an entry in the client's one loss
    /// task (no task of its own); the bench measures what that costs against it off
    /// (docs/BENCHMARKS.md, "Loss told at once: its cost"). Off, a loss is told at the next
    /// renewal.
    ///
    /// ```
    /// let config = redisson_lock::Config::from_url("redis://127.0.0.1/")?;
    /// assert!(config.prompt_loss_detection());
    /// let config = config.with_prompt_loss_detection(false);
    /// assert!(!config.prompt_loss_detection());
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_prompt_loss_detection(mut self, on: bool) -> Self {
        self.prompt_loss_detection = on;
        self
    }

    /// Whether holders listen for their lock's loss ([`Config::with_prompt_loss_detection`]).
    pub fn prompt_loss_detection(&self) -> bool {
        self.prompt_loss_detection
    }

    /// How often the watchdog renews (default: a third of the watchdog timeout).
    pub fn with_renewal_interval(mut self, interval: Duration) -> Self {
        self.renewal_interval = Some(interval);
        self
    }

    /// How many locks one renewal script call extends (default 100).
    pub fn with_renewal_batch_size(mut self, size: usize) -> Self {
        self.renewal_batch_size = size;
        self
    }

    /// Which publish command unlocks use (default [`PublishMode::Auto`]).
    pub fn with_publish_mode(mut self, mode: PublishMode) -> Self {
        self.publish_mode = mode;
        self
    }

    /// A prefix put before every lock name, to match a fleet whose Redisson `NameMapper` adds
    /// one. Channels and latches are derived from the prefixed name, as Redisson does.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// How long to wait for any reply before failing with a timeout (default 3 s).
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How long one connection attempt may take (default 5 s).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Trusts the certificate authority in `pem` (instead of the system's roots) for a
    /// `rediss://` URL: for servers with a private CA.
    ///
    /// ```
    /// # use redisson_lock::Config;
    /// let pem = b"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n".to_vec();
    /// let config = Config::from_url("rediss://redis.internal:6380")?.with_tls_root_cert(pem);
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn with_tls_root_cert(mut self, pem: Vec<u8>) -> Self {
        self.tls_root_cert = Some(pem);
        self
    }

    /// The service this client's connections name (`CLIENT SETNAME
    /// rlock:<client id>:<service>@<host>:<pid>`), so operators and
    /// [`LockClient::inspect`](crate::LockClient::inspect) can tell which host and process
    /// holds a lock. Default: the program's file name.
    ///
    /// ```
    /// let config = redisson_lock::Config::from_url("redis://127.0.0.1/")?
    ///     .with_service_name("billing");
    /// assert_eq!(config.service_name(), "billing");
    /// # Ok::<(), redisson_lock::Error>(())
    /// ```
    pub fn with_service_name(mut self, service: impl Into<String>) -> Self {
        self.service_name = Some(service.into());
        self
    }

    /// The service the client's connections name ([`Config::with_service_name`]).
    pub fn service_name(&self) -> String {
        (self.service_name.clone()).unwrap_or_else(crate::transport::naming::program_name)
    }

    /// The connection info to use, with TLS trust settings applied.
    pub(crate) fn connection_info(&self) -> Result<redis::ConnectionInfo> {
        self.with_transport_settings(self.connection.clone())
    }

    /// `connection` with this configuration's TCP and TLS settings.
    pub(crate) fn with_transport_settings(
        &self,
        connection: redis::ConnectionInfo,
    ) -> Result<redis::ConnectionInfo> {
        // TCP_NODELAY, as Redisson (Netty) sets by default: with Nagle's algorithm on, a command
        // written while an earlier one is unacknowledged (an acquire right after the unlock
        // latch's fire-and-forget DEL) waits for that acknowledgement.
        let tcp = connection.tcp_settings().clone().set_nodelay(true);
        let connection = connection.set_tcp_settings(tcp);
        match &self.tls_root_cert {
            None => Ok(connection),
            #[cfg(feature = "tls")]
            Some(pem) => {
                let certs = redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                };
                redis::Client::build_with_tls(connection, certs)
                    .map(|client| client.get_connection_info().clone())
                    .map_err(|e| Error::Config(format!("unusable TLS settings: {e}")))
            }
            #[cfg(not(feature = "tls"))]
            Some(_) => unreachable!("set only with the tls feature"),
        }
    }

    /// The watchdog timeout.
    pub fn watchdog_timeout(&self) -> Duration {
        self.watchdog_timeout
    }

    /// The renewal interval.
    pub fn renewal_interval(&self) -> Duration {
        self.renewal_interval
            .unwrap_or(self.watchdog_timeout / 3)
            .max(Duration::from_millis(1))
    }

    /// The renewal batch size.
    pub fn renewal_batch_size(&self) -> usize {
        self.renewal_batch_size
    }

    /// The publish mode.
    pub fn publish_mode(&self) -> PublishMode {
        self.publish_mode
    }

    /// The key prefix (empty by default).
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// The response timeout.
    pub fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Whether local hand-off is on (see [`Config::with_local_handoff`]).
    pub fn local_handoff(&self) -> bool {
        self.local_handoff
    }

    /// Checks the values that Redis or the watchdog could not work with.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.fair_lock_wait_timeout < Duration::from_millis(1)
            || self.fair_lock_wait_timeout > MAX_LEASE
        {
            return Err(Error::Config(format!(
                "fair lock wait timeout must be between 1 ms and 100 years, got {:?}",
                self.fair_lock_wait_timeout
            )));
        }
        if self.watchdog_timeout < Duration::from_millis(3) {
            return Err(Error::Config(format!(
                "watchdog timeout must be at least 3 ms, got {:?}",
                self.watchdog_timeout
            )));
        }
        if self.watchdog_timeout > MAX_LEASE {
            return Err(Error::Config(format!(
                "watchdog timeout {:?} is longer than the maximum of 100 years",
                self.watchdog_timeout
            )));
        }
        if self.renewal_interval() >= self.watchdog_timeout {
            return Err(Error::Config(format!(
                "renewal interval {:?} must be shorter than the watchdog timeout {:?}",
                self.renewal_interval(),
                self.watchdog_timeout
            )));
        }
        if self.renewal_batch_size == 0 {
            return Err(Error::Config(
                "renewal batch size must be at least 1".into(),
            ));
        }
        if self.response_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::Config("timeouts must be positive".into()));
        }
        if self.replica_sync.is_some_and(|t| t.as_millis() == 0) {
            // (`WAIT n 0` blocks until the replicas answer, however long that takes.)
            return Err(Error::Config(
                "the replica sync timeout must be at least 1 ms; turn it off with with_replica_sync(None)".into(),
            ));
        }
        Ok(())
    }
}

/// Parses `urls` (at least one), which must agree on TLS, login and database: one login
/// reaches every node.
fn same_login<I>(urls: I, what: &str) -> Result<Vec<redis::ConnectionInfo>>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let infos = urls
        .into_iter()
        .map(|url| parse_url(url.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let login = |info: &redis::ConnectionInfo| {
        let settings = info.redis_settings();
        (
            settings.username().map(str::to_owned),
            settings.password().map(str::to_owned),
            settings.db(),
            matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }),
        )
    };
    match infos.first() {
        None => Err(Error::Config(format!("at least one {what} url is needed"))),
        Some(first) if infos.iter().any(|info| login(info) != login(first)) => Err(Error::Config(
            format!("the {what} urls disagree on TLS, user, password or database"),
        )),
        Some(_) => Ok(infos),
    }
}

fn parse_url(url: &str) -> Result<redis::ConnectionInfo> {
    url.into_connection_info().map_err(|e| {
        Error::Config(format!(
            "invalid redis url ({}): expected redis://[user:password@]host[:port][/db] or rediss://...",
            e.category()
        ))
    })
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redis = self.connection.redis_settings();
        f.debug_struct("Config")
            .field("addr", &self.connection.addr().to_string())
            .field("topology", &DeploymentDebug(&self.deployment))
            .field("db", &redis.db())
            .field("username", &redis.username())
            .field("password", &redis.password().map(|_| "<redacted>"))
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("renewal_interval", &self.renewal_interval())
            .field("renewal_batch_size", &self.renewal_batch_size)
            .field("publish_mode", &self.publish_mode)
            .field("key_prefix", &self.key_prefix)
            .field("response_timeout", &self.response_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("local_handoff", &self.local_handoff)
            .field("service_name", &self.service_name)
            .field("replica_sync", &self.replica_sync)
            .field("replica_sync_required", &self.replica_sync_required)
            .field(
                "tls_root_cert",
                &self.tls_root_cert.as_ref().map(|_| "<pem>"),
            )
            .finish()
    }
}

/// The topology without logins (a `ConnectionInfo`'s `Debug` shows the password).
struct DeploymentDebug<'a>(&'a Deployment);

impl fmt::Debug for DeploymentDebug<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addrs = |infos: &[redis::ConnectionInfo]| -> Vec<String> {
            infos.iter().map(|i| i.addr().to_string()).collect()
        };
        match self.0 {
            Deployment::Standalone => f.write_str("Standalone"),
            Deployment::Cluster { seeds } => f
                .debug_struct("Cluster")
                .field("seeds", &addrs(seeds))
                .finish(),
            Deployment::Sentinel {
                master_name,
                sentinels,
            } => f
                .debug_struct("Sentinel")
                .field("master_name", master_name)
                .field("sentinels", &addrs(sentinels))
                .finish(),
        }
    }
}
