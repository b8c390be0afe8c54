//! Kind-agnostic mechanics every lock shares: the acquire loop (`acquire`), the registry of held locks and their lease
//! clocks (`holds`), one hold and its release (`hold`), renewal (`watchdog`), exactly-once acquire (`request`), releasing and the
//! background release task (`release`), and local hand-off between waiters of one client
//! (`handoff`). Nothing here knows which Redis topology it runs on, and none of it is public.

pub(crate) mod acquire;
pub(crate) mod handoff;
pub(crate) mod hold;
pub(crate) mod holds;
pub(crate) mod release;
pub(crate) mod request;
pub(crate) mod watchdog;

/// A boxed future the engine keeps or hands to its background task (an acquire in flight, an
/// unlock with a hand-off, a renewal batch).
pub(crate) type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
