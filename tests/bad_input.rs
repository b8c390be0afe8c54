//! Bad input gets a clear, typed error and changes nothing in Redis (the data is compared
//! before and after), or works as documented.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redisson_lock::{Config, Error, LockClient, Owner};
use support::{spawn_waiter, RedisServer};

/// Everything in the database, as `key -> (type, dump of the value)`.
fn snapshot(server: &RedisServer) -> HashMap<String, (String, String)> {
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    keys.into_iter()
        .map(|k| {
            let kind: String = server.cmd(&["TYPE", &k]);
            let value = match kind.as_str() {
                "string" => server.cmd::<String>(&["GET", &k]),
                "hash" => format!("{:?}", {
                    let mut h: Vec<(String, String)> = server
                        .cmd::<HashMap<String, String>>(&["HGETALL", &k])
                        .into_iter()
                        .collect();
                    h.sort();
                    h
                }),
                "list" => format!(
                    "{:?}",
                    server.cmd::<Vec<String>>(&["LRANGE", &k, "0", "-1"])
                ),
                other => other.to_string(),
            };
            (k, (kind, value))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_by_a_non_owner_changes_nothing() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_secs(60)))
        .await;
    let stale = client.lock("owned").lock().await.unwrap();
    let _: i64 = server.cmd(&["DEL", "owned"]);
    // Another client (another JVM, say) now holds it.
    let _: i64 = server.cmd(&[
        "HSET",
        "owned",
        "0a0a0a0a-0000-4000-8000-000000000000:17",
        "2",
    ]);
    let _: i64 = server.cmd(&["PEXPIRE", "owned", "60000"]);
    let before = snapshot(&server);
    let err = stale.unlock().await.unwrap_err();
    assert!(err.is_not_owner(), "{err}");
    assert!(
        matches!(&err, Error::NotOwner { lock, owner } if lock == "owned" && owner.starts_with(client.client_id()))
    );
    assert_eq!(snapshot(&server), before);
}

