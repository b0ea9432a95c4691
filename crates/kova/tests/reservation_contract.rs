//! The reservation contract (`WordAlgorithm::cancel_reservation`), walked at random against a
//! sequential model of the rule, for each word algorithm, direct and keyed: a cancel in time
//! gives back its whole cost when every grant after it has itself been given back (last
//! first), and nothing otherwise; once its units are due, nothing.
//!
//! The model knows nothing of the algorithms' words: it keeps the grants still counted, in
//! order (every admitted check, every reservation that took units), and pops a reservation
//! when its cancel gives its units back.

use std::time::Duration;

use kova::{
    Clock, FixedWindow, Gcra, Keyed, ManualClock, Quota, RateLimiter, SlidingWindowCounter, TokenBucket,
    WordAlgorithm,
};

/// Steps per walk, and walks per algorithm and form.
const STEPS: usize = 5_000;
const WALKS: u64 = 4;

/// A grant the limiter's state still counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    Check,
    Reservation(u64),
}

/// A small xorshift: every run walks the same steps (the seed is in the failure message).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// How a walk reaches its subject: check `cost`, reserve `cost` within a delay, and a held
/// reservation's ready time, cost and cancel.
struct Calls<C, R, H> {
    check: C,
    reserve: R,
    ready_at: fn(&H) -> u64,
    cost: fn(&H) -> u64,
    cancel: fn(H) -> u64,
}

/// One walk of `STEPS` steps; panics at the first cancel that disagrees with the model.
fn walk<H>(
    name: &str,
    seed: u64,
    clock: &ManualClock,
    calls: Calls<impl Fn(u64) -> bool, impl Fn(u64, Duration) -> Option<H>, H>,
) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut counted: Vec<Grant> = Vec::new();
    let mut held: Vec<(u64, H)> = Vec::new();
    let mut next_id = 0;
    let (mut cancels, mut given) = (0, 0);
    for step in 0..STEPS {
        match rng.below(10) {
            0 => clock.advance(Duration::from_millis(rng.below(150))),
            1 | 2 if (calls.check)(1 + rng.below(3)) => counted.push(Grant::Check),
            1 | 2 => {}
            3..=6 => {
                let cost = rng.below(4);
                let max_delay = Duration::from_millis(rng.below(800));
                if let Some(reservation) = (calls.reserve)(cost, max_delay) {
                    next_id += 1;
                    if cost > 0 {
                        counted.push(Grant::Reservation(next_id));
                    }
                    held.push((next_id, reservation));
                }
            }
            _ if !held.is_empty() => {
                // Mostly the newest (last first), sometimes any.
                let i =
                    if rng.below(3) == 0 { rng.below(held.len() as u64) as usize } else { held.len() - 1 };
                let (id, reservation) = held.remove(i);
                let cost = (calls.cost)(&reservation);
                let in_time = clock.now_nanos() <= (calls.ready_at)(&reservation);
                let last = counted.last() == Some(&Grant::Reservation(id));
                let expected = if in_time && last { cost } else { 0 };
                let back = (calls.cancel)(reservation);
                assert_eq!(
                    back, expected,
                    "{name}, seed {seed}, step {step}: cancel of {cost} (in time {in_time}, last {last})"
                );
                if back > 0 {
                    counted.pop();
                }
                cancels += 1;
                given += back;
            }
            _ => {}
        }
    }
    (cancels, given)
}

fn quota_for(name: &str) -> Quota {
    let quota = Quota::per_second(10).unwrap();
    if name == Gcra::NAME {
        quota.with_burst(3).unwrap()
    } else {
        quota
    }
}

fn direct<W: WordAlgorithm>() -> (u64, u64) {
    let (mut cancels, mut given) = (0, 0);
    for seed in 1..=WALKS {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<W, _>::with_clock(quota_for(W::NAME), clock.clone()).unwrap();
        let calls = Calls {
            check: |cost| limiter.check_n(cost).is_ok_and(|d| d.is_allowed()),
            reserve: |cost, max_delay| limiter.reserve_n_within(cost, max_delay).ok(),
            ready_at: kova::reservation::Reservation::ready_at_nanos,
            cost: kova::reservation::Reservation::cost,
            cancel: kova::reservation::Reservation::cancel,
        };
        let (c, g) = walk(W::NAME, seed * 0x9e37_79b9, &clock, calls);
        (cancels, given) = (cancels + c, given + g);
    }
    (cancels, given)
}

fn keyed<W: WordAlgorithm>() -> (u64, u64) {
    let (mut cancels, mut given) = (0, 0);
    for seed in 1..=WALKS {
        let clock = ManualClock::new();
        let table = Keyed::<u64, W, _>::with_clock(quota_for(W::NAME), clock.clone()).unwrap();
        let calls = Calls {
            check: |cost| table.check_n(&7, cost).is_ok_and(|d| d.is_allowed()),
            reserve: |cost, max_delay| table.reserve_n_within(&7, cost, max_delay).ok(),
            ready_at: kova::keyed::KeyedReservation::ready_at_nanos,
            cost: kova::keyed::KeyedReservation::cost,
            cancel: kova::keyed::KeyedReservation::cancel,
        };
        let (c, g) = walk(W::NAME, seed * 0x85eb_ca6b, &clock, calls);
        (cancels, given) = (cancels + c, given + g);
    }
    (cancels, given)
}

/// Each walk must exercise both answers, or it shows nothing.
fn exercised((cancels, given): (u64, u64), what: &str) {
    assert!(cancels > 1_000 && given > 100, "{what}: {cancels} cancels gave back {given} units");
}

#[test]
fn every_algorithm_follows_the_rule_directly() {
    exercised(direct::<Gcra>(), "gcra");
    exercised(direct::<TokenBucket>(), "token bucket");
    exercised(direct::<FixedWindow>(), "fixed window");
    exercised(direct::<SlidingWindowCounter>(), "sliding window counter");
}

#[test]
fn every_algorithm_follows_the_rule_per_key() {
    exercised(keyed::<Gcra>(), "keyed gcra");
    exercised(keyed::<TokenBucket>(), "keyed token bucket");
    exercised(keyed::<FixedWindow>(), "keyed fixed window");
    exercised(keyed::<SlidingWindowCounter>(), "keyed sliding window counter");
}
