//! `rlock run --metrics-addr`: the library's metrics served to Prometheus while the command
//! waits and runs (and no longer once rlock has exited), scraped over HTTP and parsed as
//! Prometheus text, and an address that cannot be listened on refused before anything is
//! locked.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// A scrape parsed as Prometheus' text exposition format (version 0.0.4): every line a
/// comment (`# HELP`/`# TYPE`) or a sample `name{label="value",...} value`, each sample of a
/// declared family (a histogram's `_bucket`, `_sum` and `_count` included). Panics, with the
/// line, on anything else.
struct Scrape {
    /// `# TYPE` of each family.
    types: HashMap<String, String>,
    /// `(name, labels, value)` of every sample, in order.
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Scrape {
    fn parse(body: &str) -> Scrape {
        let mut types = HashMap::new();
        let mut samples = Vec::new();
        for line in body.lines().filter(|l| !l.trim().is_empty()) {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
                let known = ["counter", "gauge", "histogram", "summary", "untyped"];
                assert!(known.contains(&kind), "unknown type: {line}");
                types.insert(name.to_string(), kind.to_string());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("a sample: series value");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("not a value: {line}")),
            };
            let (name, labels) = match series.split_once('{') {
                None => (series, BTreeMap::new()),
                Some((name, rest)) => (name, labels_of(rest.strip_suffix('}').expect(line), line)),
            };
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
                "not a metric name: {line}"
            );
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|f| {
                    types
                        .get(*f)
                        .is_some_and(|t| t == "histogram" || t == "summary")
                })
                .unwrap_or(name);
            assert!(
                types.contains_key(family),
                "a sample of no declared family: {line}"
            );
            samples.push((name.to_string(), labels, value));
        }
        Scrape { types, samples }
    }

    /// The value of the sample `name` whose labels include every `(key, value)` of `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        (self.samples.iter())
            .find(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|s| s.2)
    }

    /// The `le` bounds and counts of histogram `name`'s buckets with `labels`, in order.
    fn buckets(&self, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
        let bucket = format!("{name}_bucket");
        (self.samples.iter())
            .filter(|(n, l, _)| {
                *n == bucket
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|(_, l, count)| {
                let le = l.get("le").expect("a bucket has le");
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                (le, *count)
            })
            .collect()
    }
}

/// `k="v",k2="v2"` (escapes `\\`, `\"` and `\n` in values), as a map.
fn labels_of(text: &str, line: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once("=\"")
            .unwrap_or_else(|| panic!("bad labels: {line}"));
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => panic!("bad escape: {line}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value: {line}"),
            }
        };
        labels.insert(key.to_string(), value);
        rest = after[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&after[end + 1..]);
    }
    labels
}

/// Scrapes until `ready` holds for a parsed scrape (or PROMPT passes): that scrape.
fn scrape_until(port: u16, what: &str, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + PROMPT;
    loop {
        let body = scrape(port);
        if let Some(scrape) = body.as_deref().map(Scrape::parse) {
            if ready(&scrape) {
                return scrape;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what} never showed; last scrape: {body:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// What an operator scraping `rlock run --metrics-addr` sees, parsed as Prometheus text:
/// while the command waits for a lock held elsewhere, one waiter and when its wait began;
/// once it holds the lock (long before the watchdog's first cycle, 10 s in), the lock held
/// and no waiter; the wait as a histogram with the library's buckets; nothing once rlock
/// has exited.
#[test]
fn a_scrape_shows_a_wait_while_it_waits_and_a_hold_at_once() {
    let server = RedisServer::start();
    // Held by another client (a Redisson field written by hand), for longer than the test.
    let _: i64 = server.cmd(&["HSET", "scraped", "elsewhere:1", "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", "scraped", "60000"]);
    let port = support::free_port();
    let mut cmd = rlock(&server);
    cmd.args(["run", "scraped", "--wait", "60s"])
        .arg("--metrics-addr")
        .arg(format!("127.0.0.1:{port}"))
        .args(["--", "sh", "-c", "echo ready; read go"]);
    let asked = unix_now();
    let mut running = Running::start(cmd);

    let waiting = scrape_until(port, "a waiter", |s| {
        s.value("redisson_lock_waiters", &[]) == Some(1.0)
    });
    let since = waiting
        .value("redisson_lock_oldest_wait_start_seconds", &[])
        .expect("the oldest wait's start");
    assert!(
        since >= asked - 1.0 && since <= unix_now(),
        "the wait began at {since}, rlock was started at {asked}"
    );
    assert_ne!(
        waiting.value("redisson_lock_held", &[]),
        Some(1.0),
        "nothing held yet"
    );
    assert_eq!(waiting.types["redisson_lock_waiters"], "gauge");

    // Freed as Redisson frees it: the waiter is woken by the unlock message.
    let _: i64 = server.cmd(&["DEL", "scraped"]);
    let _: i64 = server.cmd(&["PUBLISH", &support::channel("scraped"), "0"]);
    assert_eq!(running.line(), "ready");
    let held = Scrape::parse(&scrape(port).expect("served while the command runs"));
    assert_eq!(
        held.value("redisson_lock_held", &[]),
        Some(1.0),
        "held, at once"
    );
    assert_eq!(held.value("redisson_lock_waiters", &[]), Some(0.0));
    assert_eq!(
        held.value("redisson_lock_oldest_wait_start_seconds", &[]),
        Some(0.0)
    );
    let acquired = [("kind", "lock"), ("result", "acquired")];
    assert_eq!(
        held.value("redisson_lock_acquires_total", &acquired),
        Some(1.0)
    );
    assert_eq!(
        held.types["redisson_lock_acquire_wait_seconds"],
        "histogram"
    );
    let buckets = held.buckets("redisson_lock_acquire_wait_seconds", &acquired);
    let bounds: Vec<f64> = buckets.iter().map(|b| b.0).collect();
    let mut expected = redisson_lock::observe::LOCK_SECONDS_BUCKETS.to_vec();
    expected.push(f64::INFINITY);
    assert_eq!(bounds, expected, "the library's buckets");
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "cumulative: {buckets:?}"
    );
    assert_eq!(buckets.last().unwrap().1, 1.0, "one wait");
    let waited = held
        .value("redisson_lock_acquire_wait_seconds_sum", &acquired)
        .unwrap();
    let first_holding = buckets.iter().find(|b| b.1 == 1.0).unwrap().0;
    assert!(
        first_holding >= waited,
        "the wait ({waited} s) falls in its bucket"
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