/// Unlocking twice through one guard does not compile: `unlock` consumes the guard.
///
/// ```compile_fail
/// # async fn f(guard: redisson_lock::LockGuard) {
/// guard.unlock().await.unwrap();
/// guard.unlock().await.unwrap();
/// # }
/// ```
///
/// What can happen at run time is a hold released twice by two parties, e.g. after a force
/// unlock: the second is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_released_elsewhere_cannot_be_released_again() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_secs(60)))
        .await;
    let lock = client.lock("twice");
    let guard = lock.lock().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    let before = snapshot(&server);
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_owner() || err.is_lock_lost(), "{err}");
    assert_eq!(snapshot(&server), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_another_type_are_refused_and_untouched() {
    let server = RedisServer::start();
    let client = server.client().await;
    let _: () = server.cmd(&["SET", "a-string", "precious"]);
    let _: i64 = server.cmd(&["RPUSH", "a-list", "x", "y"]);
    let before = snapshot(&server);
    for name in ["a-string", "a-list"] {
        let lock = client.lock(name);
        let errors = [
            lock.try_lock().await.map(|_| ()).unwrap_err(),
            lock.lock_with_lease(Duration::from_secs(1))
                .await
                .map(|_| ())
                .unwrap_err(),
            lock.is_locked().await.map(|_| ()).unwrap_err(),
            lock.hold_count_of(Owner::new())
                .await
                .map(|_| ())
                .unwrap_err(),
            lock.force_unlock().await.map(|_| ()).unwrap_err(),
        ];
        for err in errors {
            assert!(err.is_wrong_type(), "{name}: {err}");
            assert!(err.to_string().contains(name), "{err}");
        }
    }
    // A fenced lock's token counter that is no integer: refused as another type too, not
    // taken for a lost answer (redis-rs classes a value conversion as a reason to reconnect).
    let counter = redisson_lock::names::token_key("a-fenced");
    let _: () = server.cmd(&["SET", &counter, "precious"]);
    let err = client.fenced_lock("a-fenced").token().await.unwrap_err();
    assert!(err.is_wrong_type(), "{err}");
    assert_eq!(server.cmd::<String>(&["GET", &counter]), "precious");
    let _: i64 = server.cmd(&["DEL", &counter]);
    assert_eq!(snapshot(&server), before);
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_names_and_bad_leases_are_refused_before_redis() {
    let server = RedisServer::start();
    let client = server.client().await;
    let scripts = || server.command_calls("evalsha") + server.command_calls("eval");
    let before = scripts();
    let lock = client.lock("lease-checks");
    let refused = [
        client.lock("").lock().await.map(|_| ()).unwrap_err(),
        client
            .lock("")
            .force_unlock()
            .await
            .map(|_| ())
            .unwrap_err(),
        lock.lock_with_lease(Duration::ZERO)
            .await
            .map(|_| ())
            .unwrap_err(),
        lock.lock_with_lease(Duration::from_nanos(999_999))
            .await
            .map(|_| ())
            .unwrap_err(),
        lock.lock_with_lease(Duration::MAX)
            .await
            .map(|_| ())
            .unwrap_err(),
        lock.try_lock_for_with_lease(Duration::ZERO, Duration::from_secs(101 * 365 * 86_400))
            .await
            .map(|_| ())
            .unwrap_err(),
    ];
    for err in refused {
        assert!(err.is_invalid_input(), "{err}");
    }
    assert_eq!(scripts(), before, "a refused call reached Redis");
    assert_eq!(server.cmd::<i64>(&["DBSIZE"]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_waits_mean_once_and_forever() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.lock("waits");
    // A wait too long to represent waits without end: on a free lock it just acquires.
    let g = lock
        .try_lock_for(Duration::MAX)
        .await
        .unwrap()
        .expect("free lock");
    // A zero wait is one attempt.
    assert!(client
        .lock("waits")
        .try_lock_for(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
    // The longest accepted lease works and is set exactly.
    let long = Duration::from_secs(100 * 365 * 86_400);
    let g = lock.lock_with_lease(long).await.unwrap();
    let ttl: i64 = server.cmd(&["PTTL", "waits"]);
    assert!(ttl > (long.as_millis() as i64) - 60_000, "{ttl}");
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_mebibyte_name_works() {
    let server = RedisServer::start();
    let client = server.client().await;
    let name = "n".repeat(1 << 20);
    let lock = client.lock(name.clone());
    let g = lock.lock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", &name]), 1);
    assert!(lock.is_locked().await.unwrap());
    g.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", &name]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_with_braces_follow_the_hash_tag_rule() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter_client = server.client().await;
    for (name, channel) in [
        ("{user}:1", "redisson_lock__channel:{user}:1"),
        ("half{open", "redisson_lock__channel:half{open"),
        ("close}only", "redisson_lock__channel:{close}only}"),
    ] {
        let g = holder
            .lock(name)
            .lock_with_lease(Duration::from_secs(30))
            .await
            .unwrap();
        let waiter = spawn_waiter(&waiter_client, name);
        // The waiter parks on the channel the rule names, and is woken there.
        server.until_subscribers(channel, 1).await;
        g.unlock().await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken on the rule's channel")
            .unwrap();
        next.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused_without_echoing_it() {
    let server = RedisServer::start_with(&["--requirepass", "right-horse"]);
    let url = format!("redis://:battery-staple@127.0.0.1:{}", server.port());
    let err = tokio::time::timeout(Duration::from_secs(10), LockClient::connect(&url))
        .await
        .expect("a refused login fails fast")
        .unwrap_err();
    assert!(err.is_authentication(), "{err}");
    assert!(
        !err.is_connection(),
        "a refused login is not a network error: {err}"
    );
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains("battery-staple"), "password leaked: {text}");
    }
    // The right password works, and neither the config nor the client prints it.
    let url = format!("redis://:right-horse@127.0.0.1:{}", server.port());
    let config = Config::from_url(&url).unwrap();
    let client = LockClient::with_config(config.clone()).await.unwrap();
    for text in [format!("{config:?}"), format!("{client:?}")] {
        assert!(!text.contains("right-horse"), "password leaked: {text}");
    }
    client
        .lock("authed")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_fast_and_clearly() {
    let port = support::free_port();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        LockClient::connect(&format!("redis://127.0.0.1:{port}")),
    )
    .await
    .expect("no hang on an unreachable server")
    .unwrap_err();
    assert!(err.is_connection(), "{err}");
    let err = Config::from_url("http://:secret@example").unwrap_err();
    assert!(err.is_invalid_input());
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_resp3_is_refused_clearly() {
    // Redis 6+ with HELLO disabled behaves like a RESP2-only server (Redis 5).
    let server = RedisServer::start_with(&["--rename-command", "HELLO", ""]);
    let err = LockClient::connect(&server.url()).await.unwrap_err();
    assert!(err.to_string().contains("RESP3"), "{err}");
    assert_eq!(server.cmd::<i64>(&["DBSIZE"]), 0);
}
