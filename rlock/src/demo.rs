//! `rlock demo`: a scripted story on a private `redis-server`, told as a timeline.
//!
//! Two clients, alice and bob (two `LockClient`s, so two client UUIDs), with a 1 s watchdog
//! timeout so the watchdog's work is visible in a few seconds. Scenes: contention and waking by
//! the unlock message, reentrancy, the watchdog keeping a lock past its lease, and a lock lost
//! behind its holder's back.

use std::io::Write;
use std::time::{Duration, Instant};

use redisson_lock::{Config, LockClient, Owner};

use crate::demo_server::DemoServer;
use crate::duration::format_duration;
use crate::failure::{self, Failure};
use crate::names;
use crate::process::Signals;

/// The demo's watchdog timeout: short, so renewals happen while you watch.
const WATCHDOG: Duration = Duration::from_secs(1);

/// Prints timeline lines prefixed with the time since the demo started.
struct Timeline {
    start: Instant,
}

impl Timeline {
    fn say(&self, line: impl AsRef<str>) {
        let t = self.start.elapsed().as_secs_f64();
        // A closed stdout must not turn into a panic.
        let _ = writeln!(std::io::stdout(), "[{t:>8.3}s] {}", line.as_ref());
    }

    fn scene(&self, title: &str) {
        let _ = writeln!(std::io::stdout(), "\n== {title} ==");
    }
}

/// Runs the demo: starts the server (synchronously, before `runtime` is entered), tells the
/// story, stops the server. A signal (Ctrl-C) or an error stops the server too.
pub fn demo(runtime: &tokio::runtime::Runtime) -> Result<u8, Failure> {
    let timeline = Timeline {
        start: Instant::now(),
    };
    let server = DemoServer::start()?;
    timeline.say(format!(
        "started redis-server on 127.0.0.1:{} (scratch directory, no persistence)",
        server.port()
    ));
    let url = server.url();
    let result = runtime.block_on(async {
        let mut signals = Signals::install()
            .map_err(|e| Failure::new(failure::FAILURE, format!("cannot handle signals: {e}")))?;
        tokio::select! {
            told = story(&url, &timeline) => told,
            signal = signals.recv() => Err(Failure::new(
                128 + signal as u8,
                format!("demo interrupted by {signal}; redis-server stopped"),
            )),
        }
    });
    drop(server);
    if result.is_ok() {
        timeline.say("stopped redis-server; demo finished");
    }
    result.map(|()| 0)
}

