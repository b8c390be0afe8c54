//! The lock-lost signal a hold's guards share, and its lease clock: why the lock was lost,
//! the cancellation token made only when a guard asks for one, and the instant the lease runs
//! out unless a renewal is confirmed first.

use crate::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why a lock was lost (see [`LockGuard::lost_reason`](crate::LockGuard::lost_reason)).
///
/// ```
/// use redisson_lock::LostReason;
///
/// let reason = LostReason::Gone;
/// assert_eq!(reason.to_string(), "renewal found the lock deleted or held by another owner");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// Renewal found the lock deleted, expired, or held by another owner.
    Gone,
    /// A whole lease passed without a confirmed renewal (Redis unreachable or too slow), so the
    /// lock may have expired.
    Unconfirmed,
    /// The fixed lease ran out.
    LeaseExpired,
    /// The client shut down and released it.
    Shutdown,
}

impl LostReason {
    /// A short name for metrics and logs: `gone`, `unconfirmed`, `lease_expired`, `shutdown`.
    ///
    /// ```
    /// assert_eq!(redisson_lock::LostReason::Gone.label(), "gone");
    /// ```
    pub fn label(&self) -> &'static str {
        match self {
            LostReason::Gone => "gone",
            LostReason::Unconfirmed => "unconfirmed",
            LostReason::LeaseExpired => "lease_expired",
            LostReason::Shutdown => "shutdown",
        }
    }
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Gone => "renewal found the lock deleted or held by another owner",
            LostReason::Unconfirmed => "no renewal was confirmed for a whole lease",
            LostReason::LeaseExpired => "the fixed lease ran out",
            LostReason::Shutdown => "the client shut down",
        })
    }
}

/// The lock-lost signal of one entry, shared by its guards through the entry's node: why it
/// fired, a cancellation token made only when a guard asks for one (most holds never do, and a
/// token costs more memory than the rest of the entry), and the **lease clock**: the instant
/// the hold's lease runs out unless a renewal is confirmed first. Past it the hold is lost
/// whatever Redis says later, so a guard can tell from the clock alone, at once, even if
/// nothing has run since (a frozen process, a starved runtime).
#[derive(Debug, Default)]
pub(crate) struct LostSignal {
    state: Mutex<LostState>,
    /// The lease clock, and the reason it gives when it runs out.
    clock: LeaseClock,
}

/// The lease clock in one atomic word, so that its deadline and its reason are read together
/// (and an entry keeps to its 128-byte allocation): nanoseconds after [`clock_base`] with the
/// lowest bit for the reason (1: the fixed lease ran out; 0: no renewal was confirmed in
/// time), 0 for none. The deadline gives up a nanosecond of precision for it.
#[derive(Debug, Default)]
struct LeaseClock(AtomicU64);

impl LeaseClock {
    fn set(&self, deadline: Instant, reason: LostReason) {
        let nanos = deadline.saturating_duration_since(clock_base()).as_nanos();
        let nanos = nanos.clamp(2, u64::MAX as u128) as u64 & !1;
        let lease = u64::from(reason == LostReason::LeaseExpired);
        self.0.store(nanos | lease, Ordering::Release);
    }

    fn get(&self) -> Option<(Instant, LostReason)> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            word => {
                let reason = match word & 1 {
                    1 => LostReason::LeaseExpired,
                    _ => LostReason::Unconfirmed,
                };
                Some((clock_base() + Duration::from_nanos(word & !1), reason))
            }
        }
    }
}

/// An optional instant in one atomic word: nanoseconds after [`clock_base`], 0 for none. The
/// registry keeps two per entry and the lease clock one, so they cost 8 bytes each.
#[derive(Debug, Default)]
pub(super) struct AtomicStamp(AtomicU64);

impl AtomicStamp {
    pub(super) fn new(at: Instant) -> AtomicStamp {
        let stamp = AtomicStamp::default();
        stamp.set(at);
        stamp
    }

    pub(super) fn set(&self, at: Instant) {
        let nanos = at.saturating_duration_since(clock_base()).as_nanos();
        self.0
            .store(nanos.clamp(1, u64::MAX as u128) as u64, Ordering::Release);
    }

    pub(super) fn get(&self) -> Option<Instant> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            nanos => Some(clock_base() + Duration::from_nanos(nanos)),
        }
    }
}

/// The instant lease clocks count from (taken on first use).
pub(super) fn clock_base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

#[derive(Debug, Default)]
struct LostState {
    reason: Option<LostReason>,
    token: Option<CancellationToken>,
}

impl LostSignal {
    /// Sets the lease clock: the hold is lost at `deadline` for `reason` unless set again.
    pub(super) fn set_clock(&self, deadline: Instant, reason: LostReason) {
        self.clock.set(deadline, reason);
    }

    /// When the lease clock runs out (`None` if it was never set).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.clock.get().map(|(deadline, _)| deadline)
    }

    /// Fires the signal if the lease clock has run out at `now`; returns whether it has fired.
    pub(crate) fn check_clock(&self, now: Instant) -> bool {
        if self.is_fired() {
            return true;
        }
        match self.clock_ran_out(now) {
            Some(reason) => {
                self.fire(reason);
                true
            }
            None => false,
        }
    }

    /// Why the lease clock has run out at `now`, if it has (fires nothing).
    pub(super) fn clock_ran_out(&self, now: Instant) -> Option<LostReason> {
        let (deadline, reason) = self.clock.get()?;
        (now >= deadline).then_some(reason)
    }

    /// Fires the signal; the first reason given sticks.
    pub(crate) fn fire(&self, reason: LostReason) {
        let token = {
            let mut state = self.state.lock();
            if state.reason.is_some() {
                return;
            }
            state.reason = Some(reason);
            state.token.clone()
        };
        if let Some(token) = token {
            token.cancel();
        }
    }

    pub(crate) fn is_fired(&self) -> bool {
        self.state.lock().reason.is_some()
    }

    pub(crate) fn reason(&self) -> Option<LostReason> {
        self.state.lock().reason
    }

    /// The signal's token (made on first use), cancelled once the signal fires.
    pub(crate) fn token(&self) -> CancellationToken {
        let mut state = self.state.lock();
        let token = state
            .token
            .get_or_insert_with(CancellationToken::new)
            .clone();
        if state.reason.is_some() {
            token.cancel();
        }
        token
    }
}
