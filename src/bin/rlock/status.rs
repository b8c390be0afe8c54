//! `rlock status`: what Redis holds under a lock's name, read with plain commands, with the
//! Redisson layout recognised (RLock, fenced lock, read-write lock, fair lock).

use std::fmt::Write as _;
use std::time::Duration;

use redis::Value;
use serde_json::{json, Value as Json};

use crate::duration::format_duration;
use crate::failure::Failure;
use crate::names;
use crate::server::Placement;

/// Whether the key is a held lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No key: nobody holds the lock.
    Free,
    /// A hash: the lock is held by the owners listed.
    Held,
    /// The key holds another type: it is not a lock.
    NotALock,
}

/// Which Redisson lock the keys are laid out as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `RLock`: a hash of `<uuid>:<n>` fields.
    Lock,
    /// `RFencedLock`: the same hash, plus a token counter.
    Fenced,
    /// `RReadWriteLock`: a hash with a `mode` field.
    ReadWrite,
    /// `RFairLock`: the same hash, plus a queue and a deadline zset.
    Fair,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fenced => "fenced",
            Kind::ReadWrite => "read_write",
            Kind::Fair => "fair",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Lock => "reentrant lock (Redisson RLock)",
            Kind::Fenced => "fenced lock (Redisson RFencedLock)",
            Kind::ReadWrite => "read-write lock (Redisson RReadWriteLock)",
            Kind::Fair => "fair lock (Redisson RFairLock)",
        }
    }
}

/// One field of the lock hash: an owner and its hold count.
#[derive(Debug)]
pub struct Holder {
    /// The raw hash field.
    pub field: String,
    /// The client UUID part, if the field has the `<uuid>:<n>` shape.
    pub client_id: Option<String>,
    /// The owner id part (Java's thread id).
    pub owner_id: Option<i64>,
    /// The hold count (the field's value), if it is an integer.
    pub holds: Option<i64>,
    /// `read` or `write` for a read-write lock, else `None`.
    pub mode: Option<&'static str>,
}

/// One owner waiting in a fair lock's queue.
#[derive(Debug)]
pub struct Waiter {
    /// The waiter's owner field.
    pub field: String,
    /// The client UUID part.
    pub client_id: Option<String>,
    /// The owner id part.
    pub owner_id: Option<i64>,
    /// When the waiter drops out of the queue (epoch ms, from the timeout zset).
    pub deadline_ms: Option<i64>,
}

/// Everything `status` reports about one lock.
#[derive(Debug)]
pub struct Status {
    /// The name given on the command line.
    pub name: String,
    /// The Redis key (the name with the key prefix).
    pub key: String,
    /// Free, held, or not a lock.
    pub state: State,
    /// The layout recognised; `None` when nothing identifies one.
    pub kind: Option<Kind>,
    /// The key's Redis type (`hash`, `none`, `string`, ...).
    pub redis_type: String,
    /// A read-write lock's `mode` field.
    pub rw_mode: Option<String>,
    /// The hash's owner fields, sorted.
    pub owners: Vec<Holder>,
    /// `PTTL` of the key: `None` when free, `-1` for a key without TTL.
    pub remaining_lease_ms: Option<i64>,
    /// A fenced lock's token counter (the last token handed out).
    pub fencing_token: Option<i64>,
    /// A fair lock's waiting owners, first in line first.
    pub queue: Vec<Waiter>,
    /// On a cluster: the node serving the key, and its slot; on Sentinel: the master.
    pub placement: Option<Placement>,
}

