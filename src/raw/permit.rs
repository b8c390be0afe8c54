//! Redisson's `RPermitExpirableSemaphore`: the permits available in a string key (as
//! `RSemaphore`), and each permit taken as a member of the zset `{<key>}:timeout`, its id's 16
//! bytes scored by its expiry in ms since the epoch, by the acquiring client's clock. Every
//! script that takes or counts gives the expired permits back first, as Redisson's do; the
//! channel `redisson_sc:{<key>}` carries the count after a release.
//!
//! A hold here is one permit: each acquire is an owner of its own, and its permit id is
//! derived from its owner field ([`permit_id`]), so the engine's calls (acquire, renew,
//! release) name the permit without carrying it. Beyond Redisson (which renews no permit, its
//! issue #3046), a permit taken without a fixed lease is renewed by the watchdog like a lock,
//! and told as lost when the renewal finds it gone.

use redis::{FromRedisValue, RedisResult};

use super::protocol::{acquire_latch_ttl, LATCH_TTL_MS};
use super::protocol::{AcquireArgs, Attempt, Call, Protocol, Release, Script, UnlockArgs};
use super::rlock::{nil_or_pttl, synced_attempt, written};
use super::semaphore::permits_message;
use super::{Kind, Renewal};
use crate::future::BoxFuture;

static ACQUIRE: Script = Script::new(include_str!("../../scripts/lua/permit_acquire.lua"));
static RELEASE: Script = Script::new(include_str!("../../scripts/lua/permit_release.lua"));
static RENEW: Script = Script::new(include_str!("../../scripts/lua/permit_renew.lua"));
static ADD: Script = Script::new(include_str!("../../scripts/lua/permit_add.lua"));
static COUNT: Script = Script::new(include_str!("../../scripts/lua/permit_count.lua"));
static SET: Script = Script::new(include_str!("../../scripts/lua/permit_set.lua"));
static UPDATE: Script = Script::new(include_str!("../../scripts/lua/permit_update.lua"));
static LEASE: Script = Script::new(include_str!("../../scripts/lua/permit_lease.lua"));

/// Redisson's expiry score for a permit taken without a lease (it never expires).
pub(crate) const NEVER_EXPIRES: u64 = 922_337_203_685_477;

/// The zset of `key`'s permits taken, scored by expiry.
pub(crate) fn timeouts(key: &str) -> String {
    crate::names::suffixed(key, "timeout")
}

/// The 16 bytes of the permit a hold of `field` (`<client-uuid>:<owner-id>`) takes: the
/// client's UUID with the owner id mixed into its last 8 bytes. Distinct per owner of a
/// client, and across clients as their random UUIDs are; Java sees random-looking bytes, as
/// its own ids are.
pub(crate) fn permit_id(field: &str) -> [u8; 16] {
    let (client, owner) = field.rsplit_once(':').unwrap_or((field, "0"));
    let mut id = uuid::Uuid::parse_str(client)
        .map(|u| *u.as_bytes())
        .unwrap_or_default();
    let owner = owner.parse::<u64>().unwrap_or(0).to_be_bytes();
    for (byte, mix) in id[8..].iter_mut().zip(owner) {
        *byte ^= mix;
    }
    id
}

/// A permit id as Redisson's Java API shows it: its bytes (16 of them) in lower-case hex.
pub(crate) fn to_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A permit id from its hex form (either case); `None` unless 32 hex digits.
pub(crate) fn from_hex(hex: &str) -> Option<[u8; 16]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    if !bytes.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digits = std::str::from_utf8(pair).ok()?;
        id[i] = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(id)
}

/// Redisson's `RPermitExpirableSemaphore` as the engine drives it.
#[derive(Debug)]
pub(crate) struct PermitSemaphore;

/// The kind every [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) hands the
/// engine.
pub(crate) static PERMIT: Kind = Kind(&PermitSemaphore);

