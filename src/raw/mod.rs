//! What goes to Redis, per lock kind: the scripts (`scripts/lua/*.lua`), their KEYS and ARGV,
//! and how their replies map to outcomes. Every script and reply is described in
//! `docs/PROTOCOL.md`.
//!
//! The engine drives every kind through [`RawLock`] (in the spirit of `lock_api`'s raw traits):
//! it never names a kind's scripts or channel itself. A new kind is an implementation here,
//! its `.lua` files, and a constructor in `client.rs` (plus a thin public type in `kinds/`
//! when it adds methods, as the fenced lock does) that hands its `&'static Kind` and its
//! [`LockOptions`] to the engine; the acquire loop, renewal and release stay as they are.
//! [`protocol`] is what every kind's scripts go through; [`rlock::RLOCK`] is Redisson's
//! `RLock`, [`fenced::FENCED`] its `RFencedLock`, [`read_write`] the two halves of its
//! `RReadWriteLock`, [`fair`] its `RFairLock`, [`spin`] its `RSpinLock` (each with its
//! non-reentrant variant where Redisson has one).
//!
//! Capabilities only some kinds have are sub-traits reached through the kind, as `lock_api`
//! pairs them: [`HandOff`] (a release acquiring for a waiter of the same client in its write).

pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod latch;
pub(crate) mod permit;
pub(crate) mod protocol;
pub(crate) mod read_write;
pub(crate) mod rlock;
pub(crate) mod semaphore;
pub(crate) mod spent;
pub(crate) mod spin;

pub use spin::BackOff;

use std::borrow::Cow;

use redis::RedisResult;

use crate::future::BoxFuture;
pub(crate) use crate::transport::pubsub::{Reads, Wake};
pub(crate) use protocol::{
    now_ms, AcquireArgs, Attempt, Call, KeyKind, Pipelined, Protocol, Release, UnlockArgs,
};
use rlock::AcquireScript;

/// A lock kind as the engine keeps it: a thin `&'static Kind` is 8 bytes in every guard and
/// unlock, where a `&dyn RawLock` would take 16.
#[derive(Debug)]
pub(crate) struct Kind(pub(crate) &'static dyn RawLock);

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Kind {}

impl std::ops::Deref for Kind {
    type Target = dyn RawLock;

    fn deref(&self) -> &(dyn RawLock + 'static) {
        self.0
    }
}

/// How a kind's waiters learn that the lock may be free: one choice per kind.
#[derive(Clone, Copy)]
pub(crate) enum Waiters<'a> {
    /// Every waiter listens on the lock's [channel](RawLock::channel); an unlock's message
    /// wakes them as the kind [reads](RawLock::reads) it, and the holder's remaining lease
    /// bounds each sleep in case it is missed. Another owner of this client holding the lock
    /// is sure to publish its unlock where a waiter listens.
    Broadcast,
    /// The kind queues its waiters in Redis and each listens on a channel of its own: an
    /// unlock wakes only the head of the queue (a fair lock). A waiter cannot count on another
    /// local owner's unlock (it must make its attempt, which queues it, whoever holds the
    /// lock), and one that gives up is withdrawn from the queue.
    Queue(&'a dyn Queueing),
    /// No messages (Redisson's spin lock publishes none): attempts spaced by the lock's
    /// [`BackOff`] ([`LockOptions::Poll`]).
    Poll,
}

impl std::fmt::Debug for Waiters<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Waiters::Broadcast => "Broadcast",
            Waiters::Queue(_) => "Queue",
            Waiters::Poll => "Poll",
        })
    }
}

/// What a kind whose waiters queue in Redis adds ([`Waiters::Queue`]): each waiter's channel,
/// and taking a waiter out of the queue.
pub(crate) trait Queueing: Send + Sync {
    /// The channel the waiter `field` of `key` listens on.
    fn waiter_channel(&self, key: &str, field: &str) -> String;

    /// Whether `channel` is one of `key`'s waiters' channels.
    fn is_waiter_channel(&self, key: &str, channel: &str) -> bool;

    /// Takes a waiter that gave up (its wait ran out, its call was cancelled or failed) out of
    /// the queue. `queue_wait_ms` is the place the call reserved
    /// ([`AcquireArgs::queue_wait_ms`]). Idempotent: withdrawing a waiter that is not queued
    /// changes nothing. The future owns what it needs: a cancelled waiter's is finished by
    /// the background task.
    fn withdraw(
        &self,
        protocol: &Protocol,
        key: &str,
        field: &str,
        queue_wait_ms: u64,
    ) -> BoxFuture<'static, RedisResult<()>>;
}

