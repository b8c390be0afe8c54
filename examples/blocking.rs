//! The blocking API (`redisson_lock::blocking`) for synchronous code: the same locks, with one
//! owner per OS thread, exactly like Java's `RLock`. No async runtime is needed (the client runs
//! its own small one for I/O and the watchdog; calling it from inside a runtime panics).
//!
//! The main thread locks twice (re-entering), another thread is refused meanwhile and gets the
//! lock once it is released; finally a fixed-lease hold is left to run out, and
//! `wait_lost` sees the lock-lost signal fire.
//!
//! Run it against a local server:
//!
//! ```text
//! redis-server &                      # start a server first (any Redis >= 6.2 or Valkey)
//! cargo run --example blocking        # REDIS_URL=redis://host:port/ to use another server
//! ```

use std::time::Duration;

use redisson_lock::blocking::LockClient;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::connect(&url)?;
    let lock = client.lock("redisson-lock:examples:blocking");

    // Same thread: the second lock() re-enters.
    let outer = lock.lock()?;
    let inner = lock.lock()?;
    println!(
        "main thread holds it twice: hold_count = {}, held by this thread = {}",
        lock.hold_count()?,
        lock.is_held_by_current_thread()?
    );

    // Another thread is another owner: it waits, and gives up after 200 ms.
    let other = lock.clone();
    let refused = std::thread::spawn(move || {
        other
            .try_lock_for(Duration::from_millis(200))
            .map(|g| g.is_none())
    })
    .join()
    .expect("thread panicked")?;
    println!("another thread waited 200 ms and was refused: {refused}");

    inner.unlock()?;
    outer.unlock()?;
    println!("released both holds; is_locked = {}", lock.is_locked()?);

    // Now the other thread gets it at once, and may unlock from there.
    let other = lock.clone();
    std::thread::spawn(move || -> redisson_lock::Result<()> {
        let guard = other.lock()?;
        println!("another thread acquired it: {}", guard.owner_field());
        guard.unlock()
    })
    .join()
    .expect("thread panicked")?;

    // A fixed lease (no watchdog) runs out, and the guard's lock-lost signal fires.
    let guard = lock.lock_with_lease(Duration::from_millis(500))?;
    println!(
        "locked with a 500 ms lease (left: {:?}); letting it run out",
        lock.remaining_lease()?
    );
    let lost = guard.wait_lost(Duration::from_secs(5));
    println!(
        "lock-lost signal fired: {lost} ({})",
        guard
            .as_async()
            .lost_reason()
            .map_or_else(|| "no reason".to_string(), |r| r.to_string())
    );
    drop(guard);

    client.shutdown();
    println!("done");
    Ok(())
}