impl super::RawLock for PermitSemaphore {
    fn name(&self) -> &'static str {
        "permit"
    }

    fn channel(&self, key: &str) -> String {
        crate::names::semaphore_channel(key)
    }

    fn reads(&self) -> super::Reads {
        permits_message
    }

    /// Nothing publishes when a permit is taken from its holder: the renewal tells.
    fn loss_channel(&self, _key: &str) -> Option<String> {
        None
    }

    fn derived_keys(&self, key: &str) -> Vec<String> {
        vec![timeouts(key)]
    }

    /// Permits are shared: another acquire of this client holding one is no reason to wait.
    fn is_shared(&self) -> bool {
        true
    }

    fn acquire(
        &self,
        protocol: &Protocol,
        args: AcquireArgs<'_>,
    ) -> BoxFuture<'static, RedisResult<Attempt>> {
        let key = args.key;
        let mut cmd = ACQUIRE.evalsha(4, 6, 3 * key.len() + args.latch.len() + 140);
        cmd.arg(key)
            .arg(timeouts(key))
            .arg(crate::names::semaphore_channel(key))
            .arg(args.latch)
            .arg(&permit_id(args.field)[..])
            .arg(args.now_ms.saturating_add(args.lease_ms).min(NEVER_EXPIRES))
            .arg(args.now_ms)
            .arg(protocol.publish_command())
            .arg(NEVER_EXPIRES)
            .arg(acquire_latch_ttl(args.lease_ms));
        let send = protocol.send(Call::script(&ACQUIRE, key, cmd));
        Box::pin(async move {
            let (reply, synced) = send.await?;
            synced_attempt(nil_or_pttl(reply)?, synced)
        })
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>> {
        Box::pin(async move {
            let id = permit_id(args.field);
            Ok(match release(protocol, args.key, args.latch, &id).await? {
                1 => Release::Released,
                // Gone, or given back only after its lease ran out: not this hold's to release.
                _ => Release::NotHeld,
            })
        })
    }

    /// A semaphore has no holder to force out: nothing is done.
    fn force_unlock<'a>(
        &'a self,
        _protocol: &'a Protocol,
        _key: &'a str,
    ) -> BoxFuture<'a, RedisResult<bool>> {
        Box::pin(async { Ok(false) })
    }

    /// `EVALSHA permit_renew 0 expiry set1 id1 .. setn idn` (`across`: any slots the node
    /// serves), or `EVALSHA permit_renew n set1..setn expiry id1..idn` (one slot's, declared,
    /// so that a moved slot redirects the call): each permit still taken gets `lease_ms` from
    /// now, by this client's clock.
    fn renew_call(&self, lease_ms: u64, entries: &[(&str, &str)], across: bool) -> Call {
        let n = entries.len();
        let expiry = super::now_ms().saturating_add(lease_ms);
        let cmd = match across {
            true => {
                let mut cmd = RENEW.evalsha(0, 2 * n + 1, n * 64);
                cmd.arg(expiry);
                for (key, field) in entries {
                    cmd.arg(timeouts(key)).arg(&permit_id(field)[..]);
                }
                cmd
            }
            false => {
                let mut cmd = RENEW.evalsha(n, 2 * n + 1, n * 64);
                for (key, _) in entries {
                    cmd.arg(timeouts(key));
                }
                cmd.arg(expiry);
                for (_, field) in entries {
                    cmd.arg(&permit_id(field)[..]);
                }
                cmd
            }
        };
        Call::script(&RENEW, entries[0].0, cmd)
    }

    fn renewed(&self, reply: redis::Value, entries: usize) -> RedisResult<Vec<Renewal>> {
        super::rlock::renewed(FromRedisValue::from_redis_value(reply)?, entries)
    }
}

/// Gives the permit `id` of `key` back, idempotently per `latch`: 1 given back in its lease,
/// 2 given back after it ran out, 0 not taken (nothing changed).
pub(crate) async fn release(
    p: &Protocol,
    key: &str,
    latch: &str,
    id: &[u8; 16],
) -> RedisResult<i64> {
    let mut cmd = RELEASE.evalsha(4, 4, 3 * key.len() + latch.len() + 96);
    cmd.arg(key)
        .arg(timeouts(key))
        .arg(crate::names::semaphore_channel(key))
        .arg(latch)
        .arg(&id[..])
        .arg(super::now_ms())
        .arg(p.publish_command())
        .arg(LATCH_TTL_MS);
    written(p, &RELEASE, cmd, key, "permit release").await
}

