//! What goes to Redis, per lock kind: the scripts (`scripts/lua/*.lua`), their KEYS and ARGV,
//! and how their replies map to outcomes. `rlock` is Redisson's `RLock`; every script and reply
//! is described in `docs/PROTOCOL.md`.

pub(crate) mod rlock;
