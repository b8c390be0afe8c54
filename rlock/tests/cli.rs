//! The `rlock` binary against real `redis-server`s: `run` (exit status, holding, giving up,
//! losing the lock, signals), `status --json` on every layout, `unlock --force`, the demo, and
//! the error exit codes.
//!
//! Commands run under `rlock run` talk to the test through their stdout (`echo ready`, read
//! line by line as events) and wait on their stdin (`read go`), so nothing here sleeps to let
//! something happen.

// The library's test fixtures (real servers, the cluster and sentinel groups, the Java agent).
#[path = "../../tests/support/mod.rs"]
mod support;

// `run --metrics-addr`, in a file of its own (using this file's helpers).
#[path = "cli/prometheus.rs"]
mod prometheus;
// `top`, in a file of its own.
#[path = "cli/top.rs"]
mod top;
// `run --kind` and `unlock --force` per kind.
#[path = "cli/kinds.rs"]
mod kinds;
// On a cluster and through Sentinel.
#[path = "cli/topologies.rs"]
mod topologies;
// `top` beside a real Redisson.
#[path = "cli/redisson.rs"]
mod redisson;
// Fencing shown at work: a frozen holder's late write rejected by its token.
#[path = "cli/fencing.rs"]
mod fencing;
// The synchronizers: `run --kind permit`, `permits`, `latch`, and what the lock commands say
// of them.
#[path = "cli/synchronizers.rs"]
mod synchronizers;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redisson_lock::Owner;
use serde_json::Value;
use support::{eventually, RedisServer};

const RLOCK: &str = env!("CARGO_BIN_EXE_rlock");
/// Bound for anything that should happen promptly; only reached when a test fails.
const PROMPT: Duration = Duration::from_secs(10);

/// `rlock` with `REDIS_URL` pointing at `server`.
fn rlock(server: &RedisServer) -> Command {
    let mut cmd = Command::new(RLOCK);
    cmd.env("REDIS_URL", server.url());
    cmd
}

