//! The lock-lost signal: race your work against `guard.lost()`, and see it fire when the lock
//! is deleted behind the holder's back.
//!
//! The client runs with a 1.5 s watchdog timeout (renewal every 0.5 s) so the loss is noticed
//! quickly. First a short piece of work finishes before anything goes wrong and the lock is
//! released normally. Then a plain redis-rs connection `DEL`etes the lock key while a long
//! piece of work runs: the next renewal finds the lock gone, `lost()` completes, the work is
//! abandoned, and `lost_reason()` says why. Unlocking a lost guard is refused with
//! `Error::LockLost` (nothing is sent to Redis).
//!
//! Run it against a local server:
//!
//! ```text
//! redis-server &                      # start a server first (any Redis >= 6.2 or Valkey)
//! cargo run --example lost_signal     # REDIS_URL=redis://host:port/ to use another server
//! ```

use std::time::Duration;

use redisson_lock::{Config, LockClient};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let config = Config::from_url(&url)?.with_watchdog_timeout(Duration::from_millis(1500));
    let client = LockClient::with_config(config).await?;
    let lock = client.lock("redisson-lock:examples:lost-signal");

    // 1. The work wins the race: unlock as usual.
    let guard = lock.lock().await?;
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(300)) => {
            guard.unlock().await?;
            println!("short work finished first; lock released normally");
        }
        _ = guard.lost() => println!("lock lost during the short work (unexpected)"),
    }

    // 2. Someone deletes the key behind our back while the work runs.
    let guard = lock.lock().await?;
    println!(
        "locked {:?} again; renewals every {:?}",
        lock.key(),
        client.config().renewal_interval()
    );

    let key = lock.key().to_owned();
    let mut redis = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let deleted: redis::RedisResult<i64> =
            redis::cmd("DEL").arg(&key).query_async(&mut redis).await;
        println!("(another connection) DEL {key} -> {deleted:?}");
    });

    let started = tokio::time::Instant::now();
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(10)) => {
            println!("long work finished (unexpected: the loss went unnoticed)");
        }
        _ = guard.lost() => {
            println!(
                "lock lost after {:.0?}: stopping the work. reason: {}",
                started.elapsed(),
                guard
                    .lost_reason()
                    .map_or_else(|| "none".to_string(), |r| r.to_string())
            );
        }
    }
    println!("is_lost = {}", guard.is_lost());

    match guard.unlock().await {
        Err(e) if e.is_lock_lost() => println!("unlock of the lost guard is refused: {e}"),
        other => println!("unlock of the lost guard: {other:?}"),
    }

    client.shutdown().await;
    Ok(())
}
