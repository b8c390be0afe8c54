//! Lock events for non-holders ([`Lock::events`](crate::Lock::events)): what a service that
//! does not hold a lock can hear of it, from Java's holders and Rust's alike.

use tokio::sync::mpsc;

use crate::transport::pubsub::key_events::{Heard, Keyspace};

/// Something that happened to a lock, as a non-holder hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockEvent {
    /// The lock was released: its last hold unlocked or it was force-unlocked (by either
    /// side: the unlock's message on the lock's channel, or the key's `del` keyspace event),
    /// or its key was deleted by hand (`DEL`: told only by keyspace events). Where deletions
    /// are not told, a write lock's downgrade to a read lock is told so too (it publishes to
    /// wake the readers, and its key stays).
    Released,
    /// The lock's lease ran out and the server removed its key (the `expired` keyspace event).
    /// The server sends it when it removes the key, which can be a little after the TTL
    /// (expired keys are removed when touched, or by its background sweep, ten times a
    /// second by default).
    Expired,
    /// The events connection was made again (it dropped, the master failed over, the key's
    /// slot moved): an event may have been missed meanwhile. Look at the lock
    /// ([`Lock::is_locked`](crate::Lock::is_locked)) if that matters.
    Resubscribed,
}

impl LockEvent {
    /// `released`, `expired` or `resubscribed`.
    ///
    /// ```
    /// assert_eq!(redisson_lock::LockEvent::Expired.as_str(), "expired");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LockEvent::Released => "released",
            LockEvent::Expired => "expired",
            LockEvent::Resubscribed => "resubscribed",
        }
    }
}

/// Which events the server sends for the lock: its `notify-keyspace-events` as the node
/// serving the key reports it (`None` where it would not say: `CONFIG` refused, as on many
/// managed servers). The lock's own channel carries unlocks whatever the setting.
///
/// | mechanism | tells | misses |
/// | --- | --- | --- |
/// | the lock's channel (always) | unlocks and forced unlocks, by Java or Rust | a `DEL` by hand, expiry, eviction; a spin lock (it publishes nothing) |
/// | keyspace events, `E` + `g` | every deletion: unlocks, forced unlocks, `DEL` | — |
/// | keyspace events, `E` + `x` | a lease run out | — |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSources {
    /// Whether deletions are told by keyspace events (`del`: `E` with `g`).
    pub deletions: Option<bool>,
    /// Whether expiries are told (`expired`: `E` with `x`).
    pub expiries: Option<bool>,
}

/// The events of one lock, from [`Lock::events`](crate::Lock::events): a stream read with
/// [`next`](LockEvents::next). It has a pub/sub connection of its own at the node serving the
/// lock's key (keyspace events are node-local), which follows the key through reconnects,
/// failovers and slot moves ([`LockEvent::Resubscribed`]). Dropping it closes that connection.
///
/// One release is one [`LockEvent::Released`], whichever mechanisms tell it: where the
/// server sends keyspace deletions, the unlock's message is not told again.
///
/// ```no_run
/// use redisson_lock::LockEvent;
/// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
/// let mut events = client.lock("orders:42").events().await?;
/// while let Some(event) = events.next().await {
///     match event {
///         LockEvent::Released | LockEvent::Expired => println!("free now, maybe"),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
pub struct LockEvents {
    heard: mpsc::UnboundedReceiver<Heard>,
    keyspace: Keyspace,
    /// An unlock message told while the server's deletions are unknown: its `del`, if one
    /// follows, is the same release.
    told_unlock: bool,
}

impl std::fmt::Debug for LockEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockEvents")
            .field("sources", &self.sources())
            .finish()
    }
}

impl LockEvents {
    /// Starts from the connection's first subscription (which it has already made).
    pub(crate) async fn new(mut heard: mpsc::UnboundedReceiver<Heard>) -> LockEvents {
        let keyspace = match heard.recv().await {
            Some(Heard::Subscribed { keyspace, .. }) => keyspace,
            _ => Keyspace {
                del: None,
                expired: None,
            },
        };
        LockEvents {
            heard,
            keyspace,
            told_unlock: false,
        }
    }

    /// Which events the server sends for the lock, as its node said at the last
    /// subscription.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let events = client.lock("orders:42").events().await?;
    /// if events.sources().expiries != Some(true) {
    ///     eprintln!("expiries are not told: set notify-keyspace-events Egx");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn sources(&self) -> EventSources {
        EventSources {
            deletions: self.keyspace.del,
            expiries: self.keyspace.expired,
        }
    }

    /// The next event; `None` once the client has shut down.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let mut events = client.lock("orders:42").events().await?;
    /// let first = events.next().await;
    /// # let _ = first; Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: an event not returned stays for the next call.
    pub async fn next(&mut self) -> Option<LockEvent> {
        loop {
            match self.heard.recv().await? {
                Heard::Subscribed { keyspace, .. } => {
                    self.keyspace = keyspace;
                    self.told_unlock = false;
                    return Some(LockEvent::Resubscribed);
                }
                Heard::Message => match self.keyspace.del {
                    // Its `del` tells it (before or after this message).
                    Some(true) => continue,
                    Some(false) => return Some(LockEvent::Released),
                    None => {
                        self.told_unlock = true;
                        return Some(LockEvent::Released);
                    }
                },
                Heard::KeyEvent("del") => {
                    // Deletions are told, whatever the server said.
                    self.keyspace.del = Some(true);
                    if std::mem::take(&mut self.told_unlock) {
                        continue;
                    }
                    return Some(LockEvent::Released);
                }
                Heard::KeyEvent(_) => {
                    self.keyspace.expired = Some(true);
                    return Some(LockEvent::Expired);
                }
            }
        }
    }
}
