//! Every kind from the shell: `rlock run --kind fenced|read|write|fair|spin` takes Redisson's
//! layout of that kind (a fenced command gets its token, a fair run waits its turn in the
//! queue), and `rlock unlock --force` wakes each kind's waiters with what they listen for (the
//! head of a fair lock's queue on its own channel).

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_run_queues_behind_the_holder_and_a_spin_run_excludes_it() {
    let server = RedisServer::start();
    let client = server.client().await;
    let held = client.fair_lock("kinds-fair").lock().await.unwrap();
    let url = server.url();
    // A fair run that waits queues its owner, and leaves the queue when its wait runs out.
    let waited = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let mut cmd = std::process::Command::new(super::RLOCK);
            cmd.env("REDIS_URL", &url);
            cmd.args([
                "run",
                "--kind",
                "fair",
                "kinds-fair",
                "--wait",
                "2s",
                "--",
                "true",
            ]);
            output(cmd).0.code()
        })
    };
    let queued = super::support::eventually(PROMPT, || {
        server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{kinds-fair}"]) == 1
    })
    .await;
    assert!(queued, "the fair run queued");
    assert_eq!(waited.await.unwrap(), Some(73), "its wait ran out");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "redisson_lock_queue:{kinds-fair}"]),
        0,
        "and it left the queue"
    );
    held.unlock().await.unwrap();
    let (fair, spin) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            (
                run_kind(&url, "fair", "kinds-fair", "true"),
                run_kind(&url, "spin", "kinds-spin", "true"),
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(fair.0, Some(0));
    assert_eq!(spin.0, Some(0));
    let plain = client.lock("kinds-spin").lock().await.unwrap();
    let spin = tokio::task::spawn_blocking(move || run_kind(&url, "spin", "kinds-spin", "true"))
        .await
        .unwrap();
    assert_eq!(
        spin.0,
        Some(73),
        "a spin run is kept out by an RLock holder"
    );
    plain.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_unlock_wakes_the_head_of_a_fair_queue() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let held = (holder.fair_lock("kinds-fair-force"))
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let lock = waiter.fair_lock("kinds-fair-force");
    let waiting = tokio::spawn(async move { lock.lock().await.map(|g| (g, Instant::now())) });
    let queued = super::support::eventually(PROMPT, || {
        server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{kinds-fair-force}"]) == 1
    })
    .await;
    assert!(queued);
    let mut cmd = rlock(&server);
    cmd.args(["unlock", "--force", "--yes", "kinds-fair-force"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || output(cmd))
        .await
        .unwrap();
    let unlocked = Instant::now();
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("the first waiter in the queue was notified"),
        "{stdout}"
    );
    let (guard, at) = tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("the head is woken")
        .unwrap()
        .unwrap();
    assert!(
        at.duration_since(unlocked) < Duration::from_secs(5),
        "the message, not a timer"
    );
    guard.unlock().await.unwrap();
    assert!(held.is_lost() || held.unlock().await.is_err());
    holder.shutdown().await;
    waiter.shutdown().await;
}
