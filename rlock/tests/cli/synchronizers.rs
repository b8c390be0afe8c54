//! Redisson's synchronizers from the shell: `rlock run --kind permit` holds one permit of an
//! `RPermitExpirableSemaphore` while its command runs (kept alive, given back when it ends,
//! back for others within the watchdog timeout when rlock is killed), `rlock permits` shows
//! and sets the permits, `rlock latch` sets, counts down and awaits a count-down latch, and
//! `status` and `unlock --force` tell a semaphore from a lock; and `rlock watch` prints a
//! lock's events as they happen.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::RedisServer;
use super::{output, rlock, Running};

fn run_permit(server: &RedisServer, name: &str, extra: &[&str], script: &str) -> Running {
    let mut cmd = rlock(server);
    cmd.args([
        "run",
        "--kind",
        "permit",
        name,
        "--watchdog-timeout",
        "1500ms",
    ])
    .args(extra)
    .args(["--", "sh", "-c", script]);
    Running::start(cmd)
}

fn permit_ids(server: &RedisServer, name: &str) -> Vec<String> {
    let ids: Vec<Vec<u8>> = server.cmd(&["ZRANGE", &format!("{{{name}}}:timeout"), "0", "-1"]);
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    ids.iter().map(|id| hex(id)).collect()
}

