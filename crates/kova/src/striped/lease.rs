//! The stripes' protocol, written once for every central word they lease from: a
//! [`StripedLimiter`](super::StripedLimiter)'s own word, and a hot key's slot in the keyed table
//! (`keyed/hot.rs`), whose word the table's lock holder can close.
//!
//! A stripe spends units it leased with a CAS of its own word; it takes a batch from the central
//! word with the algorithm's check, and gives back what it does not spend (a refund). Where the
//! central word can be closed (frozen by the lock holder, which folds the stripes back into the
//! key's state), a unit a stripe cannot give back because the word closed meanwhile is
//! *stranded*: [`Leased::stranded`] hands it to the caller, which gives it back under the lock.
//! So nothing is lost either way; see `Central::closed` for the race it catches.

use crossbeam_utils::CachePadded;

use super::stripe::{expired, older, pack, stamp_of, unpack, until_expiry, EMPTY, STAMP_UNIT_SHIFT};
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::{Decision, Fallback};

/// The word the stripes lease from.
pub(crate) trait Central {
    /// The algorithm's capacity (the `limit` of a decision spent from a stripe).
    fn capacity(&self) -> u64;

    /// Decides `cost` units on the central word; `None`, deciding nothing, when it is closed.
    fn decide(&self, cost: u64) -> Option<Decision>;

    /// Gives `units` back to the central word; `false`, changing nothing, when it is closed.
    fn give_back(&self, units: u64) -> bool;

    /// Whether the word is closed. Asked after a stripe took units back in: a close that swapped
    /// the stripes empty before that write would not have seen them. The closer closes the word
    /// *before* it empties the stripes (with AcqRel swaps), so a stripe write that follows the
    /// closer's swap of that stripe also sees the word closed, and the check takes its units out
    /// again as stranded. A word that never closes answers `false`.
    fn closed(&self) -> bool;
}

/// What a check on the stripes ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leased {
    /// The decision; `None` when the central word was closed before one was made.
    pub(crate) decision: Option<Decision>,
    /// Units taken from the central word that could not go back to it (it closed): the caller
    /// gives them back where the state went.
    pub(crate) stranded: u64,
}

impl Leased {
    fn decided(decision: Decision, stranded: u64) -> Self {
        Leased { decision: Some(decision), stranded }
    }

    fn closed(stranded: u64) -> Self {
        Leased { decision: None, stranded }
    }

    fn decided_or_closed(decision: Option<Decision>, stranded: u64) -> Self {
        Leased { decision, stranded }
    }
}

/// Stripes of one central word, each on its own cache line.
#[derive(Debug)]
pub(crate) struct Stripes {
    words: Box<[CachePadded<AtomicU64>]>,
    mask: usize,
    batch: u64,
    lease_units: u64,
}