/// A running `rlock run`: its stdout arrives line by line, its stdin is ours.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Running {
    fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rlock");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (tx, stderr) = mpsc::channel();
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        Running {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    /// The next line the command printed (panics if none comes promptly).
    fn line(&self) -> String {
        self.lines
            .recv_timeout(PROMPT)
            .expect("a line from the command")
    }

    /// Lets a command blocked in `read go` continue.
    fn go(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for `rlock` to exit (panics, killing it, if it does not within `PROMPT`);
    /// returns its status and stderr.
    fn finish(mut self) -> (ExitStatus, String) {
        self.wait_exit()
    }

    /// As [`Running::finish`], keeping our end of the command's stdin open.
    fn wait_exit(&mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + PROMPT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("rlock did not exit within {PROMPT:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stderr = self.stderr.recv_timeout(PROMPT).unwrap_or_default();
        (status, stderr)
    }
}

impl Drop for Running {
    /// A failed test must not leave `rlock` running (its command then gets SIGTERM too).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether process `pid` is gone, or a zombie waiting to be reaped (it runs no more code),
/// within 5 s: a signalled process needs a moment to die (longer on a loaded machine).
fn is_dead(pid: &str) -> bool {
    let gone = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Runs `rlock` to completion with stdin closed, returning (status, stdout, stderr); panics
/// (killing it) if it takes longer than `PROMPT`.
fn output(cmd: Command) -> (ExitStatus, String, String) {
    output_within(cmd, PROMPT)
}

/// As [`output`], with an explicit bound.
fn output_within(mut cmd: Command, limit: Duration) -> (ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rlock");
    let collect = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            let _ = tx.send(text);
        });
        rx
    };
    let stdout = collect(Box::new(child.stdout.take().unwrap()));
    let stderr = collect(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rlock {:?} did not exit within {limit:?}", cmd.get_args());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (
        status,
        stdout.recv_timeout(PROMPT).unwrap_or_default(),
        stderr.recv_timeout(PROMPT).unwrap_or_default(),
    )
}

/// `rlock status <name> --json`, parsed.
fn status_json(server: &RedisServer, name: &str) -> Value {
    let mut cmd = rlock(server);
    cmd.args(["status", name, "--json"]);
    let (status, stdout, stderr) = output(cmd);
    assert!(status.success(), "status failed: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Asserts the stderr of a failure is exactly one `rlock:` line.
fn assert_one_error_line(stderr: &str) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr:?}");
    assert!(lines[0].starts_with("rlock: "), "{stderr:?}");
}

#[test]
fn run_holds_the_lock_while_the_command_runs_then_exits_with_its_status() {
    let server = RedisServer::start();
    let mut cmd = rlock(&server);
    cmd.args(["run", "job", "--", "sh", "-c"])
        .arg(r#"echo "ready $RLOCK_OWNER_FIELD"; read go; exit 7"#);
    let mut running = Running::start(cmd);

    let line = running.line();
    let field = line.strip_prefix("ready ").expect("ready line");
    // While the command runs, the hash holds exactly its owner, once, with the watchdog lease.
    let hash: Vec<(String, String)> = server.cmd(&["HGETALL", "job"]);
    assert_eq!(hash, [(field.to_string(), "1".to_string())]);
    let ttl: i64 = server.cmd(&["PTTL", "job"]);
    assert!(ttl > 0 && ttl <= 30_000, "watchdog lease: {ttl}");

    running.go();
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(7), "{stderr}");
    // Released on exit, not left to expire: the lease was 30 s.
    assert_eq!(server.cmd::<i64>(&["EXISTS", "job"]), 0);
}

#[test]
fn a_command_killed_by_a_signal_gives_128_plus_the_signal() {
    let server = RedisServer::start();
    let mut cmd = rlock(&server);
    cmd.args(["run", "sig", "--", "sh", "-c", "kill -9 $$"]);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(137), "{stderr}");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "sig"]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_zero_on_a_held_lock_gives_up_at_once_and_never_runs_the_command() {
    let server = RedisServer::start();
    let client = server.client().await;
    let owner = Owner::new();
    let guard = client.lock("busy").with_owner(owner).lock().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");

    let mut cmd = rlock(&server);
    cmd.args(["run", "busy", "--wait", "0", "--", "touch"])
        .arg(&marker);
    let (status, _, stderr) = tokio::task::spawn_blocking(move || output(cmd))
        .await
        .unwrap();
    assert_eq!(status.code(), Some(73), "{stderr}");
    assert_one_error_line(&stderr);
    assert!(!marker.exists(), "the command ran without the lock");
    assert_eq!(client.lock("busy").hold_count_of(owner).await.unwrap(), 1);
    guard.unlock().await.unwrap();
}

#[test]
fn a_bounded_wait_gives_up_after_the_wait() {
    let server = RedisServer::start();
    let holder = Running::start({
        let mut cmd = rlock(&server);
        cmd.args(["run", "slow", "--", "sh", "-c", "echo ready; read go"]);
        cmd
    });
    assert_eq!(holder.line(), "ready");
    let started = Instant::now();
    let mut cmd = rlock(&server);
    cmd.args(["run", "slow", "--wait", "300ms", "--", "true"]);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(73), "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    drop(holder); // closing its stdin ends `read`; the holder exits
}

#[test]
fn a_lost_lock_stops_the_command_and_everything_it_started() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let finished = dir.path().join("finished");
    let mut cmd = rlock(&server);
    cmd.args(["--watchdog-timeout", "1500ms", "run", "doomed", "--"])
        .args(["sh", "-c"])
        .arg(format!(
            r#"sleep 60 & echo "ready $$ $!"; wait; touch '{}'"#,
            finished.display()
        ));
    let running = Running::start(cmd);
    let line = running.line();
    let pids: Vec<&str> = line.split_whitespace().skip(1).collect();
    assert_eq!(pids.len(), 2, "{line}");

    let _: i64 = server.cmd(&["DEL", "doomed"]);
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(74), "{stderr}");
    // Checked first: a survivor would hold the stderr pipe open, so stderr would read empty.
    assert!(is_dead(pids[0]), "the command survived the lost lock");
    assert!(
        is_dead(pids[1]),
        "a process it started survived the lost lock"
    );
    assert_one_error_line(&stderr);
    assert!(stderr.contains("lost"), "{stderr}");
    assert!(!finished.exists(), "the command finished without its lock");
}

