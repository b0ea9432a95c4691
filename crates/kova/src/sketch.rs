//! A sketch: per-key GCRA limits in fixed memory, no keys stored, never more admitted than a key's
//! own limit.
//!
//! For keys too many to store (every IPv6 /64, every forged API key): a fixed array of word cells,
//! allocated once, each key hashed to a few of them. Collisions make keys share cells, and a
//! shared cell holds the charges of every key on it, so a collision can only **over-charge** a
//! key (deny it early, report less remaining, a longer retry), **never over-grant**.
//!
//! ```
//! use kova::sketch::Sketch;
//! use kova::{Fallback, ManualClock, Quota};
//!
//! // 10 per second per client IP, bursts of 2, in 64 KiB whatever the number of clients.
//! let clock = ManualClock::new();
//! let sketch = Sketch::builder(Quota::per_second(10)?.with_burst(2)?).clock(clock.clone()).build()?;
//! assert_eq!(sketch.memory_bytes(), 64 * 1024);
//! let client = "2001:db8:1:2::/64";
//! assert!(sketch.check(client).is_allowed());
//! assert!(sketch.check(client).is_allowed());
//! let denied = sketch.check(client);
//! assert!(!denied.is_allowed());
//! assert_eq!(denied.fallback(), Some(Fallback::Sketch));
//! assert!(sketch.check("198.51.100.7").is_allowed());
//! clock.advance(std::time::Duration::from_millis(100));
//! assert!(sketch.check(client).is_allowed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How a check works
//! Each cell is one GCRA word: a theoretical arrival time (TAT), the instant the cell would be full
//! again. A key's hash chooses one 64-byte line of the array (8 cells) and, within it, `d`
//! distinct cells ([`SketchBuilder::cells_per_key`], default 2): a check touches one cache line.
//! Every cell a key maps to is kept at least as consumed (a TAT at least as late) as the key's
//! own state, so the least consumed of them is the tightest bound the sketch has (a count-min
//! sketch with conservative update, over TATs instead of counts). A check of `cost` units:
//! 1. loads the key's cells and takes the one with the earliest TAT, `b`;
//! 2. decides on `b` with GCRA's pure [`decide`](crate::WordAlgorithm::decide): a denial (or a
//!    peek, cost 0) returns here and writes nothing; an admission gives the new TAT `n > b`;
//! 3. raises each other cell of the key to at least `n` (`fetch_max`);
//! 4. commits: a compare-and-swap of the decided cell from `b` to `n`, the linearization point.
//!    If the cell moved meanwhile, the check decides again from step 1 (the raises it made stay:
//!    an over-charge, never a grant).
//!
//! # The bound
//! **For every key, the sequence of its checks that the sketch admits, taken in the order of
//! their commits, is admitted in full by GCRA run on that sequence alone** (the same quota, the
//! same costs, each at the time its check read the clock). So over any interval of length `L` a
//! key is admitted at most `burst + L / T` units (`T` the quota's interval per unit), exactly
//! [`Gcra`]'s bound: the sketch's over-grant is zero units, under any interleaving
//! of threads and any collisions. Everything a collision or contention changes is on the
//! denying side.
//!
//! Why: cells only move forward (every write is a `fetch_max` or a compare-and-swap to a later
//! TAT), and GCRA is monotone in its state (a later TAT never admits what an earlier one denies,
//! and yields a later new TAT). Take two admitted checks `X`, `Y` of one key, committing on cells
//! `x` and `y` from `b_X`, `b_Y` to `n_X`, `n_Y`. Each raised the other's cell before committing,
//! and every write to a cell is a read-modify-write, all `AcqRel`. On cell `x`, `Y`'s write
//! (raise, or commit if `y = x`) is either before `X`'s commit, so `b_X >= n_Y`, or after it;
//! then, if `y = x`, `b_Y >= n_X`; otherwise `Y`'s raise read from `X`'s commit's release
//! sequence, so `X`'s raise of `y` happens before `Y`'s commit on `y`, so `b_Y >= n_X`. Hence one
//! of any two saw the other (`b_X >= n_Y` or `b_Y >= n_X`, never both as `n > b`), which orders
//! the admitted checks by `b`, each decided on a TAT no earlier than the exact state after those
//! before it: by monotonicity, the exact GCRA admits it too, and its TAT stays no later than the
//! cells'. (`tests/sketch.rs` checks this against per-key GCRA on random workloads; the loom
//! models in `loom-tests/tests/sketch.rs` check it for one key and for two colliding keys in
//! every interleaving up to 3 preemptions, and fail on the variants that raise after the commit
//! or by plain stores; the `sketch` fuzz target checks it on arbitrary workloads.)
//!
//! Raising the other cells *before* the commit is what makes it hold: raised after it, a second
//! check of the same key could read a cell not yet raised as the least consumed and commit on it,
//! admitting on a state that misses the first check.
//!
//! # Which algorithms
//! GCRA alone. Deciding on the least consumed cell and raising the others needs states in one
//! total order, the same at every `now`, that only move forward along it, with the decision
//! monotone in it. GCRA's TAT is such an order (the number itself). The token bucket is GCRA in
//! another form (a count that refills with time is not ordered the same at every `now`; its TAT
//! form is). The fixed window's word is ordered by (window, count) only while the window index
//! does not wrap (it is kept modulo 2^32) and no clock reads behind the stored window (which it
//! counts in the stored window). The sliding window counter weighs the previous window by the
//! time elapsed, so two of its states compare differently at different times; the sliding log is
//! not a word.
//!
//! # Sizing
//! A key is over-charged only while each of its `d` cells is shared with another key *live* in
//! the same span (a GCRA key is live while its TAT is ahead of the clock: for `burst * T` after
//! its last admission at full use, less after lighter use), and is falsely denied only when those
//! keys' use takes its cells past the burst. With `m` bytes there are `L = m / 64` lines; with `n`
//! keys live at once, the other live keys in a key's line number about `k ~ Poisson(n / L)`, each
//! on a given cell with chance `d / 8`, so the share of keys over-charged at all is about
//! (a blocked Bloom filter's false-positive rate)
//!
//! `P(d) = E_k[(1 - (1 - d/8)^k)^d]`, `k ~ Poisson(n * 64 / m)`
//!
//! | live keys per line (`n * 64 / m`) | d = 1 | d = 2 | d = 3 | d = 4 |
//! |---|---:|---:|---:|---:|
//! | 0.25 | 3.1% | 1.8% | 1.7% | 2.1% |
//! | 0.5 | 6.1% | 3.9% | 4.0% | 5.2% |
//! | 1 | 11.8% | 8.8% | 10.0% | 13.2% |
//! | 2 | 22.1% | 20.4% | 24.9% | 32.6% |
//! | 4 | 39.4% | 43.8% | 54.4% | 66.0% |
//!
//! This bounds the false-denial rate from above (an over-charged key is only denied if its
//! sharers' use and its own together exceed its burst). Rule of thumb: **`m >= 64 * n` bytes for
//! under 10% of keys over-charged**, `m >= 256 * n` for under 2% (d = 2 or 3); the default 64 KiB
//! suits up to about 1,000 keys live at once. Past 2 live keys per line more cells per key only
//! make it worse.
//!
//! # Decisions
//! The same [`Decision`] as every limiter, computed by GCRA on the decided cell: `remaining` and
//! `retry_after` are exact for that cell and a bound for the key (never more remaining, never a
//! shorter wait than the key's own state gives). Every decision is marked
//! [`Fallback::Sketch`](crate::Fallback::Sketch): the sketch cannot tell whether a cell is shared.
//!
//! Lock-free, no allocation after construction (the cells are allocated once by the builder),
//! the memory fixed: [`Sketch::memory_bytes`].

