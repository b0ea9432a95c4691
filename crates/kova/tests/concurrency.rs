//! Threads hammering one key with a real clock: nothing admitted beyond what the algorithm's model
//! allows over the elapsed time, and (under overload) nothing lost.
//!
//! The limiter's own clock brackets the run: every reading it takes lies in [start, end], so the
//! bounds need no slack for clock resolution.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use kova::{
    Algorithm, Clock, CoarseClock, FixedWindow, Gcra, Quota, RateLimiter, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};

const RUN: Duration = Duration::from_secs(1);

fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8)
}

/// Runs `threads()` threads checking `limiter` as fast as they can for `RUN`; returns
/// (admitted units, elapsed nanoseconds on the limiter's clock).
fn hammer<A: Algorithm>(limiter: RateLimiter<A, CoarseClock>, cost: u64) -> (u64, u64) {
    let limiter = Arc::new(limiter);
    let barrier = Arc::new(Barrier::new(threads() + 1));
    let clock = *limiter.clock();
    let handles: Vec<_> = (0..threads())
        .map(|_| {
            let (limiter, barrier) = (limiter.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let deadline = std::time::Instant::now() + RUN;
                let mut admitted = 0u64;
                while std::time::Instant::now() < deadline {
                    for _ in 0..64 {
                        if limiter.check_n(cost).unwrap().is_allowed() {
                            admitted += cost;
                        }
                    }
                }
                admitted
            })
        })
        .collect();
    let start = clock.now_nanos();
    barrier.wait();
    let admitted = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let end = clock.now_nanos();
    (admitted, end - start)
}

fn assert_between(name: &str, admitted: u64, low: f64, high: u64) {
    assert!(admitted <= high, "{name}: admitted {admitted} > bound {high}");
    assert!(admitted as f64 >= low, "{name}: admitted {admitted} < {low:.0} (lost updates?)");
}

#[test]
fn bucket_algorithms_admit_burst_plus_rate_and_lose_nothing() {
    // 50k/s with a burst of 5000: far below what the threads offer, so the run is overloaded;
    // the burst (100 ms of refill) keeps a thread descheduled on a busy machine from letting
    // the bucket overflow, which would lower the admitted count without any update being lost.
    let quota = Quota::per_second(50_000).unwrap().with_burst(5_000).unwrap();
    let interval = quota.emission_interval_nanos();
    for cost in [1, 3] {
        let (admitted, elapsed) = hammer(RateLimiter::<Gcra>::new(quota).unwrap(), cost);
        let bound = 5_000 + elapsed / interval;
        assert_between("gcra", admitted, 0.99 * bound as f64 - cost as f64, bound);

        let limiter = RateLimiter::<TokenBucket>::new(quota).unwrap();
        let tb_interval = limiter.algorithm().interval_nanos();
        let (admitted, elapsed) = hammer(limiter, cost);
        // The bucket samples time at 2^shift ns: at most that much refill early.
        let bound = 5_000 + (elapsed + (1 << 20)) / tb_interval;
        assert_between("token_bucket", admitted, 0.99 * bound as f64 - cost as f64, bound);
    }
}

fn windows_spanned(start_end: (u64, u64), period: u64) -> u64 {
    // The limiter's clock readings lie in [start, end]: count the aligned windows they can touch.
    start_end.1 / period - start_end.0 / period + 1
}

#[test]
fn window_algorithms_stay_within_their_bounds_under_overload() {
    let period = 100_000_000; // 100 ms windows, 5_000 per window
    let quota = Quota::from_nanos(5_000, period).unwrap();
    let clock = CoarseClock::new();

    let start = clock.now_nanos();
    let (admitted, elapsed) = hammer(RateLimiter::<FixedWindow>::new(quota).unwrap(), 1);
    let windows = windows_spanned((start, start + elapsed + 1), period);
    // Each touched window admits at most its limit; under overload each fills completely, except
    // possibly the first and last, which the run may only graze.
    assert_between(
        "fixed_window",
        admitted,
        0.99 * (5_000 * windows.saturating_sub(2)) as f64,
        5_000 * windows,
    );

    let (admitted, elapsed) = hammer(RateLimiter::<SlidingWindowLog>::new(quota).unwrap(), 1);
    // Exact: at most `limit` in any window of one period.
    let high = 5_000 * (elapsed / period + 1);
    assert_between("sliding_window_log", admitted, 0.99 * (5_000 * (elapsed / period)) as f64, high);

    let (admitted, elapsed) = hammer(RateLimiter::<SlidingWindowCounter>::new(quota).unwrap(), 1);
    // The counter's estimate admits `limit` per period in the steady state, and its worst case
    // is below 2x in any one window.
    let high = 5_000 * (elapsed / period + 2);
    assert_between("sliding_window_counter", admitted, 0.99 * (5_000 * (elapsed / period)) as f64, high);
}