#[test]
fn a_command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let finished = dir.path().join("finished");
    let mut cmd = rlock(&server);
    cmd.args([
        "--watchdog-timeout",
        "1500ms",
        "run",
        "stubborn",
        "--grace",
        "300ms",
    ])
    .args(["--", "sh", "-c"])
    .arg(format!(
        r#"trap '' TERM; echo ready; read go; touch '{}'"#,
        finished.display()
    ));
    let mut running = Running::start(cmd);
    assert_eq!(running.line(), "ready");
    let _: i64 = server.cmd(&["DEL", "stubborn"]);
    // Our end of its stdin stays open: only a signal can end `read go`.
    let (status, stderr) = running.wait_exit();
    assert_eq!(status.code(), Some(74), "{stderr}");
    assert_one_error_line(&stderr);
    assert!(stderr.contains("SIGKILL"), "{stderr}");
    assert!(!finished.exists(), "the command outlived its lock");
}

#[test]
fn a_fixed_lease_running_out_stops_the_command() {
    let server = RedisServer::start();
    let mut cmd = rlock(&server);
    cmd.args(["run", "short", "--lease", "500ms", "--", "sh", "-c"])
        .arg("echo ready; read go");
    let running = Running::start(cmd);
    assert_eq!(running.line(), "ready");
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(74), "{stderr}");
}