/// What one lock handle adds to its kind's protocol, by how the kind's waiters wait: each
/// handle carries its own kind's setting and no other. The kind stays a static protocol; its
/// calls carry these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockOptions {
    /// [`Waiters::Broadcast`]: nothing to add.
    Broadcast,
    /// [`Waiters::Queue`]: how long a waiter keeps its place when its call waits without end
    /// (a bounded call reserves its own wait); per client, Redisson's `fairLockWaitTimeout`.
    Queue { queue_wait: std::time::Duration },
    /// [`Waiters::Poll`]: the pauses between a waiter's attempts; per lock, Redisson's
    /// `getSpinLock(name, backOff)`.
    Poll { backoff: BackOff },
}

impl LockOptions {
    /// The setting a handle of `kind` starts with, from the client's `config`.
    pub(crate) fn of(kind: &Kind, config: &crate::Config) -> LockOptions {
        match kind.waiters() {
            Waiters::Broadcast => LockOptions::Broadcast,
            Waiters::Queue(_) => LockOptions::Queue {
                queue_wait: config.fair_lock_wait_timeout(),
            },
            Waiters::Poll => LockOptions::Poll {
                backoff: BackOff::default(),
            },
        }
    }

    /// A polling kind's back-off (the default for the others, which never poll).
    pub(crate) fn backoff(self) -> BackOff {
        match self {
            LockOptions::Poll { backoff } => backoff,
            _ => BackOff::default(),
        }
    }

    /// A queueing kind's reservation for a wait without end (none for the others, which
    /// queue nothing).
    pub(crate) fn queue_wait(self) -> std::time::Duration {
        match self {
            LockOptions::Queue { queue_wait } => queue_wait,
            _ => std::time::Duration::ZERO,
        }
    }
}

