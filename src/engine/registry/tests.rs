//! Unit tests of the hold registry: pure logic, no Redis (time is passed in).
use super::*;
use crate::raw::rlock::RLOCK;

/// Owner `u:N` of client `u` (the default registry's).
fn owner(field: &str) -> Owner {
    Owner::from_id(field.strip_prefix("u:").unwrap().parse().unwrap())
}

fn register(holds: &Registry, key: &str, field: &str, lease: Lease, at: Instant) -> Ticket {
    holds
        .register(
            &RLOCK,
            &key.into(),
            &key.into(),
            (owner(field), 1),
            lease,
            at,
        )
        .expect("an open registry")
}

#[test]
fn reentrant_holds_share_one_entry_and_signal() {
    let holds = Registry::default();
    let now = Instant::now();
    let a = register(&holds, "k", "u:1", Lease::Watchdog, now);
    let b = register(&holds, "k", "u:1", Lease::Watchdog, now);
    assert!(Arc::ptr_eq(&a, &b), "one entry");
    assert_eq!(holds.len(), 1);
    assert_eq!(
        holds.surrender(&a, Lease::Watchdog),
        Surrender::Live { last: false }
    );
    assert_eq!(holds.renewed_len(), 1, "one hold left: still renewed");
    assert_eq!(
        holds.surrender(&b, Lease::Watchdog),
        Surrender::Live { last: true }
    );
    assert_eq!(holds.len(), 0, "last hold gone: renewal stops");
}

#[test]
fn a_lost_entry_is_not_confused_with_a_later_one() {
    let holds = Registry::default();
    let now = Instant::now();
    let old = register(&holds, "k", "u:1", Lease::Watchdog, now);
    holds.lose(&old, LostReason::Gone);
    assert_eq!(old.lost.reason(), Some(LostReason::Gone));
    let new = register(&holds, "k", "u:1", Lease::Watchdog, now);
    assert!(!Arc::ptr_eq(&old, &new), "a new entry");
    // The stale guard neither releases nor disturbs the new entry.
    assert_eq!(
        holds.surrender(&old, Lease::Watchdog),
        Surrender::Lost(None)
    );
    holds.lose(&old, LostReason::Gone);
    assert!(!new.lost.is_fired());
    assert_eq!(holds.len(), 1);
}

#[test]
fn owners_of_one_key_chain_and_unlink_in_any_order() {
    let holds = Registry::default();
    let now = Instant::now();
    let a = register(&holds, "k", "u:1", Lease::Watchdog, now);
    let b = register(&holds, "k", "u:2", Lease::Watchdog, now);
    let c = register(&holds, "k", "u:3", Lease::Watchdog, now);
    let other = register(&holds, "j", "u:1", Lease::Watchdog, now);
    assert_eq!(holds.len(), 4);
    assert!(holds.held_by_other("k", owner("u:1")));
    assert!(!holds.held_by_other("j", owner("u:1")), "only its own hold");
    assert!(!holds.held_by_other("free", owner("u:1")));
    // Middle, head, then last of the chain.
    assert_eq!(
        holds.surrender(&b, Lease::Watchdog),
        Surrender::Live { last: true }
    );
    assert_eq!(
        holds.surrender(&c, Lease::Watchdog),
        Surrender::Live { last: true }
    );
    assert!(!holds.held_by_other("k", owner("u:1")));
    assert!(holds.held_by_other("k", owner("u:2")));
    assert_eq!(
        holds.surrender(&a, Lease::Watchdog),
        Surrender::Live { last: true }
    );
    assert!(!holds.held_by_other("k", owner("u:2")));
    assert_eq!(holds.len(), 1);
    assert_eq!(
        holds.surrender(&other, Lease::Watchdog),
        Surrender::Live { last: true }
    );
    assert_eq!(holds.len(), 0);
}

#[test]
fn unconfirmed_for_a_whole_lease_is_lost() {
    let holds = Registry::default();
    let t0 = Instant::now();
    let t = register(&holds, "k", "u:1", Lease::Watchdog, t0);
    let batch = holds.renewal_snapshot();
    let lease = Duration::from_secs(30);
    assert!(holds
        .expire_unconfirmed(&batch, lease, t0 + Duration::from_secs(29))
        .is_empty());
    assert!(!t.lost.is_fired());
    let lost = holds.expire_unconfirmed(&batch, lease, t0 + lease);
    assert_eq!(lost.len(), 1);
    assert_eq!(
        (&*lost[0].key, lost[0].reason),
        ("k", LostReason::Unconfirmed)
    );
    assert!(lost[0].may_remain(), "lost by the clock: it is released");
    assert_eq!(t.lost.reason(), Some(LostReason::Unconfirmed));
}

