//! Target 2, configuration: arbitrary numbers into every `Quota` constructor, `with_burst`, every
//! algorithm, the keyed table's builder, and checks with arbitrary costs at arbitrary times.
//! Each must give a typed error that names the problem or a correct decision, never a panic,
//! an overflow (the target builds with debug assertions: `cargo fuzz run -a`) or an absurd
//! allocation.
//!
//! Catches: overflow in interval / capacity arithmetic (`burst * interval`, `period / limit`,
//! window ends, the token bucket's stamp unit search), a constructor accepting a quota an
//! algorithm cannot represent, a wrong or missing error variant, a first check on a fresh
//! limiter that is not "allowed with capacity - cost remaining", a cost above the capacity that
//! is denied instead of refused, decisions with impossible fields (remaining above the limit, a
//! denial with no retry time, an allowance with one).
#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use kova::keyed::{KeyedError, TableFullPolicy};
use kova::{
    AlgorithmKind, AnyAlgorithm, CheckError, Decision, Keyed, ManualClock, Quota, QuotaError, RateLimiter,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Ctor {
    FromNanos(u64, u64),
    New(u64, u64, u32),
    PerSecond(u64),
    PerMinute(u64),
    PerHour(u64),
}

#[derive(Debug, Arbitrary)]
struct Input {
    ctor: Ctor,
    burst: Option<u64>,
    start: u64,
    costs: [u64; 3],
    advance: u64,
    small_costs: [u8; 3],
    shards: u8,
    max_keys: u32,
    scan: u16,
}

fn build(ctor: &Ctor) -> (Result<Quota, QuotaError>, u64, u128) {
    match *ctor {
        Ctor::FromNanos(limit, period) => (Quota::from_nanos(limit, period), limit, period as u128),
        Ctor::New(limit, secs, nanos) => {
            let period = Duration::new(secs, nanos % 1_000_000_000);
            (Quota::new(limit, period), limit, period.as_nanos())
        }
        Ctor::PerSecond(limit) => (Quota::per_second(limit), limit, 1_000_000_000),
        Ctor::PerMinute(limit) => (Quota::per_minute(limit), limit, 60_000_000_000),
        Ctor::PerHour(limit) => (Quota::per_hour(limit), limit, 3_600_000_000_000),
    }
}

/// The error each bad input must get, in the constructors' order of checks.
fn expected_error(limit: u64, period: u128) -> Option<QuotaError> {
    if period > u64::MAX as u128 {
        return Some(QuotaError::PeriodTooLong);
    }
    let period_nanos = period as u64;
    if limit == 0 {
        Some(QuotaError::ZeroLimit)
    } else if period_nanos == 0 {
        Some(QuotaError::ZeroPeriod)
    } else if limit > period_nanos {
        Some(QuotaError::RateTooHigh { limit, period_nanos })
    } else {
        None
    }
}

fn sane(decision: &Decision, capacity: u64) {
    assert_eq!(decision.limit(), capacity, "{decision:?}");
    assert!(decision.remaining() <= capacity, "{decision:?}");
    if decision.is_allowed() {
        assert_eq!(decision.retry_after_nanos(), 0, "{decision:?}");
    } else {
        assert!(decision.retry_after_nanos() >= 1, "{decision:?}");
    }
    assert_eq!(decision.fallback(), None, "{decision:?}");
}

fuzz_target!(|input: Input| {
    let (quota, limit, period) = build(&input.ctor);
    let quota = match (quota, expected_error(limit, period)) {
        (Err(error), Some(expected)) => {
            assert_eq!(error, expected);
            assert!(!error.to_string().is_empty());
            return;
        }
        (Ok(quota), None) => quota,
        (got, expected) => panic!("quota({:?}) gave {got:?}, expected {expected:?}", input.ctor),
    };
    assert_eq!((quota.limit(), quota.period_nanos() as u128, quota.burst()), (limit, period, limit));
    let interval = quota.emission_interval_nanos();
    assert!(interval >= 1 && interval as u128 * limit as u128 >= period, "{quota:?}: interval {interval}");
    let quota = match input.burst {
        None => quota,
        Some(0) => {
            assert_eq!(quota.with_burst(0), Err(QuotaError::ZeroBurst));
            return;
        }
        Some(burst) => {
            let with = quota.with_burst(burst).expect("a non-zero burst is accepted");
            assert_eq!(
                (with.burst(), with.limit(), with.period_nanos()),
                (burst, quota.limit(), quota.period_nanos())
            );
            with
        }
    };

    for kind in AlgorithmKind::ALL {
        let algorithm = match AnyAlgorithm::new(kind, quota) {
            Ok(algorithm) => algorithm,
            Err(error) => {
                assert!(
                    matches!(error, QuotaError::Unrepresentable { .. } | QuotaError::BurstUnsupported { .. }),
                    "{kind} {quota:?}: {error:?}"
                );
                continue;
            }
        };
        // The log allocates its ring up front (16 B per unit of limit): skip the big ones here,
        // the constructor above already ran.
        if kind == AlgorithmKind::SlidingWindowLog && quota.limit() > 4096 {
            continue;
        }
        let capacity = kova::Algorithm::capacity(&algorithm);
        assert!(capacity >= 1);
        // Below 2^63 ns (292 years): GCRA's documented horizon, past which its TAT saturates
        // and a check at the same instant may be granted twice (the clock origin is the
        // process's first reading, so no real clock gets there).
        let start = input.start >> 1;
        let clock = ManualClock::starting_at(start);
        let limiter = RateLimiter::from_algorithm(algorithm, clock.clone());

        // The first admissible check on a fresh limiter is allowed, with capacity - cost left.
        let first = u64::from(input.small_costs[0]).min(capacity).max(1);
        let decision = limiter.check_n(first).expect("cost within the capacity");
        sane(&decision, capacity);
        assert!(decision.is_allowed(), "{kind} {quota:?} at {start}: first check_n({first}) {decision:?}");
        assert_eq!(decision.remaining(), capacity - first, "{kind} {quota:?}: {decision:?}");
        // A second one at the same instant fits exactly when the two fit together.
        let second = u64::from(input.small_costs[1]).min(capacity);
        let decision = limiter.check_n(second).expect("cost within the capacity");
        sane(&decision, capacity);
        assert_eq!(decision.is_allowed(), first + second <= capacity, "{kind} {quota:?}: {decision:?}");

        // Arbitrary costs: an error exactly when above the capacity, else a sane decision.
        for (i, &cost) in input.costs.iter().enumerate() {
            if i == 1 {
                clock.advance_nanos(input.advance);
            }
            match limiter.check_n(cost) {
                Err(CheckError::CostExceedsCapacity { cost: c, capacity: cap }) => {
                    assert_eq!((c, cap), (cost, capacity));
                    assert!(cost > capacity);
                }
                Ok(decision) => {
                    assert!(cost <= capacity, "{kind}: cost {cost} > capacity {capacity} decided");
                    sane(&decision, capacity);
                }
                Err(other) => panic!("{kind}: check_n({cost}) gave an unexpected error {other:?}"),
            }
        }
        sane(&limiter.peek(), capacity);
        // A clock set backwards never grants more than a reset limiter would, and never panics.
        clock.set(start / 2);
        let _ = limiter.check_n(u64::from(input.small_costs[2]).min(capacity));
        limiter.reset();
        let after_reset = limiter.peek();
        sane(&after_reset, capacity);
    }

    // The keyed table's builder: arbitrary shard counts, key bounds and scan lengths build or
    // fail with a typed error, and the table answers within its bound.
    let keyed = Keyed::<u32, AnyAlgorithm>::builder(quota)
        .clock(ManualClock::starting_at(input.start))
        .shards(usize::from(input.shards))
        .max_keys(input.max_keys as usize)
        .reclaim_scan(usize::from(input.scan))
        .table_full(TableFullPolicy::DenyNew)
        .build();
    match keyed {
        Ok(keyed) => {
            assert!(keyed.max_keys() >= 1 && keyed.shard_count().is_power_of_two());
            for key in 0..4u32 {
                let _ = keyed.check_n(&key, u64::from(input.small_costs[0]));
            }
            assert!(keyed.len() <= keyed.max_keys().min(4));
            assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes(), "{keyed:?}");
        }
        // Only a zero is out of these options' ranges (their types keep them below the most).
        Err(error) => assert!(
            matches!(
                error,
                KeyedError::Quota(_)
                    | KeyedError::Shards { shards: 0, .. }
                    | KeyedError::MaxKeys { max_keys: 0, .. }
                    | KeyedError::ReclaimScan { entries: 0, .. }
            ),
            "{input:?}: {error:?}"
        ),
    }
});
