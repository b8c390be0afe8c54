//! Seeded random sequences over every modelled script, sent to both sides: 300 sequences of 40
//! operations (a third RLock-only, a third fair-only, a third both) over two lock names and
//! three owners, latches fresh or re-sent, the client clock moving in whole seconds. A
//! failure prints the seed, the sequence and its operations up to the one that differed.

use std::collections::BTreeMap;
use std::time::Instant;

use redis::Value::{Array, Int, Nil};
use redis::{RedisResult, Value as Reply};

use crate::ops::{acquire_latch, deadlines, listing, queue, waiter_channel, Op, NAMES, OWNERS};
use crate::ops::{channel as ops_channel, T, W};
use crate::pair::Pair;

/// The random test's seed (`MODEL_SERVER_SEED=<n>` replaces it).
const SEED: u64 = 0x5eed_5ca1_e0f5;
const SEQUENCES: usize = 300;
const OPS: usize = 40;

/// SplitMix64: the same sequences from the same seed on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let z = (self.0 ^ (self.0 >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Which scripts a sequence draws from, with weights.
const RLOCK: &[(&str, u64)] = &[
    ("acquire", 24),
    ("unlock", 18),
    ("spin_unlock", 6),
    ("renew", 6),
    ("held", 3),
    ("force_unlock", 3),
    ("plain", 10),
    ("lapse", 3),
    ("foreign", 2),
];
const FAIR: &[(&str, u64)] = &[
    ("fair_acquire", 28),
    ("fair_unlock", 14),
    ("fair_withdraw", 8),
    ("fair_force_unlock", 3),
    ("renew", 4),
    ("held", 2),
    ("plain", 10),
    ("lapse", 3),
    ("foreign", 2),
];

