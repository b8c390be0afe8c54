//! The stand-in's keyspace: one map of live keys on the stand-in's clock, each operation
//! as the Redis command of its name does it (types checked, `WRONGTYPE` otherwise; empty
//! containers deleted; the errors Redis gives for bad numbers and expiry times).

use std::collections::BTreeMap;

use super::{Fail, Res, Value};

pub(super) fn wrong_type() -> Fail {
    Fail::reply("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// `ERR value is not an integer or out of range` unless `raw` is one.
pub(super) fn int(raw: &[u8]) -> Res<i64> {
    let text = std::str::from_utf8(raw).ok();
    text.and_then(|t| t.parse().ok())
        .ok_or_else(|| Fail::reply("ERR value is not an integer or out of range"))
}

/// Redis's reading of `start`/`stop` over `len` items: the index range, maybe empty.
fn span(len: usize, start: i64, stop: i64) -> std::ops::Range<usize> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        return 0..0;
    }
    start as usize..stop as usize + 1
}

/// One key: its value and the clock reading after which it is gone.
pub(super) struct Entry {
    pub(super) value: Value,
    pub(super) expires_at: Option<u64>,
}

impl Entry {
    /// As Redis: a key is gone once the clock is past its expiry (at it, its PTTL is 0).
    pub(super) fn alive(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|at| now <= at)
    }
}

/// The keyspace, each operation as the Redis command of its name does it (empty containers
/// deleted, types checked). Expired keys are dropped when the clock moves, so every key here
/// is live.
#[derive(Default)]
pub(super) struct Db {
    pub(super) now: u64,
    pub(super) keys: BTreeMap<Vec<u8>, Entry>,
}

/// Typed access to one kind of value: read (`None`: absent), and write (a container created
/// if absent).
macro_rules! typed {
    ($read:ident, $variant:ident, $ty:ty) => {
        pub(super) fn $read(&self, key: &[u8]) -> Res<Option<&$ty>> {
            match self.keys.get(key).map(|e| &e.value) {
                None => Ok(None),
                Some(Value::$variant(inner)) => Ok(Some(inner)),
                Some(_) => Err(wrong_type()),
            }
        }
    };
    ($read:ident, $write:ident, $variant:ident, $ty:ty) => {
        typed!($read, $variant, $ty);

        fn $write(&mut self, key: &[u8]) -> Res<&mut $ty> {
            let entry = self.keys.entry(key.to_vec()).or_insert_with(|| Entry {
                value: Value::$variant(Default::default()),
                expires_at: None,
            });
            match &mut entry.value {
                Value::$variant(inner) => Ok(inner),
                _ => Err(wrong_type()),
            }
        }
    };
}

impl Db {
    typed!(string, String, Vec<u8>);
    typed!(hash, hash_mut, Hash, BTreeMap<Vec<u8>, Vec<u8>>);
    typed!(list, list_mut, List, Vec<Vec<u8>>);
    typed!(zset, zset_mut, ZSet, Vec<(Vec<u8>, f64)>);

    /// Deletes `key` if it is a container left empty (as Redis never keeps one).
    fn tidy(&mut self, key: &[u8]) {
        let empty = match self.keys.get(key).map(|e| &e.value) {
            Some(Value::Hash(h)) => h.is_empty(),
            Some(Value::List(l)) => l.is_empty(),
            Some(Value::ZSet(z)) => z.is_empty(),
            _ => false,
        };
        if empty {
            self.keys.remove(key);
        }
    }

    pub(super) fn exists(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    pub(super) fn del(&mut self, key: &[u8]) -> bool {
        self.keys.remove(key).is_some()
    }

    /// `TYPE`'s answer.
    pub(super) fn kind(&self, key: &[u8]) -> &'static str {
        match self.keys.get(key).map(|e| &e.value) {
            None => "none",
            Some(Value::String(_)) => "string",
            Some(Value::Hash(_)) => "hash",
            Some(Value::List(_)) => "list",
            Some(Value::ZSet(_)) => "zset",
        }
    }

    pub(super) fn pttl(&self, key: &[u8]) -> i64 {
        match self.keys.get(key) {
            None => -2,
            Some(Entry {
                expires_at: None, ..
            }) => -1,
            Some(Entry {
                expires_at: Some(at),
                ..
            }) => (at - self.now) as i64,
        }
    }

