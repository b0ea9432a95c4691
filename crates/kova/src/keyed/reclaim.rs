//! Grace periods: what a shard unlinked waits here until no check can still hold it.
//!
//! The lock holder retires removed lines and replaced arrays into the current batch; at the end
//! of its locked section it seals the batch with an epoch stamp (`epoch.rs`), or, where pins
//! skip their full barrier, with a ticket that a later heavy barrier turns into the stamp
//! (`barrier.rs`). Once an advance of the epoch returns two past the stamp, every check pinned
//! when the batch was unlinked has unpinned, so no check can reach the batch's lines or arrays.
//! The shard then frees or reuses them itself, under its lock. Collecting advances the epoch
//! only while something waits, so checks of a table that inserts nothing never see the epoch
//! move.
//!
//! In the loom build the epoch's atomics are loom's, so loom sees the whole chain from a check's
//! unpin to the line's reuse.

use std::collections::VecDeque;

use super::barrier::{self, Ticket};
use super::epoch::{self, Guard};
use crate::loom::faults;
use crate::loom::AddressWord;

/// Something replaced as a whole (a line array), freed after its grace period.
pub(super) trait Reclaimable {
    /// Bytes it holds.
    fn bytes(&self) -> usize;
}

/// A removed line waiting for its grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RetiredPlace {
    /// The line's position in the shard's array.
    pub(super) line: u32,
    /// Heap bytes its cell owns.
    pub(super) heap: usize,
    /// The word its cell was (a boxed cell's address: `line/cell.rs`).
    pub(super) cell: AddressWord,
}

/// A sealed batch's epoch stamp, or the ticket it waits on for one.
#[derive(Debug, Clone, Copy)]
enum Stamp {
    At(u64),
    Pending(Ticket),
}

/// One retired line and its batch.
#[derive(Debug)]
struct Queued {
    batch: u64,
    place: RetiredPlace,
}

/// A shard's retired lines and arrays (`I`: what it replaces as a whole), oldest first.
#[derive(Debug)]
pub(super) struct Retired<I> {
    lines: VecDeque<Queued>,
    arrays: VecDeque<(u64, I)>,
    /// Sealed batches, oldest first: (batch, epoch stamp). Tickets are taken in order, so a
    /// barrier that covers one covers every one before it.
    stamps: VecDeque<(u64, Stamp)>,
    /// How many of the oldest sealed batches have their epoch stamp: stamps are given oldest
    /// first, so these are a prefix of `stamps`, and the rest wait on tickets.
    stamped: usize,
    /// The batch being filled.
    current: u64,
    /// Whether the current batch holds anything.
    dirty: bool,
    /// Bytes of the retired arrays.
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
    /// Lines no check can reach any more.
    pub(super) places: Vec<RetiredPlace>,
    /// Bytes of the arrays it freed.
    pub(super) array_bytes: usize,
}

impl<I> Default for Retired<I> {
    fn default() -> Self {
        Retired {
            lines: VecDeque::new(),
            arrays: VecDeque::new(),
            stamps: VecDeque::new(),
            stamped: 0,
            current: 0,
            dirty: false,
            array_bytes: 0,
        }
    }
}

impl<I: Reclaimable> Retired<I> {
    /// Bytes one retired line takes in the queue.
    pub(super) const PLACE_BYTES: usize = std::mem::size_of::<Queued>();

    /// Retires a removed line.
    pub(super) fn place(&mut self, place: RetiredPlace) {
        self.lines.push_back(Queued { batch: self.current, place });
        self.dirty = true;
    }

    /// Retires a replaced array.
    pub(super) fn array(&mut self, array: I) {
        self.array_bytes += array.bytes();
        self.arrays.push_back((self.current, array));
        self.dirty = true;
    }

    /// Bytes of the replaced arrays waiting for their grace period.
    pub(super) fn array_bytes(&self) -> usize {
        self.array_bytes
    }

    /// Takes every retired line out of the queue, grace period or not: for a rehash, which
    /// hands them to the array it retires.
    pub(super) fn take_places(&mut self) -> Vec<RetiredPlace> {
        self.lines.drain(..).map(|r| r.place).collect()
    }

    /// Seals the current batch (if it holds anything) with `guard`'s epoch stamp.
    pub(super) fn seal(&mut self, guard: &Guard) {
        if !self.dirty {
            return;
        }
        let stamp =
            if barrier::asymmetric() { Stamp::Pending(barrier::ticket()) } else { Stamp::At(guard.stamp()) };
        if matches!(stamp, Stamp::At(_)) {
            // The protocol never changes, so a batch stamped at once follows only stamped ones.
            debug_assert_eq!(self.stamped, self.stamps.len());
            self.stamped += 1;
        }
        self.stamps.push_back((self.current, stamp));
        self.current += 1;
        self.dirty = false;
    }

    /// Stamps the sealed batches whose tickets a heavy barrier has covered, running one first
    /// (at most one) when the oldest is not covered and it is `urgent` or time for one.
    fn stamp_covered(&mut self, urgent: bool) {
        let mut ran = false;
        for (_, stamp) in self.stamps.range_mut(self.stamped..) {
            let Stamp::Pending(ticket) = *stamp else { continue };
            if !barrier::covers(ticket) {
                if ran || !barrier::run(ticket, urgent) {
                    break;
                }
                ran = true;
            }
            // The epoch read after the barrier completed (`covers` and `run` Acquire it).
            *stamp = Stamp::At(epoch::current());
            self.stamped += 1;
        }
    }

