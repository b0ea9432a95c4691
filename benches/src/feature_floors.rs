//! The floors of the composites: what their compare-and-swaps cost with nothing else around
//! them, so that a composite's row can be set against the least its protocol could cost.
//!
//! - [`Cas128Floor`]: a bare loop of one 128-bit compare-and-swap (portable-atomic's, as kova's
//!   two-limit composite uses) that writes both halves: the floor of `limits_2`.
//! - [`CasChainFloor`]: `N` bare 64-bit compare-and-swap loops on `N` words, one after the
//!   other: the floor of an admission by check then refund over `N` limits (`limits_3`).
//!
//! Every thread shares the same words, as the composites' rows share one composite.

use crossbeam_utils::CachePadded;
use portable_atomic::AtomicU128;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::subject::Subject;

/// One 128-bit word, both halves raised by one per call.
#[derive(Debug, Default)]
pub struct Cas128Floor(CachePadded<AtomicU128>);

impl Subject for Cas128Floor {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        // The orderings of kova's CAS loop (Acquire load, AcqRel/Acquire CAS), so that the floor
        // costs what those instructions cost and nothing else.
        let mut old = self.0.load(Ordering::Acquire);
        let step = 1u128 | (1u128 << 64);
        loop {
            match self.0.compare_exchange_weak(
                old,
                old.wrapping_add(step),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => old = actual,
            }
        }
    }
}

/// `N` words, each raised by one per call by its own CAS loop.
#[derive(Debug)]
pub struct CasChainFloor<const N: usize>([CachePadded<AtomicU64>; N]);

impl<const N: usize> Default for CasChainFloor<N> {
    fn default() -> Self {
        CasChainFloor(std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))))
    }
}

impl<const N: usize> Subject for CasChainFloor<N> {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        for cell in &self.0 {
            // Orderings: as above.
            let mut old = cell.load(Ordering::Acquire);
            while let Err(actual) =
                cell.compare_exchange_weak(old, old.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire)
            {
                old = actual;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_raises_every_word_once() {
        let pair = Cas128Floor::default();
        let chain = CasChainFloor::<3>::default();
        for _ in 0..5 {
            assert!(pair.hit(0) && chain.hit(0));
        }
        assert_eq!(pair.0.load(Ordering::Relaxed), 5 | (5 << 64));
        assert!(chain.0.iter().all(|c| c.load(Ordering::Relaxed) == 5));
    }
}