mod builder;
mod cells;
mod layout;

pub use builder::{
    SketchBuilder, SketchError, DEFAULT_CELLS_PER_KEY, DEFAULT_MEMORY_BYTES, MAX_CELLS_PER_KEY,
    MAX_MEMORY_BYTES,
};
pub(crate) use cells::Cells;

use std::hash::Hash;

use crate::{CheckError, Clock, CoarseClock, Decision, Gcra, Quota, WordAlgorithm};

/// Per-key GCRA limits in fixed memory, keys hashed to shared cells: see the [module
/// docs](self) for the bound (never over-grants) and the sizing rule.
pub struct Sketch<C: Clock = CoarseClock> {
    gcra: Gcra,
    cells: Cells,
    hasher: ahash::RandomState,
    clock: C,
}

impl<C: Clock> std::fmt::Debug for Sketch<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sketch")
            .field("quota", &self.gcra.quota())
            .field("memory_bytes", &self.memory_bytes())
            .field("cells_per_key", &self.cells_per_key())
            .finish_non_exhaustive()
    }
}

impl Sketch<CoarseClock> {
    /// A sketch of [`DEFAULT_MEMORY_BYTES`] on the default clock.
    ///
    /// ```
    /// let sketch = kova::sketch::Sketch::new(kova::Quota::per_minute(60)?)?;
    /// assert_eq!(sketch.check_n("203.0.113.7", 5)?.remaining(), 55);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<Self, SketchError> {
        Self::builder(quota).build()
    }

    /// Configures a sketch: its memory, cells per key and clock.
    pub fn builder(quota: Quota) -> SketchBuilder {
        SketchBuilder::new(quota)
    }
}

