//! Interop scenarios that run the same on every deployment of the agents (a cluster, a
//! sentinel group): what differs, where a lock lives and who listens, is a [`Deployment`].

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use redisson_lock::LockClient;

use super::java::JavaAgent;

/// Java's lease in these scenarios: far longer than any wake-up may take.
pub const LONG_LEASE_MS: u64 = 30_000;
const PROMPT: Duration = Duration::from_secs(5);

/// Where a deployment keeps a lock and its waiters.
pub trait Deployment {
    /// Runs `args` at the master that has `name`; its reply.
    fn at_master<T: redis::FromRedisValue>(&self, name: &str, args: &[&str]) -> T;

    /// Waits (else panics) until `name`'s channel has `n` listeners.
    fn until_listeners(&self, name: &str, n: i64) -> impl Future<Output = ()>;
}

/// Java unlock wakes a Rust waiter, then Rust unlock wakes a Java waiter, on `name` in `at`.
/// Both holds have 30 s leases: only the message can wake the waiter within [`PROMPT`].
pub async fn both_directions(
    at: &impl Deployment,
    java: &JavaAgent,
    rust: &LockClient,
    name: &str,
) {
    let hash = || -> BTreeMap<String, String> { at.at_master(name, &["HGETALL", name]) };
    let java_field = java.field("a").await;

    java.lock_lease(name, "a", LONG_LEASE_MS).await.unwrap();
    let lock = rust.lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| (Instant::now(), g)) });
    at.until_listeners(name, 1).await;
    assert!(
        !waiter.is_finished(),
        "the Rust waiter got in while Java holds"
    );
    let unlocked = Instant::now();
    java.unlock(name, "a").await.unwrap();
    let (acquired, guard) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("Redisson's unlock message woke the Rust waiter")
        .unwrap()
        .unwrap();
    assert!(acquired >= unlocked);
    assert_eq!(
        hash(),
        BTreeMap::from([(guard.owner_field(), "1".to_string())])
    );

    let mut java_waiter = java.lock_async_report(name, "a", None).await;
    at.until_listeners(name, 1).await;
    assert!(
        java_waiter
            .within(Duration::from_millis(300))
            .await
            .is_none(),
        "Redisson acquired while Rust holds"
    );
    guard.unlock().await.unwrap();
    assert!(
        java_waiter.within(PROMPT).await.is_some(),
        "the Rust unlock message woke the Java waiter"
    );
    assert_eq!(hash(), BTreeMap::from([(java_field, "1".to_string())]));
    java.unlock(name, "a").await.unwrap();
    let exists: i64 = at.at_master(name, &["EXISTS", name]);
    assert_eq!(exists, 0);
}
