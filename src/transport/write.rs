//! The one grouped write every lock command goes through: acquires, unlocks, a hand-off's
//! unlock-and-acquire, a watchdog cycle's renewals, forced unlocks.
//!
//! Each [`Call`] carries the key that routes it. [`write`] groups the calls by the node that
//! serves them (one group on a standalone server or a Sentinel-watched master; each master of
//! a cluster, as the client's [`Topology`](super::topology::Topology) says), sends each group
//! in one write, over the direct lane on a cluster, with `WAIT n t` behind it where that node
//! has `n` replicas and replica sync is on (a `WAIT` acknowledges the writes sent before it on
//! the same connection, so it must ride in the same write). Calls a node answered `NOSCRIPT`
//! (nothing ran: a restarted or flushed server, a promoted replica) go to it again as `EVAL`,
//! which caches the script there, in one more write. On a cluster a call answered `MOVED`,
//! `ASK` or another sign of a stale map is sent again alone through redis-rs's cluster
//! connection, which follows redirects, and the topology is read again. Every lock command is
//! idempotent (by its latch, or a renewal's nature), so sending it again is exact.

use std::sync::OnceLock;

use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, FromRedisValue, Pipeline, RedisResult, RetryMethod, ServerErrorKind};
use redis::{RedisError, Value};

use super::replica_sync::ReplicaSync;
use super::{Connection, NodeAddr};

/// A Lua script: its text, and its SHA-1 for `EVALSHA` (worked out on first use).
pub(crate) struct Script {
    code: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    pub(crate) const fn new(code: &'static str) -> Script {
        Script {
            code,
            sha: OnceLock::new(),
        }
    }

    pub(crate) fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| redis::Script::new(self.code).get_hash().to_string())
    }

    /// `EVALSHA <sha1> <numkeys>`, with room for `args` more arguments of about `bytes` bytes.
    pub(crate) fn evalsha(&self, numkeys: usize, args: usize, bytes: usize) -> Cmd {
        let mut cmd = Cmd::with_capacity(3 + args, 48 + bytes);
        cmd.arg("EVALSHA").arg(self.sha()).arg(numkeys);
        cmd
    }

    /// `EVALSHA <sha1> 0 [lead] key1 field1 .. keyn fieldn`: the keys in ARGV, none declared,
    /// so that one call may carry keys of any slot its node serves (the renewal and the check
    /// across slots).
    pub(crate) fn across(&self, lead: Option<u64>, pairs: &[(&str, &str)]) -> Cmd {
        let bytes: usize = pairs.iter().map(|(k, f)| k.len() + f.len() + 16).sum();
        let args = 2 * pairs.len() + usize::from(lead.is_some());
        let mut cmd = self.evalsha(0, args, bytes);
        if let Some(lead) = lead {
            cmd.arg(lead);
        }
        for (key, field) in pairs {
            cmd.arg(*key).arg(*field);
        }
        cmd
    }

    /// The `EVALSHA` call `cmd` (built by [`Script::evalsha`]) as `EVAL` with this script's
    /// text.
    pub(crate) fn eval_instead(&self, cmd: &Cmd) -> Cmd {
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

/// One command to send, with the key that routes it.
pub(crate) struct Call {
    /// The key whose node serves the call (a keyless command such as `PUBSUB` goes to the
    /// node of the key it is about).
    pub(crate) key: String,
    pub(crate) cmd: Cmd,
    /// The script an `EVALSHA` runs, to send as `EVAL` after `NOSCRIPT`.
    pub(crate) script: Option<&'static Script>,
}

impl Call {
    /// A script call built by [`Script::evalsha`], for `key`.
    pub(crate) fn script(script: &'static Script, key: &str, cmd: Cmd) -> Call {
        Call {
            key: key.to_string(),
            cmd,
            script: Some(script),
        }
    }

    /// A plain command, sent to `key`'s node.
    pub(crate) fn command(key: &str, cmd: Cmd) -> Call {
        Call {
            key: key.to_string(),
            cmd,
            script: None,
        }
    }

    fn as_eval(&self) -> Option<Cmd> {
        Some(self.script?.eval_instead(&self.cmd))
    }
}

/// Whether a write's replicas acknowledged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// At least one replica did, or no `WAIT` was asked for (or needed: see
    /// [`Connection::replicated`]).
    Yes,
    /// None of the node's `replicas` did in time.
    No { replicas: u32 },
}

