//! Threads hammering one key with a real clock: nothing admitted beyond what the algorithm's model
//! allows over the elapsed time, and (under overload) nothing lost.
//!
//! The limiter's own clock brackets the run: every reading it takes lies in [start, end], so the
//! upper bounds need no slack for clock resolution. The lower bounds ("nothing lost") count only
//! the span the threads were checking, from the first reading a thread took as it started to the
//! last one a thread took as it stopped: on a busy machine the threads may start milliseconds
//! after the run's first reading (a full bucket overflows meanwhile), and the coarse clock may
//! run late and catch up after they stop. Refill the limiter could not use is no lost update.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use kova::{
    Algorithm, Clock, CoarseClock, FixedWindow, Gcra, Quota, RateLimiter, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};

const RUN: Duration = Duration::from_secs(1);

/// Held by each test for its whole run. The lower bounds assume that some thread is checking
/// nearly all the time; the test harness runs tests in parallel, and two tests' threads on a
/// small machine leave every thread of one test descheduled for long enough that its bucket
/// overflows (refill it could not use, which is no lost update) and its bound fails.
static ONE_RUN_AT_A_TIME: Mutex<()> = Mutex::new(());

fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8)
}

/// What a run admitted, and how long it lasted on the limiter's clock.
struct Hammered {
    /// Units admitted, all threads together.
    admitted: u64,
    /// From before the threads start to after they have all stopped: every reading the limiter
    /// took lies in this span.
    span: (u64, u64),
    /// The span the threads were checking: from the earliest reading a thread took as it
    /// started to the latest it took as it stopped.
    loaded: (u64, u64),
}

impl Hammered {
    /// Nanoseconds of `span`.
    fn elapsed(&self) -> u64 {
        self.span.1 - self.span.0
    }

    /// Nanoseconds of `loaded`.
    fn loaded_nanos(&self) -> u64 {
        self.loaded.1 - self.loaded.0
    }
}

/// Runs `threads()` threads checking `limiter` as fast as they can for `RUN`.
fn hammer<A: Algorithm>(limiter: RateLimiter<A, CoarseClock>, cost: u64) -> Hammered {
    let limiter = Arc::new(limiter);
    let barrier = Arc::new(Barrier::new(threads() + 1));
    let clock = *limiter.clock();
    let handles: Vec<_> = (0..threads())
        .map(|_| {
            let (limiter, barrier) = (limiter.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let started = limiter.clock().now_nanos();
                let deadline = std::time::Instant::now() + RUN;
                let mut admitted = 0u64;
                while std::time::Instant::now() < deadline {
                    for _ in 0..64 {
                        if limiter.check_n(cost).unwrap().is_allowed() {
                            admitted += cost;
                        }
                    }
                }
                // Precise: a near miss is decided on the precise time, ahead of the coarse one.
                (admitted, started, limiter.clock().now_nanos_precise())
            })
        })
        .collect();
    let start = clock.now_nanos();
    barrier.wait();
    let (mut admitted, mut loaded) = (0, (u64::MAX, 0));
    for handle in handles {
        let (units, started, stopped) = handle.join().unwrap();
        admitted += units;
        loaded = (loaded.0.min(started), loaded.1.max(stopped));
    }
    let end = clock.now_nanos_precise();
    Hammered { admitted, span: (start, end), loaded }
}

fn assert_between(name: &str, admitted: u64, low: f64, high: u64) {
    assert!(admitted <= high, "{name}: admitted {admitted} > bound {high}");
    assert!(admitted as f64 >= low, "{name}: admitted {admitted} < {low:.0} (lost updates?)");
}

#[test]
fn bucket_algorithms_admit_burst_plus_rate_and_lose_nothing() {
    let _alone = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // 50k/s with a burst of 12,500: far below what the threads offer, so the run is overloaded;
    // the burst (250 ms of refill) keeps threads descheduled on a busy machine from letting the
    // bucket overflow, which would lower the admitted count without any update being lost.
    const BURST: u64 = 12_500;
    let quota = Quota::per_second(50_000).unwrap().with_burst(BURST).unwrap();
    let interval = quota.emission_interval_nanos();
    for cost in [1, 3] {
        let run = hammer(RateLimiter::<Gcra>::new(quota).unwrap(), cost);
        let low = 0.99 * (BURST + run.loaded_nanos() / interval) as f64 - cost as f64;
        assert_between("gcra", run.admitted, low, BURST + run.elapsed() / interval);

        let limiter = RateLimiter::<TokenBucket>::new(quota).unwrap();
        let tb_interval = limiter.algorithm().interval_nanos();
        let run = hammer(limiter, cost);
        // The bucket samples time at 2^shift ns: at most that much refill early.
        let low = 0.99 * (BURST + run.loaded_nanos() / tb_interval) as f64 - cost as f64;
        assert_between("token_bucket", run.admitted, low, BURST + (run.elapsed() + (1 << 20)) / tb_interval);
    }
}

fn windows_spanned(start_end: (u64, u64), period: u64) -> u64 {
    // The limiter's clock readings lie in [start, end]: count the aligned windows they can touch.
    start_end.1 / period - start_end.0 / period + 1
}

#[test]
fn window_algorithms_stay_within_their_bounds_under_overload() {
    let _alone = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let period = 100_000_000; // 100 ms windows, 5_000 per window
    let quota = Quota::from_nanos(5_000, period).unwrap();
    let run = hammer(RateLimiter::<FixedWindow>::new(quota).unwrap(), 1);
    let windows = windows_spanned(run.span, period);
    let loaded_windows = windows_spanned(run.loaded, period);
    // Each touched window admits at most its limit; under overload each fills completely, except
    // possibly the first and last, which the run may only graze.
    assert_between(
        "fixed_window",
        run.admitted,
        0.99 * (5_000 * loaded_windows.saturating_sub(2)) as f64,
        5_000 * windows,
    );

    let run = hammer(RateLimiter::<SlidingWindowLog>::new(quota).unwrap(), 1);
    // Exact: at most `limit` in any window of one period.
    let high = 5_000 * (run.elapsed() / period + 1);
    let low = 0.99 * (5_000 * (run.loaded_nanos() / period)) as f64;
    assert_between("sliding_window_log", run.admitted, low, high);

    let run = hammer(RateLimiter::<SlidingWindowCounter>::new(quota).unwrap(), 1);
    // The counter's estimate admits `limit` per period in the steady state, and its worst case
    // is below 2x in any one window. Its lower bound has more slack than the others': what a
    // window may admit grows across the window (the previous window's weight decays), so a
    // moment when no thread checks (all descheduled on a busy machine) just before a window ends
    // leaves that window short of its limit, by about the previous count times the moment's
    // share of the period, with nothing lost. Lost updates would miss by far more than this slack.
    let high = 5_000 * (run.elapsed() / period + 2);
    let low = 0.97 * (5_000 * (run.loaded_nanos() / period)) as f64;
    assert_between("sliding_window_counter", run.admitted, low, high);
}
