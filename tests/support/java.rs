//! Driver for the Java interop agent (`interop/`): a real Redisson client in a child JVM.
//!
//! [`agent_jars`] builds the agent once per test process (one jar per Redisson version listed in
//! `interop/versions.txt`); [`JavaAgent::start`] runs one JVM = one `RedissonClient` (one client
//! UUID) and talks to it with JSON lines. Every logical `thread` name is one real Java thread, so
//! Redisson's thread-id ownership is real; the hash field of a Java holder is
//! [`JavaAgent::field`]. Replies and events are awaited with real-time timeouts that panic with a
//! clear message instead of hanging (do not use these helpers under a paused tokio clock).
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::oneshot;

/// How long any single command may take before the test panics.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a JVM may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// JVM flags for a fast start of many small JVMs on a 2-core machine.
const JVM_FLAGS: [&str; 4] = [
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:+UseSerialGC",
    "-Xmx256m",
];

/// The `interop/` directory of this repository.
pub fn interop_dir() -> PathBuf {
    super::repo_root().join("interop")
}

/// `(redisson_version, jar)` for every version in `interop/versions.txt`, building them first
/// (once per test process; `interop/build.sh` is itself a no-op when the jars are fresh).
pub fn agent_jars() -> Vec<(String, PathBuf)> {
    static JARS: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();
    JARS.get_or_init(|| {
        let dir = interop_dir();
        let out = Command::new("bash")
            .arg(dir.join("build.sh"))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run interop/build.sh: {e}"));
        if !out.status.success() {
            panic!(
                "interop/build.sh failed ({}); it needs Java 17+ and Maven (mvn) with access to \
                 Maven Central.\n--- stdout ---\n{}\n--- stderr ---\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let versions =
            std::fs::read_to_string(dir.join("versions.txt")).expect("read interop/versions.txt");
        versions
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|v| {
                let jar = dir.join("target").join(format!("agent-{v}.jar"));
                assert!(
                    jar.is_file(),
                    "build.sh succeeded but {} is missing",
                    jar.display()
                );
                (v.to_string(), jar)
            })
            .collect()
    })
    .clone()
}

/// The agent jar of Redisson `version` (one of `interop/versions.txt`).
pub fn jar(version: &str) -> PathBuf {
    agent_jars()
        .into_iter()
        .find(|(v, _)| v == version)
        .map(|(_, jar)| jar)
        .unwrap_or_else(|| panic!("no agent jar for Redisson {version} (interop/versions.txt)"))
}

#[allow(unused_macros)]
/// One module of tests for one Redisson version: `$module::$scenario` runs
/// `$scenario(&jar)` of the calling file with that version's agent jar.
macro_rules! version_tests {
    ($module:ident, $version:literal, [$($scenario:ident),* $(,)?]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(&$crate::support::java::jar($version)).await;
                }
            )*
        }
    };
}

#[allow(unused_macros)]
/// Every scenario, once per version in `interop/versions.txt` (kept in step with the file by
/// interop.rs's `the_generated_versions_are_the_built_ones`).
macro_rules! scenarios {
    ($($scenario:ident),* $(,)?) => {
        $crate::support::java::version_tests!(redisson_3_23_4, "3.23.4", [$($scenario),*]);
        $crate::support::java::version_tests!(redisson_4_7_0, "4.7.0", [$($scenario),*]);
    };
}

#[allow(unused_imports)]
pub(crate) use {scenarios, version_tests};

/// An exception thrown by the Java side (causes of `ExecutionException` already unwrapped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaError {
    /// Fully qualified class name, e.g. `java.lang.IllegalMonitorStateException`.
    pub class: String,
    /// The exception message (empty when Java's was null).
    pub message: String,
}

impl JavaError {
    /// True for `IllegalMonitorStateException` (unlocking a lock this thread does not hold).
    pub fn is_illegal_monitor_state(&self) -> bool {
        self.class == "java.lang.IllegalMonitorStateException"
    }
}

impl fmt::Display for JavaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class, self.message)
    }
}

impl std::error::Error for JavaError {}

/// The moment a [`JavaAgent::lock_async_report`] acquire completed, by the JVM's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// `System.nanoTime()` (only comparable with other values from the same JVM).
    pub at_nanos: i64,
    /// `System.currentTimeMillis()` (wall clock, comparable across processes).
    pub at_millis: i64,
}

type Waiters = Mutex<HashMap<u64, oneshot::Sender<Value>>>;

