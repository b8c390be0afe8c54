//! The markdown table on stdout, and the targets judged on this run's medians.

use crate::scenarios::{P2_PAIRED_WINDOW, PAIRED, PAIRED_BLOCK, PLAIN, UNWATCHED};
use crate::stats::{median, Results};
use crate::target::Target;
use crate::wire::Latched;
use crate::Plan;

#[derive(Clone, Copy, PartialEq)]
enum Better {
    Lower,
    Higher,
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v.abs() >= 10_000.0 {
        let s = format!("{:.0}", v);
        // thousands separators
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if v.abs() >= 100.0 {
        format!("{:.0}", v)
    } else if v.abs() >= 10.0 {
        format!("{:.1}", v)
    } else {
        format!("{:.2}", v)
    }
}

/// The figures of one target (standalone, cluster, Sentinel) and its targets judged.
pub(crate) fn table(plan: &Plan, r: &Results, javas: &[String], target: &Target) -> String {
    let mut out = String::new();
    let mut header = "| scenario | metric | crate | floor |".to_string();
    let mut rule = "| --- | --- | ---: | ---: |".to_string();
    for j in javas {
        header.push_str(&format!(" {} |", j.replace("redisson-", "Redisson ")));
        rule.push_str(" ---: |");
    }
    header.push_str(" crate/floor |");
    rule.push_str(" ---: |");
    for j in javas {
        header.push_str(&format!(" crate/{} |", j.replace("redisson-", "R")));
        rule.push_str(" ---: |");
    }
    out.push_str(&header);
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');

    // Lines where the crate is not ahead of a Redisson version: (line, version).
    let mut behind: Vec<(String, String)> = Vec::new();
    let mut compared = 0usize;
    // `me`: the crate's column comes from this implementation (`crate`, or `crate-plain`).
    let mut row =
        |me: &str, scenario: &str, label: &str, metric: &str, better: Better, with_floor: bool| {
            if !r.values.contains_key(metric) && !r.notes.keys().any(|(m, _)| m == metric) {
                return;
            }
            // P4 renewal figures of a client that lost locks cover fewer locks: not comparable.
            let degraded = |imp: &str| -> bool {
                let Some(prefix) = [
                    ".calls",
                    ".cycle_ms",
                    ".cpu_ms",
                    ".faults",
                    ".writes",
                    ".reads_per_node",
                ]
                .iter()
                .find_map(|suffix| metric.strip_suffix(suffix)) else {
                    return false;
                };
                prefix.starts_with("p4.")
                    && r.median(&format!("{prefix}.held_pct"), imp)
                        .is_some_and(|held| held < 99.5)
            };
            for j in javas {
                if degraded(j) || degraded(me) {
                    continue;
                }
                if let (Some(a), Some(b)) = (r.median(metric, me), r.median(metric, j)) {
                    compared += 1;
                    // A tie (e.g. 100 % held on both sides) is not "behind".
                    let ahead_or_even = match better {
                        Better::Lower => a <= b,
                        Better::Higher => a >= b,
                    };
                    if !ahead_or_even {
                        behind.push((format!("{scenario}: {label}"), j.clone()));
                    }
                }
            }
            let mark = |imp: &str| if degraded(imp) { " ‡" } else { "" };
            let cell = |imp: &str| -> String {
                match (r.median(metric, imp), r.get_note(metric, imp)) {
                    (Some(v), _) => format!("{}{}", fmt_num(v), mark(imp)),
                    (None, Some(note)) => format!("{note}{}", mark(imp)),
                    (None, None) => "–".into(),
                }
            };
            let arrow = match better {
                Better::Lower => "↓",
                Better::Higher => "↑",
            };
            let mut line = format!("| {scenario} | {label} {arrow} | {} |", cell(me));
            line.push_str(&format!(
                " {} |",
                if with_floor {
                    cell("floor")
                } else {
                    "–".into()
                }
            ));
            for j in javas {
                line.push_str(&format!(" {} |", cell(j)));
            }
            let ratio = |other: &str| -> String {
                match (r.median(metric, me), r.median(metric, other)) {
                    (Some(a), Some(b)) if b != 0.0 => format!("{:.2}×{}", a / b, mark(other)),
                    _ => "–".into(),
                }
            };
            line.push_str(&format!(
                " {} |",
                if with_floor {
                    ratio("floor")
                } else {
                    "–".into()
                }
            ));
            for j in javas {
                line.push_str(&format!(" {} |", ratio(j)));
            }
            out.push_str(&line);
            out.push('\n');
        };
    row(
        "crate",
        "P1 uncontended",
        "lock+unlock p50 µs",
        "p1.p50_us",
        Better::Lower,
        true,
    );
    row(
        "crate",
        "P1 uncontended",
        "lock+unlock p99 µs",
        "p1.p99_us",
        Better::Lower,
        true,
    );
    row(
        "crate",
        "P1 uncontended",
        "client CPU µs / pair",
        "p1.cpu_us",
        Better::Lower,
        true,
    );
    // The same with prompt loss detection off (on by default).
    row(
        UNWATCHED,
        "P1 uncontended",
        "prompt loss detection off: lock+unlock p50 µs",
        "p1.p50_us",
        Better::Lower,
        true,
    );
    row(
        UNWATCHED,
        "P1 uncontended",
        "prompt loss detection off: … p99 µs",
        "p1.p99_us",
        Better::Lower,
        true,
    );
    row(
        "crate",
        &format!("P2 {} owners", plan.p2_owners),
        "lock+unlock pairs/s (Redisson: a thread per owner, lock())",
        "p2.ops",
        Better::Higher,
        true,
    );
    row(
        "crate",
        &format!("P2 {} owners", plan.p2_owners),
        "client CPU µs / pair (Redisson: threads)",
        "p2.cpu_us",
        Better::Lower,
        true,
    );
    row(
        UNWATCHED,
        &format!("P2 {} owners", plan.p2_owners),
        "prompt loss detection off: lock+unlock pairs/s",
        "p2.ops",
        Better::Higher,
        true,
    );
    row(
        "crate",
        &format!("P2 {} owners", plan.p2_owners),
        "lock+unlock pairs/s (Redisson: lockAsync(id) chains)",
        "p2.ops_async",
        Better::Higher,
        true,
    );
    row(
        "crate",
        &format!("P2 {} owners", plan.p2_owners),
        "client CPU µs / pair (Redisson: async)",
        "p2.cpu_us_async",
        Better::Lower,
        true,
    );
    for n in &plan.p3_ns {
        let s = format!("P3 hand-off, {n} waiter{}", if *n == 1 { "" } else { "s" });
        row(
            "crate",
            &s,
            "unlock reply → next acquire p50 µs",
            &format!("p3.{n}.p50_us"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "… p99 µs",
            &format!("p3.{n}.p99_us"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "client commands / acquisition (MONITOR)",
            &format!("p3.{n}.client"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "server calls / acquisition, incl. inside Lua (INFO)",
            &format!("p3.{n}.calls"),
            Better::Lower,
            true,
        );
        // The same hand-offs served by the unlock message alone (as for waiters in another
        // client): the crate's pub/sub path.
        row(
            PLAIN,
            &s,
            "local hand-off off: unlock reply → next acquire p50 µs",
            &format!("p3.{n}.p50_us"),
            Better::Lower,
            true,
        );
        row(
            PLAIN,
            &s,
            "local hand-off off: … p99 µs",
            &format!("p3.{n}.p99_us"),
            Better::Lower,
            true,
        );
        row(
            PLAIN,
            &s,
            "local hand-off off: client commands / acquisition",
            &format!("p3.{n}.client"),
            Better::Lower,
            true,
        );
    }
    // The other kinds (the crate with its defaults; read has no P3: readers share).
    for kind in crate::scenarios::KINDS {
        let s = format!("P1 {kind}");
        row(
            "crate",
            &s,
            "lock+unlock p50 µs",
            &format!("p1.{kind}.p50_us"),
            Better::Lower,
            false,
        );
        row(
            "crate",
            &s,
            "… p99 µs",
            &format!("p1.{kind}.p99_us"),
            Better::Lower,
            false,
        );
        if kind == "read" {
            continue;
        }
        let s = format!("P3 {kind}, {} waiters", plan.kinds_n);
        row(
            "crate",
            &s,
            "unlock reply → next acquire p50 µs",
            &format!("p3.{kind}.p50_us"),
            Better::Lower,
            false,
        );
        row(
            "crate",
            &s,
            "… p99 µs",
            &format!("p3.{kind}.p99_us"),
            Better::Lower,
            false,
        );
    }
    for count in &plan.p4_counts {
        let s = format!("P4 {} locks", fmt_num(*count as f64));
        let t = format!("p4.{count}");
        row(
            "crate",
            &s,
            "renewal calls / cycle",
            &format!("{t}.calls"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "renewal cycle ms",
            &format!("{t}.cycle_ms"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "client CPU ms / cycle",
            &format!("{t}.cpu_ms"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "client page faults / cycle (minor)",
            &format!("{t}.faults"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "client socket writes / cycle (write syscalls)",
            &format!("{t}.writes"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "server read events / node / cycle",
            &format!("{t}.reads_per_node"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "client RSS bytes / lock",
            &format!("{t}.bytes_per_lock"),
            Better::Lower,
            true,
        );
        row(
            "crate",
            &s,
            "JVM live heap bytes / lock",
            &format!("{t}.heap_bytes_per_lock"),
            Better::Lower,
            false,
        );
        row(
            "crate",
            &s,
            "% still held after the window",
            &format!("{t}.held_pct"),
            Better::Higher,
            true,
        );
        row(
            "crate",
            &s,
            "time to acquire all, s",
            &format!("{t}.acquire_s"),
            Better::Lower,
            true,
        );
    }
    if r.values.contains_key("p1.read.p50_us") {
        out.push_str(
            "\nThe read lock has no P3 row: readers share the lock, so nothing is handed off.\n",
        );
    }
    if r.values.contains_key("p3.spin.p50_us") {
        out.push_str(
            "\nP3 spin measures the back-off more than the client: spin waiters poll, both sides \
             pause by Redisson's algorithm (1 ms doubling to 128 ms, with jitter), and a hand-off \
             waits for whichever waiter polls first; its p99 is the pause the waiters happened to \
             be in, which swings from run to run on either side.\n",
        );
    }
    if !r.breakdown.is_empty() {
        out.push_str(
            "\nP3 client commands per acquisition, by command (one counting run with MONITOR):\n\n",
        );
        out.push_str("| waiters | implementation | commands |\n| ---: | --- | --- |\n");
        for (n, imp, text) in &r.breakdown {
            out.push_str(&format!("| {n} | {imp} | {text} |\n"));
        }
    }
    if r.values.keys().any(|m| m.ends_with(".held_pct"))
        && r.values
            .iter()
            .filter(|(m, _)| m.ends_with(".held_pct"))
            .any(|(_, by)| by.values().any(|v| median(v) < 99.5))
    {
        out.push_str("\n‡ That client lost locks during P4 (see “% still held”): its renewal figures cover fewer locks, so they are shown but not compared.\n");
    }
    out.push_str(&match target {
        Target::Single(_) => targets(plan, r, &behind, compared),
        Target::Cluster { masters, .. } => {
            cluster_targets(plan, r, masters.len(), &behind, compared)
        }
        // Issue #6's targets are the standalone server's; here, only the comparison.
        Target::Sentinel { .. } => format!(
            "\n| target | this run | verdict |\n| --- | --- | --- |\n{}",
            ahead(&behind, compared)
        ),
    });
    out.push_str(&wire_floor(r));
    out.push_str(&semaphore_latches(r, javas));
    out.push_str(&loss_cost(r));
    let reps = r.reps("p1.p50_us", "crate");
    out.push_str(&format!(
        "\n{}Medians over repetitions (P1/P2: {} each, P3: {} each, P4: 1 run per size, the windows of each; loss detection on and off: a run per window, alternating). ↓ lower is better, ↑ higher is better; ratios are crate ÷ other.\n",
        if plan.quick { "**Quick run** (`--quick`: few, short repetitions; indicative only). " } else { "" },
        reps.max(plan.reps), plan.p3_reps
    ));
    if let (Some(p50), Some(p99)) = (
        r.median("rtt.p50_us", "floor"),
        r.median("rtt.p99_us", "floor"),
    ) {
        out.push_str(&format!(
            "One round trip in this run (redis-rs `PING` in a task on the same runtime; median of the measurements at the start and before each P3 repetition): p50 {} µs, p99 {} µs.\n",
            fmt_num(p50),
            fmt_num(p99)
        ));
    }
    out
}

/// The wire's floor beside the crate's P1: a client that does nothing else (one thread, the
/// same two scripts) over a blocking socket (`wire`) and a non-blocking one read in a loop
/// (`wire-spin`), over TCP and, where the run has one, the server's Unix socket.
fn wire_floor(r: &Results) -> String {
    let mut out = String::new();
    for (prefix, over) in [("p1", "TCP"), ("p1unix", "Unix socket")] {
        for (wire, how) in [("wire", "blocking read"), ("wire-spin", "spinning read")] {
            let cells: Vec<String> = ["p50_us", "p99_us", "cpu_us"]
                .iter()
                .flat_map(|m| {
                    let metric = format!("{prefix}.{m}");
                    let (w, c) = (r.median(&metric, wire), r.median(&metric, "crate"));
                    let ratio = match (c, w) {
                        (Some(c), Some(w)) if w != 0.0 => format!("{:.2}×", c / w),
                        _ => "–".into(),
                    };
                    let show = |v: Option<f64>| v.map_or("–".into(), fmt_num);
                    [show(w), show(c), ratio]
                })
                .collect();
            if cells[0] == "–" {
                continue;
            }
            if out.is_empty() {
                out.push_str(
                    "\n| P1 uncontended, the wire's floor | wire p50 µs | crate p50 µs | crate ÷ wire | wire p99 µs | crate p99 µs | crate ÷ wire | wire CPU µs / pair | crate CPU µs / pair | crate ÷ wire |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
                );
            }
            out.push_str(&format!("| {over}, {how} | {} |\n", cells.join(" | ")));
        }
    }
    if !out.is_empty() {
        out.push_str("The wire: one thread, a `std::net` socket, no pipelining, the crate's acquire and unlock scripts (`EVALSHA`, written as RESP by hand), each reply read before the next call (`WAIT` in the same write where there are replicas); its latches are left to their `PX`. A blocking read puts the thread to sleep until the reply; a spinning one retries a non-blocking read at once, so it never sleeps (and burns its core while it waits).\n");
    }
    out
}

/// What exactly-once costs the semaphores: the wire with the crate's scripts (a latch per
/// acquire and per release) against the same commands without latches (Redisson's), beside
/// the crate's and Redisson's P1 rows of the same kind.
fn semaphore_latches(r: &Results, javas: &[String]) -> String {
    let mut out = String::from(
        "\n| P1, acquire + release of one permit | p50 µs | ÷ the wire without latches | p99 µs |\n| --- | --- | --- | --- |\n",
    );
    let mut any = false;
    for latched in Latched::ALL {
        let (kind, wire) = (latched.kind(), latched.metric());
        let (p50, p99) = (format!("{wire}.p50_us"), format!("{wire}.p99_us"));
        let (Some(with), Some(without)) = (r.median(&p50, "latched"), r.median(&p50, "unlatched"))
        else {
            continue;
        };
        any = true;
        let p99_of = |metric: &str, imp: &str| r.median(metric, imp).map_or("–".into(), fmt_num);
        let mut line = |what: &str, p50: f64, p99: String| {
            out.push_str(&format!(
                "| {kind}: {what} | {} | {:.2}× | {p99} |\n",
                fmt_num(p50),
                p50 / without
            ))
        };
        line(
            "the wire, the crate's scripts (exactly-once: a latch per command)",
            with,
            p99_of(&p99, "latched"),
        );
        line(
            "the wire, the same commands without latches (Redisson's)",
            without,
            p99_of(&p99, "unlatched"),
        );
        let (p1_50, p1_99) = (format!("p1.{kind}.p50_us"), format!("p1.{kind}.p99_us"));
        if let Some(p50) = r.median(&p1_50, "crate") {
            line("the crate", p50, p99_of(&p1_99, "crate"));
        }
        for java in javas {
            if let Some(p50) = r.median(&p1_50, java) {
                line(
                    &java.replace("redisson-", "Redisson "),
                    p50,
                    p99_of(&p1_99, java),
                );
            }
        }
    }
    if !any {
        return String::new();
    }
    out.push_str("The wire: one thread, a blocking `std::net` socket, the two scripts of each side alternating pair by pair, each reply read before the next call (`WAIT` in the same write where there are replicas). Each of the crate's semaphore commands (`RSemaphore`'s and `RPermitExpirableSemaphore`'s) writes a latch beside the key, so that a command re-sent after its answer was lost takes or gives its permits once; Redisson's scripts send the same commands on the key and no latch, so its retried command can count twice. The first two rows of each kind are that guarantee's cost on this server; a crate row behind Redisson's by no more than it is the guarantee, not the client.\n");
    out
}

/// The run-to-run spread of `metric`'s values for `imp`: (largest − smallest) ÷ median, as a
/// percentage, over its repetitions (P4: its measured windows); `–` for a single value.
fn spread(r: &Results, metric: &str, imp: &str) -> String {
    let Some(values) = r.values.get(metric).and_then(|m| m.get(imp)) else {
        return "–".to_string();
    };
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let (Some(median), true) = (r.median(metric, imp), finite.len() > 1) else {
        return "–".to_string();
    };
    if median == 0.0 {
        return "–".to_string();
    }
    let max = finite.iter().copied().fold(f64::MIN, f64::max);
    let min = finite.iter().copied().fold(f64::MAX, f64::min);
    format!("{:.0} % (n={})", (max - min) / median * 100.0, finite.len())
}

/// What prompt loss detection costs: the crate as it ships (on) against the same build with
/// it off, with the targets of issue #32 (P1 and P2 within 5 %, P4 within 10 %), and the
/// run-to-run spread of each side (a ratio inside the spread is noise, not a cost).
fn loss_cost(r: &Results) -> String {
    let mut out = String::new();
    for (metric, what, higher, within) in [
        ("p1.p50_us", "P1 lock+unlock p50 µs", false, 0.05),
        ("p1.p99_us", "P1 … p99 µs", false, 0.05),
        ("p1.cpu_us", "P1 client CPU µs / pair", false, 0.05),
        ("p1d.p50_us", "P1 over distinct keys p50 µs", false, 0.05),
        ("p1d.p99_us", "P1 over distinct keys p99 µs", false, 0.05),
        ("p2.ops", "P2 pairs/s", true, 0.05),
        (
            "p4.10000.cycle_ms",
            "P4 10,000 held: renewal cycle ms",
            false,
            0.10,
        ),
        (
            "p4.10000.cpu_ms",
            "P4 10,000 held: client CPU ms / cycle",
            false,
            0.10,
        ),
        (
            "p4.10000.faults",
            "P4 10,000 held: client page faults / cycle",
            false,
            f64::INFINITY,
        ),
        (
            "p4.10000.bytes_per_lock",
            "P4 10,000 held: client RSS bytes / lock",
            false,
            f64::INFINITY,
        ),
    ] {
        let (Some(on), Some(off)) = (r.median(metric, "crate"), r.median(metric, UNWATCHED)) else {
            continue;
        };
        if out.is_empty() {
            out.push_str("\n| Loss told at once: its cost | on (default) | off | on ÷ off | target | spread on / off |\n| --- | --- | --- | --- | --- | --- |\n");
        }
        // P1's latency rows and P2: on and off ran in turns (`p1_paired`, `p2_paired`); each
        // turn's ratio is the honest estimate (the machine's drift is in both of its halves).
        let ratios = r.values.get(metric).and_then(|m| m.get(PAIRED));
        let paired = ratios.and_then(|ratios| Some((geometric_mean(ratios)?, ratios.len())));
        let (ratio, paired) = match paired {
            Some(((mean, ci), n)) => (mean, Some((ci, n))),
            None => (on / off, None),
        };
        let shown = match ratio.is_finite() {
            true => format!("{ratio:.2}×"),
            false => "–".to_string(),
        };
        let met = if higher {
            ratio >= 1.0 - within
        } else {
            ratio <= 1.0 + within
        };
        let target = if within.is_finite() {
            format!(
                "within {:.0} %: {}",
                within * 100.0,
                if met { "yes" } else { "**no**" }
            )
        } else {
            "–".to_string()
        };
        let turns = paired.map_or(String::new(), |(ci, n)| {
            format!(" (± {:.1} %, {n} turns)", ci * 100.0)
        });
        out.push_str(&format!(
            "| {what} | {} | {} | {shown}{turns} | {target} | {} / {} |\n",
            fmt_num(on),
            fmt_num(off),
            spread(r, metric, "crate"),
            spread(r, metric, UNWATCHED),
        ));
    }
    if !out.is_empty() && r.values.values().any(|m| m.contains_key(PAIRED)) {
        out.push_str(&format!("\nP1's latency rows ran on and off in turns of {PAIRED_BLOCK} pairs a side, P2 in turns of {} ms a side (the two halves of a turn in alternating order): their on ÷ off is the geometric mean of the turns' ratios (a block's p99: its second slowest pair), ± its 95 % confidence interval. This machine's round trips switch between two modes (a P1 p50 near 50 µs or near 190 µs) many times within a repetition, so repetitions measured apart catch them unevenly (their spreads of 20-100 %); the two halves of a turn, moments apart, mostly meet the same one. The on and off columns are the medians of the repetitions, each side's turns together.\n", P2_PAIRED_WINDOW.as_millis()));
    }
    out
}

/// The geometric mean of `ratios` and the relative half-width of its 95 % confidence interval
/// (over their logarithms); `None` for fewer than two.
fn geometric_mean(ratios: &[f64]) -> Option<(f64, f64)> {
    let logs: Vec<f64> = (ratios.iter())
        .filter(|r| r.is_finite() && **r > 0.0)
        .map(|r| r.ln())
        .collect();
    if logs.len() < 2 {
        return None;
    }
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let half = 1.96 * (var / n).sqrt();
    Some((mean.exp(), half.exp() - 1.0))
}

/// The targets, judged on this run's medians.
fn targets(plan: &Plan, r: &Results, behind: &[(String, String)], compared: usize) -> String {
    let ratio = |metric: &str| -> Option<f64> {
        Some(r.median(metric, "crate")? / r.median(metric, "floor")?)
    };
    let mut out =
        String::from("\n| target (issue #6) | this run | verdict |\n| --- | --- | --- |\n");
    let p1 = ratio("p1.p50_us");
    out.push_str(&format!(
        "| P1 p50 within 1.10× the floor | crate/floor {} | {} |\n",
        p1.map_or("–".into(), |x| format!("{x:.2}×")),
        verdict(p1.map(|x| x <= 1.10))
    ));
    let p2 = ratio("p2.ops");
    out.push_str(&format!(
        "| P2 throughput ≥ 0.9× the floor | crate/floor {} | {} |\n",
        p2.map_or("–".into(), |x| format!("{x:.2}×")),
        verdict(p2.map(|x| x >= 0.90))
    ));
    let rtt = r.median("rtt.p50_us", "floor");
    let mut p3_text = Vec::new();
    let mut p3_ok = None;
    for n in &plan.p3_ns {
        let (Some(p50), Some(cmds)) = (
            r.median(&format!("p3.{n}.p50_us"), "crate"),
            r.median(&format!("p3.{n}.client"), "crate"),
        ) else {
            continue;
        };
        let rtts = rtt.map(|t| p50 / t);
        p3_text.push(format!(
            "N={n}: {} µs{}, {cmds:.1} commands",
            fmt_num(p50),
            rtts.map_or(String::new(), |x| format!(" = {x:.1} RTT"))
        ));
        let ok = rtts.is_none_or(|x| x <= 3.0) && cmds <= 8.0;
        p3_ok = Some(p3_ok.unwrap_or(true) && ok);
    }
    out.push_str(&format!(
        "| P3 hand-off p50 ≤ 3 round trips, few commands per acquisition, flat in N (no polling) | {} | {} |\n",
        if p3_text.is_empty() { "–".into() } else { p3_text.join("; ") },
        verdict(p3_ok)
    ));
    let p4 = plan
        .p4_counts
        .iter()
        .max()
        .and_then(|n| Some((*n, r.median(&format!("p4.{n}.calls"), "crate")?)));
    out.push_str(&format!(
        "| P4 ≤ 1,000 Redis calls per cycle at 100k locks | {} | {} |\n",
        p4.map_or("–".into(), |(n, c)| format!(
            "{} calls / cycle at {} locks",
            fmt_num(c),
            fmt_num(n as f64)
        )),
        verdict(p4.filter(|(n, _)| *n >= 100_000).map(|(_, c)| c <= 1000.5))
    ));
    out.push_str(&ahead(behind, compared));
    out
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

fn ahead(behind: &[(String, String)], compared: usize) -> String {
    let list = behind
        .iter()
        .map(|(line, j)| format!("{line} (vs {})", j.replace("redisson-", "Redisson ")))
        .collect::<Vec<_>>()
        .join("; ");
    format!(
        "| ahead of Redisson on every line | behind on {} of {} comparisons{}{} | {} |\n",
        behind.len(),
        compared,
        if list.is_empty() { "" } else { ": " },
        list,
        verdict((compared > 0).then_some(behind.is_empty()))
    )
}

/// Issue #14's targets on a cluster: ahead of Redisson, and each cycle's renewals pipelined
/// per master. Judged on the client's write syscalls per cycle: at most one slot-map read plus
/// three per master (a pipelined write of a few hundred kilobytes leaves in a few syscalls as
/// the socket buffer drains); unpipelined renewal takes one per call.
fn cluster_targets(
    plan: &Plan,
    r: &Results,
    masters: usize,
    behind: &[(String, String)],
    compared: usize,
) -> String {
    let mut out =
        String::from("\n| target (issue #14) | this run | verdict |\n| --- | --- | --- |\n");
    let masters = masters as f64;
    for n in &plan.p4_counts {
        let writes = r.median(&format!("p4.{n}.writes"), "crate");
        let calls = r.median(&format!("p4.{n}.calls"), "crate");
        out.push_str(&format!(
            "| P4 {} locks: renewal pipelined per master (write syscalls per cycle ≤ 1 + 3 per master) | {} | {} |\n",
            fmt_num(*n as f64),
            match (writes, calls) {
                (Some(w), Some(c)) => format!(
                    "{} renewal calls in {w:.1} socket writes per cycle",
                    fmt_num(c)
                ),
                _ => "–".into(),
            },
            verdict(writes.map(|w| w <= 1.0 + 3.0 * masters))
        ));
    }
    out.push_str(&ahead(behind, compared));
    out
}
