//! `rlock top`: a live view of the locks on a server, a cluster or through Sentinel, read with
//! the library's [`LockClient::scan`] and [`LockClient::server_stats`].
//!
//! Safe on a production server: at most one refresh a second, and each refresh examines at
//! most `--pages` pages of `--count` keys (`SCAN ... COUNT n TYPE hash`), one read script per
//! lock found. The scan goes on where the last refresh stopped; a lock's row shows what its
//! last read saw (its lease counted down since), and a lock not seen in a whole pass goes.

mod table;
mod tui;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redisson_lock::inspect::{LockInfo, Scan, ServerStats};
use redisson_lock::{Config, LockClient};

use crate::failure::Failure;

pub use table::SortBy;

/// What `rlock top` was asked for.
pub struct TopArgs {
    /// The glob over lock names.
    pub pattern: String,
    pub sort: SortBy,
    /// Print one table (or JSON lines) after one whole pass, and exit.
    pub once: bool,
    pub json: bool,
    pub interval: Duration,
    /// Keys examined per `SCAN` call, and `SCAN` calls per refresh.
    pub count: usize,
    pub pages: usize,
}

/// Runs `rlock top`.
pub fn top(
    config: Config,
    args: TopArgs,
    runtime: &tokio::runtime::Runtime,
) -> Result<u8, Failure> {
    let client = runtime
        .block_on(LockClient::with_config(config))
        .map_err(Failure::from_lock)?;
    let mut collector = Collector::new(client, &args);
    let result = if args.once {
        runtime.block_on(collector.whole_pass()).map(|()| {
            let rows = collector.rows(args.sort);
            let text = match args.json {
                true => rows
                    .iter()
                    .map(|r| format!("{}\n", table::json(r)))
                    .collect(),
                false => table::text(&collector.header(args.sort), &rows),
            };
            crate::print_stdout(&text);
            0
        })
    } else {
        tui::run(&mut collector, &args, runtime)
    };
    runtime.block_on(collector.client.shutdown());
    result
}

/// What the view knows: the rows of the last whole pass, updated by the pass under way.
pub struct Collector {
    client: LockClient,
    pattern: String,
    count: usize,
    pages: usize,
    scan: Option<Scan>,
    /// Locks of the last whole pass, and of the pass under way, with when each was read.
    done: HashMap<String, (LockInfo, Instant)>,
    current: HashMap<String, (LockInfo, Instant)>,
    passes: u64,
    stats: Option<(ServerStats, Instant)>,
    scripts_per_sec: Option<f64>,
    /// Script calls of our own reads since the last sample (not the fleet's).
    own_scripts: u64,
}

impl Collector {
    fn new(client: LockClient, args: &TopArgs) -> Collector {
        Collector {
            client,
            pattern: args.pattern.clone(),
            count: args.count,
            pages: args.pages.max(1),
            scan: None,
            done: HashMap::new(),
            current: HashMap::new(),
            passes: 0,
            stats: None,
            scripts_per_sec: None,
            own_scripts: 0,
        }
    }

    /// The servers' counters, and the scripts per second since the last sample.
    async fn sample_stats(&mut self) -> Result<(), Failure> {
        let stats = self
            .client
            .server_stats()
            .await
            .map_err(Failure::from_lock)?;
        let now = Instant::now();
        if let Some((last, at)) = &self.stats {
            let secs = now.duration_since(*at).as_secs_f64();
            let calls = (stats.script_calls.saturating_sub(last.script_calls))
                .saturating_sub(std::mem::take(&mut self.own_scripts));
            self.scripts_per_sec = (secs > 0.0).then(|| calls as f64 / secs);
        }
        self.stats = Some((stats, now));
        Ok(())
    }

    /// One refresh: the servers' counters, and up to `pages` pages of the scan.
    async fn refresh(&mut self) -> Result<(), Failure> {
        self.sample_stats().await?;
        for _ in 0..self.pages {
            let scan = (self.scan)
                .get_or_insert_with(|| self.client.scan(&self.pattern).with_count(self.count));
            let read_before = scan.keys_read();
            let page = scan.next_page().await;
            self.own_scripts += scan.keys_read() - read_before;
            match page {
                Some(page) => {
                    let read = Instant::now();
                    for info in page.map_err(Failure::from_lock)? {
                        self.current.insert(info.name.clone(), (info, read));
                    }
                }
                None => {
                    // A whole pass: what it did not see is gone.
                    self.done = std::mem::take(&mut self.current);
                    self.scan = None;
                    self.passes += 1;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Refreshes until a whole pass is done (for `--once`).
    async fn whole_pass(&mut self) -> Result<(), Failure> {
        let passes = self.passes;
        while self.passes == passes {
            self.refresh().await?;
        }
        if self.scripts_per_sec.is_none() {
            // A rate needs two samples: one more, a second after the first.
            let first = self.stats.as_ref().map(|(_, at)| *at);
            if let Some(first) = first {
                tokio::time::sleep_until((first + Duration::from_secs(1)).into()).await;
            }
            self.sample_stats().await?;
        }
        Ok(())
    }

    /// The rows to show, sorted.
    fn rows(&self, sort: SortBy) -> Vec<table::Row<'_>> {
        let mut rows: Vec<table::Row<'_>> = (self.done.iter())
            .filter(|(name, _)| !self.current.contains_key(*name))
            .chain(self.current.iter())
            .map(|(_, (info, read))| table::Row::new(info, read.elapsed()))
            .collect();
        table::sort(&mut rows, sort);
        rows
    }

    fn header(&self, sort: SortBy) -> table::Header {
        let (topology, masters) = match &self.stats {
            Some((stats, _)) => (stats.topology, stats.masters.len()),
            None => ("?", 0),
        };
        table::Header {
            topology,
            masters,
            locks: self.current.len()
                + (self.done.keys())
                    .filter(|name| !self.current.contains_key(*name))
                    .count(),
            passes: self.passes,
            scripts_per_sec: self.scripts_per_sec,
            sort,
        }
    }
}
