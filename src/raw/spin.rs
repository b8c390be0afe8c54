//! Redisson's `RSpinLock`: RLock's hash, acquire and renewal, but no channel at all. Its unlock
//! and forced unlock publish nothing (`scripts/lua/spin_unlock.lua`,
//! `spin_force_unlock.lua`), and its waiters poll with a back-off ([`BackOff`]), so it costs
//! no subscription; an RLock waiter on the same key notices a spin release only by its timer,
//! as in Redisson.

use std::time::Duration;

use redis::RedisResult;

use super::protocol::{Protocol, Release, Script, UnlockArgs};
use super::rlock;
use super::{RawLock, Waiters};
use crate::future::BoxFuture;

static UNLOCK: Script = Script::new(include_str!("../../scripts/lua/spin_unlock.lua"));
static FORCE_UNLOCK: Script = Script::new(include_str!("../../scripts/lua/spin_force_unlock.lua"));

/// The pauses between a [spin lock](crate::LockClient::spin_lock)'s attempts while it waits:
/// Redisson's `LockOptions.ExponentialBackOff` (the default: 1 ms, doubling plus a random
/// 0..n ms after the n-th failure, at most 128 ms) or `ConstantBackOff` (64 ms plus a random
/// 0..n ms).
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::BackOff;
///
/// let fast = BackOff::exponential(Duration::from_millis(1), Duration::from_millis(32), 2);
/// let slow = BackOff::constant(Duration::from_millis(200));
/// assert_ne!(fast, slow);
/// assert_eq!(BackOff::default(), BackOff::exponential(Duration::from_millis(1), Duration::from_millis(128), 2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackOff {
    initial: Duration,
    max: Duration,
    multiplier: u32,
}

impl Default for BackOff {
    fn default() -> Self {
        BackOff::exponential(Duration::from_millis(1), Duration::from_millis(128), 2)
    }
}

impl BackOff {
    /// Starts at `initial`, then each pause is the last times `multiplier` plus a random
    /// 0..n ms after the n-th failed attempt, never more than `max`. Zero values are taken
    /// as 1 (ms, or times).
    pub fn exponential(initial: Duration, max: Duration, multiplier: u32) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        BackOff {
            initial,
            max: max.max(initial),
            multiplier: multiplier.max(1),
        }
    }

    /// The same pause every time (plus a random 0..n ms after the n-th failed attempt, so
    /// waiters spread out). A zero delay is taken as 1 ms.
    pub fn constant(delay: Duration) -> Self {
        BackOff::exponential(delay, delay, 1)
    }

    /// The pause after `pause` when the attempt that followed it was the `failures`-th to
    /// fail.
    pub(crate) fn next(&self, pause: Duration, failures: u32) -> Duration {
        let jitter = Duration::from_millis(jitter_ms(failures));
        (pause * self.multiplier + jitter).min(self.max)
    }

    /// The first pause.
    pub(crate) fn initial(&self) -> Duration {
        self.initial
    }
}

/// A random 0..failures ms (Redisson's `nextInt(++fails)`).
fn jitter_ms(failures: u32) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    u64::from(nanos) % (u64::from(failures) + 1)
}

/// Redisson's `RSpinLock` (`docs/PROTOCOL.md`).
#[derive(Debug)]
pub(crate) struct Spin;

/// The kind every spin lock hands the engine.
pub(crate) static SPIN: super::Kind = super::Kind(&Spin);

/// `EVALSHA spin_unlock 2 key latch lease_ms field latch_ttl`.
fn unlock_cmd(args: UnlockArgs<'_>) -> redis::Cmd {
    let bytes = args.key.len() + args.latch.len() + args.field.len() + 32;
    let mut cmd = UNLOCK.evalsha(2, 5, bytes);
    cmd.arg(args.key)
        .arg(args.latch)
        .arg(args.lease_ms)
        .arg(args.field)
        .arg(super::protocol::LATCH_TTL_MS);
    cmd
}

impl RawLock for Spin {
    fn name(&self) -> &'static str {
        "spin"
    }

    fn loss_channel(&self, _key: &str) -> Option<String> {
        None
    }

    fn waiters(&self) -> Waiters<'_> {
        Waiters::Poll
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>> {
        Box::pin(rlock::release(
            protocol,
            &UNLOCK,
            unlock_cmd(args),
            args.key,
        ))
    }

    fn force_unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> BoxFuture<'a, RedisResult<bool>> {
        let mut cmd = FORCE_UNLOCK.evalsha(1, 1, key.len());
        cmd.arg(key);
        Box::pin(rlock::forced(protocol, &FORCE_UNLOCK, cmd, key))
    }
}
