//! A composite's undo ([`WordAlgorithm::undo`]) against the history without the undone checks:
//! whatever other checks ran and however far the clock moved between a check's charge and its
//! undo, every check the undone state admitted is one the same history without the undone
//! checks admits too, for the window algorithms in any order of undos, and for GCRA and the
//! token bucket when the checks in flight together are undone youngest first. Undone in any
//! other order, GCRA and the token bucket stay within the documented bound: an undo gives back
//! at most the emission intervals its check was in flight, rounded up, beyond what that history
//! allows.

use kova::{FixedWindow, Gcra, Quota, SlidingWindowCounter, TokenBucket, WordAlgorithm};
use proptest::prelude::*;

/// One step of a history.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A check that stays.
    Check(u64),
    /// A check whose charge a later step may undo.
    Charge(u64),
    /// Undoes a pending charge: the one at this index (modulo how many are pending), or the
    /// youngest where undos come youngest first.
    Undo(usize),
}

/// Which pending charge an undo takes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Order {
    YoungestFirst,
    Any,
}

fn step() -> impl Strategy<Value = (u64, Step)> {
    let kind = prop_oneof![
        (1u64..4).prop_map(Step::Check),
        (1u64..4).prop_map(Step::Charge),
        (0usize..8).prop_map(Step::Undo),
    ];
    // Time advances by up to 40 ns a step: several windows and refills over a history.
    (0u64..40, kind)
}

/// What the replay without the undone checks does at a point of the history.
enum Replayed {
    /// A check that stayed admitted: it must be admitted.
    Admitted { at: u64, cost: u64 },
    /// An undo in the bound's allowance: the check's in-flight intervals, given back.
    Allowance { at: u64, units: u64 },
}

/// Runs `steps` on `algorithm`, undoing in `order`, then replays on a fresh word the checks
/// that stayed admitted (the checks, and the charges never undone), in order and at their
/// times: each must be admitted there too. With `allowance`, the replay is also given back, at
/// each undo, the emission intervals that undo's check was in flight (rounded up, at most its
/// cost): the documented bound for undos out of order.
fn undone_history_admits_nothing_extra<W: WordAlgorithm>(
    algorithm: &W,
    steps: &[(u64, Step)],
    order: Order,
    allowance: bool,
) {
    let capacity = algorithm.capacity();
    let interval = algorithm.quota().emission_interval_nanos();
    let mut word = algorithm.fresh_word();
    let mut now = 0;
    let mut replay: Vec<(usize, Replayed)> = Vec::new();
    // (sequence, time, cost, word written): charged, may be undone.
    let mut pending: Vec<(usize, u64, u64, u64)> = Vec::new();
    for (sequence, &(dt, step)) in steps.iter().enumerate() {
        now += dt;
        match step {
            Step::Check(cost) | Step::Charge(cost) => {
                let cost = cost.min(capacity);
                let (decision, written) = algorithm.decide(word, now, cost);
                if !decision.is_allowed() {
                    continue;
                }
                word = written;
                if matches!(step, Step::Check(_)) {
                    replay.push((sequence, Replayed::Admitted { at: now, cost }));
                } else {
                    pending.push((sequence, now, cost, written));
                }
            }
            Step::Undo(index) => {
                if pending.is_empty() {
                    continue;
                }
                let index = match order {
                    Order::YoungestFirst => pending.len() - 1,
                    Order::Any => index % pending.len(),
                };
                let (_, charged_at, cost, written) = pending.remove(index);
                word = algorithm.undo(word, now, cost, written);
                if allowance {
                    let units = (now - charged_at).div_ceil(interval).min(cost);
                    replay.push((sequence, Replayed::Allowance { at: now, units }));
                }
            }
        }
    }
    replay.extend(pending.iter().map(|&(sequence, at, cost, _)| (sequence, Replayed::Admitted { at, cost })));
    replay.sort_unstable_by_key(|&(sequence, _)| sequence);
    let mut fresh = algorithm.fresh_word();
    for (sequence, step) in &replay {
        match *step {
            Replayed::Admitted { at, cost } => {
                let (decision, written) = algorithm.decide(fresh, at, cost);
                assert!(
                    decision.is_allowed(),
                    "{}: step {sequence} ({cost} at {at} ns) was admitted with undos ({order:?}), \
                     but not without the undone checks ({steps:?})",
                    W::NAME
                );
                fresh = written;
            }
            Replayed::Allowance { at, units } => fresh = algorithm.refund(fresh, at, units),
        }
    }
}

fn gcra(limit: u64, period: u64, burst: u64) -> Gcra {
    Gcra::from_quota(Quota::from_nanos(limit, period).unwrap().with_burst(burst).unwrap()).unwrap()
}

fn bucket(limit: u64, period: u64, burst: u64) -> TokenBucket {
    TokenBucket::from_quota(Quota::from_nanos(limit, period).unwrap().with_burst(burst).unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    #[test]
    fn gcra_undone_youngest_first_admits_nothing_extra(
        limit in 1u64..5, period in 5u64..60, burst in 1u64..6,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        undone_history_admits_nothing_extra(&gcra(limit, period, burst), &steps, Order::YoungestFirst, false);
    }

    #[test]
    fn gcra_undone_in_any_order_stays_within_the_bound(
        limit in 1u64..5, period in 5u64..60, burst in 1u64..6,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        undone_history_admits_nothing_extra(&gcra(limit, period, burst), &steps, Order::Any, true);
    }

    #[test]
    fn token_bucket_undone_youngest_first_admits_nothing_extra(
        limit in 1u64..5, period in 5u64..60, burst in 1u64..6,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        undone_history_admits_nothing_extra(&bucket(limit, period, burst), &steps, Order::YoungestFirst, false);
    }

    #[test]
    fn token_bucket_undone_in_any_order_stays_within_the_bound(
        limit in 1u64..5, period in 5u64..60, burst in 1u64..6,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        undone_history_admits_nothing_extra(&bucket(limit, period, burst), &steps, Order::Any, true);
    }

    #[test]
    fn fixed_window_undone_in_any_order_admits_nothing_extra(
        limit in 1u64..6, period in 5u64..60,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let algorithm = FixedWindow::from_quota(Quota::from_nanos(limit, period).unwrap()).unwrap();
        undone_history_admits_nothing_extra(&algorithm, &steps, Order::Any, false);
    }

    #[test]
    fn sliding_window_counter_undone_in_any_order_admits_nothing_extra(
        limit in 1u64..6, period in 5u64..60,
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let algorithm = SlidingWindowCounter::from_quota(Quota::from_nanos(limit, period).unwrap()).unwrap();
        undone_history_admits_nothing_extra(&algorithm, &steps, Order::Any, false);
    }
}
