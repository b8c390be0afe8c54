//! Compile-time checks: public types and the futures of public async fns are `Send` (and
//! guards `'static`), so they work in `tokio::spawn`. A `!Send` future here — say, a
//! `parking_lot` guard held across an `.await` — fails the build, not a user's.

use std::time::Duration;

use redisson_lock::{Config, Error, Lock, LockClient, LockGuard, Owner};

fn is_send<T: Send>(_: &T) {}
fn is_send_sync_static<T: Send + Sync + 'static>() {}

#[test]
fn public_types_are_send_sync_and_static() {
    is_send_sync_static::<LockClient>();
    is_send_sync_static::<Lock>();
    is_send_sync_static::<LockGuard>();
    is_send_sync_static::<Owner>();
    is_send_sync_static::<Config>();
    is_send_sync_static::<Error>();
    is_send_sync_static::<redisson_lock::LostReason>();
    is_send_sync_static::<redisson_lock::PublishMode>();
    is_send_sync_static::<redisson_lock::blocking::LockClient>();
    is_send_sync_static::<redisson_lock::blocking::Lock>();
    is_send_sync_static::<redisson_lock::blocking::LockGuard>();
    is_send_sync_static::<redisson_lock::FencedLock>();
    is_send_sync_static::<redisson_lock::FencedGuard>();
    is_send_sync_static::<redisson_lock::MultiLock>();
    is_send_sync_static::<redisson_lock::MultiGuard>();
    is_send_sync_static::<redisson_lock::blocking::FencedLock>();
    is_send_sync_static::<redisson_lock::blocking::FencedGuard>();
    is_send_sync_static::<redisson_lock::RedLock>();
    is_send_sync_static::<redisson_lock::RedGuard>();
    is_send_sync_static::<redisson_lock::blocking::MultiLock>();
    is_send_sync_static::<redisson_lock::blocking::MultiGuard>();
    is_send_sync_static::<redisson_lock::blocking::RedLock>();
    is_send_sync_static::<redisson_lock::blocking::RedGuard>();
    is_send_sync_static::<redisson_lock::inspect::LockInfo>();
    is_send_sync_static::<redisson_lock::inspect::Scan>();
    is_send_sync_static::<redisson_lock::inspect::ServerStats>();
    is_send_sync_static::<redisson_lock::Semaphore>();
    is_send_sync_static::<redisson_lock::SemaphorePermits>();
    is_send_sync_static::<redisson_lock::blocking::Semaphore>();
    is_send_sync_static::<redisson_lock::blocking::SemaphorePermits>();
    is_send_sync_static::<redisson_lock::CountDownLatch>();
    is_send_sync_static::<redisson_lock::blocking::CountDownLatch>();
}

/// Never run: it only has to compile.
#[allow(dead_code, unused_must_use)]
async fn semaphore_futures_are_send(
    semaphore: redisson_lock::Semaphore,
    permits: redisson_lock::SemaphorePermits,
) {
    is_send(&semaphore.acquire(1));
    is_send(&semaphore.try_acquire_for(1, Duration::ZERO));
    is_send(&semaphore.release(1));
    is_send(&semaphore.add_permits(1));
    is_send(&semaphore.try_set_permits(1));
    is_send(&semaphore.available_permits());
    is_send(&semaphore.drain_permits());
    is_send(&permits.release());
}

/// Never run: it only has to compile.
#[allow(dead_code, unused_must_use)]
async fn latch_futures_are_send(latch: redisson_lock::CountDownLatch) {
    is_send(&latch.try_set_count(1));
    is_send(&latch.count_down());
    is_send(&latch.count());
    is_send(&latch.delete());
    is_send(&latch.wait());
    is_send(&latch.wait_for(Duration::ZERO));
}

/// Never run: it only has to compile.
#[allow(dead_code, unused_must_use)]
async fn other_kinds_futures_are_send(
    fenced: redisson_lock::FencedLock,
    multi: redisson_lock::MultiLock,
    guard: redisson_lock::MultiGuard,
    red: redisson_lock::RedLock,
    client: LockClient,
    mut scan: redisson_lock::inspect::Scan,
) {
    is_send(&red.lock());
    is_send(&red.try_lock_for(Duration::ZERO));
    is_send(&client.inspect("x"));
    is_send(&client.server_stats());
    is_send(&scan.next());
    is_send(&scan.next_page());
    is_send(&fenced.lock());
    is_send(&fenced.try_lock_for(Duration::from_secs(1)));
    is_send(&fenced.token());
    is_send(&fenced.with_lock(|token| async move { token }));
    is_send(&multi.lock());
    is_send(&multi.try_lock_for_with_lease(Duration::from_secs(1), Duration::from_secs(1)));
    is_send(&guard.lost());
    is_send(&guard.unlock());
}

/// Never run: it only has to compile.
#[allow(dead_code, unused_must_use)]
async fn futures_are_send(client: LockClient, lock: Lock, guard: LockGuard) {
    is_send(&LockClient::connect("redis://127.0.0.1"));
    is_send(&client.shutdown());
    is_send(&lock.lock());
    is_send(&lock.lock_with_lease(Duration::from_secs(1)));
    is_send(&lock.try_lock());
    is_send(&lock.try_lock_for(Duration::from_secs(1)));
    is_send(&lock.try_lock_for_with_lease(Duration::from_secs(1), Duration::from_secs(1)));
    is_send(&lock.force_unlock());
    is_send(&lock.is_locked());
    is_send(&lock.hold_count());
    is_send(&lock.remaining_lease());
    is_send(&Owner::new().scope(lock.lock()));
    is_send(&lock.with_lock(|| async { 1 }));
    is_send(&lock.is_held_by(Owner::new()));
    is_send(&lock.hold_count_of(Owner::new()));
    is_send(&lock.is_held_by_current());
    is_send(&guard.lost());
    is_send(&guard.unlock());
}
