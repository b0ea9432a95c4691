//! What the harness measures: anything that answers "may this key proceed?".
//!
//! kova's limiters, the peers ([`crate::peers`]) and the floors all implement [`Subject`], so one
//! measuring loop drives them all and the comparison is like for like.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use kova::striped::StripedLimiter;
use kova::{Algorithm, Clock as _, Keyed, RateLimiter, WordAlgorithm};

/// One decision per call.
pub trait Subject: Sync {
    /// Decides one request for `key` (ignored by direct limiters); true when admitted.
    ///
    /// Every implementation is `#[inline(always)]`, so that the measuring loop holds each
    /// subject's check inline, as a caller's code holds `check` (it is `#[inline]` and generic).
    /// Left to the compiler, kova's keyed `hit` stayed a call, and at 1M keys, where checks
    /// overlap their cache misses only as far as the CPU's reorder window reaches, the call
    /// cost it 22% of its throughput (10.82 against 13.87M/s, medians of 4 alternating
    /// `--filter keyed_1m_uniform` runs on the 2-core dev VM; governor's ran the same).
    fn hit(&self, key: u64) -> bool;

    /// How many keys the subject holds, for tables.
    fn keys(&self) -> Option<usize> {
        None
    }

    /// The bytes the table says it holds, for tables that report it.
    fn table_bytes(&self) -> Option<usize> {
        None
    }
}

/// A kova direct limiter (one cell shared by every caller) on its default coarse clock. Each
/// call reads what a server reads of the decision for its headers (`remaining`, `retry_after`)
/// beside `is_allowed`, so that a decision the compiler would build only in part for a bare
/// `is_allowed` is measured whole, as a dependent crate's handler sees it.
pub struct KovaDirect<A: Algorithm>(pub RateLimiter<A>);

impl<A: Algorithm> std::fmt::Debug for KovaDirect<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("KovaDirect").field(&self.0.algorithm().name()).finish()
    }
}

impl<A: Algorithm> Subject for KovaDirect<A> {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        let decision = self.0.check();
        std::hint::black_box((decision.remaining(), decision.retry_after()));
        decision.is_allowed()
    }
}

/// A kova striped direct limiter (per-thread stripes leasing batches from one central word)
/// with its default stripes, batch and lease, on its default coarse clock.
pub struct KovaStriped<W: WordAlgorithm>(pub StripedLimiter<W>);

impl<W: WordAlgorithm> std::fmt::Debug for KovaStriped<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KovaStriped")
            .field("algorithm", &W::NAME)
            .field("stripes", &self.0.stripes())
            .field("batch", &self.0.batch())
            .finish()
    }
}

impl<W: WordAlgorithm> Subject for KovaStriped<W> {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.0.check().is_allowed()
    }
}

/// A kova keyed limiter with `u64` keys on its default coarse clock.
pub struct KovaKeyed<A: Algorithm>(pub Keyed<u64, A>);

impl<A: Algorithm> std::fmt::Debug for KovaKeyed<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KovaKeyed").field("keys", &self.0.len()).finish()
    }
}

impl<A: Algorithm> Subject for KovaKeyed<A> {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        self.0.check(&key).is_allowed()
    }

    fn keys(&self) -> Option<usize> {
        Some(self.0.len())
    }

    fn table_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

/// The CAS floor: a bare `AtomicU64` compare-and-swap loop, the least a lock-free limiter that
/// writes on every admitted check can cost. Key `k` uses cell `k mod cells`, each on its own
/// cache line (key 0 for all threads is one hot word; one key per thread is no sharing).
#[derive(Debug)]
pub struct CasFloor {
    cells: Box<[CachePadded<AtomicU64>]>,
}

impl CasFloor {
    /// A floor with `cells` padded words (rounded up to a power of two).
    pub fn new(cells: usize) -> Self {
        let n = cells.max(1).next_power_of_two();
        CasFloor { cells: (0..n).map(|_| CachePadded::new(AtomicU64::new(0))).collect() }
    }
}

impl Default for CasFloor {
    fn default() -> Self {
        Self::new(64)
    }
}

