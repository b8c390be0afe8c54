//! Client configuration: where Redis is, and the knobs that must match a Redisson fleet.

use std::fmt;
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::error::{Error, Result};

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
    /// What Redisson does by default for this deployment: `PUBLISH` on a standalone server.
    #[default]
    Auto,
    /// Always `PUBLISH` / `SUBSCRIBE`.
    Publish,
    /// Always sharded `SPUBLISH` / `SSUBSCRIBE` (Redis ≥ 7).
    SPublish,
}

impl PublishMode {
    /// The mode actually used against a standalone server.
    pub(crate) fn resolved(self) -> PublishMode {
        match self {
            PublishMode::Auto => PublishMode::Publish,
            other => other,
        }
    }

    /// The publish command name as the unlock scripts receive it.
    pub(crate) fn publish_command(self) -> &'static str {
        match self.resolved() {
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
    pub(crate) connection: redis::ConnectionInfo,
    watchdog_timeout: Duration,
    renewal_interval: Option<Duration>,
    renewal_batch_size: usize,
    publish_mode: PublishMode,
    key_prefix: String,
    response_timeout: Duration,
    connect_timeout: Duration,
    tls_root_cert: Option<Vec<u8>>,
    local_handoff: bool,
}

impl Config {
    /// Redisson's default lock watchdog timeout: 30 s.
    pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
    /// Redisson's renewal batch size: 100 keys per script call.
    pub const DEFAULT_RENEWAL_BATCH_SIZE: usize = 100;

    /// A configuration for the server at `url` (`redis://[user:password@]host[:port][/db]` or
    /// `rediss://...`), with Redisson's defaults for everything else.
    ///
    /// # Errors
    /// [`Error::Config`] if the URL cannot be parsed (the message never contains the password).
    pub fn from_url(url: &str) -> Result<Self> {
        let connection = url
            .into_connection_info()
            .map_err(|e| {
                Error::Config(format!(
                    "invalid redis url ({}): expected redis://[user:password@]host[:port][/db] or rediss://...",
                    e.category()
                ))
            })?;
        Ok(Self::from_connection_info(connection))
    }

    /// A configuration from redis-rs connection info.
    pub fn from_connection_info(connection: redis::ConnectionInfo) -> Self {
        Config {
            connection,
            watchdog_timeout: Self::DEFAULT_WATCHDOG_TIMEOUT,
            renewal_interval: None,
            renewal_batch_size: Self::DEFAULT_RENEWAL_BATCH_SIZE,
            publish_mode: PublishMode::Auto,
            key_prefix: String::new(),
            response_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(5),
            tls_root_cert: None,
            local_handoff: true,
        }
    }

    /// The lease of a lock taken without an explicit one, renewed by the watchdog (default 30 s,
    /// Redisson's `lockWatchdogTimeout`). Must be at least 3 ms.
    pub fn with_watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
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

    /// The connection info to use, with TLS trust settings applied.
    pub(crate) fn connection_info(&self) -> Result<redis::ConnectionInfo> {
        // TCP_NODELAY, as Redisson (Netty) sets by default: with Nagle's algorithm on, a command
        // written while an earlier one is unacknowledged (an acquire right after the unlock
        // latch's fire-and-forget DEL) waits for that acknowledgement.
        let tcp = self.connection.tcp_settings().clone().set_nodelay(true);
        let connection = self.connection.clone().set_tcp_settings(tcp);
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
        if self.watchdog_timeout < Duration::from_millis(3) {
            return Err(Error::Config(format!(
                "watchdog timeout must be at least 3 ms, got {:?}",
                self.watchdog_timeout
            )));
        }
        if self.watchdog_timeout > crate::engine::holds::MAX_LEASE {
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
        Ok(())
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redis = self.connection.redis_settings();
        f.debug_struct("Config")
            .field("addr", &self.connection.addr().to_string())
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
            .field(
                "tls_root_cert",
                &self.tls_root_cert.as_ref().map(|_| "<pem>"),
            )
            .finish()
    }
}
