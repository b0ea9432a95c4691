//! The hot path for kova's single-word algorithms: their CAS loop with a `SeqCst` success, so
//! that the check after it ([`Shard::still_linked`](super::shard::Shard::still_linked)) needs
//! no fence.
//!
//! The table is generic over any [`Algorithm`]; for the four word algorithms (and
//! [`AnyAlgorithm`] holding one) it recognises the type by `TypeId` and runs this loop, which
//! is `algorithm/word.rs`'s with one ordering changed: `SeqCst` instead of `AcqRel` on success,
//! the same instruction on x86-64 (`lock cmpxchg`) and AArch64 (`casal`). Other algorithms go
//! through `decide_cell` and a `SeqCst` fence.

use std::any::Any;

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::{
    Algorithm, AnyAlgorithm, AnyCell, Clock, Decision, FixedWindow, Gcra, SlidingWindowCounter, TokenBucket,
    WordAlgorithm,
};

/// Whether checks of `algorithm`'s cells write with a `SeqCst` CAS ([`decide`] runs the loop
/// below for them).
#[inline(always)]
pub(super) fn writes_seqcst<A: Algorithm>(algorithm: &A) -> bool {
    let any = algorithm as &dyn Any;
    any.is::<Gcra>()
        || any.is::<TokenBucket>()
        || any.is::<FixedWindow>()
        || any.is::<SlidingWindowCounter>()
        || any.downcast_ref::<AnyAlgorithm>().is_some_and(|a| !matches!(a, AnyAlgorithm::SlidingWindowLog(_)))
}

/// Decides `cost` units against a held key's cell: the `SeqCst` loop below for the word
/// algorithms, `decide_cell` for any other.
#[inline(always)]
pub(super) fn decide<A: Algorithm, C: Clock + ?Sized>(
    algorithm: &A,
    cell: &A::Cell,
    clock: &C,
    cost: u64,
) -> Decision {
    let any = algorithm as &dyn Any;
    macro_rules! word {
        ($($w:ty),*) => {$(
            if let Some(word_algorithm) = any.downcast_ref::<$w>() {
                // SAFETY: `A` is `$w` (the downcast succeeded), so `A::Cell` is `$w`'s cell,
                // `AtomicU64`: the pointer cast is between identical types.
                let word = unsafe { &*(cell as *const A::Cell).cast::<AtomicU64>() };
                return cas(word_algorithm, word, clock, cost);
            }
        )*};
    }
    word!(Gcra, TokenBucket, FixedWindow, SlidingWindowCounter);
    if let Some(any_algorithm) = any.downcast_ref::<AnyAlgorithm>() {
        // SAFETY: `A` is `AnyAlgorithm`, whose cell is `AnyCell`: identical types.
        let any_cell = unsafe { &*(cell as *const A::Cell).cast::<AnyCell>() };
        match (any_algorithm, any_cell) {
            (AnyAlgorithm::Gcra(w), AnyCell::Word(word)) => return cas(w, word, clock, cost),
            (AnyAlgorithm::TokenBucket(w), AnyCell::Word(word)) => return cas(w, word, clock, cost),
            (AnyAlgorithm::FixedWindow(w), AnyCell::Word(word)) => return cas(w, word, clock, cost),
            (AnyAlgorithm::SlidingWindowCounter(w), AnyCell::Word(word)) => return cas(w, word, clock, cost),
            _ => {}
        }
    }
    algorithm.decide_cell(cell, clock, cost)
}

/// `algorithm/word.rs`'s loop, with a `SeqCst` success.
#[inline(always)]
fn cas<W: WordAlgorithm, C: Clock + ?Sized>(
    algorithm: &W,
    cell: &AtomicU64,
    clock: &C,
    cost: u64,
) -> Decision {
    // Acquire: as in `algorithm/word.rs`, pairs with the winning CAS that wrote this word, whose
    // clock reading is then no later than ours.
    let mut old = cell.load(Ordering::Acquire);
    loop {
        let (decision, new) = algorithm.decide(old, clock.now_nanos(), cost);
        if new == old {
            return decision;
        }
        // SeqCst on success: Release and Acquire as in `algorithm/word.rs`, and a place in the
        // single total order, which `Shard::still_linked` relies on instead of a fence. Acquire
        // on failure: we decide again on the value it returns.
        match cell.compare_exchange_weak(old, new, Ordering::SeqCst, Ordering::Acquire) {
            Ok(_) => return decision,
            Err(actual) => old = actual,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlgorithmKind, ManualClock, Quota, SlidingWindowLog};

    #[test]
    fn word_algorithms_take_the_seqcst_loop_and_agree_with_decide_cell() {
        let clock = ManualClock::new();
        let quota = Quota::per_second(3).unwrap();
        for kind in AlgorithmKind::ALL {
            let algorithm = AnyAlgorithm::new(kind, quota).unwrap();
            assert_eq!(writes_seqcst(&algorithm), kind != AlgorithmKind::SlidingWindowLog);
            let (ours, theirs) = (algorithm.new_cell(), algorithm.new_cell());
            for step in 0..6 {
                clock.advance_nanos(step * 150_000_000);
                let cost = step % 3;
                let decision = decide(&algorithm, &ours, &clock, cost);
                assert_eq!(decision, algorithm.decide_cell(&theirs, &clock, cost), "{kind} step {step}");
            }
        }
        assert!(writes_seqcst(&<Gcra as Algorithm>::from_quota(quota).unwrap()));
        assert!(writes_seqcst(&<TokenBucket as Algorithm>::from_quota(quota).unwrap()));
        assert!(!writes_seqcst(&<SlidingWindowLog as Algorithm>::from_quota(quota).unwrap()));
    }
}
