//! The scripts of `scripts/lua` as the stand-in knows them: each by the SHA-1 of its text, so
//! `EVALSHA` finds it, and the lock scripts' effects carried out in Rust. Each function follows
//! its `.lua` step by step, writes landing as they are made (Redis keeps a script's writes
//! made before an error), and an error a `redis.call` raises reads as Redis 7 words it, with
//! the script's SHA and the line of the call. The others answer a `not modelled` error.

use std::sync::OnceLock;

use redis::Value::{Array, Int, Nil};

use super::{Db, Fail, Message, Res};

/// `(name, text)` of every script, as the crate `include_str!`s them.
macro_rules! known {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../scripts/lua/", $name, ".lua")))),*]
    };
}

static KNOWN: &[(&str, &str)] = known![
    "acquire",
    "fair_acquire",
    "fair_force_unlock",
    "fair_unlock",
    "fair_withdraw",
    "fenced_acquire",
    "force_unlock",
    "held_across",
    "inspect",
    "latch_count_down",
    "latch_delete",
    "latch_set",
    "permit_acquire",
    "permit_add",
    "permit_count",
    "permit_lease",
    "permit_release",
    "permit_renew",
    "permit_set",
    "permit_update",
    "read_acquire",
    "read_locked",
    "read_renew",
    "read_unlock",
    "renew",
    "renew_across",
    "rw_force_unlock",
    "semaphore_acquire",
    "semaphore_drain",
    "semaphore_release",
    "semaphore_set",
    "spin_force_unlock",
    "spin_unlock",
    "unlock",
    "write_acquire",
    "write_unlock",
];

/// One known script.
pub(super) struct Script {
    name: &'static str,
    text: &'static str,
    sha: String,
}

impl Script {
    /// The line of `text` holding the `nth` occurrence of `needle` (the call a raised error
    /// names).
    fn line(&self, needle: &str, nth: usize) -> usize {
        let found = self.text.match_indices(needle).nth(nth);
        debug_assert!(found.is_some(), "{needle:?} #{nth} not in {}", self.name);
        let offset = found.map_or(0, |(at, _)| at);
        self.text[..offset].matches('\n').count() + 1
    }
}

fn table() -> &'static [Script] {
    static TABLE: OnceLock<Vec<Script>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let script = |&(name, text): &(&'static str, &'static str)| Script {
            name,
            text,
            sha: redis::Script::new(text).get_hash().to_string(),
        };
        KNOWN.iter().map(script).collect()
    })
}

/// The known script whose SHA-1 (lower-case hex) is `sha`.
pub(super) fn by_sha(sha: &str) -> Option<&'static Script> {
    table().iter().find(|s| s.sha == sha)
}

/// Every known script's SHA-1.
pub(super) fn all_shas() -> impl Iterator<Item = &'static str> {
    table().iter().map(|s| s.sha.as_str())
}

/// Runs `script` with `keys` and `argv` on `db`; what it publishes goes to `out`.
pub(super) fn run(
    script: &'static Script,
    db: &mut Db,
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
    out: &mut Vec<Message>,
) -> Res<redis::Value> {
    let mut r = Run {
        db,
        keys,
        argv,
        out,
        s: script,
    };
    match script.name {
        "acquire" => acquire(&mut r),
        "unlock" => unlock(&mut r),
        "spin_unlock" => spin_unlock(&mut r),
        "force_unlock" => force_unlock(&mut r),
        "renew" => renew(&mut r),
        "renew_across" => renew_across(&mut r),
        "held_across" => held_across(&mut r),
        "fair_acquire" => fair_acquire(&mut r),
        "fair_unlock" => fair_unlock(&mut r),
        "fair_withdraw" => fair_withdraw(&mut r),
        "fair_force_unlock" => fair_force_unlock(&mut r),
        name => Err(Fail::Gap(format!("script {name} not modelled"))),
    }
}

/// A raised error as Redis 7 replies it: `<error> script: <sha>, on @user_script:<line>.`
trait At<T> {
    fn at(self, s: &Script, needle: &str, nth: usize) -> Res<T>;
}

impl<T> At<T> for Res<T> {
    fn at(self, s: &Script, needle: &str, nth: usize) -> Res<T> {
        self.map_err(|fail| match fail {
            Fail::Reply(line) => Fail::Reply(format!(
                "{line} script: {}, on @user_script:{}.",
                s.sha,
                s.line(needle, nth)
            )),
            gap => gap,
        })
    }
}

