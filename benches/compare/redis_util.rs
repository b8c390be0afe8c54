//! Redis helpers: parsing `INFO commandstats`, and the MONITOR command counter with its
//! `ECHO` markers (server-wide helpers are on `target::Target`).

use std::collections::HashMap;

use redis::aio::MultiplexedConnection;

/// `INFO commandstats` as command → calls.
pub(crate) fn parse_commandstats(info: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

pub(crate) async fn commandstats_async(conn: &mut MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    parse_commandstats(&info)
}

/// Commands issued between two snapshots, not counting the `INFO` snapshots themselves.
pub(crate) fn commands_between(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> u64 {
    after
        .iter()
        .filter(|(name, _)| !name.starts_with("info"))
        .map(|(name, calls)| calls - before.get(name).copied().unwrap_or(0))
        .sum()
}

pub(crate) fn script_calls(stats: &HashMap<String, u64>) -> u64 {
    ["evalsha", "eval"]
        .iter()
        .map(|c| stats.get(*c).copied().unwrap_or(0))
        .sum()
}

pub(crate) const MARK_START: &str = "bench-mark-start";
pub(crate) const MARK_END: &str = "bench-mark-end";

/// Counts, by name, the commands clients send between the `ECHO` markers (MONITOR lines of
/// commands run by scripts, `[0 lua]`, are left out, and so are `INFO` and the markers).
pub(crate) async fn monitor(url: &str) -> tokio::task::JoinHandle<HashMap<String, u64>> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let addr = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("monitor connect");
    stream.write_all(b"MONITOR\r\n").await.unwrap();
    let mut lines = tokio::io::BufReader::new(stream).lines();
    // The +OK reply: MONITOR is on before the caller goes on.
    let ok = lines.next_line().await.unwrap().unwrap_or_default();
    assert_eq!(ok.trim(), "+OK", "MONITOR refused: {ok}");
    tokio::spawn(async move {
        let mut counts: HashMap<String, u64> = HashMap::new();
        let mut counting = false;
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(MARK_START) {
                counting = true;
                continue;
            }
            if line.contains(MARK_END) {
                break;
            }
            if !counting || line.contains("[0 lua]") {
                continue;
            }
            let Some(rest) = line.split_once("] \"").map(|(_, r)| r) else {
                continue;
            };
            let name = rest.split('"').next().unwrap_or("").to_ascii_lowercase();
            if name != "info" {
                *counts.entry(name).or_default() += 1;
            }
        }
        counts
    })
}

pub(crate) async fn echo(conn: &mut MultiplexedConnection, what: &str) {
    let _: String = redis::cmd("ECHO")
        .arg(what)
        .query_async(conn)
        .await
        .unwrap();
}
