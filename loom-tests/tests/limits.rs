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
//! - three and four limits (check then refund across two links: limits 0 and 1 in one 128-bit
//!   word, the rest in a second word), with the third limit the one that has 1 unit left (bursts
//!   3, 10, 2, and 10 for a fourth): A is always denied and takes nothing; B is denied only by
//!   limit 0 (the stated bound: only by units a check in flight holds on the first link), and
//!   the final state is exactly B's charge or nothing; and some execution does deny B (the bound
//!   is reached).
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
    with_bursts(&[3, 2, 10][..n])
}

fn with_bursts(bursts: &[u64]) -> Vec<Quota> {
    bursts.iter().map(|&burst| Quota::per_hour(1).unwrap().with_burst(burst).unwrap()).collect()
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

/// The three- and four-limit models: `bursts` put the denying limit on the second link.
fn two_links_keep_the_stated_bound(bursts: &'static [u64]) {
    // A std atomic, outside the model (each test its own): whether any execution denied B.
    let b_denied = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = std::sync::Arc::clone(&b_denied);
    model(move || {
        let limits = Limits::<Gcra, _>::with_clock(with_bursts(bursts), ManualClock::new()).unwrap();
        let (a, b, end) = race(limits);
        assert!(!a.is_allowed(), "A: {a:?}");
        assert!(!a.limit_decisions()[2].is_allowed(), "A: {a:?}");
        let before: Vec<u64> = bursts.iter().map(|burst| burst - 1).collect();
        if b.is_allowed() {
            let after: Vec<u64> = before.iter().map(|left| left - 1).collect();
            assert_eq!(remaining(&end), after, "final state after B");
        } else {
            // Denied only by the units A held on limit 0 before limit 2 denied A.
            assert_eq!(b.decided_by(), 0, "B: {b:?}");
            assert_eq!(remaining(&end), before, "a denial took something");
            // Relaxed: a flag read after the model returned, on this thread.
            seen.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        b_denied.load(std::sync::atomic::Ordering::Relaxed),
        "no execution reached the bound: the model cannot tell check-then-refund apart"
    );
}

#[test]
fn three_limits_keep_the_stated_bound() {
    two_links_keep_the_stated_bound(&[3, 10, 2]);
}

#[test]
fn four_limits_keep_the_stated_bound() {
    two_links_keep_the_stated_bound(&[3, 10, 2, 10]);
}

#[test]
fn a_keyed_composite_check_racing_a_sweep_is_never_lost() {
    model(kova_loom_tests::keyed_limits::check_racing_a_sweep);
}
