//! Bad input gets a typed error naming the problem; extreme values never panic or overflow.

use std::time::Duration;

use kova::keyed::{HotKeys, KeyedBuilder, KeyedError, MAX_HOT_KEYS};
use kova::sketch::{Sketch, SketchError, MAX_CELLS_PER_KEY, MAX_MEMORY_BYTES};
use kova::striped::{StripedError, StripedLimiter, MAX_STRIPES};
use kova::{
    Algorithm, AlgorithmKind, AnyAlgorithm, CheckError, CoarseClock, FixedWindow, Gcra, Keyed, ManualClock,
    Quota, QuotaError, RateLimiter, SlidingWindowCounter, SlidingWindowLog, TokenBucket,
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
        let limiter = RateLimiter::from_algorithm(
            AnyAlgorithm::new(kind, Quota::per_second(5).unwrap()).unwrap(),
            CoarseClock::new(),
        );
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
            let limiter = RateLimiter::from_algorithm(algorithm, clock.clone());
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

/// Every size and count a keyed builder takes, at 0, 1, its most, one past it and `usize::MAX`:
/// a table, or the typed error that names the option (never an overflow, a failed layout or an
/// allocation the system refuses).
#[test]
fn every_keyed_builder_option_is_bounded() {
    type Builder = KeyedBuilder<u64, Gcra, ManualClock>;
    let quota = Quota::per_second(10).unwrap();
    // One shard and no door unless the case sets them, so that a case allocates little.
    let build = |set: &dyn Fn(Builder) -> Builder| {
        set(Keyed::builder(quota).clock(ManualClock::new()).shards(1).doorkeeper(0)).build().map(|table| {
            // Built: it works.
            assert!(table.check(&1).is_allowed());
            (table.max_keys(), table.shard_count())
        })
    };
    let edges = |max: usize| [0, 1, max, max + 1, usize::MAX];

    for max_keys in edges(Builder::MAX_KEYS) {
        let got = build(&|b| b.max_keys(max_keys));
        if (1..=Builder::MAX_KEYS).contains(&max_keys) {
            // The most keys need more than one shard: the table takes what they need.
            let (keys, shards) = got.expect("in range");
            assert_eq!(keys, max_keys);
            assert!(shards == 1 || max_keys > 1 << 24, "{shards}");
        } else {
            assert_eq!(got, Err(KeyedError::MaxKeys { max_keys, max: Builder::MAX_KEYS }));
        }
    }
    for shards in edges(Builder::MAX_SHARDS) {
        let got = build(&|b| b.shards(shards));
        if (1..=Builder::MAX_SHARDS).contains(&shards) {
            assert_eq!(got.expect("in range").1, shards);
        } else {
            assert_eq!(got, Err(KeyedError::Shards { shards, max: Builder::MAX_SHARDS }));
        }
    }
    for entries in edges(Builder::MAX_RECLAIM_SCAN) {
        let got = build(&|b| b.reclaim_scan(entries));
        if (1..=Builder::MAX_RECLAIM_SCAN).contains(&entries) {
            assert!(got.is_ok(), "{entries}: {got:?}");
        } else {
            assert_eq!(got, Err(KeyedError::ReclaimScan { entries, max: Builder::MAX_RECLAIM_SCAN }));
        }
    }
    // 0 is no door. The most words are zeroed by the system as they are first written.
    for words in edges(Builder::MAX_DOOR_WORDS).into_iter().chain([1 << 40, 1 << 61]) {
        let got = build(&|b| b.doorkeeper(words));
        if words <= Builder::MAX_DOOR_WORDS {
            assert!(got.is_ok(), "{words}: {got:?}");
        } else {
            assert_eq!(got, Err(KeyedError::Doorkeeper { words, max: Builder::MAX_DOOR_WORDS }));
        }
    }
    for quotas in edges(Builder::MAX_QUOTAS) {
        let got = build(&|b| b.max_quotas(quotas));
        if (1..=Builder::MAX_QUOTAS).contains(&quotas) {
            assert!(got.is_ok(), "{quotas}: {got:?}");
        } else {
            assert_eq!(got, Err(KeyedError::MaxQuotas { quotas, max: Builder::MAX_QUOTAS }));
        }
    }
    // The error names the option and its range.
    let error = build(&|b| b.max_quotas(0)).unwrap_err().to_string();
    assert!(error.contains("max_quotas") && error.contains(&Builder::MAX_QUOTAS.to_string()), "{error}");
    let error = build(&|b| b.doorkeeper(usize::MAX)).unwrap_err().to_string();
    assert!(error.contains("doorkeeper") && error.contains(&Builder::MAX_DOOR_WORDS.to_string()), "{error}");
    // A bad quota is still named first.
    let unrepresentable = Quota::per_second(1).unwrap().with_burst(u64::MAX).unwrap();
    let bad_quota =
        Keyed::<u64, Gcra>::builder(unrepresentable).clock(ManualClock::new()).max_keys(0).build();
    assert!(matches!(bad_quota, Err(KeyedError::Quota(QuotaError::Unrepresentable { .. }))));
}

/// Hot keys' slots, stripes, batch, lease and promotion threshold at their edges.
#[test]
fn every_hot_keys_option_is_bounded() {
    let quota = Quota::per_second(100).unwrap();
    let capacity = 100;
    let hot = |keys: HotKeys| {
        Keyed::<u64, Gcra>::builder(quota).clock(ManualClock::new()).shards(1).hot_keys(keys).map(|_| ())
    };
    let small = HotKeys::new(1).stripes(1).batch(1);
    for max_hot in [0, 1, MAX_HOT_KEYS, MAX_HOT_KEYS + 1, usize::MAX] {
        let got = hot(HotKeys::new(max_hot).stripes(1).batch(1));
        let fits = (1..=MAX_HOT_KEYS).contains(&max_hot);
        assert_eq!(
            got,
            if fits { Ok(()) } else { Err(StripedError::HotSlots { max_hot, max: MAX_HOT_KEYS }) }
        );
    }
    for stripes in [0, 1, MAX_STRIPES, MAX_STRIPES + 1, usize::MAX] {
        let fits = (1..=MAX_STRIPES).contains(&stripes);
        assert_eq!(
            hot(small.stripes(stripes)),
            if fits { Ok(()) } else { Err(StripedError::Stripes { stripes }) }
        );
    }
    for batch in [0, 1, capacity, capacity + 1, u64::MAX] {
        let fits = (1..=capacity).contains(&batch);
        let expected = if fits { Ok(()) } else { Err(StripedError::Batch { batch, max: capacity }) };
        assert_eq!(hot(small.batch(batch)), expected);
    }
    let Err(StripedError::Lease { max: max_lease, .. }) = hot(small.lease(Duration::MAX)) else {
        panic!("the longest lease is refused")
    };
    for lease in [
        Duration::ZERO,
        Duration::from_nanos(1),
        max_lease,
        max_lease + Duration::from_nanos(1),
        Duration::MAX,
    ] {
        let fits = !lease.is_zero() && lease <= max_lease;
        let expected = if fits { Ok(()) } else { Err(StripedError::Lease { lease, max: max_lease }) };
        assert_eq!(hot(small.lease(lease)), expected);
    }
    for failures in [0, 1, u32::MAX] {
        let expected = if failures == 0 { Err(StripedError::PromoteAfter { failures }) } else { Ok(()) };
        assert_eq!(hot(small.promote_after(failures)), expected);
    }
}

/// The striped limiter's and the sketch's sizes at their edges.
#[test]
fn every_striped_and_sketch_option_is_bounded() {
    let quota = Quota::per_second(100).unwrap();
    let striped =
        |set: &dyn Fn(kova::striped::StripedBuilder<Gcra>) -> kova::striped::StripedBuilder<Gcra>| {
            set(StripedLimiter::<Gcra>::builder(quota).stripes(1).batch(1))
                .clock(ManualClock::new())
                .build()
                .map(|_| ())
        };
    for stripes in [0, 1, MAX_STRIPES, MAX_STRIPES + 1, usize::MAX] {
        let fits = (1..=MAX_STRIPES).contains(&stripes);
        let expected = if fits { Ok(()) } else { Err(StripedError::Stripes { stripes }) };
        assert_eq!(striped(&|b| b.stripes(stripes)), expected);
    }
    for batch in [0, 1, 100, 101, u64::MAX] {
        let expected =
            if (1..=100).contains(&batch) { Ok(()) } else { Err(StripedError::Batch { batch, max: 100 }) };
        assert_eq!(striped(&|b| b.batch(batch)), expected);
    }
    let Err(StripedError::Lease { max, .. }) = striped(&|b| b.lease(Duration::MAX)) else {
        panic!("the longest lease is refused")
    };
    for lease in [Duration::ZERO, Duration::from_nanos(1), max, max + Duration::from_nanos(1)] {
        let fits = !lease.is_zero() && lease <= max;
        let expected = if fits { Ok(()) } else { Err(StripedError::Lease { lease, max }) };
        assert_eq!(striped(&|b| b.lease(lease)), expected);
    }

    let sketch = |bytes: usize, cells: u32| {
        Sketch::builder(quota)
            .memory_bytes(bytes)
            .cells_per_key(cells)
            .clock(ManualClock::new())
            .build()
            .map(|_| ())
    };
    // The most memory (1 GiB, written as it is built) is left out: too much for a test.
    for bytes in [0, 1, 64, 65, MAX_MEMORY_BYTES + 1, 2 * MAX_MEMORY_BYTES, usize::MAX] {
        let expected = if bytes == 64 { Ok(()) } else { Err(SketchError::Memory { bytes }) };
        assert_eq!(sketch(bytes, 1), expected);
    }
    for cells in [0, 1, MAX_CELLS_PER_KEY, MAX_CELLS_PER_KEY + 1, u32::MAX] {
        let fits = (1..=MAX_CELLS_PER_KEY).contains(&cells);
        let expected = if fits { Ok(()) } else { Err(SketchError::CellsPerKey { cells }) };
        assert_eq!(sketch(64, cells), expected);
    }
}
