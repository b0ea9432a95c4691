//! Deliberately racy variants of the core's CAS loop, compiled only under `--cfg kova_loom`.
//!
//! The loom models in `loom-tests/` run the same scenarios on these and expect loom to find an
//! interleaving that breaks them: the proof that the models can fail. They reproduce the two bug
//! classes the real loop rules out:
//! - [`check_cell_load_store`]: decide on a loaded word and write the result back with a plain
//!   store (check-then-act): two threads both spend the same tokens;
//! - [`check_cell_stale_retry`]: a CAS, but on failure it retries with the word it computed from
//!   the first read instead of deciding again (the stale write-back of leaky-bucket #39): a
//!   concurrent update is overwritten;
//! - [`refund_cell_load_store`]: the refund loop with a plain store;
//! - [`RacyTable`]: a keyed table whose insert of a new key is check-then-act;
//! - [`without_grace_periods`]: the real `Keyed` table, but a removed line or replaced array is
//!   handed back for reuse at the shard's next lock, without waiting for its epoch grace period
//!   (premature reuse: a check still holding the line reads or writes the next key's state).
//! - [`pinning_without_fence`]: the real `Keyed` table, but a check pins its thread with a plain
//!   store and no `SeqCst` fence: its probe can run before an advance of the epoch sees the pin,
//!   and read a line freed meanwhile.
//! - [`striped_take_load_store`]: a striped limiter whose checks spend a stripe's units with a
//!   load and a plain store (two checks spend one unit; a lease or give-back is overwritten).
//! - [`door_without_cas`]: a doorkeeper that takes a word by load and store (a key's entry is
//!   overwritten by another key's, and its second check is admitted as a first).
//! - [`door_admission_unchecked`]: a door admission without the lock that stands without
//!   checking the shard's insert count (an insert of the same key misses it: one unit too many).
//! - [`door_entry_kept`]: inserts that read a key's door entry without taking it (an admission
//!   that then undoes its claim is charged twice).
//! - [`door_mark_free`]: a taken mark that any key's claim may replace at once (an admission
//!   whose entry an insert took finds another key's entry when it undoes, and is charged twice).
//! - [`looking_without_freezing`]: the real `Keyed` table, but an eviction looks at a word
//!   cell with a plain load instead of freezing it (a check's write racing the look is lost).
//!
//! - [`sketch_raise_after_commit`]: a sketch that raises a key's other cells after its commit,
//!   not before (a second check of the key decides on a cell not yet raised).
//! - [`sketch_raise_by_store`]: a sketch that raises a key's other cells by plain stores, not
//!   `fetch_max` (a raise lowers a cell another key raised further).
//!
//! And two switches that are not racy: [`hiding_entries`] makes the table treat word cells like
//! the sliding log's (hide the line, and checks look again after writing), so that the models
//! of evictions cover that protocol too; [`boxed_cells`] keeps word cells boxed (frozen, not
//! hidden), as `AnyAlgorithm`'s word kinds are, where by default they are inline.
//!
//! Nothing here is reachable from a normal build.

use crate::loom::atomic::{AtomicU64, Ordering};
pub use crate::loom::faults::Reclaimed;
use crate::loom::faults::{self, Look, SketchRaise};
use crate::{CheckError, Clock, Decision, WordAlgorithm};

fn capacity_check<W: WordAlgorithm>(algorithm: &W, cost: u64) -> Result<(), CheckError> {
    let capacity = algorithm.capacity();
    if cost > capacity {
        return Err(CheckError::CostExceedsCapacity { cost, capacity });
    }
    Ok(())
}

/// RACY: load, decide, store. Loses updates and over-admits when two calls interleave.
pub fn check_cell_load_store<W: WordAlgorithm, C: Clock + ?Sized>(
    algorithm: &W,
    cell: &AtomicU64,
    clock: &C,
    cost: u64,
) -> Result<Decision, CheckError> {
    capacity_check(algorithm, cost)?;
    // Acquire/Release as in the real loop: the orderings are not the bug, the missing CAS is.
    let old = cell.load(Ordering::Acquire);
    let (decision, new) = algorithm.decide(old, clock.now_nanos(), cost);
    if new != old {
        cell.store(new, Ordering::Release);
    }
    Ok(decision)
}

