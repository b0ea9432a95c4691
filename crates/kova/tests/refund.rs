//! A refund (for a request a later limit denied) leaves the limiter exactly as if the refunded
//! check had never happened: a twin limiter that never saw it must agree on every later peek.

use kova::{AlgorithmKind, AnyAlgorithm, Clock, ManualClock, Quota, RateLimiter};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Check(u64),
    /// Check `cost` on the first limiter only, wait, then refund it.
    ChargeThenRefund {
        cost: u64,
        wait: u64,
    },
}

fn word_kind() -> impl Strategy<Value = AlgorithmKind> {
    prop::sample::select(vec![
        AlgorithmKind::Gcra,
        AlgorithmKind::TokenBucket,
        AlgorithmKind::FixedWindow,
        AlgorithmKind::SlidingWindowCounter,
    ])
}

fn steps(period: u64, capacity: u64) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        (0..=period / 2).prop_map(Step::Advance),
        (1..=capacity).prop_map(Step::Check),
        (1..=capacity, 0..=period * 2).prop_map(|(cost, wait)| Step::ChargeThenRefund { cost, wait }),
    ];
    prop::collection::vec(step, 1..40)
}

fn case() -> impl Strategy<Value = (AlgorithmKind, Quota, Vec<Step>)> {
    (word_kind(), 1u64..20, prop_oneof![Just(1_000_000_000u64), 1000u64..10_000_000]).prop_flat_map(
        |(kind, limit, period)| {
            let quota = Quota::from_nanos(limit, period).unwrap();
            (Just(kind), Just(quota), steps(period, limit))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn refund_equals_never_charged((kind, quota, steps) in case()) {
        let clock = ManualClock::new();
        let build = || RateLimiter::from_algorithm(AnyAlgorithm::new(kind, quota).unwrap(), clock.clone());
        let (with_refund, twin) = (build(), build());
        for step in steps {
            match step {
                Step::Advance(d) => clock.advance_nanos(d),
                Step::Check(cost) => {
                    prop_assert_eq!(with_refund.check_n(cost).unwrap(), twin.check_n(cost).unwrap());
                }
                Step::ChargeThenRefund { cost, wait } => {
                    if with_refund.check_n(cost).unwrap().is_allowed() {
                        clock.advance_nanos(wait);
                        prop_assert!(with_refund.refund(cost));
                    }
                }
            }
            prop_assert_eq!(with_refund.peek(), twin.peek(), "{} at {}", kind, clock.now_nanos());
        }
    }
}

#[test]
fn the_sliding_log_declines_refunds_and_changes_nothing() {
    let clock = ManualClock::new();
    let algorithm =
        AnyAlgorithm::new(AlgorithmKind::SlidingWindowLog, Quota::per_second(3).unwrap()).unwrap();
    let limiter = RateLimiter::from_algorithm(algorithm, clock);
    limiter.check_n(2).unwrap();
    let before = limiter.peek();
    assert!(!limiter.refund(2));
    assert_eq!(limiter.peek(), before);
}
