//! What is not a lock script: the plain commands against the real server, and what only the
//! stand-in has (its clock, its pub/sub connections, finding scripts by SHA, naming its gaps).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value::{Array, BulkString, Int, Nil, Okay};
use redis::{ErrorKind, ServerErrorKind, Value as Reply};
use redisson_lock::model::server::{Server, Value};

use crate::ops::{acq, channel, raw, Op};
use crate::pair::Pair;
use crate::support;

#[test]
fn plain_commands_answer_as_redis() {
    let mut p = Pair::start();
    let ch = channel(0);
    let words = [
        "PING",
        "PING hi",
        "SET s v",
        "GET s",
        "GET none",
        "SET s2 v PX 5000",
        "PTTL s2",
        "PTTL s",
        "PTTL none",
        "TYPE s",
        "TYPE none",
        "HSET h a 1 b 2",
        "HGET h a",
        "HGET h c",
        "HEXISTS h a",
        "HEXISTS h c",
        "HINCRBY h a 5",
        "HINCRBY h c -1",
        "HSET h d text",
        "HINCRBY h d 1",
        "HINCRBY h a x",
        "HGETALL h",
        "TYPE h",
        "GET h",
        "HGET s a",
        "PEXPIRE h 5000",
        "PTTL h",
        "PEXPIRE none 5000",
        "PEXPIRE h x",
        "PEXPIRE h 0",
        "EXISTS h",
        "SET a 1",
        "EXISTS a a none",
        "DEL s s2 none",
        "ZADD z 3 c 1 a 2 b",
        "ZRANGE z 0 -1",
        "ZRANGE z 0 -1 WITHSCORES",
        "ZRANGE z 1 1",
        "ZRANGE z -2 -1",
        "ZSCORE z b",
        "ZSCORE z none",
        "ZADD z 1.5 d",
        "ZSCORE z d",
        "ZADD z x d",
        "RPUSH l x y",
        "LRANGE l 0 -1",
        "LRANGE l 1 5",
        "LRANGE l 5 6",
        "TYPE l",
        "TYPE z",
        "RPUSH s x",
        "ZADD l 1 x",
        "GET",
        "SET k v PX 0",
        "SET k v PX x",
        "WAIT 0 0",
        "CLIENT SETNAME stand-in",
        "EVAL x -1",
        "EVAL x 2 k",
        "EVALSHA abc 0",
    ];
    let mut ops: Vec<Op> = words.iter().map(|w| raw(w)).collect();
    for (command, target) in [
        ("PUBLISH", &ch),
        ("SPUBLISH", &ch),
        ("PUBLISH", &"elsewhere".to_string()),
    ] {
        ops.push(Op::Raw(vec![
            command.into(),
            target.clone(),
            "hello".into(),
        ]));
    }
    ops.push(Op::Raw(vec![
        "PUBSUB".into(),
        "NUMSUB".into(),
        ch.clone(),
        "elsewhere".into(),
    ]));
    ops.push(Op::Raw(vec!["PUBSUB".into(), "SHARDNUMSUB".into(), ch]));
    ops.push(Op::Raw(vec![
        "SCRIPT".into(),
        "LOAD".into(),
        "return 1".into(),
    ]));
    ops.push(Op::Raw(vec![
        "SCRIPT".into(),
        "EXISTS".into(),
        support::script_sha("acquire"),
    ]));
    ops.push(Op::Raw(vec!["EVALSHA".into(), "0".repeat(40), "0".into()]));
    let replies = p.run(&ops);
    assert_eq!(
        replies[words.len()..words.len() + 3],
        [Ok(Int(1)), Ok(Int(1)), Ok(Int(0))]
    );
    let noscript = replies.last().unwrap().as_ref().unwrap_err();
    // (What transport::write::is_no_script looks for.)
    assert_eq!(
        noscript.kind(),
        ErrorKind::Server(ServerErrorKind::NoScript)
    );
}

#[test]
fn keys_expire_with_the_clock() {
    let mut p = Pair::start();
    p.run(&[raw("SET k v PX 400"), acq(0, 0, 1, 400)]);
    std::thread::sleep(Duration::from_millis(200));
    p.model.advance(200);
    assert_eq!(p.run(&[raw("PTTL k")]).len(), 1);
    std::thread::sleep(Duration::from_millis(400));
    p.model.advance(400);
    assert_eq!(
        p.run(&[raw("EXISTS k orders"), acq(0, 1, 2, 30_000)])[0],
        Ok(Int(0))
    );
    // At its expiry a key is still there with PTTL 0 (Redis drops it once the clock is past).
    let model = Server::new();
    let call = |words: &str| {
        model.call(
            &words
                .split(' ')
                .map(|w| w.as_bytes().to_vec())
                .collect::<Vec<_>>(),
        )
    };
    call("SET k v PX 1000").unwrap();
    model.advance(1_000);
    assert_eq!((call("PTTL k"), model.now_ms()), (Ok(Int(0)), 1_000));
    model.advance(1);
    assert_eq!((call("PTTL k"), model.snapshot().len()), (Ok(Int(-2)), 0));
}

/// A message as a test listener keeps it: listener, channel, payload, the clock it read.
type Heard = (usize, String, Vec<u8>, u64);

