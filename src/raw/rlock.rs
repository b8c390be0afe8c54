//! Redisson's `RLock`, the reentrant non-fair lock: its scripts (`scripts/lua/*.lua`, each
//! headed by its KEYS, ARGV and replies), their commands, and its [`RawLock`](super::RawLock)
//! implementation. `docs/PROTOCOL.md` describes every script and reply.

use redis::{Cmd, FromRedisValue, RedisResult, Value};

use super::protocol::{
    acquire_latch_ttl, listener_count, short_reply, AcquireArgs, Attempt, Call, Pipelined,
    Protocol, Release, Script, Synced, UnlockArgs, LATCH_TTL_MS,
};
use super::{Renewal, Wake};

static ACQUIRE: Script = Script::new(include_str!("../../scripts/lua/acquire.lua"));
static UNLOCK: Script = Script::new(include_str!("../../scripts/lua/unlock.lua"));
static FORCE_UNLOCK: Script = Script::new(include_str!("../../scripts/lua/force_unlock.lua"));
static RENEW: Script = Script::new(include_str!("../../scripts/lua/renew.lua"));
static RENEW_ACROSS: Script = Script::new(include_str!("../../scripts/lua/renew_across.lua"));

/// The message an unlock publishes: "one holder left, wake one waiter".
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// How the lock kinds read their channel (Redisson's `LockPubSub`): `0` (an unlock) wakes one
/// waiter, since only one can take the lock; `1` (a write unlock, which every reader may
/// share) wakes them all.
pub(crate) fn lock_message(payload: &[u8]) -> Wake {
    match payload {
        b"0" => Wake::One,
        b"1" => Wake::All,
        _ => Wake::Nobody,
    }
}

