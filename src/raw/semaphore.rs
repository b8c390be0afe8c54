//! Redisson's `RSemaphore`: a string key holding the permits available, no owner, no TTL, no
//! queue; its channel `redisson_sc:{<key>}` carries the count after each release. Its scripts
//! (`scripts/lua/semaphore_*.lua`) do what Redisson's do to the key and the channel, plus this
//! crate's latches beside the key (same slot; Redisson never reads them), so that a re-sent
//! acquire takes its permits once and a re-sent release gives them back once.
//!
//! A hold here is one acquire's permits: each acquire is an owner of its own (so nothing
//! re-enters), taken with no lease (nothing renews it, nothing expires it), and its release
//! gives its permits back. Releases and permit changes wake up to as many waiters as the
//! message says permits are available ([`Wake::Up`]).

use redis::{Cmd, RedisResult};

use super::protocol::{
    acquire_latch_ttl, AcquireArgs, Protocol, Release, Script, UnlockArgs, LATCH_TTL_MS,
};
use super::rlock::{nil_or_pttl, written, written_value, AcquireScript};
use super::{Kind, Wake};
use crate::future::BoxFuture;

static ACQUIRE: Script = Script::new(include_str!("../../scripts/lua/semaphore_acquire.lua"));
static RELEASE: Script = Script::new(include_str!("../../scripts/lua/semaphore_release.lua"));
static SET: Script = Script::new(include_str!("../../scripts/lua/semaphore_set.lua"));
static DRAIN: Script = Script::new(include_str!("../../scripts/lua/semaphore_drain.lua"));

/// The semaphore's acquire: `nil` taken, `-1` not enough permits (read as a holder with no
/// TTL: the waiter sleeps until a release's message, or a second at most).
static SEMAPHORE_ACQUIRE: AcquireScript = AcquireScript {
    script: &ACQUIRE,
    cmd: acquire_cmd,
    reply: nil_or_pttl,
};

/// `EVALSHA semaphore_acquire 2 key latch permits latch_ttl`.
fn acquire_cmd(args: AcquireArgs<'_>) -> Cmd {
    let mut cmd = ACQUIRE.evalsha(2, 4, args.key.len() + args.latch.len() + 32);
    cmd.arg(args.key)
        .arg(args.latch)
        .arg(args.permits)
        .arg(acquire_latch_ttl(args.lease_ms));
    cmd
}

/// How waiters read the semaphore's channel: the permits available after a release or a
/// change, waking up to that many (none if the count is not above zero).
pub(super) fn permits_message(payload: &[u8]) -> Wake {
    let count = std::str::from_utf8(payload)
        .ok()
        .and_then(|text| text.parse::<i64>().ok());
    match count {
        Some(n) if n > 0 => Wake::Up(n.min(u32::MAX as i64) as u32),
        _ => Wake::Nobody,
    }
}

/// Redisson's `RSemaphore` as the engine drives it.
#[derive(Debug)]
pub(crate) struct Semaphore;

/// The semaphore kind every [`Semaphore`](crate::Semaphore) hands the engine.
pub(crate) static SEMAPHORE: Kind = Kind(&Semaphore);

impl super::RawLock for Semaphore {
    fn name(&self) -> &'static str {
        "semaphore"
    }

    fn channel(&self, key: &str) -> String {
        crate::names::semaphore_channel(key)
    }

    fn reads(&self) -> super::Reads {
        permits_message
    }

    /// A release tells nothing of another acquire's permits: nothing to listen for.
    fn loss_channel(&self, _key: &str) -> Option<String> {
        None
    }

    /// Permits are shared: another acquire of this client holding some is no reason to wait.
    fn is_shared(&self) -> bool {
        true
    }

    fn acquire_script(&self) -> &'static AcquireScript {
        &SEMAPHORE_ACQUIRE
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>> {
        Box::pin(async move {
            let latch = args.latch;
            release(protocol, args.key, args.channel, latch, args.permits.into()).await?;
            Ok(Release::Released)
        })
    }

    /// A semaphore has no holder to force out: nothing is done.
    fn force_unlock<'a>(
        &'a self,
        _protocol: &'a Protocol,
        _key: &'a str,
    ) -> BoxFuture<'a, RedisResult<bool>> {
        Box::pin(async { Ok(false) })
    }
}

