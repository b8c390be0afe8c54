//! What the model checks run the engine on (`model` feature only): an in-memory stand-in for a
//! Redis server ([`server`]) that carries out the scripts' effects on Redisson's layouts, kept
//! honest by a differential test against the real scripts on a real server
//! (`tests/model_server.rs`).

pub mod link;
pub mod server;

use std::cell::Cell;

thread_local! {
    /// Whether the engine's timers fire (see [`set_timers`]): per thread, as each test runs
    /// its model's executions on its own thread.
    static TIMERS: Cell<bool> = const { Cell::new(true) };
}

/// Whether, in the models run on this thread from now on, the engine's timers fire (the
/// default: every sleep and timer is a point where its task yields, then goes on as if its
/// deadline had come) or never do. With timers that never fire, a task that waits for a
/// wake-up that never comes waits for ever, and shuttle reports the deadlock: how a model
/// shows that no waiter sleeps past a release it could have taken.
pub fn set_timers(fire: bool) {
    TIMERS.with(|timers| timers.set(fire));
}

/// See [`set_timers`].
pub(crate) fn timers_fire() -> bool {
    TIMERS.with(Cell::get)
}

/// The client's wall clock in ms since the Unix epoch, as the crate writes a fair lock's
/// queue deadlines and a permit's expiry. In this build it moves with tokio's clock (paused in
/// the lease tests), so a test reads those deadlines against it.
///
/// ```
/// let before = redisson_lock::model::now_ms();
/// assert!(redisson_lock::model::now_ms() >= before);
/// ```
pub fn now_ms() -> u64 {
    crate::sync::time::epoch_ms()
}
