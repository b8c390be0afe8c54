//! `rlock status`: a view of the library's [`LockClient::inspect`](redisson_lock::LockClient::inspect), as text or as one JSON
//! object.

use std::fmt::Write as _;
use std::time::Duration;

use redisson_lock::inspect::{ClientName, LockInfo, LockKind, LockState, ReplicaSyncState};
use redisson_lock::names::split_field;
use serde_json::{json, Value as Json};

use crate::duration::format_duration;

/// The stable JSON object of a lock in `status --json` and `top --json` (every field always
/// present; see README).
pub fn to_json(info: &LockInfo) -> Json {
    let owners: Vec<Json> = (info.holders.iter())
        .map(|o| {
            json!({
                "field": o.field,
                "client_id": o.client_id,
                "owner_id": o.owner_id,
                "holds": o.holds,
                "mode": o.mode,
                "client": o.client.as_ref().map(client_json),
            })
        })
        .collect();
    let queue: Vec<Json> = (info.queue.iter())
        .map(|w| {
            let (client_id, owner_id, _) = split_field(&w.field);
            json!({
                "field": w.field,
                "client_id": client_id,
                "owner_id": owner_id,
                "deadline_ms": w.deadline_ms,
            })
        })
        .collect();
    let now = now_ms();
    let permits: Vec<Json> = (info.permits.iter())
        .map(|p| {
            json!({
                "id": p.id,
                "expires_ms": p.expires_ms,
                "lease_left_ms": p.expires_ms.map(|at| (at - now).max(0)),
            })
        })
        .collect();
    json!({
        "name": info.name,
        "key": info.key,
        "state": info.state.as_str(),
        "kind": info.kind.map(|k| k.as_str()),
        "redis_type": info.redis_type,
        "rw_mode": info.mode,
        "owners": owners,
        "remaining_lease_ms": info.lease_left_ms,
        "waiters": info.waiters,
        "fencing_token": info.fencing_token,
        "queue": queue,
        "count": info.count,
        "permits_taken": info.permits_taken,
        "permits": permits,
        "node": info.node,
        "slot": info.slot,
    })
}

/// Who a holder is, where its client names its connections.
pub fn client_json(client: &ClientName) -> Json {
    json!({
        "service": client.service,
        "host": client.host,
        "pid": client.pid,
        "addr": client.addr,
    })
}

/// `service@host pid N (addr)`: a holder's client as a person reads it.
pub fn client_text(client: &ClientName) -> String {
    let addr = client.addr.as_deref().unwrap_or("?");
    format!(
        "{}@{} pid {} ({addr})",
        client.service, client.host, client.pid
    )
}

/// `status --json`: the lock's object, and the client's `replica_sync` as it ran (`on`, `off`,
/// or `unavailable`: the server has no `WAIT`).
pub fn status_json(info: &LockInfo, replica_sync: ReplicaSyncState) -> Json {
    let mut json = to_json(info);
    json["replica_sync"] = Json::from(replica_sync.as_str());
    json
}

/// The human-readable report: a headline, then one line per fact (replica sync only when the
/// server made the client give it up).
pub fn to_text(info: &LockInfo, replica_sync: ReplicaSyncState) -> String {
    let mut out = String::new();
    let key_note = if info.key == info.name {
        String::new()
    } else {
        format!(" (key `{}`)", info.key)
    };
    let name = &info.name;
    let _ = match (info.state, info.kind) {
        (LockState::Free, _) => writeln!(out, "`{name}`{key_note}: free"),
        (LockState::Held, Some(kind)) => {
            writeln!(out, "`{name}`{key_note}: held, {}", kind.describe())
        }
        (LockState::Held, None) => writeln!(out, "`{name}`{key_note}: held"),
        (LockState::Count, Some(LockKind::PermitSemaphore)) => {
            writeln!(out, "`{name}`{key_note}: {}", LockKind::PermitSemaphore.describe())
        }
        (LockState::Count, _) => writeln!(
            out,
            "`{name}`{key_note}: a count: a semaphore's permits or a count-down latch's count (Redisson RSemaphore / RCountDownLatch)"
        ),
        (LockState::NotALock, _) => writeln!(
            out,
            "`{name}`{key_note}: not a lock (the key holds a {})",
            info.redis_type
        ),
    };
    match (&info.node, info.slot) {
        (Some(node), Some(slot)) => {
            let _ = writeln!(out, "  node     {node}  (slot {slot})");
        }
        (Some(node), None) => {
            let _ = writeln!(out, "  node     {node}  (the master)");
        }
        _ => {}
    }
    if let Some(mode) = &info.mode {
        let _ = writeln!(out, "  mode     {mode}");
    }
    for o in &info.holders {
        let holds = o.holds.map_or("?".to_string(), |h| h.to_string());
        let mode = o.mode.map(|m| format!("  ({m})")).unwrap_or_default();
        let _ = match (&o.client_id, o.owner_id) {
            (Some(client), Some(id)) => writeln!(
                out,
                "  owner    client {client}  owner {id}  holds {holds}{mode}"
            ),
            _ => writeln!(out, "  field    {}  value {holds}{mode}", o.field),
        };
        if let Some(client) = &o.client {
            let _ = writeln!(out, "           {}", client_text(client));
        }
    }
    match info.lease_left_ms {
        Some(-1) => {
            let _ = writeln!(
                out,
                "  lease    no TTL (never expires: not written by Redisson)"
            );
        }
        Some(ms) if ms >= 0 => {
            let left = format_duration(Duration::from_millis(ms as u64));
            let _ = writeln!(out, "  lease    {left} remaining");
        }
        _ => {}
    }
    match (info.kind, info.count) {
        (Some(LockKind::PermitSemaphore), Some(free)) => {
            let taken = info.permits_taken.unwrap_or(0);
            let _ = writeln!(out, "  permits  {free} available, {taken} taken");
            let now = now_ms();
            for p in &info.permits {
                let lease = match p.expires_ms {
                    Some(at) if at > now => format!(
                        "{} left",
                        format_duration(Duration::from_millis((at - now) as u64))
                    ),
                    Some(_) => "expired (given back by the next call that looks)".to_string(),
                    None => "no lease (never expires)".to_string(),
                };
                let _ = writeln!(out, "  permit   {}  {lease}", p.id);
            }
        }
        (_, Some(count)) => {
            let _ = writeln!(
                out,
                "  count    {count} (a semaphore's permits available, or a latch's count: 0 is open)"
            );
        }
        _ => {}
    }
    if let Some(n) = info.waiters.filter(|n| *n > 0) {
        let _ = writeln!(out, "  waiting  {n} subscriber(s) of its channel");
    }
    if let Some(token) = info.fencing_token {
        let _ = writeln!(out, "  token    {token} (last fencing token handed out)");
    }
    for (i, w) in info.queue.iter().enumerate() {
        let deadline = (w.deadline_ms)
            .map(|d| format!("  gives up at {d} (epoch ms)"))
            .unwrap_or_default();
        let _ = writeln!(out, "  waiting  #{} {}{deadline}", i + 1, w.field);
    }
    if replica_sync == ReplicaSyncState::Unavailable {
        let _ = writeln!(
            out,
            "  replicas not waited for: the server has no WAIT (a failover may lose a lock)"
        );
    }
    out
}

/// This machine's clock in ms since the epoch, as permit expiries are written.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
