//! What goes to Redis, per lock kind: the scripts (`scripts/lua/*.lua`), their KEYS and ARGV,
//! and how their replies map to outcomes. Every script and reply is described in
//! `docs/PROTOCOL.md`.
//!
//! The engine drives every kind through [`RawLock`] (in the spirit of `lock_api`'s raw traits):
//! it never names a kind's scripts or channel itself. A new kind (fenced, fair, read-write,
//! spin) is an implementation here, its `.lua` files, and a thin public type in `kinds/` that
//! hands its `&'static Kind` to the engine; the acquire loop, renewal and release stay
//! as they are. [`rlock::RLOCK`] is Redisson's `RLock`.

pub(crate) mod rlock;

use redis::RedisResult;

use crate::engine::BoxFuture;
use rlock::{AcquireArgs, Attempt, Pipelined, Protocol, Release, UnlockArgs};

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

/// One lock kind's protocol, as the engine drives it.
pub(crate) trait RawLock: std::fmt::Debug + Send + Sync + 'static {
    /// The channel `key`'s unlocks publish on and its waiters listen to.
    fn channel(&self, key: &str) -> String;

    /// Whether a release may hand the lock straight to a waiter of the same client (a fair
    /// lock must never let a local waiter jump its queue).
    fn hands_off(&self) -> bool;

    /// One acquire attempt, idempotent per `args.latch`. The future owns what it needs, so a
    /// cancelled caller can hand it to the background task.
    fn acquire(
        &self,
        protocol: &Protocol,
        args: AcquireArgs<'_>,
    ) -> BoxFuture<'static, RedisResult<Attempt>>;

    /// Releases one hold, idempotently per `args.latch`.
    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>>;

    /// The unlock in one write with a waiter's acquire and a count of the channel's listeners
    /// (local hand-off; only asked of kinds that [`hand off`](RawLock::hands_off)).
    fn unlock_handing_off<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
        then_acquire: Option<AcquireArgs<'a>>,
    ) -> BoxFuture<'a, RedisResult<Pipelined>>;

    /// Renews each `(key, field)` still held by its field to `lease_ms`: one bool per entry.
    fn renew(
        &self,
        protocol: &Protocol,
        lease_ms: u64,
        entries: &[(&str, &str)],
    ) -> BoxFuture<'static, RedisResult<Vec<bool>>>;
}
