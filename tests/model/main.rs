//! Model checks of the engine's races (the `model` feature): each model runs real clients of
//! this crate (engine, registry, watchdog, release task, hub) on shuttle's scheduler against the
//! in-memory stand-in server (`src/model/`), and asserts an invariant on every schedule it
//! explores. A failure prints the schedule, which `shuttle::replay` runs again.
//!
//! Each model runs `RLOCK_MODEL_ITERATIONS` schedules (default below) with shuttle's random
//! scheduler and as many with its PCT scheduler (depth 3), and prints how many it explored.
//! `scripts/model.sh --iterations N` runs them longer.
//!
//! Time does not pass in a model (src/sync.rs): every sleep and timer is a point where its task
//! may be overtaken, so the watchdog's renewal, a back-off's end or the loss watch's look can
//! come between any two steps of the code under test.

#![cfg(feature = "model")]

use std::sync::Arc;
use std::time::Duration;

use redisson_lock::model::link::Link;
use redisson_lock::model::server::Server;
use redisson_lock::{Config, LockClient, Owner};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config as ShuttleConfig, Runner};

mod checks;

use checks as models;

/// Schedules per scheduler when `RLOCK_MODEL_ITERATIONS` is not set (the CI run).
const DEFAULT_ITERATIONS: usize = 200;