#[test]
fn sigterm_to_rlock_is_forwarded_and_the_lock_released_when_the_command_exits() {
    let server = RedisServer::start();
    let mut cmd = rlock(&server);
    cmd.args(["run", "fwd", "--", "sh", "-c"])
        .arg(r#"trap 'echo got-term; exit 3' TERM; sleep 60 & echo "ready $!"; wait"#);
    let running = Running::start(cmd);
    let line = running.line();
    let sleeper = line.strip_prefix("ready ").expect("ready line").to_string();
    // `$!` is known once the shell has forked, before the child has exec'd `sleep`: a signal
    // landing in between is taken by the copy of the shell's trap and lost at the exec.
    let comm = format!("/proc/{sleeper}/comm");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(&comm).map_or(true, |c| c.trim() != "sleep") {
        assert!(
            Instant::now() < deadline,
            "the background sleep never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = nix::unistd::Pid::from_raw(running.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(running.line(), "got-term");
    let (status, stderr) = running.finish();
    // rlock survived the signal, and exits with the command's own status.
    assert_eq!(status.code(), Some(3), "{stderr}");
    // The signal went to the command's whole process group.
    assert!(
        is_dead(&sleeper),
        "the process the command started missed the signal"
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "fwd"]), 0);
}

#[test]
fn status_json_of_a_free_lock() {
    let server = RedisServer::start();
    let json = status_json(&server, "nothing");
    assert_eq!(json["name"], "nothing");
    assert_eq!(json["key"], "nothing");
    assert_eq!(json["state"], "free");
    assert_eq!(json["kind"], Value::Null);
    assert_eq!(json["redis_type"], "none");
    assert_eq!(json["owners"], serde_json::json!([]));
    assert_eq!(json["remaining_lease_ms"], Value::Null);
    assert_eq!(json["fencing_token"], Value::Null);
    assert_eq!(json["queue"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_of_a_reentrant_hold() {
    let server = RedisServer::start();
    let client = server.client().await;
    let owner = Owner::new();
    let lock = client.lock("orders").with_owner(owner);
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();

    let json = tokio::task::spawn_blocking({
        let url = server.url();
        move || {
            let mut cmd = Command::new(RLOCK);
            cmd.env("REDIS_URL", url)
                .args(["status", "orders", "--json"]);
            let (status, stdout, stderr) = output(cmd);
            assert!(status.success(), "{stderr}");
            serde_json::from_str::<Value>(&stdout).unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(json["state"], "held");
    assert_eq!(json["kind"], "lock");
    assert_eq!(json["redis_type"], "hash");
    let owners = json["owners"].as_array().unwrap();
    assert_eq!(owners.len(), 1, "{json}");
    assert_eq!(owners[0]["field"], outer.owner_field());
    assert_eq!(owners[0]["client_id"], client.client_id());
    assert_eq!(owners[0]["owner_id"], owner.id());
    assert_eq!(owners[0]["holds"], 2);
    assert_eq!(owners[0]["mode"], Value::Null);
    let lease = json["remaining_lease_ms"].as_i64().unwrap();
    assert!(lease > 0 && lease <= 1500, "{lease}");
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

#[test]
fn status_json_of_a_key_that_is_not_a_lock() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "plain", "text"]);
    let json = status_json(&server, "plain");
    assert_eq!(json["state"], "not_a_lock");
    assert_eq!(json["redis_type"], "string");
    assert_eq!(json["kind"], Value::Null);
    assert_eq!(json["owners"], serde_json::json!([]));
}

#[test]
fn status_json_of_a_read_write_lock_written_by_hand() {
    let server = RedisServer::start();
    let uuid = "0b7c9f7e-1111-4222-8333-444455556666";
    let writer = format!("{uuid}:3:write");
    let _: i64 = server.cmd(&["HSET", "rw", "mode", "write", &writer, "2"]);
    let _: i64 = server.cmd(&["PEXPIRE", "rw", "30000"]);
    let json = status_json(&server, "rw");
    assert_eq!(json["state"], "held");
    assert_eq!(json["kind"], "read_write");
    assert_eq!(json["rw_mode"], "write");
    let owners = json["owners"].as_array().unwrap();
    assert_eq!(owners.len(), 1, "the mode field is not an owner: {json}");
    assert_eq!(owners[0]["field"], writer);
    assert_eq!(owners[0]["client_id"], uuid);
    assert_eq!(owners[0]["owner_id"], 3);
    assert_eq!(owners[0]["holds"], 2);
    assert_eq!(owners[0]["mode"], "write");
}

#[test]
fn status_json_of_fenced_and_fair_locks_written_by_hand() {
    let server = RedisServer::start();
    let holder = "0b7c9f7e-1111-4222-8333-444455556666:1";
    let _: i64 = server.cmd(&["HSET", "fenced", holder, "1"]);
    let _: () = server.cmd(&["SET", "redisson_lock_token:{fenced}", "42"]);
    let json = status_json(&server, "fenced");
    assert_eq!(json["kind"], "fenced");
    assert_eq!(json["fencing_token"], 42);

    let waiter = "11111111-2222-4333-8444-555555555555:9";
    let _: i64 = server.cmd(&["HSET", "fair", holder, "1"]);
    let _: i64 = server.cmd(&["RPUSH", "redisson_lock_queue:{fair}", waiter]);
    let _: i64 = server.cmd(&[
        "ZADD",
        "redisson_lock_timeout:{fair}",
        "1780000000000",
        waiter,
    ]);
    let json = status_json(&server, "fair");
    assert_eq!(json["kind"], "fair");
    assert_eq!(
        json["queue"],
        serde_json::json!([{
            "field": waiter,
            "client_id": "11111111-2222-4333-8444-555555555555",
            "owner_id": 9,
            "deadline_ms": 1780000000000i64,
        }])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_a_held_lock_and_wakes_its_waiter() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    // A long fixed lease: the waiter can only get in early if the unlock message wakes it.
    let _held = holder
        .lock("stuck")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let waiting = tokio::spawn(async move { waiter.lock("stuck").lock().await });
    let subscribed = eventually(PROMPT, || {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("redisson_lock__channel:{stuck}")
            .query(&mut server.conn())
            .unwrap();
        n == 1
    })
    .await;
    assert!(subscribed, "the waiter never subscribed");

    let mut cmd = rlock(&server);
    cmd.args(["unlock", "--force", "stuck", "--yes"]);
    let (status, stdout, stderr) = tokio::task::spawn_blocking(move || output(cmd))
        .await
        .unwrap();
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("force-unlocked"), "{stdout}");
    let guard = tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("the waiter was not woken")
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_needs_force_and_a_confirmation() {
    let server = RedisServer::start();
    let client = server.client().await;
    let _held = client.lock("kept").lock().await.unwrap();
    for args in [
        &["unlock", "kept", "--yes"][..],   // no --force
        &["unlock", "--force", "kept"][..], // no terminal to confirm on, no --yes
    ] {
        let mut cmd = rlock(&server);
        cmd.args(args);
        let (status, _, stderr) = tokio::task::spawn_blocking(move || output(cmd))
            .await
            .unwrap();
        assert_eq!(status.code(), Some(64), "{args:?}: {stderr}");
        assert_one_error_line(&stderr);
        assert_eq!(server.cmd::<i64>(&["EXISTS", "kept"]), 1, "{args:?}");
    }
}

#[test]
fn demo_tells_the_story_and_stops_its_server() {
    let started = Instant::now();
    let mut cmd = Command::new(RLOCK);
    cmd.arg("demo").env_remove("REDIS_URL");
    let (status, stdout, stderr) = output_within(cmd, Duration::from_secs(30));
    assert!(status.success(), "demo failed: {stderr}\n{stdout}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the demo is too slow"
    );
    for event in [
        "alice acquired orders",
        "bob asks for orders",
        "woken by the unlock message",
        "hold count 2",
        "hold count 1",
        "orders is free",
        "renewed by the watchdog",
        "DEL invoices",
        "lost signal fired",
        "heard the DEL",
        "stopped redis-server",
    ] {
        assert!(stdout.contains(event), "missing `{event}` in:\n{stdout}");
    }
    assert!(!stdout.contains("unexpected"), "{stdout}");
    // Every line of the story, scene titles aside, starts with its elapsed time: `[  1.234s] `.
    for line in stdout
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("== "))
    {
        let elapsed = line
            .strip_prefix('[')
            .and_then(|rest| rest.split_once("s] "))
            .and_then(|(t, _)| t.trim().parse::<f64>().ok());
        assert!(elapsed.is_some(), "no elapsed time on `{line}`");
    }
    let port: u16 = stdout
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .expect("the demo prints its port");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the demo's redis-server is still running"
    );
}

#[test]
fn usage_and_connection_errors_have_their_exit_codes() {
    let server = RedisServer::start();
    let mut cmd = rlock(&server);
    cmd.args(["run", "x", "--wait", "soon", "--", "true"]);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(64), "{stderr}");
    assert_one_error_line(&stderr);

    let port = support::free_port();
    let mut cmd = Command::new(RLOCK);
    cmd.env("REDIS_URL", format!("redis://:s3cret@127.0.0.1:{port}"))
        .args(["run", "x", "--", "true"]);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(75), "{stderr}");
    assert_one_error_line(&stderr);
    assert!(
        !stderr.contains("s3cret"),
        "the password was printed: {stderr}"
    );

    let mut cmd = rlock(&server);
    cmd.args(["run", "x", "--", "/definitely/not/a/command"]);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(127), "{stderr}");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "x"]),
        0,
        "released after the failed start"
    );
}

