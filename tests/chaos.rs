//! A bounded chaos run: several processes, each with several owners, contend for one hot lock
//! (2 s watchdog lease) guarding a non-atomic counter (`GET`, a pause, `SET`), while faults hit
//! them at random: every connection of a process cut (through its fault proxy), the reply to
//! an acquire lost, `CLIENT KILL` of normal and of pub/sub connections, a process frozen with
//! SIGSTOP past the lease, 500 ms delays.
//!
//! Every owner writes a journal (when each call started and returned, when it held the lock,
//! whether it was told the lock was lost); the parent samples the lock hash meanwhile. At the
//! end it asserts:
//! - no hold count above what an owner took (each takes one hold at a time: a count of 2 is a
//!   double-counted acquire);
//! - no hold without a guard for longer than one lease (a sample shows an owner's field while
//!   that owner is in no call and holds no guard);
//! - no two holders overlapping in time where neither was told (`is_lost()` before a write,
//!   or an unlock that failed);
//! - no increment of the counter lost outside those overlaps (a holder frozen between its check
//!   and its write undoes the increments made meanwhile: only fencing stops that);
//! - nothing left in Redis but the counter.
//!
//! `RLOCK_CHAOS_SECS` (default 20) sets how long faults are made; `RLOCK_CHAOS_SEED` replays
//! a run. The workers are this test binary run again with `RLOCK_CHAOS_WORKER` set: see
//! [`chaos_worker`], a no-op in a normal run.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use redis::AsyncCommands;
use redisson_lock::{LockClient, Owner};
use support::RedisServer;

const PROCESSES: usize = 3;
const OWNERS: usize = 4;
const LEASE: Duration = Duration::from_secs(2);
const WAIT: Duration = Duration::from_secs(10);
const LOCK: &str = "chaos-lock";
const COUNTER: &str = "chaos-counter";
/// Connections the fault-maker must not kill: the workers' counter connections and its own.
const SPARED: [&str; 2] = ["chaos-counter", "chaos-parent"];

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A small xorshift generator: the faults are random, but a seed replays them.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from + 1))
    }
}

// ---------------------------------------------------------------- the worker process

/// Runs only when the parent starts this binary as a worker; a no-op otherwise.
#[test]
fn chaos_worker() {
    let Ok(journal) = std::env::var("RLOCK_CHAOS_WORKER") else {
        return;
    };
    let port: u16 = std::env::var("RLOCK_CHAOS_PORT").unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let lines = runtime.block_on(worker(port));
    std::fs::write(journal, lines.join("\n")).unwrap();
}

async fn worker(port: u16) -> Vec<String> {
    use tokio::io::AsyncBufReadExt;

    let (proxy, client) =
        support::proxied_client_with(port, |c| c.with_watchdog_timeout(LEASE)).await;
    // Straight to Redis, never killed, and no response timeout: a reply read after SIGCONT
    // must not count as lost (the counter is what the lock guards, not a fault target).
    let counter = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .unwrap();
    let mut named = counter.clone();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(SPARED[0])
        .query_async(&mut named)
        .await
        .unwrap();

    let journal = Arc::new(Mutex::new(Vec::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let owners: Vec<_> = (0..OWNERS)
        .map(|i| {
            let (client, counter, journal, stop) = (
                client.clone(),
                counter.clone(),
                journal.clone(),
                stop.clone(),
            );
            tokio::spawn(owner_loop(
                client,
                counter,
                journal,
                stop,
                now_ns() ^ i as u64,
            ))
        })
        .collect();
    println!("READY");

    let sha = support::script_sha("acquire");
    let mut commands = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = commands.next_line().await {
        match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["cut"] => proxy.cut_all(),
            ["lose-acquire"] => proxy.cut_after_reply(&[&sha, LOCK], 1),
            ["delay", ms] => proxy.set_delay(Duration::from_millis(ms.parse().unwrap())),
            ["stop"] => break,
            _ => panic!("unknown command {line:?}"),
        }
    }
    stop.cancel();
    for owner in owners {
        owner.await.unwrap();
    }
    client.shutdown().await;
    let lines = std::mem::take(&mut *journal.lock());
    lines
}

/// One owner: take the lock, increment the counter the unsafe way, unlock, think, repeat.
///
/// Journal lines (times in ns since the epoch):
/// `S <field> <call> <acquired> <unlocking> <returned> <told> <wrote>` for a section,
/// `T <field> <call> <returned>` for a timed-out wait, `E <field> <call> <returned> <error>`.
async fn owner_loop(
    client: LockClient,
    mut counter: redis::aio::MultiplexedConnection,
    journal: Arc<Mutex<Vec<String>>>,
    stop: tokio_util::sync::CancellationToken,
    seed: u64,
) {
    let mut rng = Rng(seed | 1);
    let owner = Owner::new();
    let field = format!("{}:{}", client.client_id(), owner.id());
    let lock = client.lock(LOCK).with_owner(owner);
    while !stop.is_cancelled() {
        let call = now_ns();
        let line = match lock.try_lock_for(WAIT).await {
            Ok(Some(guard)) => {
                let acquired = now_ns();
                // Code that asks before it writes does not write once told.
                let mut told = guard.is_lost();
                let mut wrote = false;
                if !told {
                    let value: Option<i64> = counter.get(COUNTER).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    told = guard.is_lost();
                    if !told {
                        let _: () = counter.set(COUNTER, value.unwrap_or(0) + 1).await.unwrap();
                        wrote = true;
                    }
                }
                let unlocking = now_ns();
                told |= guard.is_lost();
                let unlocked = guard.unlock().await;
                told |= unlocked.is_err();
                let returned = now_ns();
                format!("S {field} {call} {acquired} {unlocking} {returned} {told} {wrote}")
            }
            Ok(None) => format!("T {field} {call} {}", now_ns()),
            Err(err) => format!("E {field} {call} {} {}", now_ns(), kind_of(&err)),
        };
        journal.lock().push(line);
        tokio::time::sleep(rng.millis(0, 5)).await;
    }
}

fn kind_of(err: &redisson_lock::Error) -> &'static str {
    if err.is_connection() {
        "connection"
    } else if err.is_lock_lost() {
        "lost"
    } else {
        "other"
    }
}

