//! The `model` feature's side of the facade: each primitive is shuttle's when it is made or
//! used inside a shuttle execution (a model check), and the normal build's otherwise (the
//! paused-clock tests run the same build on tokio's runtime, against the same stand-in).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Whether the caller runs inside a shuttle execution.
pub(crate) fn checked() -> bool {
    shuttle::current::try_get_current_task().is_some()
}

/// A mutex with `parking_lot`'s signature (no poisoning): shuttle's inside a model.
#[derive(Debug)]
pub(crate) enum Mutex<T> {
    Checked(shuttle::sync::Mutex<T>),
    Plain(parking_lot::Mutex<T>),
}

/// A guard of [`Mutex`].
pub(crate) enum MutexGuard<'a, T> {
    Checked(shuttle::sync::MutexGuard<'a, T>),
    Plain(parking_lot::MutexGuard<'a, T>),
}

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        match checked() {
            true => Mutex::Checked(shuttle::sync::Mutex::new(value)),
            false => Mutex::Plain(parking_lot::Mutex::new(value)),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        match self {
            Mutex::Checked(m) => MutexGuard::Checked(m.lock().unwrap_or_else(|p| p.into_inner())),
            Mutex::Plain(m) => MutexGuard::Plain(m.lock()),
        }
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        match self {
            Mutex::Checked(m) => m.get_mut().unwrap_or_else(|p| p.into_inner()),
            Mutex::Plain(m) => m.get_mut(),
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> std::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            MutexGuard::Checked(g) => g,
            MutexGuard::Plain(g) => g,
        }
    }
}

impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        match self {
            MutexGuard::Checked(g) => g,
            MutexGuard::Plain(g) => g,
        }
    }
}

/// Atomics: shuttle's inside a model (every access a point where it may switch tasks).
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::Ordering;

    pub(crate) fn fence(order: Ordering) {
        match super::checked() {
            true => shuttle::sync::atomic::fence(order),
            false => std::sync::atomic::fence(order),
        }
    }

    macro_rules! atomic {
        ($name:ident, $t:ty $(, $op:ident)*) => {
            #[derive(Debug)]
            pub(crate) enum $name {
                Checked(shuttle::sync::atomic::$name),
                Plain(std::sync::atomic::$name),
            }

            impl Default for $name {
                fn default() -> Self {
                    $name::new(<$t>::default())
                }
            }

            // (The same methods for every width, whichever the engine uses of each.)
            #[allow(dead_code)]
            impl $name {
                pub(crate) fn new(value: $t) -> Self {
                    match super::checked() {
                        true => $name::Checked(shuttle::sync::atomic::$name::new(value)),
                        false => $name::Plain(std::sync::atomic::$name::new(value)),
                    }
                }

                pub(crate) fn load(&self, order: Ordering) -> $t {
                    match self {
                        $name::Checked(a) => a.load(order),
                        $name::Plain(a) => a.load(order),
                    }
                }

                pub(crate) fn store(&self, value: $t, order: Ordering) {
                    match self {
                        $name::Checked(a) => a.store(value, order),
                        $name::Plain(a) => a.store(value, order),
                    }
                }

                pub(crate) fn swap(&self, value: $t, order: Ordering) -> $t {
                    match self {
                        $name::Checked(a) => a.swap(value, order),
                        $name::Plain(a) => a.swap(value, order),
                    }
                }

                $(
                    pub(crate) fn $op(&self, value: $t, order: Ordering) -> $t {
                        match self {
                            $name::Checked(a) => a.$op(value, order),
                            $name::Plain(a) => a.$op(value, order),
                        }
                    }
                )*
            }
        };
    }

    atomic!(AtomicBool, bool, fetch_or);
    atomic!(AtomicU8, u8, fetch_or, fetch_add, fetch_sub);
    atomic!(AtomicU32, u32, fetch_add, fetch_sub);
    atomic!(AtomicU64, u64, fetch_add, fetch_sub);
    atomic!(AtomicUsize, usize, fetch_add, fetch_sub);
}

/// A task: shuttle's inside a model, else tokio's. (Every caller drops the handle: the
/// engine's tasks end on their own.)
pub(crate) fn spawn<F>(future: F)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match checked() {
        true => drop(shuttle::future::spawn(future)),
        false => drop(tokio::spawn(future)),
    }
}

/// A point where another task may run.
pub(crate) async fn yield_now() {
    match checked() {
        true => shuttle::future::yield_now().await,
        false => tokio::task::yield_now().await,
    }
}

/// The tasks of a release task's jobs, as tokio's `JoinSet<()>` is used: spawned, and joined
/// one at a time in any order.
#[derive(Default)]
pub(crate) struct JoinSet {
    running: usize,
    finished: Arc<(std::sync::atomic::AtomicUsize, Notify)>,
}

impl JoinSet {
    pub(crate) fn new() -> JoinSet {
        JoinSet::default()
    }

    pub(crate) fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        use std::sync::atomic::Ordering::SeqCst;
        self.running += 1;
        let finished = self.finished.clone();
        spawn(async move {
            task.await;
            finished.0.fetch_add(1, SeqCst);
            finished.1.notify_one();
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.running == 0
    }

    /// The next task to end, or `None` when none runs.
    pub(crate) async fn join_next(&mut self) -> Option<Result<(), Infallible>> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.running == 0 {
            return None;
        }
        loop {
            if self.finished.0.load(SeqCst) > 0 {
                self.finished.0.fetch_sub(1, SeqCst);
                self.running -= 1;
                return Some(Ok(()));
            }
            self.finished.1.notified().await;
        }
    }
}

/// A timer. Inside a model: a scheduling point, then its deadline has come; or never, as the
/// model says ([`crate::model::set_timers`]). Outside: tokio's.
pub(crate) async fn sleep(duration: Duration) {
    match (checked(), crate::model::timers_fire()) {
        (true, true) => shuttle::future::yield_now().await,
        (true, false) => std::future::pending().await,
        (false, _) => tokio::time::sleep(duration).await,
    }
}

pub(crate) async fn sleep_until(deadline: Instant) {
    match checked() {
        true => sleep(Duration::ZERO).await,
        false => tokio::time::sleep_until(deadline).await,
    }
}

/// Inside a model a timeout never elapses (a lost reply is the stand-in's to inject).
pub(crate) async fn timeout<F: Future>(
    duration: Duration,
    future: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    match checked() {
        true => Ok(future.await),
        false => tokio::time::timeout(duration, future).await,
    }
}

pub(crate) async fn timeout_at<F: Future>(
    deadline: Instant,
    future: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    match checked() {
        true => Ok(future.await),
        false => tokio::time::timeout_at(deadline, future).await,
    }
}

/// The wall clock, moved by tokio's clock: the real time at the first call plus however far
/// the runtime's clock (paused in the lease tests) has gone since, so that deadlines written
/// in the client's clock pass with the test's time. Inside a model, where time stands still,
/// it is the real clock.
pub(crate) fn epoch_ms() -> u64 {
    static START: std::sync::OnceLock<(std::time::Instant, u64)> = std::sync::OnceLock::new();
    let (instant, wall) = *START.get_or_init(|| {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        (std::time::Instant::now(), wall)
    });
    let now = Instant::now().into_std();
    // A runtime's paused clock may stand before the first call (it started earlier).
    match now.checked_duration_since(instant) {
        Some(ahead) => wall + ahead.as_millis() as u64,
        None => wall - instant.duration_since(now).as_millis() as u64,
    }
}
