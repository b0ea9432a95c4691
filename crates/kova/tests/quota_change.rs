//! A direct limiter's quota changed at run time keeps what it consumed, for every algorithm, and
//! a rejected quota changes nothing.

use std::time::Duration;

use kova::{
    Algorithm, AlgorithmKind, AnyAlgorithm, Gcra, Keyed, ManualClock, Quota, QuotaError, RateLimiter,
    TokenBucket,
};

#[test]
fn every_algorithm_keeps_what_it_consumed() {
    for kind in AlgorithmKind::ALL {
        let clock = ManualClock::new();
        let algorithm = AnyAlgorithm::new(kind, Quota::per_second(10).unwrap()).unwrap();
        let mut limiter = RateLimiter::from_algorithm(algorithm, clock.clone());
        assert!(limiter.check_n(6).unwrap().is_allowed());
        limiter.set_quota(Quota::per_second(20).unwrap()).unwrap();
        assert_eq!(limiter.algorithm().kind(), kind, "the kind is kept");
        assert_eq!(limiter.peek().limit(), 20, "{kind}");
        assert_eq!(limiter.peek().remaining(), 14, "{kind}: 6 used of the new 20");
        // Down to a smaller quota: used units beyond its capacity are dropped.
        limiter.set_quota(Quota::per_second(4).unwrap()).unwrap();
        assert_eq!(limiter.peek().remaining(), 0, "{kind}");
        assert!(!limiter.check().is_allowed(), "{kind}");
    }
}

#[test]
fn a_bucket_refills_at_the_new_rate_from_the_change() {
    let clock = ManualClock::new();
    let mut limiter =
        RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
    assert!(limiter.check_n(10).unwrap().is_allowed());
    clock.advance(Duration::from_millis(100)); // one unit back at the old rate
    limiter.set_quota(Quota::per_second(100).unwrap()).unwrap();
    assert_eq!(limiter.peek().remaining(), 91);
    clock.advance(Duration::from_millis(10)); // one unit at the new rate
    assert_eq!(limiter.peek().remaining(), 92);
}

#[test]
fn a_rejected_quota_changes_nothing() {
    let clock = ManualClock::new();
    let mut limiter =
        RateLimiter::<TokenBucket, _>::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
    assert!(limiter.check_n(3).unwrap().is_allowed());
    let before = limiter.peek();
    let too_big = Quota::per_second(10).unwrap().with_burst(TokenBucket::MAX_BURST + 1).unwrap();
    assert!(matches!(limiter.set_quota(too_big), Err(QuotaError::Unrepresentable { .. })));
    assert_eq!(limiter.peek(), before);
    assert_eq!(limiter.algorithm().quota(), Quota::per_second(10).unwrap());
    let copy = limiter.with_quota(Quota::per_minute(60).unwrap()).unwrap();
    assert_eq!(copy.peek().remaining(), 57);
    assert_eq!(limiter.peek(), before, "with_quota leaves the original alone");
}

/// A debt run into by charges is paid by later checks, never forgiven by a quota change: the
/// same quota set again and again leaves the state as it was, and a larger overdraft keeps all
/// of it; a new quota without an overdraft keeps as much as it can hold (its whole capacity).
#[test]
fn a_quota_change_carries_a_settled_debt_over() {
    let quota = Quota::per_second(10).unwrap().with_overdraft(10);
    let clock = ManualClock::new();
    let mut limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
    assert_eq!(limiter.charge(20), 20); // the burst, then 10 into the overdraft
    let in_debt = limiter.peek();
    assert_eq!(in_debt.reset_after(), Duration::from_secs(2));
    for _ in 0..5 {
        limiter.set_quota(quota).unwrap();
        assert_eq!(limiter.peek(), in_debt);
    }
    // Paid by time, not by the changes: denied until the debt and a unit have refilled.
    clock.advance(Duration::from_millis(1_099));
    assert!(!limiter.check().is_allowed());
    clock.advance(Duration::from_millis(1));
    assert!(limiter.check().is_allowed());

    let mut limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
    assert_eq!(limiter.charge(20), 20);
    limiter.set_quota(Quota::per_second(10).unwrap().with_overdraft(50)).unwrap();
    assert_eq!(limiter.peek().reset_after(), Duration::from_secs(2));
    limiter.set_quota(Quota::per_second(10).unwrap()).unwrap();
    assert_eq!(limiter.peek().reset_after(), Duration::from_secs(1), "capped at the capacity");

    // The same through a keyed table's per-key quota.
    let table = Keyed::<u64, Gcra, _>::with_clock(quota, clock.clone()).unwrap();
    assert_eq!(table.charge(&1, 20), 20);
    let before = table.peek(&1);
    for _ in 0..5 {
        table.set_quota(&1, quota).unwrap();
        assert_eq!(table.peek(&1), before);
    }
}
