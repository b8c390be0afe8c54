//! The stand-in server of the model checks (`src/model/server.rs`) against the real thing: the
//! same operations, in the crate's argument layouts, sent to a real `redis-server` running the
//! scripts of `scripts/lua` and to the stand-in must give the same replies, the same keys,
//! values and TTLs, and the same published messages, after every operation. Here, one focused
//! scenario per modelled script (each of its effects checked) and wrong types in every key of
//! every script; seeded random sequences in `random.rs`; the plain commands and what only the
//! stand-in has in `commands.rs`.

#[path = "model_server/commands.rs"]
mod commands;
#[path = "model_server/ops.rs"]
mod ops;
#[path = "model_server/pair.rs"]
mod pair;
#[path = "model_server/random.rs"]
mod random;
mod support;

use redis::Value::{Array, Int, Nil};
use redis::{RedisResult, Value as Reply};
use redisson_lock::model::server::{Stored, Value};

use ops::{acq, acquire_latch, channel, deadlines, fair, fair_as, fair_unl, queue, raw, unl};
use ops::{unlock_latch, waiter_channel};
use ops::{Op, NAMES, OWNERS, T, W};
use pair::Pair;

/// What the stand-in holds at `key`.
fn at(pair: &Pair, key: &str) -> Option<Stored> {
    pair.model.snapshot().remove(key.as_bytes())
}

fn held(holds: &[(usize, &str)], pttl: i64) -> Option<Stored> {
    let fields = holds
        .iter()
        .map(|(o, n)| (OWNERS[*o].as_bytes().to_vec(), n.as_bytes().to_vec()));
    Some(Stored {
        value: Value::Hash(fields.collect()),
        pttl: Some(pttl),
    })
}

fn string(value: &str, pttl: i64) -> Option<Stored> {
    Some(Stored {
        value: Value::String(value.into()),
        pttl: Some(pttl),
    })
}

fn waiting(owners: &[usize]) -> Option<Stored> {
    let list = owners
        .iter()
        .map(|o| OWNERS[*o].as_bytes().to_vec())
        .collect();
    Some(Stored {
        value: Value::List(list),
        pttl: None,
    })
}

fn deadlines_of(entries: &[(usize, u64)]) -> Option<Stored> {
    let zset = entries
        .iter()
        .map(|(o, d)| (OWNERS[*o].as_bytes().to_vec(), *d as f64))
        .collect();
    Some(Stored {
        value: Value::ZSet(zset),
        pttl: None,
    })
}

/// The messages both sides published since the last look, payloads as text.
fn heard(p: &mut Pair) -> Vec<(String, String)> {
    let text =
        |(channel, payload): (String, Vec<u8>)| (channel, String::from_utf8(payload).unwrap());
    p.take_heard().into_iter().map(text).collect()
}

/// `"0"` (an unlock message) on `channel`, once.
fn woke(channel: String) -> Vec<(String, String)> {
    vec![(channel, "0".to_string())]
}

fn code(reply: &RedisResult<Reply>) -> Option<&str> {
    reply.as_ref().err().and_then(|e| e.code())
}

