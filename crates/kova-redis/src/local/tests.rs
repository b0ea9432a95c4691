//! The local table's protocol, driven by hand: leases stored and spent, refills and their
//! answers, and the races between checks of one key, each interleaving played step by step.

use std::time::Duration;

use kova::{Clock, ManualClock, Quota};

use super::*;

/// A table that leases 5 units at a time for 10 s, on `clock`.
fn leasing_local(clock: &Arc<dyn Clock>, cache_denials: bool) -> Local {
    Local::new(
        100,
        cache_denials,
        Some(Leasing::new(5, Duration::from_secs(10))),
        LocalClock::new(Some(clock)),
    )
}

/// Spends `cost` at a time from the key's lease until it answers no more: how many checks
/// it answered.
fn spend_all(local: &Local, key: &[u8], limit: &RedisLimit, cost: u64) -> u64 {
    let mut spent = 0;
    while local.answer(key, limit, cost).is_some_and(|d| d.is_allowed()) {
        spent += 1;
    }
    spent
}

/// A key's first check (which makes its entry), then a second that finds it hot and leases
/// 5 units, which Redis granted at `now` in a window that resets `reset_after` later.
fn lease_five(local: &Local, key: &[u8], limit: &RedisLimit, reset_after: u64, now: u64) {
    assert!(matches!(local.before(key, limit, 1), Before::Plain));
    let Before::Refill { guard, .. } = local.before(key, limit, 1) else { panic!("a refill") };
    local.after(key, limit, 1, &Decision::allowed(100, 94, reset_after), 5, Some(&guard), now);
}

/// Makes `key` hot and gives it a lease of 5 units, of which it spends 3: 2 are left.
fn two_units_left(local: &Local, key: &[u8], limit: &RedisLimit, now: u64) {
    lease_five(local, key, limit, 0, now);
    for _ in 0..3 {
        assert!(local.answer(key, limit, 1).is_some_and(|d| d.is_allowed()));
    }
}

/// A lease goes only into the entry its refill began on: when the key was forgotten (a
/// reset) while the refill was in flight, the units Redis granted may count against state
/// the reset deleted, so they are not kept, even in the entry a later check made meanwhile.
#[test]
fn a_lease_whose_key_was_forgotten_meanwhile_is_not_kept() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::starting_at(1_000_000_000));
    let local = leasing_local(&clock, false);
    let limit = RedisLimit::gcra(Quota::per_minute(100).unwrap()).unwrap();
    let key = b"k".as_slice();
    // A first check makes the entry, a second finds the key hot and refills.
    assert!(matches!(local.before(key, &limit, 1), Before::Plain));
    let Before::Refill { guard, .. } = local.before(key, &limit, 1) else { panic!("a refill") };
    // A reset forgets the key; a check makes a new entry before the refill's answer.
    local.forget(key, limit.kind());
    assert!(matches!(local.before(key, &limit, 1), Before::Plain));
    local.after(key, &limit, 1, &Decision::allowed(100, 94, 0), 5, Some(&guard), clock.now_nanos());
    assert_eq!(local.answer(key, &limit, 1), None, "a lease counted before the reset was kept");
    // A refill that began on the entry it answers keeps its lease.
    drop(guard);
    let Before::Refill { guard, .. } = local.before(key, &limit, 1) else { panic!("a refill") };
    local.after(key, &limit, 1, &Decision::allowed(100, 94, 0), 5, Some(&guard), clock.now_nanos());
    assert!(local.answer(key, &limit, 1).is_some_and(|d| d.is_allowed()));
}

/// A check that costs more than its key's lease holds refills it. When Redis denies the
/// refill (or grants nothing beyond the check's own cost, or does not answer), the units
/// left in the lease were still counted by Redis as this server's: later checks spend
/// them, under the lease's own expiry.
#[test]
fn a_refill_answered_without_a_lease_leaves_the_units_left_to_spend() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::starting_at(1_000_000_000));
    let limit = RedisLimit::gcra(Quota::per_minute(100).unwrap()).unwrap();
    let key = b"k".as_slice();
    let denied = Decision::denied(100, 0, 1_000_000, 1_000_000);
    let answers = [(denied, 0), (Decision::allowed(100, 0, 0), 0)];
    for cache_denials in [false, true] {
        for (decision, granted) in answers {
            let local = leasing_local(&clock, cache_denials);
            two_units_left(&local, key, &limit, clock.now_nanos());
            let Before::Refill { guard, .. } = local.before(key, &limit, 3) else { panic!("a refill") };
            local.after(key, &limit, 3, &decision, granted, Some(&guard), clock.now_nanos());
            drop(guard);
            let what = format!("after {decision:?} (granted {granted}, cache_denials {cache_denials})");
            assert_eq!(spend_all(&local, key, &limit, 1), 2, "units left in the lease {what}");
        }
        // A refill that failed (no answer: the guard dropped alone).
        let local = leasing_local(&clock, cache_denials);
        two_units_left(&local, key, &limit, clock.now_nanos());
        let Before::Refill { guard, .. } = local.before(key, &limit, 3) else { panic!("a refill") };
        drop(guard);
        assert_eq!(spend_all(&local, key, &limit, 1), 2, "units left in the lease after a failed refill");
    }
}

