//! `Keyed`: the table's operations.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use super::builder::{KeyedBuilder, QuotaFn};
use super::door::{self, Door};
use super::hot::HotSlots;
use super::line::{self, LineShard};
use super::policy::{FullSketch, TableFullPolicy};
use super::quotas::{Quotas, DEFAULT_MAX_QUOTAS};
use super::KeyedError;
use crate::clock::BuilderClock;
use crate::{Algorithm, Clock, CoarseClock, Gcra, Quota};

/// Limits each key separately: one limiter state per client key (IP, user, API key), in a
/// sharded, bounded table whose lookups take no lock.
///
/// - **Lock-free hits**: checking a key the table holds takes no lock and writes only the key's
///   state word (plus the thread's own epoch record, `epoch.rs`). New keys take their shard's lock.
/// - **Inline state**: a `u64` key and a single-word algorithm's state take 16 bytes side by side
///   in the probed array (one cache line per check); with the array's spare room and marks, at
///   most 32 bytes per key once a shard holds a few thousand keys (`line/sizing.rs`). Below that
///   a shard's array is kept four times as sparse, at most 64 KiB of `u64` lines a shard, so
///   that a check finds its key on its home line and threads checking different keys seldom
///   write one cache line.
/// - **Bounded**: at most [`max_keys`](KeyedBuilder::max_keys) keys and
///   [`memory_bound_bytes`](Self::memory_bound_bytes) bytes; idle keys are reclaimed by inserts
///   into full shards and by [`sweep_idle`](Self::sweep_idle); beyond that a
///   [`TableFullPolicy`] decides, and says so in the decision's [`Fallback`](crate::Fallback).
/// - **Per-key quotas**: [`KeyedBuilder::quota_fn`], [`check_n_with_quota`](Self::check_n_with_quota),
///   [`set_quota`](Self::set_quota).
/// - **A doorkeeper for keys seen once**, on by default ([`KeyedBuilder::doorkeeper`]): a key's
///   first check is admitted in one word of a fixed array, and the key enters the table on its
///   second, charged the first one's unit. A flood of one-off keys then inserts nothing, and
///   [`len`](Self::len) counts only keys checked again.
///
/// [`KeyedBuilder`] holds the options.
///
/// ```
/// use kova::{Gcra, Keyed, Quota};
/// let limiter = Keyed::<&str, Gcra>::new(Quota::per_second(1)?)?;
/// assert!(limiter.check(&"alice").is_allowed());
/// assert!(!limiter.check(&"alice").is_allowed());
/// assert!(limiter.check(&"bob").is_allowed());
/// assert_eq!(limiter.len(), 1); // bob, seen once, is only at the doorkeeper
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Keyed<K, A: Algorithm = Gcra, C: Clock = CoarseClock> {
    shards: Box<[LineShard<K, A>]>,
    shard_mask: usize,
    /// The most keys of each shard.
    shard_keys: Box<[usize]>,
    hasher: ahash::RandomState,
    quotas: Quotas<A>,
    clock: C,
    policy: TableFullPolicy,
    scan: usize,
    max_keys: usize,
    quota_fn: Option<QuotaFn<K>>,
    /// Counts the resets, removals, reclamations and quota moves of any key (`reserve.rs`).
    forgets: reserve::Forgets,
    /// Where first checks of new keys are admitted without inserting them
    /// ([`KeyedBuilder::doorkeeper`]).
    door: Option<Door>,
    /// Where contended keys are striped ([`KeyedBuilder::hot_keys`]).
    hot: Option<HotSlots<A>>,
    /// Where new keys are decided when the table is full, under [`TableFullPolicy::Sketch`].
    full_sketch: Option<FullSketch>,
    /// The table owns keys and cells (through raw pointers in its chunks).
    _owns: PhantomData<(K, A::Cell)>,
}

// SAFETY: the table owns its keys and cells (dropped, possibly on another thread, when removed or
// when the table is dropped), so moving it to another thread needs `K: Send` and `A::Cell: Send`
// (the cell is `Send` by `Algorithm`'s bound); the rest is `Send` (`C: Clock` is `Send + Sync`).
unsafe impl<K: Send, A: Algorithm, C: Clock> Send for Keyed<K, A, C> {}

// SAFETY: shared use reads keys and cells from many threads (`K: Sync`, `A::Cell: Sync`), and a
// key is dropped by whichever thread removes or reclaims it (`K: Send`). Every mutation of shared
// state is through atomics or under a shard's mutex; see `line/shard.rs` for the protocol.
unsafe impl<K: Send + Sync, A: Algorithm, C: Clock> Sync for Keyed<K, A, C> {}

