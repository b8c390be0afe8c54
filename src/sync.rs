//! The engine's synchronisation in one place: its mutexes, atomics, task spawning and timers.
//!
//! In every normal build these are `parking_lot`'s mutex, std's atomics and tokio's `spawn` and
//! timers, re-exported as they are: nothing is wrapped, nothing costs. With the `model` feature
//! (the crate's model checks, `tests/model.rs`) they are shuttle's, so that its scheduler
//! decides every interleaving the engine's tasks can take, and replays a failing one:
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
pub(crate) use model::{spawn, JoinSet, Mutex, MutexGuard};
#[cfg(feature = "model")]
pub(crate) use shuttle::sync::atomic;

/// Timers: tokio's, or under the model a yield ([module docs](self)).
pub(crate) mod time {
    #[cfg(not(feature = "model"))]
    pub(crate) use tokio::time::{sleep, sleep_until, timeout, timeout_at};

    #[cfg(feature = "model")]
    pub(crate) use super::model::{sleep, sleep_until, timeout, timeout_at};
}

/// The shuttle side of the facade.
#[cfg(feature = "model")]
mod model {
    use std::convert::Infallible;
    use std::future::Future;
    use std::sync::Arc;
    use std::time::Duration;

    use shuttle::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::Notify;
    use tokio::time::Instant;

    /// A mutex with `parking_lot`'s signature (no poisoning) over shuttle's.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    pub(crate) type MutexGuard<'a, T> = shuttle::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.0
                .get_mut()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }
    }

    /// A shuttle task (its handle is dropped by every caller: tasks end on their own).
    pub(crate) fn spawn<F>(future: F) -> shuttle::future::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        shuttle::future::spawn(future)
    }

    /// The tasks of a release task's jobs, as tokio's `JoinSet<()>` is used: spawned, and
    /// joined one at a time in any order.
    #[derive(Default)]
    pub(crate) struct JoinSet {
        running: usize,
        finished: Arc<(AtomicUsize, Notify)>,
    }

    impl JoinSet {
        pub(crate) fn new() -> JoinSet {
            JoinSet::default()
        }

        pub(crate) fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
            self.running += 1;
            let finished = self.finished.clone();
            spawn(async move {
                task.await;
                finished.0.fetch_add(1, Ordering::SeqCst);
                finished.1.notify_one();
            });
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.running == 0
        }

        /// The next task to end, or `None` when none runs.
        pub(crate) async fn join_next(&mut self) -> Option<Result<(), Infallible>> {
            if self.running == 0 {
                return None;
            }
            loop {
                let ended = self.finished.0.load(Ordering::SeqCst);
                if ended > 0 {
                    self.finished.0.fetch_sub(1, Ordering::SeqCst);
                    self.running -= 1;
                    return Some(Ok(()));
                }
                self.finished.1.notified().await;
            }
        }
    }

    pub(crate) async fn sleep(_: Duration) {
        shuttle::future::yield_now().await;
    }

    pub(crate) async fn sleep_until(_: Instant) {
        shuttle::future::yield_now().await;
    }

    /// Never elapses: the error type is tokio's, for the callers' signatures.
    pub(crate) async fn timeout<F: Future>(
        _: Duration,
        future: F,
    ) -> Result<F::Output, tokio::time::error::Elapsed> {
        Ok(future.await)
    }

    pub(crate) async fn timeout_at<F: Future>(
        _: Instant,
        future: F,
    ) -> Result<F::Output, tokio::time::error::Elapsed> {
        Ok(future.await)
    }
}