impl Stripes {
    /// `count` empty stripes (a power of two), leasing `batch` units for `lease_units` stamp units.
    pub(crate) fn new(count: usize, batch: u64, lease_units: u64) -> Self {
        debug_assert!(count.is_power_of_two());
        Stripes {
            words: (0..count).map(|_| CachePadded::new(AtomicU64::new(EMPTY))).collect(),
            mask: count - 1,
            batch,
            lease_units,
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.words.len()
    }

    pub(crate) fn batch(&self) -> u64 {
        self.batch
    }

    pub(crate) fn lease_units(&self) -> u64 {
        self.lease_units
    }

    /// Bytes of the stripes' words (on the heap).
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words)
    }

    /// Stripe `index`'s word (tests).
    #[cfg(test)]
    pub(crate) fn word(&self, index: usize) -> &AtomicU64 {
        &self.words[index]
    }

    /// Units the stripes hold now.
    pub(crate) fn held(&self) -> u64 {
        // Relaxed: a count for a report.
        self.words.iter().map(|stripe| unpack(stripe.load(Ordering::Relaxed)).0).sum()
    }

    /// Decides `cost` units (at least 1, at most the capacity) on stripe `stripe` (taken modulo
    /// the count) at clock reading `now`.
    #[inline]
    #[expect(clippy::indexing_slicing, reason = "masked by mask, words.len() - 1 of a power-of-two count")]
    pub(crate) fn decide(&self, central: &impl Central, stripe: usize, now: u64, cost: u64) -> Leased {
        if cost > self.batch {
            return Leased::decided_or_closed(central_check(central, cost), 0);
        }
        let stripe = &self.words[stripe & self.mask];
        let now_stamp = stamp_of(now);
        // Relaxed on every access to a stripe that spends: it is a count changed only by
        // read-modify-writes, so no unit is spent twice whatever the ordering, and nothing else
        // is published through it (the units were taken from the central word by its own CAS).
        let mut word = stripe.load(Ordering::Relaxed);
        loop {
            let (units, stamp) = unpack(word);
            if units < cost || expired(stamp, now_stamp, self.lease_units) {
                return self.lease_and_decide(central, stripe, cost, now);
            }
            let new = pack(units - cost, stamp);
            if crate::loom::faults::stripe_cas_skipped() {
                stripe.store(new, Ordering::Relaxed);
                return Leased::decided(self.spent(central, units - cost, stamp, now_stamp), 0);
            }
            match stripe.compare_exchange_weak(word, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Leased::decided(self.spent(central, units - cost, stamp, now_stamp), 0),
                Err(actual) => word = actual,
            }
        }
    }

    /// An admission spent from a stripe, which holds `left` units stamped `stamp`.
    #[inline]
    fn spent(&self, central: &impl Central, left: u64, stamp: u64, now_stamp: u64) -> Decision {
        let until = until_expiry(stamp, now_stamp, self.lease_units) << STAMP_UNIT_SHIFT;
        Decision::allowed(central.capacity(), left, until).with_fallback(Fallback::StripeLease)
    }

    /// The stripe cannot pay `cost` (too few units, or its lease expired): give back what it
    /// holds if expired, take a batch from the central word, or decide on the central word.
    #[cold]
    #[inline(never)]
    fn lease_and_decide(&self, central: &impl Central, stripe: &AtomicU64, cost: u64, now: u64) -> Leased {
        let now_stamp = stamp_of(now);
        let expired_here = |stamp| expired(stamp, now_stamp, self.lease_units);
        let mut stranded = self.empty_stripe(central, stripe, expired_here).1;
        // An algorithm decides costs up to its capacity only: a central whose capacity is below
        // the batch (a keyed hot key with its own, smaller quota) leases nothing, and each check
        // is decided alone, exactly, below.
        if self.batch <= central.capacity() {
            let Some(lease) = central.decide(self.batch) else { return Leased::closed(stranded) };
            if lease.is_allowed() {
                let left = self.batch - cost;
                stranded += self.put_back(central, stripe, left, now_stamp);
                return Leased::decided(self.spent(central, left, now_stamp, now_stamp), stranded);
            }
        }
        // Less than a batch left: this check alone, exactly, on the central word.
        let Some(exact) = central.decide(cost) else { return Leased::closed(stranded) };
        if exact.is_allowed() {
            return Leased::decided(exact, stranded);
        }
        // Units parked in stripes whose lease has passed go back; then one more try.
        let mut returned = 0;
        for other in self.words.iter() {
            let (back, kept) = self.empty_stripe(central, other, expired_here);
            returned += back;
            stranded += kept;
        }
        if returned > 0 {
            return Leased::decided_or_closed(central_check(central, cost), stranded);
        }
        Leased::decided(exact.with_fallback(Fallback::StripeLease), stranded)
    }

    /// Adds `units` (leased at `stamp`) to `stripe` while it stays within a batch; what does not
    /// fit goes back to the central word. Returns the units stranded by a closed central word.
    pub(crate) fn put_back(&self, central: &impl Central, stripe: &AtomicU64, units: u64, stamp: u64) -> u64 {
        if units == 0 {
            return 0;
        }
        // Relaxed for a word that never closes (see `decide`); AcqRel where it can, so that
        // this write, if it follows a closer's swap of the stripe, also sees the word closed
        // (`Central::closed`).
        let mut word = stripe.load(Ordering::Relaxed);
        loop {
            let (held, held_stamp) = unpack(word);
            let new = if held == 0 {
                pack(units, stamp)
            } else if held + units <= self.batch {
                pack(held + units, older(held_stamp, stamp))
            } else {
                return if central.give_back(units) { 0 } else { units };
            };
            match stripe.compare_exchange_weak(word, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(actual) => word = actual,
            }
        }
        if !central.closed() {
            return 0;
        }
        // The word closed: whatever this stripe holds now was not folded back by the closer.
        self.take_all(stripe)
    }

    /// Empties `stripe` if it holds units whose stamp `give_up` accepts, giving them back to
    /// the central word; returns (units given back, units stranded by a closed word).
    fn empty_stripe(
        &self,
        central: &impl Central,
        stripe: &AtomicU64,
        give_up: impl Fn(u64) -> bool,
    ) -> (u64, u64) {
        // Relaxed: see `decide`.
        let mut word = stripe.load(Ordering::Relaxed);
        loop {
            let (units, stamp) = unpack(word);
            if units == 0 || !give_up(stamp) {
                return (0, 0);
            }
            match stripe.compare_exchange_weak(word, EMPTY, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) if central.give_back(units) => return (units, 0),
                Ok(_) => return (0, units),
                Err(actual) => word = actual,
            }
        }
    }

    /// Takes every unit `stripe` holds; returns how many.
    fn take_all(&self, stripe: &AtomicU64) -> u64 {
        // AcqRel: the closer's half of the handshake in `Central::closed` (a stripe write after
        // this swap reads from it, and sees the word closed before it).
        unpack(stripe.swap(EMPTY, Ordering::AcqRel)).0
    }

    /// The state without changing it: the central word's peek, with the units the stripes hold
    /// added to `remaining` (and then marked [`Fallback::StripeLease`]). `None` when closed.
    pub(crate) fn peek(&self, central: &impl Central) -> Option<Decision> {
        let decision = central.decide(0)?;
        let held = self.held();
        if held == 0 {
            return Some(decision);
        }
        let remaining = decision.remaining().saturating_add(held).min(decision.limit());
        Some(
            Decision::allowed(decision.limit(), remaining, decision.reset_after_nanos())
                .with_fallback(Fallback::StripeLease),
        )
    }

    /// Gives every stripe's units back to the central word now, whatever their lease; returns
    /// (units given back, units stranded by a closed word).
    pub(crate) fn flush(&self, central: &impl Central) -> (u64, u64) {
        self.words.iter().fold((0, 0), |(back, stranded), stripe| {
            let (b, s) = self.empty_stripe(central, stripe, |_| true);
            (back + b, stranded + s)
        })
    }

    /// Empties every stripe without giving anything back: the closer's step, after it closed
    /// the central word (`Central::closed`). Returns the units the stripes held.
    pub(crate) fn take_every(&self) -> u64 {
        self.words.iter().map(|stripe| self.take_all(stripe)).sum()
    }
}

