//! The hot path for a cell that is one word, and how the shard's lock holder freezes it.
//!
//! A cell is one word when its storage says so ([`CellStorage::cell_word`]: every
//! [`WordAlgorithm`](crate::WordAlgorithm)'s, and [`AnyAlgorithm`](crate::AnyAlgorithm)'s of a
//! word kind). The lock holder can freeze it: before it looks at a cell to decide whether to
//! unlink or replace its key, it swaps [`FROZEN`] in ([`Freezer`]). A check that finds the cell
//! frozen decides nothing and takes the slow path (the lock); a check whose CAS raced the freeze
//! either landed before it (the lock holder sees its write in the value it swapped out) or fails
//! (the word changed) and then finds it frozen. So a check of a word cell needs nothing after
//! its CAS: no fence and no second look at its line. Other cells (the sliding log's) are hidden
//! by their line instead, and their checks look again (`line/cell.rs`).

use crate::cell::CellStorage;
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::faults::{self, Look};
use crate::{Algorithm, Clock, Decision};

/// What a word cell holds while the lock holder looks at it. A real state can equal it too: such
/// a key is then checked under the lock every time (where nothing is frozen), which is slower
/// but decides the same.
pub(super) const FROZEN: u64 = u64::MAX;
/// A removed line's word (`line/shard.rs`): a probe goes on past it without reading its key.
pub(super) const TOMB: u64 = u64::MAX - 1;
/// A never-used line's word (`line/shard.rs`): a probe ends here.
pub(super) const VACANT: u64 = u64::MAX - 2;
/// The most hot slots a table may have: as many values just below the table's own markers
/// mark a striped key's line (`hot.rs`).
pub const MAX_HOT_KEYS: usize = 1 << 12;
/// The least hot marker: slot `s`'s is `HOT_BASE + s` (`hot.rs`).
pub(super) const HOT_BASE: u64 = VACANT - MAX_HOT_KEYS as u64;
/// The least marker: a check decides nothing on a word at or above it. Below `VACANT` are the
/// hot keys' markers, which the hit path reads on its way to a hot slot. A real state in this
/// range is decided under the lock, as one equal to `FROZEN` is.
pub(super) const MARKERS: u64 = HOT_BASE;

/// Whether the lock holder freezes `cell` before it looks at it, so that a check that wrote it
/// needs no second look at its line: the cell is one word ([`CellStorage::cell_word`]).
#[inline(always)]
pub(super) fn freezes<A: Algorithm>(algorithm: &A, cell: &A::Cell) -> bool {
    if faults::look() == Look::HideEntry {
        return false;
    }
    A::Storage::cell_word(algorithm, cell).is_some()
}

/// How the lock holder stops checks from writing a cell before it looks at the cell to decide on
/// its key: by freezing the cell, when the cell can be frozen.
pub(super) trait Freezer<C> {
    /// Freezes `cell` and returns a copy of the state it held, or `None` when `cell` cannot be
    /// frozen (its line is hidden instead).
    fn freeze(&self, cell: &C) -> Option<C>;

    /// Puts back the state of `copy` (from [`freeze`](Self::freeze)) into the frozen `cell`.
    fn thaw(&self, cell: &C, copy: &C);
}

/// Decides `cost` units against a held key's cell: the CAS loop below for a cell that is one
/// word, `decide_cell` for any other. `None`, having decided nothing, when the cell is frozen.
#[inline(always)]
pub(super) fn decide<A: Algorithm, C: Clock + ?Sized>(
    algorithm: &A,
    cell: &A::Cell,
    clock: &C,
    cost: u64,
) -> Option<Decision> {
    decide_noting(algorithm, cell, clock, cost, |_| {})
}

/// [`decide`], calling `contended` (with the clock reading) after each compare-exchange of the
/// word that another write made fail: only the failure branch pays for it, so an uncontended
/// check pays nothing (`hot.rs`'s detection counts them).
#[inline(always)]
pub(super) fn decide_noting<A: Algorithm, C: Clock + ?Sized>(
    algorithm: &A,
    cell: &A::Cell,
    clock: &C,
    cost: u64,
    contended: impl FnMut(u64),
) -> Option<Decision> {
    match A::Storage::cell_word(algorithm, cell) {
        Some(word) => cas(algorithm, word, clock, cost, contended),
        None => Some(algorithm.decide_cell(cell, clock, cost)),
    }
}