/// The story itself.
async fn story(url: &str, t: &Timeline) -> Result<(), Failure> {
    let config = Config::from_url(url)
        .map_err(Failure::from_lock)?
        .with_watchdog_timeout(WATCHDOG);
    let alice = LockClient::with_config(config.clone())
        .await
        .map_err(Failure::from_lock)?;
    let bob = LockClient::with_config(config)
        .await
        .map_err(Failure::from_lock)?;
    let mut raw = redis::Client::open(url)
        .map_err(Failure::from_redis)?
        .get_multiplexed_async_connection()
        .await
        .map_err(Failure::from_redis)?;
    t.say(format!(
        "alice is client {}, bob is client {} (watchdog timeout {})",
        short(alice.client_id()),
        short(bob.client_id()),
        format_duration(WATCHDOG)
    ));

    // 1. Contention: bob waits, and the unlock message wakes him.
    t.scene("1. alice holds `orders`, bob waits");
    let orders = alice.lock("orders");
    let held = orders.lock().await.map_err(Failure::from_lock)?;
    t.say(format!(
        "alice acquired orders (field {})",
        names::short_field(&held.owner_field())
    ));
    let bob_owner = Owner::new();
    let bob_orders = bob.lock("orders").with_owner(bob_owner);
    let asked_at = Instant::now();
    let waiting = tokio::spawn({
        let lock = bob_orders.clone();
        async move {
            let guard = lock.lock().await;
            (guard, Instant::now())
        }
    });
    t.say("bob asks for orders: held by alice, so bob subscribes to its channel and waits");
    wait_for_subscriber(&mut raw, &names::channel("orders")).await?;
    t.say(format!(
        "bob is subscribed to {} and sleeps until a message (or alice's lease) says try again",
        names::channel("orders")
    ));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let left = orders.remaining_lease().await.map_err(Failure::from_lock)?;
    let unlocked_at = Instant::now();
    held.unlock().await.map_err(Failure::from_lock)?;
    t.say(format!(
        "alice released orders with {} of lease left; the unlock published \"0\" on {}",
        left.map(format_duration).unwrap_or_default(),
        names::channel("orders")
    ));
    let (guard, acquired_at) = waiting
        .await
        .map_err(|e| Failure::new(failure::FAILURE, format!("bob's task failed: {e}")))?;
    let outer = guard.map_err(Failure::from_lock)?;
    t.say(format!(
        "bob acquired orders {} after alice's unlock, having waited {}: woken by the unlock message, not by a timer (field {})",
        format_duration(acquired_at.saturating_duration_since(unlocked_at)),
        format_duration(acquired_at.saturating_duration_since(asked_at)),
        names::short_field(&outer.owner_field())
    ));

    // 2. Reentrancy: the same owner takes the lock again.
    t.scene("2. bob re-enters `orders`");
    let inner = bob_orders.lock().await.map_err(Failure::from_lock)?;
    let holds = bob_orders.hold_count().await.map_err(Failure::from_lock)?;
    t.say(format!(
        "bob re-entered orders: hold count {holds} (HGET orders {} = {holds})",
        names::short_field(&inner.owner_field())
    ));
    inner.unlock().await.map_err(Failure::from_lock)?;
    let holds = bob_orders.hold_count().await.map_err(Failure::from_lock)?;
    t.say(format!(
        "bob released the inner hold: hold count {holds}, still held"
    ));
    outer.unlock().await.map_err(Failure::from_lock)?;
    let locked = bob_orders.is_locked().await.map_err(Failure::from_lock)?;
    t.say(format!(
        "bob released the outer hold: orders is {}",
        if locked {
            "still held (unexpected!)"
        } else {
            "free (the key is deleted)"
        }
    ));

    // 3. The watchdog keeps a lock alive past its lease.
    t.scene("3. the watchdog keeps `reports` past its lease");
    let reports = alice.lock("reports");
    let held = reports.lock().await.map_err(Failure::from_lock)?;
    t.say(format!(
        "alice acquired reports with the watchdog: lease {}, renewed every {}",
        format_duration(WATCHDOG),
        format_duration(WATCHDOG / 3)
    ));
    for second in 1..=3 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let left = reports
            .remaining_lease()
            .await
            .map_err(Failure::from_lock)?;
        t.say(match left {
            Some(left) => format!(
                "{second}s in, {} past the first lease's end: reports still held, {} left (renewed by the watchdog)",
                if second == 1 { "just" } else { "well" },
                format_duration(left)
            ),
            None => format!("{second}s in: reports expired (the watchdog failed!)"),
        });
    }
    held.unlock().await.map_err(Failure::from_lock)?;
    t.say("alice released reports");

    // 4. A lock lost behind its holder's back.
    t.scene("4. `invoices` is deleted behind alice's back");
    let held = alice
        .lock("invoices")
        .lock()
        .await
        .map_err(Failure::from_lock)?;
    t.say("alice acquired invoices and races her work against the lock-lost signal");
    // (Her client listens for a hold's loss once it has lived 10 ms.)
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _: i64 = redis::cmd("DEL")
        .arg("invoices")
        .query_async(&mut raw)
        .await
        .map_err(Failure::from_redis)?;
    let deleted_at = Instant::now();
    t.say("the demo runs DEL invoices (an operator, an eviction, a failover...)");
    match tokio::time::timeout(WATCHDOG * 2, held.lost()).await {
        Ok(()) => {
            let took = deleted_at.elapsed();
            let how = if took < WATCHDOG / 3 {
                "her client heard the DEL (this server sends keyspace events)"
            } else {
                "the next renewal found the lock gone"
            };
            t.say(format!(
                "alice's lost signal fired {} after the DEL: {how}; her work must stop",
                format_duration(took)
            ))
        }
        Err(_) => t.say("alice's lost signal did not fire (unexpected!)"),
    }
    match held.unlock().await {
        Err(err) => t.say(format!("alice's unlock reports: {err}")),
        Ok(()) => t.say("alice's unlock succeeded (unexpected!)"),
    }

    alice.shutdown().await;
    bob.shutdown().await;
    Ok(())
}

/// Waits (at most 5 s) until someone is subscribed to `channel`: bob is then really waiting.
async fn wait_for_subscriber(
    raw: &mut redis::aio::MultiplexedConnection,
    channel: &str,
) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(raw)
            .await
            .map_err(Failure::from_redis)?;
        if subscribers > 0 || Instant::now() > deadline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The first 8 characters of a client id.
fn short(client_id: &str) -> String {
    format!("{}…", &client_id[..8.min(client_id.len())])
}
