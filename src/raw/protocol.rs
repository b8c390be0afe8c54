//! The protocol layer every lock kind shares: the grouped write its script calls go through
//! ([`Protocol::send`], [`Protocol::send_all`]: `EVALSHA`, `EVAL` after `NOSCRIPT`, `WAIT`
//! behind writes under replica sync, all in transport's [`write`]), the outcomes the engine
//! understands ([`Attempt`], [`Release`]), and the kind-agnostic commands (spent latches,
//! read-only queries).
//!
//! Each call encodes its `EVALSHA` command once, straight into a [`redis::Cmd`] (redis-rs'
//! `ScriptInvocation` would copy every key and argument into its own buffer first, then again
//! into the command), with [`Script::evalsha`].

use std::future::Future;
use std::sync::Arc;

use crate::transport::replica_sync::ReplicaSync;
use crate::transport::write::{self, Answer};
pub(crate) use crate::transport::write::{Call, Script, Synced};
use crate::transport::Connection;

use super::spent::SpentQueue;
use super::Renewal;

use redis::{ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, Value};

static HELD_ACROSS: Script = Script::new(include_str!("../../scripts/lua/held_across.lua"));

/// How long an unlock latch lives, in ms (Redisson uses roughly 16–20 s).
pub(crate) const LATCH_TTL_MS: u64 = 20_000;

/// Outcome of one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The owner now holds the lock (first hold or one more). `token`: the fencing token
    /// this acquisition was given, from kinds that issue one.
    Acquired { token: Option<i64> },
    /// Someone else holds it; their remaining lease in ms (`-1` if the key has no TTL).
    Held { pttl_ms: i64 },
    /// The owner now holds the lock at the master, but none of its `replicas` acknowledged the
    /// write (replica sync, see [`Protocol::waits`]): a failover could lose it, so the
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

/// One acquire to send: whose, for how long, under which latch, and what the call is
/// (kinds that queue waiters tell a single attempt from a waiting one).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AcquireArgs<'a> {
    pub(crate) key: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) field: &'a str,
    /// What the hold takes: 1 for every lock kind (one hold, counted in the owner's field), `n`
    /// for a semaphore's `acquire(n)`.
    pub(crate) permits: u32,
    /// The call makes this one attempt and never waits (`try_lock`): a queueing kind must
    /// not queue it.
    pub(crate) try_once: bool,
    /// How long the call may keep a place in a queue, in ms: its wait when bounded, else the
    /// lock's [`queue_wait`](super::LockOptions::Queue) (Redisson's `threadWaitTime`).
    pub(crate) queue_wait_ms: u64,
    /// The client's clock at this attempt, in ms since the Unix epoch (a fair lock's queue
    /// deadlines are written in clients' clocks, as Redisson does).
    pub(crate) now_ms: u64,
}

/// The client's clock in ms since the Unix epoch, as queue deadlines are written.
pub(crate) fn now_ms() -> u64 {
    crate::sync::time::epoch_ms()
}

/// What an unlock needs to name one hold's release.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnlockArgs<'a> {
    pub(crate) key: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) field: &'a str,
    /// What the hold gives back ([`AcquireArgs::permits`]).
    pub(crate) permits: u32,
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

/// What every kind's scripts go through: the grouped write over the connection, the publish
/// command the unlock scripts run, the replica acknowledgement writes wait for, and the
/// kind-agnostic commands (latches, queries).
#[derive(Clone)]
pub(crate) struct Protocol {
    pub(super) conn: Connection,
    pub(super) publish: &'static str,
    /// The `PUBSUB` subcommand that counts the publish command's listeners.
    pub(super) numsub: &'static str,
    /// Whether and how long a write waits for replicas (shared with the client's other
    /// protocols: a server found without `WAIT` is so for all of them).
    replica_sync: Option<Arc<ReplicaSync>>,
    /// The client's spent latches, whose `DEL` its writes carry (see [`super::spent`]).
    spent: Arc<SpentQueue>,
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

impl Protocol {
    /// The publish command the unlock scripts run (`publish` or `spublish`).
    pub(crate) fn publish_command(&self) -> &'static str {
        self.publish
    }

    /// Replica sync as this client runs it (`None`: off, or a standalone server).
    pub(crate) fn replica_sync(&self) -> Option<&Arc<ReplicaSync>> {
        self.replica_sync.as_ref()
    }