#[test]
fn acquire_takes_reenters_ignores_resends_and_refuses() {
    let mut p = Pair::start();
    assert_eq!(p.run(&[acq(0, 0, 1, 30_000)]), [Ok(Nil)]);
    assert_eq!(at(&p, NAMES[0]), held(&[(0, "1")], 30_000));
    assert_eq!(at(&p, &acquire_latch(0, 1)), string("1", 30_000));
    // The re-sent first acquire: nothing more.
    assert_eq!(p.run(&[acq(0, 0, 1, 10_000)]), [Ok(Nil)]);
    assert_eq!(at(&p, NAMES[0]), held(&[(0, "1")], 30_000));
    // Re-entry: a second hold, the TTL reset to the new lease, its latch 20 s at least.
    assert_eq!(p.run(&[acq(0, 0, 2, 10_000)]), [Ok(Nil)]);
    assert_eq!(at(&p, NAMES[0]), held(&[(0, "2")], 10_000));
    assert_eq!(at(&p, &acquire_latch(0, 2)), string("1", 20_000));
    // Another owner: the holder's PTTL, and no latch.
    assert_eq!(p.run(&[acq(0, 1, 3, 30_000)]), [Ok(Int(10_000))]);
    assert_eq!(at(&p, &acquire_latch(0, 3)), None);
    // Non-reentrant: the holder's second is refused, nothing written.
    let again = Op::Acquire {
        name: 0,
        owner: 0,
        latch: 4,
        lease: 30_000,
        reentrant: false,
    };
    let first = Op::Acquire {
        name: 1,
        owner: 0,
        latch: 5,
        lease: 30_000,
        reentrant: false,
    };
    let replies = p.run(&[again, first]);
    assert_eq!(code(&replies[0]), Some("NON_REENTRANT_REACQUIRE"));
    assert_eq!(replies[1], Ok(Nil));
    assert_eq!(
        (at(&p, NAMES[0]), at(&p, &acquire_latch(0, 4))),
        (held(&[(0, "2")], 10_000), None)
    );
    // A key that is no lock: the error hexists raised.
    let replies = p.run(&[raw("SET {eu}:jobs x"), acq(1, 1, 6, 30_000)]);
    assert_eq!(code(&replies[1]), Some("WRONGTYPE"));
    assert_eq!(heard(&mut p), []);
}

#[test]
fn unlock_releases_one_hold_then_the_last_and_wakes_waiters() {
    let mut p = Pair::start();
    p.run(&[acq(0, 0, 1, 30_000), acq(0, 0, 2, 30_000)]);
    // One of two holds: 0, the TTL reset to the unlock's lease, the latch says 0 for 20 s.
    let partial = Op::Unlock {
        name: 0,
        owner: 0,
        latch: 1,
        lease: 10_000,
        publish: "publish",
    };
    assert_eq!(p.run(&[partial.clone(), partial]), [Ok(Int(0)), Ok(Int(0))]);
    assert_eq!(at(&p, NAMES[0]), held(&[(0, "1")], 10_000));
    assert_eq!(at(&p, &unlock_latch(0, 1)), string("0", 20_000));
    // Someone who holds nothing: nil, no latch.
    assert_eq!(p.run(&[unl(0, 1, 2, "publish")]), [Ok(Nil)]);
    assert_eq!(at(&p, &unlock_latch(0, 2)), None);
    assert_eq!(heard(&mut p), []);
    // The last hold: 1, the key gone, "0" published (the Pair compares the messages); its
    // re-send answers 1 again and publishes nothing.
    let last = unl(0, 0, 3, "spublish");
    assert_eq!(p.run(&[last.clone(), last]), [Ok(Int(1)), Ok(Int(1))]);
    assert_eq!(heard(&mut p), woke(channel(0)));
    assert_eq!(
        (at(&p, NAMES[0]), at(&p, &unlock_latch(0, 3))),
        (None, string("1", 20_000))
    );
}

#[test]
fn force_unlock_deletes_whoever_holds_and_refuses_other_types() {
    let mut p = Pair::start();
    let force = |publish| Op::ForceUnlock { name: 0, publish };
    let replies = p.run(&[acq(0, 1, 1, 30_000), force("publish"), force("spublish")]);
    assert_eq!(replies[1..], [Ok(Int(1)), Ok(Int(0))]);
    assert_eq!(at(&p, NAMES[0]), None);
    assert_eq!(heard(&mut p), woke(channel(0)));
    let replies = p.run(&[raw("SET orders x"), force("publish")]);
    assert_eq!(
        replies[1].as_ref().unwrap_err().detail(),
        Some("Operation against a key holding the wrong kind of value")
    );
    assert_eq!(
        at(&p, NAMES[0]).map(|s| s.value),
        Some(Value::String(b"x".to_vec()))
    );
}

