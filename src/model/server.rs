//! An in-memory stand-in for one Redis server, for the model checks: the commands the crate
//! sends (its lock scripts' effects carried out in Rust, module `scripts`, and the plain
//! commands beside them), one keyspace (module `keyspace`) on a clock that moves only by
//! [`Server::advance`], and pub/sub delivered to listeners. Replies and errors are the
//! `redis::Value`s and `RedisError`s redis-rs hands over from a real Redis 7 over RESP2;
//! `tests/model_server.rs` holds the two side by side. A command or script the stand-in does
//! not carry out fails with an error saying `model: ... not modelled`, never with an answer
//! Redis might not give.
//!
//! Each call takes one `std::sync::Mutex` (Redis runs one command at a time) and holds it for
//! no more than the command: nothing in it blocks or yields, so the stand-in is safe to call
//! from shuttle's threads, and listeners run after it is released.
//!
//! Simplified on purpose: `PUBLISH` and `SPUBLISH` reach the same subscriptions (a client
//! uses one of the two); `HGETALL` lists fields in byte order (Redis: insertion order for
//! small hashes); every known script starts cached (`SCRIPT FLUSH` makes `EVALSHA` answer
//! `NOSCRIPT` until an `EVAL` or `SCRIPT LOAD`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redis::{ErrorKind, RedisError, RedisResult};

mod keyspace;
mod scripts;

use keyspace::{int, wrong_type, Db, Entry};

/// A pub/sub connection's listener, called with `(channel, payload)` for each message.
pub type Listener = Arc<dyn Fn(&str, &[u8]) + Send + Sync>;

/// One live key as [`Server::snapshot`] shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// What the key holds.
    pub value: Value,
    /// Its remaining TTL in ms; `None` when it has none.
    pub pttl: Option<i64>,
}

/// What a key holds, in the types the crate's layouts use.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A hash, by field.
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A sorted set, sorted by score then member, as Redis orders it.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
}

/// The stand-in server: a keyspace, a clock and pub/sub connections behind one mutex.
pub struct Server {
    state: Mutex<State>,
}

impl Default for Server {
    fn default() -> Self {
        Server::new()
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Server")
            .field("now_ms", &state.db.now)
            .field("keys", &state.db.keys.len())
            .finish()
    }
}

struct State {
    db: Db,
    conns: BTreeMap<usize, Conn>,
    next_conn: usize,
    /// Known scripts' SHAs that `SCRIPT FLUSH` dropped and no `EVAL` or `SCRIPT LOAD` brought
    /// back: `EVALSHA` answers `NOSCRIPT` for them (every known script starts cached).
    unloaded: BTreeSet<String>,
    history: Vec<(Vec<Vec<u8>>, redis::Value)>,
}

struct Conn {
    listener: Listener,
    channels: BTreeSet<String>,
}

/// A message a command published, to deliver once the state's lock is released.
type Message = (Vec<u8>, Vec<u8>);