/// A check of the central word alone: exact when allowed; a denial is marked, since units held
/// by stripes (or on their way back) might have admitted it. `None` when the word is closed.
pub(crate) fn central_check(central: &impl Central, cost: u64) -> Option<Decision> {
    let decision = central.decide(cost)?;
    Some(if decision.is_allowed() { decision } else { decision.with_fallback(Fallback::StripeLease) })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A central word of `units` units that closes after `open_for` decisions.
    struct Closing {
        units: Cell<u64>,
        open_for: Cell<u32>,
    }

    impl Central for Closing {
        fn capacity(&self) -> u64 {
            100
        }

        fn decide(&self, cost: u64) -> Option<Decision> {
            let open = self.open_for.get();
            if open == 0 {
                return None;
            }
            self.open_for.set(open - 1);
            let units = self.units.get();
            if units < cost {
                return Some(Decision::denied(100, units, 1, 1));
            }
            self.units.set(units - cost);
            Some(Decision::allowed(100, units - cost, 1))
        }

        fn give_back(&self, units: u64) -> bool {
            if self.open_for.get() == 0 {
                return false;
            }
            self.units.set(self.units.get() + units);
            true
        }

        fn closed(&self) -> bool {
            self.open_for.get() == 0
        }
    }

    /// A lease whose word closes before its leftover goes into the stripe: the leftover is
    /// handed to the caller, not left in the stripe of a closed word.
    #[test]
    fn units_put_back_after_the_word_closed_are_stranded_not_lost() {
        let stripes = Stripes::new(1, 5, 1 << 20);
        let central = Closing { units: Cell::new(20), open_for: Cell::new(1) };
        let leased = stripes.decide(&central, 0, 0, 2);
        assert_eq!(
            leased.decision.map(|d| (d.is_allowed(), d.fallback())),
            Some((true, Some(Fallback::StripeLease)))
        );
        assert_eq!(leased.stranded, 3, "the batch's leftover");
        assert_eq!(stripes.held(), 0, "nothing left in the stripe of a closed word");
        assert_eq!(central.units.get(), 15);
        // Closed: nothing decided, nothing taken.
        assert_eq!(stripes.decide(&central, 0, 0, 1), Leased { decision: None, stranded: 0 });
    }

    /// An expired lease whose word has closed is stranded too.
    #[test]
    fn an_expired_lease_of_a_closed_word_is_stranded() {
        let stripes = Stripes::new(1, 5, 1);
        let central = Closing { units: Cell::new(20), open_for: Cell::new(5) };
        assert_eq!(stripes.decide(&central, 0, 0, 1).stranded, 0);
        assert_eq!(stripes.held(), 4);
        central.open_for.set(0);
        let later = 4 << STAMP_UNIT_SHIFT;
        assert_eq!(stripes.decide(&central, 0, later, 1), Leased { decision: None, stranded: 4 });
        assert_eq!(stripes.held(), 0);
        assert_eq!(stripes.take_every(), 0);
    }
}