// ---------------------------------------------------------------- the parent

struct Worker {
    child: Child,
    stdin: std::process::ChildStdin,
    journal: tempfile::NamedTempFile,
}

impl Worker {
    fn start(port: u16) -> Worker {
        let journal = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "chaos_worker",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("RLOCK_CHAOS_WORKER", journal.path())
            .env("RLOCK_CHAOS_PORT", port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // libtest prints `test chaos_worker ... ` on the same line first.
        while !line.trim_end().ends_with("READY") {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "worker died");
        }
        // Keep draining, so the worker never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Worker {
            child,
            stdin,
            journal,
        }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

#[derive(Default, Debug)]
struct Faults(HashMap<&'static str, usize>);

impl Faults {
    fn count(&mut self, kind: &'static str) {
        *self.0.entry(kind).or_default() += 1;
    }
    fn total(&self) -> usize {
        self.0.values().sum()
    }
}

/// Kills every normal connection but the spared ones.
async fn kill_normal(conn: &mut redis::aio::MultiplexedConnection) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("normal")
        .query_async(conn)
        .await
        .unwrap();
    let mut killed = 0;
    for line in list.lines() {
        let field = |name: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                .unwrap_or("")
                .to_string()
        };
        if SPARED.contains(&field("name").as_str()) {
            continue;
        }
        let killed_now: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(field("id"))
            .query_async(conn)
            .await
            .unwrap_or(0);
        killed += killed_now as usize;
    }
    killed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_double_count_no_phantom_hold_no_untold_overlap_under_random_faults() {
    let secs: u64 = std::env::var("RLOCK_CHAOS_SECS")
        .map(|s| s.parse().unwrap())
        .unwrap_or(20);
    let seed: u64 = std::env::var("RLOCK_CHAOS_SEED")
        .map(|s| s.parse().unwrap())
        .unwrap_or_else(|_| now_ns() | 1);
    eprintln!("chaos: {secs} s of faults, RLOCK_CHAOS_SEED={seed}");
    let mut rng = Rng(seed);

    let server = RedisServer::start();
    let mut control = server.async_conn().await;
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(SPARED[1])
        .query_async(&mut control)
        .await
        .unwrap();
    let mut workers: Vec<Worker> = (0..PROCESSES)
        .map(|_| Worker::start(server.port()))
        .collect();

    // Sample the lock hash all along: (sent, answered, fields and counts).
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampling = tokio_util::sync::CancellationToken::new();
    let sampler = {
        let (samples, sampling) = (samples.clone(), sampling.clone());
        let mut conn = control.clone();
        tokio::spawn(async move {
            while !sampling.is_cancelled() {
                let sent = now_ns();
                let fields: HashMap<String, i64> = conn.hgetall(LOCK).await.unwrap();
                samples.lock().push((sent, now_ns(), fields));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };

    let mut faults = Faults::default();
    let end = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut frozen: Option<(usize, tokio::time::Instant)> = None;
    let mut delayed: Vec<(usize, tokio::time::Instant)> = Vec::new();
    while tokio::time::Instant::now() < end {
        tokio::time::sleep(rng.millis(200, 900)).await;
        let now = tokio::time::Instant::now();
        if let Some((w, until)) = frozen {
            if now >= until {
                workers[w].signal(libc::SIGCONT);
                frozen = None;
            }
        }
        for (w, _) in delayed.iter().filter(|(_, until)| now >= *until) {
            workers[*w].send("delay 0");
        }
        delayed.retain(|(_, until)| now < *until);

        let w = rng.below(PROCESSES as u64) as usize;
        if frozen.is_some_and(|(f, _)| f == w) {
            continue; // its stdin would only queue up
        }
        match rng.below(6) {
            0 => {
                workers[w].send("cut");
                faults.count("cut all of a process's connections");
            }
            1 => {
                workers[w].send("lose-acquire");
                faults.count("lose the reply to an acquire");
            }
            2 => {
                kill_normal(&mut control).await;
                faults.count("CLIENT KILL normal");
            }
            3 => {
                let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query_async(&mut control)
                    .await;
                faults.count("CLIENT KILL pubsub");
            }
            4 if frozen.is_none() => {
                workers[w].signal(libc::SIGSTOP);
                frozen = Some((w, now + rng.millis(2500, 4000)));
                faults.count("SIGSTOP past the lease");
            }
            _ => {
                workers[w].send("delay 500");
                delayed.push((w, now + rng.millis(1000, 2000)));
                faults.count("500 ms delay");
            }
        }
    }

    // Heal everything, let the owners finish their current call, stop the workers.
    if let Some((w, _)) = frozen {
        workers[w].signal(libc::SIGCONT);
    }
    for worker in &mut workers {
        worker.send("delay 0");
        worker.send("stop");
    }
    let mut journal = Vec::new();
    for mut worker in workers {
        let status = tokio::task::spawn_blocking(move || {
            let status = worker.child.wait().unwrap();
            (
                status,
                std::fs::read_to_string(worker.journal.path()).unwrap(),
            )
        })
        .await
        .unwrap();
        assert!(status.0.success(), "a worker failed: {:?}", status.0);
        journal.extend(status.1.lines().map(Record::parse));
    }
    sampling.cancel();
    sampler.await.unwrap();
    let samples = std::mem::take(&mut *samples.lock());

    let report = Report::new(&journal, &samples);
    eprintln!("chaos: faults {} {:?}", faults.total(), faults.0);
    eprintln!("chaos: {report:#?}");

    let mut left: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut control)
        .await
        .unwrap();
    left.retain(|k| k != COUNTER);
    let counter: i64 = control.get(COUNTER).await.unwrap_or(0);

    assert!(report.sections > 0, "the run made progress");
    assert!(faults.total() > 0, "faults were made");
    assert_eq!(report.max_hold_count, 1, "a hold was counted twice");
    assert!(
        report.longest_unguarded_hold <= LEASE + Duration::from_millis(500),
        "a hold outlived its guard by more than a lease: {:?}",
        report.longest_unguarded_hold
    );
    assert_eq!(
        report.overlaps_neither_told, 0,
        "two holders overlapped and neither was told"
    );
    // Increments are lost only to overlaps, each of which has a told holder (asserted above).
    // Not one per told section: a holder frozen between its last `is_lost()` and its `SET`
    // writes a stale count after it resumes, undoing every increment made while it was frozen
    // (seen in CI, `RLOCK_CHAOS_SEED=1796650618793700335`: one told section, 280 sections
    // overlapping it, 280 increments lost). Only a fencing token (`FencedLock`) stops that.
    let lost_increments = report.writes as i64 - counter;
    let overlapping = report.overlapping_sections_told + report.overlapping_sections_untold;
    eprintln!("chaos: counter {counter}, {lost_increments} increments lost to told overlaps");
    assert!(
        (0..=overlapping as i64).contains(&lost_increments),
        "the counter ({counter}) lost writes outside overlaps with a told holder ({} writes)",
        report.writes
    );
    let mut with_ttl = Vec::new();
    for key in &left {
        let pttl: i64 = control.pttl(key).await.unwrap_or(-3);
        with_ttl.push(format!("{key} (PTTL {pttl} ms)"));
    }
    assert!(left.is_empty(), "left in Redis: {with_ttl:?}");
}

/// One journal line (see [`owner_loop`]).
#[derive(Debug)]
enum Record {
    Section {
        field: String,
        call: u64,
        acquired: u64,
        unlocking: u64,
        returned: u64,
        told: bool,
        wrote: bool,
    },
    Timeout {
        field: String,
        call: u64,
        returned: u64,
    },
    Error {
        field: String,
        call: u64,
        returned: u64,
    },
}

impl Record {
    fn parse(line: &str) -> Record {
        let p: Vec<&str> = line.split(' ').collect();
        let n = |i: usize| p[i].parse::<u64>().unwrap();
        let field = p[1].to_string();
        match p[0] {
            "S" => Record::Section {
                field,
                call: n(2),
                acquired: n(3),
                unlocking: n(4),
                returned: n(5),
                told: p[6] == "true",
                wrote: p[7] == "true",
            },
            "T" => Record::Timeout {
                field,
                call: n(2),
                returned: n(3),
            },
            _ => Record::Error {
                field,
                call: n(2),
                returned: n(3),
            },
        }
    }

    /// The owner and the span in which it may hold the lock (from its call to its return).
    fn span(&self) -> (&str, u64, u64) {
        match self {
            Record::Section {
                field,
                call,
                returned,
                ..
            }
            | Record::Timeout {
                field,
                call,
                returned,
            }
            | Record::Error {
                field,
                call,
                returned,
            } => (field, *call, *returned),
        }
    }
}

type Sample = (u64, u64, HashMap<String, i64>);

#[derive(Debug, Default)]
struct Report {
    sections: usize,
    writes: usize,
    timeouts: usize,
    errors: usize,
    told_sections: usize,
    max_hold_count: i64,
    unguarded_samples: usize,
    longest_unguarded_hold: Duration,
    /// Sections that overlapped another owner's, whose holder was told (a stale holder) or
    /// not (the holder that rightly had the lock).
    overlapping_sections_told: usize,
    overlapping_sections_untold: usize,
    /// Pairs of overlapping sections where neither holder was told: must be 0.
    overlaps_neither_told: usize,
}

impl Report {
    fn new(journal: &[Record], samples: &[Sample]) -> Report {
        let mut r = Report::default();
        let mut spans: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
        let mut holds = Vec::new();
        for record in journal {
            let (field, from, to) = record.span();
            spans.entry(field).or_default().push((from, to));
            match record {
                Record::Section {
                    field,
                    acquired,
                    unlocking,
                    told,
                    wrote,
                    ..
                } => {
                    r.sections += 1;
                    r.writes += *wrote as usize;
                    r.told_sections += *told as usize;
                    holds.push((*acquired, *unlocking, field.as_str(), *told, *wrote));
                }
                Record::Timeout { .. } => r.timeouts += 1,
                Record::Error { .. } => r.errors += 1,
            }
        }

        // A field seen in a sample while its owner was in no call and held no guard.
        let mut unguarded_since: HashMap<&str, u64> = HashMap::new();
        for (sent, answered, fields) in samples {
            r.max_hold_count = r
                .max_hold_count
                .max(fields.values().copied().max().unwrap_or(0));
            for (field, _) in fields.iter().filter(|(_, &n)| n > 1) {
                eprintln!("chaos: count >1 for {field} at {sent}..{answered}; its records near:");
                for rec in journal.iter().filter(|rec| {
                    let (f, from, to) = rec.span();
                    f == field && to + 3_000_000_000 > *sent && from < answered + 3_000_000_000
                }) {
                    eprintln!("  {rec:?}");
                }
            }
            unguarded_since.retain(|f, _| fields.contains_key(*f));
            for field in fields.keys() {
                let guarded = spans
                    .get(field.as_str())
                    .is_some_and(|s| s.iter().any(|&(from, to)| from <= *answered && *sent <= to));
                if guarded {
                    unguarded_since.remove(field.as_str());
                    continue;
                }
                r.unguarded_samples += 1;
                let since = *unguarded_since.entry(field.as_str()).or_insert(*sent);
                r.longest_unguarded_hold = r
                    .longest_unguarded_hold
                    .max(Duration::from_nanos(answered - since));
            }
        }

        // Holders overlapping in time, by who was told.
        holds.sort_by_key(|h| h.0);
        let mut overlapping = vec![false; holds.len()];
        for (i, a) in holds.iter().enumerate() {
            for (j, b) in holds.iter().enumerate().skip(i + 1) {
                if b.0 >= a.1 {
                    break;
                }
                if a.2 == b.2 {
                    continue;
                }
                (overlapping[i], overlapping[j]) = (true, true);
                if !a.3 && !b.3 {
                    r.overlaps_neither_told += 1;
                }
            }
        }
        for (hold, _) in holds.iter().zip(&overlapping).filter(|(_, &o)| o) {
            match hold.3 {
                true => r.overlapping_sections_told += 1,
                false => r.overlapping_sections_untold += 1,
            }
        }
        r
    }
}
