//! [`PerThreadCounter`]: a statistic that many threads add to on a hot path without sharing a
//! cache line or a locked instruction.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use thread_local::ThreadLocal;

/// A sum kept in one part per thread: each thread adds to its own part with a plain load and
/// store (no other thread writes it), and a read adds the parts up. Each part on its own cache
/// line: `ThreadLocal` lays the threads' values side by side, and two threads writing
/// neighbouring values would pass one line back and forth.
#[derive(Debug, Default)]
pub(crate) struct PerThreadCounter {
    parts: ThreadLocal<CachePadded<AtomicU64>>,
}

impl PerThreadCounter {
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        let part = self.parts.get_or_default();
        // Relaxed, and no read-modify-write: this thread is the part's only writer; readers
        // take a statistic, ordered with nothing else.
        part.store(part.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    pub(crate) fn sum(&self) -> u64 {
        // Relaxed: read for reporting.
        self.parts.iter().map(|part| part.load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_from_many_threads_sum_up() {
        let counter = PerThreadCounter::default();
        std::thread::scope(|s| {
            for _ in 0..40 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counter.add(1);
                    }
                });
            }
        });
        assert_eq!(counter.sum(), 40_000);
    }
}
