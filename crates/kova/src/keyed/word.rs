//! The hot path for kova's single-word algorithms, and how the shard's lock holder freezes
//! their cells.
//!
//! The table is generic over any [`Algorithm`]; for the four word algorithms (and
//! [`AnyAlgorithm`] holding one) it recognises the type by `TypeId`. Their cells are one
//! `AtomicU64`, which the lock holder can freeze: before it looks at a cell to decide whether to
//! unlink or replace its key, it swaps [`FROZEN`] in ([`Freezer`]). A check that finds the cell
//! frozen decides nothing and takes the slow path (the lock); a check whose CAS raced the freeze
//! either landed before it (the lock holder sees its write in the value it swapped out) or fails
//! (the word changed) and then finds it frozen. So a check of a word cell needs nothing after
//! its CAS: no fence and no second look at the index (see `shard.rs`'s module docs). Other cells
//! (the sliding log) are hidden by their index entry instead, and their checks look again.

use std::any::Any;

use super::shard::Freezer;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::{
    Algorithm, AnyAlgorithm, AnyCell, Clock, Decision, FixedWindow, Gcra, SlidingWindowCounter, TokenBucket,
    WordAlgorithm,
};

/// What a word cell holds while the lock holder looks at it. A real state can equal it too: such
/// a key is then checked under the lock every time (where nothing is frozen), which is slower
/// but decides the same.
pub(super) const FROZEN: u64 = u64::MAX;
/// A removed line's word (`line_shard.rs`): a probe goes on past it without reading its key.
pub(super) const TOMB: u64 = u64::MAX - 1;
/// A never-used line's word (`line_shard.rs`): a probe ends here.
pub(super) const VACANT: u64 = u64::MAX - 2;
/// The least marker: a check decides nothing on a word at or above it. A real state in this
/// range is decided under the lock, as one equal to `FROZEN` is.
pub(super) const MARKERS: u64 = VACANT;

/// Whether the lock holder freezes `algorithm`'s cells before it looks at them, so that a
/// check that wrote one needs no second look at its entry.
#[inline(always)]
pub(super) fn freezes<A: Algorithm>(algorithm: &A) -> bool {
    #[cfg(kova_loom)]
    if crate::loom_racy::look() == crate::loom_racy::Look::HideEntry {
        return false;
    }
    is_word(algorithm)
}

/// Whether `algorithm`'s cells are single words, checked by [`decide`]'s CAS loop.
#[inline(always)]
pub(super) fn is_word<A: Algorithm>(algorithm: &A) -> bool {
    let any = algorithm as &dyn Any;
    any.is::<Gcra>()
        || any.is::<TokenBucket>()
        || any.is::<FixedWindow>()
        || any.is::<SlidingWindowCounter>()
        || any.downcast_ref::<AnyAlgorithm>().is_some_and(|a| !matches!(a, AnyAlgorithm::SlidingWindowLog(_)))
}

/// Whether a table of `A` keeps its keys in lines (`line_shard.rs`): `A` is one of the four
/// word algorithms, whose cell is `AtomicU64`. Not [`AnyAlgorithm`]: its cell is an enum.
/// Under loom, [`on_slots`](crate::loom_racy::on_slots) and
/// [`hiding_entries`](crate::loom_racy::hiding_entries) keep tables on slots.
pub(super) fn in_lines<A: Algorithm>() -> bool {
    #[cfg(kova_loom)]
    if crate::loom_racy::slots_forced() {
        return false;
    }
    let id = std::any::TypeId::of::<A>();
    [
        std::any::TypeId::of::<Gcra>(),
        std::any::TypeId::of::<TokenBucket>(),
        std::any::TypeId::of::<FixedWindow>(),
        std::any::TypeId::of::<SlidingWindowCounter>(),
    ]
    .contains(&id)
}

/// The word of `cell`, when `algorithm` is a word algorithm.
#[inline(always)]
fn word_of<'c, A: Algorithm>(algorithm: &A, cell: &'c A::Cell) -> Option<&'c AtomicU64> {
    if !is_word(algorithm) {
        return None;
    }
    let any = algorithm as &dyn Any;
    if any.is::<AnyAlgorithm>() {
        // SAFETY: `A` is `AnyAlgorithm` (checked just above), whose cell is `AnyCell`: the
        // pointer cast is between identical types.
        let any_cell = unsafe { &*(cell as *const A::Cell).cast::<AnyCell>() };
        return match any_cell {
            AnyCell::Word(word) => Some(word),
            AnyCell::Log(_) => None,
        };
    }
    // SAFETY: `A` is one of the four word algorithms (`is_word`, and not `AnyAlgorithm`), each of
    // whose cell is `AtomicU64`: the pointer cast is between identical types.
    Some(unsafe { &*(cell as *const A::Cell).cast::<AtomicU64>() })
}

