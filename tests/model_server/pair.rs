//! The two sides of the differential test: a real `redis-server` and the stand-in, each
//! operation sent to both in the layout the crate's command builders use (src/raw/rlock.rs,
//! src/raw/fair.rs), then replies, keys and published messages compared.
//!
//! The stand-in's clock stands still while real time runs on the real server: remaining TTLs,
//! and what is computed from them (an acquire's PTTL reply, a fair waiter's deadline), may be
//! up to [`TOLERANCE_MS`] lower on the real side. Leases and the client clock move in whole
//! seconds, so a comparison with the client clock never falls inside that difference.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use redis::{RedisResult, Value as Reply};
use redisson_lock::model::server::{Server, Stored, Value};

use crate::ops::{channel, listing, waiter_channel, wire, Op, NAMES, OWNERS};
use crate::support::RedisServer;

/// How far a real TTL (or a deadline computed from one) may trail the stand-in's.
pub const TOLERANCE_MS: i64 = 2000;
/// A published message: channel and payload.
pub type Heard = (String, Vec<u8>);

/// Every channel a script here publishes on: each lock's, and each fair waiter's.
fn channels() -> Vec<String> {
    let per_name = |name| {
        let waiters = (0..OWNERS.len()).map(move |owner| waiter_channel(name, owner));
        std::iter::once(channel(name)).chain(waiters)
    };
    (0..NAMES.len()).flat_map(per_name).collect()
}

/// A real server and a stand-in, both listening on every channel.
pub struct Pair {
    real: redis::Connection,
    /// Subscribed (`SUBSCRIBE` and `SSUBSCRIBE`) to every channel.
    listen: redis::Connection,
    pub model: Server,
    heard: Arc<Mutex<Vec<Heard>>>,
    /// The messages both sides published (the same), since the last [`Pair::take_heard`].
    published: Vec<Heard>,
    _server: RedisServer,
}

impl Pair {
    pub fn start() -> Pair {
        let server = RedisServer::start();
        let mut listen = server.conn();
        for channel in channels() {
            for command in ["SUBSCRIBE", "SSUBSCRIBE"] {
                let packed = redis::cmd(command).arg(&channel).get_packed_command();
                listen.send_packed_command(&packed).unwrap();
                listen.recv_response().unwrap();
            }
        }
        let mut real = server.conn();
        for script in [
            "acquire",
            "unlock",
            "spin_unlock",
            "force_unlock",
            "renew",
            "renew_across",
            "held_across",
        ]
        .into_iter()
        .chain([
            "fair_acquire",
            "fair_unlock",
            "fair_withdraw",
            "fair_force_unlock",
        ]) {
            let _: String = (redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(crate::support::script(script)))
            .query(&mut real)
            .unwrap();
        }
        let heard = Arc::new(Mutex::new(Vec::new()));
        let model = Pair::model(&heard);
        Pair {
            real,
            listen,
            model,
            heard,
            published: Vec::new(),
            _server: server,
        }
    }

    /// A fresh stand-in listening on every channel.
    fn model(heard: &Arc<Mutex<Vec<Heard>>>) -> Server {
        let model = Server::new();
        let heard = heard.clone();
        let conn = model.connect_pubsub(Arc::new(move |channel: &str, payload: &[u8]| {
            heard
                .lock()
                .unwrap()
                .push((channel.to_string(), payload.to_vec()))
        }));
        for channel in channels() {
            model.subscribe(conn, &channel);
        }
        model
    }

    /// Empties both sides: `FLUSHALL` and a new stand-in.
    pub fn reset(&mut self) {
        let _: () = redis::cmd("FLUSHALL").query(&mut self.real).unwrap();
        self.heard.lock().unwrap().clear();
        self.published.clear();
        self.model = Pair::model(&self.heard);
    }

    /// The messages published (the same on both sides) since the last call.
    pub fn take_heard(&mut self) -> Vec<Heard> {
        std::mem::take(&mut self.published)
    }

