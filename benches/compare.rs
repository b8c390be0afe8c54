//! Side-by-side benchmarks on one `redis-server`, in one run (issue #6):
//!
//! - **crate**: this library (`LockClient`, `Lock`, guards, watchdog, pub/sub hub);
//! - **floor**: the same Lua (`scripts/lua/*.lua`) sent raw over one redis-rs multiplexed
//!   connection, with no library logic: what any client speaking this protocol must pay;
//! - **Redisson** 4.7.0 and 3.23.4, via `interop.Bench` in the interop jars.
//!
//! Absolute times on a shared machine are noise; the ratios from one run are the result.
//! `scripts/bench.sh [--quick]` builds everything, starts a private server and writes
//! `docs/BENCHMARKS.md`. This binary is the orchestrator; direct use:
//!
//! ```text
//! compare [--redis redis://127.0.0.1:PORT] [--cluster URL,URL,...] [--cluster-replicas URL,URL,...]
//!         [--sentinel NAME@URL,URL,...] [--quick] [--java-jar VERSION=PATH]... [--only p1,p2,p3,p4,kinds]
//! compare --p4-child crate|floor (--redis URL | --cluster URLS | --cluster-replicas URLS
//!         | --sentinel NAME@URLS) --locks N --watchdog-ms MS   (internal: one P4 run)
//! ```
//!
//! Every scenario runs against each target given, in this order, a table each: `--redis` a
//! standalone server; `--cluster` a cluster's masters (no replicas); `--cluster-replicas` the
//! masters of a cluster with a replica per master; `--sentinel` the master's name and the
//! sentinels of a group with one replica. With replicas, every client waits for them after each
//! lock write (the crate's and Redisson's defaults; the floor sends the same `WAIT`).
//!
//! Per-rep figures go to stderr as they come; the markdown table goes to stdout.
//!
//! This file holds the plan and `main` (arguments, the order of the scenarios); the rest is in
//! `benches/compare/`: `stats`, `redis_util`, `target` (standalone or cluster), `floor`,
//! `scenarios` (P1-P3), `p1` (its repetitions in turn), `p4`, `java`, `report`.

#[path = "compare/floor.rs"]
mod floor;
#[path = "compare/java.rs"]
mod java;
#[path = "compare/p1.rs"]
mod p1;
#[path = "compare/p4.rs"]
mod p4;
#[path = "compare/redis_util.rs"]
mod redis_util;
#[path = "compare/report.rs"]
mod report;
#[path = "compare/scenarios.rs"]
mod scenarios;
#[path = "compare/stats.rs"]
mod stats;
#[path = "compare/target.rs"]
mod target;
#[path = "compare/wire.rs"]
mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use java::{java_command, run_java, Driven, Java};
use p4::{p4_child, run_p4};
use report::table;
use scenarios::{
    in_turns, p1_of, p2, p2_paired, p3, p3_of, record_p3, round_trip, P3Rep, KINDS, P3_KEY, PAIRED,
    PLAIN, UNWATCHED,
};
use stats::Results;
use target::Target;

// ---------------------------------------------------------------------------------------------
// Plan

