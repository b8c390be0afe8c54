//! The engine's synchronisation in one place: its mutexes, atomics, task spawning and timers.
//!
//! In every normal build these are `parking_lot`'s mutex, std's atomics and tokio's `spawn` and
//! timers, re-exported as they are: nothing is wrapped, nothing costs. With the `model` feature
//! they are shuttle's inside a shuttle execution (the model checks, `tests/model/`), so that
//! its scheduler decides every interleaving the engine's tasks can take
//! ([`checked`](self::checked); outside one, the same build runs on tokio, as the
//! paused-clock tests do):
//! - a lock or an atomic access is a point where shuttle may switch tasks;
//! - `spawn` makes a shuttle task;
//! - time does not pass: a sleep or a timer is a point where the task yields and then goes on,
//!   as if its deadline had come (so a model explores "the renewal fires now" at every step),
//!   and a timeout never fires (a lost reply is the stand-in server's to inject, not a clock's).
//!
//! tokio's `sync` types (`Notify`, `mpsc`, `oneshot`) work under any executor and are used as
//! they are. Code that a model never runs (the network connections, the Sentinel watcher, the
//! cluster router) uses tokio and `parking_lot` directly.

#[cfg(not(feature = "model"))]
pub(crate) use parking_lot::{Mutex, MutexGuard};
#[cfg(not(feature = "model"))]
pub(crate) use std::sync::atomic;
#[cfg(not(feature = "model"))]
pub(crate) use tokio::spawn;
/// The tasks of the release task's jobs.
#[cfg(not(feature = "model"))]
pub(crate) type JoinSet = tokio::task::JoinSet<()>;

#[cfg(feature = "model")]
mod checked;
#[cfg(feature = "model")]
pub(crate) use checked::{atomic, spawn, yield_now, JoinSet, Mutex, MutexGuard};

/// Timers: tokio's, or inside a model a yield ([module docs](self)).
pub(crate) mod time {
    #[cfg(not(feature = "model"))]
    pub(crate) use tokio::time::{sleep, sleep_until, timeout, timeout_at};

    #[cfg(feature = "model")]
    pub(crate) use super::checked::{sleep, sleep_until, timeout, timeout_at};

    /// The client's wall clock in ms since the Unix epoch, as a fair lock's queue deadlines
    /// and an expirable permit's expiry are written.
    #[cfg(not(feature = "model"))]
    pub(crate) fn epoch_ms() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }

    #[cfg(feature = "model")]
    pub(crate) use super::checked::epoch_ms;
}