/// `--tls-ca` makes a `rediss://` server with a private CA usable from every subcommand; without
/// it the certificate is refused (exit 75, one line), never trusted blindly.
#[cfg(feature = "tls")]
#[test]
fn every_subcommand_reaches_a_tls_server_through_its_private_ca() {
    let Some(tls) = support::tls::TlsServer::start_or_skip(
        "every_subcommand_reaches_a_tls_server_through_its_private_ca",
    ) else {
        return;
    };
    let ca = tls.ca_path();
    let rlock_tls = |with_ca: bool, args: &[&str]| {
        let mut cmd = Command::new(RLOCK);
        cmd.env("REDIS_URL", tls.url());
        if with_ca {
            cmd.arg("--tls-ca").arg(&ca);
        }
        cmd.args(args);
        output(cmd)
    };

    for args in [
        &["status", "vault"][..],
        &["run", "vault", "--", "true"],
        &["unlock", "vault", "--force", "--yes"],
    ] {
        let (status, _, stderr) = rlock_tls(false, args);
        assert_eq!(status.code(), Some(75), "{args:?} without the CA: {stderr}");
        assert_one_error_line(&stderr);
    }

    let (status, stdout, stderr) = rlock_tls(true, &["run", "vault", "--", "echo", "inside"]);
    assert!(status.success(), "run: {stderr}");
    assert_eq!(stdout, "inside\n");
    let (status, stdout, stderr) = rlock_tls(true, &["status", "vault", "--json"]);
    assert!(status.success(), "status: {stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["state"], "free", "released when the command ended");

    tls.server.cmd::<i64>(&["HSET", "vault", "someone:1", "1"]);
    let (status, _, stderr) = rlock_tls(true, &["unlock", "vault", "--force", "--yes"]);
    assert!(status.success(), "unlock: {stderr}");
    assert_eq!(tls.server.cmd::<i64>(&["EXISTS", "vault"]), 0);

    let (status, _, stderr) = rlock_tls(false, &["--tls-ca", "/no/such/ca.pem", "status", "vault"]);
    assert_eq!(status.code(), Some(64), "{stderr}");
    assert_one_error_line(&stderr);
}

/// `--warn-after`: a command still running after it is reported on stderr, once; a command
/// done sooner is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_after_reports_a_long_hold_once() {
    let server = RedisServer::start();
    let mut slow = rlock(&server);
    slow.args(["run", "warned", "--warn-after", "200ms", "--", "sleep", "1"]);
    let mut quick = rlock(&server);
    quick.args(["run", "unwarned", "--warn-after", "5s", "--", "true"]);
    let ((slow, _, slow_err), (quick, _, quick_err)) =
        tokio::task::spawn_blocking(move || (output(slow), output(quick)))
            .await
            .unwrap();
    assert_eq!(slow.code(), Some(0), "{slow_err}");
    assert_eq!(
        slow_err.matches("held for more than 200ms").count(),
        1,
        "{slow_err}"
    );
    assert_eq!(quick.code(), Some(0), "{quick_err}");
    assert!(!quick_err.contains("held for more than"), "{quick_err}");
}

