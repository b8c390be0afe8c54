//! Reading locks: one script call per lock (its layout, read atomically with bounded work),
//! the subscribers of its channels, and the names of the clients that hold it. A page of
//! locks on one node goes in one write.

use std::collections::HashMap;

use redis::{Cmd, Pipeline, Value};

use super::clients::{named_clients, ClientName};
use super::{Holder, LockInfo, LockKind, LockState, PermitTaken, Queued, READ_LIMIT};
use crate::error::{Error, Result};
use crate::names;
use crate::transport::write::{is_no_script, is_stale_route, Script, Target};
use crate::transport::Connection;

static INSPECT: Script = Script::new(include_str!("../../scripts/lua/inspect.lua"));

/// What Redis holds under the lock `name` (key `prefix + name`), with its waiters and the
/// names of its holders.
pub(crate) async fn inspect(conn: &Connection, prefix: &str, name: &str) -> Result<LockInfo> {
    let key = format!("{prefix}{name}");
    let target = conn.target_of(&key);
    let clients = client_names(conn).await;
    let mut page = read_page(conn, &target, &[(name.to_string(), key)], &clients).await?;
    Ok(page.remove(0))
}

/// Reads the locks `locks` (name, key), all served by `target`, in one write each for their
/// layouts and their channels' subscribers.
pub(super) async fn read_page(
    conn: &Connection,
    target: &Target,
    locks: &[(String, String)],
    clients: &HashMap<String, ClientName>,
) -> Result<Vec<LockInfo>> {
    let Some((_, first_key)) = locks.first() else {
        return Ok(Vec::new());
    };
    let mut conn = conn.clone();
    // With the keys beside each lock; without them where the ACL grants the lock keys only.
    let mut beside = true;
    let mut eval = false;
    let mut replies = loop {
        let mut pipe = Pipeline::with_capacity(locks.len());
        for (_, key) in locks {
            let call = read_call(key, conn.is_cluster(), beside);
            pipe.add_command(if eval {
                INSPECT.eval_instead(&call)
            } else {
                call
            });
        }
        let replies = (conn.send_many(target, &pipe, first_key).await).map_err(Error::Redis)?;
        let failed = |test: fn(&redis::RedisError) -> bool| {
            replies.iter().any(|r| matches!(r, Err(e) if test(e)))
        };
        if failed(is_no_script) && !eval {
            // (A restarted or flushed server: EVAL caches the script there.)
            eval = true;
        } else if failed(is_no_perm) && beside {
            beside = false;
        } else {
            break replies;
        }
    };
    let cluster = conn.is_cluster();
    // A lock whose slot has moved since the view was read (a failover, a migration): read
    // again through the cluster connection, which follows the redirect.
    for ((_, key), reply) in locks.iter().zip(replies.iter_mut()) {
        if matches!(reply, Err(err) if cluster && is_stale_route(err)) {
            if let Some(topology) = conn.topology() {
                topology.suspect();
            }
            let call = read_call(key, cluster, beside);
            *reply = match conn.routed(&call).await {
                Err(err) if is_no_script(&err) => conn.routed(&INSPECT.eval_instead(&call)).await,
                answer => answer,
            };
        }
    }
    let mut infos = Vec::with_capacity(locks.len());
    for ((name, key), reply) in locks.iter().zip(replies) {
        let mut info = parse(name, key, reply.map_err(Error::Redis)?)?;
        info.node = conn.address_of(target);
        info.slot = cluster.then(|| names::cluster_slot(key));
        for holder in &mut info.holders {
            holder.client = holder
                .client_id
                .as_ref()
                .and_then(|id| clients.get(id))
                .cloned();
        }
        infos.push(info);
    }
    count_waiters(&mut conn, target, &mut infos).await;
    Ok(infos)
}

fn is_no_perm(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
}

/// The script call for `key`: with the keys beside it (when `with_beside`), unless on a
/// cluster they would span slots (a name with braces of its own), where the lock's key goes
/// alone.
fn read_call(key: &str, cluster: bool, with_beside: bool) -> Cmd {
    let beside = [
        names::token_key(key),
        names::queue_key(key),
        names::timeout_key(key),
        names::suffixed(key, "timeout"),
    ];
    let slot = names::cluster_slot(key);
    let together =
        with_beside && (!cluster || beside.iter().all(|k| names::cluster_slot(k) == slot));
    let mut cmd = INSPECT.evalsha(if together { 5 } else { 1 }, 6, key.len() * 5 + 80);
    cmd.arg(key);
    if together {
        cmd.arg(&beside[..]);
    }
    cmd.arg(READ_LIMIT);
    cmd
}