#[derive(Default)]
struct Shared {
    replies: Waiters,
    events: Waiters,
    ready: Mutex<Option<oneshot::Sender<Value>>>,
    stderr_tail: Mutex<VecDeque<String>>,
}

/// One JVM running one `RedissonClient`; the process is killed on drop.
pub struct JavaAgent {
    child: Child,
    stdin: Mutex<ChildStdin>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    client_id: String,
    version: String,
    thread_ids: Mutex<HashMap<String, i64>>,
}

impl JavaAgent {
    /// Starts `java -jar <jar> <redis_url> <watchdog_ms>` and waits (up to 60 s) for its ready line.
    pub async fn start(jar: &Path, redis_url: &str, watchdog_ms: u64) -> JavaAgent {
        let mut child = Command::new("java")
            .args(JVM_FLAGS)
            .arg("-jar")
            .arg(jar)
            .arg(redis_url)
            .arg(watchdog_ms.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("`java` (17+) must be on PATH");
        let shared = Arc::new(Shared::default());
        let (ready_tx, ready_rx) = oneshot::channel();
        *shared.ready.lock().unwrap() = Some(ready_tx);
        let label = jar.file_name().unwrap().to_string_lossy().into_owned();
        spawn_stdout_reader(child.stdout.take().unwrap(), shared.clone(), label.clone());
        spawn_stderr_reader(child.stderr.take().unwrap(), shared.clone(), label.clone());
        let stdin = Mutex::new(child.stdin.take().unwrap());
        let mut agent = JavaAgent {
            child,
            stdin,
            shared,
            next_id: AtomicU64::new(1),
            client_id: String::new(),
            version: label,
            thread_ids: Mutex::new(HashMap::new()),
        };
        let ready = match tokio::time::timeout(START_TIMEOUT, ready_rx).await {
            Ok(Ok(v)) => v,
            Ok(Err(_)) => agent.fail("exited before printing its ready line"),
            Err(_) => agent.fail("printed no ready line within 60 s"),
        };
        let text = |k: &str| ready[k].as_str().expect("ready line fields").to_string();
        agent.client_id = text("clientId");
        agent.version = text("version");
        agent
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The client's UUID, the first half of every hash field this JVM writes.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The Redisson version running in this JVM, e.g. `"4.7.0"`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Sends one command and returns its `result` (`Value::Null` when the op has none).
    pub async fn call(
        &self,
        op: &str,
        lock: &str,
        thread: &str,
        extra: Value,
    ) -> Result<Value, JavaError> {
        let mut cmd = json!({ "op": op, "lock": lock, "thread": thread });
        if let Value::Object(extra) = extra {
            cmd.as_object_mut().unwrap().extend(extra);
        }
        let reply = self.request(cmd, None).await;
        reply_result(reply)
    }

    /// `lock()` with the watchdog (no lease).
    pub async fn lock(&self, lock: &str, thread: &str) -> Result<(), JavaError> {
        self.call("lock", lock, thread, json!({})).await.map(drop)
    }

    /// `lock(leaseMs, MILLISECONDS)`: no watchdog, the key expires after the lease.
    pub async fn lock_lease(&self, lock: &str, thread: &str, lease: u64) -> Result<(), JavaError> {
        let extra = json!({ "leaseMs": lease });
        self.call("lock", lock, thread, extra).await.map(drop)
    }

    /// `tryLock(waitMs[, leaseMs], MILLISECONDS)`; `lease_ms: None` uses the watchdog.
    pub async fn try_lock(
        &self,
        lock: &str,
        thread: &str,
        wait_ms: u64,
        lease_ms: Option<u64>,
    ) -> Result<bool, JavaError> {
        let extra = json!({ "waitMs": wait_ms, "leaseMs": lease_ms });
        self.call("tryLock", lock, thread, extra).await.map(as_bool)
    }

    /// `unlock()`; not holding it gives `IllegalMonitorStateException`.
    pub async fn unlock(&self, lock: &str, thread: &str) -> Result<(), JavaError> {
        self.call("unlock", lock, thread, json!({})).await.map(drop)
    }

    /// `forceUnlock()`: true when a lock was deleted.
    pub async fn force_unlock(&self, lock: &str, thread: &str) -> Result<bool, JavaError> {
        self.call("forceUnlock", lock, thread, json!({}))
            .await
            .map(as_bool)
    }

    /// `isLocked()`.
    pub async fn is_locked(&self, lock: &str, thread: &str) -> Result<bool, JavaError> {
        self.call("isLocked", lock, thread, json!({}))
            .await
            .map(as_bool)
    }

    /// `isHeldByCurrentThread()` run on `thread`.
    pub async fn is_held_by_thread(&self, lock: &str, thread: &str) -> Result<bool, JavaError> {
        self.call("isHeldByThread", lock, thread, json!({}))
            .await
            .map(as_bool)
    }

    /// `getHoldCount()` run on `thread`.
    pub async fn hold_count(&self, lock: &str, thread: &str) -> Result<i64, JavaError> {
        self.call("getHoldCount", lock, thread, json!({}))
            .await
            .map(as_i64)
    }

    /// `RFencedLock.lockAndGetToken()`: waits, then the acquisition's token.
    pub async fn fenced_lock(&self, lock: &str, thread: &str) -> Result<i64, JavaError> {
        self.call("fencedLock", lock, thread, json!({}))
            .await
            .map(as_i64)
    }

    /// `RFencedLock.tryLockAndGetToken(waitMs[, leaseMs], MILLISECONDS)`: `None` when not
    /// acquired; `lease_ms: None` uses the watchdog.
    pub async fn fenced_try_lock(
        &self,
        lock: &str,
        thread: &str,
        wait_ms: u64,
        lease_ms: Option<u64>,
    ) -> Result<Option<i64>, JavaError> {
        let extra = json!({ "waitMs": wait_ms, "leaseMs": lease_ms });
        let reply = self.call("fencedTryLock", lock, thread, extra).await?;
        Ok(reply.as_i64())
    }

    /// `RFencedLock.lock()`: the plain acquire, which spends a token too.
    pub async fn fenced_plain_lock(&self, lock: &str, thread: &str) -> Result<(), JavaError> {
        self.call("fencedPlainLock", lock, thread, json!({}))
            .await
            .map(drop)
    }

    /// `RFencedLock.unlock()`.
    pub async fn fenced_unlock(&self, lock: &str, thread: &str) -> Result<(), JavaError> {
        self.call("fencedUnlock", lock, thread, json!({}))
            .await
            .map(drop)
    }

    /// `RFencedLock.getToken()`: the newest token, `None` if none was issued.
    pub async fn token(&self, lock: &str) -> Result<Option<i64>, JavaError> {
        let reply = self.call("getToken", lock, "main", json!({})).await?;
        Ok(reply.as_i64())
    }

    /// `getMultiLock(locks...).tryLock(waitMs, MILLISECONDS)` on `thread`.
    pub async fn multi_try_lock(
        &self,
        locks: &[&str],
        thread: &str,
        wait_ms: u64,
    ) -> Result<bool, JavaError> {
        let extra = json!({ "locks": locks, "waitMs": wait_ms });
        self.call("multiTryLock", "", thread, extra)
            .await
            .map(as_bool)
    }

    /// `getMultiLock(locks...).unlock()` on `thread`.
    pub async fn multi_unlock(&self, locks: &[&str], thread: &str) -> Result<(), JavaError> {
        let extra = json!({ "locks": locks });
        self.call("multiUnlock", "", thread, extra).await.map(drop)
    }

    /// `new RedissonRedLock(lock on each of urls).tryLock(waitMs[, leaseMs], MILLISECONDS)` on
    /// `thread` (one further Redisson client per server URL, made on first use).
    pub async fn red_try_lock(
        &self,
        urls: &[String],
        lock: &str,
        thread: &str,
        wait_ms: u64,
        lease_ms: Option<u64>,
    ) -> Result<bool, JavaError> {
        let extra = json!({ "urls": urls, "waitMs": wait_ms, "leaseMs": lease_ms });
        self.call("redTryLock", lock, thread, extra)
            .await
            .map(as_bool)
    }

    /// `new RedissonRedLock(...).unlock()` on `thread` (Redisson ignores the parts' errors).
    pub async fn red_unlock(
        &self,
        urls: &[String],
        lock: &str,
        thread: &str,
    ) -> Result<(), JavaError> {
        let extra = json!({ "urls": urls });
        self.call("redUnlock", lock, thread, extra).await.map(drop)
    }

    /// An RLock command (`lock`, `tryLock`, `unlock`, `isLocked`, `getHoldCount`,
    /// `forceUnlock`, with `extra` as for the RLock helpers above) on another kind of lock:
    /// one half (`"read"` or `"write"`) of `getReadWriteLock(lock)`, or `"fair"`, `"spin"`,
    /// `"nonReentrant"`, `"nonReentrantFair"` (the last two on Redisson 4.4+ only).
    pub async fn rw(
        &self,
        half: &str,
        op: &str,
        lock: &str,
        thread: &str,
        mut extra: Value,
    ) -> Result<Value, JavaError> {
        extra["half"] = half.into();
        self.call(op, lock, thread, extra).await
    }

    /// `remainTimeToLive()` in ms (-2 absent, -1 no TTL).
    pub async fn remain_ttl(&self, lock: &str, thread: &str) -> Result<i64, JavaError> {
        self.call("remainTimeToLive", lock, thread, json!({}))
            .await
            .map(as_i64)
    }

    /// The Java thread id behind a logical thread name (cached).
    pub async fn thread_id(&self, thread: &str) -> i64 {
        if let Some(id) = self.thread_ids.lock().unwrap().get(thread) {
            return *id;
        }
        let id = self.call("threadId", "", thread, json!({})).await;
        let id = as_i64(id.expect("threadId"));
        self.thread_ids.lock().unwrap().insert(thread.into(), id);
        id
    }

    /// The hash field Redisson writes for `thread`: `"<clientId>:<threadId>"`.
    pub async fn field(&self, thread: &str) -> String {
        format!("{}:{}", self.client_id, self.thread_id(thread).await)
    }

    /// Starts `lock()` (with `lease_ms`, or the watchdog) on `thread` without waiting for it;
    /// the returned handle reports when it is acquired. Later commands for `thread` queue behind it.
    pub async fn lock_async_report(
        &self,
        lock: &str,
        thread: &str,
        lease_ms: Option<u64>,
    ) -> AsyncAcquire {
        self.lock_async_kind(None, lock, thread, lease_ms).await
    }

    /// [`lock_async_report`](JavaAgent::lock_async_report) on another kind of lock (`half` as
    /// for [`rw`](JavaAgent::rw): `"fair"`, `"spin"`, `"read"`, ...).
    pub async fn lock_async_kind(
        &self,
        half: Option<&str>,
        lock: &str,
        thread: &str,
        lease_ms: Option<u64>,
    ) -> AsyncAcquire {
        let mut cmd =
            json!({ "op": "lockAsyncReport", "lock": lock, "thread": thread, "leaseMs": lease_ms });
        if let Some(half) = half {
            cmd["half"] = half.into();
        }
        let (tx, rx) = oneshot::channel();
        let reply = self.request(cmd, Some(tx)).await;
        reply_result(reply)
            .unwrap_or_else(|e| panic!("{}: lockAsyncReport failed: {e}", self.version));
        AsyncAcquire {
            what: format!("Redisson {} lock({lock}) on {thread}", self.version),
            rx: Some(rx),
            got: None,
        }
    }

    /// Asks the JVM to finish queued commands (up to 5 s), close its client and exit.
    pub async fn shutdown(mut self) {
        self.request(json!({ "op": "shutdown" }), None).await;
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn request(&self, mut cmd: Value, event: Option<oneshot::Sender<Value>>) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        cmd["id"] = json!(id);
        let (tx, rx) = oneshot::channel();
        self.shared.replies.lock().unwrap().insert(id, tx);
        if let Some(ev) = event {
            self.shared.events.lock().unwrap().insert(id, ev);
        }
        let written = self
            .stdin
            .lock()
            .unwrap()
            .write_all(format!("{cmd}\n").as_bytes());
        if let Err(e) = written {
            self.fail(&format!("cannot be written to ({e}) while sending {cmd}"));
        }
        match tokio::time::timeout(CALL_TIMEOUT, rx).await {
            Ok(Ok(v)) => v,
            Ok(Err(_)) => self.fail(&format!("exited before answering {cmd}")),
            Err(_) => self.fail(&format!("did not answer {cmd} within {CALL_TIMEOUT:?}")),
        }
    }

    fn fail(&self, what: &str) -> ! {
        std::thread::sleep(Duration::from_millis(200)); // let the stderr reader catch up
        let tail = Vec::from(self.shared.stderr_tail.lock().unwrap().clone());
        panic!(
            "java agent (Redisson {}, pid {}) {what}\n--- last stderr lines ---\n{}",
            self.version,
            self.child.id(),
            tail.join("\n")
        );
    }
}

impl Drop for JavaAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `lock()` started by [`JavaAgent::lock_async_report`].
pub struct AsyncAcquire {
    what: String,
    rx: Option<oneshot::Receiver<Value>>,
    got: Option<Acquired>,
}

impl AsyncAcquire {
    /// Waits (up to 30 s, else panics) until the lock is acquired.
    pub async fn acquired(&mut self) -> Acquired {
        match self.within(CALL_TIMEOUT).await {
            Some(a) => a,
            None => panic!("{} was not acquired within {CALL_TIMEOUT:?}", self.what),
        }
    }

    /// The acquisition if it happens within `timeout`, else `None` (the handle stays usable).
    pub async fn within(&mut self, timeout: Duration) -> Option<Acquired> {
        if let Some(a) = self.got {
            return Some(a);
        }
        let rx = self
            .rx
            .as_mut()
            .expect("receiver present until the event arrives");
        let ev = match tokio::time::timeout(timeout, rx).await {
            Err(_) => return None,
            Ok(Err(_)) => panic!(
                "{}: the java agent exited before the lock was acquired",
                self.what
            ),
            Ok(Ok(ev)) => ev,
        };
        self.rx = None;
        if ev["event"] != "acquired" {
            panic!("{} failed: {}", self.what, ev["error"]);
        }
        let a = Acquired {
            at_nanos: as_i64(ev["atNanos"].clone()),
            at_millis: as_i64(ev["atMillis"].clone()),
        };
        self.got = Some(a);
        Some(a)
    }
}

fn reply_result(reply: Value) -> Result<Value, JavaError> {
    if reply["ok"] == true {
        return Ok(reply.get("result").cloned().unwrap_or(Value::Null));
    }
    let err = &reply["error"];
    Err(JavaError {
        class: err["class"].as_str().unwrap_or("?").to_string(),
        message: err["message"].as_str().unwrap_or("").to_string(),
    })
}

fn as_bool(v: Value) -> bool {
    v.as_bool()
        .unwrap_or_else(|| panic!("expected a boolean from the java agent, got {v}"))
}

fn as_i64(v: Value) -> i64 {
    v.as_i64()
        .unwrap_or_else(|| panic!("expected an integer from the java agent, got {v}"))
}

fn spawn_stdout_reader(out: std::process::ChildStdout, shared: Arc<Shared>, label: String) {
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                eprintln!("[{label} stdout, not JSON] {line}");
                continue;
            };
            let id = v["id"].as_u64();
            let waiter = if v.get("ready").is_some() {
                shared.ready.lock().unwrap().take()
            } else if v.get("event").is_some() {
                id.and_then(|id| shared.events.lock().unwrap().remove(&id))
            } else {
                id.and_then(|id| shared.replies.lock().unwrap().remove(&id))
            };
            match waiter {
                Some(tx) => drop(tx.send(v)),
                None => eprintln!("[{label}] unexpected line from java agent: {line}"),
            }
        }
        // EOF: the JVM is gone. Dropping the senders wakes every waiter with an error.
        shared.replies.lock().unwrap().clear();
        shared.events.lock().unwrap().clear();
        shared.ready.lock().unwrap().take();
    });
}

