//! `rlock`: Redisson-compatible distributed locks from the shell.
//!
//! ```text
//! rlock run orders --wait 10s -- ./import.sh      # hold `orders` while the command runs
//! rlock status orders --json                       # who holds it, how long is left
//! rlock unlock --force orders                      # delete it whoever holds it
//! rlock top 'orders:*'                             # a live view of the locks
//! rlock run --kind permit exports --permits 4 -- ./export.sh   # at most 4 at once
//! rlock permits exports --set 8                    # a semaphore's permits
//! rlock latch shards:ready await --wait 1m         # a count-down latch
//! rlock watch orders --json                        # its releases and expiries, as they happen
//! rlock demo                                       # a guided tour on a private redis-server
//! ```
//!
//! Built on the `redisson_lock` library: a lock taken here is the same lock as a Redisson
//! `RLock` of the same name in a Java service.

mod demo;
mod demo_server;
mod duration;
mod failure;
mod names;
mod process;
mod prometheus;
mod run;
mod status;
mod sync;
mod top;
mod unlock;
mod watch;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use redisson_lock::{Config, Lease, LockClient, PublishMode, Wait};

use crate::duration::parse_duration;
use crate::failure::{Failure, EXIT_CODES_HELP};

/// Redisson-compatible distributed locks on Redis, from the shell.
///
/// A lock taken by rlock is the same lock as a Redisson RLock of the same name in a Java
/// service (same hash layout, owner fields, TTLs and unlock messages).
#[derive(Debug, Parser)]
#[command(name = "rlock", version, after_help = EXIT_CODES_HELP)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Flags every subcommand accepts (the demo ignores those about the server).
#[derive(Debug, Args)]
struct Global {
    /// Redis server URL: `redis://[user:password@]host[:port][/db]`. Never printed.
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379"
    )]
    url: String,

    /// A Redis Cluster instead of one server: seed node URLs, comma-separated (any nodes of the
    /// cluster; the others are found from them). Never printed.
    #[arg(
        long,
        global = true,
        env = "REDIS_CLUSTER",
        hide_env_values = true,
        value_name = "URL[,URL...]",
        value_delimiter = ','
    )]
    cluster: Vec<String>,

    /// A master watched by Redis Sentinel instead of one server: sentinel URLs,
    /// comma-separated (their login applies to the master too); needs --master-name. Never
    /// printed.
    #[arg(
        long,
        global = true,
        env = "REDIS_SENTINEL",
        hide_env_values = true,
        value_name = "URL[,URL...]",
        value_delimiter = ',',
        conflicts_with = "cluster",
        requires = "master_name"
    )]
    sentinel: Vec<String>,

    /// The name the sentinels know the master by (Redisson's masterName), with --sentinel.
    #[arg(long, global = true, env = "REDIS_MASTER_NAME", value_name = "NAME")]
    master_name: Option<String>,

    /// PEM file of the CA that signed the server's certificate, for a rediss:// server whose
    /// certificate the system's roots do not trust (a private CA).
    #[arg(long, global = true, env = "REDIS_TLS_CA", value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,

    /// Lease of watchdog-renewed locks (renewed every third of it); must match the fleet's
    /// Redisson lockWatchdogTimeout [default: 30s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    watchdog_timeout: Option<Duration>,

    /// Prefix put before every lock name (to match a Redisson NameMapper that adds one).
    #[arg(long, global = true, value_name = "PREFIX", default_value = "")]
    key_prefix: String,

    /// Command that unlocks use to wake waiters (spublish: sharded pub/sub, Redis >= 7 cluster).
    #[arg(long, global = true, value_enum, default_value_t = PublishArg::Auto)]
    publish_mode: PublishArg,
}

