//! Sketches of the next kinds' raw layers, driven through the real engine against a real
//! `redis-server`: they check that a kind is only a [`RawLock`] (its scripts, its replies, how
//! its waiters wait, what a waiter that gives up must undo), with no change to the acquire
//! loop, renewal or release. Not the kinds themselves: those come with their own issue.
//!
//! - [`SpinSketch`]: Redisson's `RSpinLock`, whose waiters poll with a backoff instead of
//!   listening to a channel.
//! - [`QueueSketch`]: a kind that queues waiters in Redis (the fair lock) must take a waiter
//!   that gave up out of the queue; here the "queue" records withdrawals.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use redis::RedisResult;

use crate::engine::acquire::{Granted, Target};
use crate::engine::registry::Lease;
use crate::future::BoxFuture;
use crate::raw::protocol::{AcquireArgs, Attempt, Call, Protocol, Release, UnlockArgs};
use crate::raw::rlock::RLOCK;
use crate::raw::{Kind, RawLock, Waiting};
use crate::{Config, LockClient, Owner};

/// RLock's scripts, waiting by backoff (its unlock's message is never listened to).
#[derive(Debug)]
struct SpinSketch;
static SPIN: Kind = Kind(&SpinSketch);

/// RLock's scripts, recording each withdrawn waiter in the list `withdrawn:<key>`.
#[derive(Debug)]
struct QueueSketch;
static QUEUE: Kind = Kind(&QueueSketch);

/// The RLock delegation both sketches share.
macro_rules! rlock_but {
    ($kind:ty { $($extra:item)* }) => {
        impl RawLock for $kind {
            $($extra)*

            fn name(&self) -> &'static str {
                "sketch"
            }

            fn channel(&self, key: &str) -> String {
                RLOCK.channel(key)
            }

            fn hands_off(&self) -> bool {
                false
            }

            fn acquire(
                &self,
                protocol: &Protocol,
                args: AcquireArgs<'_>,
            ) -> BoxFuture<'static, RedisResult<Attempt>> {
                RLOCK.acquire(protocol, args)
            }

            fn unlock<'a>(
                &'a self,
                protocol: &'a Protocol,
                args: UnlockArgs<'a>,
            ) -> BoxFuture<'a, RedisResult<Release>> {
                RLOCK.unlock(protocol, args)
            }

            fn force_unlock<'a>(
                &'a self,
                protocol: &'a Protocol,
                key: &'a str,
            ) -> BoxFuture<'a, RedisResult<bool>> {
                RLOCK.force_unlock(protocol, key)
            }

            fn renew_call(&self, lease_ms: u64, entries: &[(&str, &str)]) -> Call {
                RLOCK.renew_call(lease_ms, entries)
            }

            fn renewed(&self, reply: redis::Value, entries: usize) -> RedisResult<Vec<bool>> {
                RLOCK.renewed(reply, entries)
            }
        }
    };
}

rlock_but!(SpinSketch {
    fn waiting(&self) -> Waiting {
        Waiting::Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
        }
    }
});

rlock_but!(QueueSketch {
    fn withdraw(
        &self,
        protocol: &Protocol,
        key: &str,
        field: &str,
        _wait: Option<Duration>,
    ) -> Option<BoxFuture<'static, RedisResult<()>>> {
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg(format!("withdrawn:{key}")).arg(field);
        let mut conn = protocol.connection().clone();
        Some(Box::pin(async move { cmd.query_async(&mut conn).await }))
    }
});

/// A `redis-server` on a free loopback port, killed on drop.
/// (The temp dir lives as long as the server.)
struct Server(Child, u16, #[allow(dead_code)] tempfile::TempDir);

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let server = Server(child, port, dir);
        for _ in 0..100 {
            if server.conn().is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not start");
    }

    fn conn(&self) -> RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.1))?.get_connection()
    }

    fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut self.conn().unwrap()).unwrap()
    }

    async fn client(&self) -> LockClient {
        let config = Config::from_url(&format!("redis://127.0.0.1:{}", self.1)).unwrap();
        LockClient::with_config(config).await.unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Acquires `name` as `owner` through the engine with `kind`.
async fn acquire(
    client: &LockClient,
    kind: &'static Kind,
    name: &str,
    owner: Owner,
    wait: Option<Duration>,
) -> Option<Granted> {
    let shared = client.engine();
    let name: Arc<str> = name.into();
    let target = Target {
        raw: kind,
        shared,
        name: &name,
        key: &name,
    };
    let field = owner.field(&shared.client_id).into();
    target
        .acquire(owner, field, wait, Lease::Watchdog)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_kind_without_messages_waits_by_backoff_and_never_subscribes() {
    let server = Server::start();
    let client = server.client().await;
    let (a, b) = (Owner::new(), Owner::new());
    let held = acquire(&client, &SPIN, "s", a, None).await.unwrap();
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { acquire(&client, &SPIN, "s", b, None).await.is_some() })
    };
    // The waiter polls: its attempts reach Redis while nothing listens on the channel.
    let polls = || -> i64 {
        let info: String = server.cmd(&["INFO", "commandstats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    let before = polls();
    while polls() < before + 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (channel, listeners): (String, i64) =
        server.cmd(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{s}"]);
    assert_eq!(
        listeners, 0,
        "{channel}: a polling waiter does not subscribe"
    );
    held.hold.release().await.unwrap();
    assert!(
        waiter.await.unwrap(),
        "the next poll after the release acquires"
    );
}

#[tokio::test]
async fn a_waiter_that_gives_up_is_withdrawn_by_its_kind() {
    let server = Server::start();
    let client = server.client().await;
    let (a, b, c) = (Owner::new(), Owner::new(), Owner::new());
    let held = acquire(&client, &QUEUE, "q", a, None).await.unwrap();
    // Its wait runs out.
    let timed_out = acquire(&client, &QUEUE, "q", b, Some(Duration::from_millis(100))).await;
    assert!(timed_out.is_none());
    // Its call is cancelled (the future dropped while it waits).
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        acquire(&client, &QUEUE, "q", c, None),
    )
    .await;
    assert!(cancelled.is_err());
    let id = client.client_id().to_owned();
    let expected = vec![b.field(&id), c.field(&id)];
    for _ in 0..200 {
        let withdrawn: Vec<String> = server.cmd(&["LRANGE", "withdrawn:q", "0", "-1"]);
        if withdrawn == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let withdrawn: Vec<String> = server.cmd(&["LRANGE", "withdrawn:q", "0", "-1"]);
    assert_eq!(withdrawn, expected, "both waiters withdrawn, in order");
    // The holder is not withdrawn when it gets the lock, and a granted waiter neither.
    held.hold.release().await.unwrap();
    let next = acquire(&client, &QUEUE, "q", b, Some(Duration::from_secs(5))).await;
    next.unwrap().hold.release().await.unwrap();
    let withdrawn: Vec<String> = server.cmd(&["LRANGE", "withdrawn:q", "0", "-1"]);
    assert_eq!(withdrawn.len(), 2);
}
