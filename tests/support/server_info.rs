//! What the `redis-server` on `PATH` is and can do, found out once per test binary, so tests
//! adapt to it or skip loudly (never pass silently) on a server that cannot run them.
//!
//! `scripts/test.sh --server NAME` puts each server of the matrix first on `PATH`; these checks
//! ask the binary itself rather than trusting that name.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{free_port, RedisServer};

/// The server under test.
#[derive(Debug)]
pub struct ServerInfo {
    /// `Redis` or `Valkey`.
    pub product: String,
    /// `(major, minor, patch)`.
    pub version: (u32, u32, u32),
    /// Sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`, `PUBSUB SHARDNUMSUB`): Redis and Valkey ≥ 7.0.
    pub sharded_pubsub: bool,
    /// `INFO commandstats` counts subcommands apart (`cmdstat_pubsub|numsub`, Redis ≥ 7.0);
    /// older servers count them under the parent command (`cmdstat_pubsub`).
    pub subcommand_stats: bool,
    /// This build can serve TLS (the pip builds of Redis 6.2 and Valkey 8.1 cannot).
    pub tls: bool,
}

impl ServerInfo {
    /// `Redis 7.0.15`.
    pub fn describe(&self) -> String {
        let (a, b, c) = self.version;
        format!("{} {a}.{b}.{c}", self.product)
    }
}

/// The server under test, probed on first use.
pub fn server_info() -> &'static ServerInfo {
    static INFO: OnceLock<ServerInfo> = OnceLock::new();
    INFO.get_or_init(probe)
}

fn probe() -> ServerInfo {
    let out = Command::new("redis-server")
        .arg("--version")
        .output()
        .expect("redis-server must be on PATH (apt-get install -y redis-server)");
    let text = String::from_utf8_lossy(&out.stdout);
    // "Redis server v=7.0.15 sha=..." / "Valkey server v=8.1.8 sha=..."
    let product = text.split_whitespace().next().unwrap_or("?").to_string();
    let version = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .map(parse_version)
        .unwrap_or_else(|| panic!("cannot read the version of redis-server: {text}"));

    // Measured on a running server rather than inferred from the version.
    let server = RedisServer::start();
    let mut con = server.conn();
    let commands: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("SPUBLISH")
        .query(&mut con)
        .unwrap();
    let sharded_pubsub = !matches!(commands.first(), None | Some(redis::Value::Nil));
    let _: redis::Value = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("probe")
        .query(&mut con)
        .unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    let subcommand_stats = stats.contains("cmdstat_pubsub|numsub:");

    ServerInfo {
        product,
        version,
        sharded_pubsub,
        subcommand_stats,
        tls: tls_supported(),
    }
}

fn parse_version(v: &str) -> (u32, u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// Starts the binary with a TLS port and certificate files that do not exist. A TLS build
/// fails on the certificates; a build without TLS fails on the TLS settings themselves. Any
/// other outcome is not understood, and fails the test run rather than skip anything.
fn tls_supported() -> bool {
    let missing = "/nonexistent/redisson-lock-test.pem";
    let mut child = Command::new("redis-server")
        .args(["--port", "0", "--save", "", "--appendonly", "no"])
        .args(["--tls-port", &free_port().to_string()])
        .args(["--tls-cert-file", missing, "--tls-key-file", missing])
        .args(["--tls-ca-cert-file", missing])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-server on PATH");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("redis-server with missing TLS certificates did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Redis 6.x/7.0 without TLS: the tls-* directives do not exist. Redis >= 7.2 and Valkey
    // without TLS: the connection type is missing.
    if text.contains("Bad directive") || text.contains("Failed finding TLS support") {
        return false;
    }
    if text.contains("Failed to configure TLS") || text.contains("Failed to load certificate") {
        return true;
    }
    panic!("cannot tell whether redis-server supports TLS; it said:\n{text}");
}

/// Says loudly that `test` did not run and why, past the test harness's output capture (on
/// the terminal and in the file named by `RLOCK_TEST_SKIPS`, which `scripts/test.sh` prints at
/// the end of a run).
pub fn skip(test: &str, reason: &str) {
    let line = format!(
        "SKIPPED {test}: {reason} (server: {})\n",
        server_info().describe()
    );
    // Direct writes to the stream are not captured by the harness; `eprintln!` would be.
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Ok(path) = std::env::var("RLOCK_TEST_SKIPS") {
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// Whether the long failover runs (a Sentinel master failed over or frozen, the sentinels'
/// follower moved, a cluster master killed) are to run here: on the matrix's default server, or
/// outside `scripts/test.sh`. They test the client's following of the topology, the same on
/// every server; the other servers run the rest of those suites (replica acknowledgement, slot
/// moves, a manual failover: what the server answers).
pub fn runs_failovers(test: &str) -> bool {
    let other_server = std::env::var_os("RLOCK_TEST_SERVER").is_some()
        && std::env::var_os("RLOCK_TEST_FULL").is_none();
    if other_server {
        skip(
            test,
            "Sentinel failovers run on the matrix's default server only",
        );
    }
    !other_server
}

/// Whether the long fault runs (mixed fleets through a failover or a killed master) are to
/// run here: on the matrix's default server, or outside `scripts/test.sh`. The other servers
/// of the matrix run the core suites (CI time); these say so with [`skip`].
pub fn runs_fault_fleets(test: &str) -> bool {
    let other_server = std::env::var_os("RLOCK_TEST_SERVER").is_some()
        && std::env::var_os("RLOCK_TEST_FULL").is_none();
    if other_server {
        skip(test, "fault fleets run on the matrix's default server only");
    }
    !other_server
}