/// One script's run.
struct Run<'a> {
    db: &'a mut Db,
    keys: &'a [Vec<u8>],
    argv: &'a [Vec<u8>],
    out: &'a mut Vec<Message>,
    s: &'static Script,
}

/// Lua's `tonumber` of a string (decimal forms).
fn tonumber(raw: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(raw).ok()?.trim();
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// A Lua number replied: Redis truncates it to an integer.
fn lua_int(n: f64) -> redis::Value {
    Int(n as i64)
}

const NON_REENTRANT: &str =
    "NON_REENTRANT_REACQUIRE the lock is non-reentrant and this owner holds it";

impl<'a> Run<'a> {
    /// `KEYS[i]`.
    fn key(&self, i: usize) -> Res<&'a [u8]> {
        let missing = || Fail::Gap(format!("{} without KEYS[{i}]", self.s.name));
        self.keys.get(i - 1).map(Vec::as_slice).ok_or_else(missing)
    }

    /// `ARGV[i]`.
    fn arg(&self, i: usize) -> Res<&'a [u8]> {
        let missing = || Fail::Gap(format!("{} without ARGV[{i}]", self.s.name));
        self.argv.get(i - 1).map(Vec::as_slice).ok_or_else(missing)
    }

    /// `tonumber(ARGV[i])` where the script computes with it (Lua would raise on `nil`).
    fn num(&self, i: usize) -> Res<f64> {
        let gap = || Fail::Gap(format!("{} with ARGV[{i}] not a number", self.s.name));
        tonumber(self.arg(i)?).ok_or_else(gap)
    }

    /// `redis.call(command, channel, message)`, `command` the script's publish argument.
    fn publish(&mut self, command: &[u8], channel: Vec<u8>, message: &[u8]) -> Res<()> {
        let known = [&b"publish"[..], b"spublish"];
        if !known.iter().any(|k| command.eq_ignore_ascii_case(k)) {
            let command = String::from_utf8_lossy(command);
            return Err(Fail::Gap(format!("publish command {command}")));
        }
        self.out.push((channel, message.to_vec()));
        Ok(())
    }

    /// The fair scripts' opening loop: waiters at the head of `queue` whose place in
    /// `deadlines` ended by `now` (or that have none) leave.
    fn drop_stale_heads(&mut self, queue: &[u8], deadlines: &[u8], now: f64) -> Res<()> {
        let s = self.s;
        while let Some(head) = self.db.lindex(queue, 0).at(s, "'lindex', KEYS[2], 0", 0)? {
            let deadline =
                (self.db.zscore(deadlines, &head)).at(s, "'zscore', KEYS[3], head", 0)?;
            if deadline.is_some_and(|d| d > now) {
                break;
            }
            (self.db.zrem(deadlines, &head)).at(s, "'zrem', KEYS[3], head", 0)?;
            self.db.lpop(queue).at(s, "'lpop'", 0)?;
        }
        Ok(())
    }
}

/// `acquire.lua`: RLock's acquire, idempotent per latch; `nil` acquired, else the PTTL.
fn acquire(r: &mut Run<'_>) -> Res<redis::Value> {
    let (key, latch, s) = (r.key(1)?, r.key(2)?, r.s);
    let (lease, field, latch_ttl) = (r.arg(1)?, r.arg(2)?, r.arg(3)?);
    if r.db.exists(latch) {
        return Ok(Nil);
    }
    let held = r.db.hexists(key, field).at(s, "'hexists'", 0)?;
    if held && r.argv.get(3).is_some_and(|a| a == b"0") {
        return Err(Fail::reply(NON_REENTRANT));
    }
    if held || !r.db.exists(key) {
        r.db.hincrby(key, field, 1).at(s, "'hincrby'", 0)?;
        r.db.pexpire(key, lease).at(s, "'pexpire'", 0)?;
        (r.db.set(latch, b"1", Some(latch_ttl))).at(s, "'set'", 0)?;
        return Ok(Nil);
    }
    Ok(Int(r.db.pttl(key)))
}

/// `unlock.lua`: one hold released, idempotent per latch; `nil`, `0` or `1`.
fn unlock(r: &mut Run<'_>) -> Res<redis::Value> {
    let (key, channel, latch) = (r.key(1)?, r.key(2)?, r.key(3)?);
    let (message, lease, field) = (r.arg(1)?, r.arg(2)?, r.arg(3)?);
    let (publish, latch_ttl) = (r.arg(4)?, r.arg(5)?);
    release_one(r, (key, field, latch), (lease, latch_ttl), |r| {
        (r.publish(publish, channel.to_vec(), message)).at(r.s, "redis.call(ARGV[4]", 0)
    })
}