impl<K, A: Algorithm, C: Clock> fmt::Debug for Keyed<K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("algorithm", &self.quotas.default_algorithm().name())
            .field("quota", &self.quotas.default_algorithm().quota())
            .field("len", &self.len())
            .field("max_keys", &self.max_keys)
            .field("shards", &self.shard_keys.len())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Heap bytes one cell of `algorithm` owns.
fn heap_of<A: Algorithm>(algorithm: &A) -> usize {
    algorithm.cell_bytes().saturating_sub(std::mem::size_of::<A::Cell>())
}

impl<K: Hash + Eq + Clone, A: Algorithm> Keyed<K, A, CoarseClock> {
    /// A keyed limiter for `quota` on the coarse clock, with the default options
    /// ([`KeyedBuilder`]).
    ///
    /// ```
    /// use kova::{Keyed, Quota, TokenBucket};
    /// let limiter = Keyed::<u64, TokenBucket>::new(Quota::per_minute(10)?)?;
    /// assert_eq!(limiter.check(&7).remaining(), 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<Self, KeyedError> {
        Self::builder(quota).build()
    }

    /// A builder for a keyed limiter for `quota` (the default quota) on the coarse clock.
    ///
    /// ```
    /// use kova::keyed::TableFullPolicy;
    /// use kova::{Gcra, Keyed, Quota};
    /// let limiter = Keyed::<u64, Gcra>::builder(Quota::per_second(10)?)
    ///     .max_keys(100_000)
    ///     .table_full(TableFullPolicy::AllowUntracked)
    ///     .build()?;
    /// assert_eq!(limiter.max_keys(), 100_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(quota: Quota) -> KeyedBuilder<K, A, CoarseClock> {
        KeyedBuilder::new(quota, BuilderClock::coarse())
    }

    /// A builder for a keyed limiter whose default quota is `algorithm`'s, built beforehand (an
    /// [`AnyAlgorithm`](crate::AnyAlgorithm) of a configured kind): per-key quotas get
    /// algorithms of the same kind. The coarse clock unless [`clock`](KeyedBuilder::clock) sets
    /// another.
    ///
    /// ```
    /// use kova::{AnyAlgorithm, Keyed, ManualClock, Quota};
    /// let algorithm = AnyAlgorithm::new("fixed_window".parse()?, Quota::per_minute(100)?)?;
    /// let limiter = Keyed::<u64, AnyAlgorithm>::builder_from_algorithm(algorithm).clock(ManualClock::new()).build()?;
    /// assert_eq!(limiter.check(&1).remaining(), 99);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder_from_algorithm(algorithm: A) -> KeyedBuilder<K, A, CoarseClock> {
        KeyedBuilder::from_algorithm(algorithm, BuilderClock::coarse())
    }
}

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// A keyed limiter for `quota` reading `clock`, with the default options.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let limiter = Keyed::<u32, Gcra, _>::with_clock(Quota::per_second(1)?, clock.clone())?;
    /// assert!(limiter.check(&1).is_allowed());
    /// assert!(!limiter.check(&1).is_allowed());
    /// clock.advance(std::time::Duration::from_secs(1));
    /// assert!(limiter.check(&1).is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, KeyedError> {
        KeyedBuilder::new(quota, BuilderClock::Given(clock)).build()
    }

    pub(super) fn from_parts(
        algorithm: A,
        clock: C,
        shards: usize,
        max_keys: usize,
        policy: TableFullPolicy,
        scan: usize,
        quota_fn: Option<QuotaFn<K>>,
    ) -> Self {
        let shard_keys: Box<[usize]> =
            (0..shards).map(|i| (max_keys / shards + usize::from(i < max_keys % shards)).max(1)).collect();
        let max_keys = shard_keys.iter().sum();
        Keyed {
            shards: shard_keys.iter().map(|&keys| LineShard::new(keys)).collect(),
            shard_mask: shards - 1,
            shard_keys,
            hasher: crate::loom::new_hasher(),
            quotas: Quotas::new(algorithm, DEFAULT_MAX_QUOTAS),
            clock,
            policy,
            scan,
            max_keys,
            quota_fn,
            forgets: reserve::Forgets::default(),
            door: None,
            hot: None,
            full_sketch: None,
            _owns: PhantomData,
        }
    }

    /// The table holding at most `max` distinct quotas, its default included (before any key
    /// is given one).
    pub(super) fn with_max_quotas(mut self, max: usize) -> Self {
        self.quotas = self.quotas.with_max(max);
        self
    }

    /// The table with a doorkeeper of `words` words (none for 0, or when the default quota's
    /// unit never becomes idle).
    pub(super) fn with_door(mut self, words: usize) -> Self {
        self.door = match door::unit_idle_after(self.quotas.default_algorithm()) {
            Some(ttl) if words > 0 => Some(Door::new(words, ttl)),
            _ => None,
        };
        self
    }

    /// The table with `sketch` for its [`TableFullPolicy::Sketch`].
    pub(super) fn with_full_sketch(mut self, sketch: Option<FullSketch>) -> Self {
        self.full_sketch = sketch;
        self
    }

    #[inline]
    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of `hash` (chosen by its low bits).
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "masked by shard_mask, shards.len() - 1 of a power-of-two count"
    )]
    fn shard(&self, hash: u64) -> &LineShard<K, A> {
        &self.shards[hash as usize & self.shard_mask]
    }
}

