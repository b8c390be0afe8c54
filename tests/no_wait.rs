//! A managed server without `WAIT` (some managed Valkey and Redis services refuse it): a
//! Sentinel group of this binary's own whose data nodes have `WAIT` renamed away. Replica sync
//! left at its default is given up there, said once in a `warn` event and by
//! `LockClient::replica_sync`, and locks work; asked for, the client is refused at connect.
//! Where the ACL hides `COMMAND` (so nothing can be checked at connect), the first `WAIT` the
//! server refuses is where the client finds out.

mod support;

use std::time::Duration;

use redisson_lock::inspect::ReplicaSyncState;
use redisson_lock::{Error, LockClient};
use support::sentinel::SentinelGroup;

/// `warn` events that say replica sync was given up.
fn given_up_warnings(recorder: &support::spans::Recorder) -> usize {
    let (_, events) = recorder.all();
    (events.iter())
        .filter(|e| e.level == tracing::Level::WARN)
        .filter(|e| e.field("message").contains("the server has no WAIT"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_wait_is_used_without_it_unless_replica_sync_was_asked_for() {
    let recorder = support::spans::install();
    let group = tokio::task::spawn_blocking(|| {
        SentinelGroup::start_with(&["--rename-command", "WAIT", ""])
    })
    .await
    .unwrap();
    let master = group.master().port;
    let acl = |rule: &str| {
        let node = group.node(master);
        let _: String = node.cmd(&["ACL", "SETUSER", "default", rule]).unwrap();
    };

    // Left at its default: given up at connect (COMMAND INFO shows no WAIT), said once, and
    // every lock write goes through: an acquire, a lease of renewals, the unlock.
    let lease = Duration::from_millis(900);
    let client = LockClient::with_config(group.config().with_watchdog_timeout(lease))
        .await
        .expect("connects without WAIT");
    assert_eq!(client.replica_sync(), ReplicaSyncState::Unavailable);
    let stats = client.server_stats().await.unwrap();
    assert_eq!(stats.replica_sync, ReplicaSyncState::Unavailable);
    let guard = client.lock("nw-held").lock().await.unwrap();
    tokio::time::sleep(lease * 2).await;
    assert!(!guard.is_lost(), "renewals went through without WAIT");
    guard.unlock().await.unwrap();
    assert_eq!(given_up_warnings(recorder), 1, "said once");

    // Asked for: refused at connect, the missing command named.
    let asked = group
        .config()
        .with_replica_sync(Some(Duration::from_secs(1)));
    match LockClient::with_config(asked).await {
        Err(Error::Unsupported { command, .. }) => assert_eq!(command, "WAIT"),
        other => panic!("a replica sync asked for must be refused: {other:?}"),
    }

    // COMMAND hidden by the ACL: nothing is checked at connect; the first WAIT, refused as an
    // unknown command, gives replica sync up, and the acquire it followed stands.
    acl("-command");
    let hidden = LockClient::with_config(group.config())
        .await
        .expect("connects");
    assert_eq!(
        hidden.replica_sync(),
        ReplicaSyncState::On,
        "nothing known yet"
    );
    let guard = (hidden.lock("nw-hidden").try_lock().await)
        .expect("the acquire stands")
        .expect("free");
    assert_eq!(hidden.replica_sync(), ReplicaSyncState::Unavailable);
    guard.unlock().await.unwrap();
    assert_eq!(given_up_warnings(recorder), 2, "said once by each client");

    // Asked for, with COMMAND hidden: the client cannot tell at connect, and each write the
    // server refuses to WAIT for counts as not replicated (the acquire is undone).
    let asked = group
        .config()
        .with_replica_sync(Some(Duration::from_millis(500)));
    let strict = LockClient::with_config(asked).await.expect("cannot tell");
    let err = strict.lock("nw-strict").try_lock().await.unwrap_err();
    assert!(err.is_not_replicated(), "{err}");
    let exists: i64 = group.node(master).cmd(&["EXISTS", "nw-strict"]).unwrap();
    assert_eq!(exists, 0, "the acquire was undone");
    assert_eq!(
        strict.replica_sync(),
        ReplicaSyncState::On,
        "never given up"
    );
    acl("+@all");

    for client in [client, hidden, strict] {
        client.shutdown().await;
    }
    tokio::task::spawn_blocking(move || drop(group))
        .await
        .unwrap();
}