/// One call's answer: its reply, and whether its node's replicas acknowledged the write that
/// carried it.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) reply: RedisResult<Value>,
    pub(crate) synced: Synced,
}

/// A `NOSCRIPT` reply: the server does not know the script, so nothing ran.
pub(crate) fn is_no_script(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Where one group of calls goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// The one master (a standalone server, the master Sentinel names).
    Master,
    /// The cluster master at this address.
    Node(NodeAddr),
    /// A cluster slot whose master the view does not know (none read yet, mid-failover):
    /// redis-rs's cluster connection routes it.
    Slot(u16),
}

/// The `WAIT` behind a group's write.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wait {
    pub(super) replicas: u32,
    pub(super) timeout_ms: u64,
}

/// Sends `calls` grouped by node, each group in one write (all groups at once), and returns
/// one answer per call, in order. `sync`: replica sync, `None` when off.
/// A write that failed as a whole (an I/O error) fails each of its calls.
pub(crate) async fn write(
    conn: &Connection,
    calls: Vec<Call>,
    sync: Option<&ReplicaSync>,
) -> Vec<Answer> {
    let groups = conn.group(&calls);
    let mut answers: Vec<Option<Answer>> = (0..calls.len()).map(|_| None).collect();
    if let [(target, members)] = &groups[..] {
        // (One node, as every acquire and unlock: no join.)
        for (i, answer) in write_group(conn.clone(), target, &calls, members, sync).await {
            answers[i] = Some(answer);
        }
    } else {
        let writes = groups.iter().map(|(target, members)| {
            Box::pin(write_group(conn.clone(), target, &calls, members, sync))
                as crate::future::BoxFuture<'_, _>
        });
        for group in crate::future::join_all(writes.collect()).await {
            for (i, answer) in group {
                answers[i] = Some(answer);
            }
        }
    }
    answers
        .into_iter()
        .map(|answer| {
            answer.unwrap_or_else(|| Answer {
                reply: Err(short_reply()),
                synced: Synced::Yes,
            })
        })
        .collect()
}

/// One group's write (and its `NOSCRIPT` round and lone re-sends): `(call index, answer)`.
async fn write_group(
    mut conn: Connection,
    target: &Target,
    calls: &[Call],
    members: &[usize],
    sync: Option<&ReplicaSync>,
) -> Vec<(usize, Answer)> {
    let wait = sync.and_then(|s| s.timeout_ms()).and_then(|timeout_ms| {
        let replicas = conn.replicas_at(target)?;
        (replicas > 0).then_some(Wait {
            replicas,
            timeout_ms,
        })
    });
    let mut answers = Vec::with_capacity(members.len());
    let mut alone = Vec::new();
    let mut pending: Vec<usize> = members.to_vec();
    for as_eval in [false, true] {
        if pending.is_empty() {
            break;
        }
        let first_key = &calls[pending[0]].key;
        let (replies, synced) = if let ([i], None) = (&pending[..], wait) {
            // One call, no WAIT: sent as a command, not a pipeline of one.
            let call = &calls[*i];
            let cmd = if as_eval { call.as_eval() } else { None };
            let reply = conn
                .send_one(target, cmd.as_ref().unwrap_or(&call.cmd))
                .await;
            (Ok(vec![reply]), Synced::Yes)
        } else {
            let cmds = pending.iter().map(|&i| {
                let call = &calls[i];
                let cmd = if as_eval { call.as_eval() } else { None };
                cmd.unwrap_or_else(|| call.cmd.clone())
            });
            let (replies, acks) = send_synced(&mut conn, target, cmds, wait, first_key).await;
            let mut synced = Synced::Yes;
            if let (Some(wait), Ok(_)) = (wait, &replies) {
                synced = acknowledged(&mut conn, target, first_key, acks, wait, sync).await;
            }
            (replies, synced)
        };
        let replies = match replies {
            Ok(replies) => replies,
            Err(err) => {
                for &i in &pending {
                    let reply = Err(err.clone());
                    answers.push((i, Answer { reply, synced }));
                }
                break;
            }
        };
        let mut unknown_script = Vec::new();
        let mut replies = replies.into_iter();
        for &i in &pending {
            let reply = replies.next().unwrap_or_else(|| Err(short_reply()));
            match &reply {
                Err(err) if !as_eval && is_no_script(err) && calls[i].script.is_some() => {
                    unknown_script.push(i)
                }
                Err(err) if conn.is_cluster() && is_stale_route(err) => alone.push(i),
                _ => answers.push((i, Answer { reply, synced })),
            }
        }
        pending = unknown_script;
    }
    for i in alone {
        answers.push((i, send_alone(&mut conn, &calls[i], wait, sync).await));
    }
    answers
}