    /// Runs `op` on both sides: the stand-in's reply, or what differs.
    pub fn step(&mut self, op: &Op) -> Result<RedisResult<Reply>, String> {
        let cmd = op.command();
        let real: RedisResult<Reply> = cmd.query(&mut self.real);
        let model = self.model.call(&wire(&cmd));
        if !same_reply(op.replies_a_ttl(), &real, &model) {
            return Err(format!("replies differ: real {real:?}, model {model:?}"));
        }
        let (real_heard, model_heard) = (
            self.real_heard(),
            std::mem::take(&mut *self.heard.lock().unwrap()),
        );
        if real_heard != model_heard {
            return Err(format!(
                "messages differ: real {real_heard:?}, model {model_heard:?}"
            ));
        }
        self.published.extend(model_heard);
        same_state(&self.real_state(), &self.model.snapshot())?;
        Ok(model)
    }

    /// Runs every op, panicking with the ops so far at the first difference.
    pub fn run(&mut self, ops: &[Op]) -> Vec<RedisResult<Reply>> {
        let mut replies = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match self.step(op) {
                Ok(reply) => replies.push(reply),
                Err(what) => panic!("op {i}: {what}\n{}", listing(&ops[..=i])),
            }
        }
        replies
    }

    /// The messages the real server published since the last call: everything the listening
    /// connection reads before the answer to a `PING` sent now.
    fn real_heard(&mut self) -> Vec<Heard> {
        let ping = redis::cmd("PING").get_packed_command();
        self.listen.send_packed_command(&ping).unwrap();
        let mut heard = Vec::new();
        loop {
            let reply = self.listen.recv_response().unwrap();
            let Reply::Array(parts) = reply else {
                panic!("unexpected on the listening connection: {reply:?}");
            };
            match &parts[..] {
                [Reply::BulkString(kind), ..] if kind == b"pong" => return heard,
                [Reply::BulkString(kind), Reply::BulkString(channel), Reply::BulkString(payload)]
                    if kind == b"message" || kind == b"smessage" =>
                {
                    heard.push((
                        String::from_utf8_lossy(channel).into_owned(),
                        payload.clone(),
                    ))
                }
                other => panic!("unexpected on the listening connection: {other:?}"),
            }
        }
    }

    /// Every key of the real server, read with SCAN, TYPE, PTTL and the type's read.
    fn real_state(&mut self) -> BTreeMap<Vec<u8>, Stored> {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<Vec<u8>>) =
                (redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(1000))
                    .query(&mut self.real)
                    .unwrap();
            keys.extend(batch);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        if keys.is_empty() {
            return BTreeMap::new();
        }
        let mut meta = redis::pipe();
        for key in &keys {
            meta.cmd("TYPE").arg(key).cmd("PTTL").arg(key);
        }
        let meta: Vec<Reply> = meta.query(&mut self.real).unwrap();
        let meta: Vec<(String, i64)> = (meta.chunks(2))
            .map(|m| {
                let kind = redis::from_redis_value(m[0].clone()).unwrap();
                (kind, redis::from_redis_value(m[1].clone()).unwrap())
            })
            .collect();
        let mut reads = redis::pipe();
        for (key, (kind, _)) in keys.iter().zip(&meta) {
            match kind.as_str() {
                "string" => reads.cmd("GET").arg(key),
                "hash" => reads.cmd("HGETALL").arg(key),
                "list" => reads.cmd("LRANGE").arg(key).arg(0).arg(-1),
                "zset" => reads
                    .cmd("ZRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES"),
                other => panic!("a {other} in the real server"),
            };
        }
        let values: Vec<Reply> = reads.query(&mut self.real).unwrap();
        let mut state = BTreeMap::new();
        for ((key, (kind, pttl)), value) in keys.into_iter().zip(meta).zip(values) {
            let value = match kind.as_str() {
                "string" => Value::String(redis::from_redis_value(value).unwrap()),
                "hash" => Value::Hash(redis::from_redis_value(value).unwrap()),
                "list" => Value::List(redis::from_redis_value(value).unwrap()),
                _ => Value::ZSet(redis::from_redis_value(value).unwrap()),
            };
            state.insert(
                key,
                Stored {
                    value,
                    pttl: (pttl >= 0).then_some(pttl),
                },
            );
        }
        state
    }
}
fn close(ttl: bool, real: i64, model: i64) -> bool {
    real == model || (ttl && real > 0 && model > 0 && (real - model).abs() <= TOLERANCE_MS)
}

