//! Loom models of the single-word refund loop (`Algorithm::refund_cell`, `algorithm/word.rs`):
//! a refund racing checks on the same word. Refund is the second CAS loop on the cell (a request
//! admitted by one limit and denied by a later one gives its units back), so a lost update between
//! the two loops would either keep units spent or hand out units twice.
//!
//! Asserted in every interleaving: some order of the calls (each thread's in program order) run
//! through the algorithm's pure `decide` / `refund` reproduces every decision, the final peek and
//! the final word.
#![cfg(kova_loom)]

use std::fmt;

use kova::{
    Algorithm, CheckError, Clock, Decision, FixedWindow, Gcra, ManualClock, Quota, SlidingWindowCounter,
    TokenBucket, WordAlgorithm,
};
use kova_loom_tests::harness::model;
use kova_loom_tests::linearize::{assert_linearizable, Call, Checked, Lane, Spec};
use kova_loom_tests::specs::decide_word;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Check(u64),
    Refund(u64),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Check(cost) => write!(f, "check_n({cost})"),
            Op::Refund(cost) => write!(f, "refund({cost})"),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Out {
    Checked(Checked),
    Refunded(bool),
}

/// The pure functions over a plain word.
struct Pure<W>(W);

impl<W: WordAlgorithm> Spec for Pure<W> {
    type State = u64;
    type Op = Op;
    type Output = Out;

    fn needs_monotone_time(&self) -> bool {
        false
    }

    fn call(&self, word: &mut u64, now: u64, op: &Op) -> Out {
        match *op {
            Op::Check(cost) => Out::Checked(Checked(decide_word(&self.0, word, now, cost))),
            Op::Refund(cost) => {
                *word = self.0.refund(*word, now, cost);
                Out::Refunded(true)
            }
        }
    }
}

/// How a refund reaches the cell: the real loop or the racy one.
type RefundFn<W> = fn(&W, &AtomicU64, &ManualClock, u64) -> bool;

fn real_refund<W: WordAlgorithm>(algorithm: &W, cell: &AtomicU64, clock: &ManualClock, cost: u64) -> bool {
    algorithm.refund_cell(cell, clock, cost)
}

fn call<W: WordAlgorithm>(
    algorithm: &W,
    cell: &AtomicU64,
    clock: &ManualClock,
    op: Op,
    refund: RefundFn<W>,
) -> Call<Op, Out> {
    let before = clock.now_nanos();
    let result = match op {
        Op::Check(cost) => {
            let checked: Result<Decision, CheckError> = algorithm.check_cell(cell, clock, cost);
            Out::Checked(Checked(checked))
        }
        Op::Refund(cost) => Out::Refunded(refund(algorithm, cell, clock, cost)),
    };
    Call { op, before, after: clock.now_nanos(), result }
}

/// Prelude `check_n(2)` at t=0, clock advanced by `advance`; then two threads run `threads`;
/// then a final peek. 3 units per 3 us.
fn refund_model<W: WordAlgorithm + Copy>(advance: u64, threads: [Vec<Op>; 2], refund: RefundFn<W>) {
    model(move || {
        let algorithm = <W as WordAlgorithm>::from_quota(Quota::from_nanos(3, 3_000).unwrap()).unwrap();
        let cell = Arc::new(AtomicU64::new(algorithm.fresh_word()));
        let clock = ManualClock::new();
        let prelude = vec![call(&algorithm, &cell, &clock, Op::Check(2), refund)];
        clock.advance_nanos(advance);
        let workers: Vec<_> = threads
            .iter()
            .map(|ops| {
                let (ops, cell, clock) = (ops.clone(), Arc::clone(&cell), clock.clone());
                loom::thread::spawn(move || {
                    ops.iter().map(|&op| call(&algorithm, &cell, &clock, op, refund)).collect()
                })
            })
            .collect();
        let mut lanes = vec![Lane { name: "prelude".to_string(), phase: 0, calls: prelude }];
        for (i, worker) in workers.into_iter().enumerate() {
            lanes.push(Lane { name: format!("thread {}", i + 1), phase: 1, calls: worker.join().unwrap() });
        }
        let peek = call(&algorithm, &cell, &clock, Op::Check(0), refund);
        lanes.push(Lane { name: "final peek".to_string(), phase: 2, calls: vec![peek] });
        // SeqCst: read after every thread was joined; any ordering would do.
        let word = cell.load(Ordering::SeqCst);
        assert_linearizable(W::NAME, &Pure(algorithm), algorithm.fresh_word(), &lanes, &[0, advance], |w| {
            *w == word
        });
    });
}

macro_rules! refund_models {
    ($name:ident, $ty:ty) => {
        mod $name {
            use super::*;

            /// A refund of 2 racing a check of 2 with 1 unit left: the check passes only if the
            /// refund lands first.
            #[test]
            fn refund_racing_a_check() {
                refund_model::<$ty>(0, [vec![Op::Check(2)], vec![Op::Refund(2)]], real_refund::<$ty>);
            }

            /// A check then a refund of its own units on one thread, racing a check on another,
            /// after part of the period passed.
            #[test]
            fn check_then_refund_racing_a_check() {
                refund_model::<$ty>(
                    1_500,
                    [vec![Op::Check(1), Op::Refund(1)], vec![Op::Check(2)]],
                    real_refund::<$ty>,
                );
            }
        }
    };
}

refund_models!(gcra, Gcra);
refund_models!(token_bucket, TokenBucket);
refund_models!(fixed_window, FixedWindow);
refund_models!(sliding_window_counter, SlidingWindowCounter);

/// The model can fail: the same race on a refund that stores instead of CAS-ing
/// (`kova::loom_racy::refund_cell_load_store`) must be caught.
#[test]
fn racy_refund_is_caught() {
    let outcome = std::panic::catch_unwind(|| {
        refund_model::<Gcra>(
            0,
            [vec![Op::Check(1)], vec![Op::Refund(2)]],
            kova::loom_racy::refund_cell_load_store::<Gcra, ManualClock>,
        )
    });
    let payload = outcome.expect_err("loom found no violation in the racy refund");
    let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("not linearizable"), "{message}");
}
