//! Unit tests of the hand-off registry: pure logic, no Redis (time is passed in).
use super::*;
use crate::raw::rlock::RLOCK;

fn place(field: &str) -> Arc<Place> {
    let latch: Arc<str> = format!("latch-{field}").into();
    let id = field.strip_prefix("u:").unwrap().parse().unwrap();
    Place::new(
        &RLOCK,
        field.into(),
        Owner::from_id(id),
        Lease::Watchdog,
        30_000,
        Arc::new(Mutex::new(latch)),
    )
}

fn alone(handoffs: &Arc<Handoffs>, key: &Arc<str>) {
    // A count-only release tells the registry this client is alone on the channel.
    let offer = handoffs
        .offer(key, key, &RLOCK, true)
        .expect("a waiter is parked");
    assert!(offer.waiter().is_none(), "nothing known yet: count only");
    offer.settle(Some(1), None, &Registry::default(), &RLOCK, Instant::now());
}

#[test]
fn hands_off_to_the_oldest_waiter_only_when_alone() {
    let handoffs = Arc::new(Handoffs::new(true));
    let key: Arc<str> = "k".into();
    let (a, b) = (place("u:1"), place("u:2"));
    assert!(
        handoffs.offer(&key, &key, &RLOCK, true).is_none(),
        "no waiter: plain unlock"
    );
    handoffs.park(&key, &a, true);
    handoffs.park(&key, &b, true);
    alone(&handoffs, &key);
    assert!(
        handoffs
            .offer(&key, &key, &RLOCK, false)
            .unwrap()
            .waiter()
            .is_none(),
        "own subscription not live: count only"
    );
    let offer = handoffs.offer(&key, &key, &RLOCK, true).unwrap();
    let acquire = offer.waiter().expect("hands off");
    assert_eq!(
        (acquire.field, acquire.lease_ms, acquire.latch),
        ("u:1", 30_000, "latch-u:1")
    );
    assert!(handoffs.in_flight("k"));
    assert!(matches!(handoffs.leave("k", &a), Standing::Pending));
    let holds = Registry::default();
    let (orphan, missed) = offer.settle(
        Some(2),
        Some(Ok(Attempt::Acquired { token: None })),
        &holds,
        &RLOCK,
        Instant::now(),
    );
    assert!(orphan.is_none() && !missed);
    assert!(!handoffs.in_flight("k"));
    assert!(
        holds.held_by_other("k", Owner::from_id(2)),
        "registered before the waiter wakes"
    );
    assert!(matches!(
        handoffs.leave("k", &a),
        Standing::Answered(Outcome::Acquired(..))
    ));
    // Another client is listening now: the next release only counts.
    assert!(handoffs
        .offer(&key, &key, &RLOCK, true)
        .unwrap()
        .waiter()
        .is_none());
}

#[test]
fn a_waiter_of_another_kind_is_never_handed_the_lock() {
    let handoffs = Arc::new(Handoffs::new(true));
    let key: Arc<str> = "k".into();
    let fenced = Place::new(
        &crate::raw::fenced::FENCED,
        "u:1".into(),
        Owner::from_id(1),
        Lease::Watchdog,
        30_000,
        Arc::new(Mutex::new("latch".into())),
    );
    handoffs.park(&key, &fenced, true);
    alone(&handoffs, &key);
    // An RLock release would send RLock's acquire: no fencing token for this waiter.
    let offer = handoffs.offer(&key, &key, &RLOCK, true).unwrap();
    assert!(offer.waiter().is_none(), "count only");
    drop(offer);
    let offer = handoffs.offer(&key, &key, &crate::raw::fenced::FENCED, true);
    assert!(offer.unwrap().waiter().is_some(), "its own kind hands off");
}

#[test]
fn a_waiter_that_left_is_never_taken() {
    let handoffs = Arc::new(Handoffs::new(true));
    let key: Arc<str> = "k".into();
    let a = place("u:1");
    handoffs.park(&key, &a, true);
    alone(&handoffs, &key);
    assert!(matches!(handoffs.leave("k", &a), Standing::Free));
    assert!(handoffs.offer(&key, &key, &RLOCK, true).is_none());
}

#[test]
fn a_hold_acquired_for_a_gone_waiter_is_returned_to_undo() {
    let handoffs = Arc::new(Handoffs::new(true));
    let key: Arc<str> = "k".into();
    let a = place("u:1");
    handoffs.park(&key, &a, true);
    alone(&handoffs, &key);
    let offer = handoffs.offer(&key, &key, &RLOCK, true).unwrap();
    assert!(matches!(handoffs.forget("k", &a), Forgotten::InFlight));
    let holds = Registry::default();
    let (orphan, _) = offer.settle(
        Some(1),
        Some(Ok(Attempt::Acquired { token: None })),
        &holds,
        &RLOCK,
        Instant::now(),
    );
    assert_eq!(&*orphan.expect("must be undone").field, "u:1");
    assert_eq!(holds.len(), 0, "nothing registered for a gone waiter");
}

#[test]
fn an_unsent_offer_gives_the_waiter_back() {
    let handoffs = Arc::new(Handoffs::new(true));
    let key: Arc<str> = "k".into();
    let a = place("u:1");
    handoffs.park(&key, &a, true);
    alone(&handoffs, &key);
    drop(handoffs.offer(&key, &key, &RLOCK, true).unwrap());
    assert!(!handoffs.in_flight("k"));
    assert!(matches!(
        handoffs.leave("k", &a),
        Standing::Answered(Outcome::Withdrawn)
    ));
}

#[test]
fn disabled_or_closed_never_offers() {
    let key: Arc<str> = "k".into();
    let off = Arc::new(Handoffs::new(false));
    let a = place("u:1");
    off.park(&key, &a, true);
    assert_eq!(off.parked(), 1, "counted all the same");
    assert!(off.offer(&key, &key, &RLOCK, true).is_none());
    assert!(matches!(off.leave("k", &a), Standing::Free));
    assert_eq!(off.parked(), 0);
    let closed = Arc::new(Handoffs::new(true));
    closed.park(&key, &place("u:1"), true);
    alone(&closed, &key);
    closed.close();
    assert!(closed.offer(&key, &key, &RLOCK, true).is_none());
}
