//! Kind-agnostic mechanics every lock shares: the registry of held locks and their lease
//! clocks (`holds`), renewal (`watchdog`), exactly-once acquire (`request`), releasing and the
//! background release task (`release`), and local hand-off between waiters of one client
//! (`handoff`). Nothing here knows which Redis topology it runs on, and none of it is public.

pub(crate) mod handoff;
pub(crate) mod holds;
pub(crate) mod release;
pub(crate) mod request;
pub(crate) mod watchdog;
