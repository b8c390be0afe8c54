//! Lock events against Redisson's own listeners, per Redisson version, on a server with
//! `notify-keyspace-events Egx` (what Redisson's listeners need): a Java
//! `addListener(DeletedObjectListener)` hears our unlock and forced unlock, its
//! `ExpiredObjectListener` our lease running out; our `Lock::events` hears Java's unlock, forced
//! unlock and lease running out, each told once.

mod support;

use std::path::Path;
use std::time::Duration;

use redisson_lock::{Lease, LockClient, LockEvent, LockEvents, Wait};
use serde_json::{json, Value};
use support::java::JavaAgent;
use support::RedisServer;
use tokio::time::timeout;

const WATCHDOG_MS: u64 = 1500;
const PROMPT: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(300);

support::java::scenarios!(
    java_listeners_hear_rust_releases_and_its_lease_running_out,
    rust_events_hear_java_releases_and_its_lease_running_out,
);

/// Fields drop in order: the JVM first, the Redis server last.
struct Setup {
    java: JavaAgent,
    rust: LockClient,
    server: RedisServer,
}

async fn setup(jar: &Path) -> Setup {
    let server = RedisServer::start();
    let _: String = server.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Egx"]);
    let java = JavaAgent::start(jar, &server.url(), WATCHDOG_MS).await;
    let rust = server.client().await;
    Setup { java, rust, server }
}

/// What the Java listeners of `name` heard next (`null` if nothing within `wait`).
async fn heard(java: &JavaAgent, name: &str, wait: Duration) -> Value {
    let extra = json!({ "waitMs": wait.as_millis() as u64 });
    java.call("listenNext", name, "listener", extra)
        .await
        .unwrap()
}

async fn next(events: &mut LockEvents) -> LockEvent {
    timeout(PROMPT, events.next())
        .await
        .expect("an event came")
        .expect("the stream is open")
}

async fn java_listeners_hear_rust_releases_and_its_lease_running_out(jar: &Path) {
    let Setup { java, rust, server } = setup(jar).await;
    let name = "java-listens";
    java.call("listenAdd", name, "listener", json!({}))
        .await
        .unwrap();
    let lock = rust.lock(name);

    lock.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(heard(&java, name, PROMPT).await, json!("deleted"));
    let held = lock.lock().await.unwrap();
    assert!(rust.lock(name).force_unlock().await.unwrap());
    assert_eq!(heard(&java, name, PROMPT).await, json!("deleted"));
    drop(held);
    assert_eq!(heard(&java, name, QUIET).await, Value::Null, "once each");

    // A Rust holder whose lease runs out while it cannot reach the server.
    let (proxy, frozen) = support::proxied_client(&server).await;
    let _guard = frozen
        .lock(name)
        .acquire(Wait::Forever, Lease::Fixed(Duration::from_millis(300)))
        .await
        .unwrap();
    proxy.set_delay(Duration::from_secs(3));
    assert_eq!(heard(&java, name, PROMPT).await, json!("expired"));
}

async fn rust_events_hear_java_releases_and_its_lease_running_out(jar: &Path) {
    let Setup {
        java,
        rust,
        server: _server,
    } = setup(jar).await;
    let name = "rust-listens";
    let mut events = rust.lock(name).events().await.unwrap();
    let call = |op: &'static str, extra: Value| java.call(op, name, "t", extra);

    call("lock", json!({})).await.unwrap();
    call("unlock", json!({})).await.unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Released);
    call("lock", json!({})).await.unwrap();
    assert_eq!(call("forceUnlock", json!({})).await.unwrap(), json!(true));
    assert_eq!(next(&mut events).await, LockEvent::Released);
    if let Ok(more) = timeout(QUIET, events.next()).await {
        panic!("told once each, then {more:?}");
    }

    // Java holds with a lease it lets run out (Redisson renews no fixed lease).
    call("lock", json!({ "leaseMs": 300 })).await.unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Expired);
}