/// `spin_unlock.lua`: `unlock.lua` without the message (a spin lock's waiters poll).
fn spin_unlock(r: &mut Run<'_>) -> Res<redis::Value> {
    let (key, latch) = (r.key(1)?, r.key(2)?);
    let (lease, field, latch_ttl) = (r.arg(1)?, r.arg(2)?, r.arg(3)?);
    release_one(r, (key, field, latch), (lease, latch_ttl), |_| Ok(()))
}

/// The body `unlock.lua` and `spin_unlock.lua` share: the latched answer, else
/// [`release_held`].
fn release_one(
    r: &mut Run<'_>,
    (key, field, latch): (&[u8], &[u8], &[u8]),
    (lease, latch_ttl): (&[u8], &[u8]),
    freed: impl FnOnce(&mut Run<'_>) -> Res<()>,
) -> Res<redis::Value> {
    if let Some(latched) = latched(r, latch)? {
        return Ok(latched);
    }
    release_held(r, (key, field, latch), (lease, latch_ttl), freed)
}

/// What an unlock's latch says it answered, if the unlock ran before (a re-send).
fn latched(r: &mut Run<'_>, latch: &[u8]) -> Res<Option<redis::Value>> {
    let latched = r.db.get(latch).at(r.s, "'get'", 0)?;
    Ok(latched.map(|latched| tonumber(&latched).map_or(Nil, lua_int)))
}

/// The release every unlock script ends with: nothing held by `field` (`nil`), one hold of
/// several released (`0`), or the last one, with `freed` run before the key goes (`1`); the
/// answer latched.
fn release_held(
    r: &mut Run<'_>,
    (key, field, latch): (&[u8], &[u8], &[u8]),
    (lease, latch_ttl): (&[u8], &[u8]),
    freed: impl FnOnce(&mut Run<'_>) -> Res<()>,
) -> Res<redis::Value> {
    let s = r.s;
    let Some(holds) = r.db.hget(key, field).at(s, "'hget'", 0)? else {
        return Ok(Nil);
    };
    let holds = tonumber(&holds).ok_or_else(|| Fail::Gap("a hold count not a number".into()))?;
    if holds > 1.0 {
        r.db.hincrby(key, field, -1).at(s, "'hincrby'", 0)?;
        r.db.pexpire(key, lease).at(s, "'pexpire'", 0)?;
        (r.db.set(latch, b"0", Some(latch_ttl))).at(s, "'set'", 0)?;
        return Ok(Int(0));
    }
    freed(r)?;
    r.db.del(key);
    (r.db.set(latch, b"1", Some(latch_ttl))).at(s, "'set'", 1)?;
    Ok(Int(1))
}

/// `force_unlock.lua`: the lock deleted whoever holds it, its waiters told; `1` or `0`.
fn force_unlock(r: &mut Run<'_>) -> Res<redis::Value> {
    let (key, channel, s) = (r.key(1)?, r.key(2)?, r.s);
    let (message, publish) = (r.arg(1)?, r.arg(2)?);
    match r.db.kind(key) {
        "none" => return Ok(Int(0)),
        "hash" => {}
        _ => return Err(super::wrong_type()),
    }
    (r.publish(publish, channel.to_vec(), message)).at(s, "redis.call(ARGV[2]", 0)?;
    r.db.del(key);
    Ok(Int(1))
}

/// `renew.lua`: each `KEYS[i]` still held by `ARGV[i + 1]` gets the lease; `1` or `0` each.
fn renew(r: &mut Run<'_>) -> Res<redis::Value> {
    let (lease, s) = (r.arg(1)?, r.s);
    let mut renewed = Vec::with_capacity(r.keys.len());
    for (i, key) in r.keys.iter().enumerate() {
        // (`redis.pcall`: a wrong type, or no field, is an error table, not `1`.)
        let held = (r.argv.get(i + 1)).is_some_and(|f| r.db.hexists(key, f).unwrap_or(false));
        if held {
            r.db.pexpire(key, lease).at(s, "'pexpire'", 0)?;
        }
        renewed.push(held as i64);
    }
    Ok(Array(renewed.into_iter().map(Int).collect()))
}

/// `renew_across.lua`: as `renew.lua`, keys and fields paired in ARGV. A standalone server
/// serves every key, so no answer is `-1`.
fn renew_across(r: &mut Run<'_>) -> Res<redis::Value> {
    let s = r.s;
    let pairs = r.argv.len().saturating_sub(1) / 2;
    let mut renewed = Vec::with_capacity(pairs);
    for i in 1..=pairs {
        let (key, field) = (&r.argv[2 * i - 1], &r.argv[2 * i]);
        // (`redis.pcall`: only WRONGTYPE can fail here, which answers 0.)
        let held = r.db.hexists(key, field).unwrap_or(false);
        if held {
            r.db.pexpire(key, &r.argv[0]).at(s, "'pexpire'", 0)?;
        }
        renewed.push(Int(held as i64));
    }
    Ok(Array(renewed))
}

/// `held_across.lua`: whether each `(key, field)` paired in ARGV is held, read only. A
/// standalone server serves every key, so no answer is `-1`.
fn held_across(r: &mut Run<'_>) -> Res<redis::Value> {
    let pairs = r.argv.len() / 2;
    let held = (0..pairs).map(|i| {
        let (key, field) = (&r.argv[2 * i], &r.argv[2 * i + 1]);
        // (`redis.pcall`: only WRONGTYPE can fail here, which answers 0.)
        Int(r.db.hexists(key, field).unwrap_or(false) as i64)
    });
    Ok(Array(held.collect()))
}

/// `fair_acquire.lua`: RFairLock's acquire ('try' or 'wait'), idempotent per latch; `nil`
/// acquired, else how long to wait.
fn fair_acquire(r: &mut Run<'_>) -> Res<redis::Value> {
    let s = r.s;
    let (key, queue, deadlines, latch) = (r.key(1)?, r.key(2)?, r.key(3)?, r.key(4)?);
    let (lease, field, latch_ttl) = (r.arg(1)?, r.arg(2)?, r.arg(5)?);
    if r.db.exists(latch) {
        return Ok(Nil);
    }
    let now = r.num(4)?;
    r.drop_stale_heads(queue, deadlines, now)?;
    let held = r.db.hexists(key, field).at(s, "'hexists'", 0)?;
    if held && r.argv.get(6).is_some_and(|a| a == b"0") {
        return Err(Fail::reply(NON_REENTRANT));
    }
    if !r.db.exists(key) {
        let head = r.db.lindex(queue, 0).at(s, "'lindex', KEYS[2], 0", 1)?;
        if head.as_deref().is_none_or(|h| h == field) {
            r.db.lpop(queue).at(s, "'lpop'", 1)?;
            (r.db.zrem(deadlines, field)).at(s, "'zrem', KEYS[3], ARGV[2]", 0)?;
            let waiters = r.db.zrange(deadlines, 0, -1).at(s, "'zrange'", 0)?;
            for (waiter, _) in waiters {
                let by = -r.num(3)?;
                (r.db.zincrby(deadlines, by, &waiter)).at(s, "'zincrby'", 0)?;
            }
            r.db.hset(key, field, b"1").at(s, "'hset'", 0)?;
            r.db.pexpire(key, lease).at(s, "'pexpire'", 0)?;
            (r.db.set(latch, b"1", Some(latch_ttl))).at(s, "'set'", 0)?;
            return Ok(Nil);
        }
    }
    if held {
        r.db.hincrby(key, field, 1).at(s, "'hincrby'", 0)?;
        r.db.pexpire(key, lease).at(s, "'pexpire'", 1)?;
        (r.db.set(latch, b"1", Some(latch_ttl))).at(s, "'set'", 1)?;
        return Ok(Nil);
    }
    let pttl = r.db.pttl(key);
    if r.arg(6)? == b"try" {
        return Ok(Int(pttl));
    }
    let queued = (r.db.zscore(deadlines, field)).at(s, "'zscore', KEYS[3], ARGV[2]", 0)?;
    if queued.is_some() {
        // Queued already: the holder's lease, or the head's place when the lock is free.
        if pttl > 0 || pttl == -1 {
            return Ok(Int(pttl));
        }
        let head = r.db.lindex(queue, 0).at(s, "'lindex', KEYS[2], 0", 2)?;
        let deadline = match head {
            Some(head) => (r.db.zscore(deadlines, &head)).at(s, "'zscore', KEYS[3], head", 1)?,
            None => None,
        };
        return Ok(deadline.map_or(Int(1), |d| lua_int(f64::max(1.0, d - now))));
    }
    // Queued at the tail, its place ending a reservation after the previous waiter's.
    let last = r.db.lindex(queue, -1).at(s, "'lindex', KEYS[2], -1", 0)?;
    let ahead = match last {
        Some(last) if last != field => {
            (r.db.zscore(deadlines, &last)).at(s, "'zscore', KEYS[3], last", 0)?
        }
        _ => None,
    };
    let ttl = ahead.map_or(pttl as f64, |ahead| ahead - now);
    let score = ttl + r.num(3)? + now;
    if r.db.zadd(deadlines, score, field).at(s, "'zadd'", 0)? {
        r.db.rpush(queue, field).at(s, "'rpush'", 0)?;
    }
    Ok(lua_int(f64::max(ttl, 1.0)))
}

/// `fair_unlock.lua`: one hold released, idempotent per latch, the head of the queue woken on
/// its own channel when the lock is free; `nil`, `0` or `1`.
fn fair_unlock(r: &mut Run<'_>) -> Res<redis::Value> {
    let s = r.s;
    let (key, queue, deadlines) = (r.key(1)?, r.key(2)?, r.key(3)?);
    let (channel, latch) = (r.key(4)?, r.key(5)?);
    let (message, lease, field) = (r.arg(1)?, r.arg(2)?, r.arg(3)?);
    let (publish, latch_ttl) = (r.arg(5)?, r.arg(6)?);
    if let Some(latched) = latched(r, latch)? {
        return Ok(latched);
    }
    let now = r.num(4)?;
    r.drop_stale_heads(queue, deadlines, now)?;
    let wake_head = |r: &mut Run<'_>| -> Res<()> {
        if let Some(head) = r.db.lindex(queue, 0).at(s, "'lindex', KEYS[2], 0", 1)? {
            let to = [channel, b":", &head[..]].concat();
            (r.publish(publish, to, message)).at(s, "redis.call(ARGV[5]", 0)?;
        }
        Ok(())
    };
    if !r.db.exists(key) {
        wake_head(r)?;
        return Ok(Nil);
    }
    release_held(r, (key, field, latch), (lease, latch_ttl), wake_head)
}

/// `fair_withdraw.lua`: a waiter that gave up leaves the queue, the waiters behind it move
/// up; `1` it was queued, `0` not.
fn fair_withdraw(r: &mut Run<'_>) -> Res<redis::Value> {
    let s = r.s;
    let (key, queue, deadlines, channel) = (r.key(1)?, r.key(2)?, r.key(3)?, r.key(4)?);
    let (field, message, publish) = (r.arg(1)?, r.arg(3)?, r.arg(4)?);
    let waiting = r.db.lrange(queue, 0, -1).at(s, "'lrange'", 0)?;
    let Some(at) = waiting.iter().position(|w| w == field) else {
        (r.db.zrem(deadlines, field)).at(s, "'zrem', KEYS[3], ARGV[1]", 0)?;
        return Ok(Int(0));
    };
    if at == 0 && waiting.len() > 1 && !r.db.exists(key) {
        let to = [channel, b":", &waiting[1][..]].concat();
        (r.publish(publish, to, message)).at(s, "redis.call(ARGV[4]", 0)?;
    }
    for behind in &waiting[at + 1..] {
        let by = -r.num(2)?;
        (r.db.zincrby(deadlines, by, behind)).at(s, "'zincrby'", 0)?;
    }
    (r.db.zrem(deadlines, field)).at(s, "'zrem', KEYS[3], ARGV[1]", 1)?;
    r.db.lrem_all(queue, field).at(s, "'lrem'", 0)?;
    Ok(Int(1))
}

/// `fair_force_unlock.lua`: the lock deleted whoever holds it, stale heads gone, the head
/// woken; `1` or `0`.
fn fair_force_unlock(r: &mut Run<'_>) -> Res<redis::Value> {
    let s = r.s;
    let (key, queue, deadlines, channel) = (r.key(1)?, r.key(2)?, r.key(3)?, r.key(4)?);
    let (message, publish) = (r.arg(1)?, r.arg(3)?);
    let kind = r.db.kind(key);
    if kind != "none" && kind != "hash" {
        return Err(super::wrong_type());
    }
    let now = r.num(2)?;
    r.drop_stale_heads(queue, deadlines, now)?;
    if kind == "none" {
        return Ok(Int(0));
    }
    if let Some(head) = r.db.lindex(queue, 0).at(s, "'lindex', KEYS[2], 0", 1)? {
        let to = [channel, b":", &head[..]].concat();
        (r.publish(publish, to, message)).at(s, "redis.call(ARGV[3]", 0)?;
    }
    r.db.del(key);
    Ok(Int(1))
}