/// An acquire script as the RLock-style kinds (RLock, fenced) send it: the script, its
/// command and how its reply reads. Each kind's acquire, alone or behind a hand-off's unlock, goes
/// through one of these.
pub(crate) struct AcquireScript {
    pub(crate) script: &'static Script,
    pub(crate) cmd: fn(AcquireArgs<'_>) -> Cmd,
    pub(crate) reply: fn(Value) -> RedisResult<Attempt>,
}

/// RLock's acquire: `nil` acquired, else the PTTL.
pub(super) static RLOCK_ACQUIRE: AcquireScript = AcquireScript {
    script: &ACQUIRE,
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

/// Redisson 4.4+'s non-reentrant lock's acquire: RLock's, refusing the holder's second.
static NON_REENTRANT_ACQUIRE: AcquireScript = AcquireScript {
    script: &ACQUIRE,
    cmd: non_reentrant_cmd,
    reply: nil_or_pttl,
};

/// `EVALSHA acquire 2 key latch lease_ms field latch_ttl 0`.
fn non_reentrant_cmd(args: AcquireArgs<'_>) -> Cmd {
    let mut cmd = acquire_cmd(args);
    cmd.arg(0);
    cmd
}

/// `EVALSHA acquire 2 key latch lease_ms field latch_ttl`.
fn acquire_cmd(args: AcquireArgs<'_>) -> Cmd {
    let AcquireArgs {
        key,
        latch,
        lease_ms,
        field,
        ..
    } = args;
    let mut cmd = ACQUIRE.evalsha(2, 5, key.len() + latch.len() + field.len() + 40);
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
    let send = p.send(Call::script(script.script, args.key, (script.cmd)(args)));
    async move {
        let (reply, synced) = send.await?;
        synced_attempt((script.reply)(reply)?, synced)
    }
}

/// An acquire's outcome given whether its write was acknowledged: a hold no replica has is
/// [`Attempt::Unsynced`].
pub(super) fn synced_attempt(attempt: Attempt, synced: Synced) -> RedisResult<Attempt> {
    Ok(match (attempt, synced) {
        (Attempt::Acquired { .. }, Synced::No { replicas }) => {
            crate::observe::replica_ack_missing("acquire", replicas);
            Attempt::Unsynced { replicas }
        }
        (attempt, _) => attempt,
    })
}

/// Releases one hold of `key` by `field`, idempotently per `latch` (re-sending the same
/// latch after a lost reply returns the first answer without releasing twice).
pub(super) async fn unlock(p: &Protocol, unlock: UnlockArgs<'_>) -> RedisResult<Release> {
    release(p, &UNLOCK, unlock_cmd(p, unlock), unlock.key).await
}

/// Sends an unlock script's call `cmd` for `key` (with its `WAIT`, if any) and reads its
/// `nil`/`0`/`1` answer: every kind's unlock ends here.
pub(super) async fn release(
    p: &Protocol,
    script: &'static Script,
    cmd: Cmd,
    key: &str,
) -> RedisResult<Release> {
    let (reply, synced) = p.send(Call::script(script, key, cmd)).await?;
    warn_unsynced(synced, key, "unlock");
    Ok(Release::from_reply(FromRedisValue::from_redis_value(
        reply,
    )?))
}

/// Sends a forced unlock's call `cmd` for `key` (with its `WAIT`, if any): `true` if it deleted
/// the lock.
pub(super) async fn forced(
    p: &Protocol,
    script: &'static Script,
    cmd: Cmd,
    key: &str,
) -> RedisResult<bool> {
    Ok(written(p, script, cmd, key, "force_unlock").await? == 1)
}

/// Sends a write's script call `cmd` for `key` (with its `WAIT`, if any), says so if no
/// replica acknowledged it, and reads its integer answer: a forced unlock's, and every write
/// of the synchronizers.
pub(super) async fn written(
    p: &Protocol,
    script: &'static Script,
    cmd: Cmd,
    key: &str,
    what: &'static str,
) -> RedisResult<i64> {
    Ok(i64::from_redis_value(
        written_value(p, script, cmd, key, what).await?,
    )?)
}

/// [`written`], its answer as the script gave it.
pub(super) async fn written_value(
    p: &Protocol,
    script: &'static Script,
    cmd: Cmd,
    key: &str,
    what: &'static str,
) -> RedisResult<Value> {
    let (reply, synced) = p.send(Call::script(script, key, cmd)).await?;
    warn_unsynced(synced, key, what);
    Ok(reply)
}

/// A release no replica acknowledged is done at the master; a failover could bring the hold
/// back, to end with its lease (nothing renews it).
fn warn_unsynced(synced: Synced, key: &str, what: &'static str) {
    if let Synced::No { replicas } = synced {
        crate::observe::replica_ack_missing(what, replicas);
        tracing::warn!(
            key,
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
        .. // (one hold per unlock: `permits` is 1)
    } = unlock;
    let bytes = key.len() + channel.len() + latch.len() + field.len() + 48;
    let mut cmd = UNLOCK.evalsha(3, 8, bytes);
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
/// the unlock, and a count of the clients listening on `channel`, all to the key's node
/// (where, in sharded mode, the channel's listeners are counted too).
///
/// The unlock's failure is an `Err`; the acquire's is returned for the waiter to deal with,
/// as after any attempt.
pub(crate) async fn unlock_and_count(
    script: &'static AcquireScript,
    p: &Protocol,
    unlock: UnlockArgs<'_>,
    then_acquire: Option<AcquireArgs<'_>>,
) -> RedisResult<Pipelined> {
    let mut calls = vec![Call::script(&UNLOCK, unlock.key, unlock_cmd(p, unlock))];
    if let Some(acquire) = then_acquire {
        calls.push(Call::script(
            script.script,
            acquire.key,
            (script.cmd)(acquire),
        ));
    }
    let mut numsub = redis::cmd("PUBSUB");
    numsub.arg(p.numsub).arg(unlock.channel);
    calls.push(Call::command(unlock.key, numsub));

    let mut answers = p.send_all(calls).await.into_iter();
    let mut next = || answers.next().ok_or_else(short_reply);
    let released = next()?;
    warn_unsynced(released.synced, unlock.key, "unlock");
    let release = Release::from_reply(FromRedisValue::from_redis_value(released.reply?)?);
    let attempt = then_acquire.map(|_| {
        next()
            .and_then(|acquired| synced_attempt((script.reply)(acquired.reply?)?, acquired.synced))
    });
    let listeners = next().ok().and_then(|a| listener_count(a.reply.ok()?));
    Ok(Pipelined {
        release,
        attempt,
        listeners,
    })
}

/// Deletes `key` whoever holds it and publishes the unlock message. `true` if it existed.
pub(super) async fn force_unlock(p: &Protocol, key: &str, channel: &str) -> RedisResult<bool> {
    let mut cmd = FORCE_UNLOCK.evalsha(2, 4, key.len() + channel.len() + 16);
    cmd.arg(key).arg(channel).arg(UNLOCK_MESSAGE).arg(p.publish);
    forced(p, &FORCE_UNLOCK, cmd, key).await
}

/// `EVALSHA renew n key1..keyn lease field1..fieldn`: extends each `(key, field)` still held
/// by its field to `lease_ms`.
fn renew_cmd(lease_ms: u64, entries: &[(&str, &str)]) -> Cmd {
    let n = entries.len();
    let bytes: usize = entries.iter().map(|(k, f)| k.len() + f.len() + 16).sum();
    let mut cmd = RENEW.evalsha(n, 2 * n + 1, bytes);
    for (key, _) in entries {
        cmd.arg(*key);
    }
    cmd.arg(lease_ms);
    for (_, field) in entries {
        cmd.arg(*field);
    }
    cmd
}

/// The renewal of each `(key, field)` to `lease_ms`: keys declared (one slot), or in ARGV
/// (`across`: any slots the node serves).
pub(super) fn renew_call(lease_ms: u64, entries: &[(&str, &str)], across: bool) -> Call {
    match across {
        true => Call::script(
            &RENEW_ACROSS,
            entries[0].0,
            RENEW_ACROSS.across(Some(lease_ms), entries),
        ),
        false => Call::script(&RENEW, entries[0].0, renew_cmd(lease_ms, entries)),
    }
}

/// One [`Renewal`] per entry of a renewal: 1 renewed, 0 no longer held by that owner, -1 not
/// served by the node.
pub(super) fn renewed(replies: Vec<i64>, n: usize) -> RedisResult<Vec<Renewal>> {
    if replies.len() != n {
        return Err(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "renewal reply length differs from the number of keys",
        )));
    }
    let renewal = |r| match r {
        1 => Renewal::Renewed,
        0 => Renewal::Gone,
        _ => Renewal::Elsewhere,
    };
    Ok(replies.into_iter().map(renewal).collect())
}

/// Redisson's `RLock`: the reentrant, non-fair lock (`docs/PROTOCOL.md` §3–§6); and, with
/// another acquire, its non-reentrant lock (same layout).
pub(crate) struct RLock {
    name: &'static str,
    acquire: &'static AcquireScript,
}

impl std::fmt::Debug for RLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The `RLock` kind every `Lock` hands the engine.
pub(crate) static RLOCK: super::Kind = super::Kind(&RLock {
    name: "lock",
    acquire: &RLOCK_ACQUIRE,
});

/// Redisson 4.4+'s `getNonReentrantLock`: the holder's second acquire is refused
/// (`NON_REENTRANT_REACQUIRE`, here [`Error::NonReentrant`](crate::Error::NonReentrant)).
pub(crate) static NON_REENTRANT: super::Kind = super::Kind(&RLock {
    name: "non_reentrant",
    acquire: &NON_REENTRANT_ACQUIRE,
});

impl super::RawLock for RLock {
    fn name(&self) -> &'static str {
        self.name
    }

    fn hand_off(&self) -> Option<&dyn super::HandOff> {
        Some(self)
    }

    fn acquire_script(&self) -> &'static AcquireScript {
        self.acquire
    }
}

impl super::HandOff for RLock {}
