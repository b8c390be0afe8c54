//! P1, the uncontended lock + unlock, a repetition at a time over every implementation: the
//! crate with prompt loss detection on and off (in turns: [`p1_paired`]), on one key and over
//! distinct keys, the floor, the wire (blocking and spinning), the crate and the wire over the
//! Unix socket, and each Redisson version. Each repetition starts one step further on, and
//! every other one runs in reverse ([`in_turn`]): no implementation always comes first, or
//! always right after the JVM.

use crate::java::Driven;
use crate::scenarios::{in_turns, p1, p1_paired, PAIRED, UNWATCHED};
use crate::stats::Results;
use crate::target::Target;
use crate::{in_task, record_java, record_p1, wire, Plan, JAVA_REP_WARMUP_MS, JAVA_TIMEOUT};

/// One measurement of a P1 repetition.
#[derive(Clone, Copy)]
enum Step<'a> {
    /// The pairs on one key of a Rust implementation.
    Pairs(&'a str),
    /// The crate's pairs with prompt loss detection on and off in turns, on one key or over
    /// distinct keys.
    Paired { distinct: bool },
    /// The wire at the P1 key's node: blocking or spinning reads.
    Wire { spin: bool },
    /// The crate and the wire over the server's Unix socket.
    Unix(&'a str),
    /// The `i`th Redisson version.
    Java(usize),
}

/// The `i`th of `len` steps in repetition `rep`: each repetition starts one step further on,
/// and every other one runs in reverse.
pub(crate) fn in_turn(len: usize, rep: usize, i: usize) -> usize {
    let step = if rep % 2 == 1 { len - 1 - i } else { i };
    (rep + step) % len
}

/// Runs `plan.reps` P1 repetitions over every implementation.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_p1(
    plan: &Plan,
    rt: &tokio::runtime::Runtime,
    target: &Target,
    socket: Option<&str>,
    with_watch: &[&str],
    crate_too: bool,
    servers: &mut [(String, Driven)],
    results: &mut Results,
) {
    let mut steps: Vec<Step> = (with_watch.iter().filter(|imp| !in_turns(imp)))
        .map(|&imp| Step::Pairs(imp))
        .collect();
    if crate_too {
        steps.extend([
            Step::Paired { distinct: false },
            Step::Paired { distinct: true },
        ]);
    }
    steps.extend([Step::Wire { spin: false }, Step::Wire { spin: true }]);
    steps.extend(socket.map(Step::Unix));
    steps.extend((0..servers.len()).map(Step::Java));
    let (warmup, iters) = (plan.p1_warmup, plan.p1_iters);
    for rep in 0..plan.reps {
        for i in 0..steps.len() {
            match steps[in_turn(steps.len(), rep, i)] {
                Step::Pairs(imp) => {
                    let run = p1(imp.to_string(), target.clone(), warmup, iters);
                    record_p1(results, "p1", imp, in_task(rt, run));
                }
                Step::Paired { distinct } => {
                    let run = in_task(rt, p1_paired(target.clone(), warmup, iters, distinct));
                    let prefix = if distinct { "p1d" } else { "p1" };
                    record_p1(results, prefix, "crate", run.on);
                    record_p1(results, prefix, UNWATCHED, run.off);
                    results.add_all(&format!("{prefix}.p50_us"), PAIRED, &run.p50s);
                    results.add_all(&format!("{prefix}.p99_us"), PAIRED, &run.p99s);
                }
                Step::Wire { spin } => {
                    // (`wire`: blocking reads; `wire-spin`: a non-blocking read in a loop.)
                    let node = target.node_of("bench:p1");
                    let (publish, replicas) = (target.publish_command(), target.has_replicas());
                    let run = wire::p1_wire(&node, publish, replicas, spin, warmup, iters);
                    let imp = if spin { "wire-spin" } else { "wire" };
                    record_p1(results, "p1", imp, run);
                }
                Step::Unix(path) => {
                    // A service beside its Redis: the crate and the wire.
                    let url = format!("redis+unix://{path}");
                    let over = Target::Single(url.clone());
                    let run = p1("crate".into(), over, warmup, iters);
                    record_p1(results, "p1unix", "crate", in_task(rt, run));
                    for (imp, spin) in [("wire", false), ("wire-spin", true)] {
                        let run = wire::p1_wire(&url, "publish", false, spin, warmup, iters);
                        record_p1(results, "p1unix", imp, run);
                    }
                }
                Step::Java(j) => {
                    let (imp, server) = &mut servers[j];
                    let request = format!("p1 {} {}", plan.p1_iters, JAVA_REP_WARMUP_MS);
                    for v in server.request(&request, JAVA_TIMEOUT) {
                        record_java(results, imp, &v);
                    }
                }
            }
            target.flushall();
        }
    }
}