/// Runs `model` under both schedulers and reports the schedules explored.
fn explore(name: &str, model: fn()) {
    let iterations = std::env::var("RLOCK_MODEL_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_ITERATIONS);
    let config = || {
        let mut config = ShuttleConfig::new();
        // (The engine's futures are large: shuttle's default 32 KiB task stack overflows.)
        config.stack_size = 0x20_0000;
        config.max_steps = shuttle::MaxSteps::FailAfter(2_000_000);
        config
    };
    // A failing schedule, as printed, runs again alone (the `schedule` line shuttle prints).
    if let Ok(schedule) = std::env::var("RLOCK_MODEL_REPLAY") {
        let replay = shuttle::scheduler::ReplayScheduler::new_from_encoded(schedule.trim());
        Runner::new(replay, config()).run(model);
        return;
    }
    let random = Runner::new(RandomScheduler::new(iterations), config()).run(model);
    let pct = Runner::new(PctScheduler::new(3, iterations), config()).run(model);
    // (Read by scripts/model.sh.)
    println!(
        "model {name}: {} schedules explored ({random} random, {pct} PCT)",
        random + pct
    );
}

/// A client of the stand-in `server` whose network fails commands as `faults` says.
async fn client(server: &Arc<Server>, faults: Option<models::Faults>) -> LockClient {
    let link = match faults {
        Some(plan) => Link::new(server.clone()).with_faults(plan),
        None => Link::new(server.clone()),
    };
    on(link).await
}

/// A client of `server` logging the commands it sends into `sent`.
async fn client_logged(server: &Arc<Server>, sent: checks::SentLog) -> LockClient {
    on(Link::new(server.clone()).with_sent_log(sent)).await
}

/// A client on `link`, configured as every model's clients are.
async fn on(link: Link) -> LockClient {
    let config = Config::from_url("redis://model.invalid:6379")
        .expect("a valid URL")
        .with_watchdog_timeout(Duration::from_secs(30));
    LockClient::on_model(config, link)
        .await
        .expect("a client on the stand-in")
}

/// A number below `n` chosen by the scheduler's random source (replayed with the schedule).
fn choose(n: u64) -> u64 {
    use shuttle::rand::RngCore;
    shuttle::rand::thread_rng().next_u64() % n
}

/// Lets other tasks run `n` times.
async fn pause(n: u64) {
    for _ in 0..n {
        shuttle::future::yield_now().await;
    }
}

/// Redisson #7272: a watchdog renewal outliving `unlock()`. One owner takes a watchdog lock and
/// releases it while the watchdog renews it; another client then takes it. No lost signal
/// fires for the released hold, and no renewal of the released hold ever succeeds.
#[test]
fn unlock_racing_the_watchdog_renewal() {
    explore("unlock racing the watchdog's renewal", || {
        shuttle::future::block_on(async {
            let server = Arc::new(Server::new());
            let a = client(&server, None).await;
            let b = client(&server, None).await;
            let lock = a.lock("m1").with_owner(Owner::new());
            let guard = lock.lock().await.expect("a free lock");
            let field = guard.owner_field();
            let lost = guard.lost_token();
            pause(choose(6)).await;
            guard.unlock().await.expect("unlocked");
            let released_at = server.history().len();
            let other = b.lock("m1").with_owner(Owner::new());
            let taken = other.lock().await.expect("taken after the unlock");
            pause(choose(6)).await;
            a.shutdown().await;
            assert!(
                !lost.is_cancelled(),
                "a lost signal fired for a hold its owner released"
            );
            models::assert_no_renewal_after(&server.history()[released_at..], "m1", &field);
            drop(taken);
            b.shutdown().await;
        });
    });
}

/// Redisson #7367: an acquire whose reply is lost is sent again, and the caller may give up
/// (its future dropped) at any point. In the end exactly one hold is counted (the caller got a
/// guard) or none, and nothing is left in Redis once the client has shut down.
#[test]
fn an_acquire_whose_reply_is_lost_racing_cancellation() {
    explore("a lost acquire reply, re-sent, racing cancellation", || {
        shuttle::future::block_on(async {
            let server = Arc::new(Server::new());
            let a = client(&server, Some(models::lose_first_reply("acquire", b"m2"))).await;
            let lock = a.lock("m2").with_owner(Owner::new());
            let give_up = choose(8);
            let got = tokio::select! {
                got = lock.lock() => Some(got.expect("acquired")),
                _ = pause(give_up) => None,
            };
            if let Some(guard) = &got {
                assert!(!guard.is_lost());
                let count = lock.hold_count().await.expect("a hold count");
                assert_eq!(count, 1, "one acquire counted {count} holds");
            }
            drop(got);
            a.shutdown().await;
            models::assert_no_lock_left(&server, "m2");
        });
    });
}

/// Local hand-off racing the waiter's cancellation and the releaser's shutdown: a holder
/// releases while another owner of the same client waits (the waiter's acquire rides behind
/// the unlock), the waiter may give up at any point, and the client may shut down at any
/// point. The lock ends held by exactly the waiter's live guard, or by nobody: never by a
/// hold no guard has (which would block everyone until its lease ran out).
#[test]
fn hand_off_racing_cancellation_and_shutdown() {
    explore("local hand-off racing cancellation and shutdown", || {
        shuttle::future::block_on(async {
            let server = Arc::new(Server::new());
            let a = Arc::new(client(&server, None).await);
            let holder = a.lock("m3").with_owner(Owner::new());
            let guard = holder.lock().await.expect("a free lock");
            let waiter = a.lock("m3").with_owner(Owner::new());
            let give_up = choose(10);
            let waiting = shuttle::future::spawn(async move {
                tokio::select! {
                    got = waiter.lock() => got.ok(),
                    _ = pause(give_up) => None,
                }
            });
            let shut_down = match choose(3) {
                0 => {
                    let a = a.clone();
                    let at = choose(10);
                    Some(shuttle::future::spawn(async move {
                        pause(at).await;
                        a.shutdown().await;
                    }))
                }
                _ => None,
            };
            pause(choose(4)).await;
            let _ = guard.unlock().await;
            let got = waiting.await.expect("the waiter's task");
            // (A shutdown releases the waiter's hold too: then only the end state tells.)
            if let (Some(guard), None) = (&got, &shut_down) {
                checks::assert_held_by(&server, "m3", &guard.owner_field(), 1);
            }
            drop(got);
            if let Some(shut_down) = shut_down {
                shut_down.await.expect("the shutdown's task");
            }
            a.shutdown().await;
            checks::assert_no_lock_left(&server, "m3");
        });
    });
}

/// A guard dropped racing its lost signal and a renewal's answer: another client force-unlocks
/// a held lock at any point while the holder's watchdog renews it and its guard may be
/// dropped. No renewal of the lost hold is sent once its loss was told, and nothing is left
/// held.
#[test]
fn guard_drop_racing_its_lost_signal_and_renewal() {
    explore(
        "a guard dropped racing its lost signal and a renewal",
        || {
            shuttle::future::block_on(async {
                let server = Arc::new(Server::new());
                let sent = checks::SentLog::default();
                let a = client_logged(&server, sent.clone()).await;
                let b = client(&server, None).await;
                let guard = a
                    .lock("m4")
                    .with_owner(Owner::new())
                    .lock()
                    .await
                    .expect("a free lock");
                let field = guard.owner_field();
                let lost = guard.lost_token();
                let sent_at_loss = Arc::new(std::sync::Mutex::new(None));
                {
                    let (told, sent_at_loss, sent) =
                        (guard.lost(), sent_at_loss.clone(), sent.clone());
                    shuttle::future::spawn(async move {
                        told.await;
                        *sent_at_loss.lock().unwrap() = Some(sent.lock().unwrap().len());
                    });
                }
                let forced = b.lock("m4");
                let force_at = choose(8);
                let forcing = shuttle::future::spawn(async move {
                    pause(force_at).await;
                    forced.force_unlock().await.expect("a forced unlock")
                });
                pause(choose(8)).await;
                drop(guard);
                forcing.await.expect("the forcing task");
                a.shutdown().await;
                if lost.is_cancelled() {
                    if let Some(at) = *sent_at_loss.lock().unwrap() {
                        checks::assert_no_renewal_sent(&sent.lock().unwrap()[at..], "m4", &field);
                    }
                }
                checks::assert_no_lock_left(&server, "m4");
                b.shutdown().await;
            });
        },
    );
}

/// Shutdown racing acquires, unlocks and the latch sweeper: owners take and release locks
/// while the client shuts down at any point. Once the shutdown is over, every hold is released
/// and no unlock latch is left behind (acquire latches stay by design until their PX: a
/// re-sent acquire must still find them).
#[test]
fn shutdown_racing_acquires_unlocks_and_the_sweeper() {
    explore(
        "shutdown racing acquires, unlocks and the latch sweeper",
        || {
            shuttle::future::block_on(async {
                let server = Arc::new(Server::new());
                let a = Arc::new(client(&server, None).await);
                let mut owners = Vec::new();
                for i in 0..2 {
                    let lock = a.lock(format!("m5-{i}")).with_owner(Owner::new());
                    owners.push(shuttle::future::spawn(async move {
                        for _ in 0..2 {
                            match lock.lock().await {
                                Ok(guard) => {
                                    pause(choose(3)).await;
                                    let _ = guard.unlock().await;
                                }
                                Err(_) => return,
                            }
                        }
                    }));
                }
                pause(choose(12)).await;
                a.shutdown().await;
                for owner in owners {
                    owner.await.expect("an owner's task");
                }
                for i in 0..2 {
                    checks::assert_no_lock_left(&server, &format!("m5-{i}"));
                }
                checks::assert_no_unlock_latch_left(&server);
            });
        },
    );
}

/// #7367 on the fair lock: a waiter queued behind a holder, whose acquire's reply is lost and
/// re-sent, gives up at any point while the holder releases at any point. The waiter is queued
/// once and withdrawn once: in the end nobody is left queued, and nothing is left held.
#[test]
fn a_fair_waiter_whose_reply_is_lost_racing_cancellation() {
    explore(
        "a fair waiter's lost reply, re-sent, racing cancellation",
        || {
            shuttle::future::block_on(async {
                let server = Arc::new(Server::new());
                let a = client(&server, None).await;
                let b = client(
                    &server,
                    Some(checks::lose_first_reply("fair_acquire", b"m2f")),
                )
                .await;
                let held = a.fair_lock("m2f").lock().await.expect("a free lock");
                let waiter = b.fair_lock("m2f").with_owner(Owner::new());
                let give_up = choose(10);
                let waiting = shuttle::future::spawn(async move {
                    tokio::select! {
                        got = waiter.lock() => got.ok(),
                        _ = pause(give_up) => None,
                    }
                });
                pause(choose(8)).await;
                held.unlock().await.expect("unlocked");
                let got = waiting.await.expect("the waiter's task");
                drop(got);
                a.shutdown().await;
                b.shutdown().await;
                checks::assert_no_lock_left(&server, "m2f");
                checks::assert_queue_empty(&server, "m2f");
            });
        },
    );
}

/// A waiter's wake racing its neighbour's withdrawal and a re-subscription (the class of the
/// fair-lock stall the benchmark once found): two waiters queue behind a holder of a fair
/// lock; the first gives up at any point, the second's pub/sub connection is cut at any point,
/// and the holder releases at any point. Timers never fire in this model, so a waiter that
/// misses the wake-up meant for it sleeps for ever, which shuttle reports as a deadlock: the
/// second waiter must get the lock.
#[test]
fn a_wake_racing_withdrawal_and_resubscription() {
    explore("a wake racing a withdrawal and a re-subscription", || {
        redisson_lock::model::set_timers(false);
        shuttle::future::block_on(async {
            let server = Arc::new(Server::new());
            let a = client(&server, None).await;
            let b = client(&server, None).await;
            let link = Link::new(server.clone());
            let c = on(link.clone()).await;
            let held = a.fair_lock("m6").lock().await.expect("a free lock");
            let first = b.fair_lock("m6");
            let give_up = choose(12);
            let first = shuttle::future::spawn(async move {
                tokio::select! {
                    got = first.lock() => got.ok(),
                    _ = pause(give_up) => None,
                }
            });
            let second = c.fair_lock("m6");
            let second = shuttle::future::spawn(async move { second.lock().await });
            let cut_at = choose(12);
            shuttle::future::spawn(async move {
                pause(cut_at).await;
                link.cut_pubsub();
            });
            pause(choose(12)).await;
            held.unlock().await.expect("unlocked");
            if let Some(guard) = first.await.expect("the first waiter's task") {
                guard.unlock().await.expect("unlocked");
            }
            let guard = second
                .await
                .expect("the second waiter's task")
                .expect("the second waiter gets the lock");
            guard.unlock().await.expect("unlocked");
            for client in [a, b, c] {
                client.shutdown().await;
            }
            checks::assert_no_lock_left(&server, "m6");
        });
        redisson_lock::model::set_timers(true);
    });
}