/// Sends `cmds` to `target` in one write, with `wait` behind them: the replies, and the
/// `WAIT`'s. Where the connection shares `WAIT`s ([`SharedWait`]), writes queued behind one
/// out share the next.
async fn send_synced(
    conn: &mut Connection,
    target: &Target,
    cmds: impl Iterator<Item = Cmd>,
    wait: Option<Wait>,
    first_key: &str,
) -> (
    RedisResult<Vec<RedisResult<Value>>>,
    Option<RedisResult<Value>>,
) {
    if let (Some(wait), Some(shared), false) =
        (wait, conn.shared_wait(), matches!(target, Target::Slot(_)))
    {
        let shared = shared.clone();
        return match shared
            .send(conn, target, cmds.collect(), wait, first_key)
            .await
        {
            Ok((replies, acks)) => (Ok(replies), acks),
            Err(err) => (Err(err), None),
        };
    }
    let mut pipe = Pipeline::new();
    for cmd in cmds {
        pipe.add_command(cmd);
    }
    if let Some(wait) = wait {
        pipe.cmd("WAIT").arg(wait.replicas).arg(wait.timeout_ms);
    }
    let mut replies = conn.send_many(target, &pipe, first_key).await;
    let acks = match (&mut replies, wait) {
        (Ok(replies), Some(_)) => replies.pop(),
        _ => None,
    };
    (replies, acks)
}

/// A call that met a stale map on a cluster, sent again through redis-rs's cluster connection
/// (which follows `MOVED` and `ASK`), then its `WAIT`, routed to the key's master again.
async fn send_alone(
    conn: &mut Connection,
    call: &Call,
    wait: Option<Wait>,
    sync: Option<&ReplicaSync>,
) -> Answer {
    if let Some(topology) = conn.topology() {
        topology.suspect();
    }
    let mut reply = conn.routed(&call.cmd).await;
    if let (Err(err), Some(eval)) = (&reply, call.as_eval()) {
        if is_no_script(err) {
            reply = conn.routed(&eval).await;
        }
    }
    let mut synced = Synced::Yes;
    if let (Some(wait), Ok(_)) = (wait, &reply) {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(wait.replicas).arg(wait.timeout_ms);
        let slot = Target::Slot(crate::names::cluster_slot(&call.key));
        let acks = conn.send_one(&slot, &cmd).await;
        synced = acknowledged(conn, &slot, &call.key, Some(acks), wait, sync).await;
    }
    Answer { reply, synced }
}

