//! Hot keys ([`KeyedBuilder::hot_keys`](super::KeyedBuilder::hot_keys)): a key whose word is
//! contended moves into one of a fixed number of *hot slots*, whose central word its checks
//! lease batches from through stripes on their own cache lines (`striped/lease.rs`, the
//! protocol of [`StripedLimiter`](crate::striped::StripedLimiter)).
//!
//! # Protocol
//! A hot key's line word holds a *hot marker*, [`marker`]`(slot)`: one of the values just below
//! `VACANT`, which `word.rs`'s CAS loop stops at like every marker (so ordinary keys pay
//! nothing), and which the hit path then reads, on its cold branch, as the slot to decide on.
//! The slot names its key by hash, so a real state that happens to equal a marker is not read as
//! one (it is decided under the lock, like any word at or above `MARKERS`).
//!
//! The shard's lock holder does every change:
//! - **promote**: take a free slot, freeze the line's word (a swap of `FROZEN`, as before any
//!   look: a check's CAS landed before, and is in the value swapped out, or fails and finds the
//!   marker), write the state into the slot's central word and the key's hash into the slot,
//!   then publish the marker with Release (a check that loads it sees both).
//! - **demote** (before anything reads or writes the key's state under the lock, and when it
//!   cools): *close* the slot by swapping `FROZEN` into its central word (a check's lease CAS
//!   came before and is in the value, or fails and goes to the lock), then swap every stripe
//!   empty, fold those units back into the state (a refund), and store the state into the
//!   line's word with Release. A check that put units back into a stripe after that swap also
//!   sees the slot closed and hands them in under the lock (`lease.rs`'s `Central::closed`),
//!   so no unit is lost. The slot is reused only after the table's epoch grace period, so a
//!   check still pinned on the marker never decides on another key's slot.

use std::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::epoch::{self, Guard};
use super::word::{self, HOT_BASE, MARKERS, MAX_HOT_KEYS, VACANT};
use crate::cell::CellStorage;
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::Mutex;
use crate::striped::lease::{Central, Stripes};
use crate::striped::StripedError;
use crate::striped::{StripeShape, DEFAULT_LEASE};
use crate::{Algorithm, Clock, Decision};

/// The marker of slot `slot`.
pub(super) fn marker(slot: usize) -> u64 {
    debug_assert!(slot < MAX_HOT_KEYS);
    HOT_BASE + slot as u64
}

/// The slot a line word marks, if it is a hot marker.
#[inline(always)]
pub(super) fn slot_of(word: u64) -> Option<usize> {
    (HOT_BASE..VACANT).contains(&word).then(|| (word - HOT_BASE) as usize)
}

/// How a keyed table stripes its hot keys: see [`KeyedBuilder::hot_keys`](super::KeyedBuilder::hot_keys).
///
/// ```
/// use kova::keyed::HotKeys;
/// let hot = HotKeys::new(8).stripes(4).batch(16).lease(std::time::Duration::from_millis(5));
/// assert_eq!(hot.max_hot(), 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct HotKeys {
    max_hot: usize,
    stripes: Option<usize>,
    batch: Option<u64>,
    lease: Duration,
    promote_after: u32,
}

/// The default [`HotKeys::promote_after`]: failed compare-exchanges of one key's word within one
/// [`CONTENTION_WINDOW`].
pub const DEFAULT_PROMOTE_AFTER: u32 = 32;
/// The window failed compare-exchanges are counted in, as a power of two of nanoseconds (about
/// a millisecond).
const CONTENTION_WINDOW_SHIFT: u32 = 20;
/// The window contention is counted in (see [`HotKeys::promote_after`]).
pub const CONTENTION_WINDOW: Duration = Duration::from_nanos(1 << CONTENTION_WINDOW_SHIFT);

impl HotKeys {
    /// At most `max_hot` keys striped at once (from 1 to [`MAX_HOT_KEYS`]), with the striped
    /// limiter's default stripes, batch and lease.
    pub fn new(max_hot: usize) -> Self {
        HotKeys {
            max_hot,
            stripes: None,
            batch: None,
            lease: DEFAULT_LEASE,
            promote_after: DEFAULT_PROMOTE_AFTER,
        }
    }

    /// Stripes per hot key: a power of two, at most [`MAX_STRIPES`](crate::striped::MAX_STRIPES).
    pub fn stripes(self, stripes: usize) -> Self {
        HotKeys { stripes: Some(stripes), ..self }
    }

