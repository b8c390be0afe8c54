//! What differs between the servers of the matrix (Redis 6.2, 7.0, 7.4, Valkey 8.1 and 9.1):
//! sharded pub/sub where the server has it, a clear refusal at connect where it has not,
//! scripts that never answer an error after a write took effect, and a Unix socket.

mod support;

use std::time::Duration;

use redisson_lock::{Config, LockClient, PublishMode};
use support::{server_info, RedisServer};
use tokio::time::timeout;

/// Holders here take a lease far longer than any wait in a test: a waiter that gets the lock
/// within [`PROMPT`] was woken by the message, not by the lease running out.
const LONG_LEASE: Duration = Duration::from_secs(30);
const PROMPT: Duration = Duration::from_secs(5);

/// `PUBSUB SHARDNUMSUB channel`: sharded subscribers of one channel.
fn shard_subscribers(server: &RedisServer, channel: &str) -> i64 {
    let reply: Vec<redis::Value> = server.cmd(&["PUBSUB", "SHARDNUMSUB", channel]);
    match reply.get(1) {
        Some(redis::Value::Int(n)) => *n,
        _ => 0,
    }
}

/// Sharded pub/sub as each server can serve it: woken by the message where the server has it,
/// refused at connect where it has not (both, across the matrix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spublish_mode_wakes_waiters_by_the_message_or_is_refused_at_connect() {
    if server_info().sharded_pubsub {
        a_waiter_in_spublish_mode_is_woken_by_the_sharded_message().await;
    } else {
        spublish_is_refused_at_connect().await;
    }
}

/// `PublishMode::SPublish` on one server, a burst of held locks listened for their loss: each
/// channel subscribed once with `SSUBSCRIBE` (pipelined, each confirmed alone), and a forced
/// unlock told to its holder only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_locks_in_spublish_mode_are_listened_for_together_and_told_their_loss() {
    const HELD: usize = 500;
    if !server_info().sharded_pubsub {
        support::skip(
            "held_locks_in_spublish_mode_are_listened_for_together_and_told_their_loss",
            "no sharded pub/sub before Redis 7",
        );
        return;
    }
    let server = RedisServer::start();
    let sharded = |c: Config| {
        c.with_publish_mode(PublishMode::SPublish)
            .with_prompt_loss_detection(true)
    };
    let holder = server.client_with(sharded).await;
    let guards = futures::future::join_all((0..HELD).map(|i| {
        let lock = holder.lock(format!("burst-{i}"));
        async move { lock.lock().await.unwrap() }
    }))
    .await;
    let all = support::eventually(PROMPT, || {
        (0..HELD)
            .step_by(23)
            .chain([HELD - 1])
            .all(|i| shard_subscribers(&server, &support::channel(&format!("burst-{i}"))) == 1)
    })
    .await;
    assert!(all, "every held lock is listened for with SSUBSCRIBE");
    let victim = &guards[HELD / 3];
    let other = server.client().await;
    assert!(other.lock(victim.name()).force_unlock().await.unwrap());
    timeout(PROMPT, victim.lost())
        .await
        .expect("a forced unlock is told at once");
    assert_eq!(guards.iter().filter(|g| g.is_lost()).count(), 1);
    for guard in guards.into_iter().filter(|g| !g.is_lost()) {
        guard.unlock().await.unwrap();
    }
    holder.shutdown().await;
    other.shutdown().await;
}

