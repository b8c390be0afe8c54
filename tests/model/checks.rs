//! The models' fault plans and their checks of the stand-in server's state and history.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::Value;
use redisson_lock::model::link::{Fault, FaultPlan};
use redisson_lock::model::server::Server;

pub type Faults = FaultPlan;

/// What a link sent (see `Link::with_sent_log`).
pub type SentLog = redisson_lock::model::link::SentLog;

/// The SHA-1 `EVALSHA` names a script of the crate by.
fn sha(code: &str) -> Vec<u8> {
    redis::Script::new(code).get_hash().as_bytes().to_vec()
}

/// The SHA of `scripts/lua/<name>.lua`.
pub fn script_sha(name: &str) -> Vec<u8> {
    let code = match name {
        "acquire" => include_str!("../../scripts/lua/acquire.lua"),
        "fair_acquire" => include_str!("../../scripts/lua/fair_acquire.lua"),
        other => panic!("no script {other} in the models' list"),
    };
    sha(code)
}

fn renew_shas() -> [Vec<u8>; 2] {
    [
        sha(include_str!("../../scripts/lua/renew.lua")),
        sha(include_str!("../../scripts/lua/renew_across.lua")),
    ]
}

/// Loses the reply of the first call of the script `script` (`scripts/lua/<script>.lua`) on
/// `key` (the script ran; the caller sees a dropped connection).
pub fn lose_first_reply(script: &str, key: &'static [u8]) -> Faults {
    let acquire = script_sha(script);
    let done = AtomicBool::new(false);
    Arc::new(move |args: &[Vec<u8>]| {
        let is_acquire = args.len() > 3 && args[1] == acquire && args[3] == key;
        if is_acquire && !done.swap(true, Ordering::SeqCst) {
            Fault::LoseReply
        } else {
            Fault::None
        }
    })
}

/// No renewal in `history` (commands run after a release) renewed `key` for `field`.
pub fn assert_no_renewal_after(history: &[(Vec<Vec<u8>>, Value)], key: &str, field: &str) {
    let renews = renew_shas();
    for (args, reply) in history {
        if args.len() < 3 || !renews.contains(&args[1]) {
            continue;
        }
        let n: usize = std::str::from_utf8(&args[2]).unwrap().parse().unwrap();
        let keys = &args[3..3 + n];
        let fields = &args[3 + n + 1..];
        let Value::Array(renewed) = reply else {
            continue;
        };
        for (i, k) in keys.iter().enumerate() {
            if k == key.as_bytes() && fields.get(i).map(Vec::as_slice) == Some(field.as_bytes()) {
                assert_eq!(
                    renewed.get(i),
                    Some(&Value::Int(0)),
                    "a released hold of {key} by {field} was renewed: {reply:?}"
                );
            }
        }
    }
}

/// The lock `key` is not held by anyone.
pub fn assert_no_lock_left(server: &Server, key: &str) {
    let state = server.snapshot();
    assert!(
        !state.contains_key(key.as_bytes()),
        "{key} is left held: {:?}",
        state.get(key.as_bytes())
    );
}

/// `key` is held by `field` alone, with `holds` holds.
pub fn assert_held_by(server: &Server, key: &str, field: &str, holds: u32) {
    let state = server.snapshot();
    let stored = state.get(key.as_bytes());
    let expected = format!("{holds}");
    match stored.map(|s| &s.value) {
        Some(redisson_lock::model::server::Value::Hash(hash))
            if hash.len() == 1
                && hash.get(field.as_bytes()).map(Vec::as_slice) == Some(expected.as_bytes()) => {}
        other => panic!("{key} should be held by {field} ({holds} holds): {other:?}"),
    }
}

/// No renewal naming `key` for `field` among `sent`.
pub fn assert_no_renewal_sent(sent: &[Vec<Vec<u8>>], key: &str, field: &str) {
    let renews = renew_shas();
    for args in sent {
        if args.len() < 3 || !renews.contains(&args[1]) {
            continue;
        }
        let n: usize = std::str::from_utf8(&args[2]).unwrap().parse().unwrap();
        let keys = &args[3..3 + n];
        let fields = &args[3 + n + 1..];
        for (i, k) in keys.iter().enumerate() {
            assert!(
                !(k == key.as_bytes()
                    && fields.get(i).map(Vec::as_slice) == Some(field.as_bytes())),
                "a renewal of {key} for {field} was sent after its loss was told"
            );
        }
    }
}

/// No unlock latch (`redisson_unlock_latch:...`) is left.
pub fn assert_no_unlock_latch_left(server: &Server) {
    let left: Vec<String> = server
        .snapshot()
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .filter(|k| k.starts_with("redisson_unlock_latch"))
        .collect();
    assert!(
        left.is_empty(),
        "unlock latches left after shutdown: {left:?}"
    );
}

/// Nobody is queued for the fair lock `key`: its queue and deadlines are gone.
pub fn assert_queue_empty(server: &Server, key: &str) {
    let state = server.snapshot();
    for queue in [
        format!("redisson_lock_queue:{{{key}}}"),
        format!("redisson_lock_timeout:{{{key}}}"),
    ] {
        assert!(
            !state.contains_key(queue.as_bytes()),
            "{queue} is left: {:?}",
            state.get(queue.as_bytes())
        );
    }
}
