//! Redisson's `RLock`, the reentrant non-fair lock: its scripts (`scripts/lua/*.lua`, each
//! headed by its KEYS, ARGV and replies), their commands, and its [`RawLock`](super::RawLock)
//! implementation. `docs/PROTOCOL.md` describes every script and reply.

use redis::{Cmd, FromRedisValue, RedisResult, Value};

use super::protocol::{
    acquire_latch_ttl, eval_alone, evalsha, invoke_synced, is_no_script, listener_count,
    short_reply, AcquireArgs, Attempt, Call, Lua, Pipelined, Protocol, Release, Synced, UnlockArgs,
    LATCH_TTL_MS,
};

static ACQUIRE: Lua = Lua::new(include_str!("../../scripts/lua/acquire.lua"));
static UNLOCK: Lua = Lua::new(include_str!("../../scripts/lua/unlock.lua"));
static FORCE_UNLOCK: Lua = Lua::new(include_str!("../../scripts/lua/force_unlock.lua"));
static RENEW: Lua = Lua::new(include_str!("../../scripts/lua/renew.lua"));

/// The message an unlock publishes: "one holder left, wake one waiter".
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// An acquire script as the RLock-style kinds (RLock, fenced) send it: its Lua, its command
/// and how its reply reads. Each kind's acquire, alone or behind a hand-off's unlock, goes
/// through one of these.
pub(crate) struct AcquireScript {
    pub(crate) lua: &'static Lua,
    pub(crate) cmd: fn(AcquireArgs<'_>) -> Cmd,
    pub(crate) reply: fn(Value) -> RedisResult<Attempt>,
}

/// RLock's acquire: `nil` acquired, else the PTTL.
static RLOCK_ACQUIRE: AcquireScript = AcquireScript {
    lua: &ACQUIRE,
    cmd: acquire_cmd,
    reply: nil_or_pttl,
};

/// The reply of the acquire scripts that answer `nil` when acquired, else the PTTL (RLock's,
/// and both halves of the read-write lock).
pub(super) fn nil_or_pttl(reply: Value) -> RedisResult<Attempt> {
    Ok(Attempt::from_reply(FromRedisValue::from_redis_value(
        reply,
    )?))
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

/// Tries once to acquire `args.key` for `args.field` with a lease of `args.lease_ms`,
/// idempotently per `args.latch` (a re-send after a lost reply answers `Acquired` without
/// a second hold if the first send acquired).
///
/// The returned future owns everything it needs (`'static`), so a caller that is cancelled
/// mid-flight can hand it to a background task to finish and undo.
pub(crate) fn acquire(
    script: &'static AcquireScript,
    p: &Protocol,
    args: AcquireArgs<'_>,
) -> impl std::future::Future<Output = RedisResult<Attempt>> + Send + 'static {
    let mut conn = p.conn.clone();
    let cmd = (script.cmd)(args);
    let (key, wait) = (args.key.to_string(), p.wait_for(args.key));
    async move {
        let (reply, synced) = invoke_synced(script.lua, &cmd, &key, wait, &mut conn).await?;
        Ok(match ((script.reply)(reply)?, synced) {
            (Attempt::Acquired { .. }, Synced::No { replicas }) => Attempt::Unsynced { replicas },
            (attempt, _) => attempt,
        })
    }
}

/// Releases one hold of `key` by `field`, idempotently per `latch` (re-sending the same
/// latch after a lost reply returns the first answer without releasing twice).
async fn unlock(p: &Protocol, unlock: UnlockArgs<'_>) -> RedisResult<Release> {
    release(p, &UNLOCK, unlock_cmd(p, unlock), unlock.key).await
}

/// Sends an unlock script's call `cmd` for `key` (with its `WAIT`, if any) and reads its
/// `nil`/`0`/`1` answer: every kind's unlock ends here.
pub(super) async fn release(
    p: &Protocol,
    script: &Lua,
    cmd: Cmd,
    key: &str,
) -> RedisResult<Release> {
    let mut conn = p.conn.clone();
    let (reply, synced) = invoke_synced(script, &cmd, key, p.wait_for(key), &mut conn).await?;
    warn_unsynced(synced, key, "unlock");
    Ok(Release::from_reply(reply))
}

/// Sends a forced unlock's call `cmd` for `key` (with its `WAIT`, if any): `true` if it deleted
/// the lock.
pub(super) async fn forced(p: &Protocol, script: &Lua, cmd: Cmd, key: &str) -> RedisResult<bool> {
    let mut conn = p.conn.clone();
    let (deleted, synced): (i64, _) =
        invoke_synced(script, &cmd, key, p.wait_for(key), &mut conn).await?;
    warn_unsynced(synced, key, "forced unlock");
    Ok(deleted == 1)
}

/// A release no replica acknowledged is done at the master; a failover could bring the hold
/// back, to end with its lease (nothing renews it).
fn warn_unsynced(synced: Synced, key: &str, what: &str) {
    if let Synced::No { replicas } = synced {
        tracing::warn!(
            lock = key,
            replicas,
            "{what} done at the master but no replica acknowledged it: a failover now could bring the hold back until its lease ends"
        );
    }
}

/// `EVALSHA unlock 3 key channel latch 0 lease_ms field publish latch_ttl`.
fn unlock_cmd(p: &Protocol, unlock: UnlockArgs<'_>) -> Cmd {
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
        .arg(p.publish)
        .arg(LATCH_TTL_MS);
    cmd
}

/// The unlock of [`Protocol::unlock`], sent in one write with what a local hand-off needs:
/// the waiter's acquire (`then_acquire`: its field and lease), which Redis runs right after
/// the unlock, and a count of the clients listening on `channel`.
///
/// Only a failure of the whole write is an `Err`. Each part has its own answer: a
/// `NOSCRIPT` unlock (nothing ran) is sent again on its own as `EVAL`, while the acquire's
/// error is returned for the waiter to deal with, as after any attempt. The write goes to the
/// key's node, where (in sharded mode) the channel's listeners are counted too.
pub(crate) async fn unlock_and_count(
    script: &AcquireScript,
    p: &Protocol,
    unlock: UnlockArgs<'_>,
    then_acquire: Option<AcquireArgs<'_>>,
) -> RedisResult<Pipelined> {
    let mut pipe = redis::pipe();
    let unlock_call = unlock_cmd(p, unlock);
    pipe.add_command(unlock_call.clone());
    if let Some(acquire) = then_acquire {
        pipe.add_command((script.cmd)(acquire));
    }
    pipe.cmd("PUBSUB").arg(p.numsub).arg(unlock.channel);

    let mut conn = p.conn.clone();
    let mut replies = conn.pipeline_for(&pipe, unlock.key).await?;
    let listeners = replies.pop().and_then(|r| listener_count(r.ok()?));
    let attempt = then_acquire.map(|_| {
        match replies.pop().unwrap_or_else(|| Err(short_reply())) {
            // A flushed script cache: nothing ran; the waiter's own attempt loads it.
            Err(err) if is_no_script(&err) => Ok(Attempt::NotRun),
            reply => (script.reply)(reply?),
        }
    });
    let release = match replies.pop().unwrap_or_else(|| Err(short_reply())) {
        Err(err) if is_no_script(&err) => eval_alone(&UNLOCK, &unlock_call, &mut conn).await?,
        reply => Option::<i64>::from_redis_value(reply?)?,
    };
    Ok(Pipelined {
        release: Release::from_reply(release),
        attempt,
        listeners,
    })
}

/// Deletes `key` whoever holds it and publishes the unlock message. `true` if it existed.
async fn force_unlock(p: &Protocol, key: &str, channel: &str) -> RedisResult<bool> {
    let mut cmd = evalsha(&FORCE_UNLOCK, 2, 4, key.len() + channel.len() + 16);
    cmd.arg(key).arg(channel).arg(UNLOCK_MESSAGE).arg(p.publish);
    forced(p, &FORCE_UNLOCK, cmd, key).await
}

/// `EVALSHA renew n key1..keyn lease field1..fieldn`: extends each `(key, field)` still held
/// by its field to `lease_ms`.
fn renew_cmd(lease_ms: u64, entries: &[(&str, &str)]) -> Cmd {
    let n = entries.len();
    let bytes: usize = entries.iter().map(|(k, f)| k.len() + f.len() + 16).sum();
    let mut cmd = evalsha(&RENEW, n, 2 * n + 1, bytes);
    for (key, _) in entries {
        cmd.arg(*key);
    }
    cmd.arg(lease_ms);
    for (_, field) in entries {
        cmd.arg(*field);
    }
    cmd
}

/// One bool per entry of a renewal: `true` renewed, `false` no longer held by that owner.
fn renewed(replies: Vec<i64>, n: usize) -> RedisResult<Vec<bool>> {
    if replies.len() != n {
        return Err(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "renewal reply length differs from the number of keys",
        )));
    }
    Ok(replies.into_iter().map(|r| r == 1).collect())
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
    ) -> crate::future::BoxFuture<'static, RedisResult<Attempt>> {
        Box::pin(acquire(&RLOCK_ACQUIRE, protocol, args))
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> crate::future::BoxFuture<'a, RedisResult<Release>> {
        Box::pin(unlock(protocol, args))
    }

    fn unlock_handing_off<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
        then_acquire: Option<AcquireArgs<'a>>,
    ) -> crate::future::BoxFuture<'a, RedisResult<Pipelined>> {
        Box::pin(unlock_and_count(
            &RLOCK_ACQUIRE,
            protocol,
            args,
            then_acquire,
        ))
    }

    fn force_unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> crate::future::BoxFuture<'a, RedisResult<bool>> {
        Box::pin(async move { force_unlock(protocol, key, &self.channel(key)).await })
    }

    fn renew_call(&self, lease_ms: u64, entries: &[(&str, &str)]) -> Call {
        Call {
            script: &RENEW,
            cmd: renew_cmd(lease_ms, entries),
        }
    }

    fn renewed(&self, reply: Value, entries: usize) -> RedisResult<Vec<bool>> {
        renewed(FromRedisValue::from_redis_value(reply)?, entries)
    }
}
