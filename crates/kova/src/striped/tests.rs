//! Unit tests of the striped limiter's protocol on a manual clock.

use std::time::Duration;

use super::stripe::{pack, unpack};
use super::*;
use crate::loom::atomic::Ordering;
use crate::{Fallback, FixedWindow, ManualClock, TokenBucket};

fn limiter<W: WordAlgorithm>(
    limit: u64,
    stripes: usize,
    batch: u64,
) -> (StripedLimiter<W, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_hour(limit).unwrap();
    let limiter = StripedLimiter::<W>::builder(quota)
        .stripes(stripes)
        .batch(batch)
        .lease(Duration::from_millis(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    (limiter, clock)
}

#[test]
fn a_stripe_leases_a_batch_and_spends_it_without_the_central_word() {
    let (limiter, _) = limiter::<Gcra>(100, 2, 10);
    let first = limiter.check_n_on(0, 1).unwrap();
    assert_eq!(
        (first.is_allowed(), first.remaining(), first.fallback()),
        (true, 9, Some(Fallback::StripeLease))
    );
    assert_eq!(limiter.central_decide(0).remaining(), 90);
    for left in (0..9).rev() {
        assert_eq!(limiter.check_n_on(0, 1).unwrap().remaining(), left);
    }
    assert_eq!(limiter.central_decide(0).remaining(), 90, "spending a lease never touches the central word");
    assert_eq!(limiter.check_n_on(0, 3).unwrap().remaining(), 7);
    assert_eq!(limiter.central_decide(0).remaining(), 80);
}

#[test]
fn every_unit_is_admitted_held_or_given_back() {
    let (limiter, _) = limiter::<TokenBucket>(50, 4, 4);
    let mut admitted = 0;
    for i in 0..200 {
        let decision = limiter.check_n_on(i % 5, 1 + (i as u64 % 3)).unwrap();
        if decision.is_allowed() {
            admitted += 1 + (i as u64 % 3);
        }
    }
    assert!(admitted <= 50);
    let held = limiter.held();
    assert_eq!(limiter.flush(), held);
    assert_eq!(limiter.held(), 0);
    assert_eq!(admitted + limiter.peek().remaining(), 50, "a unit was lost or made up");
}

#[test]
fn near_the_end_checks_go_exact_and_denials_say_where_units_are_parked() {
    let (limiter, _) = limiter::<Gcra>(10, 2, 4);
    assert!(limiter.check_n_on(0, 1).unwrap().is_allowed()); // stripe 0 holds 3, central 6
    assert!(limiter.check_n_on(1, 1).unwrap().is_allowed()); // stripe 1 holds 3, central 2
                                                             // Central cannot give a batch: stripe 1's next lease is an exact check of the central word.
    assert!(limiter.check_n_on(1, 3).unwrap().is_allowed()); // from stripe 1
    let exact = limiter.check_n_on(1, 2).unwrap();
    assert_eq!((exact.is_allowed(), exact.fallback(), exact.remaining()), (true, None, 0));
    let denied = limiter.check_n_on(1, 1).unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.fallback(), Some(Fallback::StripeLease), "stripe 0 still holds 3");
    assert!(limiter.check_n_on(1, 1).unwrap().retry_after_nanos() > 0);
    assert_eq!(limiter.held(), 3);
}

#[test]
fn expired_leases_go_back_at_a_denial_and_at_the_next_check() {
    let (limiter, clock) = limiter::<FixedWindow>(10, 2, 5);
    assert!(limiter.check_n_on(0, 1).unwrap().is_allowed()); // stripe 0 holds 4
    assert!(limiter.check_n_on(1, 1).unwrap().is_allowed()); // stripe 1 holds 4, central 0
    clock.advance(Duration::from_millis(2));
    // Stripe 1's own lease expired: its 4 go back; the central word's 4 are less than a batch,
    // so the check is decided there, exactly.
    let renewed = limiter.check_n_on(1, 1).unwrap();
    assert_eq!((renewed.is_allowed(), renewed.remaining(), renewed.fallback()), (true, 3, None));
    for _ in 0..3 {
        assert!(limiter.check_n_on(1, 1).unwrap().is_allowed());
    }
    // The central word is empty, but stripe 0's expired 4 come back at the denial.
    let reclaimed = limiter.check_n_on(1, 1).unwrap();
    assert!(reclaimed.is_allowed(), "stripe 0's expired units were not reclaimed");
    assert_eq!(reclaimed.remaining(), 3);
    assert_eq!(unpack(limiter.stripes.word(0).load(Ordering::Relaxed)).0, 0);
}

#[test]
fn a_denial_takes_nothing_and_big_checks_are_exact() {
    let (limiter, _) = limiter::<Gcra>(20, 1, 4);
    let big = limiter.check_n_on(0, 15).unwrap();
    assert_eq!((big.is_allowed(), big.fallback(), big.remaining()), (true, None, 5));
    let denied = limiter.check_n_on(0, 6).unwrap();
    assert_eq!((denied.is_allowed(), denied.fallback()), (false, Some(Fallback::StripeLease)));
    assert_eq!(limiter.peek().remaining(), 5);
    assert_eq!(limiter.held(), 0);
    assert_eq!(limiter.check_n(21), Err(CheckError::CostExceedsCapacity { cost: 21, capacity: 20 }));
}

#[test]
fn a_full_stripe_sends_a_second_lease_back() {
    let (limiter, _) = limiter::<Gcra>(100, 1, 4);
    let stripe = limiter.stripes.word(0);
    stripe.store(pack(3, 0), Ordering::Relaxed);
    assert_eq!(limiter.stripes.put_back(&limiter.exact(), stripe, 2, 0), 0);
    assert_eq!(unpack(stripe.load(Ordering::Relaxed)).0, 3, "a stripe never holds more than a batch");
    assert_eq!(limiter.central_decide(0).remaining(), 100);
}

#[test]
fn bad_configurations_get_typed_errors() {
    let quota = Quota::per_second(8).unwrap();
    let build = |b: StripedBuilder<Gcra>| b.clock(ManualClock::new()).build().map(|_| ());
    assert_eq!(build(StripedLimiter::builder(quota).stripes(0)), Err(StripedError::Stripes { stripes: 0 }));
    assert_eq!(
        build(StripedLimiter::builder(quota).stripes(512)),
        Err(StripedError::Stripes { stripes: 512 })
    );
    assert_eq!(build(StripedLimiter::builder(quota).batch(0)), Err(StripedError::Batch { batch: 0, max: 8 }));
    assert!(matches!(
        build(StripedLimiter::builder(quota).lease(Duration::ZERO)),
        Err(StripedError::Lease { .. })
    ));
    assert!(matches!(
        build(StripedLimiter::builder(quota).lease(Duration::from_secs(1 << 25))),
        Err(StripedError::Lease { .. })
    ));
    let overdraft =
        StripedLimiter::<TokenBucket>::builder(quota.with_overdraft(1)).clock(ManualClock::new()).build();
    assert!(matches!(overdraft, Err(StripedError::Quota(_))));
    let error = StripedError::Stripes { stripes: 3 };
    assert!(error.to_string().contains("power of two"), "{error}");
}