/// `rlock run` listens for its lock's loss: a forced unlock (here `rlock unlock --force`, as a
/// Java `forceUnlock()` would do) stops the command at once, though the next renewal of the
/// default 30 s watchdog is 10 s away (it took about 8 s before).
#[test]
fn a_forced_unlock_stops_the_command_at_once() {
    let server = RedisServer::start();
    let mut cmd = rlock(&server);
    cmd.args(["run", "forced", "--", "sh", "-c", "echo ready; sleep 60"]);
    let running = Running::start(cmd);
    assert_eq!(running.line(), "ready");
    // (The holder's subscription is up: a message now reaches it.)
    let subscribed = std::time::Instant::now();
    while server.subscribers(&support::channel("forced")) < 1 {
        assert!(subscribed.elapsed() < PROMPT, "rlock run never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
    let forced = std::time::Instant::now();
    let mut unlock = rlock(&server);
    unlock.args(["unlock", "forced", "--force", "--yes"]);
    let (status, _, stderr) = output(unlock);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let (status, stderr) = running.finish();
    let took = forced.elapsed();
    assert_eq!(status.code(), Some(74), "{stderr}");
    assert!(took < Duration::from_secs(3), "stopped after {took:?}");
    eprintln!("forced unlock to rlock run's exit (SIGTERM to the command included): {took:?}");
}
