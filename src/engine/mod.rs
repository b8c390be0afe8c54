//! Kind-agnostic mechanics every lock shares: the client's engine and its tasks (`core`), the
//! acquire loop (`acquire`), the registry of held locks and their lease clocks (`registry`), one
//! hold and its release (`hold`), renewal (`watchdog`), exactly-once acquire (`request`),
//! releasing and the background release task (`release`), spent unlock latches (`latches`),
//! and local hand-off between waiters of one client (`handoff`). Nothing here knows which
//! Redis topology it runs on, and none of it is public.

pub(crate) mod acquire;
pub(crate) mod core;
pub(crate) mod handoff;
pub(crate) mod hold;
pub(crate) mod latches;
pub(crate) mod loss;
pub(crate) mod registry;
pub(crate) mod release;
pub(crate) mod request;
pub(crate) mod watchdog;

pub(crate) use self::core::{Core, Engine};
