//! Owner identity: who holds a lock, and so who may re-enter and unlock it.
//!
//! Redisson's owner is a Java thread. In async Rust a thread (or a tokio task id, which is
//! reused and shared by `join!` branches) is no identity at all, so owners here are values we
//! mint: an [`Owner`] is a process-wide unique positive number, and the hash field Redis sees is
//! `<client-uuid>:<owner-id>`, exactly Redisson's layout.

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};

static NEXT_OWNER_ID: AtomicI64 = AtomicI64::new(1);

tokio::task_local! {
    static CURRENT_OWNER: Owner;
}

thread_local! {
    static THREAD_OWNER: Owner = Owner::new();
}

/// A lock owner: the unit of reentrancy, like a thread in Java.
///
/// Every `Owner::new()` is distinct from every other for the life of the process (ids are never
/// reused). An acquire re-enters a lock its owner already holds; any other owner waits.
///
/// Which owner an operation uses, in order:
/// 1. the owner bound to the [`Lock`](crate::Lock) handle with [`Lock::with_owner`](crate::Lock::with_owner)
///    (the equivalent of Redisson's `lockAsync(threadId)`);
/// 2. the owner of the enclosing [`Owner::scope`], so nested async code re-enters without
///    passing guards around;
/// 3. otherwise a fresh owner for that one acquire (it never re-enters anything).
///
/// The blocking API uses one owner per OS thread, exactly like Java.
///
/// ```
/// use redisson_lock::Owner;
///
/// # tokio_test_block_on(async {
/// let owner = Owner::new();
/// let seen = owner.scope(async { Owner::current() }).await;
/// assert_eq!(seen, Some(owner));
/// assert_eq!(Owner::current(), None);
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(i64);

impl Owner {
    /// Mints a new owner, distinct from every other owner in this process.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Owner {
        let id = NEXT_OWNER_ID.fetch_add(1, Ordering::Relaxed);
        assert!(id > 0, "owner id space exhausted");
        Owner(id)
    }

    /// The owner's numeric id, the part after the `:` in the hash field (always in `1..=i64::MAX`).
    pub fn id(&self) -> i64 {
        self.0
    }

    /// Runs `fut` with `self` as the current owner: every lock acquired inside it (without an
    /// owner bound to the handle) is acquired by `self`, so nested calls re-enter.
    ///
    /// Two branches of one `join!` inside a scope share the owner, and so share holds; give each
    /// branch its own scope if they must exclude each other.
    pub async fn scope<F: Future>(self, fut: F) -> F::Output {
        CURRENT_OWNER.scope(self, fut).await
    }

    /// The owner of the enclosing [`Owner::scope`], if any.
    pub fn current() -> Option<Owner> {
        CURRENT_OWNER.try_with(|o| *o).ok()
    }

    /// The owner of the calling OS thread (used by the blocking API): stable for the thread's
    /// life, distinct from every other thread's and from every `Owner::new()`.
    pub fn for_current_thread() -> Owner {
        THREAD_OWNER.with(|o| *o)
    }

    /// The owner numbered `id` (unit tests name owners like fields: `u:1` is `from_id(1)`).
    #[cfg(test)]
    pub(crate) fn from_id(id: i64) -> Owner {
        Owner(id)
    }

    /// The hash field `<client_id>:<id>` this owner holds a lock under.
    pub(crate) fn field(&self, client_id: &str) -> String {
        let mut field = String::with_capacity(client_id.len() + 21);
        self.write_field(client_id, &mut field);
        field
    }

    /// The hash field `<client_id>:<id>` as [`Display`](std::fmt::Display), formatted only if
    /// shown (a span field no subscriber records never is).
    pub(crate) fn shown_field(self, client_id: &str) -> impl std::fmt::Display + '_ {
        struct Field<'a>(&'a str, i64);
        impl std::fmt::Display for Field<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}:{}", self.0, self.1)
            }
        }
        Field(client_id, self.0)
    }

    /// Appends the hash field to `out` (renewal formats a batch of fields into one buffer).
    pub(crate) fn write_field(&self, client_id: &str, out: &mut String) {
        use std::fmt::Write;
        out.push_str(client_id);
        let _ = write!(out, ":{}", self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_unique_and_positive() {
        let a = Owner::new();
        let b = Owner::new();
        assert_ne!(a, b);
        assert!(a.id() > 0 && b.id() > 0);
    }

    #[test]
    fn thread_owner_is_stable_per_thread_and_distinct_across_threads() {
        let here = Owner::for_current_thread();
        assert_eq!(here, Owner::for_current_thread());
        let there = std::thread::spawn(Owner::for_current_thread)
            .join()
            .unwrap();
        assert_ne!(here, there);
    }

    #[test]
    fn field_layout_matches_redisson() {
        let o = Owner(42);
        assert_eq!(
            o.field("0b7c9f7e-1111-4222-8333-444455556666"),
            "0b7c9f7e-1111-4222-8333-444455556666:42"
        );
        assert_eq!(o.shown_field("u").to_string(), o.field("u"));
    }
}
