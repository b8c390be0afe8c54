//! Redisson's `RFairLock` (and 4.4+'s non-reentrant fair lock): RLock's hash and renewal, a
//! queue of waiters (`redisson_lock_queue:{N}`, a list) with the time each one's place ends
//! (`redisson_lock_timeout:{N}`, a zset in clients' clocks), and a channel per waiter
//! (`redisson_lock__channel:{N}:<field>`) on which an unlock wakes only the head of the queue.
//! A single attempt never queues; a waiting one queues its owner, reserving the call's wait
//! (or [`LockOptions::Queue`](super::LockOptions)); a waiter that gives up is withdrawn
//! ([`Queueing::withdraw`]). No local hand-off: a waiter of the same client must not jump the
//! queue. Scripts: `scripts/lua/fair_*.lua`.

use redis::{Cmd, RedisResult};

use super::protocol::{
    acquire_latch_ttl, now_ms, AcquireArgs, Call, Protocol, Release, Script, UnlockArgs,
    LATCH_TTL_MS,
};
use super::rlock::{self, AcquireScript, UNLOCK_MESSAGE};
use super::{Queueing, RawLock, Waiters};
use crate::future::BoxFuture;
use crate::names;

static ACQUIRE: Script = Script::new(include_str!("../../scripts/lua/fair_acquire.lua"));
static UNLOCK: Script = Script::new(include_str!("../../scripts/lua/fair_unlock.lua"));
static FORCE_UNLOCK: Script = Script::new(include_str!("../../scripts/lua/fair_force_unlock.lua"));
static WITHDRAW: Script = Script::new(include_str!("../../scripts/lua/fair_withdraw.lua"));

/// Redisson's `RFairLock`, reentrant or not (its acquire says which).
pub(crate) struct Fair {
    name: &'static str,
    acquire: &'static AcquireScript,
}

impl std::fmt::Debug for Fair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The kind every fair lock hands the engine.
pub(crate) static FAIR: super::Kind = super::Kind(&Fair {
    name: "fair",
    acquire: &AcquireScript {
        script: &ACQUIRE,
        cmd: |args| acquire_cmd(args, true),
        reply: rlock::nil_or_pttl,
    },
});

/// Redisson 4.4+'s `getNonReentrantFairLock`.
pub(crate) static NON_REENTRANT_FAIR: super::Kind = super::Kind(&Fair {
    name: "non_reentrant_fair",
    acquire: &AcquireScript {
        script: &ACQUIRE,
        cmd: |args| acquire_cmd(args, false),
        reply: rlock::nil_or_pttl,
    },
});

/// `EVALSHA fair_acquire 4 key queue deadlines latch lease field reservation now latch_ttl
/// mode reentrant`.
fn acquire_cmd(args: AcquireArgs<'_>, reentrant: bool) -> Cmd {
    let (queue, deadlines) = (names::queue_key(args.key), names::timeout_key(args.key));
    let bytes = 2 * args.key.len() + args.latch.len() + args.field.len() + 120;
    let mut cmd = ACQUIRE.evalsha(4, 11, bytes);
    cmd.arg(args.key)
        .arg(queue)
        .arg(deadlines)
        .arg(args.latch)
        .arg(args.lease_ms)
        .arg(args.field)
        .arg(args.queue_wait_ms)
        .arg(args.now_ms)
        .arg(acquire_latch_ttl(args.lease_ms))
        .arg(if args.try_once { "try" } else { "wait" })
        .arg(if reentrant { "1" } else { "0" });
    cmd
}

impl RawLock for Fair {
    fn name(&self) -> &'static str {
        self.name
    }

    fn waiters(&self) -> Waiters<'_> {
        Waiters::Queue(self)
    }

    fn loss_channel(&self, _key: &str) -> Option<String> {
        // A forced unlock wakes the head of the queue, never the holder.
        None
    }

    fn derived_keys(&self, key: &str) -> Vec<String> {
        vec![names::queue_key(key), names::timeout_key(key)]
    }

    fn acquire_script(&self) -> &'static AcquireScript {
        self.acquire
    }

    fn unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        args: UnlockArgs<'a>,
    ) -> BoxFuture<'a, RedisResult<Release>> {
        let key = args.key;
        let bytes = 3 * key.len() + args.channel.len() + args.latch.len() + args.field.len() + 80;
        let mut cmd = UNLOCK.evalsha(5, 11, bytes);
        cmd.arg(key)
            .arg(names::queue_key(key))
            .arg(names::timeout_key(key))
            .arg(args.channel)
            .arg(args.latch)
            .arg(UNLOCK_MESSAGE)
            .arg(args.lease_ms)
            .arg(args.field)
            .arg(now_ms())
            .arg(protocol.publish_command())
            .arg(LATCH_TTL_MS);
        Box::pin(rlock::release(protocol, &UNLOCK, cmd, key))
    }

    fn force_unlock<'a>(
        &'a self,
        protocol: &'a Protocol,
        key: &'a str,
    ) -> BoxFuture<'a, RedisResult<bool>> {
        let mut cmd = FORCE_UNLOCK.evalsha(4, 7, 4 * key.len() + 80);
        cmd.arg(key)
            .arg(names::queue_key(key))
            .arg(names::timeout_key(key))
            .arg(names::lock_channel(key))
            .arg(UNLOCK_MESSAGE)
            .arg(now_ms())
            .arg(protocol.publish_command());
        Box::pin(rlock::forced(protocol, &FORCE_UNLOCK, cmd, key))
    }
}

impl Queueing for Fair {
    fn waiter_channel(&self, key: &str, field: &str) -> String {
        format!("{}:{field}", names::lock_channel(key))
    }

    fn is_waiter_channel(&self, key: &str, channel: &str) -> bool {
        let base = names::lock_channel(key);
        channel
            .strip_prefix(base.as_str())
            .is_some_and(|rest| rest.starts_with(':'))
    }

    fn withdraw(
        &self,
        protocol: &Protocol,
        key: &str,
        field: &str,
        queue_wait_ms: u64,
    ) -> BoxFuture<'static, RedisResult<()>> {
        let mut cmd = WITHDRAW.evalsha(4, 8, 3 * key.len() + field.len() + 80);
        cmd.arg(key)
            .arg(names::queue_key(key))
            .arg(names::timeout_key(key))
            .arg(names::lock_channel(key))
            .arg(field)
            .arg(queue_wait_ms)
            .arg(UNLOCK_MESSAGE)
            .arg(protocol.publish_command());
        let send = protocol.send(Call::script(&WITHDRAW, key, cmd));
        Box::pin(async move { send.await.map(drop) })
    }
}
