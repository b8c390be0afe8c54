//! Reentrancy: inside one `Owner::scope`, nested code re-enters a lock it already holds
//! without passing guards around, and `hold_count` counts the holds (Redisson's reentrant
//! `RLock`, where the owner is a Java thread).
//!
//! A task spawned from inside the scope is *not* in it: it is another owner, and waits like
//! anyone else. `Lock::with_owner` binds an owner to a handle instead of a scope.
//!
//! Run it against a local server:
//!
//! ```text
//! redis-server &                      # start a server first (any Redis >= 6.2 or Valkey)
//! cargo run --example reentrancy      # REDIS_URL=redis://host:port/ to use another server
//! ```

use std::time::Duration;

use redisson_lock::{LockClient, Owner};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::connect(&url).await?;
    let lock = client.lock("redisson-lock:examples:reentrancy");

    let owner = Owner::new();
    println!("owner {} enters its scope", owner.id());
    owner
        .scope(async {
            let outer = lock.lock().await?;
            println!("outer lock: hold_count = {}", lock.hold_count().await?);

            // Nested code, same scope: re-enters instead of waiting for itself.
            let inner = lock.lock().await?;
            println!(
                "inner lock (re-entered): hold_count = {}",
                lock.hold_count().await?
            );

            // A spawned task is outside the scope, so it is a different owner: it must wait.
            let other = lock.clone();
            let refused = tokio::spawn(async move {
                other
                    .try_lock_for(Duration::from_millis(200))
                    .await
                    .map(|g| g.is_none())
            })
            .await
            .expect("task panicked")?;
            println!("a spawned task (another owner) waited 200 ms and was refused: {refused}");

            inner.unlock().await?;
            println!("inner unlocked: hold_count = {}", lock.hold_count().await?);
            outer.unlock().await?;
            println!(
                "outer unlocked: hold_count = {}, is_locked = {}",
                lock.hold_count().await?,
                lock.is_locked().await?
            );
            Ok::<_, redisson_lock::Error>(())
        })
        .await?;

    // The same without a scope: bind the owner to the handle.
    let mine = client
        .lock("redisson-lock:examples:reentrancy")
        .with_owner(owner);
    let a = mine.lock().await?;
    let b = mine.lock().await?;
    println!(
        "with_owner: two holds by owner {} (hold_count_of = {})",
        owner.id(),
        mine.hold_count_of(owner).await?
    );
    b.unlock().await?;
    a.unlock().await?;

    client.shutdown().await;
    println!("done");
    Ok(())
}
