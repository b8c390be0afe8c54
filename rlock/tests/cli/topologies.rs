//! `rlock` on a Redis Cluster and through Redis Sentinel: the library's shared fixtures
//! (one cluster and one sentinel group for this binary, distinct keys per test).

use std::process::Command;

use redisson_lock::{names, LockClient};

use super::support::cluster::{self, key_on_master, RedisCluster};
use super::support::sentinel::{self, SentinelGroup, MASTER_NAME};
use super::{output, RLOCK};

async fn client() -> LockClient {
    let config = cluster::get().config();
    LockClient::with_config(config)
        .await
        .expect("connect to the cluster")
}

async fn client_with(
    adjust: impl FnOnce(redisson_lock::Config) -> redisson_lock::Config,
) -> LockClient {
    let config = sentinel::get().config();
    LockClient::with_config(adjust(config))
        .await
        .expect("connect through the sentinels")
}

/// `rlock --cluster URL,URL...`: `status` names the key's node and slot, `run` holds the lock
/// on the cluster for its command, `unlock --force` frees a lock held by another client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_works_on_a_cluster() {
    let _steady = RedisCluster::steady().await;
    let seeds = cluster::get().urls().join(",");
    let rlock = |args: &[&str]| {
        let mut cmd = Command::new(RLOCK);
        cmd.arg("--cluster").arg(&seeds).args(args);
        let (status, stdout, stderr) = output(cmd);
        (status.code(), stdout, stderr)
    };
    let name = key_on_master("cli", 2);
    let slot = names::cluster_slot(&name);
    let (code, text, err) = rlock(&["run", &name, "--", "sh", "-c", "echo $RLOCK_KEY"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(text.trim(), name);

    let client = client().await;
    let guard = client.lock(&name).lock().await.unwrap();
    let (code, json, err) = rlock(&["status", &name, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let status: serde_json::Value = serde_json::from_str(&json).unwrap();
    let master = cluster::get().master_of(&name).port;
    assert_eq!(status["state"], "held");
    assert_eq!(status["slot"], slot);
    assert_eq!(status["node"], format!("127.0.0.1:{master}"));
    assert_eq!(status["owners"][0]["field"], guard.owner_field());

    let (code, _, err) = rlock(&["unlock", &name, "--force", "--yes"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!client.lock(&name).is_locked().await.unwrap());
    let _ = guard.unlock().await;
    client.shutdown().await;
}

/// `rlock --sentinel URL,URL... --master-name NAME`: `status` names the master, `run` holds
/// the lock there for its command, `unlock --force` frees a lock held by another client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_works_through_the_sentinels() {
    let _steady = SentinelGroup::steady().await;
    let urls = sentinel::get().sentinel_urls().join(",");
    let rlock = |args: &[&str]| {
        let mut cmd = Command::new(RLOCK);
        cmd.args(["--sentinel", &urls, "--master-name", MASTER_NAME])
            .args(args);
        let (status, stdout, stderr) = output(cmd);
        (status.code(), stdout, stderr)
    };
    let (code, text, err) = rlock(&["run", "s-cli", "--", "sh", "-c", "echo $RLOCK_KEY"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(text.trim(), "s-cli");

    let client = client_with(|c| c).await;
    let guard = client.lock("s-cli").lock().await.unwrap();
    let (code, json, err) = rlock(&["status", "s-cli", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let status: serde_json::Value = serde_json::from_str(&json).unwrap();
    let master = sentinel::get().master().port;
    assert_eq!(status["state"], "held");
    assert_eq!(status["replica_sync"], "on", "the master's WAIT is there");
    assert_eq!(status["node"], format!("127.0.0.1:{master}"));
    assert_eq!(status["owners"][0]["field"], guard.owner_field());

    let (code, _, err) = rlock(&["unlock", "s-cli", "--force", "--yes"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!client.lock("s-cli").is_locked().await.unwrap());
    // Without the master's name the sentinel urls mean nothing: refused as usage.
    let mut cmd = Command::new(RLOCK);
    cmd.args(["--sentinel", &urls, "status", "s-cli"]);
    let (status, _, err) = output(cmd);
    assert_eq!(status.code(), Some(64), "{err}");
    assert!(
        err.contains("--master-name"),
        "the missing flag is named: {err}"
    );
    let _ = guard.unlock().await;
    client.shutdown().await;
}
