//! The operations of the differential test, each built argument for argument as the crate's
//! command builders build it (src/raw/rlock.rs, src/raw/fair.rs), with the key and channel
//! names src/names.rs derives.

use redis::Cmd;
use redisson_lock::names;

use crate::support::script_sha;

/// The client clock the fair scenarios start at (ms since the epoch, whole seconds).
pub const T: u64 = 1_700_000_000_000;
/// A fair waiter's reservation, in ms.
pub const W: u64 = 20_000;

/// The lock names: a plain one, and one with a hash tag of its own (names::prefixed's two
/// rules).
pub const NAMES: [&str; 2] = ["orders", "{eu}:jobs"];

/// Owner fields, `<client id>:<owner id>`: two owners of one client, one of another.
pub const OWNERS: [&str; 3] = [
    "6f1c0e52-3d5b-4a8e-9d0c-2b7e1f4a9c31:1",
    "6f1c0e52-3d5b-4a8e-9d0c-2b7e1f4a9c31:2",
    "a2d9b7e4-51c0-4f3e-8b6a-9e0d4c2f7a15:7",
];

/// The unlock latch's lifetime, as src/raw/protocol.rs sends it.
const LATCH_TTL_MS: u64 = 20_000;

/// An acquire latch's lifetime for a lease, as src/raw/protocol.rs works it out.
fn acquire_latch_ttl(lease: u64) -> u64 {
    lease.clamp(LATCH_TTL_MS, 3_600_000)
}

/// A request id (of a latch) from a number: 32 hex characters, as the crate's.
fn request_id(latch: u32) -> String {
    format!("{latch:032x}")
}

/// One operation, sent to both sides.
#[derive(Debug, Clone)]
pub enum Op {
    /// RLock's acquire (`reentrant: false`: the non-reentrant lock's).
    Acquire {
        name: usize,
        owner: usize,
        latch: u32,
        lease: u64,
        reentrant: bool,
    },
    Unlock {
        name: usize,
        owner: usize,
        latch: u32,
        lease: u64,
        publish: &'static str,
    },
    ForceUnlock {
        name: usize,
        publish: &'static str,
    },
    /// A spin lock's unlock: RLock's without the message.
    SpinUnlock {
        name: usize,
        owner: usize,
        latch: u32,
        lease: u64,
    },
    /// The watchdog's renewal of `(name, owner)`s, keys declared or (`across`) in ARGV.
    Renew {
        entries: Vec<(usize, usize)>,
        lease: u64,
        across: bool,
    },
    /// The loss watch's check of `(name, owner)`s, read only (keys in ARGV).
    Held {
        entries: Vec<(usize, usize)>,
    },
    FairAcquire {
        name: usize,
        owner: usize,
        latch: u32,
        lease: u64,
        wait: u64,
        now: u64,
        try_once: bool,
        reentrant: bool,
    },
    FairUnlock {
        name: usize,
        owner: usize,
        latch: u32,
        lease: u64,
        now: u64,
        publish: &'static str,
    },
    FairWithdraw {
        name: usize,
        owner: usize,
        wait: u64,
        publish: &'static str,
    },
    FairForceUnlock {
        name: usize,
        now: u64,
        publish: &'static str,
    },
    /// A plain command, as given.
    Raw(Vec<String>),
}

pub fn queue(name: usize) -> String {
    names::queue_key(NAMES[name])
}

pub fn deadlines(name: usize) -> String {
    names::timeout_key(NAMES[name])
}

pub fn channel(name: usize) -> String {
    names::lock_channel(NAMES[name])
}

/// A fair waiter's own channel.
pub fn waiter_channel(name: usize, owner: usize) -> String {
    format!("{}:{}", channel(name), OWNERS[owner])
}

pub fn acquire_latch(name: usize, latch: u32) -> String {
    names::acquire_latch(NAMES[name], &request_id(latch))
}

pub fn unlock_latch(name: usize, latch: u32) -> String {
    names::unlock_latch(NAMES[name], &request_id(latch))
}

/// `EVALSHA <sha of scripts/lua/<script>.lua> <numkeys>`.
fn evalsha(script: &str, numkeys: usize) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script_sha(script)).arg(numkeys);
    cmd
}

