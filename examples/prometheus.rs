//! A service exporting the library's metrics to Prometheus.
//!
//! The library reports through the `metrics` facade and installs no exporter: the service
//! picks one. Here `metrics-exporter-prometheus` is installed first (before any lock is
//! asked for, so every wait is counted) with its own HTTP listener. Then a few locks are
//! taken and released: a hold long enough for the watchdog to renew it, a bounded wait that
//! gives up on a held lock, and one lock kept held while the service runs, until Ctrl-C.
//!
//! Run it against a local server, then scrape it:
//!
//! ```text
//! redis-server &                      # start a server first (any Redis >= 6.2 or Valkey)
//! cargo run --example prometheus      # REDIS_URL=redis://host:port/ to use another server,
//!                                     # METRICS_ADDR=host:port to serve elsewhere
//! curl -s http://127.0.0.1:9464/metrics | grep redisson_lock
//! ```
//!
//! The metric names and labels are in the README's "Operations" section and
//! `redisson_lock::observe::METRIC_*`.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redisson_lock::observe::LOCK_SECONDS_BUCKETS;
use redisson_lock::{Config, LockClient};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let addr: SocketAddr = std::env::var("METRICS_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:9464".into())
        .parse()?;

    // Within a Tokio runtime the listener is a task of it; the address is bound here, so a
    // busy one is an error now rather than a silent scrape failure later. The wait and hold
    // times become histograms with the library's buckets (without buckets this exporter
    // serves summaries: per-process quantiles no query can add up across a fleet).
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            Matcher::Prefix("redisson_lock_".into()),
            LOCK_SECONDS_BUCKETS,
        )?
        .install()?;
    println!("serving metrics at http://{addr}/metrics");

    // A short watchdog timeout (renewal every 0.5 s) so renewals show up within a second.
    // (The held and waiters gauges move at once, with each acquire, wait and release.)
    let config = Config::from_url(&url)?.with_watchdog_timeout(Duration::from_millis(1500));
    let client = LockClient::with_config(config).await?;
    let orders = client.lock("redisson-lock:examples:prometheus:orders");

    // Held across a few renewals: redisson_lock_acquires_total{result="acquired"},
    // redisson_lock_renewals_total{result="renewed"}, then redisson_lock_hold_seconds.
    let guard = orders.lock().await?;
    tokio::time::sleep(Duration::from_millis(1200)).await;

    // Another owner (a plain call outside any owner scope is a fresh owner) waits 200 ms for
    // it and gives up: redisson_lock_acquires_total{result="timed_out"}.
    let other = orders.try_lock_for(Duration::from_millis(200)).await?;
    println!(
        "another owner's bounded wait: {}",
        if other.is_some() {
            "acquired (unexpected!)"
        } else {
            "gave up, as it should"
        }
    );
    drop(other);
    guard.unlock().await?;

    // One lock held for as long as the service runs: redisson_lock_held 1.
    let reports = client.lock("redisson-lock:examples:prometheus:reports");
    let held = reports.lock().await?;
    println!(
        "holding {:?}; try `curl -s http://{addr}/metrics | grep redisson_lock`; Ctrl-C to stop",
        held.name()
    );
    tokio::signal::ctrl_c().await?;

    held.unlock().await?;
    client.shutdown().await;
    println!("released and shut down");
    Ok(())
}
