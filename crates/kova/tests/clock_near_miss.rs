//! A coarse clock loses no rate: a denial within the clock's possible lag of its retry time (a
//! near miss) is decided again on the precise time.
//!
//! `SteppedClock` is a coarse source driven by a `ManualClock`: its coarse reading is the manual
//! time floored to a step (what the upkeep thread's static is between two rounds), its precise
//! reading the manual time itself. With a lag of 0 it behaves as a coarse clock without the near
//! miss: one step refills at most one burst, and a rate whose refill in one step exceeds the burst
//! loses the rest. With the lag set to the step, every algorithm admits its rate.

use std::time::Duration;

use kova::{
    Algorithm, Clock, FixedWindow, Gcra, Keyed, ManualClock, Quota, RateLimiter, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct SteppedClock {
    precise: ManualClock,
    step: u64,
    lag: u64,
}

impl SteppedClock {
    fn new(step: u64, near_miss: bool) -> Self {
        SteppedClock { precise: ManualClock::new(), step, lag: if near_miss { step } else { 0 } }
    }
}

impl Clock for SteppedClock {
    fn now_nanos(&self) -> u64 {
        let now = self.precise.now_nanos();
        now - now % self.step
    }

    fn now_nanos_precise(&self) -> u64 {
        self.precise.now_nanos()
    }

    fn max_lag_nanos(&self) -> u64 {
        self.lag
    }
}

/// Offers `check` twice per `interval` (at least 2x the rate) for `span` of manual time, and
/// returns how many it admitted.
fn offer(clock: &SteppedClock, interval: u64, span: u64, mut check: impl FnMut() -> bool) -> u64 {
    let gap = (interval / 2).max(1);
    let mut admitted = 0;
    let end = clock.precise.now_nanos() + span;
    while clock.precise.now_nanos() < end {
        admitted += u64::from(check());
        clock.precise.advance_nanos(gap);
    }
    admitted
}

/// What `quota` admits at most over `span` offered at more than its rate: the burst plus the rate
/// (for the windows, a limit per window, plus the window the run starts in).
fn expected(quota: Quota, span: u64) -> u64 {
    quota.burst() + (span as u128 * quota.limit() as u128 / quota.period_nanos() as u128) as u64
}

fn direct<A: Algorithm>(quota: Quota, step: u64, near_miss: bool, span: u64) -> u64 {
    let clock = SteppedClock::new(step, near_miss);
    let limiter = RateLimiter::<A, _>::with_clock(quota, clock.clone()).unwrap();
    offer(&clock, quota.emission_interval_nanos(), span, || limiter.check().is_allowed())
}

/// Offers `check` once per emission interval (the rate itself, on the unit's due time).
fn direct_on_interval<A: Algorithm>(quota: Quota, step: u64, near_miss: bool, span: u64) -> u64 {
    let clock = SteppedClock::new(step, near_miss);
    let limiter = RateLimiter::<A, _>::with_clock(quota, clock.clone()).unwrap();
    offer(&clock, 2 * quota.emission_interval_nanos(), span, || limiter.check().is_allowed())
}

fn keyed<A: Algorithm>(quota: Quota, step: u64, near_miss: bool, span: u64) -> u64 {
    let clock = SteppedClock::new(step, near_miss);
    let limiter = Keyed::<u64, A, _>::with_clock(quota, clock.clone()).unwrap();
    offer(&clock, quota.emission_interval_nanos(), span, || limiter.check(&7).is_allowed())
}

/// The fixed-memory sketch (GCRA on shared cells) on one key.
fn sketch(quota: Quota, step: u64, near_miss: bool, span: u64) -> u64 {
    let clock = SteppedClock::new(step, near_miss);
    let sketch = kova::sketch::Sketch::with_clock(quota, clock.clone()).unwrap();
    offer(&clock, quota.emission_interval_nanos(), span, || sketch.check(&7).is_allowed())
}

type Run = fn(Quota, u64, bool, u64) -> u64;

/// Every algorithm, direct and keyed, with the quota it takes: a rate with a burst for the
/// buckets, a limit per (short) window for the windows.
fn subjects(rate: u64, burst: u64) -> Vec<(&'static str, Quota, Run)> {
    let bucket = Quota::per_second(rate).unwrap().with_burst(burst).unwrap();
    // The same rate as `burst` units per window of `burst` intervals.
    let window = Quota::from_nanos(burst, burst * 1_000_000_000 / rate).unwrap();
    vec![
        ("gcra", bucket, direct::<Gcra>),
        ("token_bucket", bucket, direct::<TokenBucket>),
        ("fixed_window", window, direct::<FixedWindow>),
        ("sliding_window_counter", window, direct::<SlidingWindowCounter>),
        ("sliding_window_log", window, direct::<SlidingWindowLog>),
        ("keyed gcra", bucket, keyed::<Gcra>),
        ("keyed token_bucket", bucket, keyed::<TokenBucket>),
        ("keyed fixed_window", window, keyed::<FixedWindow>),
        ("keyed sliding_window_counter", window, keyed::<SlidingWindowCounter>),
        ("keyed sliding_window_log", window, keyed::<SlidingWindowLog>),
        ("sketch", bucket, sketch),
    ]
}

const MS: u64 = 1_000_000;

/// What `run` admits on 1 ms steps with the near miss, against the same algorithm on a precise
/// clock (steps of 1 ns) under the same offered load: within 1%, never more than the quota, and
/// within 1% of it.
fn assert_admits_its_rate(name: &str, quota: Quota, run: Run, span: u64) {
    let want = expected(quota, span);
    let precise = run(quota, 1, false, span);
    let with = run(quota, MS, true, span);
    let close = |a: u64, b: u64| (a as f64 - b as f64).abs() <= 0.01 * b as f64;
    assert!(close(with, precise), "{name} {quota:?}: admitted {with} on steps, {precise} on a precise clock");
    assert!(with <= want && close(with, want), "{name} {quota:?}: admitted {with} of {want}");
}

#[test]
fn a_coarse_step_loses_the_rate_without_the_near_miss_and_not_with_it() {
    // Rate x step > burst in each: 10k/s with a burst of 1 and 100k/s with 10 on 1 ms steps.
    for (rate, burst) in [(10_000, 1), (100_000, 10)] {
        for (name, quota, run) in subjects(rate, burst) {
            let span = 1_000 * MS;
            let precise = run(quota, 1, false, span);
            let without = run(quota, MS, false, span);
            assert!(
                (without as f64) < 0.5 * precise as f64,
                "{name} at {rate}/s burst {burst}: without the near miss admitted {without}, {precise} on a \
                 precise clock: the step effect this test relies on is gone"
            );
            assert_admits_its_rate(name, quota, run, span);
        }
    }
}

#[test]
fn a_high_rate_with_a_small_burst_is_admitted_in_full() {
    // 1M/s with a burst of 100 on 1 ms steps (and a window of 100 us for the windows).
    for (name, quota, run) in subjects(1_000_000, 100) {
        assert_admits_its_rate(name, quota, run, 200 * MS);
    }
}

#[test]
fn a_denial_far_from_its_retry_time_reads_no_precise_time() {
    // A precise time that would admit, behind a coarse step: a denial whose retry time is past
    // the lag must be decided on the coarse time alone.
    let clock = SteppedClock::new(10 * MS, true);
    let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
    for _ in 0..10 {
        assert!(limiter.check().is_allowed());
    }
    clock.precise.advance(Duration::from_millis(9));
    let denied = limiter.check();
    // The coarse time is still 0: the next unit is 100 ms away on it, far beyond the 10 ms lag.
    assert!(!denied.is_allowed());
    assert_eq!(denied.retry_after(), Duration::from_millis(100));
    // Near: 95 ms of precise time, coarse 90 ms; the retry time on the coarse time (10 ms) is
    // within the lag, and the precise time (5 ms left) decides the denial again.
    clock.precise.set(95 * MS);
    let near = limiter.check();
    assert!(!near.is_allowed());
    assert_eq!(near.retry_after(), Duration::from_millis(5));
    clock.precise.set(100 * MS - 1);
    assert!(!limiter.check().is_allowed());
    clock.precise.set(100 * MS);
    assert!(limiter.check().is_allowed());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any rate, burst and step: with the near miss a Gcra limiter and a token bucket admit
    /// within 1% of what they admit on the precise clock from the same offers, and never more
    /// than burst + rate x time; from a burst of 2 up, that is their rate within 1%.
    ///
    /// A burst of 1 is held to the precise clock only: it keeps no credit, so an offer that
    /// arrives after the unit came due loses the difference whatever the clock. Offers every
    /// half interval of an odd interval arrive 1 ns early, then half an interval late, and the
    /// limiter admits two thirds of its rate on any clock.
    #[test]
    fn any_rate_burst_and_step_admit_the_rate(
        rate in 1_000u64..200_000,
        burst in 1u64..1_000,
        step_us in 100u64..5_000,
    ) {
        let quota = Quota::per_second(rate).unwrap().with_burst(burst).unwrap();
        let step = step_us * 1_000;
        // About 100,000 admissions, and at least 100 steps.
        let span = (100_000 * 1_000_000_000 / rate).max(100 * step);
        let want = expected(quota, span);
        for (name, run) in [("gcra", direct::<Gcra> as Run), ("token_bucket", direct::<TokenBucket>)] {
            let admitted = run(quota, step, true, span);
            // A step of 1 ns: the coarse reading is the precise one.
            let on_precise = run(quota, 1, false, span);
            prop_assert!(admitted <= want, "{}: {} > {}", name, admitted, want);
            prop_assert!(
                admitted as f64 >= 0.99 * on_precise as f64,
                "{}: {} against {} on the precise clock", name, admitted, on_precise
            );
            if burst >= 2 {
                prop_assert!(admitted as f64 >= 0.99 * want as f64, "{}: {} of {}", name, admitted, want);
            }
        }
    }

    /// The offer pattern, not the clock, is what a burst of 1 loses: offered on the interval
    /// itself it admits the rate within 1% through the coarse steps.
    #[test]
    fn a_burst_of_one_offered_on_its_interval_admits_the_rate(
        rate in 1_000u64..200_000,
        step_us in 100u64..5_000,
    ) {
        let quota = Quota::per_second(rate).unwrap().with_burst(1).unwrap();
        let step = step_us * 1_000;
        let span = (20_000 * 1_000_000_000 / rate).max(100 * step);
        let want = expected(quota, span);
        for (name, run) in [("gcra", direct_on_interval::<Gcra> as Run), ("token_bucket", direct_on_interval::<TokenBucket>)] {
            let admitted = run(quota, step, true, span);
            prop_assert!(admitted <= want, "{}: {} > {}", name, admitted, want);
            prop_assert!(admitted as f64 >= 0.99 * want as f64, "{}: {} of {}", name, admitted, want);
        }
    }
}