/// Reads the lock `name` (key `prefix + name`) and the keys beside it.
pub fn inspect(conn: &mut redis::Connection, prefix: &str, name: &str) -> Result<Status, Failure> {
    let key = format!("{prefix}{name}");
    let (token_key, queue_key, timeout_key) = (
        names::token_key(&key),
        names::queue_key(&key),
        names::timeout_key(&key),
    );
    // Types first, so the reads below never hit WRONGTYPE; each batch is one MULTI/EXEC.
    let types: redis::RedisResult<(String, String, String, String)> = redis::pipe()
        .atomic()
        .cmd("TYPE")
        .arg(&key)
        .cmd("TYPE")
        .arg(&token_key)
        .cmd("TYPE")
        .arg(&queue_key)
        .cmd("TYPE")
        .arg(&timeout_key)
        .query(conn);
    let (key_type, token_type, queue_type, timeout_type) = match types {
        Ok(types) => types,
        // An ACL that grants the lock keys only: report what the lock's own key says.
        Err(err) if is_no_permission(&err) => {
            let key_type: String = redis::cmd("TYPE")
                .arg(&key)
                .query(conn)
                .map_err(Failure::from_redis)?;
            let none = || "none".to_string();
            (key_type, none(), none(), none())
        }
        Err(err) => return Err(Failure::from_redis(err)),
    };
    // Only the reads that match each key's type: one of another type would fail the batch.
    let mut reads = redis::pipe();
    reads.atomic().cmd("PTTL").arg(&key);
    if key_type == "hash" {
        reads.cmd("HGETALL").arg(&key);
    }
    if token_type == "string" {
        reads.cmd("GET").arg(&token_key);
    }
    if queue_type == "list" {
        reads.cmd("LRANGE").arg(&queue_key).arg(0).arg(-1);
    }
    if timeout_type == "zset" {
        reads
            .cmd("ZRANGE")
            .arg(&timeout_key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
    }
    let replies: Vec<Value> = reads.query(conn).map_err(Failure::from_redis)?;
    let mut replies = replies.into_iter();
    let mut next = |wanted: bool| if wanted { replies.next() } else { None };
    let parse_err = |e: redis::ParsingError| Failure::from_redis(e.into());

    let pttl: i64 =
        redis::from_redis_value(next(true).unwrap_or(Value::Int(-2))).map_err(parse_err)?;
    let mut fields: Vec<(String, String)> = match next(key_type == "hash") {
        Some(hash) => redis::from_redis_value(hash).map_err(parse_err)?,
        None => Vec::new(),
    };
    fields.sort();
    let fencing_token = match next(token_type == "string") {
        Some(token) => redis::from_redis_value::<Option<String>>(token)
            .map_err(parse_err)?
            .and_then(|t| t.trim().parse::<i64>().ok()),
        None => None,
    };
    let queued: Vec<String> = match next(queue_type == "list") {
        Some(queue) => redis::from_redis_value(queue).map_err(parse_err)?,
        None => Vec::new(),
    };
    let deadlines: Vec<(String, f64)> = match next(timeout_type == "zset") {
        Some(zset) => redis::from_redis_value(zset).map_err(parse_err)?,
        None => Vec::new(),
    };

    let rw_mode = fields
        .iter()
        .find(|(f, _)| f == "mode")
        .map(|(_, v)| v.clone());
    let owners: Vec<Holder> = fields
        .into_iter()
        .filter(|(f, _)| rw_mode.is_none() || f != "mode")
        .map(|(field, value)| {
            let (client_id, owner_id, write) = names::split_field(&field);
            let mode = match (&rw_mode, write) {
                (None, _) => None,
                (Some(_), true) => Some("write"),
                (Some(_), false) => Some("read"),
            };
            Holder {
                client_id: client_id.map(str::to_string),
                owner_id,
                holds: value.parse().ok(),
                mode,
                field,
            }
        })
        .collect();
    // The queue, with each waiter's deadline; waiters only in the zset are listed after.
    let mut queue: Vec<Waiter> = queued
        .iter()
        .map(|field| waiter(field, &deadlines))
        .collect();
    for (field, _) in &deadlines {
        if !queued.contains(field) {
            queue.push(waiter(field, &deadlines));
        }
    }

    let state = match key_type.as_str() {
        "none" => State::Free,
        "hash" => State::Held,
        _ => State::NotALock,
    };
    let kind = match state {
        State::NotALock => None,
        _ if rw_mode.is_some() => Some(Kind::ReadWrite),
        _ if queue_type == "list" || timeout_type == "zset" => Some(Kind::Fair),
        _ if fencing_token.is_some() => Some(Kind::Fenced),
        State::Held => Some(Kind::Lock),
        State::Free => None,
    };
    Ok(Status {
        name: name.to_string(),
        key,
        state,
        kind,
        redis_type: key_type,
        rw_mode,
        owners,
        remaining_lease_ms: (state == State::Held).then_some(pttl),
        fencing_token,
        queue,
        placement: None,
    })
}

/// A refusal by the server's ACL (inside MULTI it may surface as the aborted transaction).
fn is_no_permission(err: &redis::RedisError) -> bool {
    matches!(err.code(), Some("NOPERM" | "EXECABORT")) || err.to_string().contains("NOPERM")
}

fn waiter(field: &str, deadlines: &[(String, f64)]) -> Waiter {
    let (client_id, owner_id, _) = names::split_field(field);
    Waiter {
        field: field.to_string(),
        client_id: client_id.map(str::to_string),
        owner_id,
        deadline_ms: deadlines
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, score)| *score as i64),
    }
}

