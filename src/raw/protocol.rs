//! The protocol layer every lock kind shares: the connection its scripts go through, how a
//! script is sent (`EVALSHA`, and after a `NOSCRIPT` reply, which means nothing ran, the same
//! call as `EVAL`, which caches the script on that node), the outcomes the engine understands ([`Attempt`], [`Release`]),
//! and the kind-agnostic commands (spent latches, read-only queries).
//!
//! Each call encodes its `EVALSHA` command once, straight into a [`Cmd`] (redis-rs'
//! `ScriptInvocation` would copy every key and argument into its own buffer first, then again
//! into the command), and re-sends that same command after a `NOSCRIPT`.

use crate::transport::Connection;
use std::sync::OnceLock;

use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, Value};

/// A Lua script: its text, and its SHA-1 for `EVALSHA` (worked out on first use).
pub(crate) struct Lua {
    code: &'static str,
    sha: OnceLock<String>,
}

impl Lua {
    pub(crate) const fn new(code: &'static str) -> Lua {
        Lua {
            code,
            sha: OnceLock::new(),
        }
    }

    pub(crate) fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| redis::Script::new(self.code).get_hash().to_string())
    }

    /// The `EVALSHA` call `cmd` (built by [`evalsha`]) as `EVAL` with this script's text.
    fn eval_instead(&self, cmd: &Cmd) -> Cmd {
        let mut eval = redis::cmd("EVAL");
        eval.arg(self.code);
        for arg in cmd.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = arg {
                eval.arg(bytes);
            }
        }
        eval
    }
}

/// A `NOSCRIPT` reply: the server does not know the script, so nothing ran.
pub(crate) fn is_no_script(err: &redis::RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// How long an unlock latch lives, in ms (Redisson uses roughly 16–20 s).
pub(crate) const LATCH_TTL_MS: u64 = 20_000;

/// `EVALSHA <sha1> <numkeys>`, with room for `args` more arguments of about `bytes` bytes.
pub(super) fn evalsha(script: &Lua, numkeys: usize, args: usize, bytes: usize) -> Cmd {
    let mut cmd = Cmd::with_capacity(3 + args, 48 + bytes);
    cmd.arg("EVALSHA").arg(script.sha()).arg(numkeys);
    cmd
}

/// One script call, encoded: what a caller pipelines, or sends alone with [`invoke_synced`].
pub(crate) struct Call {
    pub(crate) script: &'static Lua,
    pub(crate) cmd: Cmd,
}

impl Call {
    /// The call as `EVAL` with the script's text: what to pipeline again to a node that
    /// answered `NOSCRIPT` (which caches the script there).
    pub(crate) fn as_eval(&self) -> Cmd {
        self.script.eval_instead(&self.cmd)
    }
}

/// Sends an `EVALSHA` built by [`evalsha`]; after `NOSCRIPT` (nothing ran: a restarted or
/// flushed server, a promoted replica) sends the same call as `EVAL`. That runs on the node the
/// `EVALSHA` went to (the key's master) and caches the script there, where a `SCRIPT LOAD`
/// would go to every node of a cluster and fail while one is down.
pub(super) async fn invoke<T: FromRedisValue>(
    script: &Lua,
    cmd: &Cmd,
    conn: &mut Connection,
) -> RedisResult<T> {
    match cmd.query_async(conn).await {
        Err(err) if is_no_script(&err) => script.eval_instead(cmd).query_async(conn).await,
        reply => reply,
    }
}

/// After a `NOSCRIPT` reply to `cmd` inside a pipeline: the same call alone, as `EVAL`.
pub(super) async fn eval_alone<T: FromRedisValue>(
    script: &Lua,
    cmd: &Cmd,
    conn: &mut Connection,
) -> RedisResult<T> {
    script.eval_instead(cmd).query_async(conn).await
}

/// Outcome of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The owner now holds the lock (first hold or one more). `token`: the fencing token
    /// this acquisition was given, from kinds that issue one.
    Acquired { token: Option<i64> },
    /// Someone else holds it; their remaining lease in ms (`-1` if the key has no TTL).
    Held { pttl_ms: i64 },
    /// The server did not know the script, so nothing ran. Only the acquire pipelined behind
    /// a hand-off's unlock answers this (a single attempt loads the script and runs again).
    NotRun,
    /// The owner now holds the lock at the master, but none of its `replicas` acknowledged the
    /// write (replica sync, see [`Protocol::wait_for`]): a failover could lose it, so the
    /// engine releases it again.
    Unsynced { replicas: u32 },
}

