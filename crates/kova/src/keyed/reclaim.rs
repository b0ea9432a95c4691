//! Grace periods: what a shard unlinked waits here until no check can still hold it.
//!
//! The lock holder retires slots and replaced indexes into the current batch; at the end of its
//! locked section it seals the batch with an epoch stamp (`epoch.rs`). Once an advance of the
//! epoch returns two past the stamp, every check pinned when the batch was unlinked has
//! unpinned, so no check can reach the batch's slots or indexes. The shard then frees or reuses
//! them itself, under its lock. Collecting advances the epoch only while something waits, so
//! checks of a table that inserts nothing never see the epoch move.
//!
//! In the loom build the epoch's atomics are loom's, so loom sees the whole chain from a check's
//! unpin to the slot's reuse. Slots stay in their chunks and are dropped in place.

use std::collections::VecDeque;

use super::epoch::{self, Guard};
use super::index::Index;
use crate::loom::faults;

/// Something replaced as a whole (an index, a line array), freed after its grace period.
pub(super) trait Reclaimable {
    /// Bytes it holds.
    fn bytes(&self) -> usize;
}

impl Reclaimable for Box<Index> {
    fn bytes(&self) -> usize {
        Index::bytes(self)
    }
}

/// One retired slot: its batch, the slot, and the heap bytes its cell owns.
#[derive(Debug)]
struct RetiredSlot {
    batch: u64,
    slot: u32,
    heap: usize,
}

/// A shard's retired slots and indexes (`I`: what its layout replaces as a whole), oldest first.
#[derive(Debug)]
pub(super) struct Retired<I> {
    slots: VecDeque<RetiredSlot>,
    indexes: VecDeque<(u64, I)>,
    /// Sealed batches, oldest first: (batch, epoch stamp).
    stamps: VecDeque<(u64, u64)>,
    /// The batch being filled.
    current: u64,
    /// Whether the current batch holds anything.
    dirty: bool,
    /// Bytes of the retired indexes.
    array_bytes: usize,
}

/// Halves `queue`'s room when it uses under a quarter of it (and holds over 64 places).
fn shrink<T>(queue: &mut VecDeque<T>) {
    if queue.capacity() > 64 && queue.len() < queue.capacity() / 4 {
        queue.shrink_to(queue.capacity() / 2);
    }
}

/// What [`Retired::collect`] handed back.
pub(super) struct Ready {
    /// Places (slots, or lines) no check can reach any more, with the heap bytes of their cells.
    pub(super) places: Vec<(u32, usize)>,
    /// Bytes of the arrays (indexes, or line arrays) it freed.
    pub(super) array_bytes: usize,
}

impl<I> Default for Retired<I> {
    fn default() -> Self {
        Retired {
            slots: VecDeque::new(),
            indexes: VecDeque::new(),
            stamps: VecDeque::new(),
            current: 0,
            dirty: false,
            array_bytes: 0,
        }
    }
}

impl<I: Reclaimable> Retired<I> {
    /// Retires the place `slot` (a slot, or a line), whose cell owns `heap` bytes on the heap.
    pub(super) fn place(&mut self, slot: u32, heap: usize) {
        self.slots.push_back(RetiredSlot { batch: self.current, slot, heap });
        self.dirty = true;
    }

    /// Retires a replaced array (an index, or a line array).
    pub(super) fn array(&mut self, index: I) {
        self.array_bytes += index.bytes();
        self.indexes.push_back((self.current, index));
        self.dirty = true;
    }

    /// Bytes of the replaced arrays waiting for their grace period.
    pub(super) fn array_bytes(&self) -> usize {
        self.array_bytes
    }

    /// Takes every retired place out of the queue, grace period or not, with its cell's heap
    /// bytes: for a layout that hands them to what it retires next.
    pub(super) fn take_places(&mut self) -> Vec<(u32, usize)> {
        self.slots.drain(..).map(|r| (r.slot, r.heap)).collect()
    }

    /// Seals the current batch (if it holds anything) with `guard`'s epoch stamp.
    pub(super) fn seal(&mut self, guard: &Guard) {
        if !self.dirty {
            return;
        }
        self.stamps.push_back((self.current, guard.stamp()));
        self.current += 1;
        self.dirty = false;
    }

    /// Takes everything whose grace period has ended: the slots are returned (still holding
    /// their contents, for the caller to drop), the indexes are freed.
    pub(super) fn collect(&mut self, guard: &Guard) -> Ready {
        let mut done = None;
        if let Some(&(_, oldest)) = self.stamps.front() {
            // Advance the epoch only when the oldest batch needs it: an advance writes the line
            // every check's pin reads.
            let mut now = epoch::current();
            if !epoch::expired(oldest, now) {
                now = guard.advance();
            }
            while let Some(&(batch, stamp)) = self.stamps.front() {
                if !epoch::expired(stamp, now) && !faults::grace_periods_skipped() {
                    break;
                }
                done = Some(batch);
                self.stamps.pop_front();
            }
        }
        let mut ready = Ready { places: Vec::new(), array_bytes: 0 };
        let Some(done) = done else { return ready };
        while self.slots.front().is_some_and(|r| r.batch <= done) {
            if let Some(r) = self.slots.pop_front() {
                ready.places.push((r.slot, r.heap));
            }
        }
        let indexes_before = self.indexes.len();
        while self.indexes.front().is_some_and(|(batch, _)| *batch <= done) {
            if let Some((_, index)) = self.indexes.pop_front() {
                ready.array_bytes += index.bytes();
            }
        }
        self.array_bytes -= ready.array_bytes;
        // Give back queue room a burst left unused (a flood of removals while some check held a
        // grace period back), so that memory returns once the burst has passed.
        shrink(&mut self.slots);
        shrink(&mut self.stamps);
        faults::count_reclaimed(ready.places.len(), indexes_before - self.indexes.len());
        ready
    }

    /// Every retired slot, sealed or not (for the table's `Drop`, when no check can run).
    pub(super) fn drain_all(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.indexes.clear();
        self.stamps.clear();
        self.array_bytes = 0;
        self.slots.drain(..).map(|r| r.slot)
    }

    /// Heap bytes held here: the queues and the retired indexes.
    pub(super) fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<RetiredSlot>()
            + self.indexes.capacity() * std::mem::size_of::<(u64, I)>()
            + self.stamps.capacity() * std::mem::size_of::<(u64, u64)>()
            + self.array_bytes
    }
}
