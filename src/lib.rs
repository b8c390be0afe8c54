//! Distributed locks on Redis that speak **Redisson's on-wire format**.
//!
//! A [`Lock`] here and an `RLock` of the same name in a Java service using Redisson are the
//! same lock: the same hash, owner fields, TTLs, scripts' meaning, and pub/sub messages. Rust
//! and JVM services can contend on it in both directions, with mutual exclusion, reentrancy,
//! the watchdog, and waiters woken by the unlock message.
//!
//! - [`LockClient`]: one connection and identity (a Redisson client instance).
//! - [`Lock`]: a named reentrant lock; acquiring returns a [`LockGuard`].
//! - [`Owner`]: who holds a lock, the unit of reentrancy (Java's thread).
//! - [`blocking`]: the same API for synchronous code, one owner per OS thread.
//!
//! ```no_run
//! use redisson_lock::LockClient;
//!
//! # async fn demo() -> redisson_lock::Result<()> {
//! let client = LockClient::connect("redis://127.0.0.1:6379").await?;
//! let guard = client.lock("orders:42").lock().await?;
//! // Only one holder, across every Rust and Java client, until:
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod blocking;
mod client;
mod config;
mod engine;
mod error;
mod future;
pub mod inspect;
mod kinds;
#[cfg(feature = "model")]
#[doc(hidden)]
pub mod model;
pub mod names;
pub mod observe;
mod owner;
mod raw;
mod sync;
mod transport;

pub use client::LockClient;
pub use config::{Config, PublishMode};
pub use engine::registry::{Lease, LostReason};
pub use error::{Error, Result};
pub use kinds::acquire::Wait;
pub use kinds::events::{EventSources, LockEvent, LockEvents};
pub use kinds::fenced::{FencedGuard, FencedLock};
pub use kinds::guard::LockGuard;
pub use kinds::latch::CountDownLatch;
pub use kinds::lock::Lock;
pub use kinds::multi::{MultiGuard, MultiLock};
pub use kinds::permit::{Permit, PermitExpirableSemaphore};
pub use kinds::read_write::ReadWriteLock;
pub use kinds::red_lock::{RedGuard, RedLock};
pub use kinds::semaphore::{Semaphore, SemaphorePermits};
pub use owner::Owner;
pub use raw::BackOff;