fn same_reply(ttl: bool, real: &RedisResult<Reply>, model: &RedisResult<Reply>) -> bool {
    match (real, model) {
        (Ok(Reply::Int(r)), Ok(Reply::Int(m))) => close(ttl, *r, *m),
        (Ok(r), Ok(m)) => r == m,
        // (A server error's code and text, whole: a script's raised error names its line.)
        (Err(r), Err(m)) => r == m && r.to_string() == m.to_string(),
        _ => false,
    }
}

/// Same keys, types and contents; TTLs present on both sides or neither, and within the
/// tolerance; scores within it too.
fn same_state(
    real: &BTreeMap<Vec<u8>, Stored>,
    model: &BTreeMap<Vec<u8>, Stored>,
) -> Result<(), String> {
    let show = |k: &Vec<u8>| String::from_utf8_lossy(k).into_owned();
    let only = |a: &BTreeMap<Vec<u8>, Stored>, b: &BTreeMap<Vec<u8>, Stored>| {
        a.keys()
            .filter(|k| !b.contains_key(*k))
            .map(show)
            .collect::<Vec<_>>()
    };
    if real.len() != model.len() || !only(real, model).is_empty() {
        let (r, m) = (only(real, model), only(model, real));
        return Err(format!("keys differ: only real {r:?}, only model {m:?}"));
    }
    for (key, r) in real {
        let m = &model[key];
        let pttl_close = match (r.pttl, m.pttl) {
            (None, None) => true,
            (Some(r), Some(m)) => (r - m).abs() <= TOLERANCE_MS,
            _ => false,
        };
        let value_close = match (&r.value, &m.value) {
            (Value::ZSet(r), Value::ZSet(m)) => same_zset(r, m),
            (r, m) => r == m,
        };
        if !pttl_close || !value_close {
            let (r, m) = (text(r), text(m));
            return Err(format!("{} differs: real {r}, model {m}", show(key)));
        }
    }
    Ok(())
}

/// A stored value for a failure message, its bytes as text.
fn text(stored: &Stored) -> String {
    let t = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let value = match &stored.value {
        Value::String(s) => format!("string {:?}", t(s)),
        Value::Hash(h) => format!(
            "hash {:?}",
            h.iter().map(|(f, v)| (t(f), t(v))).collect::<Vec<_>>()
        ),
        Value::List(l) => format!("list {:?}", l.iter().map(|v| t(v)).collect::<Vec<_>>()),
        Value::ZSet(z) => format!(
            "zset {:?}",
            z.iter().map(|(m, s)| (t(m), *s)).collect::<Vec<_>>()
        ),
    };
    format!("{value}, pttl {:?}", stored.pttl)
}

/// The same members with scores within the tolerance, the stand-in's in Redis's order.
fn same_zset(real: &[(Vec<u8>, f64)], model: &[(Vec<u8>, f64)]) -> bool {
    let sorted = model
        .windows(2)
        .all(|w| (w[0].1, &w[0].0) < (w[1].1, &w[1].0));
    let by_member = |z: &[(Vec<u8>, f64)]| z.iter().cloned().collect::<BTreeMap<_, _>>();
    let (r, m) = (by_member(real), by_member(model));
    sorted
        && r.len() == m.len()
        && r.iter()
            .zip(&m)
            .all(|((rk, rs), (mk, ms))| rk == mk && (rs - ms).abs() <= TOLERANCE_MS as f64)
}
