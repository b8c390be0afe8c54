//! The protocol layer: exactly what goes to Redis, and what comes back, for an RLock.
//!
//! Everything above this module (waiting, renewal, ownership, guards) talks to Redis only
//! through [`Protocol`], a narrow interface in the spirit of `lock_api`'s raw traits: try to
//! acquire, release one hold (alone, or pipelined with a local hand-off's acquire and a count
//! of the channel's listeners), force-release, renew a batch, and the read-only queries. The Lua
//! lives in `scripts/lua/`, one file per operation, each headed by its KEYS, ARGV and replies.
//! Scripts run by `EVALSHA`; a `NOSCRIPT` reply (a restarted server, `SCRIPT FLUSH`) loads the
//! script and runs it again, which is safe because `NOSCRIPT` means nothing ran.
//!
//! Each call encodes its `EVALSHA` command once, straight into a [`Cmd`] (redis-rs'
//! `ScriptInvocation` would copy every key and argument into its own buffer first, then again
//! into the command), and re-sends that same command after a `NOSCRIPT`.

use std::sync::LazyLock;

use crate::transport::Connection;
use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ServerErrorKind, Value};

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../scripts/lua/acquire.lua")));
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../scripts/lua/unlock.lua")));
static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../scripts/lua/force_unlock.lua")));
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../scripts/lua/renew.lua")));

/// The message an unlock publishes: "one holder left, wake one waiter".
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// How long an unlock latch lives, in ms (Redisson uses roughly 16–20 s).
pub(crate) const LATCH_TTL_MS: u64 = 20_000;

/// `EVALSHA <sha1> <numkeys>`, with room for `args` more arguments of about `bytes` bytes.
fn evalsha(script: &Script, numkeys: usize, args: usize, bytes: usize) -> Cmd {
    let mut cmd = Cmd::with_capacity(3 + args, 48 + bytes);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(numkeys);
    cmd
}

/// Sends an `EVALSHA` built by [`evalsha`]; after `NOSCRIPT` (nothing ran) loads the script and
/// sends the same command again, exactly as `Script::invoke_async` does.
async fn invoke<T: FromRedisValue>(
    script: &Script,
    cmd: &Cmd,
    conn: &mut Connection,
) -> RedisResult<T> {
    match cmd.query_async(conn).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        reply => reply,
    }
}

/// Outcome of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The owner now holds the lock (first hold or one more).
    Acquired,
    /// Someone else holds it; their remaining lease in ms (`-1` if the key has no TTL).
    Held { pttl_ms: i64 },
}

impl Attempt {
    fn from_reply(reply: Option<i64>) -> Self {
        match reply {
            None => Attempt::Acquired,
            Some(pttl_ms) => Attempt::Held { pttl_ms },
        }
    }
}

/// How long an acquire latch lives, for a hold of `lease_ms`: at least as long as the hold
/// (a re-send while the hold may still exist must find it), at least [`LATCH_TTL_MS`], at most
/// [`MAX_ACQUIRE_LATCH_MS`]. Re-sends stop well inside it ([`resend_deadline`]).
pub(crate) fn acquire_latch_ttl(lease_ms: u64) -> u64 {
    lease_ms.clamp(LATCH_TTL_MS, MAX_ACQUIRE_LATCH_MS)
}

/// The longest an acquire latch lives (for fixed leases longer than this, an acquire whose
/// answer stays lost for an hour is given up: its hold ends with its lease).
pub(crate) const MAX_ACQUIRE_LATCH_MS: u64 = 3_600_000;

/// Until when an acquire first sent at `first_sent`, whose answer was lost, may be re-sent
/// with its latch: one latch lifetime less a margin (a re-send after the latch is gone could
/// count twice).
pub(crate) fn resend_deadline(
    first_sent: tokio::time::Instant,
    lease_ms: u64,
) -> tokio::time::Instant {
    let ttl = std::time::Duration::from_millis(acquire_latch_ttl(lease_ms));
    first_sent + ttl.mul_f64(0.75)
}

/// One acquire to send: whose, for how long, under which latch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AcquireArgs<'a> {
    pub(crate) key: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) field: &'a str,
}

/// `EVALSHA acquire 2 key latch lease_ms field latch_ttl`.
fn acquire_cmd(args: AcquireArgs<'_>) -> Cmd {
    let AcquireArgs {
        key,
        latch,
        lease_ms,
        field,
    } = args;
    let mut cmd = evalsha(&ACQUIRE, 2, 5, key.len() + latch.len() + field.len() + 40);
    cmd.arg(key)
        .arg(latch)
        .arg(lease_ms)
        .arg(field)
        .arg(acquire_latch_ttl(lease_ms));
    cmd
}

/// What [`Protocol::unlock`] and [`Protocol::unlock_and_count`] need to name one unlock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnlockArgs<'a> {
    pub(crate) key: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) field: &'a str,
}