    /// Units a stripe takes from the hot key's central word at once (at most the capacity).
    pub fn batch(self, batch: u64) -> Self {
        HotKeys { batch: Some(batch), ..self }
    }

    /// How long a stripe keeps leased units before they are given back.
    pub fn lease(self, lease: Duration) -> Self {
        HotKeys { lease, ..self }
    }

    /// A key is striped once checks of it see `failures` compare-exchanges of its word fail
    /// (another check wrote it first) within one [`CONTENTION_WINDOW`] (at least 1, else
    /// [`StripedError::PromoteAfter`]; default [`DEFAULT_PROMOTE_AFTER`]). Keys whose hashes share
    /// a counter add up.
    pub fn promote_after(self, failures: u32) -> Self {
        HotKeys { promote_after: failures, ..self }
    }

    /// The most keys striped at once.
    pub fn max_hot(&self) -> usize {
        self.max_hot
    }

    /// The checked shape for an algorithm of `capacity`.
    pub(super) fn checked(&self, capacity: u64) -> Result<(HotKeys, StripeShape), StripedError> {
        if self.max_hot == 0 || self.max_hot > MAX_HOT_KEYS {
            return Err(StripedError::HotSlots { max_hot: self.max_hot, max: MAX_HOT_KEYS });
        }
        if self.promote_after == 0 {
            return Err(StripedError::PromoteAfter { failures: 0 });
        }
        Ok((*self, StripeShape::checked(capacity, self.stripes, self.batch, self.lease)?))
    }
}

/// A word algorithm's refund on a plain word: `(algorithm, word, now, units) -> word`.
pub(super) type RefundWord<A> = fn(&A, u64, u64, u64) -> u64;

/// One hot key's place: its central word (on its own cache line, written once per lease), the
/// key's hash and the stripes (read by every check of the key).
struct Slot {
    central: CachePadded<AtomicU64>,
    hash: AtomicU64,
    stripes: Stripes,
    /// The central word as the last sweep saw it (`quiet`): written by sweeps only.
    seen: AtomicU64,
}

/// Which slots are free: never used or past their grace period, or waiting for it.
#[derive(Default)]
struct Registry {
    free: Vec<usize>,
    /// Demoted slots and the epoch stamp of their demotion.
    waiting: Vec<(usize, u64)>,
}

/// The table's hot slots.
pub(super) struct HotSlots<A> {
    slots: Box<[Slot]>,
    registry: Mutex<Registry>,
    refund: RefundWord<A>,
    /// Failed compare-exchanges per hash (by its high bits: the low ones pick the shard), each
    /// a window stamp over a count (`note`).
    contention: Box<[AtomicU64]>,
    promote_after: u32,
}

impl<A> fmt::Debug for HotSlots<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HotSlots").field("slots", &self.slots.len()).finish_non_exhaustive()
    }
}

/// A slot's central word as the stripes see it: closed once frozen.
pub(super) struct SlotCentral<'a, A, C: ?Sized> {
    algorithm: &'a A,
    word: &'a AtomicU64,
    clock: &'a C,
    refund: RefundWord<A>,
}

impl<A: Algorithm, C: Clock + ?Sized> Central for SlotCentral<'_, A, C> {
    fn capacity(&self) -> u64 {
        self.algorithm.capacity()
    }

    #[inline]
    fn decide(&self, cost: u64) -> Option<Decision> {
        // `word.rs`'s loop, which stops at `FROZEN`: the slot is closing.
        let cell = A::Storage::inline_cell(self.word)?;
        word::decide(self.algorithm, cell, self.clock, cost)
    }

    fn give_back(&self, units: u64) -> bool {
        // The one CAS loop (`cas.rs`), whose writes this one joins; it stops at a marker.
        let refund = |word: u64, now: u64| {
            if word >= MARKERS {
                None
            } else {
                Some((true, (self.refund)(self.algorithm, word, now, units)))
            }
        };
        crate::cas::update(self.word, self.clock, refund, |_| {}).unwrap_or(false)
    }

    fn closed(&self) -> bool {
        // Acquire: after a stripe write that read from the closer's swap of that stripe (AcqRel
        // both), the closer's freeze of this word, which came first, is visible.
        self.word.load(Ordering::Acquire) >= MARKERS
    }
}

