//! Test support: real `redis-server` processes, one per test, on free loopback ports.
//!
//! Every integration test file starts with `mod support;`. A [`RedisServer`] runs in its own
//! temporary directory and is killed when dropped. Chaos helpers (restart on the same port, kill
//! every client, flush the script cache) live here too, so fault tests read as plain steps.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod cluster;
pub mod fleet;
pub mod interop;
pub mod java;
pub mod monitor;
pub mod proxy;
pub mod sentinel;
pub mod server_info;
pub mod spans;
pub mod tls;

pub use server_info::{server_info, skip};

use redisson_lock::{Config, LockClient, LockGuard};

/// A `redis-server` child process on `127.0.0.1:<port>`, killed on drop.
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    extra_args: Vec<String>,
}

/// Picks a loopback port that is free right now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().unwrap().port()
}

impl RedisServer {
    /// Starts a fresh server with no persistence and waits until it answers `PING`.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` command-line arguments (e.g. `["--requirepass", "x"]`).
    pub fn start_with(extra_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir for redis-server");
        let mut server = RedisServer {
            port: 0,
            dir,
            child: None,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
        };
        // A port picked as free can be taken by someone else before the server binds it: retry.
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn().is_ok() {
                return server;
            }
        }
        panic!("could not start redis-server after 5 attempts");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd
            .spawn()
            .expect("redis-server must be on PATH (apt-get install -y redis-server)");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("redis-server exited early: {status}"));
            }
            if self.ping_raw() {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("redis-server did not answer PING within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn ping_raw(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url_with_auth()) else {
            return false;
        };
        let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut con).is_ok()
    }

    fn url_with_auth(&self) -> String {
        match self
            .extra_args
            .iter()
            .position(|a| a == "--requirepass")
            .and_then(|i| self.extra_args.get(i + 1))
        {
            Some(pass) => format!("redis://:{pass}@127.0.0.1:{}", self.port),
            None => self.url(),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// `redis://127.0.0.1:<port>` (no credentials).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A synchronous redis-rs connection for inspecting and breaking things from the test.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url_with_auth())
            .unwrap()
            .get_connection()
            .expect("connect to test redis")
    }

    /// An async multiplexed redis-rs connection (for tests running inside tokio).
    pub async fn async_conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url_with_auth())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .expect("connect to test redis")
    }

    /// A [`Config`] for this server with a short watchdog timeout, so watchdog tests run fast.
    pub fn config(&self) -> Config {
        Config::from_url(&self.url_with_auth())
            .expect("valid url")
            .with_watchdog_timeout(Duration::from_millis(1500))
            // (Tests count a lock's waiters by its channel's subscribers, which a holder
            // listening for its loss would add to: tests/loss.rs and the fleet turn it on.)
            .with_prompt_loss_detection(false)
    }

    /// A connected [`LockClient`] with [`RedisServer::config`].
    pub async fn client(&self) -> LockClient {
        LockClient::with_config(self.config())
            .await
            .expect("connect LockClient")
    }

    /// A connected [`LockClient`] with [`RedisServer::config`] adjusted by `adjust`.
    pub async fn client_with(&self, adjust: impl FnOnce(Config) -> Config) -> LockClient {
        LockClient::with_config(adjust(self.config()))
            .await
            .expect("connect LockClient")
    }

    /// How many clients are subscribed to `channel` (`PUBSUB NUMSUB`).
    pub fn subscribers(&self, channel: &str) -> i64 {
        let reply: Vec<redis::Value> = self.cmd(&["PUBSUB", "NUMSUB", channel]);
        match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            _ => 0,
        }
    }

    /// Waits (up to 5 s, else panics) until `channel` has at least `n` subscribers: waiters
    /// subscribe before they park, so this is the event "the waiter is waiting".
    pub async fn until_subscribers(&self, channel: &str, n: i64) {
        assert!(
            eventually(Duration::from_secs(5), || self.subscribers(channel) >= n).await,
            "{channel} never reached {n} subscriber(s)"
        );
    }

    /// Runs one command and returns its reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.conn()).expect("test command")
    }

    /// Kills the server process (data is lost: there is no persistence).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("restart failed: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// `CLIENT KILL TYPE normal` and `TYPE pubsub`: drops every client connection.
    pub fn kill_clients(&self) {
        let mut con = self.conn();
        let me: i64 = redis::cmd("CLIENT").arg("ID").query(&mut con).unwrap();
        for kind in ["pubsub", "normal"] {
            let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg(kind)
                .arg("SKIPME")
                .arg("yes")
                .query(&mut con);
        }
        let _ = me;
    }

    /// `SCRIPT FLUSH`: the next EVALSHA of every script answers NOSCRIPT.
    pub fn flush_scripts(&self) {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut self.conn())
            .unwrap();
    }

    /// Calls of one command from `INFO commandstats` (e.g. `"evalsha"`, `"pubsub|numsub"`).
    ///
    /// A server without per-subcommand stats (Redis 6.2) counts `pubsub|numsub` under
    /// `pubsub`: every `PUBSUB` subcommand then counts, the test's own ones too (such as
    /// [`RedisServer::subscribers`]), so compare counts only across steps that send none.
    pub fn command_calls(&self, command: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .unwrap();
        let mut command = command.to_ascii_lowercase();
        if !server_info().subcommand_stats {
            command.truncate(command.find('|').unwrap_or(command.len()));
        }
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The channel Redisson and this crate publish a plain-named lock's unlock on.
pub fn channel(name: &str) -> String {
    assert!(
        !name.contains('{'),
        "use the hash-tag rule by hand for {name}"
    );
    format!("redisson_lock__channel:{{{name}}}")
}

/// A [`LockClient`] that reaches the `redis-server` on `port` only through a fault proxy of
/// its own, its config (the proxy's URL) adjusted by `adjust`. The proxy comes first, so that
/// `let (proxy, client) = ...` drops the client before the proxy cuts its connections.
pub async fn proxied_client_with(
    port: u16,
    adjust: impl FnOnce(Config) -> Config,
) -> (proxy::Proxy, LockClient) {
    let proxy = proxy::Proxy::start(port).await;
    let config = Config::from_url(&proxy.url()).expect("valid url");
    let client = LockClient::with_config(adjust(config)).await.unwrap();
    (proxy, client)
}

/// [`proxied_client_with`] for `server`, with the short watchdog timeout of
/// [`RedisServer::config`].
pub async fn proxied_client(server: &RedisServer) -> (proxy::Proxy, LockClient) {
    let watchdog = server.config().watchdog_timeout();
    proxied_client_with(server.port(), |c| c.with_watchdog_timeout(watchdog)).await
}

/// The repository's root (the library's folder): these fixtures serve the `rlock` crate's
/// tests too, whose manifest is a folder below.
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    (manifest.ancestors())
        .find(|dir| dir.join("interop/versions.txt").is_file())
        .unwrap_or_else(|| panic!("no repository root above {}", manifest.display()))
        .to_path_buf()
}