/// The script's reply: `{type, pttl, hlen, fields, token, queue, deadlines, value, permits,
/// taken}`.
fn parse(name: &str, key: &str, reply: Value) -> Result<LockInfo> {
    let items: Vec<Value> = redis::from_redis_value(reply).map_err(|e| Error::Redis(e.into()))?;
    let [kind, pttl, hlen, fields, token, queued, deadlines, value, permits, taken] =
        <[Value; 10]>::try_from(items).map_err(|_| {
            Error::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "inspect reply of another length",
            )))
        })?;
    let read = |v: Value| -> std::result::Result<_, redis::RedisError> {
        Ok(redis::from_redis_value::<(
            String,
            i64,
            i64,
            Vec<(String, String)>,
            Option<String>,
            Vec<String>,
            Vec<(String, f64)>,
        )>(v)?)
    };
    let lock = Value::Array(vec![kind, pttl, hlen, fields, token, queued, deadlines]);
    let (redis_type, pttl, _hlen, mut fields, token, queued, deadlines) =
        read(lock).map_err(Error::Redis)?;
    let value: Option<Vec<u8>> =
        redis::from_redis_value(value).map_err(|e| Error::Redis(e.into()))?;
    let permits: Vec<(Vec<u8>, f64)> =
        redis::from_redis_value(permits).map_err(|e| Error::Redis(e.into()))?;
    let taken: u64 = redis::from_redis_value(taken).map_err(|e| Error::Redis(e.into()))?;
    fields.sort();
    let mode = (fields.iter())
        .find(|(f, _)| f == "mode")
        .map(|(_, v)| v.clone());
    let holders = fields
        .into_iter()
        .filter(|(f, _)| mode.is_none() || f != "mode")
        .map(|(field, value)| {
            let (client_id, owner_id, write) = names::split_field(&field);
            Holder {
                client_id: client_id.map(str::to_string),
                owner_id,
                holds: value.parse().ok(),
                mode: mode.as_ref().map(|_| if write { "write" } else { "read" }),
                client: None,
                field,
            }
        })
        .collect();
    let deadline = |field: &str| {
        (deadlines.iter())
            .find(|(f, _)| f == field)
            .map(|(_, at)| *at as i64)
    };
    let mut queue: Vec<Queued> = (queued.iter())
        .map(|field| Queued {
            field: field.clone(),
            deadline_ms: deadline(field),
        })
        .collect();
    for (field, _) in &deadlines {
        if !queued.contains(field) {
            queue.push(Queued {
                field: field.clone(),
                deadline_ms: deadline(field),
            });
        }
    }
    let fencing_token = token.and_then(|t| t.trim().parse().ok());
    let count = value
        .as_deref()
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<i64>().ok());
    let state = match redis_type.as_str() {
        "none" => LockState::Free,
        "hash" => LockState::Held,
        "string" if count.is_some() => LockState::Count,
        _ => LockState::NotALock,
    };
    let listed = taken > 0;
    let permits: Vec<PermitTaken> = match state {
        LockState::Count => permits
            .into_iter()
            .map(|(id, score)| PermitTaken {
                id: crate::raw::permit::to_hex(&id),
                expires_ms: (score < NEVER_EXPIRES).then_some(score as i64),
            })
            .collect(),
        _ => Vec::new(),
    };
    let kind = match state {
        LockState::NotALock => None,
        LockState::Count if listed => Some(LockKind::PermitSemaphore),
        LockState::Count => Some(LockKind::Count),
        _ if mode.is_some() => Some(LockKind::ReadWrite),
        _ if !queue.is_empty() => Some(LockKind::Fair),
        _ if fencing_token.is_some() => Some(LockKind::Fenced),
        LockState::Held => Some(LockKind::Lock),
        LockState::Free => None,
    };
    Ok(LockInfo {
        name: name.to_string(),
        key: key.to_string(),
        state,
        kind,
        redis_type,
        mode,
        holders,
        lease_left_ms: (state == LockState::Held).then_some(pttl),
        waiters: None,
        queue,
        fencing_token,
        count: (state == LockState::Count).then_some(count).flatten(),
        permits_taken: (state == LockState::Count && listed).then_some(taken),
        permits,
        node: None,
        slot: None,
    })
}

