//! Every algorithm against its sequential reference model, on random operation sequences:
//! (advance the ManualClock, check_n with a random cost, peek, reset). Decisions must be equal in
//! full: allowed, limit, remaining, retry_after, reset_after. The models are exact; the token
//! bucket's samples time at its stamp unit (its documented rounding), so no tolerance is needed.

use kova::model::differential::{run, Op};
use kova::{AlgorithmKind, Quota};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = AlgorithmKind> {
    prop::sample::select(AlgorithmKind::ALL.to_vec())
}

fn period() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1_000_000_000u64),
        Just(60_000_000_000),
        Just(3_600_000_000_000),
        Just(1_000_000),
        Just(7),
        1u64..10_000,
        1u64..100_000_000_000,
    ]
}

/// A quota and ops scaled to its period, so that sequences cross window edges and refills.
fn case() -> impl Strategy<Value = (AlgorithmKind, Quota, Vec<Op>)> {
    (kind(), 1u64..=24, period(), 1u64..=40)
        .prop_filter_map("quota rejected", |(kind, limit, period, burst)| {
            let quota = Quota::from_nanos(limit, period).ok()?;
            let windowed = !matches!(kind, AlgorithmKind::Gcra | AlgorithmKind::TokenBucket);
            let quota = if windowed { quota } else { quota.with_burst(burst).ok()? };
            Some((kind, quota))
        })
        .prop_flat_map(|(kind, quota)| {
            let period = quota.period_nanos();
            let capacity = quota.burst();
            let op = prop_oneof![
                4 => (0..=capacity + 1).prop_map(Op::Check),
                3 => (0..=period / 3 + 1).prop_map(Op::Advance),
                1 => (0..=period.saturating_mul(3)).prop_map(Op::Advance),
                1 => Just(Op::Peek),
                1 => Just(Op::Reset),
            ];
            (Just(kind), Just(quota), prop::collection::vec(op, 1..80))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_algorithm_matches_its_model((kind, quota, ops) in case()) {
        if let Err(mismatch) = run(kind, quota, &ops) {
            prop_assert!(false, "{mismatch}");
        }
    }
}

/// Many checks at one instant (the coarse clock's case) and long idles. The token bucket is left
/// out: its 42-bit stamp wraps after idles this long (documented; see the next test).
#[test]
fn bursts_at_one_instant_and_long_idles_match() {
    for kind in AlgorithmKind::ALL.into_iter().filter(|k| *k != AlgorithmKind::TokenBucket) {
        for quota in
            [Quota::per_second(10).unwrap(), Quota::per_hour(3).unwrap(), Quota::from_nanos(5, 9).unwrap()]
        {
            let mut ops = vec![Op::Check(1); 12];
            ops.extend([Op::Advance(quota.period_nanos() / 2), Op::Check(2), Op::Peek]);
            ops.extend([
                Op::Advance(1 << 40),
                Op::Check(1),
                Op::Advance(u64::MAX / 4),
                Op::Check(3),
                Op::Peek,
            ]);
            run(kind, quota, &ops).unwrap_or_else(|m| panic!("{m}"));
        }
    }
}

/// The token bucket across idles of any length: where its stamp wraps it may under-grant, never
/// over-grant, compared with the exact model.
#[test]
fn token_bucket_wrap_never_over_grants() {
    use kova::model::BucketModel;
    use kova::{Algorithm, ManualClock, RateLimiter, TokenBucket};
    let quota = Quota::per_second(10).unwrap();
    let bucket = TokenBucket::from_quota(quota).unwrap();
    let wrap = 1u64 << (42 + bucket.shift());
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut idles: Vec<u64> = (0..400)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> (seed % 40)
        })
        .collect();
    idles.extend([wrap, 3 * wrap, wrap + 1, wrap - 1]);
    for idle in idles {
        let clock = ManualClock::new();
        let limiter = RateLimiter::from_algorithm(bucket, clock.clone());
        let mut model = BucketModel::with_quantum(bucket.interval_nanos(), 10, 1 << bucket.shift());
        assert_eq!(limiter.check_n(10).unwrap(), model.decide(0, 10));
        clock.set(idle);
        let (real, exact) = (limiter.peek(), model.decide(idle, 0));
        assert!(real.remaining() <= exact.remaining(), "idle {idle}: {real:?} vs {exact:?}");
        if idle % wrap == 0 {
            // Exactly a multiple of the wrap: reads as no time passed (the documented hazard).
            assert_eq!(real.remaining(), 0, "idle {idle}");
        }
    }
}
