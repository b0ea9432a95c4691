//! Sliding window log: the exact algorithm, one timestamp per admitted unit.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use super::{sealed, Algorithm, CellStorage};
use crate::cas::{is_near_miss, Precise};
use crate::loom::atomic::{fence, AtomicU64, Ordering};
use crate::{Clock, Decision, Quota, QuotaError};

/// Sliding window log: remembers the time of each of the last `limit` admitted units and admits
/// `cost` more only if fewer than `limit - cost + 1` of them fall in the last `period`. Exact: no
/// window of length `period` ever holds more than `limit` units.
///
/// - **For**: where the limit must hold in every window exactly (login attempts, payments), with
///   modest limits.
/// - **Memory per key**: `16 * limit + 40` bytes (a ring of `limit` slots, each a sequence word
///   and a timestamp, after a 32-byte header in the same allocation, and the 8-byte pointer to
///   it; a keyed table keeps the allocation alone): memory grows with the limit, as the seeds warn. `limit` is capped at
///   [`SlidingWindowLog::MAX_LIMIT`] (2^20 slots, 16 MiB per key).
/// - **Lock-free**: a CAS on the head counter reserves units, then the reserving thread writes
///   their slots. No lock, no waiting: a reader that meets a slot still being written treats that
///   unit as inside the window (denying, never over-admitting). That only happens when a writer
///   stalled for longer than a whole period between reserving and writing, or just after a
///   [`reset`](crate::RateLimiter::reset) that raced an admission.
///
/// # Layout
/// - `head`: `AtomicU64`, the number of units ever admitted. Unit `u` lives in slot `u % limit`.
/// - `floor`: `AtomicU64`, units below it were cleared by a reset.
/// - each slot: `seq` (`u + 1` once unit `u` is written, `u + 1` with the
///   [`SlidingWindowLog::WRITING`] flag while it is being written) and `time` (its timestamp in
///   nanoseconds, full width: no wrap-around).
///
/// Timestamps are non-decreasing in unit order: each reservation reads the clock after loading
/// the head it reserves from, and is clamped up to the newest written unit's time. So checking
/// the single unit that must have expired checks all the older ones.
///
/// ```
/// use std::time::Duration;
/// use kova::{ManualClock, Quota, RateLimiter, SlidingWindowLog};
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::<SlidingWindowLog, _>::with_clock(Quota::per_second(2)?, clock.clone())?;
/// assert!(limiter.check().is_allowed());
/// clock.advance(Duration::from_millis(600));
/// assert!(limiter.check().is_allowed());
/// let denied = limiter.check();
/// assert_eq!(denied.retry_after(), Duration::from_millis(400));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowLog {
    quota: Quota,
    limit: u64,
    period: u64,
}

/// The largest limit (ring length) accepted.
pub(crate) const MAX_LIMIT: u64 = 1 << 20;
/// The flag a slot's `seq` carries while unit `seq & !WRITING - 1` is being written.
pub(crate) const WRITING: u64 = 1 << 63;

/// One ring slot.
#[derive(Debug)]
struct Slot {
    seq: AtomicU64,
    time: AtomicU64,
}

/// The start of a [`LogCell`]'s allocation; the ring's slots follow it.
#[repr(C)]
struct Header {
    /// The allocation's own address: the handle that owns it, stored where the allocation
    /// begins, so that the allocation's address is itself a valid `&LogCell`.
    this: NonNull<Header>,
    /// Slots in the ring.
    len: usize,
    head: AtomicU64,
    floor: AtomicU64,
}

/// Where the first slot sits in a cell's allocation.
const SLOTS_AT: usize = std::mem::size_of::<Header>().next_multiple_of(std::mem::align_of::<Slot>());

