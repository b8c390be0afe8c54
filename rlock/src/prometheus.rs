//! `rlock run --metrics-addr`: the library's metrics served to Prometheus while rlock runs.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};
use redisson_lock::observe::LOCK_SECONDS_BUCKETS;

use crate::failure::{self, Failure};

/// Installs the Prometheus recorder as the process's `metrics` recorder and starts its HTTP
/// listener on `addr` (any path answers with the text exposition format). The library's
/// wait and hold times are histograms with its buckets for locks (`LOCK_SECONDS_BUCKETS`), so
/// a fleet's scrapes add up; without buckets the exporter would serve summaries.
///
/// Called outside the runtime, the exporter gets a thread and runtime of its own: scrapes are
/// answered whatever rlock's single-threaded runtime is doing, and the listener ends with the
/// process. The address is bound here, before anything else happens, so a busy one fails
/// before any lock is taken; and installed before the lock is asked for, so its wait counts.
pub fn serve(addr: SocketAddr) -> Result<(), Failure> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            Matcher::Prefix("redisson_lock_".into()),
            LOCK_SECONDS_BUCKETS,
        )
        .map_err(|err| Failure::new(failure::FAILURE, format!("metrics buckets: {err}")))?
        .install()
        .map_err(|err| match err {
            BuildError::FailedToCreateHTTPListener(why) => Failure::new(
                failure::CANNOT_LISTEN,
                format!("cannot serve metrics on --metrics-addr {addr}: {why}; nothing was locked"),
            ),
            other => Failure::new(
                failure::FAILURE,
                format!("cannot serve metrics on --metrics-addr {addr}: {other}"),
            ),
        })
}
