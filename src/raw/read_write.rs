//! Redisson's `RReadWriteLock`: one hash `N` for both halves. `mode` says which half holds it;
//! each reader's field `<owner>` counts its holds, each writer's field `<owner>:write` its
//! own. A reader also keeps one timeout key per hold (`{N}:<owner>:rwlock_timeout:<k>`,
//! expiring with that hold's lease), from which a read unlock sets the hash's TTL. Both halves
//! publish on `redisson_rwlock:{N}`: `0` after the last read unlock (one waiter, a writer, may
//! go), `1` after a write unlock (every waiter: the readers may all go). Scripts:
//! `scripts/lua/{read,write}_*.lua`, `rw_force_unlock.lua`, `read_locked.lua`
//! (`docs/PROTOCOL.md` §3b).
//!
//! Neither half hands off locally: a release may free the lock for many readers at once, and
//! a local waiter must not jump other clients' readers and writers.

use std::borrow::Cow;

use redis::{Cmd, RedisResult};

use super::protocol::{
    acquire_latch_ttl, AcquireArgs, Call, Protocol, Release, Script, UnlockArgs, LATCH_TTL_MS,
};
use super::rlock::{self, AcquireScript};
use crate::future::BoxFuture;
use crate::names;

static READ_ACQUIRE: Script = Script::new(include_str!("../../scripts/lua/read_acquire.lua"));
static READ_UNLOCK: Script = Script::new(include_str!("../../scripts/lua/read_unlock.lua"));
static READ_RENEW: Script = Script::new(include_str!("../../scripts/lua/read_renew.lua"));
static READ_LOCKED: Script = Script::new(include_str!("../../scripts/lua/read_locked.lua"));
static WRITE_ACQUIRE: Script = Script::new(include_str!("../../scripts/lua/write_acquire.lua"));
static WRITE_UNLOCK: Script = Script::new(include_str!("../../scripts/lua/write_unlock.lua"));
static FORCE_UNLOCK: Script = Script::new(include_str!("../../scripts/lua/rw_force_unlock.lua"));

/// The message a read unlock publishes when the lock is free: wake one waiter.
const READ_RELEASED: &str = "0";
/// The message a write unlock publishes: wake every waiter (Redisson's `READ_UNLOCK_MESSAGE`).
const WRITE_RELEASED: &str = "1";

/// A writer's hash field: its owner field and `:write`.
fn write_field(field: &str) -> String {
    format!("{field}:write")
}

/// The key's hash-tag prefix every reader's timeout keys start with (`{N}`, or `N` itself
/// when it has a `{`).
fn tag_prefix(key: &str) -> String {
    let mut prefix = names::suffixed(key, "");
    prefix.pop(); // the ':' before the (empty) suffix
    prefix
}

static READ: AcquireScript = AcquireScript {
    script: &READ_ACQUIRE,
    cmd: read_acquire_cmd,
    reply: rlock::nil_or_pttl,
};

static WRITE: AcquireScript = AcquireScript {
    script: &WRITE_ACQUIRE,
    cmd: write_acquire_cmd,
    reply: rlock::nil_or_pttl,
};

/// `EVALSHA read_acquire 3 key latch timeout_prefix lease field write_field latch_ttl`.
fn read_acquire_cmd(args: AcquireArgs<'_>) -> Cmd {
    let prefix = names::read_timeout_prefix(args.key, args.field);
    let bytes = args.key.len() + args.latch.len() + prefix.len() + 2 * args.field.len() + 48;
    let mut cmd = READ_ACQUIRE.evalsha(3, 7, bytes);
    cmd.arg(args.key)
        .arg(args.latch)
        .arg(prefix)
        .arg(args.lease_ms)
        .arg(args.field)
        .arg(write_field(args.field))
        .arg(acquire_latch_ttl(args.lease_ms));
    cmd
}

/// `EVALSHA write_acquire 2 key latch lease write_field latch_ttl`.
fn write_acquire_cmd(args: AcquireArgs<'_>) -> Cmd {
    let bytes = args.key.len() + args.latch.len() + args.field.len() + 48;
    let mut cmd = WRITE_ACQUIRE.evalsha(2, 5, bytes);
    cmd.arg(args.key)
        .arg(args.latch)
        .arg(args.lease_ms)
        .arg(write_field(args.field))
        .arg(acquire_latch_ttl(args.lease_ms));
    cmd
}

/// `EVALSHA rw_force_unlock 2 key channel mode message publish`.
async fn force_unlock(p: &Protocol, key: &str, mode: &str, message: &str) -> RedisResult<bool> {
    let mut cmd = FORCE_UNLOCK.evalsha(2, 5, 2 * key.len() + 48);
    cmd.arg(key)
        .arg(names::rwlock_channel(key))
        .arg(mode)
        .arg(message)
        .arg(p.publish_command());
    rlock::forced(p, &FORCE_UNLOCK, cmd, key).await
}

/// The read half (Redisson `RReadLock`).
#[derive(Debug)]
pub(crate) struct ReadHalf;

/// The write half (Redisson `RWriteLock`).
#[derive(Debug)]
pub(crate) struct WriteHalf;

