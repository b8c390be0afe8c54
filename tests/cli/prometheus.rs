//! `rlock run --metrics-addr`: the library's metrics served to Prometheus while the command
//! runs (and no longer once rlock has exited), and an address that cannot be listened on
//! refused before anything is locked.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::support::{self, RedisServer};
use super::{assert_one_error_line, output, rlock, Running, PROMPT};

/// The body of `GET /metrics` from `127.0.0.1:port`, or `None` while nothing answers there.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(PROMPT)).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    Some(body.to_string())
}

/// The value of the sample named exactly `name` whose labels include all of `labels`
/// (each `key="value"`), in Prometheus' text format.
fn sample(body: &str, name: &str, labels: &[&str]) -> Option<f64> {
    body.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let label_set = series.strip_prefix(name)?;
        let ours = label_set.is_empty() || label_set.starts_with('{');
        let matches = ours && labels.iter().all(|l| label_set.contains(l));
        matches.then(|| value.parse().ok()).flatten()
    })
}

#[test]
fn metrics_addr_serves_the_library_metrics_while_the_command_runs() {
    let server = RedisServer::start();
    let port = support::free_port();
    let mut cmd = rlock(&server);
    // A 1.5 s watchdog timeout: a renewal cycle, which samples the held gauge, every 500 ms.
    cmd.args(["--watchdog-timeout", "1500ms", "run", "scraped"])
        .arg("--metrics-addr")
        .arg(format!("127.0.0.1:{port}"))
        .args(["--", "sh", "-c", "echo ready; read go"]);
    let mut running = Running::start(cmd);
    assert_eq!(running.line(), "ready");

    // Scraped until the first renewal cycle has set the gauge (or PROMPT passes).
    let deadline = Instant::now() + PROMPT;
    let body = loop {
        let body = scrape(port);
        if let Some(body) = &body {
            if sample(body, "redisson_lock_held", &[]) == Some(1.0) {
                break body.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "the held gauge never read 1; last scrape: {body:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let acquired = ["kind=\"lock\"", "result=\"acquired\""];
    assert_eq!(
        sample(&body, "redisson_lock_acquires_total", &acquired),
        Some(1.0),
        "{body}"
    );
    // Served from before the lock was asked for: its wait is counted too.
    assert_eq!(
        sample(&body, "redisson_lock_acquire_wait_seconds_count", &acquired),
        Some(1.0),
        "{body}"
    );

    running.go();
    let (status, stderr) = running.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "scraped"]), 0);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the metrics are still served after rlock exited"
    );
}

#[test]
fn a_metrics_addr_in_use_is_refused_before_anything_is_locked() {
    let server = RedisServer::start();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut cmd = rlock(&server);
    cmd.args(["run", "unscraped", "--metrics-addr", &addr, "--", "touch"])
        .arg(&marker);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(69), "{stderr}");
    assert_one_error_line(&stderr);
    assert!(stderr.contains(&addr), "{stderr}");
    assert!(!marker.exists(), "the command ran");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "unscraped"]), 0);
    // Not even asked for: no lock script reached the server.
    let scripts = server.command_calls("evalsha") + server.command_calls("eval");
    assert_eq!(scripts, 0, "a lock was asked for");

    // Not an address at all: a usage error, as a bad duration is.
    let mut cmd = rlock(&server);
    cmd.args([
        "run",
        "unscraped",
        "--metrics-addr",
        "localhost",
        "--",
        "true",
    ]);
    let (status, _, stderr) = output(cmd);
    assert_eq!(status.code(), Some(64), "{stderr}");
    assert_one_error_line(&stderr);
    drop(taken);
}