    /// The connection the scripts go through (for how to batch keys).
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The protocol over `conn`; lock writes wait for replicas as `replica_sync` says, where
    /// the topology reports them, and carry the `DEL` of `spent` latches.
    pub(crate) fn new(
        conn: Connection,
        publish: &'static str,
        replica_sync: Option<Arc<ReplicaSync>>,
        spent: Arc<SpentQueue>,
    ) -> Self {
        let numsub = if publish == "spublish" {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        };
        Protocol {
            conn,
            publish,
            numsub,
            replica_sync,
            spent,
        }
    }

    /// The client's spent latches (for the watchdog's own protocol).
    #[cfg(not(feature = "model"))]
    pub(crate) fn spent(&self) -> &Arc<SpentQueue> {
        &self.spent
    }

    /// Sends one lock write through the grouped write (with its `WAIT` where replica sync
    /// asks for one): its reply and whether replicas acknowledged it. The write carries the
    /// `DEL` of spent latches beside its key where enough have gathered
    /// ([`SpentQueue::take_for`]). The future owns what it needs, so a cancelled caller can
    /// hand it to a background task.
    pub(crate) fn send(
        &self,
        call: Call,
    ) -> impl Future<Output = RedisResult<(Value, Synced)>> + Send + 'static {
        let (conn, sync) = (self.conn.clone(), self.replica_sync.clone());
        let carried = self.spent.take_for(&call.key);
        async move {
            let mut calls = vec![call];
            if let Some(carried) = &carried {
                calls.push(Call::command(&calls[0].key, carried.del()));
            }
            let mut answers = write::write(&conn, calls, sync.as_deref())
                .await
                .into_iter();
            let answer = answers.next().unwrap_or_else(|| Answer {
                reply: Err(short_reply()),
                synced: Synced::Yes,
            });
            if let (Some(carried), Some(Answer { reply: Ok(_), .. })) = (carried, answers.next()) {
                carried.done();
            }
            Ok((answer.reply?, answer.synced))
        }
    }

    /// Sends a read-only script call (no `WAIT` behind it): its reply.
    pub(crate) async fn read<T: FromRedisValue>(&self, call: Call) -> RedisResult<T> {
        let answer = write::write(&self.conn, vec![call], None).await.pop();
        let reply = answer.map_or_else(|| Err(short_reply()), |a| a.reply)?;
        Ok(T::from_redis_value(reply)?)
    }

    /// Sends `calls` through the grouped write: each node's calls in one write, with its
    /// `WAIT`; one answer per call, in order.
    pub(crate) fn send_all(
        &self,
        calls: Vec<Call>,
    ) -> impl Future<Output = Vec<Answer>> + Send + 'static {
        let (conn, sync) = (self.conn.clone(), self.replica_sync.clone());
        async move { write::write(&conn, calls, sync.as_deref()).await }
    }

    /// Deletes spent latches in one `DEL`, and returns once Redis has run it (so the caller
    /// knows to try again after a connection error: a latch left behind lingers for its PX).
    pub(crate) async fn delete_latches(&self, latches: &[String]) -> RedisResult<()> {
        if latches.is_empty() {
            return Ok(());
        }
        super::spent::delete(latches)
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

    /// Whether each `(key, field)` of each batch (none empty) is still held: per batch one
    /// read-only call of keys one node serves (none declared, as
    /// [`Connection::master_batches`] groups them; routed by its first key), all sent at once,
    /// without `WAIT` (they write nothing).
    /// Per batch, one [`Renewal`] per pair, as a renewal answers but nothing extended:
    /// `Renewed` still held, `Gone` not held, `Elsewhere` not served by that node.
    pub(crate) async fn held_across(
        &self,
        batches: &[Vec<(&str, &str)>],
    ) -> Vec<RedisResult<Vec<Renewal>>> {
        let calls = batches
            .iter()
            .map(|batch| Call::script(&HELD_ACROSS, batch[0].0, HELD_ACROSS.across(None, batch)))
            .collect();
        let answers = write::write(&self.conn, calls, None).await;
        batches
            .iter()
            .map(Vec::len)
            .zip(answers)
            .map(|(n, answer)| {
                super::rlock::renewed(FromRedisValue::from_redis_value(answer.reply?)?, n)
            })
            .collect()
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