/// The kind every read lock hands the engine.
pub(crate) static READ_LOCK: super::Kind = super::Kind(&ReadHalf);
/// The kind every write lock hands the engine.
pub(crate) static WRITE_LOCK: super::Kind = super::Kind(&WriteHalf);

impl super::RawLock for ReadHalf {
    fn name(&self) -> &'static str {
        "read"
    }

    fn channel(&self, key: &str) -> String {
        names::rwlock_channel(key)
    }

    fn derived_keys(&self, key: &str) -> Vec<String> {
        // (Any owner stands for all: the tag comes before the owner.)
        vec![names::read_timeout_prefix(key, "0:0") + ":1"]
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn keeps_first_lease(&self) -> bool {
        // Each hold's timeout key expires with its own lease: a later hold or a partial
        // release does not extend the first.
        true
    }

    fn acquire_script(&self) -> &'static AcquireScript {
        &READ
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>> {
        let UnlockArgs {
            key,
            channel,
            latch,
            field,
            ..
        } = args;
        let prefix = names::read_timeout_prefix(key, field);
        let tag = tag_prefix(key);
        let bytes = key.len() + channel.len() + prefix.len() + tag.len() + latch.len();
        let mut cmd = READ_UNLOCK.evalsha(5, 9, bytes + field.len() + 32);
        cmd.arg(key)
            .arg(channel)
            .arg(prefix)
            .arg(tag)
            .arg(latch)
            .arg(READ_RELEASED)
            .arg(field)
            .arg(protocol.publish_command())
            .arg(LATCH_TTL_MS);
        Box::pin(rlock::release(protocol, &READ_UNLOCK, cmd, key))
    }

    fn force_unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> BoxFuture<'a, RedisResult<bool>> {
        Box::pin(force_unlock(protocol, key, "read", READ_RELEASED))
    }

    fn is_locked<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> Option<BoxFuture<'a, RedisResult<bool>>> {
        let mut cmd = READ_LOCKED.evalsha(1, 1, key.len());
        cmd.arg(key);
        Some(Box::pin(async move {
            let locked: i64 = protocol.read(Call::script(&READ_LOCKED, key, cmd)).await?;
            Ok(locked == 1)
        }))
    }

    // (Its script touches each reader's timeout keys too: one slot per call.)
    fn renews_across_slots(&self) -> bool {
        false
    }

    fn renew_call(&self, lease_ms: u64, entries: &[(&str, &str)], _across: bool) -> Call {
        let n = entries.len();
        let prefixes: Vec<String> = entries
            .iter()
            .map(|(key, field)| names::read_timeout_prefix(key, field))
            .collect();
        let bytes: usize = entries
            .iter()
            .map(|(k, f)| 2 * (k.len() + f.len()) + 40)
            .sum();
        let mut cmd = READ_RENEW.evalsha(n, 2 * n + 1, bytes);
        for (key, _) in entries {
            cmd.arg(*key);
        }
        cmd.arg(lease_ms);
        for ((_, field), prefix) in entries.iter().zip(&prefixes) {
            cmd.arg(*field).arg(prefix);
        }
        Call::script(&READ_RENEW, entries[0].0, cmd)
    }
}

impl super::RawLock for WriteHalf {
    fn name(&self) -> &'static str {
        "write"
    }

    fn channel(&self, key: &str) -> String {
        names::rwlock_channel(key)
    }

    fn hash_field<'a>(&self, field: &'a str) -> Cow<'a, str> {
        Cow::Owned(write_field(field))
    }

    fn acquire_script(&self) -> &'static AcquireScript {
        &WRITE
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>> {
        let UnlockArgs {
            key,
            channel,
            latch,
            lease_ms,
            field,
            .. // (one hold per unlock: `permits` is 1)
        } = args;
        let bytes = key.len() + channel.len() + latch.len() + field.len() + 56;
        let mut cmd = WRITE_UNLOCK.evalsha(3, 8, bytes);
        cmd.arg(key)
            .arg(channel)
            .arg(latch)
            .arg(WRITE_RELEASED)
            .arg(lease_ms)
            .arg(write_field(field))
            .arg(protocol.publish_command())
            .arg(LATCH_TTL_MS);
        Box::pin(rlock::release(protocol, &WRITE_UNLOCK, cmd, key))
    }

    fn force_unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> BoxFuture<'a, RedisResult<bool>> {
        Box::pin(force_unlock(protocol, key, "write", WRITE_RELEASED))
    }

    fn is_locked<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> Option<BoxFuture<'a, RedisResult<bool>>> {
        let mut conn = protocol.connection().clone();
        let mut cmd = redis::cmd("HGET");
        cmd.arg(key).arg("mode");
        Some(Box::pin(async move {
            let mode: Option<String> = cmd.query_async(&mut conn).await?;
            Ok(mode.as_deref() == Some("write"))
        }))
    }

    fn renew_call(&self, lease_ms: u64, entries: &[(&str, &str)], across: bool) -> Call {
        // RLock's renewal, over the writers' fields.
        let fields: Vec<String> = entries.iter().map(|(_, f)| write_field(f)).collect();
        let entries: Vec<(&str, &str)> = entries
            .iter()
            .zip(&fields)
            .map(|((key, _), field)| (*key, field.as_str()))
            .collect();
        rlock::renew_call(lease_ms, &entries, across)
    }
}
