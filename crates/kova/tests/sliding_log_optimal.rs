//! The sliding window log admits as many requests of a stream as any exact sliding window can:
//! of every subset of the stream's requests that holds at most `limit` in every window of one
//! period, none is larger than the log's admissions (checked exhaustively on small streams).
//!
//! So where the log admits less than its quota's rate (a stream offered at twice the rate whose
//! requests are not evenly spaced: each admission waits for the first request after a unit
//! leaves the window, and those waits add up), no exact sliding window could admit more of
//! that stream. The rate the quota names is reached only by streams with a request at every
//! instant a unit leaves the window.

use kova::model::max_in_sliding_window;
use kova::{ManualClock, Quota, RateLimiter, SlidingWindowLog};
use proptest::prelude::*;

/// The times of `times` (sorted) that a sliding log of `limit` per `period` admits.
fn log_admits(limit: u64, period: u64, times: &[u64]) -> Vec<u64> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::<SlidingWindowLog, _>::with_clock(
        Quota::from_nanos(limit, period).unwrap(),
        clock.clone(),
    )
    .unwrap();
    times
        .iter()
        .copied()
        .filter(|&t| {
            clock.set(t);
            limiter.check().is_allowed()
        })
        .collect()
}

/// The largest subset of `times` (sorted, at most 16) with at most `limit` in every window of
/// length `period`, by trying every subset.
fn most_any_exact_window_admits(limit: u64, period: u64, times: &[u64]) -> usize {
    assert!(times.len() <= 16);
    (0u32..1 << times.len())
        .filter(|mask| mask.count_ones() as usize > 0)
        .filter_map(|mask| {
            let subset: Vec<u64> =
                times.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &t)| t).collect();
            (max_in_sliding_window(&subset, period) as u64 <= limit).then_some(subset.len())
        })
        .max()
        .unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_log_admits_the_most_any_exact_window_can(
        limit in 1u64..=4,
        mut times in prop::collection::vec(0u64..300, 1..=14),
    ) {
        times.sort_unstable();
        let period = 100;
        let admitted = log_admits(limit, period, &times);
        // Its admissions are themselves exact, and no exact subset is larger.
        prop_assert!(max_in_sliding_window(&admitted, period) as u64 <= limit);
        prop_assert_eq!(admitted.len(), most_any_exact_window_admits(limit, period, &times));
    }
}

/// A limit of 10 per 100 us offered at 200k/s (twice its rate), each request up to 0.8 us late
/// on its 5 us grid: the log, and so any exact window, admits about 3% under the quota; on the
/// grid itself, all of it.
#[test]
fn a_jittered_stream_at_twice_the_rate_cannot_fill_an_exact_window() {
    let (limit, period, gap) = (10, 100_000, 5_000);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut jitter = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % 800
    };
    let n = 200_000u64;
    let quota_share = |admitted: usize| admitted as f64 / (n * gap * limit / period) as f64;
    let on_grid: Vec<u64> = (0..n).map(|i| i * gap).collect();
    let jittered: Vec<u64> = (0..n).map(|i| i * gap + jitter()).collect();
    let (grid, late) =
        (log_admits(limit, period, &on_grid).len(), log_admits(limit, period, &jittered).len());
    assert!((quota_share(grid) - 1.0).abs() < 1e-3, "{}", quota_share(grid));
    assert!((0.95..0.99).contains(&quota_share(late)), "{}", quota_share(late));
}
