//! The public lock primitives, one file per kind, each a thin layer over the engine: a handle
//! (`Lock`) whose methods pick a lease and a wait and call the shared acquire loop, and an owned
//! RAII guard (`LockGuard`). A new Redisson lock kind (fenced, fair, read-write, spin) goes
//! here as a file of its own, with its scripts under `raw/`.

pub(crate) mod acquire;
pub(crate) mod events;
pub(crate) mod fenced;
pub(crate) mod guard;
pub(crate) mod latch;
pub(crate) mod lock;
pub(crate) mod multi;
pub(crate) mod permit;
pub(crate) mod read_write;
pub(crate) mod red_lock;
pub(crate) mod semaphore;