/// RACY: CAS, but a failed CAS is retried with the word decided from the first read, against
/// the value that beat it (a stale write-back), instead of deciding again.
pub fn check_cell_stale_retry<W: WordAlgorithm, C: Clock + ?Sized>(
    algorithm: &W,
    cell: &AtomicU64,
    clock: &C,
    cost: u64,
) -> Result<Decision, CheckError> {
    capacity_check(algorithm, cost)?;
    // Orderings as in the real loop (see algorithm/word.rs); the bug is reusing `new`.
    let mut old = cell.load(Ordering::Acquire);
    let (decision, new) = algorithm.decide(old, clock.now_nanos(), cost);
    if new == old {
        return Ok(decision);
    }
    loop {
        match cell.compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(decision),
            Err(actual) => old = actual,
        }
    }
}

/// RACY: refund by load, compute, store (no CAS): a check racing it is overwritten, or the
/// refund is.
pub fn refund_cell_load_store<W: WordAlgorithm, C: Clock + ?Sized>(
    algorithm: &W,
    cell: &AtomicU64,
    clock: &C,
    cost: u64,
) -> bool {
    // Orderings as in the real loop; the missing CAS is the bug.
    let old = cell.load(Ordering::Acquire);
    let new = algorithm.refund(old, clock.now_nanos(), cost);
    if new != old {
        cell.store(new, Ordering::Release);
    }
    true
}

/// RACY: a tiny keyed table (a fixed array of `(key, cell)` slots, keys stored `+ 1` so 0 means
/// empty) whose insert of a new key is check-then-act: look the key up, and when it is absent
/// claim the first empty slot with plain stores, no lock and no CAS. Two threads inserting the
/// same new key both claim a slot (two entries) or the same slot (one's admission overwritten
/// by the other's fresh cell). Lookups of a present key use the real CAS loop, so only the
/// insert is broken. The loom table models run on it beside `Keyed` and must catch it.
#[derive(Debug)]
pub struct RacyTable<W, C> {
    algorithm: W,
    clock: C,
    slots: Box<[(AtomicU64, AtomicU64)]>,
}

impl<W: WordAlgorithm, C: Clock> RacyTable<W, C> {
    /// A table of `capacity` slots.
    pub fn new(algorithm: W, clock: C, capacity: usize) -> Self {
        let slots =
            (0..capacity).map(|_| (AtomicU64::new(0), AtomicU64::new(algorithm.fresh_word()))).collect();
        RacyTable { algorithm, clock, slots }
    }

    fn find(&self, key: u64) -> Option<&AtomicU64> {
        // Acquire: pairs with the Release store that published the key after its cell.
        self.slots.iter().find(|(k, _)| k.load(Ordering::Acquire) == key + 1).map(|(_, cell)| cell)
    }

    /// `check_n(key, cost)`; a peek of an absent key inserts nothing.
    pub fn check_n(&self, key: u64, cost: u64) -> Result<Decision, CheckError> {
        capacity_check(&self.algorithm, cost)?;
        if let Some(cell) = self.find(key) {
            return Ok(crate::Algorithm::decide_cell(&self.algorithm, cell, &self.clock, cost));
        }
        if cost == 0 {
            let fresh = AtomicU64::new(self.algorithm.fresh_word());
            return Ok(crate::Algorithm::decide_cell(&self.algorithm, &fresh, &self.clock, 0));
        }
        // RACY: nothing stops another thread between the lookup above and these stores.
        // Acquire as in `find`.
        let Some((slot_key, cell)) = self.slots.iter().find(|(k, _)| k.load(Ordering::Acquire) == 0) else {
            return Ok(Decision::denied(self.algorithm.capacity(), 0, 1, 0)
                .with_fallback(crate::Fallback::TableFullDenied));
        };
        // Relaxed: published by the Release store of the key just below.
        cell.store(self.algorithm.fresh_word(), Ordering::Relaxed);
        // Release: a reader that finds the key also sees the fresh cell.
        slot_key.store(key + 1, Ordering::Release);
        Ok(crate::Algorithm::decide_cell(&self.algorithm, cell, &self.clock, cost))
    }

    /// Forgets `key`; whether it was present.
    pub fn remove(&self, key: u64) -> bool {
        // Relaxed: no data is published by emptying a slot.
        self.slots
            .iter()
            .find(|(k, _)| k.load(Ordering::Relaxed) == key + 1)
            .map(|(k, _)| k.store(0, Ordering::Relaxed))
            .is_some()
    }

