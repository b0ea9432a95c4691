//! The sketch's array of cells and the check on it (steps 1-4 of the module docs), for any
//! GCRA quota and any clock: the [`Sketch`](super::Sketch) and a keyed table's
//! [`TableFullPolicy::Sketch`](crate::keyed::TableFullPolicy::Sketch) both decide here.

use super::layout::{Line, Place, Subsets, LINE_BYTES, WORDS_PER_LINE};
use crate::cas::is_near_miss;
use crate::loom::atomic::Ordering;
use crate::loom::faults::{self, SketchRaise};
use crate::{Clock, Decision, Fallback, Gcra, WordAlgorithm};

/// A fixed array of GCRA cells (TATs), a key placed by its hash in one line.
///
/// The bound of the module docs holds per key whatever quota each key is checked under: its
/// proof uses only that cells never move back and that the key's own GCRA is monotone in its
/// state, so keys of several quotas may share cells (a key of a slow quota then over-charges
/// its neighbours more, never grants them more).
#[derive(Debug)]
pub(crate) struct Cells {
    lines: Box<[Line]>,
    line_mask: usize,
    subsets: Subsets,
}

impl Cells {
    /// `bytes / 64` lines of fresh cells, `cells` per key (both checked by the caller).
    pub(crate) fn new(bytes: usize, cells: u32) -> Self {
        let lines: Box<[Line]> = (0..bytes / LINE_BYTES).map(|_| Line::new()).collect();
        Cells { line_mask: lines.len() - 1, lines, subsets: Subsets::new(cells) }
    }

    /// Bytes of the cells.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val::<[Line]>(&self.lines)
    }

    /// Cells per key.
    pub(crate) fn cells_per_key(&self) -> u32 {
        self.subsets.cells()
    }

    /// The cells of the key hashed to `hash`, as indices into the whole array, ascending.
    pub(crate) fn indices(&self, hash: u64) -> Vec<usize> {
        let place = self.place(hash);
        (0..self.cells_per_key()).map(|i| place.line * WORDS_PER_LINE + place.position(i)).collect()
    }

    /// The earliest TAT among the cells of the key hashed to `hash`: never earlier than the
    /// key's own state (what a table seeds the key with when it finds room for it).
    #[expect(
        clippy::indexing_slicing,
        reason = "a place's line is hash & line_mask over lines.len() == line_mask + 1 (a power of two), and its positions are below WORDS_PER_LINE, each line's length"
    )]
    pub(crate) fn least(&self, hash: u64) -> u64 {
        let place = self.place(hash);
        let cells = &self.lines[place.line].0;
        // Acquire, as the check's loads: the TAT's writer read its clock before writing it.
        (0..self.cells_per_key()).map(|i| cells[place.position(i)].load(Ordering::Acquire)).min().unwrap_or(0)
    }

    #[inline(always)]
    fn place(&self, hash: u64) -> Place {
        self.subsets.place(hash, self.line_mask)
    }

    /// Steps 1-4 of the module docs: `cost` units (0: a peek; the caller checked the capacity)
    /// of the key hashed to `hash`, under `gcra`, at `clock`'s time.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        reason = "a place's line is hash & line_mask over lines.len() == line_mask + 1 (a power of two), and its positions are below WORDS_PER_LINE, each line's length"
    )]
    pub(crate) fn decide<C: Clock + ?Sized>(&self, gcra: &Gcra, clock: &C, hash: u64, cost: u64) -> Decision {
        let place = self.place(hash);
        let cells = &self.lines[place.line].0;
        let count = self.subsets.cells();
        // A failed commit means another check holds the line: a few spins let it finish.
        let backoff = crossbeam_utils::Backoff::new();
        // The near miss, as the one CAS loop has it (`cas.rs`): a denial within the clock's
        // possible lag of its retry time is decided again, once, on the precise time, and so is
        // every later step of this check.
        let mut precise = false;
        loop {
            // Acquire pairs with the Release half of the write that stored each TAT: its writer
            // read its clock before writing, so the clock read below is no older.
            let mut least = place.position(0);
            let mut base = cells[least].load(Ordering::Acquire);
            for i in 1..count {
                let position = place.position(i);
                let tat = cells[position].load(Ordering::Acquire);
                if tat < base {
                    (least, base) = (position, tat);
                }
            }
            let now = if precise { clock.now_nanos_precise() } else { clock.now_nanos() };
            let (decision, new) = gcra.decide(base, now, cost);
            let decision = decision.with_fallback(Fallback::Sketch);
            // A denial or a peek writes nothing.
            if new == base {
                if !precise && is_near_miss(clock, decision.retry_after_nanos()) {
                    precise = true;
                    continue;
                }
                return decision;
            }
            let raise = faults::sketch_raise();
            if raise != SketchRaise::AfterCommit {
                self.raise_others(place, least, new, raise);
            }
            // Success is AcqRel: Release publishes this TAT (and the raises before it) to the
            // next check that reads it, and makes the raises of a later check that reads it
            // happen after ours (the bound's proof in the module docs); Acquire for the clock, as
            // on the loads. Failure is Acquire as the loads, though the loop loads again anyway.
            match cells[least].compare_exchange_weak(base, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if raise == SketchRaise::AfterCommit {
                        self.raise_others(place, least, new, SketchRaise::BeforeCommit);
                    }
                    return decision;
                }
                Err(_) => backoff.spin(),
            }
        }
    }

    /// Raises the key's cells other than `decided` to at least `tat`.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "a place's line is hash & line_mask over lines.len() == line_mask + 1 (a power of two), and its positions are below WORDS_PER_LINE, each line's length"
    )]
    fn raise_others(&self, place: Place, decided: usize, tat: u64, raise: SketchRaise) {
        let cells = &self.lines[place.line].0;
        for i in 0..self.subsets.cells() {
            let position = place.position(i);
            if position == decided {
                continue;
            }
            if raise == SketchRaise::PlainStore {
                // RACY (loom's should-fail model only): may lower a cell another key raised.
                cells[position].store(tat, Ordering::Release);
            } else {
                // Always a read-modify-write, even when the cell is already later: the bound's
                // proof needs every write to a cell in the release sequence of the commit before
                // it. AcqRel: Release publishes the raise to the commit that reads it, Acquire
                // makes an earlier commit on this cell (whose release sequence this reads from)
                // happen before our own commit.
                cells[position].fetch_max(tat, Ordering::AcqRel);
            }
        }
    }
}
