//! The seeds' boundary burst: a client sends the full limit just before a window edge and again
//! just after. The fixed window admits both (2x the limit within a moment), the sliding log never
//! more than the limit in any window, the sliding counter stays under its documented 2x bound.

use std::time::Duration;

use kova::model::max_in_sliding_window;
use kova::{
    Algorithm, Clock, FixedWindow, ManualClock, Quota, RateLimiter, SlidingWindowCounter, SlidingWindowLog,
};

const LIMIT: u64 = 10;
const PERIOD: u64 = 1_000_000_000;

/// Most admitted in any half-open window of length PERIOD, given sorted admission times.
fn max_in_any_window(times: &[u64]) -> usize {
    max_in_sliding_window(times, PERIOD)
}

/// Sends LIMIT at `edge - 1ms` and LIMIT at `edge`, then a request every 10 ms for two periods;
/// returns the admission times.
fn edge_attack<A: Algorithm>() -> Vec<u64> {
    let clock = ManualClock::new();
    let limiter =
        RateLimiter::<A, _>::with_clock(Quota::from_nanos(LIMIT, PERIOD).unwrap(), clock.clone()).unwrap();
    let mut admitted = Vec::new();
    let send = |n: u64, admitted: &mut Vec<u64>| {
        for _ in 0..n {
            if limiter.check().is_allowed() {
                admitted.push(clock.now_nanos());
            }
        }
    };
    clock.set(PERIOD - 1_000_000);
    send(LIMIT, &mut admitted);
    clock.set(PERIOD);
    send(LIMIT, &mut admitted);
    for _ in 0..200 {
        clock.advance(Duration::from_millis(10));
        send(1, &mut admitted);
    }
    admitted
}

#[test]
fn fixed_window_admits_twice_the_limit_across_an_edge() {
    let admitted = edge_attack::<FixedWindow>();
    assert_eq!(admitted[..2 * LIMIT as usize].last(), Some(&PERIOD), "both batches admitted");
    assert_eq!(max_in_any_window(&admitted), 2 * LIMIT as usize);
}

#[test]
fn sliding_log_never_exceeds_the_limit_in_any_window() {
    let admitted = edge_attack::<SlidingWindowLog>();
    assert_eq!(max_in_any_window(&admitted), LIMIT as usize);
}

#[test]
fn sliding_counter_stays_under_its_bound() {
    let admitted = edge_attack::<SlidingWindowCounter>();
    let worst = max_in_any_window(&admitted);
    // Right after the edge the estimate still counts the previous window fully: the second batch
    // is denied, unlike the fixed window's.
    assert!(admitted.iter().filter(|&&t| t == PERIOD).count() == 0);
    assert!(worst <= 2 * LIMIT as usize, "{worst}");
    // Twice the limit in one period only once the previous window's count, weighted and rounded
    // down, is zero: in the current window's last `PERIOD / LIMIT`, not at the edge.
    let shorter = PERIOD - PERIOD / LIMIT;
    assert!(max_in_sliding_window(&admitted, shorter) < 2 * LIMIT as usize);
}

#[test]
fn sliding_counter_bound_holds_on_adversarial_random_traces() {
    // Requests clustered at window ends, where the counter's even-spread assumption is worst.
    let mut seed = 42u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed >> 33
    };
    for _ in 0..50 {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<SlidingWindowCounter, _>::with_clock(
            Quota::from_nanos(LIMIT, PERIOD).unwrap(),
            clock.clone(),
        )
        .unwrap();
        let mut admitted = Vec::new();
        let mut t = 0u64;
        for _ in 0..400 {
            t += next() % (PERIOD / 8);
            clock.set(t);
            if limiter.check().is_allowed() {
                admitted.push(t);
            }
        }
        assert!(max_in_any_window(&admitted) < 2 * LIMIT as usize);
    }
}
