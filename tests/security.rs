//! Least privilege and transport security: an ACL user limited to what the lock needs (the
//! ACL documented in the README), and `rediss://` against a server with a throwaway CA.

mod support;

use std::time::Duration;

use redisson_lock::{Config, LockClient, Owner};
use support::{eventually, spawn_waiter, RedisServer};
use tokio::time::timeout;

const PROMPT: Duration = Duration::from_secs(5);

/// The ACL block of README.md ("Least-privilege ACL"), word for word: what a user copies is
/// what is tested, on every server of the matrix (Redis 6.2 starts a user with every channel
/// unless the rules say `resetchannels`).
fn readme_acl() -> Vec<String> {
    let readme = include_str!("../README.md");
    let start = readme
        .find("ACL SETUSER locker")
        .expect("README.md has the ACL block");
    let block = &readme[start..];
    let block = &block[..block.find("```").expect("the ACL block ends")];
    block.split_whitespace().map(str::to_string).collect()
}

/// The password the README's ACL gives the user.
const LOCKER_PASSWORD: &str = "password";

fn locker_url(server: &RedisServer) -> String {
    format!(
        "redis://locker:{LOCKER_PASSWORD}@127.0.0.1:{}",
        server.port()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_least_privilege_acl_user_can_do_everything_the_lock_needs() {
    let server = RedisServer::start();
    let acl = readme_acl();
    let _: () = server.cmd(&acl.iter().map(String::as_str).collect::<Vec<_>>());
    let url = locker_url(&server);
    let config = || {
        Config::from_url(&url)
            .unwrap()
            .with_key_prefix("locks:")
            .with_watchdog_timeout(Duration::from_millis(1500))
    };
    let holder = LockClient::with_config(config()).await.unwrap();
    let waiter_client = LockClient::with_config(config()).await.unwrap();

    let lock = holder.lock("report");
    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count_of(guard.owner()).await.unwrap(), 1);
    assert!(lock.remaining_lease().await.unwrap().is_some());
    let waiter = spawn_waiter(&waiter_client, "report");
    // Renewal works under the ACL: the lock outlives two leases, and the waiter waits.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!guard.is_lost());
    assert!(!waiter.is_finished());
    guard.unlock().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter woken under the ACL")
        .unwrap();
    assert!(waiter_client.lock("report").force_unlock().await.unwrap());
    drop(next);

    // And nothing more: other keys and dangerous commands are refused.
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let no_perm = |r: redis::RedisResult<()>| {
        r.is_err_and(|e| e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm))
    };
    assert!(no_perm(
        redis::cmd("SET").arg("other").arg("x").query(&mut con)
    ));
    assert!(no_perm(redis::cmd("FLUSHALL").query(&mut con)));
    assert_eq!(server.cmd::<i64>(&["EXISTS", "other"]), 0);
}

/// Local hand-off under the ACL: with `pubsub|numsub` allowed a release hands the lock to a
/// waiter of its own client; without it the count is refused, which the release shrugs off:
/// every waiter is still served, by the unlock message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_waiters_are_served_with_and_without_the_count_permission() {
    for allowed in [true, false] {
        let server = RedisServer::start();
        let acl = readme_acl();
        let acl: Vec<&str> = acl
            .iter()
            .map(String::as_str)
            .filter(|&rule| allowed || rule != "+pubsub|numsub")
            .collect();
        let _: () = server.cmd(&acl);
        let url = locker_url(&server);
        let config = Config::from_url(&url).unwrap().with_key_prefix("locks:");
        let client = LockClient::with_config(config).await.unwrap();

        let first = client.lock("relay").lock().await.unwrap();
        let owners = [Owner::new(), Owner::new()];
        let (tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
        for owner in owners {
            let (lock, tx) = (client.lock("relay").with_owner(owner), tx.clone());
            tokio::spawn(async move { tx.send(lock.lock().await.unwrap()).unwrap() });
        }
        assert!(eventually(PROMPT, || client.waiting() == 2).await);
        first.unlock().await.unwrap();
        let second = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();
        let last = *owners.iter().find(|&&o| o != second.owner()).unwrap();
        assert!(eventually(PROMPT, || client.waiting() == 1).await);
        second.unlock().await.unwrap();
        if allowed {
            let field = format!("{}:{}", client.client_id(), last.id());
            let holds: Option<i64> = server.cmd(&["HGET", "locks:relay", &field]);
            assert_eq!(holds, Some(1), "not handed off under the README's ACL");
        }
        let third = timeout(PROMPT, acquired.recv()).await.unwrap().unwrap();
        assert_eq!(third.owner(), last);
        third.unlock().await.unwrap();
        assert_eq!(client.held_locks(), 0);
    }
}

#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_a_private_ca_works_and_unknown_cas_are_refused() {
    use support::channel;
    use support::tls::TlsServer;

    let Some(tls) =
        TlsServer::start_or_skip("rediss_with_a_private_ca_works_and_unknown_cas_are_refused")
    else {
        return;
    };
    let (server, url) = (&tls.server, tls.url());

    // Without our CA the certificate is not trusted: no silent downgrade, no blind trust.
    let err = LockClient::connect(&url).await.unwrap_err();
    assert!(err.is_connection(), "{err}");

    let ca = std::fs::read(tls.ca_path()).unwrap();
    let config = Config::from_url(&url)
        .unwrap()
        .with_tls_root_cert(ca)
        .with_watchdog_timeout(Duration::from_millis(1500));
    let holder = LockClient::with_config(config.clone()).await.unwrap();
    let waiter_client = LockClient::with_config(config).await.unwrap();
    let guard = holder.lock("secure").lock().await.unwrap();
    let waiter = spawn_waiter(&waiter_client, "secure");
    server.until_subscribers(&channel("secure"), 1).await;
    guard.unlock().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter woken over TLS")
        .unwrap();
    next.unlock().await.unwrap();
}
