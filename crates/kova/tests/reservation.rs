//! Reservations (Go's `Reserve` / `Cancel`) on a ManualClock: exact delays, refusals that take
//! nothing, cancellation that gives back only what later reservations did not build on, and,
//! over random schedules, the token bucket's bound on the times the reserved units are used.

use std::time::Duration;

use kova::reservation::ReserveError;
use kova::{
    Clock, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingWindowCounter, TokenBucket,
    WordAlgorithm,
};
use proptest::prelude::*;

#[path = "support/bucket_bound.rs"]
mod bucket_bound;
use bucket_bound::{check_bucket_bound, used_after_cancel};

const MS: Duration = Duration::from_millis(1);

fn gcra(limit: u64, burst: u64, clock: &ManualClock) -> RateLimiter<Gcra, ManualClock> {
    let quota = Quota::per_second(limit).unwrap().with_burst(burst).unwrap();
    RateLimiter::with_clock(quota, clock.clone()).unwrap()
}

#[test]
fn reservations_queue_one_after_another() {
    let clock = ManualClock::new();
    let limiter = gcra(10, 2, &clock);
    let delays: Vec<Duration> = (0..5).map(|_| limiter.reserve_n(1).unwrap().delay()).collect();
    assert_eq!(delays, [Duration::ZERO, Duration::ZERO, 100 * MS, 200 * MS, 300 * MS]);
    // A check now queues behind all of them.
    assert_eq!(limiter.check().retry_after(), 400 * MS);
}

#[test]
fn a_refused_reservation_takes_nothing() {
    let clock = ManualClock::new();
    let limiter = gcra(10, 10, &clock);
    let _all = limiter.reserve_n(10).unwrap();
    let before = limiter.peek();
    let refused = limiter.reserve_n_within(3, 299 * MS).unwrap_err();
    assert_eq!(refused, ReserveError::DelayTooLong { delay: 300 * MS, max_delay: 299 * MS });
    assert_eq!(limiter.peek(), before);
    assert_eq!(
        limiter.reserve_n(11).unwrap_err(),
        ReserveError::CostExceedsCapacity { cost: 11, capacity: 10 }
    );
    assert_eq!(limiter.peek(), before);
    assert_eq!(limiter.reserve_n_within(3, 300 * MS).unwrap().delay(), 300 * MS);
}

#[test]
fn cancel_gives_back_only_what_no_later_reservation_built_on() {
    let clock = ManualClock::new();
    let limiter = gcra(10, 1, &clock);
    let _first = limiter.reserve_n(1).unwrap(); // now
    let second = limiter.reserve_n(1).unwrap(); // at 100 ms
    let third = limiter.reserve_n(1).unwrap(); // at 200 ms
    assert_eq!(third.delay(), 200 * MS);
    // The third's time assumed the second's unit gone: cancelling the second gives back nothing.
    let before = limiter.peek();
    assert_eq!(second.cancel(), 0);
    assert_eq!(limiter.peek(), before);
    // The last one gives back all of its unit: the next reservation takes its time.
    assert_eq!(third.cancel(), 1);
    assert_eq!(limiter.reserve_n(1).unwrap().delay(), 200 * MS);
}

/// Cancels out of order (the rule of `WordAlgorithm::cancel_reservation`): while a later grant
/// is still counted, a cancel gives back nothing (Go's x/time/rate gives back 1 then 0 here);
/// once the later ones are cancelled, last first, each gives back all of its units.
#[test]
fn cancels_out_of_order_give_back_nothing_and_last_first_everything() {
    let clock = ManualClock::new();
    let limiter = gcra(10, 3, &clock);
    let mut held = [3, 3, 1, 1].map(|cost| Some(limiter.reserve_n(cost).unwrap()));
    let at: Vec<Duration> = held.iter().map(|r| r.as_ref().unwrap().delay()).collect();
    assert_eq!(at, [Duration::ZERO, 300 * MS, 400 * MS, 500 * MS]);
    // The third and fourth were granted after the second and the fourth after the third.
    assert_eq!(held[1].take().unwrap().cancel(), 0);
    assert_eq!(held[2].take().unwrap().cancel(), 0);
    assert_eq!(limiter.reserve_n(3).unwrap().delay(), 800 * MS);
    // Last first: the newest, then the fourth, give back all.
    let clock = ManualClock::new();
    let limiter = gcra(10, 3, &clock);
    let mut held = [3, 3, 1, 1].map(|cost| Some(limiter.reserve_n(cost).unwrap()));
    assert_eq!(held[3].take().unwrap().cancel(), 1);
    assert_eq!(held[2].take().unwrap().cancel(), 1);
    assert_eq!(held[1].take().unwrap().cancel(), 3);
    assert_eq!(limiter.reserve_n(3).unwrap().delay(), 300 * MS);
}

