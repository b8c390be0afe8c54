//! The floor: the crate's own Lua (`scripts/lua/*.lua`) sent raw over one redis-rs
//! connection (multiplexed, or redis-rs's cluster connection), with no library logic. Where
//! the master has a replica, each lock write carries `WAIT 1 1000` in the same write, as the
//! crate and Redisson send by default.

use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{
    Cmd, ErrorKind, IntoConnectionInfo, ProtocolVersion, PushKind, Script, ServerErrorKind, Value,
};
use tokio::sync::Notify;

use crate::target::{FloorConn, Target};

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../scripts/lua/acquire.lua")));
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../scripts/lua/unlock.lua")));
pub(crate) static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../scripts/lua/renew.lua")));

const LEASE_MS: u64 = 30_000;
const LATCH_PX_MS: u64 = 20_000;

static LATCH_SEQ: AtomicU64 = AtomicU64::new(1);

/// The acknowledgement each lock write waits for where the master has a replica: its one
/// replica, within 1 s (the crate's `with_replica_sync` default, Redisson's
/// `slavesSyncTimeout`).
pub(crate) const WAIT_MS: u64 = 1_000;

/// `EVALSHA` of `script` with `keys`; the caller adds the arguments.
pub(crate) fn evalsha(script: &Script, keys: &[&str]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len()).arg(keys);
    cmd
}

/// Sends `cmd` (an `EVALSHA` of `script`), followed by `WAIT 1 1000` in the same write when
/// `wait` (redis-rs's cluster connection routes the pair by the script's key: `WAIT` has
/// none). On `NOSCRIPT` the script is loaded and the call sent again, as `Script` does.
pub(crate) async fn send<T: redis::FromRedisValue>(
    conn: &mut FloorConn,
    script: &Script,
    cmd: &Cmd,
    wait: bool,
) -> T {
    loop {
        let reply = if wait {
            let mut pipe = redis::pipe();
            pipe.add_command(cmd.clone())
                .cmd("WAIT")
                .arg(1)
                .arg(WAIT_MS);
            pipe.query_async::<(T, i64)>(conn).await.map(|(r, _)| r)
        } else {
            cmd.query_async(conn).await
        };
        match reply {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                script.load_async(conn).await.expect("floor: SCRIPT LOAD");
            }
            reply => return reply.expect("floor script"),
        }
    }
}

/// One lock name and owner field spoken to over a raw connection: acquire script, unlock
/// script with a fresh latch, and the latch `DEL` sent without waiting for its reply (as
/// Redisson does: docs/PROTOCOL.md §4). Waiting, when needed, listens on `wake`.
#[derive(Clone)]
pub(crate) struct FloorLock {
    conn: FloorConn,
    pub(crate) key: String,
    channel: String,
    publish: &'static str,
    field: String,
    pub(crate) lease_ms: u64,
    wake: Arc<Notify>,
    /// `WAIT` for the master's replica behind each acquire and unlock.
    wait: bool,
}

impl FloorLock {
    pub(crate) fn new(
        conn: FloorConn,
        publish: &'static str,
        key: &str,
        field: String,
        wake: Arc<Notify>,
        wait: bool,
    ) -> Self {
        FloorLock {
            conn,
            key: key.to_string(),
            channel: format!("redisson_lock__channel:{{{key}}}"),
            publish,
            field,
            lease_ms: LEASE_MS,
            wake,
            wait,
        }
    }

    /// One acquire call's latch (every attempt of the call sends it; see acquire.lua).
    fn acquire_latch(&self) -> String {
        let id = LATCH_SEQ.fetch_add(1, Ordering::Relaxed);
        format!("redisson_lock_acquire_latch:{{{}}}:{id:032x}", self.key)
    }

    pub(crate) async fn try_acquire(&mut self) -> Option<i64> {
        let latch = self.acquire_latch();
        self.attempt(latch).await
    }

    /// One attempt under `latch`; once acquired, the latch is deleted without waiting for
    /// the reply (as the unlock latch is).
    async fn attempt(&mut self, latch: String) -> Option<i64> {
        let mut cmd = evalsha(&ACQUIRE, &[&self.key, &latch]);
        cmd.arg(self.lease_ms)
            .arg(&self.field)
            .arg(self.lease_ms.max(LATCH_PX_MS));
        let reply: Option<i64> = send(&mut self.conn, &ACQUIRE, &cmd, self.wait).await;
        if reply.is_none() {
            let mut conn = self.conn.clone();
            tokio::spawn(async move {
                let _: redis::RedisResult<i64> =
                    redis::cmd("DEL").arg(latch).query_async(&mut conn).await;
            });
        }
        reply
    }

    /// Acquires, waiting for an unlock message (or the holder's PTTL) between attempts.
    pub(crate) async fn lock(&mut self) {
        let wake = self.wake.clone();
        let latch = self.acquire_latch();
        loop {
            let mut notified = pin!(wake.notified());
            notified.as_mut().enable();
            match self.attempt(latch.clone()).await {
                None => return,
                Some(pttl) => {
                    let wait = Duration::from_millis(pttl.clamp(1, 1000) as u64);
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    pub(crate) async fn unlock(&mut self) {
        let id = LATCH_SEQ.fetch_add(1, Ordering::Relaxed);
        let latch = format!("redisson_unlock_latch:{{{}}}:{id:032x}", self.key);
        let mut cmd = evalsha(&UNLOCK, &[&self.key, &self.channel, &latch]);
        cmd.arg("0")
            .arg(self.lease_ms)
            .arg(&self.field)
            .arg(self.publish)
            .arg(LATCH_PX_MS);
        let reply: Option<i64> = send(&mut self.conn, &UNLOCK, &cmd, self.wait).await;
        assert!(reply.is_some(), "floor unlock: not held");
        let mut conn = self.conn.clone();
        tokio::spawn(async move {
            let _: redis::RedisResult<i64> =
                redis::cmd("DEL").arg(latch).query_async(&mut conn).await;
        });
    }
}

/// A raw subscription on `key`'s channel, at the key's master (sharded on a cluster), over
/// a RESP3 connection: `0` wakes one waiter, anything else all of them.
pub(crate) async fn floor_subscription(
    target: &Target,
    key: &str,
) -> (Arc<Notify>, tokio::task::JoinHandle<()>) {
    let channel = format!("redisson_lock__channel:{{{key}}}");
    let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
    let mut info = target.node_of(key).into_connection_info().unwrap();
    let redis_info = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    info = info.set_redis_settings(redis_info);
    let config = redis::AsyncConnectionConfig::new().set_push_sender(tx);
    let mut conn = redis::Client::open(info)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("floor pubsub");
    let subscribe = if target.is_cluster() {
        "SSUBSCRIBE"
    } else {
        "SUBSCRIBE"
    };
    redis::cmd(subscribe)
        .arg(&channel)
        .exec_async(&mut conn)
        .await
        .expect("subscribe");
    let wake = Arc::new(Notify::new());
    let w = wake.clone();
    let task = tokio::spawn(async move {
        let _conn = conn;
        while let Some(push) = pushes.recv().await {
            if !matches!(push.kind, PushKind::Message | PushKind::SMessage) {
                continue;
            }
            if let [_, Value::BulkString(payload), ..] = push.data.as_slice() {
                if payload == b"0" {
                    w.notify_one();
                } else {
                    w.notify_waiters();
                }
            }
        }
    });
    (wake, task)
}