impl<K, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Number of keys held: not the keys only the doorkeeper has seen (checked once within the
    /// time a unit takes to become idle; [`KeyedBuilder::doorkeeper`]).
    pub fn len(&self) -> usize {
        self.shards.iter().map(LineShard::len).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys the table holds (split evenly over its shards).
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Number of shards (a power of two).
    pub fn shard_count(&self) -> usize {
        self.shard_keys.len()
    }

    /// The policy for new keys when the table is full.
    pub fn table_full_policy(&self) -> TableFullPolicy {
        self.policy
    }

    /// The default quota's algorithm.
    pub fn algorithm(&self) -> &A {
        self.quotas.default_algorithm()
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// How many times a quota from the quota function could not be used (invalid for the
    /// algorithm, or beyond the table's most distinct quotas, [`KeyedBuilder::max_quotas`]):
    /// each such check was answered by the table-full policy, as a key with no room is
    /// ([`KeyedBuilder::quota_fn`]).
    pub fn rejected_quotas(&self) -> u64 {
        self.quotas.rejected()
    }

    /// Bytes the table holds on the heap and inline: shards, arrays (keys and inline cells, at
    /// `size_of`), boxed cells with their heap (the sliding log's rings), lines and arrays waiting for
    /// their grace period, and bookkeeping. Heap memory owned by the keys themselves (a
    /// `String`'s buffer) is not counted. A snapshot: concurrent inserts may be under way.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, Quota};
    /// let limiter = Keyed::<u64, Gcra>::new(Quota::per_second(10)?)?;
    /// let empty = limiter.memory_bytes();
    /// for key in 0..10_000 {
    ///     limiter.check(&key);
    /// }
    /// assert!(limiter.memory_bytes() - empty < 10_000 * 32);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.shards_bytes()
            + std::mem::size_of_val(&*self.shard_keys)
            + self.shards.iter().map(LineShard::memory).sum::<usize>()
            + self.quotas.bytes()
            + self.door_bytes()
            + self.hot_bytes()
            + self.full_sketch_bytes()
    }

    /// The most [`memory_bytes`](Self::memory_bytes) can ever report for this table, whatever
    /// keys arrive: every shard full, its array at its largest with the arrays it replaced still
    /// waiting, a boxed cell for every line of them, bookkeeping queues at twice their contents,
    /// and every quota it may hold built ([`KeyedBuilder::max_quotas`]). Counts each cell's heap (the sliding
    /// log's ring) at the default quota's size: per-key quotas with bigger logs can exceed it.
    pub fn memory_bound_bytes(&self) -> usize {
        let cell_bytes = line::held_bytes::<A>(heap_of(self.quotas.default_algorithm()));
        std::mem::size_of::<Self>()
            + self.shards_bytes()
            + std::mem::size_of_val(&*self.shard_keys)
            + self
                .shard_keys
                .iter()
                .map(|&keys| LineShard::<K, A>::bound_bytes(keys, cell_bytes))
                .sum::<usize>()
            + self.quotas.bound_bytes()
            + self.door_bytes()
            + self.hot_bytes()
            + self.full_sketch_bytes()
    }

    /// Bytes of the table-full sketch's cells (fixed when the table is built).
    fn full_sketch_bytes(&self) -> usize {
        self.full_sketch.as_ref().map_or(0, FullSketch::bytes)
    }

    /// Bytes of the doorkeeper's array (fixed when the table is built).
    fn door_bytes(&self) -> usize {
        self.door.as_ref().map_or(0, Door::bytes)
    }
}

impl<K, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Bytes of the shard structs.
    fn shards_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.shards)
    }
}

mod entry;
mod evict;
mod hot;
mod locked;
mod lookup;
mod reserve;
mod visit;

pub use reserve::KeyedReservation;

#[cfg(all(test, not(kova_loom)))]
mod door_tests;
#[cfg(all(test, not(kova_loom)))]
mod hostile_key_tests;
#[cfg(test)]
mod tests;