/// A check admitted after an immediate reservation, at the same reading, is counted: the
/// cancel gives back nothing, for every algorithm alike; with nothing after it, everything.
#[test]
fn a_check_after_an_immediate_reservation_holds_back_its_units_for_every_algorithm() {
    fn check<W: WordAlgorithm>(quota: Quota) {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<W, _>::with_clock(quota, clock).unwrap();
        let two = limiter.reserve_n(2).unwrap();
        assert!(limiter.check().is_allowed(), "{}", W::NAME);
        assert_eq!(two.cancel(), 0, "{}", W::NAME);
        assert_eq!(limiter.peek().remaining(), 1, "{}", W::NAME);
        let one = limiter.reserve_n(1).unwrap();
        assert!(!limiter.check().is_allowed(), "{}", W::NAME); // a denial grants nothing
        assert_eq!(one.cancel(), 1, "{}", W::NAME);
        assert_eq!(limiter.peek().remaining(), 1, "{}", W::NAME);
    }
    let quota = Quota::per_second(4).unwrap();
    check::<Gcra>(quota);
    check::<TokenBucket>(quota);
    check::<FixedWindow>(quota);
    check::<SlidingWindowCounter>(quota);
}

#[test]
fn cancel_after_the_units_were_due_gives_back_nothing() {
    let clock = ManualClock::new();
    let limiter = gcra(10, 1, &clock);
    let _now = limiter.reserve_n(1).unwrap();
    let later = limiter.reserve_n(1).unwrap();
    assert_eq!(later.delay_from_now(), 100 * MS);
    clock.advance(50 * MS);
    assert_eq!(later.delay_from_now(), 50 * MS);
    clock.advance(51 * MS);
    let before = limiter.peek();
    assert_eq!(later.cancel(), 0);
    assert_eq!(limiter.peek(), before);
}

#[test]
fn algorithms_without_units_ahead_of_time_reserve_only_what_is_there() {
    fn check<W: WordAlgorithm>(quota: Quota) {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<W, _>::with_clock(quota, clock.clone()).unwrap();
        let all = limiter.reserve_n(quota.limit()).unwrap();
        assert_eq!(all.delay(), Duration::ZERO);
        let before = limiter.peek();
        let retry_after = limiter.check().retry_after();
        assert_eq!(
            limiter.reserve_n(1).unwrap_err(),
            ReserveError::NotAvailableNow { algorithm: W::NAME, retry_after },
            "{}",
            W::NAME
        );
        assert_eq!(limiter.peek(), before, "{}", W::NAME);
        // Cancelled at the instant it was made: its units come back.
        assert_eq!(all.cancel(), quota.limit());
        assert_eq!(limiter.peek().remaining(), quota.limit(), "{}", W::NAME);
    }
    let quota = Quota::per_second(4).unwrap();
    check::<TokenBucket>(quota);
    check::<FixedWindow>(quota);
    check::<SlidingWindowCounter>(quota);
}

#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Reserve {
        cost: u64,
        max_delay: u64,
    },
    Check(u64),
    /// Cancels the reservation at this index (modulo those still held).
    Cancel(usize),
}