impl<A: Algorithm> HotSlots<A> {
    /// `max_hot` free slots of the given shape.
    pub(super) fn new(hot: HotKeys, shape: StripeShape, refund: RefundWord<A>) -> Self {
        let slots = (0..hot.max_hot)
            .map(|_| Slot {
                central: CachePadded::new(AtomicU64::new(word::FROZEN)),
                hash: AtomicU64::new(0),
                stripes: Stripes::new(shape.stripes, shape.batch, shape.lease_units),
                seen: AtomicU64::new(word::FROZEN),
            })
            .collect();
        let registry = Registry { free: (0..hot.max_hot).rev().collect(), waiting: Vec::new() };
        let counters = (4 * hot.max_hot).next_power_of_two().max(64);
        HotSlots {
            slots,
            registry: Mutex::new(registry),
            refund,
            contention: (0..counters).map(|_| AtomicU64::new(0)).collect(),
            promote_after: hot.promote_after,
        }
    }

    /// Bytes of the slots, their stripes, the contention counters and the registry: fixed when
    /// the table is built.
    pub(super) fn bytes(&self) -> usize {
        let stripes: usize = self.slots.iter().map(|slot| slot.stripes.bytes()).sum();
        std::mem::size_of_val(&*self.slots)
            + stripes
            + std::mem::size_of_val(&*self.contention)
            + 2 * self.slots.len() * std::mem::size_of::<(usize, u64)>()
    }