/// The allocation of a cell with `len` slots.
#[expect(
    clippy::unreachable,
    reason = "len is at most MAX_LIMIT (from_quota), far below a size that overflows a Layout"
)]
fn ring_layout(len: usize) -> Layout {
    let align = std::mem::align_of::<Header>().max(std::mem::align_of::<Slot>());
    let size = len.checked_mul(std::mem::size_of::<Slot>()).and_then(|slots| slots.checked_add(SLOTS_AT));
    match size.map(|size| Layout::from_size_align(size, align)) {
        Some(Ok(layout)) => layout,
        // `len` is at most `MAX_LIMIT` (`from_quota`), far below any size that overflows.
        _ => unreachable!("a ring of {len} slots does not fit in memory"),
    }
}

/// The per-key state of a [`SlidingWindowLog`]: one heap allocation holding the head, the
/// floor and the ring, owned through one pointer.
///
/// The allocation begins with its own address, so a keyed table keeps the cell as that address
/// alone ([`CellStorage::SELF_ADDRESSED`]): a check reaches the ring in one hop.
#[repr(transparent)]
pub struct LogCell {
    header: NonNull<Header>,
}

// SAFETY: a `LogCell` owns its allocation; what threads share through it is atomics, and the
// header's other fields are written once, before the cell is handed out.
unsafe impl Send for LogCell {}
// SAFETY: as for `Send`: `&LogCell` only loads the immutable fields and uses the atomics.
unsafe impl Sync for LogCell {}

impl LogCell {
    /// A fresh cell of `len` slots (everything zero: nothing admitted).
    fn new(len: usize) -> LogCell {
        let layout = ring_layout(len);
        // SAFETY: the layout is not zero-sized (the header is in it).
        let Some(base) = NonNull::new(unsafe { alloc(layout) }) else { handle_alloc_error(layout) };
        let header = base.cast::<Header>();
        let zero = || AtomicU64::new(0);
        // SAFETY: `base` is a fresh allocation of `layout`: the header at its start and `len`
        // slots from `SLOTS_AT` are in bounds and aligned (`ring_layout`), and written once each
        // here, before anyone reads them.
        unsafe {
            header.write(Header { this: header, len, head: zero(), floor: zero() });
            let slots = base.add(SLOTS_AT).cast::<Slot>();
            for i in 0..len {
                slots.add(i).write(Slot { seq: zero(), time: zero() });
            }
        }
        LogCell { header }
    }

    fn header(&self) -> &Header {
        // SAFETY: the header was written in `new` and lives until `drop`.
        unsafe { self.header.as_ref() }
    }

    fn slots(&self) -> &[Slot] {
        let len = self.header().len;
        // SAFETY: `new` wrote `len` slots from `SLOTS_AT`; they live until `drop`. The pointer
        // is the allocation's own (`header` keeps its provenance), so it covers the slots.
        unsafe {
            std::slice::from_raw_parts(self.header.cast::<u8>().add(SLOTS_AT).cast::<Slot>().as_ptr(), len)
        }
    }

    fn head(&self) -> &AtomicU64 {
        &self.header().head
    }

    fn floor(&self) -> &AtomicU64 {
        &self.header().floor
    }
}

impl Drop for LogCell {
    fn drop(&mut self) {
        let len = self.header().len;
        let layout = ring_layout(len);
        // SAFETY: we own the allocation (a keyed table drops the cell once, when no check can
        // reach it); its header and slots were written in `new` and are dropped once here,
        // then the memory freed with the layout it was allocated with.
        unsafe {
            let base = self.header.cast::<u8>();
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                base.add(SLOTS_AT).cast::<Slot>().as_ptr(),
                len,
            ));
            std::ptr::drop_in_place(self.header.as_ptr());
            dealloc(base.as_ptr(), layout);
        }
    }
}

impl std::fmt::Debug for LogCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogCell")
            .field("head", self.head())
            .field("floor", self.floor())
            .field("slots", &self.slots())
            .finish()
    }
}

/// What a slot says about unit `u`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnitRead {
    /// Unit `u` is written, with this time.
    Written(u64),
    /// Unit `u` is reserved but not yet written.
    InFlight,
    /// The slot already holds a later unit: our head is stale.
    Overwritten,
}

