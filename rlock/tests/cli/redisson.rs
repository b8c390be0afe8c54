//! `rlock top` against what a real Redisson (3.23.4 and 4.7.0, in a JVM) holds and waits on:
//! it recognises three kinds, their holders' fields and a Java waiter.

use std::path::Path;

use serde_json::json;

use super::support::java::{script_calls, until_java_waits, JavaAgent};
use super::support::{self, RedisServer};

super::support::java::scenarios!(rlock_top_shows_the_locks_redisson_holds_and_waits_on);

const WATCHDOG_MS: u64 = 1500;

async fn rlock_top_shows_the_locks_redisson_holds_and_waits_on(jar: &Path) {
    let server = RedisServer::start();
    let java = JavaAgent::start(jar, &server.url(), WATCHDOG_MS).await;
    let rust = server.client().await;
    java.lock("top-java:plain", "a").await.unwrap();
    let token = java.fenced_lock("top-java:fenced", "b").await.unwrap();
    java.rw("write", "lock", "top-java:rw", "c", json!({}))
        .await
        .unwrap();
    let before = script_calls(&server);
    let mut waiting = java.lock_async_report("top-java:plain", "d", None).await;
    until_java_waits(&java, &server, &support::channel("top-java:plain"), before).await;

    let out = tokio::task::spawn_blocking({
        let url = server.url();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_rlock"))
                .args(["--url", &url, "top", "top-java:*", "--once", "--json"])
                .args(["--sort", "name"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let locks: Vec<serde_json::Value> = (String::from_utf8_lossy(&out.stdout).lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(&str, &str)> = (locks.iter())
        .map(|l| (l["name"].as_str().unwrap(), l["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("top-java:fenced", "fenced"),
            ("top-java:plain", "lock"),
            ("top-java:rw", "read_write")
        ]
    );
    assert_eq!(locks[0]["fencing_token"], token);
    assert_eq!(locks[1]["owners"][0]["field"], java.field("a").await);
    assert_eq!(locks[1]["waiters"], 1, "the Java waiter");
    assert_eq!(locks[2]["owners"][0]["mode"], "write");
    // (Redisson names no connection: its holders show by field only.)
    assert!(locks[1]["owners"][0]["client"].is_null());

    java.unlock("top-java:plain", "a").await.unwrap();
    waiting.acquired().await;
    java.unlock("top-java:plain", "d").await.unwrap();
    java.fenced_unlock("top-java:fenced", "b").await.unwrap();
    java.rw("write", "unlock", "top-java:rw", "c", json!({}))
        .await
        .unwrap();
    rust.shutdown().await;
}