/// Draws sequences: a client clock moving in whole seconds, latches fresh or re-sent.
struct Gen {
    rng: Rng,
    menu: Vec<(&'static str, u64)>,
    now: u64,
    next_latch: u32,
    /// The last latch per (unlock?, name, owner): a re-send uses it again.
    latches: BTreeMap<(bool, usize, usize), u32>,
    /// Each waiter's last reservation (its withdraw sends the same).
    waits: BTreeMap<(usize, usize), u64>,
}

impl Gen {
    fn new(seed: u64, menu: Vec<(&'static str, u64)>) -> Gen {
        let (now, next_latch) = (T, 0);
        let (latches, waits) = (BTreeMap::new(), BTreeMap::new());
        Gen {
            rng: Rng(seed),
            menu,
            now,
            next_latch,
            latches,
            waits,
        }
    }

    fn latch(&mut self, unlock: bool, name: usize, owner: usize) -> u32 {
        let last = self.latches.get(&(unlock, name, owner)).copied();
        match last {
            Some(latch) if self.rng.chance(30) => latch,
            _ => {
                self.next_latch += 1;
                self.latches.insert((unlock, name, owner), self.next_latch);
                self.next_latch
            }
        }
    }

    fn tick(&mut self) -> u64 {
        self.now += self.rng.pick(&[0, 0, 1_000, 2_000, 5_000, 15_000, 40_000]);
        self.now
    }

    fn op(&mut self) -> Op {
        let total: u64 = self.menu.iter().map(|(_, w)| w).sum();
        let mut roll = self.rng.next() % total;
        let kind = (self.menu.iter().find(|(_, w)| {
            roll < *w || {
                roll -= w;
                false
            }
        }))
        .map_or("plain", |(k, _)| *k);
        let r = &mut self.rng;
        let (name, owner) = (r.below(NAMES.len()), r.below(OWNERS.len()));
        let lease = r.pick(&[5_000, 10_000, 30_000, 60_000]);
        let publish = r.pick(&["publish", "spublish"]);
        let reentrant = r.chance(80);
        match kind {
            "acquire" => {
                let latch = self.latch(false, name, owner);
                Op::Acquire {
                    name,
                    owner,
                    latch,
                    lease,
                    reentrant,
                }
            }
            "unlock" => {
                let latch = self.latch(true, name, owner);
                Op::Unlock {
                    name,
                    owner,
                    latch,
                    lease,
                    publish,
                }
            }
            "spin_unlock" => {
                let latch = self.latch(true, name, owner);
                Op::SpinUnlock {
                    name,
                    owner,
                    latch,
                    lease,
                }
            }
            "force_unlock" => Op::ForceUnlock { name, publish },
            "renew" => {
                let n = 1 + r.below(3);
                let entries = (0..n).map(|_| (r.below(NAMES.len()), r.below(OWNERS.len())));
                let entries = entries.collect();
                Op::Renew {
                    entries,
                    lease,
                    across: r.chance(50),
                }
            }
            "held" => {
                let n = 1 + r.below(3);
                let entries = (0..n).map(|_| (r.below(NAMES.len()), r.below(OWNERS.len())));
                Op::Held {
                    entries: entries.collect(),
                }
            }
            "fair_acquire" => {
                let (wait, try_once) = (r.pick(&[5_000, W, 300_000]), r.chance(20));
                self.waits.insert((name, owner), wait);
                let (latch, now) = (self.latch(false, name, owner), self.tick());
                Op::FairAcquire {
                    name,
                    owner,
                    latch,
                    lease,
                    wait,
                    now,
                    try_once,
                    reentrant,
                }
            }
            "fair_unlock" => {
                let (latch, now) = (self.latch(true, name, owner), self.tick());
                Op::FairUnlock {
                    name,
                    owner,
                    latch,
                    lease,
                    now,
                    publish,
                }
            }
            "fair_withdraw" => {
                let wait = self.waits.get(&(name, owner)).copied().unwrap_or(W);
                Op::FairWithdraw {
                    name,
                    owner,
                    wait,
                    publish,
                }
            }
            "fair_force_unlock" => Op::FairForceUnlock {
                name,
                now: self.tick(),
                publish,
            },
            "lapse" => Op::Raw(vec!["DEL".into(), NAMES[name].into()]), // a lease ran out
            // A key that is no lock, or a hold written without a TTL.
            "foreign" if r.chance(50) => {
                Op::Raw(vec!["SET".into(), NAMES[name].into(), "x".into()])
            }
            "foreign" => Op::Raw(vec![
                "HSET".into(),
                NAMES[name].into(),
                OWNERS[owner].into(),
                "1".into(),
            ]),
            _ => self.plain(name, owner),
        }
    }

    /// A read the crate makes (or a test would): HGET, EXISTS, PTTL, TYPE, PUBSUB.
    fn plain(&mut self, name: usize, owner: usize) -> Op {
        let latch = self
            .latches
            .get(&(false, name, owner))
            .map(|&l| acquire_latch(name, l));
        let keys = [NAMES[name].to_string(), queue(name), deadlines(name)];
        let key = match latch {
            Some(latch) if self.rng.chance(30) => latch,
            _ => self.rng.pick(&[0, 0, 1, 2]).to_string(),
        };
        let key = key
            .parse::<usize>()
            .map_or(key.clone(), |i| keys[i].clone());
        let words: Vec<String> = match self.rng.below(5) {
            0 => vec!["HGET".into(), NAMES[name].into(), OWNERS[owner].into()],
            1 => vec!["EXISTS".into(), key],
            2 => vec!["PTTL".into(), key],
            3 => vec!["TYPE".into(), key],
            _ => {
                let sub = self.rng.pick(&["NUMSUB", "SHARDNUMSUB"]);
                vec!["PUBSUB".into(), sub.into(), waiter_channel(name, owner)]
            }
        };
        Op::Raw(words)
    }
}

/// A reply's shape, for the coverage the random test reports.
fn shape(reply: &RedisResult<Reply>) -> String {
    match reply {
        Ok(Nil) => "nil".into(),
        Ok(Int(n)) if *n > 1 => "n>1".into(),
        Ok(Int(n)) => n.to_string(),
        Ok(Array(items)) => format!("array of {}", items.len()),
        Ok(other) => format!("{other:?}"),
        Err(err) => format!("error {}", err.code().unwrap_or("?")),
    }
}

fn kind_of(op: &Op) -> String {
    let debug = format!("{op:?}");
    match op {
        Op::Raw(words) => words[0].clone(),
        _ => debug[..debug.find(' ').unwrap_or(debug.len())].to_string(),
    }
}

#[test]
fn random_sequences_agree_with_the_real_scripts() {
    let env = std::env::var("MODEL_SERVER_SEED").ok();
    let seed = env.and_then(|s| s.parse().ok()).unwrap_or(SEED);
    let mut pair = Pair::start();
    let started = Instant::now();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..SEQUENCES {
        let menu = match i % 3 {
            0 => RLOCK.to_vec(),
            1 => FAIR.to_vec(),
            _ => RLOCK.iter().chain(FAIR).copied().collect(),
        };
        let mut gen = Gen::new(seed ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d), menu);
        let ops: Vec<Op> = (0..OPS).map(|_| gen.op()).collect();
        pair.reset();
        for (j, op) in ops.iter().enumerate() {
            match pair.step(op) {
                Ok(reply) => {
                    *seen
                        .entry(format!("{} -> {}", kind_of(op), shape(&reply)))
                        .or_default() += 1
                }
                Err(what) => panic!(
                    "seed {seed} (MODEL_SERVER_SEED), sequence {i}, op {j}: {what}\nops:\n{}",
                    listing(&ops[..=j])
                ),
            }
            for (channel, _) in pair.take_heard() {
                let lock = (0..NAMES.len()).any(|name| channel == ops_channel(name));
                let whose = if lock { "the lock's" } else { "a waiter's" };
                *seen
                    .entry(format!("message on {whose} channel"))
                    .or_default() += 1;
            }
        }
    }
    eprintln!(
        "{SEQUENCES} sequences of {OPS} ops in {:?}; replies seen:",
        started.elapsed()
    );
    for (what, n) in &seen {
        eprintln!("  {n:5}  {what}");
    }
    // The sequences reach every kind of answer the scripts give.
    for wanted in [
        "Acquire -> nil",
        "Acquire -> n>1",
        "Acquire -> -1",
        "Acquire -> error NON_REENTRANT_REACQUIRE",
        "Acquire -> error WRONGTYPE",
        "Unlock -> nil",
        "Unlock -> 0",
        "Unlock -> 1",
        "ForceUnlock -> 1",
        "Renew -> array of 3",
        "Held -> array of 3",
        "FairAcquire -> nil",
        "FairAcquire -> n>1",
        "FairAcquire -> 1",
        "FairAcquire -> -1",
        "FairAcquire -> -2",
        "FairAcquire -> error NON_REENTRANT_REACQUIRE",
        "FairUnlock -> 0",
        "FairUnlock -> 1",
        "FairUnlock -> error WRONGTYPE",
        "FairWithdraw -> 1",
        "FairForceUnlock -> 1",
        "message on the lock's channel",
        "message on a waiter's channel",
    ] {
        assert!(
            seen.contains_key(wanted),
            "no {wanted} in {SEQUENCES} sequences"
        );
    }
}
