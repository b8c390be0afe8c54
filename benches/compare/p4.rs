//! P4: many locks held under the watchdog. The child process (`--p4-child`) and, in the
//! orchestrator, `run_p4`, which drives a child and samples the server's renewal bursts.

use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use redisson_lock::{names, LockClient, LockGuard};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::floor::{FloorLock, RENEW, WAIT_MS};
use crate::java::Driven;
use crate::redis_util::script_calls;
use crate::scenarios::UNWATCHED;
use crate::stats::{median, Results};
use crate::target::{commandstats, reads_processed, FloorConn, Target};
use crate::Plan;

// ---------------------------------------------------------------------------------------------
// P4 child: hold many locks under the watchdog, report memory; CPU between "start" and "stop"

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// Write-like system calls this process made so far (`syscw` in /proc/self/io): every
/// socket write counts, however many commands it carries.
fn write_syscalls() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("syscw:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Channels the client `client_id` is subscribed to, over every node (`CLIENT LIST`'s `sub=`
/// and `ssub=` of its connections, which carry its id in their names).
fn subscriptions_of(target: &Target, client_id: &str) -> usize {
    let field = |line: &str, name: &str| -> usize {
        line.split(' ')
            .find_map(|f| f.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    target
        .sync_conns()
        .iter_mut()
        .map(|conn| {
            let clients: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query(conn)
                .unwrap_or_default();
            clients
                .lines()
                .filter(|l| l.contains(client_id))
                .map(|l| field(l, "sub=") + field(l, "ssub="))
                .sum::<usize>()
        })
        .sum()
}

pub(crate) fn cpu_time() -> Duration {
    let usage = usage();
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The process's minor page faults so far: memory malloc took from the kernel (again). A
/// renewal cycle's buffers handed back to the kernel at its end are faulted in at the next.
fn minor_faults() -> u64 {
    usage().ru_minflt as u64
}

fn usage() -> libc::rusage {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is always valid.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    }
}

fn emit(value: Value) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}").unwrap();
    out.flush().unwrap();
}

pub(crate) fn p4_child(imp: &str, target: Target, count: usize, watchdog_ms: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let watchdog = Duration::from_millis(watchdog_ms);
        let interval = watchdog / 3;
        // Hold on to whatever keeps the locks held until the process exits.
        let mut keep: Vec<LockGuard> = Vec::new();
        let mut renewer = None;
        let rss0;
        // Time to acquire all the locks, from the first acquire (not the connect or warm-up).
        // (The time to take every lock, not what follows it: the loss watch's start-up.)
        let acquired;
        if imp == "crate" || imp == UNWATCHED {
            let config = target
                .config()
                .with_watchdog_timeout(watchdog)
                .with_prompt_loss_detection(imp == "crate");
            let client = LockClient::with_config(config).await.expect("connect");
            // Warm the allocator and code paths the same way, then take the baseline.
            warm_crate(&client, 1000).await;
            rss0 = rss_bytes();
            let started = Instant::now();
            keep = futures::stream::iter(0..count)
                .map(|i| {
                    let lock = client.lock(format!("bench:p4:{i}"));
                    async move { lock.lock().await.expect("lock") }
                })
                .buffer_unordered(256)
                .collect()
                .await;
            acquired = started.elapsed();
            eprintln!("crate: {count} locks acquired in {acquired:?}");
            assert_eq!(client.renewed_locks(), count);
            if imp == "crate" {
                // The loss watch listens for each hold once it lived 10 ms, and checks it when
                // the subscription is confirmed: wait for all of that, so that its start-up
                // falls in neither the memory taken nor the window (the steady state is what
                // is measured), then a renewal interval for the checks.
                let (target, id) = (target.clone(), client.client_id().to_string());
                let all = tokio::task::spawn_blocking(move || {
                    let give_up = Instant::now() + Duration::from_secs(120);
                    while subscriptions_of(&target, &id) < count {
                        if Instant::now() > give_up {
                            return false;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    true
                });
                if !all.await.unwrap() {
                    eprintln!("crate: the loss watch had not subscribed every hold in 120 s");
                }
                tokio::time::sleep(interval).await;
            }
            std::mem::forget(client);
        } else {
            let conn = FloorConn::open(&target).await;
            let publish = target.publish_command();
            let wait = target.has_replicas();
            let field = "00000000-0000-4000-8000-000000000000:1".to_string();
            rss0 = rss_bytes();
            let started = Instant::now();
            let keys: Vec<String> = futures::stream::iter(0..count)
                .map(|i| {
                    let mut lock = FloorLock::new(
                        conn.clone(),
                        publish,
                        &format!("bench:p4:{i}"),
                        field.clone(),
                        Arc::new(Notify::new()),
                        wait,
                    );
                    lock.lease_ms = watchdog_ms;
                    async move {
                        assert!(lock.try_acquire().await.is_none());
                        lock.key
                    }
                })
                .buffer_unordered(256)
                .collect()
                .await;
            acquired = started.elapsed();
            let mut conn = conn.clone();
            // A script's keys must share a slot on a cluster: batches of one slot's keys there.
            let mut groups: Vec<Vec<String>> = if target.is_cluster() {
                let mut by_slot: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
                for key in keys {
                    by_slot
                        .entry(names::cluster_slot(&key))
                        .or_default()
                        .push(key);
                }
                by_slot.into_values().collect()
            } else {
                vec![keys]
            };
            groups.retain(|g| !g.is_empty());
            renewer = Some(tokio::spawn(async move {
                // The watchdog with no library logic: every interval, every key, batches of
                // 100, one after the other; the first cycle right after the acquisition (which
                // takes seconds at 100k keys on a cluster, most of a 3 s lease).
                let mut next = Instant::now();
                loop {
                    tokio::time::sleep_until(next.into()).await;
                    let cycle = Instant::now();
                    for batch in groups.iter().flat_map(|g| g.chunks(100)) {
                        let mut call = RENEW.prepare_invoke();
                        call.arg(watchdog_ms);
                        for key in batch {
                            call.key(key).arg(&field);
                        }
                        // (A lock that expired anyway shows in the held share at the end.)
                        let _: Vec<i64> = call.invoke_async(&mut conn).await.expect("renew");
                    }
                    // With replicas, one acknowledgement per cycle and master, as the crate
                    // waits once behind each master's renewals (redis-rs's cluster connection
                    // sends WAIT to every master).
                    if wait {
                        let _: i64 = redis::cmd("WAIT")
                            .arg(1)
                            .arg(WAIT_MS)
                            .query_async(&mut conn)
                            .await
                            .expect("WAIT");
                    }
                    next = cycle + interval;
                }
            }));
        }
        let rss1 = rss_bytes();
        emit(json!({
            "phase": "held",
            "acquire_ms": acquired.as_secs_f64() * 1e3,
            "rss_delta_bytes": rss1 as i64 - rss0 as i64,
            "bytes_per_lock": (rss1 as f64 - rss0 as f64) / count as f64,
        }));
        let mut lines =
            tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
        let mut cpu0 = cpu_time();
        let mut faults0 = minor_faults();
        let mut writes0 = write_syscalls();
        let mut t0 = Instant::now();
        while let Ok(Some(line)) = lines.next_line().await {
            match line.trim() {
                "start" => {
                    cpu0 = cpu_time();
                    faults0 = minor_faults();
                    writes0 = write_syscalls();
                    t0 = Instant::now();
                    emit(json!({"phase": "started"}));
                }
                "stop" => {
                    let cpu = cpu_time() - cpu0;
                    emit(json!({
                        "phase": "stopped",
                        "cpu_ms": cpu.as_secs_f64() * 1e3,
                        "minor_faults": minor_faults() - faults0,
                        "write_syscalls": write_syscalls() - writes0,
                        "wall_ms": t0.elapsed().as_secs_f64() * 1e3,
                        "rss_bytes": rss_bytes(),
                    }));
                }
                _ => break,
            }
        }
        drop(renewer);
        // Exit without releasing: the orchestrator flushes the server.
        std::mem::forget(keep);
        std::process::exit(0);
    });
}

async fn warm_crate(client: &LockClient, n: usize) {
    let guards: Vec<LockGuard> = futures::stream::iter(0..n)
        .map(|i| {
            let lock = client.lock(format!("bench:warm:{i}"));
            async move { lock.lock().await.expect("lock") }
        })
        .buffer_unordered(256)
        .collect()
        .await;
    for g in guards {
        g.unlock().await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// P4 orchestrator: drive one child, sample the server's renewal bursts

/// One renewal burst seen from the server: its script calls and how long it lasted.
struct Burst {
    calls: u64,
    duration: Duration,
}

/// Samples evalsha+eval counts (summed over the nodes) every 5 ms for `window`; splits them
/// into bursts separated by at least `gap` of silence. Returns the calls, the complete bursts
/// and the number of samples taken (one `INFO` per node each).
fn sample_bursts(
    conns: &mut [redis::Connection],
    window: Duration,
    gap: Duration,
) -> (u64, Vec<Burst>, u64) {
    let start = Instant::now();
    let first = script_calls(&commandstats(conns));
    let mut samples = 1;
    let mut last = first;
    let mut bursts = Vec::new();
    let mut current: Option<(Instant, Instant, u64)> = None; // first seen, last seen, calls
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        let calls = script_calls(&commandstats(conns));
        samples += 1;
        let delta = calls - last;
        last = calls;
        if delta > 0 {
            current = Some(match current {
                Some((s, _, c)) => (s, now, c + delta),
                None => (now, now, delta),
            });
        } else if let Some((s, e, c)) = current {
            if now - e >= gap {
                bursts.push((s, e, c));
                current = None;
            }
        }
    }
    let total = last - first;
    // The first and the last bursts may be cut by the window: keep complete ones only.
    let complete: Vec<Burst> = bursts
        .iter()
        .filter(|(s, _, _)| *s - start > Duration::from_millis(10))
        .map(|(s, e, c)| Burst {
            calls: *c,
            duration: *e - *s + Duration::from_millis(5),
        })
        .collect();
    (total, complete, samples)
}

pub(crate) fn run_p4(
    plan: &Plan,
    results: &mut Results,
    imp: &str,
    cmd: Command,
    target: &Target,
    count: usize,
    windows: u32,
) {
    let tag = format!("p4.{count}");
    eprintln!("P4 {count} locks: {imp}");
    target.flushall();
    let mut child = Driven::start(cmd);
    let Some(held) = child.expect("held", Duration::from_secs(600)) else {
        results.note(&format!("{tag}.calls"), imp, "did not finish acquiring");
        child.finish();
        target.flushall();
        return;
    };
    let interval = Duration::from_millis(plan.p4_watchdog_ms / 3);
    results.add(
        &format!("{tag}.acquire_s"),
        imp,
        held["acquire_ms"].as_f64().unwrap() / 1e3,
    );
    if let Some(b) = held["bytes_per_lock"].as_f64() {
        results.add(&format!("{tag}.bytes_per_lock"), imp, b);
    }
    if let Some(b) = held["heap_bytes_per_lock"].as_f64() {
        results.add(&format!("{tag}.heap_bytes_per_lock"), imp, b);
    }
    // Settle: let renewal reach its steady state after the acquisition burst.
    std::thread::sleep(interval * 2);
    // Measured windows of `p4_cycles` cycles each, one value apiece: the run-to-run spread of
    // a single window was up to 2.4x on this machine, so the figure is their median.
    let cycles = plan.p4_cycles as f64;
    let mut held_now = 0;
    for _ in 0..windows {
        child.send("start");
        child.expect("started", Duration::from_secs(30));
        let window = interval * plan.p4_cycles;
        let mut conns = target.sync_conns();
        let gap = (interval / 20).max(Duration::from_millis(20));
        let reads0 = reads_processed(&mut conns);
        let (calls, bursts, samples) = sample_bursts(&mut conns, window, gap);
        let reads1 = reads_processed(&mut conns);
        child.send("stop");
        let stopped = child
            .expect("stopped", Duration::from_secs(30))
            .unwrap_or(Value::Null);
        held_now = target.dbsize();
        results.add(&format!("{tag}.calls"), imp, calls as f64 / cycles);
        if let Some(cpu) = stopped["cpu_ms"].as_f64() {
            results.add(&format!("{tag}.cpu_ms"), imp, cpu / cycles);
        }
        if let Some(faults) = stopped["minor_faults"].as_f64() {
            results.add(&format!("{tag}.faults"), imp, faults / cycles);
        }
        if let Some(writes) = stopped["write_syscalls"].as_f64() {
            results.add(&format!("{tag}.writes"), imp, writes / cycles);
        }
        // Read events the servers handled for the client, less the sampler's own `INFO`s
        // (one read each), per node per cycle.
        let client_reads: u64 = reads0
            .iter()
            .zip(&reads1)
            .map(|(a, b)| (b - a).saturating_sub(samples + 1))
            .sum();
        results.add(
            &format!("{tag}.reads_per_node"),
            imp,
            client_reads as f64 / conns.len() as f64 / cycles,
        );
        // Distinct bursts, each about a cycle's worth of calls: a batched cycle we can time.
        let per_cycle = calls as f64 / cycles;
        let ms: Vec<f64> = bursts
            .iter()
            .filter(|b| (b.calls as f64) > 0.8 * per_cycle && (b.calls as f64) < 1.2 * per_cycle)
            .map(|b| b.duration.as_secs_f64() * 1e3)
            .collect();
        if !ms.is_empty() {
            results.add(&format!("{tag}.cycle_ms"), imp, median(&ms));
        }
    }
    child.finish();
    target.flushall();
    results.add(
        &format!("{tag}.held_pct"),
        imp,
        held_now as f64 * 100.0 / count as f64,
    );
    if results.reps(&format!("{tag}.cycle_ms"), imp) == 0 {
        results.note(&format!("{tag}.cycle_ms"), imp, "no distinct cycle");
    }
}
