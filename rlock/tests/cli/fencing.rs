//! Fencing shown at work, the field's GC-pause story end to end: a holder (`rlock run --kind
//! fenced` and its command) is frozen with SIGSTOP past its lease, a second holder takes the
//! lock with a larger token and writes, the first resumes and writes too: the store, which
//! keeps the highest token it has seen (README, "Fencing"), rejects the stale write.

use std::process::Command;
use std::time::Duration;

use super::support::{eventually, RedisServer};
use super::{rlock, Running};

/// The store's compare-and-set, as in the README: writes `value` under `KEYS[1]` only with a
/// token above every token seen; 1 if written, 0 if rejected as stale.
const FENCED_WRITE: &str = "\
local fence = tonumber(redis.call('hget', KEYS[1], 'fence') or '0') \
if tonumber(ARGV[2]) <= fence then return 0 end \
redis.call('hset', KEYS[1], 'fence', ARGV[2], 'value', ARGV[1]) return 1";

fn signal(signal: &str, target: &str) {
    let status = Command::new("kill")
        .args([signal, "--", target])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {target}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_lease_has_its_late_write_rejected_by_the_token() {
    let server = RedisServer::start();
    // The command ignores rlock's SIGTERM once its lock is lost, as a frozen process cannot
    // be told in time either: what stops its write is the store.
    let mut cmd = rlock(&server);
    cmd.env("FENCED_WRITE", FENCED_WRITE).args([
        "run", "--kind", "fenced", "--lease", "2s", "--grace", "20s", "fencing-demo", "--",
        "sh", "-c",
        "trap '' TERM; echo \"$$ $RLOCK_FENCING_TOKEN\"; read go; \
         redis-cli -u \"$REDIS_URL\" EVAL \"$FENCED_WRITE\" 1 fencing-store stale $RLOCK_FENCING_TOKEN",
    ]);
    let mut first = Running::start(cmd);
    let line = first.line();
    let (group, token) = line.split_once(' ').expect("pid and token");
    let first_token: i64 = token.parse().unwrap();
    // Frozen: rlock and its command (its own process group).
    let rlock_pid = first.child.id().to_string();
    signal("-STOP", &rlock_pid);
    signal("-STOP", &format!("-{group}"));

    let lease_over = eventually(Duration::from_secs(10), || {
        server.cmd::<i64>(&["EXISTS", "fencing-demo"]) == 0
    })
    .await;
    assert!(lease_over, "the frozen holder's lease ran out");
    let client = server.client().await;
    let second = client.fenced_lock("fencing-demo").lock().await.unwrap();
    assert!(second.token() > first_token);
    let token = second.token().to_string();
    let written: i64 = server.cmd(&["EVAL", FENCED_WRITE, "1", "fencing-store", "fresh", &token]);
    assert_eq!(written, 1, "the new holder's write");

    signal("-CONT", &format!("-{group}"));
    signal("-CONT", &rlock_pid);
    first.go();
    let reply = first.line();
    assert_eq!(reply.trim(), "0", "the stale write is rejected");
    let (status, stderr) = first.finish();
    assert_eq!(
        status.code(),
        Some(74),
        "rlock reports the lost lock: {stderr}"
    );
    let value: String = server.cmd(&["HGET", "fencing-store", "value"]);
    assert_eq!(value, "fresh", "0 stale writes accepted");
    second.unlock().await.unwrap();
    client.shutdown().await;
}