/// Reads a `WAIT` reply (the replicas that acknowledged). A `WAIT` that failed counts as no
/// acknowledgement (the calls' own answers must not be lost for it); no acknowledgement from a
/// master that, counted again, has no replica able to give one is enough. A `WAIT` refused by
/// a server never seen to have one means it has none for us ([`refuses_wait`]): replica sync
/// left at its default is given up ([`ReplicaSync::refused`]) and the write stands.
async fn acknowledged(
    conn: &mut Connection,
    target: &Target,
    key: &str,
    reply: Option<RedisResult<Value>>,
    wait: Wait,
    sync: Option<&ReplicaSync>,
) -> Synced {
    let acks = match reply.map(|r| r.and_then(|v| u32::from_redis_value(v).map_err(Into::into))) {
        Some(Ok(acks)) => {
            sync.inspect(|s| s.confirm());
            acks
        }
        Some(Err(err)) => {
            // (Only while the server was never seen to have WAIT: see ReplicaSync::confirm.)
            if let Some(sync) = sync.filter(|s| !s.confirmed()) {
                if refuses_wait(conn, target, &err).await && sync.refused(&err) {
                    return Synced::Yes;
                }
            }
            tracing::warn!(error = %err, "WAIT failed after a lock write; counted as not replicated");
            0
        }
        None => 0,
    };
    if conn.replicated(key, acks).await {
        Synced::Yes
    } else {
        Synced::No {
            replicas: wait.replicas,
        }
    }
}

/// Whether `err`, a `WAIT`'s error reply from `target`, says that server has no `WAIT` for
/// this client: denied by its ACL (`NOPERM`), or refused (`ERR`: unknown, renamed away) by a
/// node that is a master. A master demoted in a failover answers `ERR` too (no `WAIT` on a
/// replica), so a plain `ERR` counts only once the node's `INFO replication` says
/// `role:master`; anything else (no answer, a replica, a busy or loading server) is a write
/// not acknowledged, as before.
async fn refuses_wait(conn: &mut Connection, target: &Target, err: &RedisError) -> bool {
    match err.kind() {
        ErrorKind::Server(ServerErrorKind::NoPerm) => true,
        ErrorKind::Server(ServerErrorKind::ResponseError) => {
            let mut info = redis::cmd("INFO");
            info.arg("replication");
            let reply = conn.send_one(target, &info).await;
            let text = reply.and_then(|v| Ok(String::from_redis_value(v)?));
            text.is_ok_and(|text| text.lines().any(|l| l.trim_end() == "role:master"))
        }
        _ => false,
    }
}

/// An error that says the node was not (or is no longer) the key's master, or could not be
/// reached: the cluster connection may know better.
pub(crate) fn is_stale_route(err: &RedisError) -> bool {
    !matches!(err.retry_method(), RetryMethod::NoRetry)
}

fn short_reply() -> RedisError {
    RedisError::from((ErrorKind::UnexpectedReturnType, "pipeline reply too short"))
}

/// The replies of a pipeline sent to one node, each error reply an `Err` of its own command.
pub(super) async fn packed(
    conn: &mut impl ConnectionLike,
    pipe: &Pipeline,
) -> RedisResult<Vec<RedisResult<Value>>> {
    let replies = conn.req_packed_commands(pipe, 0, pipe.len()).await?;
    Ok(replies.into_iter().map(Value::extract_error).collect())
}

#[cfg(test)]
mod tests {
    use super::Script;

    static SCRIPT: Script = Script::new("return KEYS[1]");

    #[test]
    fn an_evalsha_becomes_the_same_call_as_eval() {
        let mut cmd = SCRIPT.evalsha(1, 2, 16);
        cmd.arg("lock").arg(30_000);
        let eval = SCRIPT.eval_instead(&cmd);
        let args: Vec<Vec<u8>> = eval
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        let expected: Vec<&[u8]> = vec![b"EVAL", b"return KEYS[1]", b"1", b"lock", b"30000"];
        assert_eq!(args, expected);
    }
}