/// Adds `permits` to `key` (negative: takes them away), idempotently per `latch`, publishing
/// the number added when above zero, as Redisson's `addPermits`: the permits available after.
pub(crate) async fn add(p: &Protocol, key: &str, latch: &str, permits: i64) -> RedisResult<i64> {
    let mut cmd = ADD.evalsha(3, 3, 2 * key.len() + latch.len() + 48);
    cmd.arg(key)
        .arg(crate::names::semaphore_channel(key))
        .arg(latch)
        .arg(permits)
        .arg(p.publish_command())
        .arg(LATCH_TTL_MS);
    written(p, &ADD, cmd, key, "permit add").await
}

/// Sets `key`'s total permits, taken ones included (Redisson's `setPermits`): the permits
/// available after it.
pub(crate) async fn set_total(p: &Protocol, key: &str, total: u32) -> RedisResult<i64> {
    let mut cmd = SET.evalsha(3, 2, 3 * key.len() + 48);
    cmd.arg(key)
        .arg(timeouts(key))
        .arg(crate::names::semaphore_channel(key))
        .arg(total)
        .arg(p.publish_command());
    written(p, &SET, cmd, key, "permit set").await
}

/// `(available, taken)` after the expired permits are given back.
pub(crate) async fn count(p: &Protocol, key: &str) -> RedisResult<(i64, i64)> {
    let mut cmd = COUNT.evalsha(3, 2, 3 * key.len() + 48);
    cmd.arg(key)
        .arg(timeouts(key))
        .arg(crate::names::semaphore_channel(key))
        .arg(super::now_ms())
        .arg(p.publish_command());
    let (reply, _) = p.send(Call::script(&COUNT, key, cmd)).await?;
    let counts: Vec<i64> = FromRedisValue::from_redis_value(reply)?;
    match counts[..] {
        [available, taken] => Ok((available, taken)),
        _ => Err(super::protocol::short_reply()),
    }
}

/// Sets the expiry of the permit `id` of `key` to `lease_ms` from now (or never, for
/// `None`), if it is still taken: `true` if it was.
pub(crate) async fn update(
    p: &Protocol,
    key: &str,
    id: &[u8; 16],
    lease_ms: Option<u64>,
) -> RedisResult<bool> {
    let now = super::now_ms();
    let expiry = lease_ms.map_or(NEVER_EXPIRES, |ms| {
        now.saturating_add(ms).min(NEVER_EXPIRES)
    });
    let mut cmd = UPDATE.evalsha(3, 4, 3 * key.len() + 80);
    cmd.arg(key)
        .arg(timeouts(key))
        .arg(crate::names::semaphore_channel(key))
        .arg(&id[..])
        .arg(expiry)
        .arg(now)
        .arg(p.publish_command());
    Ok(written(p, &UPDATE, cmd, key, "permit lease update").await? == 1)
}

/// The lease left of the permit `id` of `key`: `None` if not taken, `Some(u64::MAX)` if it
/// never expires, else the ms left.
pub(crate) async fn lease_left(p: &Protocol, key: &str, id: &[u8; 16]) -> RedisResult<Option<u64>> {
    let mut cmd = LEASE.evalsha(3, 4, 3 * key.len() + 80);
    cmd.arg(key)
        .arg(timeouts(key))
        .arg(crate::names::semaphore_channel(key))
        .arg(&id[..])
        .arg(super::now_ms())
        .arg(p.publish_command())
        .arg(NEVER_EXPIRES);
    Ok(match written(p, &LEASE, cmd, key, "permit lease").await? {
        -2 => None,
        -1 => Some(u64::MAX),
        ms => Some(ms.max(0) as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permit_ids_differ_per_owner_and_client_and_read_back_from_hex() {
        let client = "6f1c2b4e-0d39-4c53-9a61-2b0c1d3e4f50";
        let a = permit_id(&format!("{client}:1"));
        let b = permit_id(&format!("{client}:2"));
        let other = permit_id("0b6c8a6e-3b0e-4d7a-8f3c-5a9e1f2d7c11:1");
        assert_ne!(a, b);
        assert_ne!(a, other);
        assert_eq!(to_hex(&a).len(), 32);
        assert_eq!(from_hex(&to_hex(&a)), Some(a));
        assert_eq!(from_hex(&to_hex(&a).to_uppercase()), Some(a));
        assert_eq!(from_hex("xyz"), None);
        assert_eq!(from_hex(&"g".repeat(32)), None);
        assert_eq!(from_hex(&"+a".repeat(16)), None, "no signs");
    }
}
