//! Loom models of the composite (`kova::limits::Limits`, `crates/kova/src/limits/cells.rs`).
//!
//! The scenario: limit 0 has 2 units left, limit 1 has 1 (a check of 1 in the prelude, bursts 3
//! and 2, nothing refilling). Thread A checks 2 units: the sequential composite denies it, by
//! limit 1, whenever it runs. Thread B checks 1 unit: the sequential composite admits it,
//! whenever it runs (A takes nothing). Asserted in every interleaving:
//! - two limits (one 128-bit CAS): exactly the sequential outcome (B admitted, A denied by 1),
//!   and the final state B's charge alone;
//! - the should-fail twin (the same two limits checked then refunded one by one): loom finds an
//!   execution where B is denied, by the units A held on limit 0 before limit 1 denied it;
//! - three limits (check then refund): A is always denied and takes nothing; B is denied only by
//!   limit 0 (the stated bound: only by units a check in flight holds), and the final state is
//!   exactly B's charge or nothing; and some execution does deny B (the bound is reached).
//!
//! And `KeyedLimits`, whose table keeps a key's limits in one boxed cell (`keyed/table/visit.rs`):
//! a check of an idle key racing `sweep_idle` is never lost (its units counted in every limit
//! at the end, whether the sweep kept the key, reclaimed it first, or unlinked it under the
//! write), and its should-fail twin, whose write stands without looking at the key's line
//! again, is caught (in `racy.rs`: it must run in a child process).
#![cfg(kova_loom)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use kova::limits::{Limits, LimitsDecision};
use kova::loom_racy::limits_chained;
use kova::{Decision, Gcra, ManualClock, Quota};
use kova_loom_tests::harness::model;
use loom::sync::Arc;

fn quotas(n: usize) -> Vec<Quota> {
    [3, 2, 10][..n].iter().map(|&burst| Quota::per_hour(1).unwrap().with_burst(burst).unwrap()).collect()
}

fn remaining(decision: &LimitsDecision) -> Vec<u64> {
    decision.limit_decisions().iter().map(Decision::remaining).collect()
}

/// Runs the scenario once on `limits`; returns (A's decision, B's decision, the final peek).
fn race(limits: Limits<Gcra, ManualClock>) -> (LimitsDecision, LimitsDecision, LimitsDecision) {
    assert!(limits.check().is_allowed());
    let limits = Arc::new(limits);
    let a = {
        let limits = Arc::clone(&limits);
        loom::thread::spawn(move || limits.check_n(2).unwrap())
    };
    let b = limits.check_n(1).unwrap();
    let a = a.join().unwrap();
    (a, b, limits.peek())
}

fn sequential_outcome(a: &LimitsDecision, b: &LimitsDecision, end: &LimitsDecision) {
    assert!(!a.is_allowed(), "A: {a:?}");
    assert!(b.is_allowed(), "B was denied, which the sequential composite never does: {b:?}");
    assert_eq!(remaining(end)[..2], [1, 0], "final state");
}

#[test]
fn two_limits_in_one_cas_are_the_sequential_composite() {
    model(|| {
        let limits = Limits::<Gcra, _>::with_clock(quotas(2), ManualClock::new()).unwrap();
        let (a, b, end) = race(limits);
        sequential_outcome(&a, &b, &end);
    });
}

#[test]
fn check_then_refund_on_two_limits_is_caught() {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        model(|| {
            let limits = limits_chained::<Gcra, _>(quotas(2), ManualClock::new()).unwrap();
            let (a, b, end) = race(limits);
            sequential_outcome(&a, &b, &end);
        })
    }));
    let payload = outcome.expect_err("loom explored every interleaving and found no spurious denial");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("B was denied"), "loom failed for another reason: {message}");
    eprintln!("loom caught it: {message}");
}

#[test]
fn three_limits_keep_the_stated_bound() {
    // A std atomic, outside the model: whether any execution denied B.
    static B_DENIED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    model(|| {
        let limits = Limits::<Gcra, _>::with_clock(quotas(3), ManualClock::new()).unwrap();
        let (a, b, end) = race(limits);
        assert!(!a.is_allowed(), "A: {a:?}");
        if b.is_allowed() {
            assert_eq!(remaining(&end), [1, 0, 8], "final state after B");
        } else {
            // Denied only by the units A held on limit 0 before limit 1 denied A.
            assert_eq!(b.decided_by(), 0, "B: {b:?}");
            assert_eq!(remaining(&end), [2, 1, 9], "a denial took something");
            // Relaxed: a flag read after the model returned, on this thread.
            B_DENIED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        B_DENIED.load(std::sync::atomic::Ordering::Relaxed),
        "no execution reached the bound: the model cannot tell check-then-refund apart"
    );
}

#[test]
fn a_keyed_composite_check_racing_a_sweep_is_never_lost() {
    model(kova_loom_tests::keyed_limits::check_racing_a_sweep);
}