/// A cell's ring as one attempt sees it: the slots of the units near a head, each found
/// without a division.
struct Ring<'c> {
    slots: &'c [Slot],
    /// The unit in slot 0 at or just below the head (a multiple of the ring's length).
    base: u64,
}

impl LogCell {
    /// The ring, for reading the units near `head`.
    fn ring(&self, head: u64) -> Ring<'_> {
        let slots = self.slots();
        Ring { slots, base: head - head % slots.len() as u64 }
    }
}

impl Ring<'_> {
    #[expect(clippy::indexing_slicing, reason = "each branch computes unit % len, below slots.len()")]
    fn slot(&self, unit: u64) -> &Slot {
        let len = self.slots.len() as u64;
        // `base` is a multiple of `len`, so each branch is `unit % len`: an attempt reads units
        // within one ring length of its head, in `[base - len, base + 2 * len)`.
        let offset = unit.wrapping_sub(self.base);
        let index = if offset < len {
            offset
        } else if offset.wrapping_add(len) < len {
            offset.wrapping_add(len)
        } else if offset - len < len {
            offset - len
        } else {
            unit % len
        };
        &self.slots[index as usize]
    }

    /// Reads unit `unit` with a seqlock-style double check of its sequence word.
    fn read(&self, unit: u64) -> UnitRead {
        let slot = self.slot(unit);
        // Acquire pairs with the writer's Release store of `seq`: seeing `unit + 1` means its
        // `time` store is visible too.
        // It also pairs with the Release store of the WRITING mark: seeing a later unit's mark
        // (or its final `seq`) means that unit's reservation is visible, so a retry re-reads a
        // newer head.
        let before = slot.seq.load(Ordering::Acquire);
        // The unit this slot holds or is being written with, plus one.
        let marker = before & !WRITING;
        if marker > unit + 1 {
            // A later unit took (or is taking) the slot: the caller's head is stale.
            return UnitRead::Overwritten;
        }
        if marker < unit + 1 || before & WRITING != 0 {
            return UnitRead::InFlight;
        }
        let time = slot.time.load(Ordering::Relaxed);
        // The Acquire fence keeps the `time` load above from moving below the second `seq` load,
        // so an unchanged `seq` proves `time` was not being rewritten meanwhile.
        fence(Ordering::Acquire);
        let after = slot.seq.load(Ordering::Relaxed);
        if after == before {
            UnitRead::Written(time)
        } else {
            UnitRead::Overwritten
        }
    }

    fn write(&self, unit: u64, time: u64) {
        let slot = self.slot(unit);
        // Release: a reader whose Acquire load sees this mark also sees the head CAS that
        // reserved `unit` (see `read`). The mark names the unit, so a reader looking for an older
        // unit of this slot knows it was overwritten, not still in flight.
        slot.seq.store(WRITING | (unit + 1), Ordering::Release);
        // The Release fence orders the WRITING mark before the new `time`: a reader that sees the
        // new time then sees `seq` changed on its second load and discards the read.
        fence(Ordering::Release);
        slot.time.store(time, Ordering::Relaxed);
        // Release: a reader that loads `unit + 1` (Acquire) also sees the time stored above.
        slot.seq.store(unit + 1, Ordering::Release);
    }
}

/// Outcome of one attempt at the head.
enum Attempt {
    Done(Decision),
    Retry,
}

impl SlidingWindowLog {
    /// The largest limit (ring length) accepted.
    pub const MAX_LIMIT: u64 = MAX_LIMIT;
    /// The flag a slot's `seq` carries while unit `seq & !WRITING - 1` is being written.
    pub const WRITING: u64 = WRITING;
}

impl SlidingWindowLog {
    fn expired(&self, time: u64, now: u64) -> bool {
        now.saturating_sub(time) >= self.period
    }

