//! The reentrant lock (Redisson `RLock`): acquiring, waiting, and the read-only queries.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::engine::acquire::{Granted, Target};
use crate::engine::registry::Lease;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::kinds::guard::LockGuard;
use crate::names;
use crate::observe::{About, Unlocked};
use crate::owner::Owner;
use crate::raw::rlock::RLOCK;
use crate::raw::{KeyKind, Kind, LockOptions};

/// A handle on one named lock, laid out exactly like Redisson's lock of the kind it was made
/// for: `RLock` ([`LockClient::lock`](crate::LockClient::lock)), or a fair, spin,
/// non-reentrant lock or a half of a read-write lock (their constructors on
/// [`LockClient`](crate::LockClient)).
///
/// Cheap to clone; holds no lock by itself. Acquiring returns a [`LockGuard`]. Holds are
/// counted per [`Owner`]: an acquire by an owner that already holds the lock re-enters it
/// (the count goes up; a non-reentrant kind refuses it), and the lock is free again when every
/// hold is released.
///
/// Which method to use:
/// - [`lock`](Lock::lock): wait as long as it takes; the watchdog keeps the lock while held.
/// - [`lock_with_lease`](Lock::lock_with_lease): wait; the lock expires after the lease
///   unless released first (no watchdog).
/// - [`try_lock`](Lock::try_lock): one attempt, no waiting.
/// - [`try_lock_for`](Lock::try_lock_for) / [`try_lock_for_with_lease`](Lock::try_lock_for_with_lease):
///   wait at most the given time.
///
/// How a waiter waits depends on the kind the handle was made for. An RLock's
/// ([`LockClient::lock`](crate::LockClient::lock)) subscribes to the lock's channel and is
/// woken by the unlock message, with a timer on the holder's remaining lease as a fallback;
/// waiters of one client share the subscription, a waiter that finds the lock held by another
/// owner of its own client waits for that owner's unlock without sending a doomed attempt, and
/// that owner's release hands the lock straight to the first of them in the same write as the
/// unlock while no other client listens (see
/// [`Config::with_local_handoff`](crate::Config::with_local_handoff)). A
/// [fair lock](crate::LockClient::fair_lock)'s waiters queue in Redis and each is woken on a
/// channel of its own when it reaches the head, with no hand-off; a
/// [spin lock](crate::LockClient::spin_lock)'s poll with a back-off and subscribe to nothing.
///
/// ```no_run
/// use std::time::Duration;
/// use redisson_lock::{LockClient, Owner};
///
/// # async fn demo() -> redisson_lock::Result<()> {
/// let client = LockClient::connect("redis://127.0.0.1:6379").await?;
/// let lock = client.lock("inventory");
///
/// // Nested code re-enters without passing the guard around:
/// Owner::new().scope(async {
///     let outer = lock.lock().await?;
///     let inner = lock.lock().await?;          // same owner: re-enters
///     assert_eq!(lock.hold_count().await?, 2);
///     inner.unlock().await?;
///     outer.unlock().await
/// }).await?;
///
/// // Bounded wait with a fixed lease:
/// if let Some(guard) = lock.try_lock_for_with_lease(Duration::from_secs(2), Duration::from_secs(10)).await? {
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    shared: Arc<Engine>,
    name: Arc<str>,
    /// The name with the key prefix; the same allocation as `name` when there is no prefix.
    key: Arc<str>,
    owner: Option<Owner>,
    /// The kind's protocol: `RLOCK`, or another kind's (a `FencedLock` wraps a `Lock`).
    raw: &'static Kind,
    /// This handle's own settings for its kind.
    options: LockOptions,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("key", &self.key)
            .field("owner", &self.owner)
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(shared: Arc<Engine>, name: String) -> Self {
        let name: Arc<str> = name.into();
        let key = match shared.config.key_prefix() {
            "" => name.clone(),
            prefix => format!("{prefix}{name}").into(),
        };
        let options = LockOptions::of(&RLOCK, &shared.config);
        Lock {
            shared,
            name,
            key,
            owner: None,
            raw: &RLOCK,
            options,
        }
    }

    /// The same lock driven by another kind's protocol (its keys and scripts).
    pub(crate) fn of_kind(mut self, raw: &'static Kind) -> Self {
        self.raw = raw;
        self.options = LockOptions::of(raw, &self.shared.config);
        self
    }

    /// The same lock whose waiters, if its kind polls, pause by `backoff`.
    pub(crate) fn with_backoff(mut self, backoff: crate::BackOff) -> Self {
        if let LockOptions::Poll { backoff: pauses } = &mut self.options {
            *pauses = backoff;
        }
        self
    }

    /// The same lock, always acquired and queried as `owner` (the equivalent of Redisson's
    /// `lockAsync(threadId)`), whatever scope it is used in.
    ///
    /// ```no_run
    /// use redisson_lock::Owner;
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let me = Owner::new();
    /// let a = client.lock("cart").with_owner(me).lock().await?;
    /// let b = client.lock("cart").with_owner(me).lock().await?; // re-enters
    /// # drop((a, b)); Ok(()) }
    /// ```
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The lock's name, as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Redis key of the lock (the name with the configured prefix).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The id of the client the handle belongs to.
    pub(crate) fn client_id(&self) -> &str {
        &self.shared.client_id
    }

    /// The client's engine.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.shared
    }

    /// What the lock's scripts and queries go through.
    pub(crate) fn protocol(&self) -> &crate::raw::Protocol {
        &self.shared.core.protocol
    }

    /// The owner queries and acquires use here: the bound owner, else the scope's.
    fn current_owner(&self) -> Option<Owner> {
        self.owner.or_else(Owner::current)
    }

    pub(crate) fn check(&self) -> Result<()> {
        self.check_with(|sample_id| {
            let mut derived = self.raw.derived_keys(&self.key);
            derived.extend([
                self.raw.channel(&self.key),
                self.raw
                    .waiter_channel(&self.key, &format!("{sample_id}:1")),
                names::acquire_latch(&self.key, sample_id),
                names::unlock_latch(&self.key, sample_id),
            ]);
            derived
        })
    }

    /// The client is open, the name is not empty, and on a cluster every key and channel
    /// `derived` names shares the key's slot (a script must touch them together): what every
    /// primitive over this handle's name checks before sending anything. `derived` is given a
    /// sample request id (latches end in a random one: any stands for all of them), and is
    /// called on a cluster only: every acquire passes here.
    pub(crate) fn check_with(&self, derived: impl FnOnce(&str) -> Vec<String>) -> Result<()> {
        self.shared.check_open()?;
        if self.name.is_empty() {
            return Err(Error::InvalidArgument("lock name must not be empty".into()));
        }
        if !self.shared.core.protocol.connection().is_cluster() {
            return Ok(());
        }
        let derived = derived(&"0".repeat(32));
        let key_slot = names::cluster_slot(&self.key);
        match derived
            .into_iter()
            .map(|name| (names::cluster_slot(&name), name))
            .find(|(slot, _)| *slot != key_slot)
        {
            None => Ok(()),
            Some((derived_slot, derived)) => Err(Error::CrossSlot {
                lock: self.name.to_string(),
                key_slot,
                derived,
                derived_slot,
            }),
        }
    }

    crate::kinds::acquire::acquire_methods!(
        LockGuard,
        "let lock = client.lock(\"orders:42\");",
        "Cancel safe: dropping the future at any point leaves no hold behind (an attempt in \
         flight is finished in the background and released if it succeeded)."
    );

    /// Runs `body` under the lock, the safe way to use a lock in one call: acquires it
    /// (waiting as long as it takes, watchdog-renewed, like [`Lock::lock`]), runs the body
    /// raced against the lock-lost signal, and releases the lock when the body is done.
    ///
    /// If the lock is lost while the body runs (renewal found it gone, a whole lease passed
    /// unconfirmed, or the process was frozen past its lease), the body's future is dropped at
    /// once, so its work stops at its next await point, and the call returns
    /// [`Error::LockLost`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// # async fn charge(_order: u32) -> u32 { 0 }
    /// let receipt = client.lock("orders:42").with_lock(|| async {
    ///     charge(42).await // only ever runs while the lock is held
    /// }).await?;
    /// # let _ = receipt; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Lock::lock`] for the acquire; [`Error::LockLost`] if the lock was lost while the
    /// body ran, or [`Error::NotOwner`] if the final unlock found it gone (the body may have
    /// run partly without the lock: treat its effects as unprotected). A connection error on
    /// the final unlock is not an error of the body's: it is logged and the body's output
    /// returned (the lock then ends with its lease, never renewed).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the body and releases the lock in the
    /// background, as dropping a guard does.
    pub async fn with_lock<F, Fut, T>(&self, body: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.lock().await?;
        run_guarded(&self.name, guard, body()).await
    }

    /// Deletes the lock whoever holds it and wakes its waiters; `true` if it was held.
    /// Holders find out at their next renewal (their lock-lost signal fires).
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds something else (it is left alone).
    pub async fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        let observe = &self.shared.core.registry.observe;
        let span = observe.force_unlock_span(self.about());
        let forced = (self.raw)
            .force_unlock(&self.shared.core.protocol, &self.key)
            .instrument(span.clone())
            .await
            .map_err(|e| Error::from_redis(&self.name, e));
        let result = match forced {
            Ok(true) => Unlocked::Released,
            Ok(false) => Unlocked::NotHeld,
            Err(_) => Unlocked::Failed,
        };
        observe.force_unlock_ended(&span, self.about(), result);
        forced
    }

    /// What this lock's spans and events carry.
    fn about(&self) -> About<'_> {
        About {
            client_id: &self.shared.client_id,
            lock: &self.name,
            key: &self.key,
            kind: self.raw.name(),
        }
    }

    /// The lock's events, for a service that does not hold it (Redisson's
    /// `addListener(DeletedObjectListener / ExpiredObjectListener)`, 3.43+): released,
    /// expired, and resubscribed (an event may have been missed). Subscribed before this
    /// returns, so nothing after it is missed. What is told depends on the server: see
    /// [`LockEvents`](crate::LockEvents) and [`EventSources`](crate::EventSources); with
    /// `notify-keyspace-events` holding `Egx` (what Redisson's listeners need) every release,
    /// hand-made `DEL` and expiry is told, and without it the unlocks (their messages).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::LockClient) -> redisson_lock::Result<()> {
    /// let mut events = client.lock("orders:42").events().await?;
    /// if let Some(event) = events.next().await {
    ///     println!("orders:42 {}", event.as_str());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Connection`] if the key's node cannot be reached or refuses the subscription;
    /// [`Error::InvalidArgument`] for an empty name; [`Error::Shutdown`].
    pub async fn events(&self) -> Result<crate::LockEvents> {
        self.check()?;
        let protocol = self.protocol();
        let events = crate::transport::pubsub::key_events::KeyEvents::new(
            &self.shared.config,
            protocol.connection().clone(),
            self.key.to_string(),
            self.raw.channel(&self.key),
            protocol.publish_command() == "spublish",
        )?;
        let heard = events.start(self.shared.tasks().clone()).await?;
        Ok(crate::LockEvents::new(heard).await)
    }

    /// Whether any owner holds the lock.
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds something else.
    pub async fn is_locked(&self) -> Result<bool> {
        self.check()?;
        let protocol = &self.shared.core.protocol;
        if let Some(query) = self.raw.is_locked(protocol, &self.key) {
            return query.await.map_err(|e| Error::from_redis(&self.name, e));
        }
        match protocol.key_kind(&self.key).await {
            Ok(KeyKind::Absent) => Ok(false),
            Ok(KeyKind::Hash) => Ok(true),
            Ok(KeyKind::Other) => Err(Error::WrongType {
                lock: self.name.to_string(),
            }),
            Err(e) => Err(Error::from_redis(&self.name, e)),
        }
    }

    /// Whether `owner` (of this client) holds the lock.
    pub async fn is_held_by(&self, owner: Owner) -> Result<bool> {
        Ok(self.hold_count_of(owner).await? > 0)
    }

    /// Whether the current owner (bound with [`Lock::with_owner`], else the enclosing
    /// [`Owner::scope`]) holds the lock; `false` outside any owner.
    pub async fn is_held_by_current(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// The current owner's hold count (0 outside any owner, or when not held).
    pub async fn hold_count(&self) -> Result<u32> {
        match self.current_owner() {
            Some(owner) => self.hold_count_of(owner).await,
            None => {
                self.check()?;
                Ok(0)
            }
        }
    }

    /// `owner`'s hold count on this lock.
    pub async fn hold_count_of(&self, owner: Owner) -> Result<u32> {
        self.check()?;
        let field = owner.field(&self.shared.client_id);
        self.shared
            .core
            .protocol
            .hold_count(&self.key, &self.raw.hash_field(&field))
            .await
            .map_err(|e| Error::from_redis(&self.name, e))
    }

    /// The lock's remaining lease: `None` when it is not held; [`Duration::MAX`] for a key
    /// without a TTL (never written by Redisson or this crate).
    pub async fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.check()?;
        let pttl = self
            .shared
            .core
            .protocol
            .pttl(&self.key)
            .await
            .map_err(|e| Error::from_redis(&self.name, e))?;
        Ok(match pttl {
            -2 => None,
            ms if ms < 0 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms as u64)),
        })
    }

    /// The acquire loop shared by every acquiring method. `wait: None` waits forever.
    pub(crate) async fn acquire_within(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<LockGuard>> {
        // (An RLock issues no fencing token.)
        let granted = self.acquire_granted(wait, lease).await?;
        Ok(granted.map(|granted| LockGuard::new(granted.hold)))
    }

    /// The engine's acquire loop for this lock's kind: the hold and its token, if the kind
    /// issues one.
    pub(crate) async fn acquire_granted(
        &self,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<Granted>> {
        let owner = self.current_owner().unwrap_or_else(Owner::new);
        self.acquire_as(owner, 1, wait, lease).await
    }

    /// The engine's acquire loop for a hold of `owner` taking `permits` (1 for a lock; a
    /// semaphore's acquire takes its count, as an owner of its own).
    pub(crate) async fn acquire_as(
        &self,
        owner: Owner,
        permits: u32,
        wait: Option<Duration>,
        lease: Lease,
    ) -> Result<Option<Granted>> {
        self.check()?;
        let field: Arc<str> = owner.field(&self.shared.client_id).into();
        let target = Target {
            raw: self.raw,
            shared: &self.shared,
            name: &self.name,
            key: &self.key,
            options: self.options,
            permits,
        };
        target.acquire(owner, field, wait, lease).await
    }
}

/// Runs `body` while `guard` holds, dropping it the moment the lock is lost, then releases
/// (the shared end of every kind's `with_lock`).
pub(crate) async fn run_guarded<T>(
    name: &str,
    guard: LockGuard,
    body: impl Future<Output = T>,
) -> Result<T> {
    let output = tokio::select! {
        biased;
        _ = guard.lost() => None,
        output = body => Some(output),
    };
    match output {
        None => Err(Error::LockLost {
            lock: name.to_string(),
            owner: guard.owner_field().to_string(),
        }),
        Some(output) => match guard.unlock().await {
            Ok(()) => Ok(output),
            Err(err) if err.is_connection() => {
                tracing::warn!(lock = %name, error = %err, "unlock after with_lock failed; the lock ends with its lease");
                Ok(output)
            }
            Err(err) => Err(err),
        },
    }
}
