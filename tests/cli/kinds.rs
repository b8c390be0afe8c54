//! Every kind from the shell: `rlock run --kind fenced|read|write` takes Redisson's layout of
//! that kind (a fenced command gets its token), and `rlock unlock --force` wakes each kind's
//! waiters with what they listen for.

use std::time::{Duration, Instant};

use redisson_lock::Owner;

use super::support::RedisServer;
use super::{output, rlock, PROMPT};

/// `rlock run --kind KIND NAME --wait 0 -- sh -c SCRIPT` against the server at `url`:
/// (exit code, stdout).
fn run_kind(url: &str, kind: &str, name: &str, script: &str) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(super::RLOCK);
    cmd.env("REDIS_URL", url);
    cmd.args([
        "run", "--kind", kind, name, "--wait", "0", "--", "sh", "-c", script,
    ]);
    let (status, stdout, _) = output(cmd);
    (status.code(), stdout)
}

#[test]
fn a_fenced_run_gives_the_command_the_next_token() {
    let server = RedisServer::start();
    let token = |server: &RedisServer| {
        let script = "echo $RLOCK_FENCING_TOKEN";
        let (code, out) = run_kind(&server.url(), "fenced", "kinds-fenced", script);
        assert_eq!(code, Some(0));
        out.trim().parse::<i64>().expect("a token")
    };
    let first = token(&server);
    assert_eq!(token(&server), first + 1);
    let counter: String = server.cmd(&["GET", "redisson_lock_token:{kinds-fenced}"]);
    assert_eq!(counter, (first + 1).to_string(), "Redisson's token counter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_runs_share_a_reader_and_write_runs_wait_for_it() {
    let server = RedisServer::start();
    let client = server.client().await;
    let reader = (client.read_write_lock("kinds-rw").read_lock())
        .with_owner(Owner::new())
        .lock()
        .await
        .unwrap();
    let url = server.url();
    let (read, write, lock) = tokio::task::spawn_blocking(move || {
        (
            run_kind(&url, "read", "kinds-rw", "echo $RLOCK_OWNER_FIELD"),
            run_kind(&url, "write", "kinds-rw", "true"),
            run_kind(&url, "lock", "kinds-rw", "true"),
        )
    })
    .await
    .unwrap();
    assert_eq!(read.0, Some(0), "readers share");
    assert!(!read.1.trim().ends_with(":write"));
    assert_eq!(write.0, Some(73), "a writer waits for the reader");
    assert_eq!(lock.0, Some(73), "a plain lock of the name is held too");
    reader.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_unlock_wakes_a_read_write_waiter_by_its_message() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let writer = (holder.read_write_lock("kinds-force").write_lock())
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let read = waiter.read_write_lock("kinds-force").read_lock();
    let waiting = tokio::spawn(async move { read.lock().await.map(|g| (g, Instant::now())) });
    server
        .until_subscribers("redisson_rwlock:{kinds-force}", 1)
        .await;
    let mut cmd = rlock(&server);
    cmd.args(["unlock", "--force", "--yes", "kinds-force"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || output(cmd))
        .await
        .unwrap();
    let unlocked = Instant::now();
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("waiters were notified"), "{stdout}");
    let (guard, at) = tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("the reader is woken")
        .unwrap()
        .unwrap();
    // Far inside the writer's 60 s lease: the message, not a timer.
    assert!(at.duration_since(unlocked) < Duration::from_secs(5));
    guard.unlock().await.unwrap();
    assert!(writer.is_lost() || writer.unlock().await.is_err());
    holder.shutdown().await;
    waiter.shutdown().await;
}