/// Decides `cost` units against a held key's cell: the CAS loop below for the word
/// algorithms, `decide_cell` for any other. `None`, having decided nothing, when the cell is
/// frozen.
#[inline(always)]
pub(super) fn decide<A: Algorithm, C: Clock + ?Sized>(
    algorithm: &A,
    cell: &A::Cell,
    clock: &C,
    cost: u64,
) -> Option<Decision> {
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
    Some(algorithm.decide_cell(cell, clock, cost))
}

/// `algorithm/word.rs`'s loop, except that it stops at a frozen word.
#[inline(always)]
fn cas<W: WordAlgorithm, C: Clock + ?Sized>(
    algorithm: &W,
    cell: &AtomicU64,
    clock: &C,
    cost: u64,
) -> Option<Decision> {
    // Acquire: as in `algorithm/word.rs`, pairs with the winning CAS that wrote this word, whose
    // clock reading is then no later than ours.
    let mut old = cell.load(Ordering::Acquire);
    loop {
        if old >= MARKERS {
            return None;
        }
        let (decision, new) = algorithm.decide(old, clock.now_nanos(), cost);
        if new == old {
            return Some(decision);
        }
        // AcqRel on success, Acquire on failure: as in `algorithm/word.rs`. Against a freeze
        // (an RMW of the same word) no stronger ordering is needed: the word's modification
        // order puts this CAS before the swap (which then returns our write) or after it (and
        // then it fails, unless the lock holder put back exactly `old` and kept the key).
        match cell.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(decision),
            Err(actual) => old = actual,
        }
    }
}

/// Freezes the cells of a word algorithm (`None` for other cells: their entry is hidden
/// instead; see [`freezes`]).
pub(super) struct WordFreezer<'a, A>(pub(super) &'a A);

impl<A: Algorithm> Freezer<A::Cell> for WordFreezer<'_, A> {
    fn freeze(&self, cell: &A::Cell) -> Option<A::Cell> {
        if !freezes(self.0) {
            return None;
        }
        let word = word_of(self.0, cell)?;
        #[cfg(kova_loom)]
        if crate::loom_racy::look() == crate::loom_racy::Look::LoadOnly {
            let copy = self.0.new_cell();
            // Acquire: as the swap below; the bug is the missing exchange, not the ordering.
            word_of(self.0, &copy)?.store(word.load(Ordering::Acquire), Ordering::Relaxed);
            return Some(copy);
        }
        // AcqRel: Acquire, to see what the CAS that wrote the value saw (as a check's load does);
        // Release is not needed by checks (they decide nothing on `FROZEN`) but keeps the swap a
        // plain exchange of ownership. Racing checks: see `cas`.
        let value = word.swap(FROZEN, Ordering::AcqRel);
        let copy = self.0.new_cell();
        word_of(self.0, &copy)?.store(value, Ordering::Relaxed);
        Some(copy)
    }

    fn thaw(&self, cell: &A::Cell, copy: &A::Cell) {
        #[cfg(kova_loom)]
        if crate::loom_racy::look() == crate::loom_racy::Look::LoadOnly {
            return;
        }
        if let (Some(word), Some(value)) = (word_of(self.0, cell), word_of(self.0, copy)) {
            // Release: a check that loads the restored value (Acquire) sees what the value's
            // writer saw, as if the freeze had not happened.
            word.store(value.load(Ordering::Relaxed), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlgorithmKind, ManualClock, Quota, SlidingWindowLog};

    #[test]
    fn word_algorithms_take_the_cas_loop_and_agree_with_decide_cell() {
        let clock = ManualClock::new();
        let quota = Quota::per_second(3).unwrap();
        for kind in AlgorithmKind::ALL {
            let algorithm = AnyAlgorithm::new(kind, quota).unwrap();
            assert_eq!(is_word(&algorithm), kind != AlgorithmKind::SlidingWindowLog);
            let (ours, theirs) = (algorithm.new_cell(), algorithm.new_cell());
            for step in 0..6 {
                clock.advance_nanos(step * 150_000_000);
                let cost = step % 3;
                let decision = decide(&algorithm, &ours, &clock, cost).expect("not frozen");
                assert_eq!(decision, algorithm.decide_cell(&theirs, &clock, cost), "{kind} step {step}");
            }
        }
        assert!(is_word(&<Gcra as Algorithm>::from_quota(quota).unwrap()));
        assert!(is_word(&<TokenBucket as Algorithm>::from_quota(quota).unwrap()));
        assert!(!is_word(&<SlidingWindowLog as Algorithm>::from_quota(quota).unwrap()));
    }
}