/// `--publish-mode` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum PublishArg {
    /// What Redisson does for this deployment (PUBLISH on a standalone server).
    Auto,
    /// Always PUBLISH / SUBSCRIBE.
    Publish,
    /// Always SPUBLISH / SSUBSCRIBE.
    Spublish,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Acquire a lock, run a command while holding it, release it when the command exits.
    ///
    /// The lock is renewed by the watchdog (or held for a fixed --lease). The command runs in
    /// its own process group (unless --foreground). If the lock is lost while it runs, the
    /// group gets SIGTERM, then SIGKILL after --grace, and rlock exits with 74. SIGINT,
    /// SIGTERM, SIGHUP and SIGQUIT sent to rlock (Ctrl-C included) are forwarded to the group;
    /// the lock is released once the command exits. If rlock itself is killed, the command
    /// gets SIGTERM (Linux). The command sees RLOCK_NAME, RLOCK_KEY and RLOCK_OWNER_FIELD in
    /// its environment.
    #[command(after_help = EXIT_CODES_HELP)]
    Run {
        /// Name of the lock (the key prefix is added to it).
        name: String,
        /// Which of Redisson's locks to take (a read or write half of a read-write lock, a
        /// fenced lock whose token the command gets as RLOCK_FENCING_TOKEN).
        #[arg(long, value_enum, default_value_t = run::KindArg::Lock)]
        kind: run::KindArg,
        /// With --kind permit: give the semaphore this many permits first if it does not
        /// exist yet (without it, a missing semaphore has no permits to take).
        #[arg(long, value_name = "N")]
        permits: Option<u32>,
        /// Wait at most this long for the lock (0: give up at once if held) [default: forever]
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        wait: Option<Duration>,
        /// Hold the lock for this fixed lease instead of renewing it (the command is stopped
        /// if it runs longer).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        lease: Option<Duration>,
        /// Time between SIGTERM and SIGKILL when the lock is lost.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
        grace: Duration,
        /// Say on stderr when the lock has been held this long (the library's hold warning,
        /// event and metric, is set to it too).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        warn_after: Option<Duration>,
        /// Serve the library's metrics to Prometheus at http://ADDR/metrics (e.g.
        /// 127.0.0.1:9464) from before the lock is asked for until rlock exits, so a scrape
        /// sees the wait, the hold and the renewals of a long job.
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<SocketAddr>,
        /// Keep the command in rlock's process group, so it can read from the terminal.
        /// Signals then go to the command alone, not to the processes it started.
        #[arg(long)]
        foreground: bool,
        /// The command to run, and its arguments (after `--`).
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<OsString>,
    },
    /// Show whether a lock is held, by whom, and how long its lease has left.
    ///
    /// Recognises Redisson's layouts: reentrant lock (RLock), fenced lock, read-write lock,
    /// fair lock (with its waiting queue); reports a key of another type as not a lock.
    Status {
        /// Name of the lock (the key prefix is added to it).
        name: String,
        /// Print one JSON object instead of text (fields documented in the README).
        #[arg(long)]
        json: bool,
    },
    /// Delete a lock whoever holds it and wake its waiters (needs --force).
    ///
    /// Holders find out at their next renewal. Asks for confirmation on the terminal unless
    /// --yes is given; without a terminal, --yes is required.
    Unlock {
        /// Name of the lock.
        name: String,
        /// Required: unlock even though another owner holds the lock.
        #[arg(long)]
        force: bool,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// A live view of the locks: holders (host and process where known), lease left,
    /// waiters, fencing token, node.
    ///
    /// Refreshes at most once a second; each refresh examines at most --pages pages of
    /// --count keys (SCAN, never KEYS), so it is safe on a production server: a pass over many
    /// locks spans several refreshes. Keys: q (or Esc, Ctrl-C) quits; l, w, n sort by lease,
    /// waiters, name.
    Top {
        /// Which lock names to show (a glob; the key prefix is added to it).
        #[arg(default_value = "*")]
        pattern: String,
        /// The order of the rows.
        #[arg(long, value_enum, default_value_t = top::SortBy::Lease)]
        sort: top::SortBy,
        /// Print one table after one whole pass, and exit.
        #[arg(long)]
        once: bool,
        /// With --once: one JSON object per lock (as `status --json`), one per line.
        #[arg(long, requires = "once")]
        json: bool,
        /// Time between refreshes (at least 1s).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
        interval: Duration,
        /// Keys examined per SCAN call.
        #[arg(long, default_value_t = 100)]
        count: usize,
        /// SCAN calls per refresh (at most).
        #[arg(long, default_value_t = 10)]
        pages: usize,
    },
    /// Print a lock's events as they happen (released, expired, resubscribed), until
    /// interrupted.
    ///
    /// Unlocks are told by their message on the lock's channel; other deletions (a DEL) and
    /// expiries only where the server's notify-keyspace-events holds Egx (said on stderr at
    /// the start). `resubscribed`: the connection came back, an event may have been missed.
    Watch {
        /// Name of the lock (the key prefix is added to it).
        name: String,
        /// One JSON object a line: name, event, at_ms.
        #[arg(long)]
        json: bool,
    },
    /// Show a semaphore's permits (available, taken), after setting their total with --set.
    ///
    /// Works on Redisson's RPermitExpirableSemaphore (`rlock run --kind permit`) and
    /// RSemaphore: expired permits are given back first, as Redisson's own calls do.
    Permits {
        /// Name of the semaphore (the key prefix is added to it).
        name: String,
        /// Set the total permits, taken ones included (Redisson's setPermits).
        #[arg(long, value_name = "N")]
        set: Option<u32>,
        /// Print one JSON object: name, available, taken, permits.
        #[arg(long)]
        json: bool,
    },
    /// Wait on, count down, set or read a count-down latch (Redisson's RCountDownLatch).
    Latch {
        /// Name of the latch (the key prefix is added to it).
        name: String,
        #[command(subcommand)]
        action: sync::LatchAction,
    },
    /// Start a private redis-server and play a short story of locks, as a timeline.
    ///
    /// Needs redis-server on PATH; ignores --url. Takes about 5 seconds.
    Demo,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("{failure}");
            ExitCode::from(failure.code)
        }
    }
}