#[test]
fn the_renewed_count_follows_watchdog_holds_without_a_scan() {
    let holds = Registry::default();
    let now = Instant::now();
    let w = register(&holds, "k", "u:1", Lease::Watchdog, now);
    let f = register(
        &holds,
        "k",
        "u:1",
        Lease::Fixed(Duration::from_secs(5)),
        now,
    );
    let other = register(&holds, "j", "u:1", Lease::Watchdog, now);
    assert_eq!(holds.renewed_len(), 2);
    holds.surrender(&w, Lease::Watchdog);
    assert_eq!(holds.renewed_len(), 1, "k has only a fixed lease left");
    assert_eq!(holds.len(), 2);
    holds.lose(&other, LostReason::Gone);
    assert_eq!(holds.renewed_len(), 0);
    holds.surrender(&f, Lease::Fixed(Duration::from_secs(5)));
    assert_eq!((holds.len(), holds.renewed_len()), (0, 0));
    let again = register(&holds, "k", "u:2", Lease::Watchdog, now);
    assert_eq!(holds.renewed_len(), 1);
    holds.lose(&again, LostReason::Gone);
    assert_eq!(holds.renewed_len(), 0);
}

#[test]
fn fixed_leases_expire_and_are_never_renewed() {
    let holds = Registry::default();
    let t0 = Instant::now();
    let t = register(&holds, "k", "u:1", Lease::Fixed(Duration::from_secs(5)), t0);
    assert_eq!(holds.renewed_len(), 0);
    assert_eq!(
        holds.next_lease_deadline(),
        Some(t0 + Duration::from_secs(5))
    );
    assert!(holds.expire_leases(t0 + Duration::from_secs(4)).is_empty());
    assert!(!t.lost.is_fired());
    assert_eq!(holds.expire_leases(t0 + Duration::from_secs(5)).len(), 1);
    assert_eq!(t.lost.reason(), Some(LostReason::LeaseExpired));
}

/// Whether the watchdog was woken since it last looked (the wake consumed, as it would be).
fn woken(holds: &Registry) -> bool {
    std::pin::pin!(holds.changed.notified()).enable()
}

#[test]
fn only_a_lease_ending_before_the_watchdogs_wake_up_wakes_it() {
    let holds = Registry::default();
    let t0 = Instant::now();
    let secs = Duration::from_secs;
    assert_eq!(holds.next_lease_deadline(), None, "it sleeps without one");
    let ten = register(&holds, "a", "u:1", Lease::Fixed(secs(10)), t0);
    assert!(woken(&holds), "the first fixed lease");
    assert_eq!(holds.next_lease_deadline(), Some(t0 + secs(10)));
    // A semaphore's permits (a lease that never ends) and a longer lease: nothing to do.
    register(&holds, "b", "u:2", Lease::Fixed(secs(3_000_000_000)), t0);
    let twenty = register(&holds, "c", "u:3", Lease::Fixed(secs(20)), t0);
    assert!(!woken(&holds), "leases ending after its wake-up");
    register(&holds, "d", "u:4", Lease::Fixed(secs(5)), t0);
    assert!(woken(&holds), "a lease ending before it");
    assert!(!woken(&holds), "one wake");
    assert_eq!(holds.next_lease_deadline(), Some(t0 + secs(5)));
    // Released entries leave their deadline armed: the watchdog wakes, looks, sleeps on.
    holds.surrender(&ten, Lease::Fixed(secs(10)));
    holds.surrender(&twenty, Lease::Fixed(secs(20)));
    register(&holds, "e", "u:5", Lease::Fixed(secs(7)), t0);
    assert!(!woken(&holds), "after the armed 5 s");
    // The last watchdog hold of an entry gone, its fixed lease decides: before 5 s, a wake.
    let mixed = register(&holds, "f", "u:6", Lease::Watchdog, t0);
    register(&holds, "f", "u:6", Lease::Fixed(secs(1)), t0);
    assert!(
        woken(&holds),
        "a lease ending before the armed one, even under a watchdog hold"
    );
    assert_eq!(
        holds.next_lease_deadline(),
        Some(t0 + secs(5)),
        "the watchdog hold renews f"
    );
    holds.surrender(&mixed, Lease::Watchdog);
    assert!(woken(&holds), "f's 1 s lease now counts");
    assert_eq!(holds.next_lease_deadline(), Some(t0 + secs(1)));
}

