//! Operations against a real server: holders you can name (every connection of a client
//! carries `rlock:<client id>:<service>@<host>:<pid>`, again after a reconnect), and the
//! inspection API (`LockClient::inspect`, `LockClient::scan`) over every layout.

mod support;

use std::time::Duration;

use redisson_lock::inspect::{ClientName, LockKind, LockState};
use redisson_lock::{LockClient, Owner};
use support::{eventually, spawn_waiter, RedisServer};

/// This test's view of `CLIENT LIST`: the names of the normal and pub/sub connections
/// other than the asking one.
fn connection_names(server: &RedisServer) -> Vec<String> {
    let mut conn = server.conn();
    let me: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
    list.lines()
        .filter(|line| !line.starts_with(&format!("id={me} ")))
        .map(|line| {
            let name = line.split(' ').find_map(|p| p.strip_prefix("name="));
            name.unwrap_or_default().to_string()
        })
        .collect()
}

/// Whether every connection but the test's carries `client`'s name, and there are `at_least`.
fn all_named(server: &RedisServer, client: &LockClient, at_least: usize) -> bool {
    let names = connection_names(server);
    names.len() >= at_least
        && names.iter().all(|name| {
            name.parse::<ClientName>()
                .is_ok_and(|n| n.client_id == client.client_id() && n.service == "billing")
        })
}

#[tokio::test]
async fn every_connection_of_a_client_carries_its_name_again_after_a_reconnect() {
    let server = RedisServer::start();
    // (A short watchdog: its connection reconnects at its next renewal.)
    let client = server
        .client_with(|c| {
            c.with_service_name("billing")
                .with_watchdog_timeout(Duration::from_millis(1500))
        })
        .await;
    let guard = client.lock("named").lock().await.unwrap();
    // The command connection, the watchdog's and the hub's.
    assert!(
        all_named(&server, &client, 3),
        "{:?}",
        connection_names(&server)
    );
    let name: ClientName = connection_names(&server)[0].parse().unwrap();
    assert_eq!(name.pid, std::process::id());

    server.kill_clients();
    // The next commands reconnect; each reconnected connection is named again.
    let _ = guard.unlock().await;
    let _held = client.lock("named").lock().await.unwrap();
    let renamed = eventually(Duration::from_secs(10), || all_named(&server, &client, 3)).await;
    assert!(renamed, "{:?}", connection_names(&server));
    client.shutdown().await;
}

#[tokio::test]
async fn inspect_names_the_holder_and_counts_the_waiters() {
    let server = RedisServer::start();
    let holder = server.client_with(|c| c.with_service_name("billing")).await;
    let waiter = server.client().await;
    let looker = server.client().await;
    let lock = holder.lock("inspected").with_owner(Owner::new());
    let guard = lock.lock().await.unwrap();
    let again = lock.lock().await.unwrap();
    let waiting = spawn_waiter(&waiter, "inspected");
    server
        .until_subscribers(&support::channel("inspected"), 1)
        .await;

    let info = looker.inspect("inspected").await.unwrap();
    assert_eq!(info.state, LockState::Held);
    assert_eq!(info.kind, Some(LockKind::Lock));
    assert_eq!(info.waiters, Some(1));
    assert!(info.lease_left_ms.is_some_and(|ms| ms > 0));
    let [held] = &info.holders[..] else {
        panic!("one holder: {info:?}")
    };
    assert_eq!(held.client_id.as_deref(), Some(holder.client_id()));
    assert_eq!(held.holds, Some(2));
    let client = held.client.as_ref().expect("the holder is named");
    assert_eq!(
        (client.service.as_str(), client.pid),
        ("billing", std::process::id())
    );
    assert!(client
        .addr
        .as_deref()
        .is_some_and(|a| a.starts_with("127.0.0.1:")));

    again.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    waiting.await.unwrap().unlock().await.unwrap();
    let info = looker.inspect("inspected").await.unwrap();
    assert_eq!((info.state, info.kind), (LockState::Free, None));
    assert!(info.holders.is_empty() && info.lease_left_ms.is_none());

    let _: () = server.cmd(&["SET", "inspected-string", "x"]);
    let info = looker.inspect("inspected-string").await.unwrap();
    assert_eq!(
        (info.state, info.redis_type.as_str()),
        (LockState::NotALock, "string")
    );
    for client in [holder, waiter, looker] {
        client.shutdown().await;
    }
}