impl Server {
    /// An empty server, its clock at 0 ms, every script of `scripts/lua` cached.
    pub fn new() -> Server {
        Server {
            state: Mutex::new(State {
                db: Db::default(),
                conns: BTreeMap::new(),
                next_conn: 1,
                unloaded: BTreeSet::new(),
                history: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one command given as its arguments, exactly as redis-rs puts a `redis::Cmd` on the
    /// wire (`[b"EVALSHA", sha, numkeys, keys.., args..]`). Messages it publishes reach the
    /// listeners subscribed at that moment after the state's lock is released, in the order
    /// published, before this returns (two concurrent calls' messages may interleave).
    pub fn call(&self, args: &[Vec<u8>]) -> RedisResult<redis::Value> {
        let mut published = Vec::new();
        let (reply, deliveries) = {
            let mut state = self.lock();
            let reply = state.command(args, &mut published);
            let recorded = reply.as_ref().map_or_else(Fail::as_value, Clone::clone);
            state.history.push((args.to_vec(), recorded));
            let mut deliveries = Vec::new();
            for (channel, payload) in published {
                let channel = String::from_utf8_lossy(&channel).into_owned();
                for listener in state.listeners(&channel) {
                    deliveries.push((listener, channel.clone(), payload.clone()));
                }
            }
            (reply, deliveries)
        };
        for (listener, channel, payload) in deliveries {
            listener(&channel, &payload);
        }
        reply.map_err(Fail::into_error)
    }

    /// Every command run so far, in the order it ran, with its reply (an error reply as the
    /// `redis::Value::ServerError` redis-rs reads; a gap in the model as one whose code is
    /// `MODEL`). It grows with every call: for model checks' short runs.
    pub fn history(&self) -> Vec<(Vec<Vec<u8>>, redis::Value)> {
        self.lock().history.clone()
    }

    /// Moves the clock on by `ms`; keys whose TTL ran out are gone.
    pub fn advance(&self, ms: u64) {
        let mut state = self.lock();
        state.db.now += ms;
        let now = state.db.now;
        state.db.keys.retain(|_, entry| entry.alive(now));
    }

    /// The clock, in ms since [`Server::new`].
    pub fn now_ms(&self) -> u64 {
        self.lock().db.now
    }

    /// Opens a pub/sub connection whose messages go to `listener`; its id.
    pub fn connect_pubsub(&self, listener: Listener) -> usize {
        let mut state = self.lock();
        let conn = state.next_conn;
        state.next_conn += 1;
        let channels = BTreeSet::new();
        state.conns.insert(conn, Conn { listener, channels });
        conn
    }

    /// Subscribes connection `conn` to `channel` (`PUBLISH` and `SPUBLISH` both reach it: a
    /// client uses one of the two). Nothing for a connection that is gone.
    pub fn subscribe(&self, conn: usize, channel: &str) {
        if let Some(conn) = self.lock().conns.get_mut(&conn) {
            conn.channels.insert(channel.to_string());
        }
    }

    /// Unsubscribes connection `conn` from `channel`.
    pub fn unsubscribe(&self, conn: usize, channel: &str) {
        if let Some(conn) = self.lock().conns.get_mut(&conn) {
            conn.channels.remove(channel);
        }
    }

    /// Closes connection `conn`, dropping its subscriptions.
    pub fn disconnect_pubsub(&self, conn: usize) {
        self.lock().conns.remove(&conn);
    }

    /// Every live key, with what it holds and its TTL.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Stored> {
        let state = self.lock();
        let now = state.db.now;
        let stored = |entry: &Entry| Stored {
            value: entry.value.clone(),
            pttl: entry.expires_at.map(|at| (at - now) as i64),
        };
        (state.db.keys.iter())
            .map(|(key, entry)| (key.clone(), stored(entry)))
            .collect()
    }
}

/// Why a command failed: an error reply as Redis words it (without the leading `-`), or
/// something the stand-in does not model.
#[derive(Debug)]
enum Fail {
    Reply(String),
    Gap(String),
}

impl Fail {
    fn reply(line: impl Into<String>) -> Fail {
        Fail::Reply(line.into())
    }

    /// The error reply as redis-rs reads it into a value (a gap: code `MODEL`).
    fn as_value(&self) -> redis::Value {
        let line = match self {
            Fail::Reply(line) => format!("-{line}\r\n"),
            Fail::Gap(what) => format!("-MODEL model: {what}\r\n"),
        };
        redis::parse_redis_value(line.as_bytes()).expect("an error line parses")
    }

    /// The error redis-rs makes of the reply (so `NOSCRIPT` is `ServerErrorKind::NoScript`,
    /// `WRONGTYPE` an extension error with its code), or a client error naming the gap.
    fn into_error(self) -> RedisError {
        match self {
            Fail::Reply(_) => match self.as_value().extract_error() {
                Err(err) => err,
                Ok(_) => unreachable!("an error line parses as an error"),
            },
            Fail::Gap(what) => {
                let desc = "not modelled by the stand-in server";
                RedisError::from((ErrorKind::Client, desc, format!("model: {what}")))
            }
        }
    }
}

type Res<T> = Result<T, Fail>;

fn float(raw: &[u8]) -> Res<f64> {
    let text = std::str::from_utf8(raw).ok();
    (text.and_then(|t| t.parse::<f64>().ok()))
        .filter(|f| !f.is_nan())
        .ok_or_else(|| Fail::reply("ERR value is not a valid float"))
}

/// A score as Redis writes it in a reply.
fn score_text(score: f64) -> Vec<u8> {
    if score.fract() == 0.0 && score.abs() < 1e17 {
        format!("{}", score as i64).into_bytes()
    } else if score.is_infinite() {
        (if score > 0.0 { "inf" } else { "-inf" }).into()
    } else {
        format!("{score}").into_bytes()
    }
}

/// Each plain command the stand-in answers, with its arity as Redis states it (`n`: exactly
/// `n` arguments with the name, `-n`: at least `n`).
const COMMANDS: &[(&str, i32)] = &[
    ("ping", -1),
    ("get", 2),
    ("set", -3),
    ("del", -2),
    ("exists", -2),
    ("type", 2),
    ("pttl", 2),
    ("pexpire", -3),
    ("hget", 3),
    ("hset", -4),
    ("hexists", 3),
    ("hgetall", 2),
    ("hincrby", 4),
    ("lrange", 4),
    ("rpush", -3),
    ("zadd", -4),
    ("zrange", -4),
    ("zscore", 3),
    ("publish", 3),
    ("spublish", 3),
    ("pubsub", -2),
    ("wait", 3),
    ("client", -2),
    ("script", -2),
    ("flushall", -1),
    ("eval", -3),
    ("evalsha", -3),
];

fn bulk(value: Option<Vec<u8>>) -> redis::Value {
    value.map_or(redis::Value::Nil, redis::Value::BulkString)
}

fn ints(values: impl IntoIterator<Item = i64>) -> redis::Value {
    redis::Value::Array(values.into_iter().map(redis::Value::Int).collect())
}

impl State {
    /// The listeners of the connections subscribed to `channel`.
    fn listeners(&self, channel: &str) -> Vec<Listener> {
        (self.conns.values())
            .filter(|c| c.channels.contains(channel))
            .map(|c| c.listener.clone())
            .collect()
    }

    fn command(&mut self, args: &[Vec<u8>], out: &mut Vec<Message>) -> Res<redis::Value> {
        use redis::Value::{Array, BulkString, Int, Okay, SimpleString};
        let Some(name) = args.first() else {
            return Err(Fail::Gap("an empty command".into()));
        };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let Some(&(_, arity)) = COMMANDS.iter().find(|(n, _)| *n == name) else {
            return Err(Fail::Gap(format!("command {name} not modelled")));
        };
        let n = args.len() as i32;
        if (arity >= 0 && n != arity) || n < arity.abs() {
            let line = format!("ERR wrong number of arguments for '{name}' command");
            return Err(Fail::reply(line));
        }
        let (a, db) = (&args[1..], &mut self.db);
        let sub = a
            .first()
            .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
        let gap = |what: &str| {
            Err(Fail::Gap(format!(
                "{} {what} not modelled",
                name.to_uppercase()
            )))
        };
        Ok(match name.as_str() {
            "ping" if a.is_empty() => SimpleString("PONG".into()),
            "ping" => BulkString(a[0].clone()),
            "get" => bulk(db.get(&a[0])?),
            "set" => {
                let px = match &a[2..] {
                    [] => None,
                    [opt, ms] if opt.eq_ignore_ascii_case(b"px") => Some(ms.as_slice()),
                    _ => return gap("with these options"),
                };
                db.set(&a[0], &a[1], px)?;
                Okay
            }
            "del" => Int(a.iter().filter(|k| db.del(k)).count() as i64),
            "exists" => Int(a.iter().filter(|k| db.exists(k)).count() as i64),
            "type" => SimpleString(db.kind(&a[0]).into()),
            "pttl" => Int(db.pttl(&a[0])),
            "pexpire" if a.len() == 2 => Int(db.pexpire(&a[0], &a[1])? as i64),
            "pexpire" => return gap("with options"),
            "hget" => bulk(db.hget(&a[0], &a[1])?),
            "hset" if a.len() % 2 == 0 => {
                return Err(Fail::reply(
                    "ERR wrong number of arguments for 'hset' command",
                ))
            }
            "hset" => {
                let pairs = a[1..].chunks(2);
                let new = pairs
                    .map(|p| db.hset(&a[0], &p[0], &p[1]))
                    .collect::<Res<Vec<_>>>()?;
                Int(new.into_iter().filter(|&n| n).count() as i64)
            }
            "hexists" => Int(db.hexists(&a[0], &a[1])? as i64),
            "hgetall" => {
                let hash = db.hash(&a[0])?.into_iter().flatten();
                let flat = hash.flat_map(|(f, v)| [BulkString(f.clone()), BulkString(v.clone())]);
                Array(flat.collect())
            }
            "hincrby" => Int(db.hincrby(&a[0], &a[1], int(&a[2])?)?),
            "lrange" => {
                let items = db.lrange(&a[0], int(&a[1])?, int(&a[2])?)?;
                Array(items.into_iter().map(BulkString).collect())
            }
            "rpush" => {
                let pushed = a[1..]
                    .iter()
                    .map(|v| db.rpush(&a[0], v))
                    .collect::<Res<Vec<_>>>()?;
                Int(pushed.last().copied().unwrap_or(0) as i64)
            }
            "zadd" if a.len() % 2 == 0 => return gap("with flags"),
            "zadd" => {
                let pairs = a[1..].chunks(2);
                let scored = pairs
                    .map(|p| Ok((float(&p[0])?, &p[1])))
                    .collect::<Res<Vec<_>>>()?;
                let new = scored
                    .into_iter()
                    .map(|(s, m)| db.zadd(&a[0], s, m))
                    .collect::<Res<Vec<_>>>()?;
                Int(new.into_iter().filter(|&n| n).count() as i64)
            }
            "zrange" => {
                let scores = match &a[3..] {
                    [] => false,
                    [w] if w.eq_ignore_ascii_case(b"withscores") => true,
                    _ => return gap("with these options"),
                };
                let items = db.zrange(&a[0], int(&a[1])?, int(&a[2])?)?;
                let flat = items.into_iter().flat_map(|(m, s)| {
                    let score = scores.then(|| BulkString(score_text(s)));
                    std::iter::once(BulkString(m)).chain(score)
                });
                Array(flat.collect())
            }
            "zscore" => bulk(db.zscore(&a[0], &a[1])?.map(score_text)),
            "publish" | "spublish" => {
                let channel = String::from_utf8_lossy(&a[0]);
                out.push((a[0].clone(), a[1].clone()));
                Int(self.listeners(&channel).len() as i64)
            }
            "pubsub" => match sub.as_deref() {
                Some("numsub" | "shardnumsub") => Array(
                    (a[1..].iter())
                        .flat_map(|ch| {
                            let count = self.listeners(&String::from_utf8_lossy(ch)).len();
                            [BulkString(ch.clone()), Int(count as i64)]
                        })
                        .collect(),
                ),
                _ => return gap("with this subcommand"),
            },
            "wait" => {
                int(&a[0])?;
                int(&a[1])?;
                Int(0) // no replicas
            }
            "client" => Okay,
            "script" => match sub.as_deref() {
                Some("load") if a.len() == 2 => {
                    let sha = redis::Script::new(&String::from_utf8_lossy(&a[1]))
                        .get_hash()
                        .to_string();
                    self.unloaded.remove(&sha);
                    BulkString(sha.into_bytes())
                }
                Some("flush") => {
                    self.unloaded = scripts::all_shas().map(str::to_string).collect();
                    Okay
                }
                Some("exists") => ints(a[1..].iter().map(|sha| {
                    let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                    (scripts::by_sha(&sha).is_some() && !self.unloaded.contains(&sha)) as i64
                })),
                _ => return gap("with this subcommand"),
            },
            "flushall" => {
                db.keys.clear();
                Okay
            }
            _ => return self.eval(&name, a, out),
        })
    }

    /// `EVAL script numkeys ..` or `EVALSHA sha numkeys ..` (`a`: the arguments after the
    /// command's name).
    fn eval(&mut self, name: &str, a: &[Vec<u8>], out: &mut Vec<Message>) -> Res<redis::Value> {
        let numkeys = int(&a[1])?;
        if numkeys > a.len() as i64 - 2 {
            return Err(Fail::reply(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        if numkeys < 0 {
            return Err(Fail::reply("ERR Number of keys can't be negative"));
        }
        let script = if name == "evalsha" {
            let sha = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
            match scripts::by_sha(&sha) {
                Some(script) if !self.unloaded.contains(&sha) => script,
                _ => return Err(Fail::reply("NOSCRIPT No matching script. Please use EVAL.")),
            }
        } else {
            let text = String::from_utf8_lossy(&a[0]);
            let sha = redis::Script::new(&text).get_hash().to_string();
            let Some(script) = scripts::by_sha(&sha) else {
                return Err(Fail::Gap("a script not in scripts/lua".into()));
            };
            self.unloaded.remove(&sha);
            script
        };
        let (keys, argv) = a[2..].split_at(numkeys as usize);
        scripts::run(script, &mut self.db, keys, argv, out)
    }
}