    /// Takes everything whose grace period has ended: the lines are returned (still holding
    /// their contents, for the caller to drop), the arrays are freed. `urgent`: the caller needs
    /// room now, so a batch waiting for a heavy barrier gets one at once.
    pub(super) fn collect(&mut self, guard: &Guard, urgent: bool) -> Ready {
        let mut done = None;
        self.stamp_covered(urgent);
        if let Some(&(_, Stamp::At(oldest))) = self.stamps.front() {
            // Advance the epoch only when the oldest batch needs it: an advance writes the line
            // every check's pin reads.
            let mut now = epoch::current();
            if !epoch::expired(oldest, now) {
                now = guard.advance();
            }
            while let Some(&(batch, stamp)) = self.stamps.front() {
                let Stamp::At(stamp) = stamp else { break };
                if !epoch::expired(stamp, now) && !faults::grace_periods_skipped() {
                    break;
                }
                done = Some(batch);
                self.stamps.pop_front();
                self.stamped -= 1;
            }
        }
        let mut ready = Ready { places: Vec::new(), array_bytes: 0 };
        let Some(done) = done else { return ready };
        while self.lines.front().is_some_and(|r| r.batch <= done) {
            if let Some(r) = self.lines.pop_front() {
                ready.places.push(r.place);
            }
        }
        let arrays_before = self.arrays.len();
        while self.arrays.front().is_some_and(|(batch, _)| *batch <= done) {
            if let Some((_, array)) = self.arrays.pop_front() {
                ready.array_bytes += array.bytes();
            }
        }
        self.array_bytes -= ready.array_bytes;
        // Give back queue room a burst left unused (a flood of removals while some check held a
        // grace period back), so that memory returns once the burst has passed.
        shrink(&mut self.lines);
        shrink(&mut self.stamps);
        faults::count_reclaimed(ready.places.len(), arrays_before - self.arrays.len());
        ready
    }

    /// Every retired line, sealed or not (for the shard's `Drop`, when no check can run); the
    /// arrays are freed.
    pub(super) fn drain_all(&mut self) -> impl Iterator<Item = RetiredPlace> + '_ {
        self.arrays.clear();
        self.stamps.clear();
        self.stamped = 0;
        self.array_bytes = 0;
        self.lines.drain(..).map(|r| r.place)
    }

    /// Heap bytes held here: the queues and the retired arrays.
    pub(super) fn bytes(&self) -> usize {
        self.lines.capacity() * std::mem::size_of::<Queued>()
            + self.arrays.capacity() * std::mem::size_of::<(u64, I)>()
            + self.stamps.capacity() * std::mem::size_of::<(u64, Stamp)>()
            + self.array_bytes
    }
}

#[cfg(all(test, not(kova_loom)))]
mod tests {
    use super::super::epoch::tests::{spawn_pinned_reader, ALIVE, DEAD};
    use super::*;
    use crate::loom::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

    /// A retired box: marked dead, then freed, when its grace period has ended.
    struct Boxed(*mut AtomicU64);

    impl Reclaimable for Boxed {
        fn bytes(&self) -> usize {
            std::mem::size_of::<AtomicU64>()
        }
    }

    impl Drop for Boxed {
        fn drop(&mut self) {
            // SAFETY: made by `Box::into_raw`, dropped once, after its grace period.
            unsafe {
                (*self.0).store(DEAD, Ordering::Relaxed);
                drop(Box::from_raw(self.0));
            }
        }
    }

    /// Readers pin and read a shared box while a writer replaces it and retires the old one
    /// through a shard's queue, sealed as a locked section seals it and collected as the next
    /// section collects (at once, as a section that needs room does, or only when a barrier is
    /// due): no reader may see a dead value. Where pins skip their full barrier (`barrier.rs`),
    /// this runs the tickets and the heavy barriers.
    #[test]
    fn a_retired_value_is_freed_only_after_its_readers_unpin() {
        let fresh = || Box::into_raw(Box::new(AtomicU64::new(ALIVE)));
        let shared = std::sync::Arc::new(AtomicPtr::new(fresh()));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let reader = spawn_pinned_reader(&shared, &stop);
        let mut retired = Retired::<Boxed>::default();
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        for round in 0..rounds {
            let guard = epoch::pin();
            // AcqRel: publishes the new box to the reader's Acquire, and takes the old one's
            // contents with it.
            retired.array(Boxed(shared.swap(fresh(), Ordering::AcqRel)));
            retired.seal(&guard);
            drop(guard);
            // One round in a hundred waits for a barrier that is due rather than urgent.
            let urgent = round % 100 != 0;
            while retired.array_bytes() > 0 {
                let guard = epoch::pin();
                let ready = retired.collect(&guard, urgent);
                assert!(ready.places.is_empty());
                drop(guard);
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
        // SAFETY: the reader has stopped.
        drop(unsafe { Box::from_raw(shared.load(Ordering::Relaxed)) });
    }
}