#[test]
fn renewals_extend_only_what_their_owner_holds() {
    for across in [false, true] {
        let mut p = Pair::start();
        p.run(&[acq(0, 0, 1, 10_000), acq(1, 1, 2, 10_000)]);
        let renew = |entries: Vec<(usize, usize)>| Op::Renew {
            entries,
            lease: 30_000,
            across,
        };
        let replies = p.run(&[
            renew(vec![(0, 0), (1, 0), (1, 2)]),
            renew(vec![(0, 0), (0, 0)]),
        ]);
        assert_eq!(
            replies,
            [
                Ok(Array(vec![Int(1), Int(0), Int(0)])),
                Ok(Array(vec![Int(1), Int(1)]))
            ]
        );
        assert_eq!(
            (
                at(&p, NAMES[0]).unwrap().pttl,
                at(&p, NAMES[1]).unwrap().pttl
            ),
            (Some(30_000), Some(10_000))
        );
        let replies = p.run(&[raw("SET orders x"), renew(vec![(0, 0), (1, 1)])]);
        assert_eq!(replies[1], Ok(Array(vec![Int(0), Int(1)])));
    }
}

#[test]
fn a_check_reads_which_holds_are_held_and_changes_nothing() {
    let mut p = Pair::start();
    p.run(&[acq(0, 0, 1, 10_000), acq(1, 1, 2, 10_000)]);
    let before = p.model.snapshot();
    let replies = p.run(&[
        Op::Held {
            entries: vec![(0, 0), (1, 0), (1, 1), (0, 2)],
        },
        raw("SET orders x"),
        Op::Held {
            entries: vec![(0, 0), (1, 1)],
        },
    ]);
    assert_eq!(replies[0], Ok(Array(vec![Int(1), Int(0), Int(1), Int(0)])));
    assert_eq!(
        replies[2],
        Ok(Array(vec![Int(0), Int(1)])),
        "a string is not held"
    );
    assert_eq!(
        at(&p, NAMES[1]).unwrap().pttl,
        before[NAMES[1].as_bytes()].pttl,
        "no TTL touched"
    );
}

/// Owner 0 holds the fair lock "orders"; owners 1 and 2 queue behind it (deadlines T+50 s and
/// T+70 s).
fn fair_held_with_two_waiting(p: &mut Pair) {
    let replies = p.run(&[fair(0, 1, T), fair(1, 2, T), fair(2, 3, T + 1_000)]);
    assert_eq!(replies, [Ok(Nil), Ok(Int(30_000)), Ok(Int(49_000))]);
    assert_eq!(at(p, &queue(0)), waiting(&[1, 2]));
    assert_eq!(heard(p), []);
    assert_eq!(
        at(p, &deadlines(0)),
        deadlines_of(&[(1, T + 50_000), (2, T + 70_000)])
    );
}