/// One lock kind's protocol, as the engine drives it.
pub(crate) trait RawLock: std::fmt::Debug + Send + Sync + 'static {
    /// The kind's name in events and metrics (`lock`, `fenced`, `read`, `write`, ...).
    fn name(&self) -> &'static str;

    /// The channel `key`'s unlocks publish on (for kinds with a channel per waiter, the base
    /// that each waiter's channel extends): RLock's unless the kind has its own.
    fn channel(&self, key: &str) -> String {
        crate::names::lock_channel(key)
    }

    /// How the kind's waiters learn that the lock may be free.
    fn waiters(&self) -> Waiters<'_> {
        Waiters::Broadcast
    }

    /// How the kind reads a message on its channel: Redisson's lock messages (`0` wakes one
    /// waiter, `1` all) unless the kind says otherwise.
    fn reads(&self) -> Reads {
        rlock::lock_message
    }

    /// The channel the waiter `field` of `key` listens on: the lock's channel, or one of its
    /// own where the kind queues its waiters.
    fn waiter_channel(&self, key: &str, field: &str) -> String {
        match self.waiters() {
            Waiters::Queue(queue) => queue.waiter_channel(key, field),
            Waiters::Broadcast | Waiters::Poll => self.channel(key),
        }
    }

    /// Whether `channel` is where a waiter of `key` listens: wakes go there when a holder of
    /// this client loses the lock (its unlock message will never come).
    fn is_waiter_channel(&self, key: &str, channel: &str) -> bool {
        channel == self.channel(key)
            || matches!(self.waiters(), Waiters::Queue(queue) if queue.is_waiter_channel(key, channel))
    }

    /// The channel where a message tells a holder its lock may be gone (a forced unlock
    /// publishes there), watched while held when prompt loss detection is on; `None` for
    /// kinds whose unlocks publish nowhere a holder listens (spin, fair).
    fn loss_channel(&self, key: &str) -> Option<String> {
        Some(self.channel(key))
    }

    /// The keys of `key`'s lock other than the lock key, its channel and its latches (a
    /// fenced lock's token counter; later a fair lock's queue): on a cluster every one must
    /// share the lock key's slot, so names are checked against them before anything is sent.
    fn derived_keys(&self, _key: &str) -> Vec<String> {
        Vec::new()
    }

    /// The kind's local hand-off, if a release may hand the lock straight to a waiter of the
    /// same client (a fair lock must never let a local waiter jump its queue, and a spin
    /// lock's waiters are not parked).
    fn hand_off(&self) -> Option<&dyn HandOff> {
        None
    }

    /// Whether several owners may hold the lock at once (a read lock): another owner of this
    /// client holding it is then no reason for a waiter to wait for that owner's unlock.
    fn is_shared(&self) -> bool {
        false
    }

    /// The hash field an owner's holds are counted in, given its owner field
    /// (`<client-uuid>:<owner>`): the owner field itself, or a writer's `<field>:write`.
    fn hash_field<'a>(&self, field: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(field)
    }

    /// Whether each hold's lease runs from its own acquire, so that a later hold or a partial
    /// release of the same owner does not extend the earlier holds' (a read lock's per-hold
    /// timeout keys). The registry then keeps the earliest lease deadline.
    fn keeps_first_lease(&self) -> bool {
        false
    }

    /// Whether the lock is held, for kinds that say so otherwise than by the key existing as
    /// a hash (a read-write lock's halves); `None`: the key's existence answers.
    fn is_locked<'a>(
        &'a self,
        _protocol: &'a Protocol,
        _key: &'a str,
    ) -> Option<BoxFuture<'a, RedisResult<bool>>> {
        None
    }

    /// The acquire script [`acquire`](RawLock::acquire) sends, and a local hand-off's
    /// acquire behind an unlock: RLock's unless the kind has its own.
    fn acquire_script(&self) -> &'static AcquireScript {
        &rlock::RLOCK_ACQUIRE
    }

    /// One acquire attempt, idempotent per `args.latch`. The future owns what it needs, so a
    /// cancelled caller can hand it to the background task.
    fn acquire(
        &self,
        protocol: &Protocol,
        args: AcquireArgs<'_>,
    ) -> BoxFuture<'static, RedisResult<Attempt>> {
        Box::pin(rlock::acquire(self.acquire_script(), protocol, args))
    }

    /// Releases one hold, idempotently per `args.latch`: RLock's unlock unless the kind has
    /// its own.
    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>> {
        Box::pin(rlock::unlock(protocol, args))
    }

    /// Deletes `key` whoever holds it and tells its waiters (on the kind's
    /// [channel](RawLock::channel)). `true` if it existed. RLock's unless the kind has its own.
    fn force_unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> BoxFuture<'a, RedisResult<bool>> {
        Box::pin(async move { rlock::force_unlock(protocol, key, &self.channel(key)).await })
    }

    /// Whether [`renew_call`](RawLock::renew_call) can renew keys of different slots in one
    /// call on a cluster (`across`): its script touches only the keys it is handed, each one
    /// the node does not serve answering [`Renewal::Elsewhere`]. `RLock`'s renewal can, and so
    /// every kind that renews as it does.
    fn renews_across_slots(&self) -> bool {
        true
    }

    /// The call that renews each `(key, field)` still held by its field to `lease_ms` (keys
    /// the topology lets share a call: with `across`, any keys one cluster master serves,
    /// else one slot's). Encoded now, so the watchdog can send it alone or pipeline it with
    /// others to the same node.
    /// RLock's renewal unless the kind has its own.
    fn renew_call(&self, lease_ms: u64, entries: &[(&str, &str)], across: bool) -> Call {
        rlock::renew_call(lease_ms, entries, across)
    }

    /// The answer of a [`renew_call`](RawLock::renew_call) of `entries` entries: one
    /// [`Renewal`] per entry (`1` renewed, `0` gone, `-1` elsewhere, as RLock's renewal
    /// answers, unless the kind reads its own).
    fn renewed(&self, reply: redis::Value, entries: usize) -> RedisResult<Vec<Renewal>> {
        rlock::renewed(redis::FromRedisValue::from_redis_value(reply)?, entries)
    }
}

/// One key's answer in a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// Still held by its owner: its TTL was reset.
    Renewed,
    /// No longer held by that owner.
    Gone,
    /// Not served by the node the call ran on (a cluster key whose slot moved, or is
    /// migrating and the key already left): nothing was done to it. Never a loss: it is
    /// sent again to its master.
    Elsewhere,
}

/// A kind whose release may hand the lock to a parked waiter of the same client, in the
/// unlock's own write ([`RawLock::hand_off`]): RLock's unlock, then the kind's
/// [acquire script](RawLock::acquire_script) for the waiter, unless the kind sends its own.
pub(crate) trait HandOff: RawLock {
    /// The unlock in one write with a waiter's acquire and a count of the channel's listeners.
    fn unlock_handing_off<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
        then_acquire: Option<AcquireArgs<'a>>,
    ) -> BoxFuture<'a, RedisResult<Pipelined>> {
        let script = self.acquire_script();
        Box::pin(rlock::unlock_and_count(
            script,
            protocol,
            args,
            then_acquire,
        ))
    }
}
