//! `rlock permits` and `rlock latch`: Redisson's synchronizers from the shell (a semaphore's
//! permits, a count-down latch), on the library's `PermitExpirableSemaphore` and
//! `CountDownLatch`.

use std::time::Duration;

use clap::Subcommand;
use redisson_lock::{Config, LockClient};
use serde_json::json;

use crate::duration::{format_duration, parse_duration};
use crate::failure::{self, Failure};

/// What `rlock latch` does to the latch.
#[derive(Debug, Subcommand)]
pub enum LatchAction {
    /// Wait until the count reaches zero (an absent latch is open).
    Await {
        /// Wait at most this long; exit 73 if it is still closed then [default: forever].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        wait: Option<Duration>,
    },
    /// Count the latch down by one (it opens at zero).
    CountDown,
    /// Set the count if the latch has none yet (Redisson's trySetCount); exit 1 if it had.
    Set {
        /// The count.
        count: u32,
    },
    /// Print the count (0: open).
    Count,
}

/// `rlock permits NAME [--set N] [--json]`: the semaphore's permits, after setting the total
/// to `set` if given.
pub fn permits(
    config: Config,
    name: String,
    set: Option<u32>,
    json: bool,
    runtime: &tokio::runtime::Runtime,
) -> Result<u8, Failure> {
    let counts = runtime.block_on(async {
        let client = LockClient::with_config(config).await?;
        let jobs = client.permit_semaphore(name.clone());
        let counts = async {
            if let Some(total) = set {
                jobs.set_permits(total).await?;
            }
            jobs.counts().await
        }
        .await;
        client.shutdown().await;
        counts
    });
    let (available, taken) = counts.map_err(Failure::from_lock)?;
    if json {
        let out = json!({ "name": name, "available": available, "taken": taken, "permits": available + taken });
        println!("{out}");
    } else {
        println!(
            "`{name}`: {available} available, {taken} taken ({} in all)",
            available + taken
        );
    }
    Ok(0)
}

/// `rlock latch NAME ACTION`.
pub fn latch(
    config: Config,
    name: String,
    action: LatchAction,
    runtime: &tokio::runtime::Runtime,
) -> Result<u8, Failure> {
    runtime.block_on(async {
        let client = LockClient::with_config(config)
            .await
            .map_err(Failure::from_lock)?;
        let latch = client.count_down_latch(name.clone());
        let done = match action {
            LatchAction::Await { wait: None } => latch.wait().await.map(|()| Ok(0)),
            LatchAction::Await { wait: Some(wait) } => latch.wait_for(wait).await.map(|open| {
                if open {
                    Ok(0)
                } else {
                    Err(Failure::new(
                        failure::NOT_ACQUIRED,
                        format!(
                            "latch `{name}` still closed after --wait {}",
                            format_duration(wait)
                        ),
                    ))
                }
            }),
            LatchAction::CountDown => latch.count_down().await.map(|left| {
                println!("{left}");
                Ok(0)
            }),
            LatchAction::Set { count } => latch.try_set_count(count.into()).await.map(|set| {
                if set {
                    Ok(0)
                } else {
                    Err(Failure::new(
                        failure::FAILURE,
                        format!("latch `{name}` already has a count: left as it is"),
                    ))
                }
            }),
            LatchAction::Count => latch.count().await.map(|count| {
                println!("{count}");
                Ok(0)
            }),
        };
        client.shutdown().await;
        done.map_err(Failure::from_lock)?
    })
}