impl Op {
    /// The command, argument for argument as the crate builds it.
    pub fn command(&self) -> Cmd {
        match *self {
            Op::Acquire {
                name,
                owner,
                latch,
                lease,
                reentrant,
            } => {
                let mut cmd = evalsha("acquire", 2);
                cmd.arg(NAMES[name]).arg(acquire_latch(name, latch));
                cmd.arg(lease)
                    .arg(OWNERS[owner])
                    .arg(acquire_latch_ttl(lease));
                if !reentrant {
                    cmd.arg(0);
                }
                cmd
            }
            Op::Unlock {
                name,
                owner,
                latch,
                lease,
                publish,
            } => {
                let mut cmd = evalsha("unlock", 3);
                cmd.arg(NAMES[name])
                    .arg(channel(name))
                    .arg(unlock_latch(name, latch));
                cmd.arg("0")
                    .arg(lease)
                    .arg(OWNERS[owner])
                    .arg(publish)
                    .arg(LATCH_TTL_MS);
                cmd
            }
            Op::SpinUnlock {
                name,
                owner,
                latch,
                lease,
            } => {
                let mut cmd = evalsha("spin_unlock", 2);
                cmd.arg(NAMES[name]).arg(unlock_latch(name, latch));
                cmd.arg(lease).arg(OWNERS[owner]).arg(LATCH_TTL_MS);
                cmd
            }
            Op::ForceUnlock { name, publish } => {
                let mut cmd = evalsha("force_unlock", 2);
                cmd.arg(NAMES[name])
                    .arg(channel(name))
                    .arg("0")
                    .arg(publish);
                cmd
            }
            Op::Renew {
                ref entries,
                lease,
                across: false,
            } => {
                let mut cmd = evalsha("renew", entries.len());
                for &(name, _) in entries {
                    cmd.arg(NAMES[name]);
                }
                cmd.arg(lease);
                for &(_, owner) in entries {
                    cmd.arg(OWNERS[owner]);
                }
                cmd
            }
            Op::Renew {
                ref entries,
                lease,
                across: true,
            } => {
                let mut cmd = evalsha("renew_across", 0);
                cmd.arg(lease);
                for &(name, owner) in entries {
                    cmd.arg(NAMES[name]).arg(OWNERS[owner]);
                }
                cmd
            }
            Op::Held { ref entries } => {
                let mut cmd = evalsha("held_across", 0);
                for &(name, owner) in entries {
                    cmd.arg(NAMES[name]).arg(OWNERS[owner]);
                }
                cmd
            }
            Op::FairAcquire {
                name,
                owner,
                latch,
                lease,
                wait,
                now,
                try_once,
                reentrant,
            } => {
                let mut cmd = evalsha("fair_acquire", 4);
                cmd.arg(NAMES[name]).arg(queue(name)).arg(deadlines(name));
                cmd.arg(acquire_latch(name, latch))
                    .arg(lease)
                    .arg(OWNERS[owner])
                    .arg(wait);
                cmd.arg(now).arg(acquire_latch_ttl(lease));
                cmd.arg(if try_once { "try" } else { "wait" });
                cmd.arg(if reentrant { "1" } else { "0" });
                cmd
            }
            Op::FairUnlock {
                name,
                owner,
                latch,
                lease,
                now,
                publish,
            } => {
                let mut cmd = evalsha("fair_unlock", 5);
                cmd.arg(NAMES[name])
                    .arg(queue(name))
                    .arg(deadlines(name))
                    .arg(channel(name));
                cmd.arg(unlock_latch(name, latch))
                    .arg("0")
                    .arg(lease)
                    .arg(OWNERS[owner]);
                cmd.arg(now).arg(publish).arg(LATCH_TTL_MS);
                cmd
            }
            Op::FairWithdraw {
                name,
                owner,
                wait,
                publish,
            } => {
                let mut cmd = evalsha("fair_withdraw", 4);
                cmd.arg(NAMES[name])
                    .arg(queue(name))
                    .arg(deadlines(name))
                    .arg(channel(name));
                cmd.arg(OWNERS[owner]).arg(wait).arg("0").arg(publish);
                cmd
            }
            Op::FairForceUnlock { name, now, publish } => {
                let mut cmd = evalsha("fair_force_unlock", 4);
                cmd.arg(NAMES[name])
                    .arg(queue(name))
                    .arg(deadlines(name))
                    .arg(channel(name));
                cmd.arg("0").arg(now).arg(publish);
                cmd
            }
            Op::Raw(ref args) => {
                let mut cmd = redis::cmd(&args[0]);
                for arg in &args[1..] {
                    cmd.arg(arg);
                }
                cmd
            }
        }
    }

    /// Whether an integer reply may be a remaining TTL (within the tolerance).
    pub fn replies_a_ttl(&self) -> bool {
        match self {
            Op::Acquire { .. } | Op::FairAcquire { .. } => true,
            Op::Raw(args) => args[0].eq_ignore_ascii_case("pttl"),
            _ => false,
        }
    }
}

/// A plain command from its words.
pub fn raw(words: &str) -> Op {
    Op::Raw(words.split(' ').map(str::to_string).collect())
}

/// What a command puts on the wire: its arguments.
pub fn wire(cmd: &Cmd) -> Vec<Vec<u8>> {
    let arg = |a: redis::Arg<&[u8]>| match a {
        redis::Arg::Simple(bytes) => bytes.to_vec(),
        _ => unreachable!("no cursor argument here"),
    };
    cmd.args_iter().map(arg).collect()
}

/// The ops, numbered, one a line.
pub fn listing(ops: &[Op]) -> String {
    let lines = ops
        .iter()
        .enumerate()
        .map(|(i, op)| format!("  {i:2}: {op:?}"));
    lines.collect::<Vec<_>>().join("\n")
}

pub fn acq(name: usize, owner: usize, latch: u32, lease: u64) -> Op {
    Op::Acquire {
        name,
        owner,
        latch,
        lease,
        reentrant: true,
    }
}

pub fn unl(name: usize, owner: usize, latch: u32, publish: &'static str) -> Op {
    Op::Unlock {
        name,
        owner,
        latch,
        lease: 30_000,
        publish,
    }
}

pub fn fair(owner: usize, latch: u32, now: u64) -> Op {
    fair_as(owner, latch, now, false, true)
}

/// A fair acquire that may be a single attempt (`try_once`) or non-reentrant.
pub fn fair_as(owner: usize, latch: u32, now: u64, try_once: bool, reentrant: bool) -> Op {
    let lease = 30_000;
    Op::FairAcquire {
        name: 0,
        owner,
        latch,
        lease,
        wait: W,
        now,
        try_once,
        reentrant,
    }
}

pub fn fair_unl(owner: usize, latch: u32, now: u64) -> Op {
    Op::FairUnlock {
        name: 0,
        owner,
        latch,
        lease: 30_000,
        now,
        publish: "publish",
    }
}
