//! Grace periods: what a shard unlinked waits here until no check can still hold it.
//!
//! The lock holder retires slots and replaced indexes into the current batch; at the end of its
//! locked section it seals the batch with a token, a `std::sync::Arc<()>` whose clone goes into
//! crossbeam-epoch's garbage (`Guard::defer`). crossbeam runs that deferred drop only after every
//! thread pinned at the time has unpinned, so once the shard holds the only reference again
//! (`Arc::get_mut`, an Acquire that pairs with the clone's Release drop), no check can reach the
//! batch's slots or indexes. The shard then frees or reuses them itself, under its lock.
//!
//! The token is `crate::sync`'s `Arc`: std's, or loom's in the loom build, where crossbeam-epoch
//! runs on loom too (`--cfg crossbeam_loom`: its collector lives and dies with each execution), so
//! loom sees the whole chain from a check's unpin to the slot's reuse. Only the handful of
//! pointers below are deferred: slots stay in their chunks and are dropped in place.

use std::collections::VecDeque;

use crossbeam_epoch::Guard;

use super::index::Index;
use crate::sync::Arc;

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
    /// Sealed batches, oldest first: (batch, token).
    tokens: VecDeque<(u64, Arc<()>)>,
    /// The batch being filled.
    current: u64,
    /// Whether the current batch holds anything.
    dirty: bool,
    /// Bytes of the retired indexes.
    index_bytes: usize,
}

/// Whether `kova::loom_racy::without_grace_periods` (a deliberately broken variant, for the
/// should-fail loom models) is in effect: [`Retired::collect`] then hands everything back at once,
/// grace period or not. Always false outside loom builds.
#[cfg(kova_loom)]
fn skip_grace_periods() -> bool {
    crate::loom_racy::grace_periods_skipped()
}

#[cfg(not(kova_loom))]
#[inline(always)]
fn skip_grace_periods() -> bool {
    false
}

/// Halves `queue`'s room when it uses under a quarter of it (and holds over 64 places).
fn shrink<T>(queue: &mut VecDeque<T>) {
    if queue.capacity() > 64 && queue.len() < queue.capacity() / 4 {
        queue.shrink_to(queue.capacity() / 2);
    }
}

/// What [`Retired::collect`] handed back.
pub(super) struct Ready {
    /// Slots no check can reach any more, with the heap bytes of their cells.
    pub(super) slots: Vec<(u32, usize)>,
    /// Bytes of the indexes it freed.
    pub(super) index_bytes: usize,
}

impl<I> Default for Retired<I> {
    fn default() -> Self {
        Retired {
            slots: VecDeque::new(),
            indexes: VecDeque::new(),
            tokens: VecDeque::new(),
            current: 0,
            dirty: false,
            index_bytes: 0,
        }
    }
}

impl<I: Reclaimable> Retired<I> {
    /// Retires `slot`, whose cell owns `heap` bytes on the heap.
    pub(super) fn slot(&mut self, slot: u32, heap: usize) {
        self.slots.push_back(RetiredSlot { batch: self.current, slot, heap });
        self.dirty = true;
    }

    /// Retires a replaced index.
    pub(super) fn index(&mut self, index: I) {
        self.index_bytes += index.bytes();
        self.indexes.push_back((self.current, index));
        self.dirty = true;
    }

    /// Bytes of the replaced indexes waiting for their grace period.
    pub(super) fn index_bytes(&self) -> usize {
        self.index_bytes
    }

    /// Takes every retired slot out of the queue, grace period or not, with its cell's heap
    /// bytes: for a layout that hands them to what it retires next.
    pub(super) fn take_slots(&mut self) -> Vec<(u32, usize)> {
        self.slots.drain(..).map(|r| (r.slot, r.heap)).collect()
    }

    /// Seals the current batch (if it holds anything) behind a token deferred on `guard`, and
    /// pushes the token to crossbeam's global queue.
    pub(super) fn seal(&mut self, guard: &Guard) {
        if !self.dirty {
            return;
        }
        let token = Arc::new(());
        let deferred = Arc::clone(&token);
        guard.defer(move || drop(deferred));
        // Not left in this thread's bag, which crossbeam moves to its global queue only when it
        // holds 64 functions: a thread that goes quiet after this section (a worker that served
        // one request) would hold the token back for as long as it stays quiet, and with it every
        // later batch of this shard (they are collected in order). At the key bound, every new
        // key waited for a slot, then got the table-full policy (about 1k inserts a second into
        // a full 65,536-key table filled by a thread that then blocked, same program and VM).
        // The price is a bag of crossbeam's per sealed batch (about 2 KB until collected, and
        // some 180 ns): an insert-and-remove loop of GCRA keys went from about 4.7M to 2.5M
        // cycles a second (a scratch program, 3 alternating runs, on the 2-core dev VM).
        guard.flush();
        self.tokens.push_back((self.current, token));
        self.current += 1;
        self.dirty = false;
    }

    /// Takes everything whose grace period has ended: the slots are returned (still holding
    /// their contents, for the caller to drop), the indexes are freed.
    pub(super) fn collect(&mut self) -> Ready {
        let mut done = None;
        while let Some((batch, token)) = self.tokens.front_mut() {
            // `get_mut` succeeds only when crossbeam has dropped the deferred clone; its Acquire
            // pairs with that drop's Release, after every check pinned at sealing time unpinned.
            if Arc::get_mut(token).is_none() && !skip_grace_periods() {
                break;
            }
            done = Some(*batch);
            self.tokens.pop_front();
        }
        let mut ready = Ready { slots: Vec::new(), index_bytes: 0 };
        let Some(done) = done else { return ready };
        while self.slots.front().is_some_and(|r| r.batch <= done) {
            if let Some(r) = self.slots.pop_front() {
                ready.slots.push((r.slot, r.heap));
            }
        }
        #[cfg(kova_loom)]
        let indexes_before = self.indexes.len();
        while self.indexes.front().is_some_and(|(batch, _)| *batch <= done) {
            if let Some((_, index)) = self.indexes.pop_front() {
                ready.index_bytes += index.bytes();
            }
        }
        self.index_bytes -= ready.index_bytes;
        // Give back queue room a burst left unused (a flood of removals while some check held a
        // grace period back), so that memory returns once the burst has passed.
        shrink(&mut self.slots);
        shrink(&mut self.tokens);
        #[cfg(kova_loom)]
        crate::loom_racy::count_reclaimed(ready.slots.len(), indexes_before - self.indexes.len());
        ready
    }

    /// Every retired slot, sealed or not (for the table's `Drop`, when no check can run).
    pub(super) fn drain_all(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.indexes.clear();
        self.tokens.clear();
        self.index_bytes = 0;
        self.slots.drain(..).map(|r| r.slot)
    }

    /// Heap bytes held here: the queues, the tokens and the retired indexes.
    pub(super) fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<RetiredSlot>()
            + self.indexes.capacity() * std::mem::size_of::<(u64, I)>()
            + self.tokens.capacity() * std::mem::size_of::<(u64, Arc<()>)>()
            // An `Arc<()>` allocation: the two counts.
            + self.tokens.len() * 2 * std::mem::size_of::<usize>()
            + self.index_bytes
    }
}