struct Plan {
    quick: bool,
    reps: usize,
    p1_warmup: usize,
    p1_iters: usize,
    /// One JVM per Redisson version runs P1-P3 after one warm-up this long (JIT).
    java_warmup: Duration,
    p2_owners: usize,
    p2_warmup: Duration,
    p2_secs: Duration,
    p3_ns: Vec<usize>,
    p3_handoffs: usize,
    p3_warmup: usize,
    p3_hold_ms: u64,
    p3_reps: usize,
    p3_count_handoffs: usize,
    p4_counts: Vec<usize>,
    p4_watchdog_ms: u64,
    /// Renewal cycles per measured window of P4, and windows per child run (each a value of
    /// its own: the medians and the run-to-run spread come from them).
    p4_cycles: u32,
    p4_windows: u32,
    /// The crate with loss detection on and off at P4's first count: child runs of one window
    /// each, per side. More than `p4_windows`: one process's client CPU a cycle differed from
    /// the next's by up to 1.9x at the same settings (2026-12-07), so three a side could not
    /// tell the 10 % the loss-detection target allows.
    p4_loss_runs: u32,
    /// The other kinds' P3: waiters, and hand-offs per repetition.
    kinds_n: usize,
    kinds_handoffs: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                quick,
                reps: 2,
                p1_warmup: 500,
                p1_iters: 2_000,
                java_warmup: Duration::from_secs(5),
                p2_owners: 64,
                p2_warmup: Duration::from_millis(300),
                p2_secs: Duration::from_secs(1),
                p3_ns: vec![1, 8, 64],
                p3_handoffs: 200,
                p3_warmup: 20,
                p3_hold_ms: 2,
                p3_reps: 1,
                p3_count_handoffs: 150,
                p4_counts: vec![10_000],
                p4_watchdog_ms: 3_000,
                p4_cycles: 2,
                p4_windows: 3,
                p4_loss_runs: 3,
                kinds_n: 8,
                kinds_handoffs: 100,
            }
        } else {
            Plan {
                quick,
                reps: 5,
                p1_warmup: 3_000,
                p1_iters: 20_000,
                java_warmup: Duration::from_secs(15),
                p2_owners: 64,
                p2_warmup: Duration::from_secs(1),
                p2_secs: Duration::from_secs(3),
                p3_ns: vec![1, 8, 64],
                p3_handoffs: 1_000,
                p3_warmup: 50,
                p3_hold_ms: 2,
                p3_reps: 3,
                p3_count_handoffs: 300,
                p4_counts: vec![10_000, 100_000],
                p4_watchdog_ms: 3_000,
                p4_cycles: 5,
                p4_windows: 3,
                p4_loss_runs: 6,
                kinds_n: 8,
                kinds_handoffs: 300,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Orchestrator

fn main() {
    let mut args = std::env::args().skip(1);
    let mut url = None;
    let mut cluster: Option<Vec<String>> = None;
    let mut cluster_replicas: Option<Vec<String>> = None;
    let mut sentinel: Option<String> = None;
    let mut quick = false;
    let mut unix: Option<String> = None;
    let mut jars = Vec::new();
    let mut only: Option<Vec<String>> = None;
    let mut child: Option<String> = None;
    let mut locks = 0usize;
    let mut watchdog_ms = 3_000u64;
    let mut unknown = Vec::new();
    let mut rust_impls: Vec<String> = vec!["crate".into(), "floor".into()];
    let urls = |list: Option<String>| -> Vec<String> {
        list.expect("URL,URL,...")
            .split(',')
            .map(|s| s.trim().to_string())
            .collect()
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--redis" => url = args.next(),
            "--redis-unix" => unix = args.next(),
            "--cluster" => cluster = Some(urls(args.next())),
            "--cluster-replicas" => cluster_replicas = Some(urls(args.next())),
            "--sentinel" => sentinel = args.next(),
            "--quick" => quick = true,
            "--bench" => {} // passed by `cargo bench`
            "--java-jar" => {
                let spec = args.next().expect("--java-jar VERSION=PATH");
                let (v, p) = spec.split_once('=').expect("--java-jar VERSION=PATH");
                jars.push(Java {
                    version: v.to_string(),
                    jar: PathBuf::from(p),
                });
            }
            "--only" => {
                only = Some(
                    args.next()
                        .unwrap()
                        .split(',')
                        .map(|s| s.trim().to_lowercase())
                        .collect(),
                )
            }
            "--rust" => {
                rust_impls = args
                    .next()
                    .unwrap()
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect()
            }
            "--p4-child" => child = args.next(),
            "--locks" => locks = args.next().unwrap().parse().unwrap(),
            "--watchdog-ms" => watchdog_ms = args.next().unwrap().parse().unwrap(),
            other => unknown.push(other.to_string()),
        }
    }
    let targets: Vec<Target> = [
        url.map(Target::Single),
        cluster.map(|masters| Target::Cluster {
            masters,
            replicas: false,
        }),
        cluster_replicas.map(|masters| Target::Cluster {
            masters,
            replicas: true,
        }),
        sentinel.as_deref().map(Target::sentinel),
    ]
    .into_iter()
    .flatten()
    .collect();
    if targets.is_empty() {
        // `cargo test --all-targets` runs this binary too: benchmarks are not tests, and
        // without a server there is nothing to measure.
        eprintln!("compare: no --redis URL, nothing to do (run scripts/bench.sh [--quick])");
        return;
    }
    if !unknown.is_empty() {
        eprintln!("compare: unknown arguments {unknown:?}");
        eprintln!("usage: compare [--redis URL [--redis-unix PATH]] [--cluster URL,URL,...] [--cluster-replicas URL,URL,...] [--sentinel NAME@URL,URL,...] [--quick] [--java-jar VERSION=PATH]... [--only p1,p2,p3,p4,kinds] [--rust crate,floor]");
        std::process::exit(2);
    }
    if let Some(imp) = child {
        let [target] = <[Target; 1]>::try_from(targets).expect("a P4 child runs one target");
        p4_child(&imp, target, locks, watchdog_ms);
        return;
    }
    let plan = Plan::new(quick);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rust: Vec<&str> = rust_impls.iter().map(|s| s.as_str()).collect();
    let javas: Vec<String> = jars.iter().map(java_name).collect();
    let t0 = Instant::now();
    let mut out = String::new();
    for (i, target) in targets.iter().enumerate() {
        let socket = matches!(target, Target::Single(_))
            .then_some(unix.as_deref())
            .flatten();
        let results = run(&plan, &rt, target, socket, &rust, &jars, only.as_deref());
        // (A heading even for one target: scripts/bench.sh runs one at a time.)
        let gap = if i == 0 { "" } else { "\n" };
        out.push_str(&format!("{gap}### {}\n\n", target.title()));
        out.push_str(&table(&plan, &results, &javas, target));
    }
    eprintln!("all scenarios done in {:.0} s", t0.elapsed().as_secs_f64());
    print!("{out}");
}

/// Records one P1 repetition of `imp`, `(p50 µs, p99 µs, client CPU µs per pair)`, under
/// `prefix` (`p1`, or `p1unix` over the server's Unix socket).
fn record_p1(results: &mut Results, prefix: &str, imp: &str, (p50, p99, cpu): (f64, f64, f64)) {
    results.add(&format!("{prefix}.p50_us"), imp, p50);
    results.add(&format!("{prefix}.p99_us"), imp, p99);
    results.add(&format!("{prefix}.cpu_us"), imp, cpu);
}

fn java_name(j: &Java) -> String {
    format!("redisson-{}", j.version)
}

/// Every scenario the plan asks for, against one target.
fn run(
    plan: &Plan,
    rt: &tokio::runtime::Runtime,
    target: &Target,
    socket: Option<&str>,
    rust: &[&str],
    jars: &[Java],
    only: Option<&[String]>,
) -> Results {
    let wants = |s: &str| only.is_none_or(|o| o.iter().any(|x| x == s));
    let mut results = Results::default();
    // The round trip is measured to the node holding P3's key (any node for P1/P2).
    let url = target.node_of(P3_KEY);
    let java_url = target.java_url(P3_KEY);
    eprintln!("== against {target:?}");

    {
        let (p50, p99) = in_task(rt, round_trip(url.clone(), 3000));
        results.add("rtt.p50_us", "floor", p50);
        results.add("rtt.p99_us", "floor", p99);
    }

    // Redisson serves P1/P2 repetitions from one warmed-up JVM per version, alternating with
    // the Rust ones: a slow drift of the shared machine then hits every implementation alike.
    let mut servers: Vec<(String, Driven)> = Vec::new();
    if wants("p1") || wants("p2") {
        for j in jars {
            eprintln!(
                "P1/P2: starting {} (JVM warm-up {:?})",
                java_name(j),
                plan.java_warmup
            );
            let args = [
                "serve".to_string(),
                plan.java_warmup.as_millis().to_string(),
                plan.p2_owners.to_string(),
            ];
            let mut server = Driven::start(java_command(j, &java_url, &args));
            server
                .expect("ready", plan.java_warmup + Duration::from_secs(120))
                .expect("the JVM never became ready");
            servers.push((java_name(j), server));
        }
        target.flushall();
        // A JVM just warmed up still compiles in the background for a while: on 2 cores that
        // landed on whichever implementation measured first (the crate's first P1 repetition
        // had p99s of 3-5 ms, its later ones under 1 ms).
        std::thread::sleep(JVM_SETTLE);
    }

    // P1 and P2 also run the crate with prompt loss detection off: what it costs (the two in
    // turns: `in_turns`).
    let crate_too = rust.contains(&"crate");
    let with_watch: Vec<&str> = (rust.iter().copied())
        .chain(crate_too.then_some(UNWATCHED))
        .collect();
    if wants("p1") {
        eprintln!(
            "P1: uncontended lock+unlock ({} pairs x {} reps, in turn)",
            plan.p1_iters, plan.reps
        );
        p1::run_p1(
            plan,
            rt,
            target,
            socket,
            &with_watch,
            crate_too,
            &mut servers,
            &mut results,
        );
    }

    if wants("p2") {
        eprintln!(
            "P2: {} owners, distinct keys, {:?} x {} reps",
            plan.p2_owners, plan.p2_secs, plan.reps
        );
        for _ in 0..plan.reps {
            for &imp in with_watch.iter().filter(|imp| !in_turns(imp)) {
                let (ops, cpu) = rt.block_on(p2(
                    imp,
                    target,
                    plan.p2_owners,
                    plan.p2_warmup,
                    plan.p2_secs,
                ));
                results.add("p2.ops", imp, ops);
                results.add("p2.cpu_us", imp, cpu);
                target.flushall();
            }
            if crate_too {
                let run = rt.block_on(p2_paired(
                    target,
                    plan.p2_owners,
                    plan.p2_warmup,
                    plan.p2_secs,
                ));
                for (imp, (ops, cpu)) in [("crate", run.on), (UNWATCHED, run.off)] {
                    results.add("p2.ops", imp, ops);
                    results.add("p2.cpu_us", imp, cpu);
                }
                results.add_all("p2.ops", PAIRED, &run.ratios);
                target.flushall();
            }
            for (imp, server) in &mut servers {
                for kind in ["p2", "p2async"] {
                    let request = format!(
                        "{kind} {} {}",
                        plan.p2_secs.as_millis(),
                        plan.p2_warmup.as_millis()
                    );
                    for v in server.request(&request, JAVA_TIMEOUT) {
                        record_java(&mut results, imp, &v);
                    }
                    target.flushall();
                }
            }
        }
    }
    for (_, server) in servers {
        server.finish();
    }

    if wants("p3") {
        let hold = Duration::from_millis(plan.p3_hold_ms);
        let count_handoffs = plan.p3_count_handoffs;
        for &n in &plan.p3_ns {
            eprintln!(
                "P3: hand-off, {n} waiters, {} hand-offs x {} reps (+1 counting run)",
                plan.p3_handoffs, plan.p3_reps
            );
            for rep in 0..=plan.p3_reps {
                let counting = rep == plan.p3_reps;
                if !counting {
                    // The round trip P3 is judged in, measured beside it: one measurement at
                    // the start was seen anywhere from 13 to 40 µs on a shared machine.
                    let (p50, p99) = in_task(rt, round_trip(url.clone(), 1000));
                    results.add("rtt.p50_us", "floor", p50);
                    results.add("rtt.p99_us", "floor", p99);
                }
                // P3 also runs the crate with local hand-off off: the pub/sub path that serves
                // waiters in other clients.
                let with_plain: Vec<&str> = rust
                    .iter()
                    .copied()
                    .chain(rust.contains(&"crate").then_some(PLAIN))
                    .collect();
                for &imp in &with_plain {
                    let handoffs = if counting {
                        count_handoffs
                    } else {
                        plan.p3_handoffs
                    };
                    let r =
                        rt.block_on(p3(imp, target, n, plan.p3_warmup, handoffs, hold, counting));
                    record_p3(&mut results, n, imp, &r);
                    target.flushall();
                }
            }
        }
        // Redisson: every N in one JVM per version, after a warm-up of hand-offs as long as the
        // JVM warm-up (a hand-off takes about the 2-3 ms hold). Only one client is alive while
        // the commands are counted.
        for j in jars {
            eprintln!("P3: {} (JVM warm-up {:?})", java_name(j), plan.java_warmup);
            let ns: Vec<String> = plan.p3_ns.iter().map(|n| n.to_string()).collect();
            let jvm_warmup_handoffs = (plan.java_warmup.as_millis() / 3).max(100);
            let args = vec![
                "p3".to_string(),
                ns.join(","),
                plan.p3_handoffs.to_string(),
                plan.p3_warmup.to_string(),
                plan.p3_hold_ms.to_string(),
                plan.p3_reps.to_string(),
                jvm_warmup_handoffs.to_string(),
                plan.p3_count_handoffs.to_string(),
            ];
            let imp = java_name(j);
            for v in run_java(j, &java_url, &args) {
                record_java(&mut results, &imp, &v);
            }
            target.flushall();
        }
    }

    if wants("kinds") {
        run_kinds(plan, rt, target, rust, jars, &java_url, &mut results);
    }

    if wants("p4") {
        let exe = std::env::current_exe().unwrap();
        for &count in &plan.p4_counts {
            // (Off too at the first count: what listening for 10,000 held locks costs.)
            let off = count == plan.p4_counts[0] && rust.contains(&"crate");
            // Loss detection on against off: one window a process, the two alternating, so
            // that what varies from process to process (where its threads run on 2 cores: one
            // process's client CPU a cycle 5.3 ms, the next 8.5) falls on both sides alike.
            let mut runs: Vec<(&str, u32)> = (rust.iter().copied())
                .filter(|imp| !(off && *imp == "crate"))
                .map(|imp| (imp, plan.p4_windows))
                .collect();
            if off {
                for _ in 0..plan.p4_loss_runs {
                    runs.extend([("crate", 1), (UNWATCHED, 1)]);
                }
            }
            for (imp, windows) in runs {
                let mut cmd = Command::new(&exe);
                cmd.args(["--p4-child", imp])
                    .args(target.args())
                    .args(["--locks", &count.to_string()])
                    .args(["--watchdog-ms", &plan.p4_watchdog_ms.to_string()])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit());
                run_p4(plan, &mut results, imp, cmd, target, count, windows);
            }
            for j in jars {
                let args = [
                    "p4".to_string(),
                    count.to_string(),
                    plan.p4_watchdog_ms.to_string(),
                ];
                let cmd = java_command(j, &java_url, &args);
                let windows = plan.p4_windows;
                run_p4(
                    plan,
                    &mut results,
                    &java_name(j),
                    cmd,
                    target,
                    count,
                    windows,
                );
            }
        }
    }
    // The async Redisson rows compare against the same crate and floor figures.
    for (from, to) in [("p2.ops", "p2.ops_async"), ("p2.cpu_us", "p2.cpu_us_async")] {
        for imp in rust {
            if let Some(v) = results.values.get(from).and_then(|m| m.get(*imp)).cloned() {
                if let Some(m) = results.values.get_mut(to) {
                    m.insert(imp.to_string(), v);
                }
            }
        }
    }
    results
}

