//! Redisson's `RCountDownLatch`: a string key holding the count, deleted when it reaches zero;
//! its channel `redisson_countdownlatch__channel__{<key>}` carries `0` when the latch opens and
//! `1` when a count is set or the latch deleted. Nobody holds anything: waiters wait for the
//! count to reach zero. Its scripts (`scripts/lua/latch_*.lua`) do what Redisson's do, and a
//! count-down carries a request latch beside the key (same slot; Redisson never reads it), so
//! that a re-sent count-down counts once.

use redis::RedisResult;

use super::protocol::{Protocol, Script, LATCH_TTL_MS};
use super::rlock::written;
use super::Wake;

static SET: Script = Script::new(include_str!("../../scripts/lua/latch_set.lua"));
static COUNT_DOWN: Script = Script::new(include_str!("../../scripts/lua/latch_count_down.lua"));
static DELETE: Script = Script::new(include_str!("../../scripts/lua/latch_delete.lua"));

/// How waiters read the latch's channel: `0` (opened) wakes them all; so does `1` (a new count,
/// or the latch deleted): each looks at the count again, and a deleted latch reads as open.
/// (Redisson's waiters sleep on through a `1`.)
pub(crate) fn latch_message(payload: &[u8]) -> Wake {
    match payload {
        b"0" | b"1" => Wake::All,
        _ => Wake::Nobody,
    }
}

/// Sets `key`'s count if it has none, telling its waiters (Redisson's `trySetCount`): `true`
/// if set.
pub(crate) async fn try_set(
    p: &Protocol,
    key: &str,
    channel: &str,
    count: u64,
) -> RedisResult<bool> {
    let mut cmd = SET.evalsha(2, 4, key.len() + channel.len() + 32);
    cmd.arg(key)
        .arg(channel)
        .arg(count)
        .arg(p.publish_command());
    Ok(written(p, &SET, cmd, key, "latch set").await? == 1)
}

/// Counts `key` down by one, idempotently per `latch` (Redisson's `countDown`): the count
/// after it (0: this count-down opened the latch, and its waiters were told).
pub(crate) async fn count_down(
    p: &Protocol,
    key: &str,
    channel: &str,
    latch: &str,
) -> RedisResult<i64> {
    let mut cmd = COUNT_DOWN.evalsha(3, 5, key.len() + channel.len() + latch.len() + 32);
    cmd.arg(key)
        .arg(channel)
        .arg(latch)
        .arg(p.publish_command())
        .arg(LATCH_TTL_MS);
    written(p, &COUNT_DOWN, cmd, key, "latch count-down").await
}

/// Deletes `key`, telling its waiters (Redisson's `delete`): `true` if it existed.
pub(crate) async fn delete(p: &Protocol, key: &str, channel: &str) -> RedisResult<bool> {
    let mut cmd = DELETE.evalsha(2, 3, key.len() + channel.len() + 16);
    cmd.arg(key).arg(channel).arg(p.publish_command());
    Ok(written(p, &DELETE, cmd, key, "latch delete").await? == 1)
}

/// The count (`GET`; 0 for a key that does not exist: an open latch). A string that is no
/// count fails to read ([`Error::WrongType`](crate::Error::WrongType) for the caller).
pub(crate) async fn count(p: &Protocol, key: &str) -> RedisResult<i64> {
    Ok(p.counter(key).await?.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_opened_latch_or_a_new_count_wakes_every_waiter_to_look_again() {
        assert_eq!(latch_message(b"0"), Wake::All);
        assert_eq!(latch_message(b"1"), Wake::All);
        assert_eq!(latch_message(b"2"), Wake::Nobody);
    }
}
