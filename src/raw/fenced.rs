//! Redisson's `RFencedLock`: RLock's hash, channel, unlock and renewal, plus a token counter
//! (`redisson_lock_token:{N}`) that every acquisition increments, re-entries too. Only the
//! acquire differs (`scripts/lua/fenced_acquire.lua`); the rest is [`RawLock`](super::RawLock)'s
//! defaults, which are RLock's.

use redis::{Cmd, FromRedisValue, RedisResult, Value};

use super::protocol::{acquire_latch_ttl, AcquireArgs, Attempt, Script};
use super::rlock::AcquireScript;

static ACQUIRE: Script = Script::new(include_str!("../../scripts/lua/fenced_acquire.lua"));

static FENCED_ACQUIRE: AcquireScript = AcquireScript {
    script: &ACQUIRE,
    cmd: acquire_cmd,
    reply: acquired,
};

/// `EVALSHA fenced_acquire 3 key latch token lease_ms field latch_ttl`.
fn acquire_cmd(args: AcquireArgs<'_>) -> Cmd {
    let AcquireArgs {
        key,
        latch,
        lease_ms,
        field,
        ..
    } = args;
    let token = crate::names::token_key(key);
    let bytes = key.len() + latch.len() + token.len() + field.len() + 40;
    let mut cmd = ACQUIRE.evalsha(3, 6, bytes);
    cmd.arg(key)
        .arg(latch)
        .arg(token)
        .arg(lease_ms)
        .arg(field)
        .arg(acquire_latch_ttl(lease_ms));
    cmd
}

/// `{-1, token}`: acquired with that token; `{pttl, -1}`: held by another owner.
fn acquired(reply: Value) -> RedisResult<Attempt> {
    let (pttl, token): (i64, i64) = FromRedisValue::from_redis_value(reply)?;
    Ok(match pttl {
        -1 => Attempt::Acquired { token: Some(token) },
        pttl_ms => Attempt::Held { pttl_ms },
    })
}

/// Redisson's `RFencedLock` (`docs/PROTOCOL.md` §5).
#[derive(Debug)]
pub(crate) struct Fenced;

/// The kind every `FencedLock` hands the engine.
pub(crate) static FENCED: super::Kind = super::Kind(&Fenced);

impl super::RawLock for Fenced {
    fn name(&self) -> &'static str {
        "fenced"
    }

    fn derived_keys(&self, key: &str) -> Vec<String> {
        vec![crate::names::token_key(key)]
    }

    fn hand_off(&self) -> Option<&dyn super::HandOff> {
        // The waiter's fenced acquire rides behind the unlock, so a hand-off issues its token.
        Some(self)
    }

    fn acquire_script(&self) -> &'static AcquireScript {
        &FENCED_ACQUIRE
    }
}

impl super::HandOff for Fenced {}