#[tokio::test]
async fn scan_finds_every_lock_of_every_kind_and_skips_other_hashes() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut guards = Vec::new();
    for i in 0..250 {
        guards.push(client.lock(format!("scan:{i}")).lock().await.unwrap());
    }
    let fenced = client.fenced_lock("scan:fenced").lock().await.unwrap();
    let read = client
        .read_write_lock("scan:rw")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let _: () = server.cmd(&["HSET", "scan:app-data", "field", "value"]);
    let _: () = server.cmd(&["SET", "scan:a-string", "x"]);
    let _: () = server.cmd(&["HSET", "other:lock-like", "not-ours", "1"]);

    let mut scan = client.scan("scan:*").with_count(50);
    let mut seen = Vec::new();
    while let Some(info) = scan.next().await {
        seen.push(info.unwrap());
    }
    seen.sort_by(|a, b| a.name.cmp(&b.name));
    seen.dedup_by(|a, b| a.name == b.name);
    assert_eq!(seen.len(), 252, "every lock, and no other key");
    let kind = |name: &str| seen.iter().find(|i| i.name == name).and_then(|i| i.kind);
    assert_eq!(kind("scan:7"), Some(LockKind::Lock));
    assert_eq!(kind("scan:fenced"), Some(LockKind::Fenced));
    assert_eq!(kind("scan:rw"), Some(LockKind::ReadWrite));
    let fenced_info = seen.iter().find(|i| i.name == "scan:fenced").unwrap();
    assert_eq!(fenced_info.fencing_token, Some(fenced.token()));

    drop((fenced, read));
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    client.shutdown().await;
}

#[tokio::test]
async fn a_holder_listening_for_its_loss_is_not_counted_as_a_waiter() {
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| c.with_prompt_loss_detection(true))
        .await;
    let waiter = server.client().await;
    let guard = holder.lock("watched").lock().await.unwrap();
    server
        .until_subscribers(&support::channel("watched"), 1)
        .await;
    let info = waiter.inspect("watched").await.unwrap();
    assert_eq!(info.waiters, Some(0), "the holder's own subscription");
    assert!(info.holders[0].client.as_ref().is_some_and(|c| c.watches));

    let waiting = spawn_waiter(&waiter, "watched");
    server
        .until_subscribers(&support::channel("watched"), 2)
        .await;
    assert_eq!(waiter.inspect("watched").await.unwrap().waiters, Some(1));
    guard.unlock().await.unwrap();
    waiting.await.unwrap().unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
}

/// The synchronizers' layouts: a bare count (a semaphore's permits, a latch's count) and a
/// semaphore with expiring permits, whose permits are listed with their expiries; the
/// waiters of each counted on its channels; a scan lists the semaphore with expiring permits
/// (its layout tells it apart) and not a bare count (any integer string).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_recognises_semaphores_and_latches_and_counts_their_waiters() {
    let server = RedisServer::start();
    let client = server.client().await;
    let waiters = server.client().await;

    let pool = client.semaphore("sync:pool");
    pool.try_set_permits(0).await.unwrap();
    let waiting = tokio::spawn(async move { waiters.semaphore("sync:pool").acquire(1).await });
    server.until_subscribers("redisson_sc:{sync:pool}", 1).await;
    let info = client.inspect("sync:pool").await.unwrap();
    assert_eq!(info.state, LockState::Count);
    assert_eq!(info.kind, Some(LockKind::Count));
    assert_eq!(info.count, Some(0));
    assert_eq!(info.waiters, Some(1), "the semaphore's waiter");
    assert!(info.permits.is_empty() && info.permits_taken.is_none());
    pool.release(1).await.unwrap();
    waiting.await.unwrap().unwrap().forget();

    let gate = client.count_down_latch("sync:gate");
    gate.try_set_count(2).await.unwrap();
    let info = client.inspect("sync:gate").await.unwrap();
    assert_eq!((info.state, info.count), (LockState::Count, Some(2)));

    let jobs = client.permit_semaphore("sync:jobs");
    jobs.try_set_permits(3).await.unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let leased = jobs
        .acquire(redisson_lock::Lease::Fixed(Duration::from_secs(60)))
        .await
        .unwrap();
    let info = client.inspect("sync:jobs").await.unwrap();
    assert_eq!(info.state, LockState::Count);
    assert_eq!(info.kind, Some(LockKind::PermitSemaphore));
    assert_eq!((info.count, info.permits_taken), (Some(2), Some(1)));
    assert_eq!(info.permits.len(), 1);
    assert_eq!(info.permits[0].id, leased.id());
    let expires = info.permits[0].expires_ms.unwrap();
    assert!(expires >= before + 60_000 && expires < before + 61_000);

    let _: () = server.cmd(&["SET", "sync:not-a-count", "x"]);
    assert_eq!(
        client.inspect("sync:not-a-count").await.unwrap().state,
        LockState::NotALock
    );

    let mut scan = client.scan("sync:*");
    let mut seen = Vec::new();
    while let Some(info) = scan.next().await {
        seen.push(info.unwrap().name);
    }
    seen.dedup();
    assert_eq!(seen, vec!["sync:jobs".to_string()]);
    leased.release().await.unwrap();
    client.shutdown().await;
}