impl Subject for CasFloor {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        let cell = &self.cells[key as usize & (self.cells.len() - 1)];
        // The same orderings as kova's hot path (Acquire load, AcqRel/Acquire CAS) so that the
        // floor costs what those instructions cost and nothing else.
        let mut old = cell.load(Ordering::Acquire);
        loop {
            match cell.compare_exchange_weak(old, old.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(actual) => old = actual,
            }
        }
    }
}

/// The deny floor's subject name.
pub const LOAD_FLOOR: &str = "floor_load";

/// The deny floor: what a denial must do at least, and nothing else. A limiter denies after it
/// has read its state and the time, and writes nothing: one `Acquire` load of a shared word
/// (as kova's check loads its cell) and one read of kova's coarse clock (one atomic load),
/// compared. The word holds the largest time, so every call is denied, as every check of the
/// deny scenario is.
#[derive(Debug)]
pub struct LoadFloor {
    word: CachePadded<AtomicU64>,
    clock: kova::CoarseClock,
}

impl Default for LoadFloor {
    fn default() -> Self {
        LoadFloor { word: CachePadded::new(AtomicU64::new(u64::MAX)), clock: kova::CoarseClock::new() }
    }
}

impl Subject for LoadFloor {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        // Acquire: the ordering kova's check loads its cell with, so that the floor costs what
        // that load costs.
        let until = self.word.load(Ordering::Acquire);
        self.clock.now_nanos() >= until
    }
}

/// The same CAS loop behind kova's pin (`kova::__bench_pin`, the keyed table's own epoch, as a
/// keyed check pins before it reads a line): the least a keyed check's synchronisation costs, and how
/// that scales with threads on this machine. Over cells as large as a table, the least a keyed
/// check that misses the cache can cost: a pin, then a CAS on a line fetched from memory.
#[derive(Debug, Default)]
pub struct PinnedCasFloor(CasFloor);

impl PinnedCasFloor {
    /// Padded cells filling at least `bytes` bytes (a power of two of them).
    pub fn with_bytes(bytes: usize) -> Self {
        PinnedCasFloor(CasFloor::new(bytes.div_ceil(std::mem::size_of::<CachePadded<AtomicU64>>())))
    }

    /// Bytes of its cells.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.0.cells)
    }
}

impl Subject for PinnedCasFloor {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        let _guard = kova::__bench_pin();
        self.0.hit(key)
    }
}

/// The random-read floor: one read of one word at a hashed position in an array as large as a
/// table, the least a table lookup that misses the cache can cost.
#[derive(Debug)]
pub struct ReadFloor {
    words: Box<[u64]>,
    shift: u32,
}

impl ReadFloor {
    /// An array of at least `bytes` bytes (rounded up to a power of two of 8-byte words), every
    /// page written so that reads really go to memory (untouched pages all map the zero page).
    pub fn new(bytes: usize) -> Self {
        let words = (bytes / 8).max(2).next_power_of_two();
        let shift = 64 - words.trailing_zeros();
        ReadFloor { words: (0..words as u64).collect(), shift }
    }

    /// The array's size in bytes.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

impl Subject for ReadFloor {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        // Fibonacci hashing spreads consecutive keys over the whole array, as a table's hash does.
        let index = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        std::hint::black_box(self.words[index]) != u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_count_and_read() {
        let cas = CasFloor::new(3);
        assert_eq!(cas.cells.len(), 4);
        for _ in 0..5 {
            assert!(cas.hit(1));
        }
        assert_eq!(cas.cells[1].load(Ordering::Relaxed), 5);
        assert_eq!(cas.cells[0].load(Ordering::Relaxed), 0);

        let pinned = PinnedCasFloor::with_bytes(1 << 20);
        assert!(pinned.bytes() >= 1 << 20 && pinned.bytes() < 2 << 20, "{} bytes", pinned.bytes());
        assert!(pinned.hit(7) && pinned.hit(7));
        assert_eq!(pinned.0.cells[7].load(Ordering::Relaxed), 2);

        let deny = LoadFloor::default();
        assert!(!deny.hit(0) && !deny.hit(1));

        let read = ReadFloor::new(1 << 20);
        assert_eq!(read.bytes(), 1 << 20);
        assert!((0..10_000).all(|k| read.hit(k)));
    }
}
