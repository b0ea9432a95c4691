//! Loom models of the striped limiter (`kova::striped::StripedLimiter`, `crates/kova/src/striped.rs`):
//! checks spending a stripe's units racing each other, a lease of a new batch, and the give-back
//! of a stripe's units (a flush, an expired lease returned at a check or at a denial).
//!
//! Asserted in every interleaving, for each word algorithm, with a quota that does not refill
//! during the model (4 units per hour) so that every unit is accounted for:
//! 1. **bound**: the units admitted never exceed the 4 units of the quota;
//! 2. **nothing lost**: after the threads are joined and the stripes flushed, admitted plus the
//!    central word's remaining units is exactly 4 (no unit spent twice, none kept by a stripe,
//!    none given back twice);
//! 3. every denial says it is striped (`Fallback::StripeLease`): stripes may hold units, or be
//!    giving them back, while the central word denies.
//!
//! The should-fail twin runs the same models with stripes spent by load and store instead of a
//! CAS (`kova::loom_racy::striped_take_load_store`), which loom must catch.
#![cfg(kova_loom)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use kova::striped::StripedLimiter;
use kova::{Decision, Fallback, FixedWindow, Gcra, ManualClock, Quota, TokenBucket, WordAlgorithm};
use kova_loom_tests::harness::model;
use loom::sync::Arc;

/// The quota's units; nothing refills while a model runs.
const UNITS: u64 = 4;
/// One step of the stripes' clock (a lease of one step expires after it).
const STEP: u64 = 1 << 16;

/// What a thread does.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// `check_n_on(stripe, 1)`.
    Check(usize),
    /// `flush()`.
    Flush,
}

struct Scenario {
    /// Checks on the main thread before the threads start: `(stripe, cost)`.
    prelude: Vec<(usize, u64)>,
    /// Clock advance after the prelude (past the one-step lease or not).
    advance: u64,
    threads: [Vec<Op>; 2],
}

fn run<W: WordAlgorithm>(scenario: &Scenario) -> Vec<Decision> {
    let clock = ManualClock::new();
    let limiter = StripedLimiter::<W>::builder(Quota::per_hour(UNITS).unwrap())
        .stripes(2)
        .batch(2)
        .lease(Duration::from_nanos(STEP))
        .clock(clock.clone())
        .build()
        .unwrap();
    let mut decisions: Vec<Decision> =
        scenario.prelude.iter().map(|&(stripe, cost)| limiter.check_n_on(stripe, cost).unwrap()).collect();
    clock.advance_nanos(scenario.advance);
    let limiter = Arc::new(limiter);
    let workers: Vec<_> = scenario
        .threads
        .iter()
        .map(|ops| {
            let (ops, limiter) = (ops.clone(), Arc::clone(&limiter));
            loom::thread::spawn(move || {
                let mut decisions = Vec::new();
                for op in ops {
                    match op {
                        Op::Check(stripe) => decisions.push(limiter.check_n_on(stripe, 1).unwrap()),
                        Op::Flush => {
                            limiter.flush();
                        }
                    }
                }
                decisions
            })
        })
        .collect();
    for worker in workers {
        decisions.extend(worker.join().unwrap());
    }
    let admitted: u64 = decisions
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_allowed())
        .map(|(i, _)| if i < scenario.prelude.len() { scenario.prelude[i].1 } else { 1 })
        .sum();
    assert!(admitted <= UNITS, "{}: admitted {admitted}, over the bound of {UNITS}: {decisions:?}", W::NAME);
    limiter.flush();
    let remaining = limiter.peek().remaining();
    assert_eq!(
        admitted + remaining,
        UNITS,
        "{}: admitted {admitted} + remaining {remaining}: a unit lost or spent twice (conservation): {decisions:?}",
        W::NAME
    );
    for denial in decisions.iter().filter(|d| !d.is_allowed()) {
        assert_eq!(denial.fallback(), Some(Fallback::StripeLease), "{}: an unmarked denial", W::NAME);
    }
    decisions
}

/// Two threads spending from one stripe, each twice: leases, spends and put-backs racing.
fn take() -> Scenario {
    Scenario {
        prelude: vec![],
        advance: 0,
        threads: [vec![Op::Check(0), Op::Check(0)], vec![Op::Check(0), Op::Check(0)]],
    }
}

/// A check spending stripe 0's last unit racing a flush that gives it back.
fn take_racing_flush() -> Scenario {
    Scenario { prelude: vec![(0, 1), (1, 1)], advance: 0, threads: [vec![Op::Check(0)], vec![Op::Flush]] }
}

/// Both stripes' leases expired: each thread's check gives its stripe back and leases or
/// decides exactly, while the other's denial may reclaim that same stripe.
fn expired_give_back() -> Scenario {
    Scenario {
        prelude: vec![(0, 1), (1, 1)],
        advance: 2 * STEP,
        threads: [vec![Op::Check(1)], vec![Op::Check(0), Op::Check(0)]],
    }
}

macro_rules! striped_models {
    ($name:ident, $ty:ty) => {
        mod $name {
            use super::*;

            #[test]
            fn two_checks_on_one_stripe() {
                model(|| {
                    run::<$ty>(&take());
                });
            }

            #[test]
            fn take_racing_a_flush() {
                model(|| {
                    run::<$ty>(&take_racing_flush());
                });
            }

            #[test]
            fn expired_leases_given_back_while_leasing() {
                model(|| {
                    run::<$ty>(&expired_give_back());
                });
            }
        }
    };
}

striped_models!(gcra, Gcra);
striped_models!(token_bucket, TokenBucket);
striped_models!(fixed_window, FixedWindow);

/// Runs `scenario` with stripes spent by load and store; returns loom's failure message.
fn racy_is_caught(scenario: fn() -> Scenario) -> String {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        kova::loom_racy::striped_take_load_store(|| {
            model(move || {
                run::<Gcra>(&scenario());
            })
        })
    }));
    let payload = outcome.expect_err("loom explored every interleaving and found no violation");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("conservation") || message.contains("over the bound"), "{message}");
    message
}

/// Two checks on one stripe both spend its last unit.
#[test]
fn racy_take_on_one_stripe_is_caught() {
    racy_is_caught(take);
}

/// A check's plain store puts back the unit a flush had just given back.
#[test]
fn racy_take_racing_a_flush_is_caught() {
    let message = racy_is_caught(take_racing_flush);
    assert!(message.contains("conservation"), "{message}");
}