#[test]
fn fair_acquire_queues_in_order_and_serves_the_head() {
    let mut p = Pair::start();
    fair_held_with_two_waiting(&mut p);
    let try_once = fair_as(2, 4, T + 2_000, true, true);
    let non_reentrant = fair_as(0, 6, T + 2_000, false, false);
    // A re-sent waiter keeps its place; a single attempt never queues; the holder re-enters,
    // unless the lock is non-reentrant.
    let replies = p.run(&[
        fair(1, 2, T + 2_000),
        try_once,
        fair(0, 5, T + 2_000),
        non_reentrant,
    ]);
    assert_eq!(replies[..3], [Ok(Int(30_000)), Ok(Int(30_000)), Ok(Nil)]);
    assert_eq!(code(&replies[3]), Some("NON_REENTRANT_REACQUIRE"));
    assert_eq!(at(&p, NAMES[0]), held(&[(0, "2")], 30_000));
    assert_eq!(at(&p, &queue(0)), waiting(&[1, 2]));
    // Released: the head is woken; a waiter behind it, asking again, waits for the head's place.
    let replies = p.run(&[
        fair_unl(0, 1, T + 3_000),
        fair_unl(0, 2, T + 3_000),
        fair(2, 7, T + 4_000),
    ]);
    assert_eq!(replies, [Ok(Int(0)), Ok(Int(1)), Ok(Int(46_000))]);
    assert_eq!(heard(&mut p), woke(waiter_channel(0, 1)));
    // The head takes it: it leaves the queue, and every deadline moves its reservation earlier.
    assert_eq!(p.run(&[fair(1, 8, T + 5_000)]), [Ok(Nil)]);
    assert_eq!(at(&p, &queue(0)), waiting(&[2]));
    assert_eq!(at(&p, &deadlines(0)), deadlines_of(&[(2, T + 50_000)]));
    // Past its deadline, waiter 2 leaves the head when someone else asks; the asker queues.
    assert_eq!(p.run(&[fair(0, 9, T + 60_000)]), [Ok(Int(30_000))]);
    assert_eq!(at(&p, &queue(0)), waiting(&[0]));
    assert_eq!(at(&p, &deadlines(0)), deadlines_of(&[(0, T + 110_000)]));
}

#[test]
fn fair_unlock_wakes_the_head_on_its_own_channel() {
    let mut p = Pair::start();
    fair_held_with_two_waiting(&mut p);
    // Not the holder: nil, nobody woken. The lease ran out: nil, and the head is woken.
    let replies = p.run(&[
        fair_unl(2, 1, T),
        raw("DEL orders"),
        fair_unl(0, 2, T + 1_000),
    ]);
    assert_eq!(replies, [Ok(Nil), Ok(Int(1)), Ok(Nil)]);
    assert_eq!(at(&p, &unlock_latch(0, 2)), None);
    assert_eq!(heard(&mut p), woke(waiter_channel(0, 1)));
    // Waiter 1 takes it; waiter 0 queues behind 2.
    let replies = p.run(&[fair(0, 3, T + 1_000), fair(1, 4, T + 2_000)]);
    assert_eq!(replies, [Ok(Int(69_000)), Ok(Nil)]);
    assert_eq!(
        at(&p, &deadlines(0)),
        deadlines_of(&[(2, T + 50_000), (0, T + 70_000)])
    );
    // Released after waiter 2's place ended: it leaves, and waiter 0 is the one woken.
    let last = fair_unl(1, 5, T + 55_000);
    assert_eq!(p.run(&[last.clone(), last]), [Ok(Int(1)), Ok(Int(1))]);
    assert_eq!(heard(&mut p), woke(waiter_channel(0, 0)));
    assert_eq!(at(&p, &queue(0)), waiting(&[0]));
    assert_eq!(at(&p, &unlock_latch(0, 5)), string("1", 20_000));
    assert_eq!(at(&p, NAMES[0]), None);
}

#[test]
fn fair_withdraw_leaves_the_queue_and_moves_those_behind() {
    let mut p = Pair::start();
    fair_held_with_two_waiting(&mut p);
    let withdraw = |owner| Op::FairWithdraw {
        name: 0,
        owner,
        wait: W,
        publish: "publish",
    };
    // The head of a held lock: nobody woken, the waiter behind moves up by the reservation.
    assert_eq!(p.run(&[withdraw(1), withdraw(1)]), [Ok(Int(1)), Ok(Int(0))]);
    assert_eq!(heard(&mut p), []);
    assert_eq!(at(&p, &queue(0)), waiting(&[2]));
    assert_eq!(at(&p, &deadlines(0)), deadlines_of(&[(2, T + 50_000)]));
    // A deadline left without a place is cleared.
    let stray = Op::Raw(vec![
        "ZADD".into(),
        deadlines(0),
        "5".into(),
        OWNERS[1].into(),
    ]);
    assert_eq!(p.run(&[stray, withdraw(1)])[1], Ok(Int(0)));
    assert_eq!(at(&p, &deadlines(0)), deadlines_of(&[(2, T + 50_000)]));
    // The head of a free lock: the next waiter is woken.
    let replies = p.run(&[fair(1, 4, T + 1_000), raw("DEL orders"), withdraw(2)]);
    assert_eq!(replies, [Ok(Int(49_000)), Ok(Int(1)), Ok(Int(1))]);
    assert_eq!(heard(&mut p), woke(waiter_channel(0, 1)));
    assert_eq!(at(&p, &queue(0)), waiting(&[1]));
    assert_eq!(at(&p, &deadlines(0)), deadlines_of(&[(1, T + 50_000)]));
}

