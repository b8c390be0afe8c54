//! `rlock watch`: a lock's events as they happen (the library's `Lock::events`), until
//! interrupted.

use std::time::{SystemTime, UNIX_EPOCH};

use redisson_lock::{Config, LockClient};
use serde_json::json;

use crate::failure::Failure;
use crate::process::Signals;

/// Prints `name`'s events, one a line (`--json`: one object a line), until SIGINT or SIGTERM
/// (exit 0) or the events end.
pub async fn watch(config: Config, name: String, json: bool) -> Result<u8, Failure> {
    let mut signals = Signals::install().map_err(|e| {
        Failure::new(
            crate::failure::FAILURE,
            format!("cannot handle signals: {e}"),
        )
    })?;
    let client = LockClient::with_config(config)
        .await
        .map_err(Failure::from_lock)?;
    let events = client.lock(name.clone()).events().await;
    let mut events = match events {
        Ok(events) => events,
        Err(err) => {
            client.shutdown().await;
            return Err(Failure::from_lock(err));
        }
    };
    let told = |on: Option<bool>| match on {
        Some(true) => "told",
        Some(false) => "not told (notify-keyspace-events)",
        None => "unknown (the server would not say)",
    };
    let sources = events.sources();
    eprintln!(
        "rlock: watching `{name}`: unlocks told; other deletions {}; expiries {}",
        told(sources.deletions),
        told(sources.expiries)
    );
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(event) => {
                    let at_ms = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64);
                    if json {
                        println!("{}", json!({ "name": name, "event": event.as_str(), "at_ms": at_ms }));
                    } else {
                        println!("{at_ms} `{name}` {}", event.as_str());
                    }
                }
                None => break,
            },
            _ = signals.recv() => break,
        }
    }
    client.shutdown().await;
    Ok(0)
}