/// Idle time after the JVMs' warm-up, before the first measured repetition.
const JVM_SETTLE: Duration = Duration::from_secs(3);

/// Warm-up before each Redisson P1 repetition, in ms (its JVM is warm already).
const JAVA_REP_WARMUP_MS: u64 = 500;

/// The longest a request to a warmed-up Redisson (a P1 or P2 repetition) may take.
const JAVA_TIMEOUT: Duration = Duration::from_secs(120);

/// Records one result line of `interop.Bench`.
/// P1 and P3 of each of the other kinds ([`KINDS`]), the crate's then each Redisson version's
/// (one JVM per version, `Bench kinds`). The crate runs with its defaults (local hand-off where
/// the kind has one: the fenced lock).
fn run_kinds(
    plan: &Plan,
    rt: &tokio::runtime::Runtime,
    target: &Target,
    rust: &[&str],
    jars: &[Java],
    java_url: &str,
    results: &mut Results,
) {
    if !rust.contains(&"crate") {
        return;
    }
    let hold = Duration::from_millis(plan.p3_hold_ms);
    // P1 a repetition at a time over every kind, each repetition starting one kind further on
    // and every other one in reverse: a kind's repetitions spread over the run, and none always
    // follows the same kind (a drifting machine, or what one kind leaves behind, would
    // otherwise weigh on one kind alone).
    eprintln!(
        "kinds: P1 x {} reps of {}, in turn",
        plan.reps,
        KINDS.join(", ")
    );
    for rep in 0..plan.reps {
        for i in 0..KINDS.len() {
            let kind = KINDS[p1::in_turn(KINDS.len(), rep, i)];
            let run = p1_of(
                kind,
                "crate".into(),
                target.clone(),
                plan.p1_warmup,
                plan.p1_iters,
            );
            let (p50, p99, _) = in_task(rt, run);
            results.add(&format!("p1.{kind}.p50_us"), "crate", p50);
            results.add(&format!("p1.{kind}.p99_us"), "crate", p99);
            target.flushall();
            if let Some(latched) = wire::Latched::ALL.into_iter().find(|l| l.kind() == kind) {
                // What exactly-once costs a semaphore on the wire, latches and none side by side.
                let node = target.node_of("bench:p1");
                let (publish, wait) = (target.publish_command(), target.has_replicas());
                let (warmup, iters) = (plan.p1_warmup, plan.p1_iters);
                let runs = wire::latch_cost_wire(latched, &node, publish, wait, warmup, iters);
                let metric = latched.metric();
                for ((p50, p99), imp) in runs.into_iter().zip(["latched", "unlatched"]) {
                    results.add(&format!("{metric}.p50_us"), imp, p50);
                    results.add(&format!("{metric}.p99_us"), imp, p99);
                }
                target.flushall();
            }
        }
    }
    // (The read lock has no P3: readers share, so nothing is handed off.)
    for kind in KINDS.into_iter().filter(|&kind| kind != "read") {
        eprintln!("kinds: {kind}: P3 {} waiters", plan.kinds_n);
        for _ in 0..plan.p3_reps {
            let rounds = (plan.p3_warmup, plan.kinds_handoffs);
            let run = p3_of(kind, "crate", target, plan.kinds_n, rounds, hold, false);
            let r = rt.block_on(run);
            results.add(&format!("p3.{kind}.p50_us"), "crate", r.p50_us);
            results.add(&format!("p3.{kind}.p99_us"), "crate", r.p99_us);
            target.flushall();
        }
    }
    for j in jars {
        eprintln!(
            "kinds: {} (JVM warm-up {:?})",
            java_name(j),
            plan.java_warmup
        );
        let args = [
            "kinds".to_string(),
            KINDS.join(","),
            plan.p1_iters.to_string(),
            plan.reps.to_string(),
            plan.kinds_n.to_string(),
            plan.kinds_handoffs.to_string(),
            plan.p3_warmup.to_string(),
            plan.p3_hold_ms.to_string(),
            plan.p3_reps.to_string(),
            plan.java_warmup.as_millis().to_string(),
        ];
        let imp = java_name(j);
        for v in run_java(j, java_url, &args) {
            record_java(results, &imp, &v);
        }
        target.flushall();
    }
}