    /// Units of `[from, head)` whose time is inside the window at `now`, found by binary search
    /// over the time-ordered ring (in-flight units count as inside).
    fn in_window(&self, ring: &Ring<'_>, from: u64, head: u64, now: u64) -> u64 {
        let (mut lo, mut hi) = (from, head);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let inside = match ring.read(mid) {
                UnitRead::Written(t) => !self.expired(t, now),
                UnitRead::InFlight => true,
                UnitRead::Overwritten => false,
            };
            if inside {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        head - lo
    }

    /// Nanoseconds until every unit in `[from, head)` has expired.
    fn until_empty(&self, ring: &Ring<'_>, from: u64, head: u64, now: u64) -> u64 {
        if head <= from {
            return 0;
        }
        match ring.read(head - 1) {
            UnitRead::Written(t) => (t.saturating_add(self.period)).saturating_sub(now),
            UnitRead::InFlight => self.period,
            UnitRead::Overwritten => 0,
        }
    }

    /// Attempts until one decides.
    fn decide_log<C: Clock + ?Sized>(&self, cell: &LogCell, clock: &C, cost: u64) -> Decision {
        loop {
            if let Attempt::Done(decision) = self.attempt(cell, clock, cost) {
                return decision;
            }
        }
    }

    fn attempt<C: Clock + ?Sized>(&self, cell: &LogCell, clock: &C, cost: u64) -> Attempt {
        // Acquire pairs with the AcqRel head CAS of earlier reservations: their clock readings
        // happened before ours, so our reading is no older (for a monotonic clock).
        let head = cell.head().load(Ordering::Acquire);
        let floor = cell.floor().load(Ordering::Acquire).min(head);
        let ring = cell.ring(head);
        let mut now = clock.now_nanos();
        if head > floor {
            match ring.read(head - 1) {
                // Keep times non-decreasing even if the clock ran backwards.
                UnitRead::Written(t) => now = now.max(t),
                // Its time is not written yet, and may be a precise reading (a near miss decided
                // again) later than our coarse one, which can trail it by the clock's lag: the
                // precise time, read after our Acquire load of its reservation, is no earlier
                // (kova's precise time never runs backwards across threads, and a coarse reading
                // is an earlier precise one). So the times stay in unit order.
                UnitRead::InFlight => now = now.max(clock.now_nanos_precise()),
                UnitRead::Overwritten => return Attempt::Retry,
            }
        }
        let live_from = floor.max(head.saturating_sub(self.limit));
        let in_window = self.in_window(&ring, live_from, head, now);
        let remaining = self.limit - in_window;
        let reset = self.until_empty(&ring, live_from, head, now);
        if cost == 0 {
            return Attempt::Done(Decision::allowed(self.limit, remaining, reset));
        }
        // The slots we would overwrite hold units [head - limit, head + cost - limit): each must
        // be fully written (else a slow writer still owns it), and the newest of them — the one
        // that must have left the window — expired or cleared by a reset.
        let first_reused = head.saturating_sub(self.limit);
        let last_reused = head + cost; // exclusive, in units before subtracting the ring length
        for unit in (first_reused + self.limit..last_reused).map(|u| u - self.limit) {
            match ring.read(unit) {
                UnitRead::Written(time) => {
                    let is_newest = unit + 1 + self.limit == last_reused;
                    if is_newest && unit >= floor && !self.expired(time, now) {
                        let retry = self.period - now.saturating_sub(time);
                        return Attempt::Done(Decision::denied(self.limit, remaining, retry, reset));
                    }
                }
                UnitRead::InFlight => {
                    return Attempt::Done(Decision::denied(self.limit, remaining, self.period, reset));
                }
                UnitRead::Overwritten => return Attempt::Retry,
            }
        }
        // AcqRel: Acquire as for the load above; Release publishes our clock reading's place in
        // time to later reservations.
        if cell.head().compare_exchange(head, head + cost, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return Attempt::Retry;
        }
        for unit in head..head + cost {
            ring.write(unit, now);
        }
        let remaining = remaining.saturating_sub(cost);
        Attempt::Done(Decision::allowed(self.limit, remaining, self.period))
    }
}

/// The storage of the log's cells ([`Algorithm::Storage`]): each cell is its own address, so
/// a keyed table keeps it without a box.
#[derive(Debug)]
pub enum LogStorage {}

impl sealed::Sealed for LogStorage {}

// SAFETY: `LogCell` is `repr(transparent)` over the pointer to the allocation it owns, and the
// allocation begins with that pointer (`Header::this`, never written after `new`); not inline.
unsafe impl CellStorage<SlidingWindowLog> for LogStorage {
    const SELF_ADDRESSED: bool = true;
}

impl Algorithm for SlidingWindowLog {
    type Cell = LogCell;
    type Storage = LogStorage;

