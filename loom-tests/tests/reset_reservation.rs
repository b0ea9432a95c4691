//! Loom model of a reset racing a reservation on the direct limiter (`crates/kova/src/limiter.rs`:
//! the reset's count; `reservation.rs`: the reservation reads it before its CAS, the cancel after
//! its load of the word).
//!
//! GCRA, burst 4, one unit an hour, the clock still. One thread resets while the main thread
//! reserves 3; once both are done, the main thread checks 2, then cancels. Sequentially:
//! - reset, then reserve: 1 of 4 left, the check of 2 is denied, the cancel gives back 3: 4 left;
//! - reserve, then reset: the reset wiped the reservation, the check of 2 is admitted (2 left),
//!   and the cancel gives back nothing: 2 left.
//!
//! A reservation may also find a reset under way and give back nothing however the race ends
//! (stricter: 1 left). What must never happen: the check admitted on the reset state and the
//! cancel giving units back on top of it. The check's state lies below the reservation's mark,
//! which the cancel rule alone reads as units granted before the reservation's own, so only the
//! reset count stops it. The should-fail twin counts the reset once, before the cell changes
//! (`loom_racy::reset_counted_once`).
#![cfg(kova_loom)]

use kova::loom_racy::reset_counted_once;
use kova::{Gcra, ManualClock, Quota, RateLimiter};
use kova_loom_tests::harness::{expect_caught, model};
use loom::sync::Arc;

fn race() {
    let quota = Quota::per_hour(1).unwrap().with_burst(4).unwrap();
    let limiter: Arc<RateLimiter<Gcra, ManualClock>> =
        Arc::new(RateLimiter::with_clock(quota, ManualClock::new()).unwrap());
    let resetter = {
        let limiter = Arc::clone(&limiter);
        loom::thread::spawn(move || limiter.reset())
    };
    let reserved = limiter.reserve_n(3).unwrap();
    resetter.join().unwrap();
    let checked = limiter.check_n(2).unwrap().is_allowed();
    let back = reserved.cancel();
    let outcome = (checked, back, limiter.peek().remaining());
    assert!(
        matches!(outcome, (false, 3, 4) | (true, 0, 2) | (false, 0, 1)),
        "not a sequential outcome: (check of 2 admitted, given back, remaining) = {outcome:?}"
    );
}

#[test]
fn a_reset_racing_a_reservation_is_one_or_the_other() {
    model(race);
}

#[test]
fn a_reset_counted_once_before_the_cell_changes_is_caught() {
    expect_caught(|| model(|| reset_counted_once(race)), "not a sequential outcome", "double grant");
}