fn spawn_stderr_reader(err: std::process::ChildStderr, shared: Arc<Shared>, label: String) {
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            eprintln!("[{label} stderr] {line}");
            let mut tail = shared.stderr_tail.lock().unwrap();
            if tail.len() == 40 {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    });
}

/// Scripts the server has run (`EVAL` and `EVALSHA`).
pub fn script_calls(server: &super::RedisServer) -> u64 {
    server.command_calls("eval") + server.command_calls("evalsha")
}

/// Waits until a Java waiter on `channel`, whose `lock()` began when the server had run
/// `before` scripts, is subscribed and has made its attempt after subscribing (its second):
/// only then is it waiting for the message.
///
/// Redisson then still has a window, between reading that attempt's answer and parking on its
/// semaphore: 3.23.4 loses a `0` message there (a permit nobody takes; fixed in 3.28.0,
/// #5761; seen here about once in eight runs), and every version loses a read-write lock's
/// `1` (wake all) there, which releases as many permits as threads are parked at that moment
/// (seen once with 4.7.0, in a full run with this binary's JVMs all busy). No event shows the
/// thread is parked, so the unlock comes a grace period later.
pub async fn until_java_waits(
    _java: &JavaAgent,
    server: &super::RedisServer,
    channel: &str,
    before: u64,
) {
    server.until_subscribers(channel, 1).await;
    assert!(
        super::eventually(Duration::from_secs(5), || script_calls(server)
            >= before + 2)
        .await,
        "the Java waiter never made its second attempt"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
}
