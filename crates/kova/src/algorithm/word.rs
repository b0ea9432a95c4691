//! The hot path of every single-word algorithm: one CAS loop over one `AtomicU64`.

use super::{Algorithm, WordAlgorithm};
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::{Clock, Decision, Quota, QuotaError};

impl<W: WordAlgorithm> Algorithm for W {
    type Cell = AtomicU64;

    fn name(&self) -> &'static str {
        W::NAME
    }

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        <W as WordAlgorithm>::from_quota(quota)
    }

    fn quota(&self) -> Quota {
        <W as WordAlgorithm>::quota(self)
    }

    fn capacity(&self) -> u64 {
        <W as WordAlgorithm>::capacity(self)
    }

    fn new_cell(&self) -> AtomicU64 {
        AtomicU64::new(self.fresh_word())
    }

    #[inline]
    fn decide_cell<C: Clock + ?Sized>(&self, cell: &AtomicU64, clock: &C, cost: u64) -> Decision {
        // Acquire pairs with the Release half of the winning CAS below: whoever wrote this word
        // read its clock before writing, so the clock we read after this load is no older than
        // theirs (a monotonic clock never looks as if it ran backwards to a later reader).
        let mut old = cell.load(Ordering::Acquire);
        // A failed CAS means another thread holds the line: waiting a few spins (doubling up to
        // a bound) before deciding again lets it finish instead of stealing the line back.
        let backoff = crossbeam_utils::Backoff::new();
        loop {
            let now = clock.now_nanos();
            let (decision, new) = self.decide(old, now, cost);
            // A denial or a peek leaves the word as it is: nothing to write.
            if new == old {
                return decision;
            }
            // Success is AcqRel: Release publishes our clock reading's place in time to the next
            // reader (see above), Acquire keeps the same guarantee for us. Failure is Acquire for
            // the same reason as the first load, since we decide again on the value it returns.
            match cell.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return decision,
                Err(actual) => {
                    backoff.spin();
                    old = actual;
                }
            }
        }
    }

    fn refund_cell<C: Clock + ?Sized>(&self, cell: &AtomicU64, clock: &C, cost: u64) -> bool {
        // Orderings as in `decide_cell`.
        let mut old = cell.load(Ordering::Acquire);
        loop {
            let new = self.refund(old, clock.now_nanos(), cost);
            if new == old {
                return true;
            }
            match cell.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(actual) => old = actual,
            }
        }
    }

    fn charge_cell<C: Clock + ?Sized>(&self, cell: &AtomicU64, clock: &C, cost: u64) -> u64 {
        update_word(cell, clock, |word, now| self.charge(word, now, cost))
    }

    fn reset_cell(&self, cell: &AtomicU64) {
        // Release: a reader that sees the fresh word also sees a clock no older than ours.
        cell.store(self.fresh_word(), Ordering::Release);
    }

    fn is_idle(&self, cell: &AtomicU64, now: u64) -> bool {
        self.is_idle_word(cell.load(Ordering::Acquire), now)
    }

    fn cell_bytes(&self) -> usize {
        std::mem::size_of::<AtomicU64>()
    }

    const CELL_IS_WORD: bool = true;

    #[inline(always)]
    fn inline_cell(word: &AtomicU64) -> Option<&AtomicU64> {
        Some(word)
    }

    #[inline(always)]
    fn inline_word(cell: &AtomicU64) -> Option<&AtomicU64> {
        Some(cell)
    }

    #[inline(always)]
    fn decide_word(&self, word: u64, now: u64, cost: u64) -> Option<(Decision, u64)> {
        Some(self.decide(word, now, cost))
    }
}

/// The CAS loop of `decide_cell`, for any pure step `(word, now) -> (result, new_word)` (a
/// reservation, its cancellation, a settled charge): read, step, and write unless unchanged.
pub(crate) fn update_word<C: Clock + ?Sized, R>(
    cell: &AtomicU64,
    clock: &C,
    mut step: impl FnMut(u64, u64) -> (R, u64),
) -> R {
    // Orderings as in `decide_cell`: Acquire on every read pairs with the winning CAS's Release,
    // so the clock read after it is no older than the writer's.
    let mut old = cell.load(Ordering::Acquire);
    loop {
        let (result, new) = step(old, clock.now_nanos());
        if new == old {
            return result;
        }
        match cell.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return result,
            Err(actual) => old = actual,
        }
    }
}
