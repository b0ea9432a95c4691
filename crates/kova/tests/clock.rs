//! The default clock works with nothing started by hand: quanta's `recent()` is 0 until an upkeep
//! thread runs, and kova must start one (or fall back) itself.

use std::time::Duration;

use kova::{Clock, CoarseClock, Gcra, Quota, RateLimiter};

#[test]
fn coarse_clock_moves_without_any_setup() {
    let clock = CoarseClock::new();
    let a = clock.now_nanos();
    std::thread::sleep(Duration::from_millis(20));
    let b = clock.now_nanos();
    assert!(b > a, "coarse clock stuck at {a}");
    // Within a few upkeep ticks of the elapsed time, not zero and not wildly off.
    assert!(b - a >= 15_000_000 && b - a < 2_000_000_000, "{a} -> {b}");
}

#[test]
fn default_limiter_refills_in_real_time() {
    let limiter = RateLimiter::<Gcra>::new(Quota::new(1, Duration::from_millis(50)).unwrap()).unwrap();
    assert!(limiter.check().is_allowed());
    assert!(!limiter.check().is_allowed());
    std::thread::sleep(Duration::from_millis(70));
    assert!(limiter.check().is_allowed(), "the coarse clock did not advance");
}

#[test]
fn the_precise_reading_is_never_behind_the_coarse_one() {
    let clock = CoarseClock::new();
    for _ in 0..1_000 {
        let coarse = clock.now_nanos();
        let precise = clock.now_nanos_precise();
        assert!(precise >= coarse, "precise {precise} behind coarse {coarse}");
    }
    // It moves between two upkeep ticks, where the coarse reading may not.
    let a = clock.now_nanos_precise();
    std::thread::sleep(Duration::from_micros(100));
    assert!(clock.now_nanos_precise() > a);
}