/// The one CAS loop (`cas.rs`), stopping at a frozen word (or any marker).
#[inline(always)]
fn cas<A: Algorithm, C: Clock + ?Sized>(
    algorithm: &A,
    cell: &AtomicU64,
    clock: &C,
    cost: u64,
    contended: impl FnMut(u64),
) -> Option<Decision> {
    // Against a freeze (an RMW of the same word) the loop's orderings suffice: the word's
    // modification order puts a check's CAS before the swap (which then returns its write) or
    // after it (and then it fails, unless the lock holder put back exactly `old` and kept the
    // key), and the value it fails on is a marker, where the step stops.
    let step =
        |word, now| if word >= MARKERS { None } else { A::Storage::decide_word(algorithm, word, now, cost) };
    // `None` from `decide_word` only for an algorithm that gave a word it does not decide: the
    // lock holder's `decide_cell` answers instead.
    crate::cas::update(cell, clock, step, contended)
}

/// Freezes the cells of a word algorithm (`None` for other cells: their line is hidden
/// instead; see [`freezes`]).
pub(super) struct WordFreezer<'a, A>(pub(super) &'a A);

impl<A: Algorithm> Freezer<A::Cell> for WordFreezer<'_, A> {
    fn freeze(&self, cell: &A::Cell) -> Option<A::Cell> {
        if !freezes(self.0, cell) {
            return None;
        }
        let word = A::Storage::cell_word(self.0, cell)?;
        if faults::look() == Look::LoadOnly {
            let copy = self.0.new_cell();
            // Acquire: as the swap below; the bug is the missing exchange, not the ordering.
            A::Storage::cell_word(self.0, &copy)?.store(word.load(Ordering::Acquire), Ordering::Relaxed);
            return Some(copy);
        }
        // The copy is made before the swap: `new_cell` is the algorithm's code, and a panic in
        // it must leave the word as it was, not frozen.
        let copy = self.0.new_cell();
        let copy_word = A::Storage::cell_word(self.0, &copy)?;
        // AcqRel: Acquire, to see what the CAS that wrote the value saw (as a check's load does);
        // Release is not needed by checks (they decide nothing on `FROZEN`) but keeps the swap a
        // plain exchange of ownership. Racing checks: see `cas`.
        copy_word.store(word.swap(FROZEN, Ordering::AcqRel), Ordering::Relaxed);
        Some(copy)
    }

    fn thaw(&self, cell: &A::Cell, copy: &A::Cell) {
        if faults::look() == Look::LoadOnly {
            return;
        }
        if let (Some(word), Some(value)) =
            (A::Storage::cell_word(self.0, cell), A::Storage::cell_word(self.0, copy))
        {
            // Release: a check that loads the restored value (Acquire) sees what the value's
            // writer saw, as if the freeze had not happened.
            word.store(value.load(Ordering::Relaxed), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlgorithmKind, AnyAlgorithm, Gcra, ManualClock, Quota, SlidingWindowLog, TokenBucket};

    #[test]
    fn word_algorithms_take_the_cas_loop_and_agree_with_decide_cell() {
        let clock = ManualClock::new();
        let quota = Quota::per_second(3).unwrap();
        for kind in AlgorithmKind::ALL {
            let algorithm = AnyAlgorithm::new(kind, quota).unwrap();
            let (ours, theirs) = (algorithm.new_cell(), algorithm.new_cell());
            assert_eq!(freezes(&algorithm, &ours), kind != AlgorithmKind::SlidingWindowLog);
            for step in 0..6 {
                clock.advance_nanos(step * 150_000_000);
                let cost = step % 3;
                let decision = decide(&algorithm, &ours, &clock, cost).expect("not frozen");
                assert_eq!(decision, algorithm.decide_cell(&theirs, &clock, cost), "{kind} step {step}");
            }
        }
        let gcra = <Gcra as Algorithm>::from_quota(quota).unwrap();
        assert!(freezes(&gcra, &gcra.new_cell()));
        let bucket = <TokenBucket as Algorithm>::from_quota(quota).unwrap();
        assert!(freezes(&bucket, &bucket.new_cell()));
        let log = <SlidingWindowLog as Algorithm>::from_quota(quota).unwrap();
        assert!(!freezes(&log, &log.new_cell()));
    }

    /// The CAS loop stops at a frozen word and decides nothing; `decide_cell` would not.
    #[test]
    fn a_frozen_word_is_left_to_the_lock_holder() {
        let clock = ManualClock::new();
        let gcra = <Gcra as Algorithm>::from_quota(Quota::per_second(3).unwrap()).unwrap();
        let frozen = AtomicU64::new(FROZEN);
        assert_eq!(decide(&gcra, &frozen, &clock, 1), None);
        assert_eq!(frozen.load(Ordering::Relaxed), FROZEN);
    }
}