proptest! {
    /// Every unit that may end up used (an admitted check at its time, a reservation held to the
    /// end or cancelled only after its time had come, at its ready time) keeps GCRA's bound: within any closed interval `[a, b]`, at most `burst + (b - a) / T`.
    /// A refusal changes nothing.
    #[test]
    fn used_units_keep_the_bucket_bound(
        burst in 1u64..6,
        steps in prop::collection::vec(prop_oneof![
            (0u64..400).prop_map(Step::Advance),
            (1u64..6, 0u64..1_000).prop_map(|(cost, max_delay)| Step::Reserve { cost, max_delay }),
            (1u64..6).prop_map(Step::Check),
            any::<usize>().prop_map(Step::Cancel),
        ], 1..60),
    ) {
        // 10 per second: T = 100 ms; times below in ms.
        let clock = ManualClock::new();
        let limiter = gcra(10, burst, &clock);
        let mut held = Vec::new();
        let mut used: Vec<(u64, u64)> = Vec::new();
        for step in steps {
            match step {
                Step::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Step::Check(cost) => {
                    if let Ok(decision) = limiter.check_n(cost) {
                        if decision.is_allowed() {
                            used.push((clock.now_nanos(), cost));
                        }
                    }
                }
                Step::Reserve { cost, max_delay } => {
                    let before = limiter.peek();
                    match limiter.reserve_n_within(cost, Duration::from_millis(max_delay)) {
                        Ok(reservation) => held.push(reservation),
                        Err(_) => prop_assert_eq!(limiter.peek(), before),
                    }
                }
                Step::Cancel(i) if !held.is_empty() => {
                    let reservation = held.remove(i % held.len());
                    let (at, cost) = (reservation.ready_at_nanos(), reservation.cost());
                    let before = limiter.peek().remaining();
                    let tat_before = limiter.peek().reset_after_nanos();
                    let in_time = clock.now_nanos() <= at;
                    let units = reservation.cancel();
                    let tat_after = limiter.peek().reset_after_nanos();
                    prop_assert!(before <= limiter.peek().remaining());
                    // What it says it gave back: nothing once due, never more than its cost,
                    // and no less than the state shows.
                    let back = tat_before - tat_after;
                    prop_assert!(units <= cost && back.div_ceil(100_000_000) <= units);
                    prop_assert!(in_time || units == 0);
                    let kept = used_after_cancel(cost, in_time);
                    if kept > 0 {
                        used.push((at, kept));
                    }
                }
                Step::Cancel(_) => {}
            }
        }
        for reservation in held {
            used.push((reservation.ready_at_nanos(), reservation.cost()));
        }
        check_bucket_bound(&mut used, burst, 100_000_000)?;
    }
}

/// An owned reservation holds its limiter: stored in a struct, moved to another thread, it
/// follows the same rule as a borrowed one.
#[test]
fn an_owned_reservation_outlives_the_borrow_and_follows_the_rule() {
    struct Pending {
        units: kova::reservation::OwnedReservation<Gcra, ManualClock>,
    }
    let clock = ManualClock::new();
    let limiter = std::sync::Arc::new(gcra(10, 1, &clock));
    let _now = limiter.reserve_n(1).unwrap();
    let held = Pending { units: limiter.reserve_n_owned(1).unwrap() };
    assert_eq!(held.units.delay(), 100 * MS);
    let later = limiter.reserve_n_within_owned(1, 200 * MS).unwrap();
    // Out of order: nothing back while the later one is counted; then last first.
    let back = std::thread::spawn(move || held.units.cancel()).join().unwrap();
    assert_eq!(back, 0);
    assert_eq!(later.cancel(), 1);
    assert!(limiter.reserve_n_within_owned(2, Duration::MAX).is_err(), "cost above the capacity");
}

/// A reset gives back everything, reserved units included: a reservation made before it gives
/// back nothing more when cancelled, for every word algorithm (each would otherwise read the
/// units checked after the reset as its own and return them: more admitted than the quota).
#[test]
fn a_cancel_after_a_reset_gives_back_nothing() {
    fn case<W: WordAlgorithm>(reserve: u64, checked: u64) {
        let clock = ManualClock::new();
        clock.set(1_000_000_000_000);
        let quota = Quota::per_second(10).unwrap();
        let limiter = RateLimiter::<W, _>::with_clock(quota, clock.clone()).unwrap();
        let reserved = limiter.reserve_n(reserve).unwrap();
        limiter.reset();
        assert!(limiter.check_n(checked).unwrap().is_allowed(), "{}", W::NAME);
        assert_eq!(reserved.cancel(), 0, "{}", W::NAME);
        assert_eq!(limiter.peek().remaining(), 10 - checked, "{}", W::NAME);
    }
    case::<Gcra>(5, 3);
    case::<TokenBucket>(2, 2);
    case::<FixedWindow>(2, 2);
    case::<SlidingWindowCounter>(2, 2);
}

/// A reservation made after a reset is cancelled as any other.
#[test]
fn a_reservation_after_a_reset_cancels_as_usual() {
    let clock = ManualClock::new();
    let limiter = gcra(10, 10, &clock);
    limiter.check_n(4).unwrap();
    limiter.reset();
    let reserved = limiter.reserve_n(5).unwrap();
    assert_eq!(reserved.cancel(), 5);
    assert_eq!(limiter.peek().remaining(), 10);
}