    fn name(&self) -> &'static str {
        "sliding_window_log"
    }

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        super::check_window_quota(&quota, "sliding_window_log", MAX_LIMIT)?;
        Ok(SlidingWindowLog { quota, limit: quota.limit(), period: quota.period_nanos() })
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn new_cell(&self) -> LogCell {
        // `limit` is at most `MAX_LIMIT` (`from_quota`), so it fits a `usize`.
        LogCell::new(self.limit as usize)
    }

    fn decide_cell<C: Clock + ?Sized>(&self, cell: &LogCell, clock: &C, cost: u64) -> Decision {
        let decision = self.decide_log(cell, clock, cost);
        // The near miss, as the word algorithms' loop has it (`cas.rs`).
        if is_near_miss(clock, decision.retry_after_nanos()) {
            return self.decide_log(cell, &Precise(clock), cost);
        }
        decision
    }

    fn refund_cell<C: Clock + ?Sized>(&self, _cell: &LogCell, _clock: &C, _cost: u64) -> bool {
        // Admitted units are timestamps other threads may already have counted; taking them
        // back is not supported.
        false
    }

    fn reset_cell(&self, cell: &LogCell) {
        // AcqRel on both: the floor must not fall behind a head we have seen (Acquire), and
        // readers that see the new floor see the head it was taken from (Release).
        let head = cell.head().load(Ordering::Acquire);
        cell.floor().fetch_max(head, Ordering::AcqRel);
    }

    fn is_idle(&self, cell: &LogCell, now: u64) -> bool {
        let head = cell.head().load(Ordering::Acquire);
        let floor = cell.floor().load(Ordering::Acquire);
        if head <= floor {
            return true;
        }
        matches!(cell.ring(head).read(head - 1), UnitRead::Written(t) if self.expired(t, now))
    }