#[test]
fn fair_force_unlock_wakes_the_head_and_keeps_the_queue() {
    let mut p = Pair::start();
    fair_held_with_two_waiting(&mut p);
    let force = |now| Op::FairForceUnlock {
        name: 0,
        now,
        publish: "spublish",
    };
    assert_eq!(p.run(&[force(T + 60_000)]), [Ok(Int(1))]);
    assert_eq!(heard(&mut p), woke(waiter_channel(0, 2)));
    assert_eq!((at(&p, NAMES[0]), at(&p, &queue(0))), (None, waiting(&[2])));
    // Absent: 0, but stale heads still leave.
    assert_eq!(p.run(&[force(T + 80_000)]), [Ok(Int(0))]);
    assert_eq!(heard(&mut p), []);
    assert_eq!((at(&p, &queue(0)), at(&p, &deadlines(0))), (None, None));
    let replies = p.run(&[raw("SET orders x"), force(T)]);
    assert_eq!(code(&replies[1]), Some("WRONGTYPE"));
}

#[test]
fn wrong_types_in_every_key_of_every_script() {
    let mut p = Pair::start();
    let templates = [
        acq(0, 1, 9, 30_000),
        Op::Acquire {
            name: 0,
            owner: 0,
            latch: 9,
            lease: 30_000,
            reentrant: false,
        },
        unl(0, 0, 9, "publish"),
        Op::ForceUnlock {
            name: 0,
            publish: "publish",
        },
        Op::Renew {
            entries: vec![(0, 0)],
            lease: 30_000,
            across: false,
        },
        Op::Renew {
            entries: vec![(0, 0)],
            lease: 30_000,
            across: true,
        },
        fair(1, 9, T + 60_000),
        fair(0, 9, T),
        fair_as(2, 9, T, true, true),
        fair_unl(0, 9, T + 60_000),
        Op::FairWithdraw {
            name: 0,
            owner: 1,
            wait: W,
            publish: "publish",
        },
        Op::FairForceUnlock {
            name: 0,
            now: T + 60_000,
            publish: "publish",
        },
    ];
    let keys = [
        NAMES[0].to_string(),
        acquire_latch(0, 9),
        unlock_latch(0, 9),
        queue(0),
        deadlines(0),
    ];
    let seeds = ["SET {k} x", "HSET {k} f 1", "RPUSH {k} x", "ZADD {k} 1 x"];
    let mut errors = 0;
    for template in &templates {
        for key in &keys {
            for seed in seeds {
                for busy in [false, true] {
                    p.reset();
                    if busy {
                        fair_held_with_two_waiting(&mut p);
                    }
                    let seed = Op::Raw(seed.split(' ').map(|w| w.replace("{k}", key)).collect());
                    let ops = [
                        Op::Raw(vec!["DEL".into(), key.clone()]),
                        seed,
                        template.clone(),
                    ];
                    errors += p.run(&ops)[2].is_err() as usize;
                }
            }
        }
    }
    assert!(errors > 50, "only {errors} wrong-type errors");
}
