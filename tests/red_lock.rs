//! RedLock (Redisson `RedissonRedLock`) over three independent servers: held with a majority,
//! with one server killed too; giving back what it took without a majority; the holder told
//! when the majority is gone, not before.

mod support;

use std::time::Duration;

use redisson_lock::{LockClient, Owner, RedLock};
use support::RedisServer;

const LONG_LEASE: Duration = Duration::from_secs(30);

async fn three() -> ([RedisServer; 3], Vec<LockClient>) {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let mut clients = Vec::new();
    for server in &servers {
        // (Short timeouts: a part whose server is gone fails within a second.)
        clients.push(
            server
                .client_with(|c| {
                    c.with_response_timeout(Duration::from_millis(500))
                        .with_watchdog_timeout(Duration::from_millis(1500))
                })
                .await,
        );
    }
    (servers, clients)
}

fn exists(server: &RedisServer, key: &str) -> bool {
    server.cmd::<i64>(&["EXISTS", key]) == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_is_enough_and_less_gives_back_what_it_took() {
    let (servers, clients) = three().await;
    let red = RedLock::new(clients.iter().map(|c| c.lock("red-a"))).unwrap();
    let busy = |i: usize| clients[i].lock("red-a").with_owner(Owner::new());

    let one = busy(2).lock_with_lease(LONG_LEASE).await.unwrap();
    let guard = red.try_lock().await.unwrap().expect("2 of 3");
    assert_eq!(guard.guards().len(), 2);
    guard.unlock().await.unwrap();
    assert!(!exists(&servers[0], "red-a") && !exists(&servers[1], "red-a"));

    let two = busy(1).lock_with_lease(LONG_LEASE).await.unwrap();
    assert!(
        red.try_lock().await.unwrap().is_none(),
        "1 of 3 is no majority"
    );
    assert!(
        !exists(&servers[0], "red-a"),
        "the part taken was given back"
    );
    assert!(red
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(!exists(&servers[0], "red-a"));

    // A waiting acquire gets its majority once a part is released.
    let waiting = tokio::spawn({
        let red = red.clone();
        async move { red.try_lock_for(Duration::from_secs(10)).await }
    });
    // (It took the first part and waits for the second: subscribed there.)
    servers[1]
        .until_subscribers(&support::channel("red-a"), 1)
        .await;
    two.unlock().await.unwrap();
    let guard = waiting
        .await
        .unwrap()
        .unwrap()
        .expect("a majority after the release");
    assert!(guard.guards().len() >= 2);
    guard.unlock().await.unwrap();
    one.unlock().await.unwrap();
    for client in clients {
        client.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_is_tolerated_and_the_holder_told_when_the_majority_goes() {
    let (mut servers, clients) = three().await;
    let red = RedLock::new(clients.iter().map(|c| c.lock("red-b"))).unwrap();
    servers[2].stop();
    let guard = red.try_lock().await.unwrap().expect("2 of 3 alive");
    assert_eq!(guard.guards().len(), 2);
    assert!(!guard.is_lost());

    // One part gone leaves no majority of the two held: the holder is told.
    let _: i64 = servers[1].cmd(&["DEL", "red-b"]);
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("told when the majority is gone");
    assert!(guard.is_lost());
    assert!(
        guard.unlock().await.is_err(),
        "fewer than a majority released"
    );
    for client in clients {
        client.shutdown().await;
    }
}

#[test]
fn the_blocking_red_lock_and_multi_lock_hold_and_release() {
    use redisson_lock::blocking;
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let clients: Vec<blocking::LockClient> = (servers.iter())
        .map(|s| blocking::LockClient::connect(&s.url()).unwrap())
        .collect();
    let red = blocking::RedLock::new(clients.iter().map(|c| c.lock("red-c"))).unwrap();
    let guard = red.try_lock().unwrap().expect("all free");
    assert!(servers.iter().all(|s| exists(s, "red-c")));
    // Another thread (another owner) cannot have a majority meanwhile.
    let other = red.clone();
    let refused = std::thread::spawn(move || other.try_lock().unwrap().is_none());
    assert!(refused.join().unwrap());
    guard.unlock().unwrap();
    assert!(servers.iter().all(|s| !exists(s, "red-c")));

    let multi = blocking::MultiLock::new([clients[0].lock("m-1"), clients[1].lock("m-2")]).unwrap();
    let guard = multi.lock().unwrap();
    assert!(exists(&servers[0], "m-1") && exists(&servers[1], "m-2"));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert!(!exists(&servers[0], "m-1"));
    for client in clients {
        client.shutdown();
    }
}