fn json_of(server: &RedisServer, args: &[&str]) -> Value {
    let mut cmd = rlock(server);
    cmd.args(args);
    let (status, stdout, stderr) = output(cmd);
    assert!(status.success(), "{args:?}: {stderr}");
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

#[test]
fn a_permit_run_holds_one_permit_while_its_command_runs() {
    let server = RedisServer::start();
    let mut first = run_permit(
        &server,
        "exports",
        &["--permits", "1", "--wait", "0"],
        "echo $RLOCK_PERMIT_ID; read go",
    );
    let id = first.line();
    assert_eq!(id.len(), 32, "{id}");
    assert_eq!(permit_ids(&server, "exports"), vec![id.clone()]);

    // The one permit is taken: a second run gives up at once; `permits` and `status` say so.
    let second = run_permit(&server, "exports", &["--wait", "0"], "true");
    let (status, stderr) = second.finish();
    assert_eq!(status.code(), Some(73), "{stderr}");
    assert!(stderr.contains("no permit of `exports`"), "{stderr}");
    let permits = json_of(&server, &["permits", "exports", "--json"]);
    assert_eq!(permits["available"], 0);
    assert_eq!(permits["taken"], 1);
    let status = json_of(&server, &["status", "exports", "--json"]);
    assert_eq!(status["state"], "count");
    assert_eq!(status["kind"], "permit_semaphore");
    assert_eq!(status["permits_taken"], 1);
    assert_eq!(status["permits"][0]["id"], id.as_str());
    let left = status["permits"][0]["lease_left_ms"].as_i64().unwrap();
    assert!(
        left > 0 && left <= 1500,
        "renewed to the watchdog timeout: {left}"
    );

    // `top` lists it, by its permit list.
    let mut cmd = rlock(&server);
    cmd.args(["top", "--once", "--json", "exp*"]);
    let (status, stdout, stderr) = output(cmd);
    assert!(status.success(), "{stderr}");
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert_eq!(rows[0]["name"], "exports");
    assert_eq!(rows[0]["kind"], "permit_semaphore");

    // A forced unlock refuses a semaphore and changes nothing.
    let mut cmd = rlock(&server);
    cmd.args(["unlock", "--force", "--yes", "exports"]);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a lock"), "{stderr}");
    assert_eq!(permit_ids(&server, "exports"), vec![id]);

    // The command ends: its permit is given back.
    first.go();
    let (status, stderr) = first.finish();
    assert!(status.success(), "{stderr}");
    assert!(permit_ids(&server, "exports").is_empty());
    assert_eq!(server.cmd::<String>(&["GET", "exports"]), "1");
}

#[test]
fn a_killed_runs_permit_comes_back_within_the_watchdog_timeout() {
    let server = RedisServer::start();
    let mut holder = run_permit(
        &server,
        "killed",
        &["--permits", "1", "--wait", "0"],
        "echo taken; read go",
    );
    assert_eq!(holder.line(), "taken");
    let killed = Instant::now();
    holder.child.kill().unwrap(); // SIGKILL: nothing of rlock runs again
                                  // Nothing gives it back: the permit's expiry, no longer renewed, does.
    let waiter = run_permit(
        &server,
        "killed",
        &["--wait", "5s"],
        "echo $RLOCK_PERMIT_ID",
    );
    let id = waiter.line();
    let took = killed.elapsed();
    assert_eq!(id.len(), 32);
    assert!(took < Duration::from_millis(1500 + 1000), "{took:?}");
    let (status, stderr) = waiter.finish();
    assert!(status.success(), "{stderr}");
}

#[test]
fn permits_and_a_latch_from_the_shell() {
    let server = RedisServer::start();
    let text = |args: &[&str]| {
        let mut cmd = rlock(&server);
        cmd.args(args);
        let (status, stdout, stderr) = output(cmd);
        (status.code(), stdout.trim().to_string(), stderr)
    };
    let (code, out, _) = text(&["permits", "pool", "--set", "3"]);
    assert_eq!(code, Some(0));
    assert_eq!(out, "`pool`: 3 available, 0 taken (3 in all)");
    let (code, out, _) = text(&["status", "pool"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("a count"), "{out}");
    assert!(out.contains("count    3"), "{out}");

    assert_eq!(text(&["latch", "gate", "set", "2"]).0, Some(0));
    let (code, _, stderr) = text(&["latch", "gate", "set", "5"]);
    assert_eq!(code, Some(1), "set once only");
    assert!(stderr.contains("already has a count"), "{stderr}");
    assert_eq!(text(&["latch", "gate", "count"]).1, "2");
    let started = Instant::now();
    let (code, _, stderr) = text(&["latch", "gate", "await", "--wait", "200ms"]);
    assert_eq!(code, Some(73), "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    let mut waiter = rlock(&server);
    waiter.args(["latch", "gate", "await"]);
    let waiter = Running::start(waiter);
    assert_eq!(text(&["latch", "gate", "count-down"]).1, "1");
    assert_eq!(text(&["latch", "gate", "count-down"]).1, "0");
    let (status, stderr) = waiter.finish();
    assert!(status.success(), "the count-down opened it: {stderr}");
    assert_eq!(text(&["latch", "gate", "count"]).1, "0");

    let (code, _, stderr) = text(&["run", "--permits", "2", "x", "--", "true"]);
    assert_eq!(code, Some(64), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_a_locks_events_as_they_happen() {
    let server = RedisServer::start();
    let _: String = server.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Egx"]);
    let mut cmd = rlock(&server);
    cmd.args(["watch", "watched", "--json"]);
    let watching = Running::start(cmd);
    server
        .until_subscribers("redisson_lock__channel:{watched}", 1)
        .await;
    let client = server.client().await;
    let lock = client.lock("watched");
    lock.lock().await.unwrap().unlock().await.unwrap();
    let line = tokio::task::spawn_blocking(move || (watching.line(), watching))
        .await
        .unwrap();
    let (line, watching) = line;
    let event: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["name"], "watched");
    assert_eq!(event["event"], "released");
    let _: i64 = server.cmd(&["HSET", "watched", "someone:1", "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", "watched", "50"]);
    let (line, watching) = tokio::task::spawn_blocking(move || (watching.line(), watching))
        .await
        .unwrap();
    let event: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["event"], "expired");

    let pid = nix::unistd::Pid::from_raw(watching.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let (status, stderr) = tokio::task::spawn_blocking(move || watching.finish())
        .await
        .unwrap();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("expiries told"), "{stderr}");
    client.shutdown().await;
}