/// Adds `permits` (negative: takes them away) to `key`, publishes the count after it on
/// `channel` and answers it; idempotent per `latch` (a re-send answers the first count and
/// changes nothing). Redisson's `release(n)` and `addPermits(n)` in one script.
pub(crate) async fn release(
    p: &Protocol,
    key: &str,
    channel: &str,
    latch: &str,
    permits: i64,
) -> RedisResult<i64> {
    let cmd = release_cmd(p, key, channel, latch, permits, false);
    written(p, &RELEASE, cmd, key, "semaphore release").await
}

/// [`release`] only if `key` exists (Redisson 4's `releaseIfExists`): `None` if it did not
/// (nothing changed).
pub(crate) async fn release_if_exists(
    p: &Protocol,
    key: &str,
    channel: &str,
    latch: &str,
    permits: i64,
) -> RedisResult<Option<i64>> {
    let cmd = release_cmd(p, key, channel, latch, permits, true);
    let reply = written_value(p, &RELEASE, cmd, key, "semaphore release").await?;
    redis::FromRedisValue::from_redis_value(reply).map_err(Into::into)
}

/// `EVALSHA semaphore_release 3 key channel latch permits publish latch_ttl if_exists`.
fn release_cmd(
    p: &Protocol,
    key: &str,
    channel: &str,
    latch: &str,
    permits: i64,
    if_exists: bool,
) -> Cmd {
    let mut cmd = RELEASE.evalsha(3, 7, key.len() + channel.len() + latch.len() + 40);
    cmd.arg(key)
        .arg(channel)
        .arg(latch)
        .arg(permits)
        .arg(p.publish_command())
        .arg(LATCH_TTL_MS)
        .arg(if if_exists { "1" } else { "0" });
    cmd
}

/// Sets `key` to `permits` if it does not exist, publishing them (Redisson's
/// `trySetPermits`): `true` if set.
pub(crate) async fn try_set(
    p: &Protocol,
    key: &str,
    channel: &str,
    permits: u32,
) -> RedisResult<bool> {
    let mut cmd = SET.evalsha(2, 4, key.len() + channel.len() + 24);
    cmd.arg(key)
        .arg(channel)
        .arg(permits)
        .arg(p.publish_command());
    Ok(written(p, &SET, cmd, key, "semaphore set").await? == 1)
}

/// Takes every permit available (Redisson's `drainPermits`): how many there were (0 for a
/// key that does not exist, which is left absent).
pub(crate) async fn drain(p: &Protocol, key: &str) -> RedisResult<i64> {
    let mut cmd = DRAIN.evalsha(1, 1, key.len() + 8);
    cmd.arg(key);
    written(p, &DRAIN, cmd, key, "semaphore drain").await
}

/// The permits available (`GET`; 0 for a key that does not exist). A string that is no
/// count fails to read ([`Error::WrongType`](crate::Error::WrongType) for the caller).
pub(crate) async fn available(p: &Protocol, key: &str) -> RedisResult<i64> {
    Ok(p.counter(key).await?.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_message_wakes_as_many_waiters_as_it_says_permits_are_available() {
        assert_eq!(permits_message(b"3"), Wake::Up(3));
        assert_eq!(permits_message(b"0"), Wake::Nobody);
        assert_eq!(permits_message(b"-2"), Wake::Nobody);
        assert_eq!(permits_message(b"x"), Wake::Nobody);
        assert_eq!(permits_message(b"99999999999"), Wake::Up(u32::MAX));
    }
}