impl Attempt {
    /// The `nil`-or-PTTL reply of the RLock-style acquire scripts.
    pub(super) fn from_reply(reply: Option<i64>) -> Self {
        match reply {
            None => Attempt::Acquired { token: None },
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

/// What an unlock needs to name one hold's release.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnlockArgs<'a> {
    pub(crate) key: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) field: &'a str,
}

/// The answers to one unlock sent with a local hand-off's acquire and a count of listeners.
#[derive(Debug)]
pub(crate) struct Pipelined {
    pub(crate) release: Release,
    /// The waiter's acquire, when one was sent.
    pub(crate) attempt: Option<RedisResult<Attempt>>,
    /// Clients subscribed to the channel (`None` if the count was refused, e.g. by an ACL).
    pub(crate) listeners: Option<i64>,
}

/// The count out of a `PUBSUB NUMSUB channel` reply (`[channel, count]`).
pub(super) fn listener_count(reply: Value) -> Option<i64> {
    let pairs: Vec<(Value, i64)> = FromRedisValue::from_redis_value(reply).ok()?;
    pairs.first().map(|(_, n)| *n)
}

pub(super) fn short_reply() -> redis::RedisError {
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
    pub(super) fn from_reply(reply: Option<i64>) -> Self {
        match reply {
            None => Release::NotHeld,
            Some(0) => Release::StillHeld,
            Some(_) => Release::Released,
        }
    }
}

/// What every kind's scripts go through: the connection, the publish command the unlock
/// scripts run, the replica acknowledgement writes wait for, and the kind-agnostic commands
/// (latches, queries).
#[derive(Clone)]
pub(crate) struct Protocol {
    pub(super) conn: Connection,
    pub(super) publish: &'static str,
    /// The `PUBSUB` subcommand that counts the publish command's listeners.
    pub(super) numsub: &'static str,
    /// How long a write waits for replicas (`WAIT`'s timeout, ms), if it does.
    replica_sync_ms: Option<u64>,
}

/// The `WAIT` that follows a write: for how many replicas, how long.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wait {
    pub(crate) replicas: u32,
    pub(crate) timeout_ms: u64,
}

/// Whether a write's replicas acknowledged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// At least one replica did, or no `WAIT` was asked for.
    Yes,
    /// None of the master's `replicas` did in time.
    No { replicas: u32 },
}

/// The error a renewal whose write no replica acknowledged fails with: it counts as
/// unconfirmed, like a lost reply.
pub(crate) fn not_replicated(replicas: u32) -> redis::RedisError {
    redis::RedisError::from((
        ErrorKind::Server(ServerErrorKind::ResponseError),
        "no replica acknowledged the write in time",
        format!("{replicas} replicas connected"),
    ))
}

/// Sends the script call `cmd` (built by [`evalsha`]) and, when `wait` is given, `WAIT` behind
/// it in the same write to `key`'s master (a bare `WAIT` could reach another connection or
/// node, and mean nothing). After `NOSCRIPT` (nothing ran) both go again with `EVAL`. A `WAIT`
/// that fails once the script has run counts as no acknowledgement: the script's answer must
/// not be lost.
pub(super) async fn invoke_synced<T: FromRedisValue>(
    script: &Lua,
    cmd: &Cmd,
    key: &str,
    wait: Option<Wait>,
    conn: &mut Connection,
) -> RedisResult<(T, Synced)> {
    let Some(wait) = wait else {
        return Ok((invoke(script, cmd, conn).await?, Synced::Yes));
    };
    let with_wait = |call: Cmd| {
        let mut pipe = redis::pipe();
        pipe.add_command(call)
            .cmd("WAIT")
            .arg(wait.replicas)
            .arg(wait.timeout_ms);
        pipe
    };
    let mut replies = conn.pipeline_for(&with_wait(cmd.clone()), key).await?;
    if matches!(replies.first(), Some(Err(err)) if is_no_script(err)) {
        replies = conn
            .pipeline_for(&with_wait(script.eval_instead(cmd)), key)
            .await?;
    }
    let mut replies = replies.into_iter();
    let reply = T::from_redis_value(replies.next().unwrap_or_else(|| Err(short_reply()))?)?;
    let acks = match replies
        .next()
        .map(|r| r.and_then(|v| Ok(i64::from_redis_value(v)?)))
    {
        Some(Ok(acks)) => u32::try_from(acks).unwrap_or(0),
        Some(Err(err)) => {
            tracing::warn!(error = %err, "WAIT failed after a lock write; counted as not replicated");
            0
        }
        None => 0,
    };
    let synced = if conn.replicated(key, acks).await {
        Synced::Yes
    } else {
        Synced::No {
            replicas: wait.replicas,
        }
    };
    Ok((reply, synced))
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

    /// The protocol over `conn`; lock writes wait up to `replica_sync` for replicas where the
    /// topology reports them ([`Connection::replicas`]).
    pub(crate) fn new(
        conn: Connection,
        publish: &'static str,
        replica_sync: Option<std::time::Duration>,
    ) -> Self {
        let numsub = if publish == "spublish" {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        };
        let replica_sync_ms = replica_sync
            .filter(|_| conn.counts_replicas())
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1));
        Protocol {
            conn,
            publish,
            numsub,
            replica_sync_ms,
        }
    }

    /// The `WAIT` a write to `key` is followed by: `None` when replica sync is off, the
    /// topology has no count (a standalone server; a cluster master not counted yet), or the
    /// key's master has no replica connected (as Redisson sends none then).
    pub(crate) fn wait_for(&self, key: &str) -> Option<Wait> {
        self.wait_for_count(self.conn.replicas_for(key)?)
    }

    /// The `WAIT` behind writes to the cluster master at `node` (see [`Protocol::wait_for`]).
    pub(crate) fn wait_for_node(&self, node: &(String, u16)) -> Option<Wait> {
        self.wait_for_count(self.conn.replicas_of_node(node)?)
    }

    fn wait_for_count(&self, replicas: u32) -> Option<Wait> {
        let timeout_ms = self.replica_sync_ms?;
        (replicas > 0).then_some(Wait {
            replicas,
            timeout_ms,
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

    /// `GET key` of a counter: `None` when absent.
    pub(crate) async fn counter(&self, key: &str) -> RedisResult<Option<i64>> {
        redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
    }
}
