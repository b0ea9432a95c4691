//! Loom model of a reservation's cancel racing a check (`crates/kova/src/reservation.rs`: both
//! are CAS loops on the limiter's one word).
//!
//! GCRA, burst 4, one unit an hour, the clock still. Prelude: a reservation of 2, then one of 1
//! (both usable at once: 3 of 4 taken). Then the main thread cancels the second while another
//! thread checks 1 unit. Sequentially:
//! - check, then cancel: the check is admitted with 0 left; the cancel gives back nothing (the
//!   check was granted after it and is still counted, `WordAlgorithm::cancel_reservation`'s
//!   rule), so 0 remain;
//! - cancel, then check: the cancel gives back its unit; the check is admitted with 1 left, and 1
//!   remains.
//!
//! Every interleaving must be one of those two; the should-fail twin (cancel by load and store,
//! `kova::loom_racy::cancel_load_store`) overwrites the check's admission (2 remain).
#![cfg(kova_loom)]

use kova::loom_racy::cancel_load_store;
use kova::reservation::Reservation;
use kova::{Gcra, ManualClock, Quota, RateLimiter};
use kova_loom_tests::harness::{expect_caught, model};
use loom::sync::Arc;

type Limiter = RateLimiter<Gcra, ManualClock>;

fn race(cancel: fn(Reservation<'_, Gcra, ManualClock>) -> u64) {
    let quota = Quota::per_hour(1).unwrap().with_burst(4).unwrap();
    let limiter: Arc<Limiter> = Arc::new(RateLimiter::with_clock(quota, ManualClock::new()).unwrap());
    let first = limiter.reserve_n(2).unwrap();
    let second = limiter.reserve_n(1).unwrap();
    assert!(first.delay().is_zero() && second.delay().is_zero());
    let checker = {
        let limiter = Arc::clone(&limiter);
        loom::thread::spawn(move || limiter.check_n(1).unwrap())
    };
    let back = cancel(second);
    let checked = checker.join().unwrap();
    assert!(checked.is_allowed(), "the check was denied: {checked:?}");
    let outcome = (back, checked.remaining(), limiter.peek().remaining());
    assert!(
        outcome == (0, 0, 0) || outcome == (1, 1, 1),
        "not a sequential outcome: (given back, check's remaining, final remaining) = {outcome:?}"
    );
}

#[test]
fn cancel_racing_a_check_is_one_or_the_other() {
    model(|| race(|reservation| reservation.cancel()));
}

#[test]
fn cancel_by_load_and_store_is_caught() {
    expect_caught(|| model(|| race(cancel_load_store)), "not a sequential outcome", "lost update");
}