impl<C: Clock> Sketch<C> {
    /// A sketch of [`DEFAULT_MEMORY_BYTES`] reading `clock`.
    ///
    /// ```
    /// use kova::sketch::Sketch;
    /// use kova::{ManualClock, Quota};
    /// let sketch = Sketch::with_clock(Quota::per_second(1)?, ManualClock::new())?;
    /// assert!(sketch.check("a").is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, SketchError> {
        Sketch::builder(quota).clock(clock).build()
    }
}

impl<C: Clock> Sketch<C> {
    /// Checks one unit for `key`.
    #[inline]
    pub fn check<K: Hash + ?Sized>(&self, key: &K) -> Decision {
        // Cost 1 never exceeds the capacity: a quota's burst is at least 1.
        self.cells.decide(&self.gcra, &self.clock, self.hasher.hash_one(key), 1)
    }

    /// Checks `cost` units for `key`: an error (not a denial) when `cost` exceeds the burst.
    ///
    /// ```
    /// use kova::sketch::Sketch;
    /// use kova::{CheckError, Quota};
    /// let sketch = Sketch::new(Quota::per_second(5)?)?;
    /// assert!(sketch.check_n(&42u64, 5)?.is_allowed());
    /// assert!(!sketch.check_n(&42u64, 1)?.is_allowed());
    /// assert_eq!(sketch.check_n(&42u64, 6), Err(CheckError::CostExceedsCapacity { cost: 6, capacity: 5 }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_n<K: Hash + ?Sized>(&self, key: &K, cost: u64) -> Result<Decision, CheckError> {
        let capacity = self.gcra.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity });
        }
        Ok(self.cells.decide(&self.gcra, &self.clock, self.hasher.hash_one(key), cost))
    }

    /// What a check of `key` would see now, changing nothing.
    pub fn peek<K: Hash + ?Sized>(&self, key: &K) -> Decision {
        self.cells.decide(&self.gcra, &self.clock, self.hasher.hash_one(key), 0)
    }

    /// Bytes of the cells, fixed at construction (the struct itself adds a few hundred bytes:
    /// `size_of::<Sketch>()`).
    pub fn memory_bytes(&self) -> usize {
        self.cells.memory_bytes()
    }

    /// Cells per key.
    pub fn cells_per_key(&self) -> u32 {
        self.cells.cells_per_key()
    }

    /// The quota every key is limited to.
    pub fn quota(&self) -> Quota {
        self.gcra.quota()
    }

    /// The clock the sketch reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The cells `key` maps to, as indices into the array of `memory_bytes() / 8` cells, in
    /// ascending order: all in one line (`index / 8` is the same). For tests and tools (which
    /// keys share cells); allocates.
    pub fn cells_of<K: Hash + ?Sized>(&self, key: &K) -> Vec<usize> {
        self.cells.indices(self.hasher.hash_one(key))
    }
}
