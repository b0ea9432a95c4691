//! Decision fields at the edges, hand-computed, with a ManualClock: these feed HTTP headers, so
//! they must be exact. Also: denials and peeks change nothing, and a clock running backwards
//! never grants.

use std::time::Duration;

use kova::{
    AlgorithmKind, AnyAlgorithm, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};

const MS: u64 = 1_000_000;

fn limiter<A: kova::Algorithm>(quota: Quota) -> (RateLimiter<A, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (RateLimiter::with_clock(quota, clock.clone()).unwrap(), clock)
}

#[test]
fn token_bucket_fields() {
    let (l, clock) = limiter::<TokenBucket>(Quota::per_second(2).unwrap());
    let first = l.check();
    assert_eq!((first.remaining(), first.reset_after_nanos()), (1, 500 * MS));
    let second = l.check();
    assert_eq!((second.remaining(), second.reset_after_nanos()), (0, 1000 * MS));
    let denied = l.check();
    assert_eq!(
        (denied.is_allowed(), denied.retry_after_nanos(), denied.reset_after_nanos()),
        (false, 500 * MS, 1000 * MS)
    );
    clock.advance(Duration::from_millis(250));
    assert_eq!(l.check().retry_after_nanos(), 250 * MS);
    clock.advance(Duration::from_millis(250));
    let allowed = l.check();
    assert_eq!(
        (allowed.is_allowed(), allowed.remaining(), allowed.reset_after_nanos()),
        (true, 0, 1000 * MS)
    );
}

#[test]
fn gcra_fields_with_burst_and_cost() {
    let (l, clock) = limiter::<Gcra>(Quota::per_second(10).unwrap().with_burst(5).unwrap());
    let d = l.check_n(3).unwrap();
    assert_eq!((d.limit(), d.remaining(), d.reset_after_nanos()), (5, 2, 300 * MS));
    let denied = l.check_n(4).unwrap();
    assert_eq!((denied.is_allowed(), denied.remaining(), denied.retry_after_nanos()), (false, 2, 200 * MS));
    clock.advance(Duration::from_millis(150));
    let peek = l.peek();
    assert_eq!((peek.remaining(), peek.reset_after_nanos()), (3, 150 * MS));
}

#[test]
fn fixed_window_fields() {
    let (l, clock) = limiter::<FixedWindow>(Quota::per_minute(5).unwrap());
    clock.set(10_000 * MS);
    assert_eq!(l.check_n(5).unwrap().reset_after_nanos(), 50_000 * MS);
    let denied = l.check();
    assert_eq!(
        (denied.remaining(), denied.retry_after_nanos(), denied.reset_after_nanos()),
        (0, 50_000 * MS, 50_000 * MS)
    );
    clock.set(60_000 * MS);
    assert_eq!(l.check().remaining(), 4);
}

#[test]
fn sliding_counter_fields() {
    let (l, clock) = limiter::<SlidingWindowCounter>(Quota::per_second(10).unwrap());
    assert!(l.check_n(10).unwrap().is_allowed());
    clock.set(1500 * MS); // estimate: floor(10 * 0.5) = 5
    let d = l.check_n(5).unwrap();
    // Full again once the 5 weigh less than one unit in the next window: 5 * (1 - e) < 1, from
    // e = 0.8 s + 1 ns.
    assert_eq!((d.is_allowed(), d.remaining(), d.reset_after_nanos()), (true, 0, 1300 * MS + 1));
    // One more fits once floor(10 * (1 - e)) + 5 + 1 <= 10, i.e. 10 * (1 - e) < 5: 1 ns on.
    let denied = l.check();
    assert_eq!((denied.is_allowed(), denied.retry_after_nanos()), (false, 1));
    clock.set(1500 * MS + 1);
    assert!(l.check().is_allowed());
    // The seventh fits once floor(10 * (1 - e)) <= 3, from e = 0.6 s + 1 ns.
    let denied = l.check();
    assert_eq!((denied.is_allowed(), denied.retry_after_nanos()), (false, 100 * MS));
    // From e = 0.9 s + 1 ns the previous window weighs nothing: the window's full 10 fit.
    clock.set(1900 * MS + 1);
    assert!(l.check_n(4).unwrap().is_allowed());
    assert!(!l.check().is_allowed());
}

#[test]
fn sliding_log_fields() {
    let (l, clock) = limiter::<SlidingWindowLog>(Quota::per_second(3).unwrap());
    l.check();
    clock.set(100 * MS);
    l.check_n(2).unwrap();
    let denied = l.check();
    assert_eq!(
        (denied.remaining(), denied.retry_after_nanos(), denied.reset_after_nanos()),
        (0, 900 * MS, 1000 * MS)
    );
    // Two units must expire for a cost of 2: the second-oldest at 100 ms.
    assert_eq!(l.check_n(2).unwrap().retry_after_nanos(), 1000 * MS);
    clock.set(1000 * MS);
    let d = l.check();
    assert_eq!((d.is_allowed(), d.remaining()), (true, 0));
}

fn any(kind: AlgorithmKind) -> (RateLimiter<AnyAlgorithm, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let algorithm = AnyAlgorithm::new(kind, Quota::per_second(4).unwrap()).unwrap();
    (RateLimiter::from_algorithm(algorithm, clock.clone()), clock)
}

#[test]
fn denials_and_peeks_change_nothing() {
    for kind in AlgorithmKind::ALL {
        let (l, clock) = any(kind);
        clock.set(5_000 * MS);
        l.check_n(4).unwrap();
        let first_denial = l.check();
        let retry = first_denial.retry_after();
        for _ in 0..1000 {
            assert!(!l.check_n(3).unwrap().is_allowed());
            assert_eq!(l.peek(), l.peek());
        }
        // Still exactly the same wait: the denials spent nothing and moved nothing.
        assert_eq!(l.check().retry_after(), retry, "{kind}");
        clock.advance(retry);
        assert!(l.check().is_allowed(), "{kind}");
    }
}

#[test]
fn a_clock_running_backwards_never_grants() {
    for kind in AlgorithmKind::ALL {
        let (l, clock) = any(kind);
        clock.set(10_000 * MS);
        l.check_n(4).unwrap();
        let at_ten = l.peek().remaining();
        // Backwards by a little and by a lot (the token bucket recognises up to 2^32 stamp units
        // of backwards time; see its layout docs).
        let backs: &[u64] =
            if kind == AlgorithmKind::TokenBucket { &[1, 1_000 * MS] } else { &[1, 1_000 * MS, 10_000 * MS] };
        for &back in backs {
            clock.set(10_000 * MS - back);
            assert!(!l.check().is_allowed(), "{kind} back {back}");
            assert!(l.peek().remaining() <= at_ten, "{kind}");
        }
    }
}

#[test]
fn reset_makes_a_key_full_again() {
    for kind in AlgorithmKind::ALL {
        let (l, _clock) = any(kind);
        l.check_n(4).unwrap();
        assert!(!l.check().is_allowed());
        l.reset();
        assert_eq!(l.peek().remaining(), 4, "{kind}");
        assert!(l.check_n(4).unwrap().is_allowed(), "{kind}");
    }
}
