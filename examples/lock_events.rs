//! Lock events for a service that does not hold the lock, and how promptly each is told:
//! a holder takes and releases a lock `rounds` times while a watcher listens, first with the
//! server's keyspace events off (unlocks told by their message), then with `Egx` (every
//! deletion, and expiries: a key given a short TTL, told when the server removes it).
//!
//! ```text
//! redis-server &                          # a server you may reconfigure (it sets
//! cargo run --example lock_events         # notify-keyspace-events, then puts it back)
//! ```
//!
//! It prints, for each mechanism, the time from the holder's unlock answer (or the TTL's end)
//! to the event, p50 and p99.

use std::time::{Duration, Instant};

use redisson_lock::{LockClient, LockEvent, LockEvents};

const ROUNDS: usize = 200;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let admin = redis::Client::open(url.as_str())?;
    let mut admin = admin.get_multiplexed_async_connection().await?;
    let before: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(&mut admin)
        .await?;
    let holder = LockClient::connect(&url).await?;
    let watcher = LockClient::connect(&url).await?;
    let name = "redisson-lock:examples:events";

    for flags in ["", "Egx"] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(flags)
            .query_async(&mut admin)
            .await?;
        let mut events = watcher.lock(name).events().await?;
        println!("notify-keyspace-events {flags:?}: {:?}", events.sources());
        let mut told = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let guard = holder.lock(name).lock().await?;
            guard.unlock().await?;
            let unlocked = Instant::now();
            if next(&mut events).await == Some(LockEvent::Released) {
                told.push(unlocked.elapsed());
            }
        }
        report("  unlock -> Released", &mut told);
        if flags.is_empty() {
            continue;
        }
        let mut lag = Vec::with_capacity(ROUNDS / 4);
        for _ in 0..ROUNDS / 4 {
            let _: i64 = redis::cmd("HSET")
                .arg(name)
                .arg("someone:1")
                .arg(1)
                .query_async(&mut admin)
                .await?;
            let _: i64 = redis::cmd("PEXPIRE")
                .arg(name)
                .arg(20)
                .query_async(&mut admin)
                .await?;
            let due = Instant::now() + Duration::from_millis(20);
            if next(&mut events).await == Some(LockEvent::Expired) {
                lag.push(Instant::now().saturating_duration_since(due));
            }
        }
        report("  TTL end -> Expired (nothing touching the key)", &mut lag);
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg(before.get(1).cloned().unwrap_or_default())
        .query_async(&mut admin)
        .await?;
    holder.shutdown().await;
    watcher.shutdown().await;
    Ok(())
}

async fn next(events: &mut LockEvents) -> Option<LockEvent> {
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .ok()
        .flatten()
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort();
    let at = |q: usize| times[(times.len() * q / 100).min(times.len() - 1)];
    if times.is_empty() {
        println!("{what}: nothing told");
    } else {
        println!(
            "{what}: {} told, p50 {:?}, p99 {:?}",
            times.len(),
            at(50),
            at(99)
        );
    }
}