    /// Counts a failed compare-exchange of the word of the key of `hash` at `now`; `true` when
    /// the count within the current window reaches the threshold (once per window).
    #[expect(
        clippy::indexing_slicing,
        reason = "masked by contention.len() - 1, a power of two of at least 64"
    )]
    pub(super) fn note(&self, hash: u64, now: u64) -> bool {
        let counter = &self.contention[(hash >> 32) as usize & (self.contention.len() - 1)];
        let stamp = (now >> CONTENTION_WINDOW_SHIFT) & u64::from(u32::MAX);
        // Relaxed, and a load and a store: a hint; an increment lost to a race only delays a
        // promotion.
        let word = counter.load(Ordering::Relaxed);
        let count = if word >> 32 == stamp { (word & u64::from(u32::MAX)) + 1 } else { 1 };
        counter.store((stamp << 32) | count, Ordering::Relaxed);
        count == u64::from(self.promote_after)
    }

    /// Whether no stripe leased from `slot` (its central word unchanged) since the last call:
    /// the key has cooled. Called by sweeps, under the key's shard lock.
    #[expect(
        clippy::indexing_slicing,
        reason = "a slot index is one this table handed out (a marker it wrote, or its free list), below slots.len()"
    )]
    pub(super) fn quiet(&self, slot: usize) -> bool {
        let place = &self.slots[slot];
        // Relaxed: a heuristic comparison; the demotion that may follow closes the word itself.
        let now = place.central.load(Ordering::Relaxed);
        place.seen.swap(now, Ordering::Relaxed) == now
    }

    /// The slot `word` marks for the key of `hash`, if it is one: the slot holds that hash and
    /// is open. A closed slot keeps the hash of its last key, and a key's own state can equal a
    /// marker (a clock near the end of its range): read as the slot's, such a state would be
    /// demoted a second time, the slot freed twice.
    #[inline]
    pub(super) fn owned(&self, word: u64, hash: u64) -> Option<usize> {
        let slot = slot_of(word)?;
        let place = self.slots.get(slot)?;
        // Relaxed both: written before the marker's Release store, which the caller's load of
        // `word` read (Acquire) or which the lock it holds orders. A slot closing after this
        // read is found closed by the stripes' own protocol (`decide` answers `None`).
        let open = place.central.load(Ordering::Relaxed) != word::FROZEN;
        (open && place.hash.load(Ordering::Relaxed) == hash).then_some(slot)
    }

    /// The central word of `slot` as the stripes see it.
    #[expect(
        clippy::indexing_slicing,
        reason = "a slot index is one this table handed out (a marker it wrote, or its free list), below slots.len()"
    )]
    pub(super) fn central<'a, C: Clock + ?Sized>(
        &'a self,
        slot: usize,
        algorithm: &'a A,
        clock: &'a C,
    ) -> SlotCentral<'a, A, C> {
        SlotCentral { algorithm, word: &self.slots[slot].central, clock, refund: self.refund }
    }

    /// Decides `cost` units for the key in `slot` on the calling thread's stripe (cost 0: a
    /// peek). `None` when the slot is closed: the key is being demoted.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        reason = "a slot index is one this table handed out (a marker it wrote, or its free list), below slots.len()"
    )]
    pub(super) fn decide<C: Clock + ?Sized>(
        &self,
        slot: usize,
        algorithm: &A,
        clock: &C,
        cost: u64,
    ) -> crate::striped::lease::Leased {
        let central = self.central(slot, algorithm, clock);
        let stripes = &self.slots[slot].stripes;
        if cost == 0 {
            return crate::striped::lease::Leased { decision: stripes.peek(&central), stranded: 0 };
        }
        stripes.decide(&central, crate::striped::thread_index(), clock.now_nanos(), cost)
    }

    /// Moves the state in `line` (a held key's inline word, of `hash`) into a free slot; the
    /// caller holds the key's shard lock. Returns the slot, or `None` when every slot is in use
    /// or waiting, or the state looks like a marker (it stays where it is).
    #[expect(
        clippy::indexing_slicing,
        reason = "a slot index is one this table handed out (a marker it wrote, or its free list), below slots.len()"
    )]
    pub(super) fn promote(&self, line: &AtomicU64, hash: u64, guard: &Guard) -> Option<usize> {
        let slot = self.take_free(guard)?;
        // AcqRel: a freeze (`word.rs`): a check's CAS came before, and is in `state`, or fails
        // and finds the marker.
        let state = line.swap(word::FROZEN, Ordering::AcqRel);
        if state >= MARKERS {
            // Release: as a thaw.
            line.store(state, Ordering::Release);
            self.registry.lock().unwrap_or_else(|e| e.into_inner()).free.push(slot);
            return None;
        }
        let place = &self.slots[slot];
        debug_assert_eq!(place.stripes.held(), 0);
        // Relaxed both: published by the marker's Release store below.
        place.hash.store(hash, Ordering::Relaxed);
        place.central.store(state, Ordering::Relaxed);
        // Never a state the slot's word holds while open: the first sweep only records.
        place.seen.store(word::FROZEN, Ordering::Relaxed);
        // Release: a check that loads the marker (Acquire) sees the slot's hash and state.
        line.store(marker(slot), Ordering::Release);
        Some(slot)
    }

    /// Moves the state of the key in `slot` back into `line` (its inline word, which holds the
    /// slot's marker); the caller holds the key's shard lock, and the slot waits for a grace
    /// period before it is reused.
    #[expect(
        clippy::indexing_slicing,
        reason = "a slot index is one this table handed out (a marker it wrote, or its free list), below slots.len()"
    )]
    pub(super) fn demote<C: Clock + ?Sized>(
        &self,
        slot: usize,
        line: &AtomicU64,
        algorithm: &A,
        clock: &C,
        guard: &Guard,
    ) {
        let place = &self.slots[slot];
        // AcqRel: closes the slot (module docs): Acquire to see what the winning lease CAS saw,
        // Release so that a stripe write after our stripe swaps sees the slot closed.
        let mut state = place.central.swap(word::FROZEN, Ordering::AcqRel);
        if crate::loom::faults::hot_slot_left_open() {
            // The racy variant: the state read without closing the slot.
            place.central.store(state, Ordering::Relaxed);
        }
        let units = place.stripes.take_every();
        if units > 0 {
            state = (self.refund)(algorithm, state, clock.now_nanos(), units);
        }
        // Release: a check that loads the state (Acquire) sees what its writers saw.
        line.store(state, Ordering::Release);
        let stamp = guard.stamp();
        self.registry.lock().unwrap_or_else(|e| e.into_inner()).waiting.push((slot, stamp));
    }

    /// A free slot, first freeing those whose grace period has ended.
    #[expect(
        clippy::indexing_slicing,
        reason = "a slot index is one this table handed out (a marker it wrote, or its free list), below slots.len()"
    )]
    fn take_free(&self, guard: &Guard) -> Option<usize> {
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if registry.free.is_empty() && !registry.waiting.is_empty() {
            let mut now = epoch::current();
            if registry.waiting.iter().all(|&(_, stamp)| !epoch::expired(stamp, now)) {
                now = guard.advance();
            }
            let Registry { free, waiting } = &mut *registry;
            waiting.retain(|&(slot, stamp)| {
                let done = epoch::expired(stamp, now) || crate::loom::faults::grace_periods_skipped();
                if done {
                    free.push(slot);
                }
                !done
            });
        }
        let slot = registry.free.pop()?;
        // Units stranded by a check that raced the last demotion were handed in by it (it saw
        // the slot closed); nothing is left for the new key to spend.
        debug_assert_eq!(self.slots[slot].stripes.held(), 0);
        Some(slot)
    }

    /// Keys striped now (a snapshot).
    pub(super) fn in_use(&self) -> usize {
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        self.slots.len() - registry.free.len() - registry.waiting.len()
    }
}