/// Help and version go to stdout with exit 0; a wrong command line is one `rlock:` line and
/// exit 64 (the full help only when no subcommand was given at all).
fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::from(failure::USAGE)
        }
        _ => {
            // clap's first paragraph (a missing argument is named on the lines after the first).
            let text = err.to_string();
            let paragraph: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let first = paragraph.join(" ");
            let first = if first.is_empty() {
                "invalid command line"
            } else {
                &first
            };
            let message = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!(
                "{}",
                Failure::usage(format!("{message} (see `rlock --help`)"))
            );
            ExitCode::from(failure::USAGE)
        }
    }
}

fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(failure::FAILURE, format!("cannot start the runtime: {e}")))?;
    match cli.command {
        Command::Demo => demo::demo(&runtime),
        Command::Status { name, json } => {
            let config = config(&cli.global, tls_ca(&cli.global)?)?;
            let info = runtime.block_on(async {
                let client = LockClient::with_config(config).await?;
                let info = client.inspect(&name).await;
                let replica_sync = client.replica_sync();
                client.shutdown().await;
                info.map(|info| (info, replica_sync))
            });
            let (info, replica_sync) = info.map_err(Failure::from_lock)?;
            let text = if json {
                format!("{}\n", status::status_json(&info, replica_sync))
            } else {
                status::to_text(&info, replica_sync)
            };
            print_stdout(&text);
            Ok(0)
        }
        Command::Top {
            pattern,
            sort,
            once,
            json,
            interval,
            count,
            pages,
        } => {
            let config = config(&cli.global, tls_ca(&cli.global)?)?;
            let args = top::TopArgs {
                pattern,
                sort,
                once,
                json,
                interval: interval.max(Duration::from_secs(1)),
                count,
                pages,
            };
            top::top(config, args, &runtime)
        }
        Command::Watch { name, json } => {
            let config = config(&cli.global, tls_ca(&cli.global)?)?;
            runtime.block_on(watch::watch(config, name, json))
        }
        Command::Permits { name, set, json } => {
            let config = config(&cli.global, tls_ca(&cli.global)?)?;
            sync::permits(config, name, set, json, &runtime)
        }
        Command::Latch { name, action } => {
            let config = config(&cli.global, tls_ca(&cli.global)?)?;
            sync::latch(config, name, action, &runtime)
        }
        Command::Unlock { name, force, yes } => {
            let config = config(&cli.global, tls_ca(&cli.global)?)?;
            let args = unlock::UnlockArgs { name, force, yes };
            unlock::unlock(config, args, &runtime)
        }
        Command::Run {
            name,
            kind,
            permits,
            wait,
            lease,
            grace,
            warn_after,
            metrics_addr,
            foreground,
            command,
        } => {
            if lease == Some(Duration::ZERO) {
                return Err(Failure::usage("--lease must be longer than 0"));
            }
            if permits.is_some() && kind != run::KindArg::Permit {
                return Err(Failure::usage("--permits goes with --kind permit"));
            }
            let config = config(&cli.global, tls_ca(&cli.global)?)?
                .with_hold_warning(warn_after)
                .with_prompt_loss_detection(true);
            // After the usage checks, before the client exists (outside the runtime: see serve).
            if let Some(addr) = metrics_addr {
                prometheus::serve(addr)?;
            }
            let args = run::RunArgs {
                name,
                kind,
                wait: Wait::from_limit(wait),
                lease: lease.map_or(Lease::Watchdog, Lease::Fixed),
                grace,
                foreground,
                warn_after,
                permits,
                command,
            };
            runtime.block_on(run::run(config, args))
        }
    }
}

