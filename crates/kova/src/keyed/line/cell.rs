//! How a line's word holds its key's cell.
//!
//! - **Inline**: an algorithm whose cell is one word (its [`Algorithm::Storage`] is
//!   [`InlineWord`](crate::cell::InlineWord): every [`WordAlgorithm`](crate::WordAlgorithm)'s) keeps the cell *as* the line's word, so a check
//!   of a held key touches one cache line. The lock holder stops checks from writing it by
//!   freezing the word itself (`word.rs`).
//! - **Boxed**: any other cell ([`AnyAlgorithm`](crate::AnyAlgorithm)'s enum) lives on the
//!   heap, and the line's word holds its address, as a pointer that keeps its provenance
//!   ([`AtomicAddressWord`]): the cell is reached through that pointer, never through an
//!   integer turned back into one, so Miri checks every access to it. A cell that is itself one owning pointer to
//!   an allocation beginning with that pointer (the sliding log's, [`CellStorage::SELF_ADDRESSED`])
//!   needs no box: the word holds the allocation's address, which is a reference to the cell,
//!   so a check reaches the state in one hop. Either way the address never equals a marker
//!   (`word.rs`: markers are the top three values, an address is aligned and below them).
//!   A boxed cell never moves while its key is held: a rehash copies the address, so a check
//!   still on the old array writes the cell every other check writes. It is dropped with its
//!   line's key, after the grace period of the line's removal.
//!
//! A boxed cell that is not one word cannot be frozen. The lock holder *hides* it instead
//! before it looks at it: it swaps `FROZEN` over the line's word and issues a `SeqCst` fence,
//! then reads the cell. A check that wrote the cell issues a `SeqCst` fence and loads the line's
//! word again ([`LineShard::still_linked`](super::shard::LineShard)). By the single total
//! order of `SeqCst` fences (C++20 [atomics.order] p4.4) either the lock holder's read sees the
//! check's write (an eviction then finds the key active and keeps it, a quota change carries
//! the write over), or the check's load sees `FROZEN` or `TOMB` and the check is redone under
//! the lock, unless the key still has the cell it wrote (its place is the cell's address).

use crate::cell::CellStorage;
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::faults;
use crate::loom::{AddressWord, AtomicAddressWord};
use crate::Algorithm;

/// Whether a table of `A` keeps its cells boxed (module docs). Under loom,
/// `loom_racy::boxed_cells` and
/// `loom_racy::hiding_entries` box word cells too.
#[inline(always)]
pub(in crate::keyed) fn boxed<A: Algorithm>() -> bool {
    !A::Storage::INLINE || faults::cells_boxed()
}

/// Whether a boxed cell of `A` is its own allocation's address (module docs).
#[inline(always)]
fn self_addressed<A: Algorithm>() -> bool {
    A::Storage::SELF_ADDRESSED
}

/// Bytes a line's cell owning `heap` heap bytes takes besides the line: none inline, the
/// allocation for a self-addressed cell (the cell is its first bytes), the box and what the
/// cell owns for a boxed one.
pub(in crate::keyed) fn held_bytes<A: Algorithm>(heap: usize) -> usize {
    if !boxed::<A>() {
        0
    } else if self_addressed::<A>() {
        heap
    } else {
        std::mem::size_of::<A::Cell>() + heap
    }
}

/// The word a line holds for `cell`, owning it from now on (see [`drop_cell`]).
pub(in crate::keyed) fn into_word<A: Algorithm>(cell: A::Cell) -> AddressWord {
    if self_addressed::<A>() {
        assert_eq!(std::mem::size_of::<A::Cell>(), std::mem::size_of::<*mut u8>());
        let cell = std::mem::ManuallyDrop::new(cell);
        // SAFETY: the cell is one pointer (`CellStorage::SELF_ADDRESSED`'s contract, its size
        // checked above); it is read out, and `cell` never dropped: the allocation's own copy
        // of the pointer owns it from now on.
        let address = unsafe { std::ptr::read((&raw const *cell).cast::<*mut u8>()) };
        AddressWord::from_ptr(address)
    } else if boxed::<A>() {
        AddressWord::from_ptr(Box::into_raw(Box::new(cell)))
    } else {
        // Relaxed: `cell` is ours alone; the line's Release store publishes the value.
        AddressWord::from_bits(as_word::<A>(&cell).load(Ordering::Relaxed))
    }
}

/// The cell of a held line whose word is `word`, having loaded `value` from it (not a marker).
///
/// # Safety
/// For a boxed cell, `value` is the address [`into_word`] made, loaded from a held line while
/// pinned (or under the shard's lock) by a caller that stays so while the reference lives: the
/// cell is dropped only after a grace period that began after its line was removed.
#[inline(always)]
pub(in crate::keyed) unsafe fn cell<A: Algorithm>(word: &AtomicAddressWord, value: AddressWord) -> &A::Cell {
    if boxed::<A>() {
        // SAFETY: the address `into_word` made, with its provenance, alive by the caller's
        // contract.
        unsafe { &*value.as_ptr::<A::Cell>() }
    } else {
        as_cell::<A>(word.as_u64())
    }
}

