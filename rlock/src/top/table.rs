//! The rows and the header of `rlock top`, as cells: the same for the live view, `--once`
//! and `--json`.

use std::fmt::Write as _;
use std::time::Duration;

use clap::ValueEnum;
use redisson_lock::inspect::LockInfo;
use serde_json::Value as Json;

use crate::duration::format_duration;

/// The order of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortBy {
    /// Shortest lease left first (the locks about to expire).
    Lease,
    /// Most waiters first (the contended locks).
    Waiters,
    /// By name.
    Name,
}

impl SortBy {
    fn label(self) -> &'static str {
        match self {
            SortBy::Lease => "lease",
            SortBy::Waiters => "waiters",
            SortBy::Name => "name",
        }
    }
}

/// One lock, as last read, `age` ago.
pub struct Row<'a> {
    pub info: &'a LockInfo,
    /// The lease left now: as read, counted down since (`None` without a TTL).
    pub lease_left: Option<Duration>,
}

impl<'a> Row<'a> {
    pub fn new(info: &'a LockInfo, age: Duration) -> Row<'a> {
        let lease_left = (info.lease_left_ms)
            .filter(|ms| *ms >= 0)
            .map(|ms| Duration::from_millis(ms as u64).saturating_sub(age))
            // A semaphore's permits: the earliest expiry (absolute, in the clock of the
            // client that took it), from this clock.
            .or_else(|| {
                let earliest = info.permits.iter().filter_map(|p| p.expires_ms).min()?;
                let now = crate::status::now_ms();
                Some(Duration::from_millis(
                    earliest.saturating_sub(now).max(0) as u64
                ))
            });
        Row { info, lease_left }
    }

    /// The cells: name, kind, holders, lease, waiters, token, node.
    pub fn cells(&self) -> [String; 7] {
        let info = self.info;
        let mut holders: Vec<String> = (info.holders.iter())
            .map(|h| {
                let who = match (&h.client, &h.client_id) {
                    (Some(c), _) => format!("{}@{}:{}", c.service, c.host, c.pid),
                    (None, Some(id)) => id.chars().take(8).collect::<String>() + "…",
                    (None, None) => h.field.clone(),
                };
                let mode = h.mode.map(|m| format!("{}:", &m[..1])).unwrap_or_default();
                let owner = h.owner_id.map(|o| format!("/{o}")).unwrap_or_default();
                let holds = match h.holds {
                    Some(n) if n > 1 => format!(" ×{n}"),
                    _ => String::new(),
                };
                format!("{mode}{who}{owner}{holds}")
            })
            .collect();
        if let (Some(taken), Some(free)) = (info.permits_taken, info.count) {
            holders.push(format!("{taken} permit(s) taken, {free} free"));
        } else if let Some(count) = info.count {
            holders.push(format!("count {count}"));
        }
        let lease = match (self.lease_left, info.lease_left_ms) {
            (Some(left), _) => format_duration(Duration::from_millis(left.as_millis() as u64)),
            (None, Some(-1)) => "no TTL".to_string(),
            _ => "-".to_string(),
        };
        let waiters = info.waiters.map_or("?".to_string(), |n| n.to_string());
        let waiters = match info.queue.len() {
            0 => waiters,
            queued => format!("{waiters} ({queued} queued)"),
        };
        [
            info.name.clone(),
            info.kind.map_or("?", |k| k.as_str()).to_string(),
            holders.join(", "),
            lease,
            waiters,
            info.fencing_token.map_or(String::new(), |t| t.to_string()),
            info.node.clone().unwrap_or_default(),
        ]
    }
}

pub const COLUMNS: [&str; 7] = [
    "NAME", "KIND", "HOLDERS", "LEASE", "WAITERS", "TOKEN", "NODE",
];

/// `rows` in `sort` order (ties by name).
pub fn sort(rows: &mut [Row<'_>], sort: SortBy) {
    rows.sort_by(|a, b| {
        let by = match sort {
            SortBy::Lease => a.lease_left.cmp(&b.lease_left),
            SortBy::Waiters => b.info.waiters.cmp(&a.info.waiters),
            SortBy::Name => std::cmp::Ordering::Equal,
        };
        by.then_with(|| a.info.name.cmp(&b.info.name))
    });
}

/// The line above the table.
pub struct Header {
    pub topology: &'static str,
    pub masters: usize,
    pub locks: usize,
    pub passes: u64,
    pub scripts_per_sec: Option<f64>,
    pub sort: SortBy,
}

impl Header {
    pub fn line(&self) -> String {
        let rate = (self.scripts_per_sec).map_or("-".to_string(), |r| format!("{r:.0}"));
        let masters = match self.masters {
            0 | 1 => String::new(),
            n => format!(", {n} masters"),
        };
        let pass = match self.passes {
            0 => " (first pass under way)",
            _ => "",
        };
        format!(
            "{}{masters} | {} locks{pass} | {rate} lock scripts/s | sort: {}",
            self.topology,
            self.locks,
            self.sort.label()
        )
    }
}

/// The table as text, columns padded to their widest cell.
pub fn text(header: &Header, rows: &[Row<'_>]) -> String {
    let cells: Vec<[String; 7]> = rows.iter().map(Row::cells).collect();
    let mut widths = COLUMNS.map(|c| c.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = format!("{}\n", header.line());
    let line = |cells: &[String]| {
        let padded: Vec<String> = (cells.iter().zip(widths))
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&COLUMNS.map(String::from)));
    for row in &cells {
        let _ = writeln!(out, "{}", line(row));
    }
    out
}

/// One lock as `status --json` shows it.
pub fn json(row: &Row<'_>) -> Json {
    crate::status::to_json(row.info)
}