/// What Redis grants a refill supersedes what was left of the old lease, and units given
/// back after a refill keep their lease's end: nothing is spent beyond what Redis granted,
/// nor after the lease Redis granted it in has ended.
#[test]
fn a_refill_spends_only_what_redis_granted_within_its_lease() {
    let manual = ManualClock::starting_at(1_000_000_000);
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let limit = RedisLimit::gcra(Quota::per_minute(100).unwrap()).unwrap();
    let key = b"k".as_slice();
    let local = leasing_local(&clock, false);
    two_units_left(&local, key, &limit, clock.now_nanos());
    let Before::Refill { guard, .. } = local.before(key, &limit, 3) else { panic!("a refill") };
    local.after(key, &limit, 3, &Decision::allowed(100, 90, 0), 5, Some(&guard), clock.now_nanos());
    drop(guard);
    assert_eq!(spend_all(&local, key, &limit, 1), 5, "a new lease of 5 units");
    // The lease ends (its ttl) while its refill is in flight: what it had left stays unspent.
    let local = leasing_local(&clock, false);
    two_units_left(&local, key, &limit, clock.now_nanos());
    let Before::Refill { guard, .. } = local.before(key, &limit, 3) else { panic!("a refill") };
    manual.advance(Duration::from_secs(10));
    local.after(key, &limit, 3, &Decision::denied(100, 0, 1_000_000, 0), 0, Some(&guard), clock.now_nanos());
    drop(guard);
    assert_eq!(spend_all(&local, key, &limit, 1), 0, "units spent after their lease ended");
    // A fixed window's lease ends with its window.
    let limit = RedisLimit::fixed_window(Quota::per_minute(100).unwrap()).unwrap();
    let local = leasing_local(&clock, false);
    lease_five(&local, key, &limit, 1_000_000_000, clock.now_nanos());
    let Before::Refill { guard, .. } = local.before(key, &limit, 6) else { panic!("a refill") };
    manual.advance(Duration::from_secs(1));
    drop(guard);
    assert_eq!(spend_all(&local, key, &limit, 1), 0, "units spent after their window ended");
}

/// Two checks of a key with no entry race to make one: the key's first check (in `before`)
/// and a denial to cache (in `after`) look the key up, find none, and insert one. The
/// insert that comes last must not replace the entry made meanwhile, which may already hold
/// a lease Redis granted.
#[test]
fn an_insert_that_lost_a_race_keeps_the_entry_made_meanwhile() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::starting_at(1_000_000_000));
    let limit = RedisLimit::gcra(Quota::per_minute(100).unwrap()).unwrap();
    let key = b"k".as_slice();
    let key_ref = KeyRef { kind: limit.kind(), user_key: key };
    for force in [false, true] {
        let local = leasing_local(&clock, true);
        // Check X looks the key up and finds no entry...
        assert!(local.map.pin().get(&key_ref).is_none());
        // ... meanwhile check Y makes one, and check Z finds the key hot and leases 5 units.
        lease_five(&local, key, &limit, 0, clock.now_nanos());
        // X's insert comes last.
        let _ = local.insert(&key_ref, &limit, clock.now_nanos(), force);
        assert_eq!(spend_all(&local, key, &limit, 1), 5, "a lease replaced by a late insert (force {force})");
    }
}

/// A fixed window's lease ends with the window Redis decided in, counted from the time Redis
/// decided at, not from when its reply came: a late reply must not carry a lease into the
/// next window, whose limit Redis grants whole again.
#[test]
fn a_lease_ends_with_the_window_redis_decided_in_however_late_the_reply() {
    let manual = ManualClock::starting_at(1_000_000_000);
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let local = leasing_local(&clock, false);
    let limit = RedisLimit::fixed_window(Quota::per_second(100).unwrap()).unwrap();
    let key = b"k".as_slice();
    assert!(matches!(local.before(key, &limit, 1), Before::Plain));
    let Before::Refill { guard, .. } = local.before(key, &limit, 1) else { panic!("a refill") };
    // Redis decided 1 ms before its window's end; the reply comes 5 ms later.
    let decided = manual.now_nanos();
    manual.advance(Duration::from_millis(5));
    local.after(key, &limit, 1, &Decision::allowed(100, 94, 1_000_000), 5, Some(&guard), decided);
    assert_eq!(local.answer(key, &limit, 1), None, "a lease outlived the window Redis granted it in");
}
