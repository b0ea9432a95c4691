//! Bad input gets a typed error naming the problem; extreme values never panic or overflow.

use std::time::Duration;

use kova::{
    Algorithm, AlgorithmKind, AnyAlgorithm, CheckError, FixedWindow, Gcra, ManualClock, Quota, QuotaError,
    RateLimiter, SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};

#[test]
fn every_quota_error_case() {
    assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroLimit));
    assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
    assert_eq!(Quota::new(1, Duration::from_nanos(0)), Err(QuotaError::ZeroPeriod));
    assert_eq!(Quota::per_second(5).unwrap().with_burst(0), Err(QuotaError::ZeroBurst));
    assert_eq!(Quota::new(1, Duration::MAX), Err(QuotaError::PeriodTooLong));
    assert_eq!(Quota::from_nanos(2, 1), Err(QuotaError::RateTooHigh { limit: 2, period_nanos: 1 }));
    assert!(matches!(
        TokenBucket::from_quota(Quota::per_second(10).unwrap().with_burst(1 << 22).unwrap()),
        Err(QuotaError::Unrepresentable { algorithm: "token_bucket", field: "burst", .. })
    ));
    assert!(matches!(
        FixedWindow::from_quota(Quota::per_hour(1 << 32).unwrap()),
        Err(QuotaError::Unrepresentable { algorithm: "fixed_window", field: "limit", .. })
    ));
    assert!(matches!(
        SlidingWindowCounter::from_quota(Quota::per_hour(1 << 20).unwrap()),
        Err(QuotaError::Unrepresentable { algorithm: "sliding_window_counter", .. })
    ));
    assert!(matches!(
        SlidingWindowLog::from_quota(Quota::per_hour((1 << 20) + 1).unwrap()),
        Err(QuotaError::Unrepresentable { algorithm: "sliding_window_log", .. })
    ));
    // A burst so large that burst * interval leaves the timeline.
    assert!(matches!(
        Gcra::from_quota(Quota::per_second(1).unwrap().with_burst(u64::MAX).unwrap()),
        Err(QuotaError::Unrepresentable { algorithm: "gcra", field: "burst", .. })
    ));
    for kind in
        [AlgorithmKind::FixedWindow, AlgorithmKind::SlidingWindowCounter, AlgorithmKind::SlidingWindowLog]
    {
        assert_eq!(
            AnyAlgorithm::new(kind, Quota::per_second(10).unwrap().with_burst(20).unwrap()),
            Err(QuotaError::BurstUnsupported { algorithm: kind.as_str() })
        );
    }
}

#[test]
fn errors_say_what_is_wrong() {
    assert_eq!(QuotaError::ZeroLimit.to_string(), "quota limit must be at least 1");
    let too_high = Quota::from_nanos(10, 3).unwrap_err().to_string();
    assert!(too_high.contains("10 per 3 ns"), "{too_high}");
    let cost = CheckError::CostExceedsCapacity { cost: 7, capacity: 5 }.to_string();
    assert!(cost.contains("cost 7") && cost.contains("capacity of 5"), "{cost}");
}

#[test]
fn a_cost_above_the_capacity_is_an_error_not_a_denial() {
    for kind in AlgorithmKind::ALL {
        let limiter =
            RateLimiter::from_algorithm(AnyAlgorithm::new(kind, Quota::per_second(5).unwrap()).unwrap());
        assert_eq!(
            limiter.check_n(6),
            Err(CheckError::CostExceedsCapacity { cost: 6, capacity: 5 }),
            "{kind}"
        );
        assert_eq!(
            limiter.check_n(u64::MAX),
            Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 5 }),
            "{kind}"
        );
        // The error consumed nothing.
        assert_eq!(limiter.peek().remaining(), 5, "{kind}");
        assert!(limiter.check_n(5).unwrap().is_allowed(), "{kind}");
    }
}

/// Extreme quotas and clock readings: decisions or errors, never a panic (debug builds check
/// every arithmetic overflow).
#[test]
fn extreme_values_never_panic() {
    let quotas = [
        Quota::from_nanos(1, 1),
        Quota::per_second(1_000_000_000),
        Quota::new(1, Duration::from_secs(365 * 24 * 3600)),
        Quota::from_nanos(1, u64::MAX),
        Quota::from_nanos(u64::MAX, u64::MAX),
        Quota::from_nanos(3, u64::MAX - 1),
        Quota::per_hour(1).and_then(|q| q.with_burst(1 << 21)),
    ];
    let instants = [0, 1, 999, u64::MAX / 2, u64::MAX - 1, u64::MAX, 3, 0];
    for quota in quotas.into_iter().flatten() {
        for kind in AlgorithmKind::ALL {
            let Ok(algorithm) = AnyAlgorithm::new(kind, quota) else { continue };
            let clock = ManualClock::new();
            let limiter = RateLimiter::from_algorithm_with_clock(algorithm, clock.clone());
            for &now in &instants {
                clock.set(now);
                for cost in [0, 1, algorithm.capacity(), algorithm.capacity().saturating_add(1), u64::MAX] {
                    let _ = limiter.check_n(cost);
                }
                let _ = limiter.peek();
            }
            limiter.reset();
        }
    }
}

#[test]
fn one_request_per_year_is_exact() {
    let year = Duration::from_secs(365 * 24 * 3600);
    let clock = ManualClock::new();
    let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::new(1, year).unwrap(), clock.clone()).unwrap();
    assert!(limiter.check().is_allowed());
    let denied = limiter.check();
    assert_eq!(denied.retry_after(), year);
    clock.advance(year - Duration::from_nanos(1));
    assert_eq!(limiter.check().retry_after(), Duration::from_nanos(1));
    clock.advance(Duration::from_nanos(1));
    assert!(limiter.check().is_allowed());
}