/// Drops the boxed cell a line's word held as `value` (nothing for an inline cell).
///
/// # Safety
/// `value` is an address [`into_word`] made, dropped once, when no check can reach it any more.
pub(in crate::keyed) unsafe fn drop_cell<A: Algorithm>(value: AddressWord) {
    if self_addressed::<A>() {
        // SAFETY: the allocation begins with the cell that owns it (`into_word`); read out, it
        // is dropped once, freeing the allocation, and no reference to it remains.
        drop(unsafe { std::ptr::read(value.as_ptr::<A::Cell>()) });
    } else if boxed::<A>() {
        // SAFETY: made by `Box::into_raw` (caller's contract), and no reference to it remains.
        drop(unsafe { Box::from_raw(value.as_ptr::<A::Cell>()) });
    }
}

/// The word as the table's cell, for an inline cell ([`CellStorage::INLINE`], which kova's own
/// storages, the only ones, keep with `inline_cell` `Some`: sealed, so this cannot fail).
#[inline(always)]
#[expect(clippy::unreachable, reason = "CellStorage is sealed, and kova's inline storages all return Some")]
fn as_cell<A: Algorithm>(word: &AtomicU64) -> &A::Cell {
    match A::Storage::inline_cell(word) {
        Some(cell) => cell,
        None => unreachable!("an inline storage without inline_cell"),
    }
}

/// The table's cell as the word it is (see [`as_cell`]).
#[inline(always)]
#[expect(clippy::unreachable, reason = "CellStorage is sealed, and kova's inline storages all return Some")]
fn as_word<A: Algorithm>(cell: &A::Cell) -> &AtomicU64 {
    match A::Storage::inline_word(cell) {
        Some(word) => word,
        None => unreachable!("an inline storage without inline_word"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnyAlgorithm, Gcra, ManualClock, Quota, SlidingWindowLog};

    #[test]
    fn word_algorithms_are_inline_and_the_others_boxed() {
        assert!(!boxed::<Gcra>());
        assert!(boxed::<SlidingWindowLog>());
        assert!(boxed::<AnyAlgorithm>());
        assert!(self_addressed::<SlidingWindowLog>());
        assert!(!self_addressed::<AnyAlgorithm>());
    }

    /// A log cell's word is the address of its one allocation, which begins with that address
    /// (the cell itself); the table counts that allocation and nothing more.
    #[test]
    fn a_log_cell_is_held_as_its_own_address() {
        let log = <SlidingWindowLog as Algorithm>::from_quota(Quota::per_second(3).unwrap()).unwrap();
        let value = into_word::<SlidingWindowLog>(log.new_cell());
        // SAFETY: the allocation `into_word` kept begins with a pointer (`CellStorage::SELF_ADDRESSED`'s contract).
        let first = unsafe { value.as_ptr::<*mut u8>().read() };
        assert_eq!(AddressWord::from_ptr(first), value);
        let handle = std::mem::size_of::<crate::cell::LogCell>();
        let heap = log.cell_bytes() - handle;
        assert_eq!(held_bytes::<SlidingWindowLog>(heap), heap);
        // A boxed cell is counted with its box.
        let any =
            AnyAlgorithm::new(crate::AlgorithmKind::SlidingWindowLog, Quota::per_second(3).unwrap()).unwrap();
        let any_heap = any.cell_bytes() - std::mem::size_of::<crate::cell::AnyCell>();
        assert_eq!(held_bytes::<AnyAlgorithm>(any_heap), any.cell_bytes());
        assert_eq!(held_bytes::<Gcra>(0), 0);
        // SAFETY: made just above, no reference to it remains.
        unsafe { drop_cell::<SlidingWindowLog>(value) };
    }

    /// A boxed cell round-trips through its word and is the same cell each time.
    #[test]
    fn a_boxed_cell_is_reached_through_its_word() {
        let clock = ManualClock::new();
        let log = <SlidingWindowLog as Algorithm>::from_quota(Quota::per_second(2).unwrap()).unwrap();
        let value = into_word::<SlidingWindowLog>(log.new_cell());
        let word = AtomicAddressWord::new(0);
        word.store_word(value, Ordering::Relaxed);
        // SAFETY: made just above, dropped below.
        let cell = unsafe { super::cell::<SlidingWindowLog>(&word, value) };
        assert!(log.decide_cell(cell, &clock, 2).is_allowed());
        // SAFETY: as above.
        let again = unsafe { super::cell::<SlidingWindowLog>(&word, value) };
        assert!(!log.decide_cell(again, &clock, 1).is_allowed());
        // SAFETY: the references above are no longer used.
        unsafe { drop_cell::<SlidingWindowLog>(value) };
    }
}