/// The answers to one [`Protocol::unlock_and_count`].
#[derive(Debug)]
pub(crate) struct Pipelined {
    pub(crate) release: Release,
    /// The waiter's acquire, when one was sent.
    pub(crate) attempt: Option<RedisResult<Attempt>>,
    /// Clients subscribed to the channel (`None` if the count was refused, e.g. by an ACL).
    pub(crate) listeners: Option<i64>,
}

/// The count out of a `PUBSUB NUMSUB channel` reply (`[channel, count]`).
fn listener_count(reply: Value) -> Option<i64> {
    let pairs: Vec<(Value, i64)> = FromRedisValue::from_redis_value(reply).ok()?;
    pairs.first().map(|(_, n)| *n)
}

fn short_reply() -> redis::RedisError {
    redis::RedisError::from((ErrorKind::UnexpectedReturnType, "pipeline reply too short"))
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

impl Release {
    fn from_reply(reply: Option<i64>) -> Self {
        match reply {
            None => Release::NotHeld,
            Some(0) => Release::StillHeld,
            Some(_) => Release::Released,
        }
    }
}

/// The Redis side of RLock, over one multiplexed, self-reconnecting connection.
#[derive(Clone)]
pub(crate) struct Protocol {
    conn: Connection,
    publish: &'static str,
    /// The `PUBSUB` subcommand that counts the publish command's listeners.
    numsub: &'static str,
}

impl Protocol {
    /// The publish command the unlock scripts run (`publish` or `spublish`).
    pub(crate) fn publish_command(&self) -> &'static str {
        self.publish
    }

    /// The connection the scripts go through (for how to batch keys).
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    pub(crate) fn new(conn: Connection, publish: &'static str) -> Self {
        let numsub = if publish == "spublish" {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        };
        Protocol {
            conn,
            publish,
            numsub,
        }
    }

    /// Tries once to acquire `args.key` for `args.field` with a lease of `args.lease_ms`,
    /// idempotently per `args.latch` (a re-send after a lost reply answers `Acquired` without
    /// a second hold if the first send acquired).
    ///
    /// The returned future owns everything it needs (`'static`), so a caller that is cancelled
    /// mid-flight can hand it to a background task to finish and undo.
    pub(crate) fn acquire(
        &self,
        args: AcquireArgs<'_>,
    ) -> impl std::future::Future<Output = RedisResult<Attempt>> + Send + 'static {
        let mut conn = self.conn.clone();
        let cmd = acquire_cmd(args);
        async move {
            Ok(Attempt::from_reply(
                invoke(&ACQUIRE, &cmd, &mut conn).await?,
            ))
        }
    }

    /// Releases one hold of `key` by `field`, idempotently per `latch` (re-sending the same
    /// latch after a lost reply returns the first answer without releasing twice).
    pub(crate) async fn unlock(&self, unlock: UnlockArgs<'_>) -> RedisResult<Release> {
        let cmd = self.unlock_cmd(unlock);
        Ok(Release::from_reply(
            invoke(&UNLOCK, &cmd, &mut self.conn.clone()).await?,
        ))
    }

    /// `EVALSHA unlock 3 key channel latch 0 lease_ms field publish latch_ttl`.
    fn unlock_cmd(&self, unlock: UnlockArgs<'_>) -> Cmd {
        let UnlockArgs {
            key,
            channel,
            latch,
            lease_ms,
            field,
        } = unlock;
        let bytes = key.len() + channel.len() + latch.len() + field.len() + 48;
        let mut cmd = evalsha(&UNLOCK, 3, 8, bytes);
        cmd.arg(key)
            .arg(channel)
            .arg(latch)
            .arg(UNLOCK_MESSAGE)
            .arg(lease_ms)
            .arg(field)
            .arg(self.publish)
            .arg(LATCH_TTL_MS);
        cmd
    }

    /// The unlock of [`Protocol::unlock`], sent in one write with what a local hand-off needs:
    /// the waiter's acquire (`then_acquire`: its field and lease), which Redis runs right after
    /// the unlock, and a count of the clients listening on `channel`.
    ///
    /// Only a failure of the whole write is an `Err`. Each part has its own answer: a
    /// `NOSCRIPT` unlock (nothing ran) is loaded and sent again on its own, while the
    /// acquire's error is returned for the waiter to deal with, as after any attempt.
    pub(crate) async fn unlock_and_count(
        &self,
        unlock: UnlockArgs<'_>,
        then_acquire: Option<AcquireArgs<'_>>,
    ) -> RedisResult<Pipelined> {
        let mut pipe = redis::pipe();
        pipe.add_command(self.unlock_cmd(unlock));
        if let Some(acquire) = then_acquire {
            pipe.add_command(acquire_cmd(acquire));
        }
        pipe.cmd("PUBSUB").arg(self.numsub).arg(unlock.channel);

        let mut conn = self.conn.clone();
        let mut replies: Vec<RedisResult<Value>> =
            pipe.ignore_errors().query_async(&mut conn).await?;
        let listeners = replies.pop().and_then(|r| listener_count(r.ok()?));
        let attempt = then_acquire.map(|_| {
            replies
                .pop()
                .unwrap_or_else(|| Err(short_reply()))
                .and_then(|v| Ok(Attempt::from_reply(FromRedisValue::from_redis_value(v)?)))
        });
        let release = match replies.pop().unwrap_or_else(|| Err(short_reply())) {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                UNLOCK.load_async(&mut conn).await?;
                self.unlock_cmd(unlock).query_async(&mut conn).await?
            }
            reply => Option::<i64>::from_redis_value(reply?)?,
        };
        Ok(Pipelined {
            release: Release::from_reply(release),
            attempt,
            listeners,
        })
    }

    /// Deletes spent latches in one `DEL`, and returns once Redis has run it (so the caller
    /// knows to try again after a connection error: a latch left behind lingers for its PX).
    pub(crate) async fn delete_latches(&self, latches: &[String]) -> RedisResult<()> {
        if latches.is_empty() {
            return Ok(());
        }
        redis::cmd("DEL")
            .arg(latches)
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Deletes `key` whoever holds it and publishes the unlock message. `true` if it existed.
    pub(crate) async fn force_unlock(&self, key: &str, channel: &str) -> RedisResult<bool> {
        let mut cmd = evalsha(&FORCE_UNLOCK, 2, 4, key.len() + channel.len() + 16);
        cmd.arg(key)
            .arg(channel)
            .arg(UNLOCK_MESSAGE)
            .arg(self.publish);
        let deleted: i64 = invoke(&FORCE_UNLOCK, &cmd, &mut self.conn.clone()).await?;
        Ok(deleted == 1)
    }

    /// Extends each `(key, field)` still held by its field to `lease_ms`. One bool per entry:
    /// `true` renewed, `false` no longer held by that owner.
    ///
    /// The command is encoded before the returned future is first polled, so the future
    /// borrows nothing from `entries` and the caller may keep several batches in flight.
    pub(crate) fn renew<'a, I>(
        &self,
        lease_ms: u64,
        entries: I,
    ) -> impl std::future::Future<Output = RedisResult<Vec<bool>>> + Send + 'static
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
        I::IntoIter: Clone,
    {
        let entries = entries.into_iter();
        let (mut n, mut bytes) = (0, 0);
        for (key, field) in entries.clone() {
            n += 1;
            bytes += key.len() + field.len() + 16;
        }
        // EVALSHA sha n key1..keyn lease field1..fieldn
        let mut cmd = evalsha(&RENEW, n, 2 * n + 1, bytes);
        for (key, _) in entries.clone() {
            cmd.arg(key);
        }
        cmd.arg(lease_ms);
        for (_, field) in entries {
            cmd.arg(field);
        }
        let mut conn = self.conn.clone();
        async move { Self::renewed(invoke(&RENEW, &cmd, &mut conn).await?, n) }
    }

    fn renewed(replies: Vec<i64>, n: usize) -> RedisResult<Vec<bool>> {
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

    /// Whether the acquire that wrote `latch` took its hold (the latch is written with the hold,
    /// and outlives every re-send of that acquire).
    pub(crate) async fn acquired(&self, latch: &str) -> RedisResult<bool> {
        redis::cmd("EXISTS")
            .arg(latch)
            .query_async(&mut self.conn.clone())
            .await
    }

    /// `PTTL key`: `-2` absent, `-1` no TTL, else ms left.
    pub(crate) async fn pttl(&self, key: &str) -> RedisResult<i64> {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
    }
}