#[test]
fn pubsub_counts_listeners_and_delivers_outside_the_lock() {
    let server = Arc::new(Server::new());
    let heard: Arc<Mutex<Vec<Heard>>> = Arc::default();
    let listener = |id: usize| -> redisson_lock::model::server::Listener {
        let (heard, server) = (heard.clone(), Arc::downgrade(&server));
        Arc::new(move |channel: &str, payload: &[u8]| {
            // Calling back in proves the state's lock is not held.
            let now = server.upgrade().unwrap().now_ms();
            heard
                .lock()
                .unwrap()
                .push((id, channel.to_string(), payload.to_vec(), now));
        })
    };
    let (a, b) = (
        server.connect_pubsub(listener(1)),
        server.connect_pubsub(listener(2)),
    );
    server.subscribe(a, "ch");
    server.subscribe(b, "ch");
    server.subscribe(b, "other");
    let call = |words: &[&str]| {
        server.call(
            &words
                .iter()
                .map(|w| w.as_bytes().to_vec())
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(call(&["PUBLISH", "ch", "m1"]), Ok(Int(2)));
    assert_eq!(call(&["SPUBLISH", "other", "m2"]), Ok(Int(1)));
    let numsub = |n: i64, m: i64| {
        let ch = |c: &str| BulkString(c.as_bytes().to_vec());
        Ok(Array(vec![
            ch("ch"),
            Int(n),
            ch("other"),
            Int(m),
            ch("none"),
            Int(0),
        ]))
    };
    assert_eq!(
        call(&["PUBSUB", "NUMSUB", "ch", "other", "none"]),
        numsub(2, 1)
    );
    server.unsubscribe(a, "ch");
    assert_eq!(
        call(&["PUBSUB", "SHARDNUMSUB", "ch", "other", "none"]),
        numsub(1, 1)
    );
    server.disconnect_pubsub(b);
    server.subscribe(b, "ch"); // (gone: nothing)
    assert_eq!(call(&["PUBLISH", "ch", "m3"]), Ok(Int(0)));
    let heard = heard.lock().unwrap().clone();
    let expected = [(1, "ch", "m1"), (2, "ch", "m1"), (2, "other", "m2")];
    let expected: Vec<_> = expected
        .iter()
        .map(|(i, c, m)| (*i, c.to_string(), m.as_bytes().to_vec(), 0))
        .collect();
    assert_eq!(heard, expected);
}

#[test]
fn scripts_are_found_by_sha_flushed_and_gaps_named() {
    let server = Server::new();
    let call = |args: &[&[u8]]| server.call(&args.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
    let sha = support::script_sha("acquire");
    let acquire = |latch: &'static str| {
        [
            b"EVALSHA".as_slice(),
            sha.as_bytes(),
            b"2",
            b"orders",
            latch.as_bytes(),
            b"30000",
            b"o:1",
            b"30000",
        ]
    };
    let text = support::script("acquire");
    assert_eq!(call(&acquire("l1")), Ok(Nil));
    assert_eq!(call(&[b"SCRIPT", b"FLUSH"]), Ok(Okay));
    let noscript = call(&acquire("l2")).unwrap_err();
    assert_eq!(
        noscript.kind(),
        ErrorKind::Server(ServerErrorKind::NoScript)
    );
    let mut eval = acquire("l2");
    eval[0] = b"EVAL".as_slice();
    eval[1] = text.as_bytes();
    assert_eq!(call(&eval), Ok(Nil));
    assert_eq!(call(&acquire("l3")), Ok(Nil));
    // (A SHA in capitals is the same script.)
    let (upper, mut shouted) = (sha.to_uppercase(), acquire("l4"));
    shouted[1] = upper.as_bytes();
    assert_eq!(call(&shouted), Ok(Nil));
    assert_eq!(
        call(&[b"SCRIPT", b"EXISTS", upper.as_bytes()]),
        Ok(Array(vec![Int(1)]))
    );
    assert_eq!(
        at_model(&server, "orders"),
        Some(Value::Hash([(b"o:1".to_vec(), b"4".to_vec())].into()))
    );
    // A known script not modelled: by its text (which caches it again), then by its SHA.
    let (fenced, fenced_text) = (
        support::script_sha("fenced_acquire"),
        support::script("fenced_acquire"),
    );
    for (command, script) in [
        (b"EVAL".as_slice(), fenced_text.as_bytes()),
        (b"EVALSHA", fenced.as_bytes()),
    ] {
        let gap = call(&[command, script, b"0"]).unwrap_err().to_string();
        assert!(
            gap.contains("model: script fenced_acquire not modelled"),
            "{gap}"
        );
    }
    let gap = call(&[b"EVAL", b"return 1", b"0"]).unwrap_err().to_string();
    assert!(gap.contains("model: a script not in scripts/lua"), "{gap}");
    let gap = call(&[b"HDEL", b"h", b"f"]).unwrap_err().to_string();
    assert!(gap.contains("model: command hdel not modelled"), "{gap}");
    // The history: every command in the order run, an error as redis-rs reads one.
    let history = server.history();
    let first = [b"EVALSHA".to_vec(), sha.clone().into_bytes()];
    assert_eq!((history.len(), &history[0].0[..2]), (11, &first[..]));
    assert_eq!(history[0].1, Nil);
    let Some((args, Reply::ServerError(gap))) = history.last() else {
        panic!("{history:?}")
    };
    assert_eq!((&args[0][..], gap.code()), (&b"HDEL"[..], "MODEL"));
}

fn at_model(server: &Server, key: &str) -> Option<Value> {
    server.snapshot().remove(key.as_bytes()).map(|s| s.value)
}