/// The text of `scripts/lua/<name>.lua`, the script the crate sends.
pub fn script(name: &str) -> String {
    let path = repo_root().join("scripts/lua").join(format!("{name}.lua"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The SHA1 `scripts/lua/<name>.lua` is sent under with `EVALSHA`: the pattern that picks its
/// calls out of the traffic.
pub fn script_sha(name: &str) -> String {
    redis::Script::new(&script(name)).get_hash().to_string()
}

/// Spawns a task blocked in `lock()` on `name`; it yields the guard once acquired.
pub fn spawn_waiter(
    client: &LockClient,
    name: &str,
) -> tokio::task::JoinHandle<redisson_lock::LockGuard> {
    let lock = client.lock(name);
    tokio::spawn(async move { lock.lock().await.expect("waiter acquires") })
}

/// Starts one waiter per owner of `owners` on `name`, each blocked in `lock_with_lease(lease)`;
/// each guard arrives on the returned receiver once acquired, in the order they acquire.
pub fn waiters(
    client: &LockClient,
    name: &str,
    owners: &[redisson_lock::Owner],
    lease: Duration,
) -> tokio::sync::mpsc::UnboundedReceiver<LockGuard> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for &owner in owners {
        let (lock, tx) = (client.lock(name).with_owner(owner), tx.clone());
        tokio::spawn(async move {
            let _ = tx.send(
                lock.lock_with_lease(lease)
                    .await
                    .expect("a waiter acquires"),
            );
        });
    }
    rx
}

/// A waiter's task: its guard and the moment it got it.
pub type Waiting = tokio::task::JoinHandle<redisson_lock::Result<(LockGuard, Instant)>>;

/// Holds `name` in `holder` and parks a task of `waiter` on it; returns once `listeners` (given
/// the lock's channel) counts the waiter subscribed, or panics with `what` after 5 s.
pub async fn held_and_waited(
    holder: &LockClient,
    waiter: &LockClient,
    name: &str,
    mut listeners: impl FnMut(&str) -> i64,
    what: &str,
) -> (LockGuard, Waiting) {
    let held = holder.lock(name).lock().await.unwrap();
    let lock = waiter.lock(name);
    let waiting = tokio::spawn(async move { lock.lock().await.map(|g| (g, Instant::now())) });
    let channel = redisson_lock::names::lock_channel(name);
    let subscribed = eventually(Duration::from_secs(5), || listeners(&channel) == 1).await;
    assert!(subscribed, "{what}");
    (held, waiting)
}

/// Unlocks `held` and waits (up to 10 s, else panics with `what`) for `waiting` to get the
/// lock: its guard, when the unlock was sent, and when the waiter acquired.
pub async fn release_to(
    held: LockGuard,
    waiting: Waiting,
    what: &str,
) -> (LockGuard, Instant, Instant) {
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (guard, acquired) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect(what)
        .unwrap()
        .unwrap();
    (guard, released, acquired)
}

/// [`held_and_waited`], then the release must wake the waiter by message: served within 2 s,
/// far inside the holder's lease (which must be 30 s). Shuts both clients down.
pub async fn handover_by_message(
    holder: LockClient,
    waiter: LockClient,
    name: &str,
    listeners: impl FnMut(&str) -> i64,
    what: &str,
) {
    let (held, waiting) = held_and_waited(&holder, &waiter, name, listeners, what).await;
    let (guard, released, acquired) =
        release_to(held, waiting, "woken well before the 30 s lease").await;
    let took = acquired - released;
    assert!(
        took < Duration::from_secs(2),
        "woken by the message, took {took:?}"
    );
    guard.unlock().await.unwrap();
    holder.shutdown().await;
    waiter.shutdown().await;
}

/// One lock/unlock cycle through `client`, which loads the acquire and unlock scripts: later
/// calls then get no `NOSCRIPT` reply, which would add a re-sent `EVALSHA` to command counts
/// (and a first send that never ran).
pub async fn load_scripts(client: &LockClient) {
    let guard = client.lock("load-scripts").lock().await.expect("lock");
    guard.unlock().await.expect("unlock");
}

/// Polls `check` until it returns `true` or `timeout` passes; returns the final answer.
///
/// For state that lives only in Redis (a TTL running out) there is no event to await: this is
/// the honest way to wait for it, with a bound, instead of a fixed sleep.
pub async fn eventually<F: FnMut() -> bool>(timeout: Duration, mut check: F) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Owners of one client passing a lock around: each holds it for `hold`, unlocks, and
/// contends again only once someone else has acquired it, so every release finds the others
/// waiting (and the releasing owner never barges in ahead of them).
pub struct Relay {
    acquired: tokio::sync::watch::Sender<u64>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Relay {
    /// Starts `owners` owners of `client` relaying `name`.
    pub fn start(client: &LockClient, name: &str, owners: usize, hold: Duration) -> Relay {
        use std::sync::atomic::Ordering;
        let (acquired, _) = tokio::sync::watch::channel(0u64);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks = (0..owners)
            .map(|_| {
                let lock = client.lock(name).with_owner(redisson_lock::Owner::new());
                let (acquired, stop) = (acquired.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut others = acquired.subscribe();
                    while !stop.load(Ordering::SeqCst) {
                        let guard = lock.lock().await.expect("relay lock");
                        let mut mine = 0;
                        acquired.send_modify(|n| {
                            *n += 1;
                            mine = *n;
                        });
                        tokio::time::sleep(hold).await; // the critical section
                        guard.unlock().await.expect("relay unlock");
                        let _ = others
                            .wait_for(|&n| n > mine || stop.load(Ordering::SeqCst))
                            .await;
                    }
                })
            })
            .collect();
        Relay {
            acquired,
            stop,
            tasks,
        }
    }

    /// Acquisitions by the relay so far.
    pub fn acquisitions(&self) -> u64 {
        *self.acquired.borrow()
    }

    /// Stops the relay once the lock is free to come back to it; waits for every owner.
    pub async fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.acquired.send_modify(|_| {}); // wake the owners waiting for a turn
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("relay owner stuck")
                .expect("relay owner failed");
        }
    }
}