/// Redisson's `RLock`: the reentrant, non-fair lock (`docs/PROTOCOL.md` §3–§6).
#[derive(Debug)]
pub(crate) struct RLock;

/// The `RLock` kind every `Lock` hands the engine.
pub(crate) static RLOCK: super::Kind = super::Kind(&RLock);

impl super::RawLock for RLock {
    fn channel(&self, key: &str) -> String {
        crate::names::lock_channel(key)
    }

    fn hands_off(&self) -> bool {
        true
    }

    fn acquire(
        &self,
        protocol: &Protocol,
        args: AcquireArgs<'_>,
    ) -> crate::engine::BoxFuture<'static, RedisResult<Attempt>> {
        Box::pin(protocol.acquire(args))
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> crate::engine::BoxFuture<'a, RedisResult<Release>> {
        Box::pin(protocol.unlock(args))
    }

    fn unlock_handing_off<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
        then_acquire: Option<AcquireArgs<'a>>,
    ) -> crate::engine::BoxFuture<'a, RedisResult<Pipelined>> {
        Box::pin(protocol.unlock_and_count(args, then_acquire))
    }

    fn renew(
        &self,
        protocol: &Protocol,
        lease_ms: u64,
        entries: &[(&str, &str)],
    ) -> crate::engine::BoxFuture<'static, RedisResult<Vec<bool>>> {
        Box::pin(protocol.renew(lease_ms, entries.iter().copied()))
    }
}
