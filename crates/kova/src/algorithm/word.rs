//! The hot path of every single-word algorithm: the one CAS loop (`cas.rs`) over one `AtomicU64`.

use super::{sealed, Algorithm, CellStorage, GiveBack, WordAlgorithm};
use crate::cas::{update_word, update_word_with, Rerun};
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::{Clock, Decision, Quota, QuotaError};

impl<W: WordAlgorithm> Algorithm for W {
    type Cell = AtomicU64;
    type Storage = InlineWord;

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

    // Always inlined: left to the compiler, a caller that is itself not inlined (a wait's first
    // check, `check_n`) calls it, and the decision then crosses the call through the stack in
    // stores narrower than the loads that copy it on, which the store buffer cannot forward.
    #[inline(always)]
    fn decide_cell<C: Clock + ?Sized>(&self, cell: &AtomicU64, clock: &C, cost: u64) -> Decision {
        let rerun = if W::DECIDE_AFTER_WRITE { Rerun::AfterWrite } else { Rerun::No };
        update_word_with(
            cell,
            clock,
            rerun,
            #[inline(always)]
            |word, now| self.decide(word, now, cost),
        )
    }

    fn refund_cell<C: Clock + ?Sized>(&self, cell: &AtomicU64, clock: &C, cost: u64) -> bool {
        update_word(cell, clock, |word, now| (true, self.refund(word, now, cost)))
    }

    fn still_counted(
        &self,
        cost: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        <W as WordAlgorithm>::still_counted(self, cost, elapsed_nanos, reset_after_nanos, give_back)
    }

    fn charge_cell<C: Clock + ?Sized>(&self, cell: &AtomicU64, clock: &C, cost: u64) -> u64 {
        update_word(
            cell,
            clock,
            #[inline(always)]
            |word, now| self.charge(word, now, cost),
        )
    }

    fn consumed_cell(&self, cell: &AtomicU64, now: u64) -> u64 {
        // Acquire as in the CAS loop: the reading is no older than the writer's.
        self.consumed(cell.load(Ordering::Acquire), now)
    }

    fn reset_cell(&self, cell: &AtomicU64) {
        // A swap, where a store would do as well in the memory model (a store racing a check's
        // compare-and-swap lands wholly before or after it): loom 0.7 lets a store slip between
        // the read and the write of a compare-and-swap it raced (tokio-rs/loom#254), so a later
        // check reads the older word and the reset looks lost; a swap reads the newest word, and
        // loom then orders it after that compare-and-swap too. A reset is rare: the swap's cost
        // does not matter.
        // Release: a reader that sees the fresh word also sees a clock no older than ours (the
        // word read is discarded: no Acquire).
        cell.swap(self.fresh_word(), Ordering::Release);
    }

    fn is_idle(&self, cell: &AtomicU64, now: u64) -> bool {
        self.is_idle_word(cell.load(Ordering::Acquire), now)
    }

    fn cell_bytes(&self) -> usize {
        std::mem::size_of::<AtomicU64>()
    }
}

/// The storage of every [`WordAlgorithm`] ([`Algorithm::Storage`]): its cell is one word, kept
/// inline in a keyed table as its key's word.
#[derive(Debug)]
pub enum InlineWord {}

impl sealed::Sealed for InlineWord {}

// SAFETY: the cell is the word itself (`W::Cell` is `AtomicU64`): inline, both views `Some`.
unsafe impl<W: WordAlgorithm> CellStorage<W> for InlineWord {
    const INLINE: bool = true;

    #[inline(always)]
    fn inline_cell(word: &AtomicU64) -> Option<&AtomicU64> {
        Some(word)
    }

    #[inline(always)]
    fn inline_word(cell: &AtomicU64) -> Option<&AtomicU64> {
        Some(cell)
    }

    #[inline(always)]
    fn decide_word(algorithm: &W, word: u64, now: u64, cost: u64) -> Option<(Decision, u64)> {
        Some(algorithm.decide(word, now, cost))
    }
}
