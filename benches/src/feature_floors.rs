//! The floors of the composites: what their compare-and-swaps cost with nothing else around
//! them, so that a composite's row can be set against the least its protocol could cost.
//!
//! - [`Cas128Floor`]: a bare loop of one 128-bit compare-and-swap (portable-atomic's, as kova's
//!   two-limit composite uses) that writes both halves: the floor of `limits_2`.
//! - [`TwoLinkFloor`]: a bare 128-bit compare-and-swap loop, then a second bare loop on another
//!   word (64-bit for three limits, 128-bit for four): the floor of an admission by check then
//!   refund over two links, limits 0 and 1 in one 128-bit word and the rest in a second
//!   (`limits_3`, `limits_4`).
//!
//! Every thread shares the same words, as the composites' rows share one composite.

use crossbeam_utils::CachePadded;
use portable_atomic::AtomicU128;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::subject::Subject;

/// A word a floor raises by one (each half, for a 128-bit word) with a bare CAS loop.
pub trait Raise: Default + Sync {
    /// One CAS loop: load, then compare-and-swap until it lands.
    fn raise(&self);
}

impl Raise for AtomicU128 {
    #[inline(always)]
    fn raise(&self) {
        // The orderings of kova's CAS loop (Acquire load, AcqRel/Acquire CAS), so that the floor
        // costs what those instructions cost and nothing else.
        let mut old = self.load(Ordering::Acquire);
        let step = 1u128 | (1u128 << 64);
        while let Err(actual) =
            self.compare_exchange_weak(old, old.wrapping_add(step), Ordering::AcqRel, Ordering::Acquire)
        {
            old = actual;
        }
    }
}

impl Raise for AtomicU64 {
    #[inline(always)]
    fn raise(&self) {
        // Orderings: as above.
        let mut old = self.load(Ordering::Acquire);
        while let Err(actual) =
            self.compare_exchange_weak(old, old.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire)
        {
            old = actual;
        }
    }
}

/// One 128-bit word, both halves raised by one per call.
#[derive(Debug, Default)]
pub struct Cas128Floor(CachePadded<AtomicU128>);

impl Subject for Cas128Floor {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.0.raise();
        true
    }
}

/// A 128-bit word, then a second word (`W`) on its own line, each raised by its own CAS loop.
#[derive(Debug, Default)]
pub struct TwoLinkFloor<W: Raise> {
    first: CachePadded<AtomicU128>,
    second: CachePadded<W>,
}

impl<W: Raise> Subject for TwoLinkFloor<W> {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.first.raise();
        self.second.raise();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_raises_every_word_once() {
        let pair = Cas128Floor::default();
        let three = TwoLinkFloor::<AtomicU64>::default();
        let four = TwoLinkFloor::<AtomicU128>::default();
        for _ in 0..5 {
            assert!(pair.hit(0) && three.hit(0) && four.hit(0));
        }
        let both = 5 | (5 << 64);
        assert_eq!(pair.0.load(Ordering::Relaxed), both);
        assert_eq!((three.first.load(Ordering::Relaxed), three.second.load(Ordering::Relaxed)), (both, 5));
        assert_eq!((four.first.load(Ordering::Relaxed), four.second.load(Ordering::Relaxed)), (both, both));
    }
}