impl Status {
    /// The stable JSON object of `status --json` (every field always present; see README).
    pub fn to_json(&self) -> Json {
        let owners: Vec<Json> = self
            .owners
            .iter()
            .map(|o| {
                json!({
                    "field": o.field,
                    "client_id": o.client_id,
                    "owner_id": o.owner_id,
                    "holds": o.holds,
                    "mode": o.mode,
                })
            })
            .collect();
        let queue: Vec<Json> = self
            .queue
            .iter()
            .map(|w| {
                json!({
                    "field": w.field,
                    "client_id": w.client_id,
                    "owner_id": w.owner_id,
                    "deadline_ms": w.deadline_ms,
                })
            })
            .collect();
        json!({
            "name": self.name,
            "key": self.key,
            "state": match self.state {
                State::Free => "free",
                State::Held => "held",
                State::NotALock => "not_a_lock",
            },
            "kind": self.kind.map(Kind::label),
            "redis_type": self.redis_type,
            "rw_mode": self.rw_mode,
            "owners": owners,
            "remaining_lease_ms": self.remaining_lease_ms,
            "fencing_token": self.fencing_token,
            "queue": queue,
            "node": self.placement.as_ref().map(|p| p.node.clone()),
            "slot": self.placement.as_ref().and_then(|p| p.slot),
        })
    }

    /// The human-readable report: a headline, then one line per fact.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let key_note = if self.key == self.name {
            String::new()
        } else {
            format!(" (key `{}`)", self.key)
        };
        let what = self.kind.map(Kind::describe);
        let _ = match (self.state, what) {
            (State::Free, _) => writeln!(out, "`{}`{key_note}: free", self.name),
            (State::Held, Some(what)) => writeln!(out, "`{}`{key_note}: held, {what}", self.name),
            (State::Held, None) => writeln!(out, "`{}`{key_note}: held", self.name),
            (State::NotALock, _) => writeln!(
                out,
                "`{}`{key_note}: not a lock (the key holds a {})",
                self.name, self.redis_type
            ),
        };
        match &self.placement {
            Some(Placement {
                node,
                slot: Some(slot),
            }) => {
                let _ = writeln!(out, "  node     {node}  (slot {slot})");
            }
            Some(Placement { node, slot: None }) => {
                let _ = writeln!(out, "  node     {node}  (the master)");
            }
            None => {}
        }
        if let Some(mode) = &self.rw_mode {
            let _ = writeln!(out, "  mode     {mode}");
        }
        for o in &self.owners {
            let holds = o.holds.map_or("?".to_string(), |h| h.to_string());
            let mode = o.mode.map(|m| format!("  ({m})")).unwrap_or_default();
            let _ = match (&o.client_id, o.owner_id) {
                (Some(client), Some(id)) => writeln!(
                    out,
                    "  owner    client {client}  owner {id}  holds {holds}{mode}"
                ),
                _ => writeln!(out, "  field    {}  value {holds}{mode}", o.field),
            };
        }
        match self.remaining_lease_ms {
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
        if let Some(token) = self.fencing_token {
            let _ = writeln!(out, "  token    {token} (last fencing token handed out)");
        }
        for (i, w) in self.queue.iter().enumerate() {
            let deadline = w
                .deadline_ms
                .map(|d| format!("  gives up at {d} (epoch ms)"))
                .unwrap_or_default();
            let _ = writeln!(out, "  waiting  #{} {}{deadline}", i + 1, w.field);
        }
        out
    }
}
