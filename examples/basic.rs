//! The basics: connect, take a lock, release it, try a bounded wait with a fixed lease, shut
//! down.
//!
//! A `lock()` waits as long as it takes and is renewed by the watchdog while held (30 s lease,
//! renewed every 10 s); `try_lock_for_with_lease` waits at most a given time and holds for a
//! fixed lease that nothing renews. While one owner holds the lock, any other owner (here: a
//! plain `try_lock` outside any owner scope, which is a fresh owner) is refused.
//!
//! Run it against a local server:
//!
//! ```text
//! redis-server &                      # start a server first (any Redis >= 6.2 or Valkey)
//! cargo run --example basic           # REDIS_URL=redis://host:port/ to use another server
//! ```

use std::time::Duration;

use redisson_lock::LockClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::connect(&url).await?;
    println!("connected to {url} as client {}", client.client_id());

    let lock = client.lock("redisson-lock:examples:basic");

    // Wait as long as it takes; the watchdog renews the lease while the guard is alive.
    let guard = lock.lock().await?;
    println!(
        "locked {:?} as {} (lease left: {:?}, renewed by the watchdog)",
        guard.name(),
        guard.owner_field(),
        lock.remaining_lease().await?
    );

    // Another owner cannot take it meanwhile: one attempt, no waiting.
    let other = lock.try_lock().await?;
    println!(
        "another owner's try_lock while held: {}",
        if other.is_some() {
            "acquired (unexpected!)"
        } else {
            "refused, as it should be"
        }
    );
    drop(other);

    guard.unlock().await?;
    println!("unlocked; is_locked = {}", lock.is_locked().await?);

    // Bounded wait (2 s), fixed lease (10 s, never renewed).
    match lock
        .try_lock_for_with_lease(Duration::from_secs(2), Duration::from_secs(10))
        .await?
    {
        Some(guard) => {
            println!(
                "try_lock_for_with_lease: acquired with a fixed lease of {:?} (left: {:?})",
                guard.lease().expect("a fixed lease"),
                lock.remaining_lease().await?
            );
            guard.unlock().await?;
            println!("released it");
        }
        None => println!("try_lock_for_with_lease: still held by someone else after 2 s"),
    }

    // Releases anything still held and stops the client's background tasks.
    client.shutdown().await;
    println!("client shut down");
    Ok(())
}