    /// Forgets every idle key; how many.
    pub fn sweep_idle(&self) -> usize {
        let now = self.clock.now_nanos();
        let mut swept = 0;
        for (k, cell) in self.slots.iter() {
            // Acquire as in `find`; Relaxed store as in `remove`.
            if k.load(Ordering::Acquire) != 0
                && self.algorithm.is_idle_word(cell.load(Ordering::Acquire), now)
            {
                k.store(0, Ordering::Relaxed);
                swept += 1;
            }
        }
        swept
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        // Relaxed: a count.
        self.slots.iter().filter(|(k, _)| k.load(Ordering::Relaxed) != 0).count()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// RACY: runs `f` (a loom model of `Keyed`) with the keyed table's grace periods switched off:
/// whatever a shard retired (lines of removed or evicted keys, replaced arrays) is handed back at
/// its next lock even though a check may still be reading it, so a line can be emptied and
/// refilled with another key under a check of the old one. Loom reports the accesses to the
/// line's key that no happens-before orders (a causality violation). The key's loom
/// `UnsafeCell` is what makes this visible: with plain memory loom does not see the check's
/// accesses conflict with the refill, never runs the refill between them, and the linearizability
/// check alone passes.
pub fn without_grace_periods<R>(f: impl FnOnce() -> R) -> R {
    faults::with_grace_periods_skipped(f)
}

/// RACY: runs `f` (a loom model of a [`RateLimiter`](crate::RateLimiter)'s reservations) with
/// a reset counted once, as done, before its cell changes: a reservation that reads the count
/// after that and takes its units from the cell the reset then wipes looks made after the reset,
/// and its cancel gives its units back to the fresh state.
pub fn reset_counted_once<R>(f: impl FnOnce() -> R) -> R {
    faults::with_reset_counted_once(f)
}

/// RACY: runs `f` (a loom model of a [`StripedLimiter`](crate::striped::StripedLimiter)) with checks
/// spending a stripe's units by load and store instead of a CAS: two checks on one stripe both
/// spend the same unit, and a lease or a give-back between the load and the store is overwritten.
pub fn striped_take_load_store<R>(f: impl FnOnce() -> R) -> R {
    faults::with_stripe_cas_skipped(f)
}

/// RACY: runs `f` (a loom model of a `Keyed` table with a doorkeeper) with the door taking an
/// expired word by a load and a plain store instead of a CAS: two keys of two shards that share
/// the word can both be admitted at the door, and the later store erases the first key's entry,
/// so its next check is admitted as a first check again.
pub fn door_without_cas<R>(f: impl FnOnce() -> R) -> R {
    faults::with_door_cas_skipped(f)
}

/// RACY: runs `f` (a loom model of a `Keyed` table with a doorkeeper) with a key's first check
/// admitted at the door without the lock whatever the shard's insert count says: an insert of
/// the same key under the lock, which read the door before the claim, publishes a fresh state
/// that does not count the admitted unit.
pub fn door_admission_unchecked<R>(f: impl FnOnce() -> R) -> R {
    faults::with_door_count_unchecked(f)
}

/// RACY: runs `f` (a loom model of a `Keyed` table with a doorkeeper) with inserts reading a
/// key's door entry without taking it: a first check admitted at the door without the lock,
/// whose claim an insert of its key charged, sees the insert's announcement, undoes the claim
/// and is charged again at the lock (one check, two units).
pub fn door_entry_kept<R>(f: impl FnOnce() -> R) -> R {
    faults::with_door_entry_kept(f)
}

/// RACY: runs `f` (a loom model of a `Keyed` table with a doorkeeper) with a door word's taken
/// mark free for any key's claim at once: a first check admitted at the door without the lock,
/// whose entry an insert of its key took (and charged), finds another key's entry in the word
/// when it undoes its claim, reads the claim as not taken and is charged again at the lock.
pub fn door_mark_free<R>(f: impl FnOnce() -> R) -> R {
    faults::with_door_mark_free(f)
}

/// RACY: runs `f` (a loom model of `KeyedLimits`) with a check's write on its key's boxed cell
/// taken to stand without looking at the key's line again (`Keyed::visit`): a sweep that judged
/// the cell idle and unlinked it loses the write, and the check's units are forgotten.
pub fn visit_without_relook<R>(f: impl FnOnce() -> R) -> R {
    faults::with_visit_relook_skipped(f)
}

/// RACY: runs `f` (a loom model of `Keyed`) with the keyed table's pins publishing their epoch
/// with a plain store and no fence. A lock holder's stamp and advance can then miss a check that
/// has already loaded the array it is retiring, and free it under the check: loom
/// reports the access as a causality violation.
pub fn pinning_without_fence<R>(f: impl FnOnce() -> R) -> R {
    faults::with_pin_fence_skipped(f)
}

/// Pins the calling model thread and tries once to advance the keyed tables' epoch, as a lock
/// holder collecting does (not racy): lets a model end a grace period between its operations.
pub fn advance_epoch() {
    crate::keyed::advance_epoch();
}

/// RACY: runs `f` (a loom model of `Keyed`) with evictions and quota changes looking at word
/// cells through a plain load, neither freezing the word nor hiding the entry, while checks still
/// trust their CAS as if the word could not have been looked at meanwhile. A check whose CAS
/// lands between the look and the unlink is lost with the line: the models' linearizability check
/// reports it.
pub fn looking_without_freezing<R>(f: impl FnOnce() -> R) -> R {
    faults::with_look(Look::LoadOnly, f)
}

/// Not racy: runs `f` with word cells boxed and unlinked the way other cells are (the line
/// hidden by `FROZEN`, and checks re-reading it after their write), so that the word-algorithm
/// models also check that protocol, which the sliding log relies on.
pub fn hiding_entries<R>(f: impl FnOnce() -> R) -> R {
    faults::with_look(Look::HideEntry, f)
}

/// Not racy: runs `f` with the keyed tables it builds keeping word cells boxed (the line holds
/// the cell's address, and the cell's own word is frozen before a look), as
/// [`AnyAlgorithm`](crate::AnyAlgorithm)'s word kinds are, instead of inline, so that the models
/// cover both ways a line holds a cell (`keyed/line/cell.rs`).
pub fn boxed_cells<R>(f: impl FnOnce() -> R) -> R {
    faults::with_cells_boxed(f)
}

/// Not racy: how many keys a one-shard table of `max_keys` keys holds before it first grows
/// its array, so that a model can fill it exactly and race the growth itself.
pub fn keys_before_first_growth(max_keys: usize) -> usize {
    crate::keyed::keys_before_first_growth(max_keys)
}

/// The running totals of what the keyed tables reclaimed on this OS thread (see [`Reclaimed`]).
pub fn reclaimed() -> Reclaimed {
    faults::reclaimed()
}

/// RACY (the composite's should-fail twin): a [`Limits`](crate::limits::Limits) of two limits checked
/// one word after the other and refunded on a denial (the protocol it uses across the two words
/// of three or four limits), instead of one 128-bit CAS: a concurrent check can be denied by units a check
/// that is itself denied holds for a moment, which the sequential composite would admit.
pub fn limits_chained<W: WordAlgorithm, C: Clock>(
    quotas: impl IntoIterator<Item = crate::Quota>,
    clock: C,
) -> Result<crate::limits::Limits<W, C>, crate::limits::LimitsError> {
    crate::limits::Limits::build(quotas, clock, true)
}

/// RACY: [`Reservation::cancel`](crate::reservation::Reservation::cancel) by load, compute, store (no CAS):
/// a check admitted between the load and the store is overwritten (its units given back).
pub fn cancel_load_store<W: WordAlgorithm, C: Clock>(
    reservation: crate::reservation::Reservation<'_, W, C>,
) -> u64 {
    let limiter = reservation.limiter;
    // Orderings as in the real loop; the missing CAS is the bug.
    let old = limiter.cell.load(Ordering::Acquire);
    let now = limiter.clock.now_nanos();
    if now > reservation.ready_at {
        return 0;
    }
    let (cost, mark, ready_at) = (reservation.cost, reservation.reserved_word, reservation.ready_at);
    let (back, new) = limiter.algorithm.cancel_reservation(old, now, cost, mark, ready_at);
    limiter.cell.store(new, Ordering::Release);
    back
}

/// RACY: runs `f` (a loom model of a `Keyed` table with hot keys) with a demotion that reads the
/// slot's central word without closing it: a check that leases a batch from the slot after the
/// read spends units the state written back into the line never counted.
pub fn hot_demote_without_close<R>(f: impl FnOnce() -> R) -> R {
    faults::with_hot_slot_left_open(f)
}

/// RACY: runs `f` with sketches raising a key's other cells after the commit instead of before.
pub fn sketch_raise_after_commit<R>(f: impl FnOnce() -> R) -> R {
    faults::with_sketch_raise(SketchRaise::AfterCommit, f)
}

/// RACY: runs `f` with sketches raising a key's other cells by plain stores instead of
/// `fetch_max`.
pub fn sketch_raise_by_store<R>(f: impl FnOnce() -> R) -> R {
    faults::with_sketch_raise(SketchRaise::PlainStore, f)
}