/// Redisson's score of a permit taken without a lease.
const NEVER_EXPIRES: f64 = crate::raw::permit::NEVER_EXPIRES as f64;

/// Fills in each lock's waiters: the subscribers of its channel, classic (`NUMSUB`, at every
/// master on a cluster: a classic subscriber may sit on any node) and sharded
/// (`SHARDNUMSUB` at `target`, where the server has it), or a fair lock's queue. Left `None`
/// where refused.
async fn count_waiters(conn: &mut Connection, target: &Target, infos: &mut [LockInfo]) {
    // The channels each lock's waiters listen on, by the lock's index: a count's may be a
    // semaphore's or a latch's (the layouts are the same).
    let mut channels: Vec<(usize, String)> = Vec::with_capacity(infos.len());
    for (i, info) in infos.iter().enumerate() {
        match info.kind {
            Some(LockKind::ReadWrite) => channels.push((i, names::rwlock_channel(&info.key))),
            Some(LockKind::PermitSemaphore) => {
                channels.push((i, names::semaphore_channel(&info.key)))
            }
            Some(LockKind::Count) => {
                channels.push((i, names::semaphore_channel(&info.key)));
                channels.push((i, names::latch_channel(&info.key)));
            }
            _ => channels.push((i, names::lock_channel(&info.key))),
        }
    }
    let names: Vec<&str> = channels.iter().map(|(_, c)| c.as_str()).collect();
    let mut counted: Option<Vec<u64>> = None;
    let mut add = |reply: Value| {
        let Ok(pairs) = redis::from_redis_value::<Vec<(String, u64)>>(reply) else {
            return;
        };
        let sums = counted.get_or_insert_with(|| vec![0; infos.len()]);
        for ((i, _), (_, n)) in channels.iter().zip(pairs) {
            sums[*i] += n;
        }
    };
    let classic_at = match conn.is_cluster() {
        true => conn.masters(),
        false => vec![target.clone()],
    };
    for node in classic_at {
        let mut numsub = redis::cmd("PUBSUB");
        numsub.arg("NUMSUB").arg(&names);
        if let Ok(reply) = conn.send_to_node(&node, &numsub).await {
            add(reply);
        }
    }
    let mut shardnumsub = redis::cmd("PUBSUB");
    shardnumsub.arg("SHARDNUMSUB").arg(&names);
    if let Ok(reply) = conn.send_to_node(target, &shardnumsub).await {
        add(reply);
    }
    if let Some(counted) = counted {
        for (info, n) in infos.iter_mut().zip(counted) {
            // A holder's client that listens for its loss is one subscriber, not a waiter.
            let mut watching: Vec<&str> = (info.holders.iter())
                .filter_map(|h| h.client.as_ref().filter(|c| c.watches))
                .map(|c| c.client_id.as_str())
                .collect();
            watching.sort_unstable();
            watching.dedup();
            info.waiters = Some(n.saturating_sub(watching.len() as u64));
        }
    }
    // A fair lock's waiters listen on channels of their own: its queue counts them.
    for info in infos.iter_mut() {
        if info.kind == Some(LockKind::Fair) {
            info.waiters = Some(info.queue.len() as u64);
        }
    }
}

/// The named clients connected to any master, by client id (empty where `CLIENT LIST` is
/// refused).
pub(super) async fn client_names(conn: &Connection) -> HashMap<String, ClientName> {
    let mut clients = HashMap::new();
    let mut conn = conn.clone();
    let mut list = redis::cmd("CLIENT");
    list.arg("LIST").arg("TYPE").arg("normal");
    for node in conn.masters() {
        match conn.send_to_node(&node, &list).await {
            Ok(reply) => {
                if let Ok(text) = redis::from_redis_value::<String>(reply) {
                    named_clients(&text, &mut clients);
                }
            }
            Err(err) => tracing::debug!(error = %err, "CLIENT LIST refused; holders unnamed"),
        }
    }
    clients
}
