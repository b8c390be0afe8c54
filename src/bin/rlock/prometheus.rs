//! `rlock run --metrics-addr`: the library's metrics served to Prometheus while rlock runs.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder};

use crate::failure::{self, Failure};

/// Installs the Prometheus recorder as the process's `metrics` recorder and starts its HTTP
/// listener on `addr` (any path answers with the text exposition format).
///
/// Called outside the runtime, the exporter gets a thread and runtime of its own: scrapes are
/// answered whatever rlock's single-threaded runtime is doing, and the listener ends with the
/// process. The address is bound here, before anything else happens, so a busy one fails
/// before any lock is taken; and installed before the lock is asked for, so its wait counts.
pub fn serve(addr: SocketAddr) -> Result<(), Failure> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
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