    fn cell_bytes(&self) -> usize {
        std::mem::size_of::<LogCell>() + ring_layout(self.limit as usize).size()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ManualClock;

    fn log(limit: u64) -> SlidingWindowLog {
        SlidingWindowLog::from_quota(Quota::per_second(limit).unwrap()).unwrap()
    }

    /// A clock whose coarse reading trails its precise one, as the default clock's may.
    struct Lagging {
        coarse: AtomicU64,
        precise: AtomicU64,
    }

    impl Clock for Lagging {
        fn now_nanos(&self) -> u64 {
            self.coarse.load(Ordering::Relaxed)
        }

        fn now_nanos_precise(&self) -> u64 {
            self.precise.load(Ordering::Relaxed)
        }

        fn max_lag_nanos(&self) -> u64 {
            1_000_000
        }
    }

    /// A reservation still being written, decided on a precise time (a near miss decided again),
    /// and one after it decided on a coarse reading that trails that time: the later unit must
    /// not be stamped earlier, or a window later holds more than the limit (a check reusing the
    /// earlier-stamped unit sees it expired while the unit before it is still in the window).
    #[test]
    fn a_unit_after_one_in_flight_is_stamped_no_earlier() {
        const S: u64 = 1_000_000_000;
        let log = log(2);
        let cell = log.new_cell();
        let clock = Lagging { coarse: AtomicU64::new(0), precise: AtomicU64::new(0) };
        assert!(log.decide_cell(&cell, &clock, 2).is_allowed());
        // A reserves unit 2 on the precise time 1.0005 s and has not written it yet.
        assert!(cell.head().compare_exchange(2, 3, Ordering::AcqRel, Ordering::Relaxed).is_ok());
        let a_time = S + 500_000;
        // B decides on a coarse 1.0000 s while the precise time is 1.0006 s.
        clock.coarse.store(S, Ordering::Relaxed);
        clock.precise.store(S + 600_000, Ordering::Relaxed);
        assert!(matches!(log.attempt(&cell, &clock, 1), Attempt::Done(d) if d.is_allowed()));
        cell.ring(3).write(2, a_time);
        // At 2.0002 s unit 2 (1.0005 s) is still in the window beside B's unit: no room for 2.
        clock.coarse.store(2 * S + 200_000, Ordering::Relaxed);
        clock.precise.store(2 * S + 200_000, Ordering::Relaxed);
        let late = log.decide_cell(&cell, &clock, 2);
        assert!(!late.is_allowed(), "3 units in one window of a log of 2: {late:?}");
    }

    /// The ring wraps round many times, each window admitting exactly its limit.
    #[test]
    fn a_cell_reuses_its_ring_window_after_window() {
        let (log, clock) = (log(3), ManualClock::new());
        let cell = log.new_cell();
        for _ in 0..5 {
            for _ in 0..3 {
                assert!(log.decide_cell(&cell, &clock, 1).is_allowed());
            }
            assert!(!log.decide_cell(&cell, &clock, 1).is_allowed());
            clock.advance(Duration::from_secs(1));
        }
        assert_eq!(cell.head().load(Ordering::Relaxed), 15);
        assert!(log.is_idle(&cell, clock.now_nanos()));
        assert!(format!("{cell:?}").starts_with("LogCell { head: 15, floor: 0, slots: ["));
    }

    /// Checks from two threads share one cell (it is `Send` and `Sync`) and never admit more
    /// than the limit between them.
    #[test]
    fn threads_share_a_cell() {
        let (log, clock) = (log(8), ManualClock::new());
        let cell = log.new_cell();
        let admitted: u64 = std::thread::scope(|s| {
            let lanes: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| (0..6).filter(|_| log.decide_cell(&cell, &clock, 1).is_allowed()).count())
                })
                .collect();
            lanes.into_iter().map(|lane| lane.join().unwrap() as u64).sum()
        });
        assert_eq!(admitted, 8);
        log.reset_cell(&cell);
        assert!(log.decide_cell(&cell, &clock, 8).is_allowed());
    }

    /// A unit's slot found from the ring's base is the one `unit % len` names, near the head
    /// and far from it.
    #[test]
    fn a_units_slot_is_its_place_in_the_ring() {
        for len in [1, 3, 16] {
            let cell = LogCell::new(len);
            let len = len as u64;
            for head in [0, 1, len - 1, len, 5 * len + 2, 1 << 40] {
                let ring = cell.ring(head);
                for unit in head.saturating_sub(3 * len)..head + 3 * len {
                    let expected = &cell.slots()[(unit % len) as usize];
                    assert!(std::ptr::eq(ring.slot(unit), expected), "len {len}, head {head}, unit {unit}");
                }
            }
        }
    }

    /// A cell is one allocation: a header, then the ring's slots.
    #[test]
    fn a_cell_counts_its_header_and_ring() {
        let log = log(5);
        assert_eq!(std::mem::size_of::<LogCell>(), std::mem::size_of::<usize>());
        assert_eq!(
            log.cell_bytes(),
            std::mem::size_of::<LogCell>() + SLOTS_AT + 5 * std::mem::size_of::<Slot>()
        );
        assert_eq!(ring_layout(5).size(), SLOTS_AT + 80);
        let cell = log.new_cell();
        assert_eq!(cell.slots().len(), 5);
        // The allocation begins with its own address.
        assert_eq!(cell.header().this, cell.header);
    }
}