fn record_java(results: &mut Results, imp: &str, v: &Value) {
    let num = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    match v["scenario"].as_str() {
        Some("p1k" | "p3k") => {
            let p = &v["scenario"].as_str().unwrap()[..2];
            let kind = v["kind"].as_str().unwrap_or("?");
            results.add(&format!("{p}.{kind}.p50_us"), imp, num("p50_us"));
            results.add(&format!("{p}.{kind}.p99_us"), imp, num("p99_us"));
        }
        Some("p1") => {
            results.add("p1.p50_us", imp, num("p50_us"));
            results.add("p1.p99_us", imp, num("p99_us"));
            results.add("p1.cpu_us", imp, num("cpu_us"));
        }
        Some("p2") => {
            results.add("p2.ops", imp, num("ops_per_s"));
            results.add("p2.cpu_us", imp, num("cpu_us"));
        }
        Some("p2async") => {
            results.add("p2.ops_async", imp, num("ops_per_s"));
            results.add("p2.cpu_us_async", imp, num("cpu_us"));
        }
        Some("p3") => {
            let n = v["n"].as_u64().unwrap() as usize;
            let client = v["client"].as_object().map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
                    .collect::<HashMap<_, _>>()
            });
            let r = P3Rep {
                p50_us: num("p50_us"),
                p99_us: num("p99_us"),
                calls_per_acq: num("calls_per_acq"),
                scripts_per_acq: num("scripts_per_acq"),
                client_per_acq: client,
            };
            record_p3(results, n, imp, &r);
        }
        _ => eprintln!("java: unexpected {v}"),
    }
}

/// Runs `f` in a task on the runtime's workers, as an application's code runs (code on the
/// `block_on` thread pays a cross-thread wake-up for every reply, which would dwarf what is
/// measured).
fn in_task<F>(rt: &tokio::runtime::Runtime, f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.block_on(async move { tokio::spawn(f).await.expect("the measured task panicked") })
}