#[test]
fn permits_taken_one_after_another_wake_the_watchdog_once() {
    let holds = Registry::default();
    let (t0, never) = (
        Instant::now(),
        Lease::Fixed(Duration::from_secs(3_000_000_000)),
    );
    assert_eq!(holds.next_lease_deadline(), None);
    for (i, field) in ["u:1", "u:2", "u:3"].into_iter().enumerate() {
        let permits = register(&holds, "sem", field, never, t0);
        assert_eq!(woken(&holds), i == 0, "take {i}");
        // Given back: the table empties, and the deadline it armed stays armed.
        assert_eq!(
            holds.surrender(&permits, never),
            Surrender::Live { last: true }
        );
        assert_eq!(holds.len(), 0);
    }
}

#[test]
fn the_lease_clock_loses_a_hold_a_lease_after_its_last_confirmation() {
    let holds = Registry::new(Duration::from_secs(30), "u");
    let t0 = Instant::now();
    let watchdog = register(&holds, "k", "u:1", Lease::Watchdog, t0);
    assert!(!watchdog.lost.check_clock(t0 + Duration::from_secs(29)));
    let batch = holds.renewal_snapshot();
    holds.apply_renewals(&batch, vec![true], t0 + Duration::from_secs(10));
    assert!(
        !watchdog.lost.check_clock(t0 + Duration::from_secs(39)),
        "a confirmed renewal moves the clock"
    );
    assert!(watchdog.lost.check_clock(t0 + Duration::from_secs(40)));
    assert_eq!(watchdog.lost.reason(), Some(LostReason::Unconfirmed));
    // Lost by the clock, it may still be in Redis: the entry goes, to be released.
    let Surrender::Lost(Some(lost)) = holds.surrender(&watchdog, Lease::Watchdog) else {
        panic!("the clock says lost");
    };
    assert_eq!((&*lost.field, lost.holds), ("u:1", 1));
    assert!(lost.may_remain());
    assert_eq!(
        holds.len(),
        0,
        "forgotten: a new acquire makes a fresh entry"
    );

    let fixed = register(&holds, "j", "u:1", Lease::Fixed(Duration::from_secs(5)), t0);
    assert!(!fixed.lost.check_clock(t0 + Duration::from_millis(4999)));
    assert!(fixed.lost.check_clock(t0 + Duration::from_secs(5)));
    assert_eq!(fixed.lost.reason(), Some(LostReason::LeaseExpired));
}

#[test]
fn a_token_asked_for_after_the_signal_fired_is_already_cancelled() {
    let signal = LostSignal::default();
    let before = signal.token();
    assert!(!before.is_cancelled());
    signal.fire(LostReason::Gone);
    signal.fire(LostReason::Shutdown);
    assert!(before.is_cancelled());
    assert!(signal.token().is_cancelled());
    assert_eq!(
        signal.reason(),
        Some(LostReason::Gone),
        "the first reason sticks"
    );
    let late = LostSignal::default();
    late.fire(LostReason::LeaseExpired);
    assert!(late.token().is_cancelled(), "made after firing");
}

#[test]
fn a_guard_keeps_24_bytes_and_an_entry_one_allocation_of_at_most_128() {
    // What a held lock costs in memory is mostly these two (docs/BENCHMARKS.md, P4).
    assert_eq!(std::mem::size_of::<crate::engine::hold::Hold>(), 24);
    assert_eq!(std::mem::size_of::<Option<crate::engine::hold::Hold>>(), 24);
    // The Arc's two counts come on top; glibc serves 120 bytes from a 128-byte chunk.
    assert!(std::mem::size_of::<Entry>() + 16 <= 120);
}

#[test]
fn a_drained_registry_registers_nothing_more() {
    let holds = Registry::default();
    let now = Instant::now();
    let a = register(&holds, "k", "u:1", Lease::Watchdog, now);
    assert_eq!(holds.drain().len(), 1);
    assert!(!a.is_registered());
    let late = holds.register(
        &RLOCK,
        &"k".into(),
        &"k".into(),
        (owner("u:2"), 1),
        Lease::Watchdog,
        now,
    );
    assert!(
        late.is_none(),
        "a hold acquired after shutdown's drain escaped it"
    );
    assert_eq!(holds.len(), 0);
    assert!(matches!(
        holds.surrender(&a, Lease::Watchdog),
        Surrender::Lost(None)
    ));
}