/// The library configuration from the global flags; `tls_ca` is the contents of `--tls-ca`.
fn config(global: &Global, tls_ca: Option<Vec<u8>>) -> Result<Config, Failure> {
    // `--cluster` or `--sentinel` if given, else `--url`.
    let config = match (&global.cluster[..], &global.sentinel[..]) {
        ([], []) => Config::from_url(&global.url),
        ([], sentinels) => Config::sentinel(
            global.master_name.as_deref().unwrap_or_default(),
            sentinels.to_vec(),
        ),
        (seeds, _) => Config::cluster(seeds.to_vec()),
    };
    let mut config = config
        .map_err(Failure::from_lock)?
        .with_key_prefix(global.key_prefix.clone())
        .with_publish_mode(match global.publish_mode {
            PublishArg::Auto => PublishMode::Auto,
            PublishArg::Publish => PublishMode::Publish,
            PublishArg::Spublish => PublishMode::SPublish,
        });
    if let Some(timeout) = global.watchdog_timeout {
        config = config.with_watchdog_timeout(timeout);
    }
    if let Some(pem) = tls_ca {
        config = with_tls_ca(config, pem)?;
    }
    Ok(config)
}

/// The contents of `--tls-ca`, if given.
fn tls_ca(global: &Global) -> Result<Option<Vec<u8>>, Failure> {
    let Some(path) = &global.tls_ca else {
        return Ok(None);
    };
    std::fs::read(path)
        .map(Some)
        .map_err(|e| Failure::usage(format!("cannot read --tls-ca {}: {e}", path.display())))
}

#[cfg(feature = "tls")]
fn with_tls_ca(config: Config, pem: Vec<u8>) -> Result<Config, Failure> {
    Ok(config.with_tls_root_cert(pem))
}

#[cfg(not(feature = "tls"))]
fn with_tls_ca(_: Config, _: Vec<u8>) -> Result<Config, Failure> {
    Err(Failure::usage(
        "--tls-ca needs rlock built with the `tls` feature",
    ))
}

/// Writes to stdout, ignoring a closed pipe (`rlock status | head -1` must not panic).
fn print_stdout(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_the_command_after_the_double_dash() {
        let cli = Cli::try_parse_from([
            "rlock", "run", "orders", "--wait", "0", "--", "sh", "-c", "exit 7",
        ])
        .unwrap();
        match cli.command {
            Command::Run {
                name,
                wait,
                command,
                ..
            } => {
                assert_eq!(name, "orders");
                assert_eq!(wait, Some(Duration::ZERO));
                assert_eq!(command, ["sh", "-c", "exit 7"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from([
            "rlock",
            "status",
            "orders",
            "--watchdog-timeout",
            "1500ms",
            "--key-prefix",
            "p:",
        ])
        .unwrap();
        assert_eq!(
            cli.global.watchdog_timeout,
            Some(Duration::from_millis(1500))
        );
        assert_eq!(config(&cli.global, None).unwrap().key_prefix(), "p:");
    }
}