/// `PublishMode::SPublish` where the server has no sharded pub/sub (Redis 6.2): refused at
/// connect, naming the missing command, with nothing written.
async fn spublish_is_refused_at_connect() {
    let server = RedisServer::start();
    let err = LockClient::with_config(server.config().with_publish_mode(PublishMode::SPublish))
        .await
        .unwrap_err();
    assert!(err.is_unsupported(), "{err:?}");
    assert!(err.to_string().contains("SPUBLISH"), "{err}");
    assert_eq!(server.cmd::<i64>(&["DBSIZE"]), 0, "nothing written");
    // The default mode works on the same server.
    let client = server.client().await;
    client
        .lock("plain")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

/// `PublishMode::SPublish` where the server has sharded pub/sub: the waiter subscribes with
/// `SSUBSCRIBE` and the unlock's `SPUBLISH` wakes it, well before the holder's lease.
async fn a_waiter_in_spublish_mode_is_woken_by_the_sharded_message() {
    let server = RedisServer::start();
    let sharded = |c: Config| c.with_publish_mode(PublishMode::SPublish);
    let holder = server.client_with(sharded).await;
    let waiter_client = server.client_with(sharded).await;
    let guard = holder
        .lock("sharded")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let lock = waiter_client.lock("sharded");
    let waiter = tokio::spawn(async move { lock.lock().await });
    let channel = support::channel("sharded");
    assert!(
        support::eventually(PROMPT, || shard_subscribers(&server, &channel) == 1).await,
        "the waiter never subscribed with SSUBSCRIBE"
    );
    assert_eq!(server.subscribers(&channel), 0, "no classic subscription");

    let published = server.command_calls("spublish");
    guard.unlock().await.unwrap();
    assert_eq!(server.command_calls("spublish"), published + 1);
    let next = timeout(PROMPT, waiter)
        .await
        .expect("woken by the SPUBLISH message, not by the lease")
        .unwrap()
        .unwrap();
    next.unlock().await.unwrap();
    assert_eq!(
        server.command_calls("publish"),
        0,
        "nothing sent with PUBLISH"
    );
}

/// An ACL user that may do everything but publish: the unlock and force-unlock scripts fail on
/// their publish, which must come before their delete, so the error means nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_whose_publish_is_refused_changes_nothing() {
    let server = RedisServer::start();
    let _: () = server.cmd(&[
        "ACL",
        "SETUSER",
        "nopublish",
        "reset",
        "resetchannels",
        "on",
        ">pw",
        "~*",
        "&*",
        "+@all",
        "-publish",
    ]);
    let url = format!("redis://nopublish:pw@127.0.0.1:{}", server.port());
    let client = LockClient::with_config(Config::from_url(&url).unwrap())
        .await
        .unwrap();
    let field = |guard: &redisson_lock::LockGuard| guard.owner_field().to_string();

    let guard = client
        .lock("guarded")
        .lock_with_lease(LONG_LEASE)
        .await
        .unwrap();
    let owner = field(&guard);
    let err = guard.unlock().await.unwrap_err();
    assert!(!err.is_not_owner(), "{err:?}");
    let holds: Option<i64> = server.cmd(&["HGET", "guarded", &owner]);
    assert_eq!(holds, Some(1), "the failed unlock deleted the lock: {err}");
    assert!(server.cmd::<i64>(&["PTTL", "guarded"]) > 0);

    let err = client.lock("guarded").force_unlock().await.unwrap_err();
    assert!(!err.is_not_owner(), "{err:?}");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "guarded"]),
        1,
        "the failed force unlock deleted the lock: {err}"
    );
}

/// A service beside its Redis can reach it over a Unix socket (`redis+unix:///path`, or
/// `unix:///path`): every lock operation works there, a waiter is woken by the unlock
/// message, the watchdog renews, and nothing goes over TCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_url_serves_every_lock_operation() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("redis.sock");
    let socket_arg = socket.to_string_lossy().into_owned();
    let server = RedisServer::start_with(&["--unixsocket", &socket_arg, "--unixsocketperm", "700"]);
    let lease = Duration::from_millis(900);
    let mut clients = Vec::new();
    for scheme in ["redis+unix", "unix"] {
        let url = format!("{scheme}://{}", socket.display());
        let config = Config::from_url(&url).unwrap().with_watchdog_timeout(lease);
        clients.push(
            LockClient::with_config(config)
                .await
                .expect("connects over the socket"),
        );
    }
    let (holder, waiter) = (&clients[0], &clients[1]);
    let held = holder.lock("unix-lock").lock().await.unwrap();
    let waiting = tokio::spawn({
        let lock = waiter.lock("unix-lock");
        async move { lock.lock_with_lease(LONG_LEASE).await }
    });
    server
        .until_subscribers(&support::channel("unix-lock"), 1)
        .await;
    // Two leases: held only if the watchdog renewed over the socket.
    tokio::time::sleep(lease * 2).await;
    assert!(!held.is_lost(), "renewed over the socket");
    assert!(!waiting.is_finished(), "held, so the waiter waits");
    held.unlock().await.unwrap();
    let served = timeout(PROMPT, waiting)
        .await
        .expect("woken by the message");
    served.unwrap().unwrap().unlock().await.unwrap();
    let info = holder.inspect("unix-lock").await.unwrap();
    assert!(info.holders.is_empty());
    // Every connection of both clients (commands, subscriptions, the watchdog's) is the
    // socket's: `U` among its CLIENT LIST flags.
    let list: String = server.cmd(&["CLIENT", "LIST"]);
    let flags: Vec<&str> = (list.lines())
        .filter(|l| l.contains(" name=rlock:"))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("flags=")))
        .collect();
    assert!(flags.len() >= 4, "both clients' connections: {list}");
    assert!(flags.iter().all(|f| f.contains('U')), "over TCP: {list}");
    for client in clients {
        client.shutdown().await;
    }
}