    pub(super) fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        Ok(self.string(key)?.cloned())
    }

    /// `SET key value [PX ms]`: any old value and TTL replaced.
    pub(super) fn set(&mut self, key: &[u8], value: &[u8], px: Option<&[u8]>) -> Res<()> {
        let expires_at = match px {
            None => None,
            Some(raw) => match int(raw)? {
                ms if ms <= 0 => Err(Fail::reply("ERR invalid expire time in 'set' command"))?,
                ms => Some(self.now + ms as u64),
            },
        };
        let value = Value::String(value.to_vec());
        self.keys.insert(key.to_vec(), Entry { value, expires_at });
        Ok(())
    }

    /// `PEXPIRE key ms`: `false` if absent; a time not in the future deletes the key.
    pub(super) fn pexpire(&mut self, key: &[u8], ms: &[u8]) -> Res<bool> {
        let ms = int(ms)?;
        let now = self.now;
        let Some(entry) = self.keys.get_mut(key) else {
            return Ok(false);
        };
        if ms <= 0 {
            self.keys.remove(key);
        } else {
            entry.expires_at = Some(now + ms as u64);
        }
        Ok(true)
    }

    pub(super) fn hget(&self, key: &[u8], field: &[u8]) -> Res<Option<Vec<u8>>> {
        Ok(self.hash(key)?.and_then(|h| h.get(field)).cloned())
    }

    pub(super) fn hexists(&self, key: &[u8], field: &[u8]) -> Res<bool> {
        Ok(self.hash(key)?.is_some_and(|h| h.contains_key(field)))
    }

    /// `HSET key field value`: `true` if the field is new.
    pub(super) fn hset(&mut self, key: &[u8], field: &[u8], value: &[u8]) -> Res<bool> {
        Ok(self
            .hash_mut(key)?
            .insert(field.to_vec(), value.to_vec())
            .is_none())
    }

    pub(super) fn hincrby(&mut self, key: &[u8], field: &[u8], by: i64) -> Res<i64> {
        let old = match self.hash(key)?.and_then(|h| h.get(field)) {
            None => 0,
            Some(raw) => std::str::from_utf8(raw)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .ok_or_else(|| Fail::reply("ERR hash value is not an integer"))?,
        };
        let new = (old.checked_add(by))
            .ok_or_else(|| Fail::reply("ERR increment or decrement would overflow"))?;
        self.hash_mut(key)?
            .insert(field.to_vec(), new.to_string().into_bytes());
        Ok(new)
    }

    pub(super) fn lindex(&self, key: &[u8], index: i64) -> Res<Option<Vec<u8>>> {
        let Some(list) = self.list(key)? else {
            return Ok(None);
        };
        let at = if index < 0 {
            list.len() as i64 + index
        } else {
            index
        };
        Ok(usize::try_from(at)
            .ok()
            .and_then(|at| list.get(at))
            .cloned())
    }

    pub(super) fn lrange(&self, key: &[u8], start: i64, stop: i64) -> Res<Vec<Vec<u8>>> {
        let list = self.list(key)?.map_or(&[][..], Vec::as_slice);
        Ok(list[span(list.len(), start, stop)].to_vec())
    }

    pub(super) fn lpop(&mut self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        if self.list(key)?.is_none() {
            return Ok(None);
        }
        let head = self.list_mut(key)?.remove(0);
        self.tidy(key);
        Ok(Some(head))
    }

    pub(super) fn rpush(&mut self, key: &[u8], value: &[u8]) -> Res<usize> {
        let list = self.list_mut(key)?;
        list.push(value.to_vec());
        Ok(list.len())
    }

    /// `LREM key 0 value`: every occurrence removed; how many.
    pub(super) fn lrem_all(&mut self, key: &[u8], value: &[u8]) -> Res<usize> {
        if self.list(key)?.is_none() {
            return Ok(0);
        }
        let list = self.list_mut(key)?;
        let before = list.len();
        list.retain(|v| v != value);
        let removed = before - list.len();
        self.tidy(key);
        Ok(removed)
    }

    pub(super) fn zscore(&self, key: &[u8], member: &[u8]) -> Res<Option<f64>> {
        let zset = self.zset(key)?.map_or(&[][..], Vec::as_slice);
        Ok(zset.iter().find(|(m, _)| m == member).map(|(_, s)| *s))
    }

    /// `ZADD key score member`: `true` if the member is new (an old one's score is updated).
    pub(super) fn zadd(&mut self, key: &[u8], score: f64, member: &[u8]) -> Res<bool> {
        let zset = self.zset_mut(key)?;
        let before = zset.len();
        zset.retain(|(m, _)| m != member);
        let new = zset.len() == before;
        let at = zset.partition_point(|(m, s)| (*s, m.as_slice()) < (score, member));
        zset.insert(at, (member.to_vec(), score));
        Ok(new)
    }

    /// `ZINCRBY key by member` (a member not there is added with score `by`): its new score.
    pub(super) fn zincrby(&mut self, key: &[u8], by: f64, member: &[u8]) -> Res<f64> {
        let score = self.zscore(key, member)?.unwrap_or(0.0) + by;
        if score.is_nan() {
            return Err(Fail::reply("ERR resulting score is not a number (NaN)"));
        }
        self.zadd(key, score, member)?;
        Ok(score)
    }

    pub(super) fn zrem(&mut self, key: &[u8], member: &[u8]) -> Res<bool> {
        if self.zset(key)?.is_none() {
            return Ok(false);
        }
        let zset = self.zset_mut(key)?;
        let before = zset.len();
        zset.retain(|(m, _)| m != member);
        let removed = zset.len() < before;
        self.tidy(key);
        Ok(removed)
    }

    pub(super) fn zrange(&self, key: &[u8], start: i64, stop: i64) -> Res<Vec<(Vec<u8>, f64)>> {
        let zset = self.zset(key)?.map_or(&[][..], Vec::as_slice);
        Ok(zset[span(zset.len(), start, stop)].to_vec())
    }
}
