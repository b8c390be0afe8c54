//! The protocol layer: exactly what goes to Redis, and what comes back, for an RLock.
//!
//! Everything above this module (waiting, renewal, ownership, guards) talks to Redis only
//! through [`Protocol`], a narrow interface in the spirit of `lock_api`'s raw traits: try to
//! acquire, release one hold, force-release, renew a batch, and the read-only queries. The Lua
//! lives in `scripts/lua/`, one file per operation, each headed by its KEYS, ARGV and replies.
//! Scripts run by `EVALSHA`; a `NOSCRIPT` reply (a restarted server, `SCRIPT FLUSH`) loads the
//! script and runs it again, which is safe because `NOSCRIPT` means nothing ran.

use std::sync::LazyLock;

use redis::aio::ConnectionManager;
use redis::{RedisResult, Script};

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/lua/acquire.lua")));
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/lua/unlock.lua")));
static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/lua/force_unlock.lua")));
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/lua/renew.lua")));

/// The message an unlock publishes: "one holder left, wake one waiter".
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// How long an unlock latch lives, in ms (Redisson uses roughly 16–20 s).
pub(crate) const LATCH_TTL_MS: u64 = 20_000;

/// Outcome of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The owner now holds the lock (first hold or one more).
    Acquired,
    /// Someone else holds it; their remaining lease in ms (`-1` if the key has no TTL).
    Held { pttl_ms: i64 },
}

/// What a lock key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// No such key: the lock is free.
    Absent,
    /// A hash: a lock (held).
    Hash,
    /// Something that is not a lock.
    Other,
}

/// Outcome of one unlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// The owner held no hold: nothing changed.
    NotHeld,
    /// One hold released; the owner still holds the lock.
    StillHeld,
    /// The last hold released: the key is gone and waiters were told.
    Released,
}

/// The Redis side of RLock, over one multiplexed, self-reconnecting connection.
#[derive(Clone)]
pub(crate) struct Protocol {
    conn: ConnectionManager,
    publish: &'static str,
}

impl Protocol {
    pub(crate) fn new(conn: ConnectionManager, publish: &'static str) -> Self {
        Protocol { conn, publish }
    }

    /// Tries once to acquire `key` for `field` with a lease of `lease_ms`.
    ///
    /// The returned future owns everything it needs (`'static`), so a caller that is cancelled
    /// mid-flight can hand it to a background task to finish and undo.
    pub(crate) fn acquire(
        &self,
        key: &str,
        lease_ms: u64,
        field: &str,
    ) -> impl std::future::Future<Output = RedisResult<Attempt>> + Send + 'static {
        let mut conn = self.conn.clone();
        let key = key.to_owned();
        let field = field.to_owned();
        async move {
            let reply: Option<i64> = ACQUIRE
                .key(&key)
                .arg(lease_ms)
                .arg(&field)
                .invoke_async(&mut conn)
                .await?;
            Ok(match reply {
                None => Attempt::Acquired,
                Some(pttl_ms) => Attempt::Held { pttl_ms },
            })
        }
    }

    /// Releases one hold of `key` by `field`, idempotently per `latch` (re-sending the same
    /// latch after a lost reply returns the first answer without releasing twice).
    pub(crate) async fn unlock(
        &self,
        key: &str,
        channel: &str,
        latch: &str,
        lease_ms: u64,
        field: &str,
    ) -> RedisResult<Release> {
        let mut call = UNLOCK.prepare_invoke();
        call.key(key)
            .key(channel)
            .key(latch)
            .arg(UNLOCK_MESSAGE)
            .arg(lease_ms)
            .arg(field)
            .arg(self.publish)
            .arg(LATCH_TTL_MS);
        let reply: Option<i64> = call.invoke_async(&mut self.conn.clone()).await?;
        Ok(match reply {
            None => Release::NotHeld,
            Some(0) => Release::StillHeld,
            Some(_) => Release::Released,
        })
    }

    /// Deletes an unlock latch once its answer has been read (best effort: it expires anyway).
    pub(crate) async fn delete_latch(&self, latch: &str) {
        let _: RedisResult<i64> = redis::cmd("DEL")
            .arg(latch)
            .query_async(&mut self.conn.clone())
            .await;
    }

    /// Deletes `key` whoever holds it and publishes the unlock message. `true` if it existed.
    pub(crate) async fn force_unlock(&self, key: &str, channel: &str) -> RedisResult<bool> {
        let mut call = FORCE_UNLOCK.prepare_invoke();
        call.key(key)
            .key(channel)
            .arg(UNLOCK_MESSAGE)
            .arg(self.publish);
        let deleted: i64 = call.invoke_async(&mut self.conn.clone()).await?;
        Ok(deleted == 1)
    }

    /// Extends each `(key, field)` still held by its field to `lease_ms`. One bool per entry:
    /// `true` renewed, `false` no longer held by that owner.
    pub(crate) async fn renew<'a>(
        &self,
        lease_ms: u64,
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> RedisResult<Vec<bool>> {
        let mut call = RENEW.prepare_invoke();
        call.arg(lease_ms);
        let mut n = 0;
        for (key, field) in entries {
            call.key(key).arg(field);
            n += 1;
        }
        let replies: Vec<i64> = call.invoke_async(&mut self.conn.clone()).await?;
        if replies.len() != n {
            return Err(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "renewal reply length differs from the number of keys",
            )));
        }
        Ok(replies.into_iter().map(|r| r == 1).collect())
    }

    /// What `key` holds: nothing, a lock hash, or something else.
    pub(crate) async fn key_kind(&self, key: &str) -> RedisResult<KeyKind> {
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(match kind.as_str() {
            "none" => KeyKind::Absent,
            "hash" => KeyKind::Hash,
            _ => KeyKind::Other,
        })
    }

    /// `HGET key field`: the field's hold count (0 when absent).
    pub(crate) async fn hold_count(&self, key: &str, field: &str) -> RedisResult<u32> {
        let count: Option<i64> = redis::cmd("HGET")
            .arg(key)
            .arg(field)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(count.unwrap_or(0).clamp(0, u32::MAX as i64) as u32)
    }

    /// `PTTL key`: `-2` absent, `-1` no TTL, else ms left.
    pub(crate) async fn pttl(&self, key: &str) -> RedisResult<i64> {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
    }
}
