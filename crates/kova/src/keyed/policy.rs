//! What a full table does with a new key.

use std::any::Any;

use super::KeyedError;
use crate::cell::CellStorage;
use crate::loom::atomic::Ordering;
use crate::sketch::{Cells, SketchBuilder, DEFAULT_CELLS_PER_KEY};
use crate::{Algorithm, AnyAlgorithm, Clock, Decision, Fallback, Gcra};

/// What a keyed table does with a key it does not hold when the key's shard is full and the
/// insert found no idle key to reclaim (nor any line free of a pending grace period).
///
/// Every decision a policy makes carries a [`Fallback`](crate::Fallback), so the caller can tell
/// it from a measurement of the client's usage.
///
/// With the [doorkeeper](crate::keyed::KeyedBuilder::doorkeeper) on (the default), a new key's
/// first check of one unit is admitted at the door, which needs no line, so no policy is asked:
/// that decision is exact (the door counts the unit, and the key's insert later carries it) and
/// unmarked, even while the table is full. A policy decides from the key's next check, when
/// the key must be inserted. Turn the door off (`doorkeeper(0)`, as in the second example) for
/// a table that denies a new key's very first check while it is full.
///
/// ```
/// use kova::keyed::TableFullPolicy;
/// use kova::{Fallback, Gcra, Keyed, ManualClock, Quota};
/// let limiter = Keyed::<u32, Gcra>::builder(Quota::per_second(1)?.with_burst(5)?)
///     .clock(ManualClock::new())
///     .shards(1)
///     .max_keys(1)
///     .table_full(TableFullPolicy::DenyNew)
///     .build()?; // the doorkeeper on, by default
/// assert!(limiter.check(&1).is_allowed()); // at the door
/// assert!(limiter.check(&1).is_allowed()); // inserted: the table is full
/// let first = limiter.check(&2);
/// assert!(first.is_allowed());
/// assert_eq!(first.fallback(), None); // at the door: exact, counted
/// let second = limiter.check(&2);
/// assert!(!second.is_allowed());
/// assert_eq!(second.fallback(), Some(Fallback::TableFullDenied));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// "Actively limited" below means: a check of one unit at this instant would be denied
/// (`remaining() == 0`). Such a key is never evicted by any policy: evicting it would reset a
/// client that is being limited right now, which is exactly what a flood of new keys would try
/// to provoke.
///
/// ```
/// use kova::keyed::TableFullPolicy;
/// use kova::{Decision, Fallback, Gcra, Keyed, ManualClock, Quota};
/// let limiter = Keyed::<u32, Gcra>::builder(Quota::per_second(1)?).clock(ManualClock::new())
///     .shards(1)
///     .max_keys(2)
///     .table_full(TableFullPolicy::DenyNew)
///     .doorkeeper(0) // every key's first check inserts it
///     .build()?;
/// assert!(limiter.check(&1).is_allowed());
/// assert!(limiter.check(&2).is_allowed());
/// let third = limiter.check(&3);
/// assert!(!third.is_allowed());
/// assert_eq!(third.fallback(), Some(Fallback::TableFullDenied));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TableFullPolicy {
    /// Fail closed: deny the new key ([`Fallback::TableFullDenied`](crate::Fallback::TableFullDenied)).
    /// Its `retry_after` is the time until the sampled key closest to idle becomes idle (a hint:
    /// another new key may take that room first). Nothing is inserted.
    DenyNew,
    /// Fail open: allow the new key without tracking it
    /// ([`Fallback::TableFullUntracked`](crate::Fallback::TableFullUntracked)): the decision is
    /// what a fresh key would get, and nothing is recorded, so the same key is allowed again
    /// until it finds room. Choose it where availability matters more than the limit.
    AllowUntracked,
    /// The default: evict the key closest to idle (the least time until its state is fresh
    /// again) among the entries the insert sampled (the next
    /// [`reclaim_scan`](crate::keyed::KeyedBuilder::reclaim_scan) entries of the shard's sweep
    /// cursor), and insert the new key in its place; its decision is a normal one (no fallback).
    /// A shard of at least 128 keys evicts the two closest to idle of its sample (four from 256
    /// keys), so that the next inserts find room without sampling again: in a flood of new
    /// keys, sampling is most of an insert's cost, and the keys evicted early are those the
    /// next inserts would have evicted.
    /// Actively limited keys are never chosen: when every sampled key is actively limited, the
    /// new key is denied as under [`DenyNew`](Self::DenyNew), with
    /// [`Fallback::TableFullDenied`](crate::Fallback::TableFullDenied).
    ///
    /// The evicted key forgets what it consumed: when it returns it starts fresh. That is the
    /// price of admitting new clients into a full table; the sample favours keys that had
    /// nearly refilled anyway.
    #[default]
    EvictClosestToIdle,
    /// Limit the new key in a sketch ([`Fallback::Sketch`](crate::Fallback::Sketch)): a fixed
    /// array of GCRA cells built with the table
    /// ([`sketch_memory_bytes`](crate::keyed::KeyedBuilder::sketch_memory_bytes), 64 KiB by default),
    /// each key not held hashed to a few of them, as a [`Sketch`](crate::sketch::Sketch) does.
    /// Nothing is evicted and nothing inserted: a flood of new keys finds the table's keys in
    /// place and memory at its bound, and each new key still gets no more than its quota (under
    /// its own quota: the [quota function](crate::keyed::KeyedBuilder::quota_fn)'s, or one passed with
    /// the check). A collision in the sketch can only over-charge a key, never over-grant it (the
    /// [`sketch`](crate::sketch) module's bound), so a new key may be denied early, never
    /// admitted beyond its quota; the sketch module gives the rule for sizing it against the
    /// keys that overflow the table at once.
    ///
    /// A key keeps what it consumed across the sketch and the table: when a key limited by the
    /// sketch later finds room (an idle key reclaimed), it is inserted charged at least what the
    /// sketch holds for it, and while it is held its checks are the table's (no fallback). A
    /// key's checks in the sketch are decided under its shard's lock, so no insert of the key can
    /// miss one.
    ///
    /// Only for GCRA ([`Gcra`](crate::Gcra), or an [`AnyAlgorithm`](crate::AnyAlgorithm) of kind
    /// gcra): the sketch's bound needs a state that only moves forward, the same at every
    /// instant ([`KeyedError::SketchAlgorithm`](crate::keyed::KeyedError::SketchAlgorithm) otherwise).
    /// And without a doorkeeper: a door admits a key's first check as if the key were fresh,
    /// which a key limited by the sketch is not
    /// ([`KeyedError::SketchDoorkeeper`](crate::keyed::KeyedError::SketchDoorkeeper); the default door
    /// is off under this policy). [`Keyed::reset`](crate::Keyed::reset) and
    /// [`remove`](crate::Keyed::remove) do not reach the sketch (its cells are shared), and a
    /// [`peek`](crate::Keyed::peek) of a key not held reports it fresh.
    ///
    /// ```
    /// use kova::keyed::TableFullPolicy;
    /// use kova::{Fallback, Gcra, Keyed, ManualClock, Quota};
    /// let limiter = Keyed::<u32, Gcra>::builder(Quota::per_second(2)?).clock(ManualClock::new())
    ///     .shards(1)
    ///     .max_keys(1)
    ///     .table_full(TableFullPolicy::Sketch)
    ///     .sketch_memory_bytes(4096)
    ///     .build()?;
    /// assert!(limiter.check(&1).is_allowed()); // held
    /// let new = limiter.check(&2); // the table is full: the sketch decides
    /// assert!(new.is_allowed());
    /// assert_eq!(new.fallback(), Some(Fallback::Sketch));
    /// assert!(limiter.check(&2).is_allowed());
    /// assert!(!limiter.check(&2).is_allowed()); // its quota is spent
    /// assert_eq!(limiter.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Sketch,
}

/// The cells a table under [`TableFullPolicy::Sketch`] decides its new keys on.
#[derive(Debug)]
pub(super) struct FullSketch {
    cells: Cells,
}

impl FullSketch {
    /// Cells per key: the sketch's default.
    const CELLS_PER_KEY: u32 = DEFAULT_CELLS_PER_KEY;

    /// Whether a table of `algorithm` can have a sketch of `bytes`, or the error naming why not.
    pub(super) fn check<A: Algorithm>(algorithm: &A, bytes: usize) -> Result<(), KeyedError> {
        if gcra_of(algorithm).is_none() {
            return Err(KeyedError::SketchAlgorithm { algorithm: algorithm.name() });
        }
        SketchBuilder::check_layout(bytes, Self::CELLS_PER_KEY).map_err(KeyedError::Sketch)
    }

    /// A sketch of `bytes` (checked by [`check`](Self::check)).
    pub(super) fn new(bytes: usize) -> Self {
        FullSketch { cells: Cells::new(bytes, Self::CELLS_PER_KEY) }
    }

    /// Bytes of the cells.
    pub(super) fn bytes(&self) -> usize {
        self.cells.memory_bytes()
    }

    /// Checks `cost` units (within the capacity) of the key the table hashed to `hash`, under
    /// its quota's `algorithm`. The caller holds the key's shard lock and found it not held.
    pub(super) fn decide<A: Algorithm, C: Clock>(
        &self,
        algorithm: &A,
        clock: &C,
        hash: u64,
        cost: u64,
    ) -> Decision {
        match gcra_of(algorithm) {
            Some(gcra) => self.cells.decide(gcra, clock, cell_hash(hash), cost),
            // Not made: every quota of the table is of the default's kind, which `check`
            // found to be GCRA. Fail closed.
            None => Decision::denied(algorithm.capacity(), 0, algorithm.quota().emission_interval_nanos(), 0)
                .with_fallback(Fallback::TableFullDenied),
        }
    }

    /// Charges a new cell of the key hashed to `hash` with what the sketch holds for it (the
    /// least consumed of its cells, never less than the key's own state). `cell` is not shared
    /// yet.
    pub(super) fn seed<A: Algorithm>(&self, algorithm: &A, cell: &A::Cell, hash: u64) {
        if let Some(word) = A::Storage::cell_word(algorithm, cell) {
            // Relaxed: the cell is the caller's own until its insert publishes it.
            word.fetch_max(self.cells.least(cell_hash(hash)), Ordering::Relaxed);
        }
    }
}

/// The table's hash mixed again (murmur3's finalizer, a bijection), so that the sketch's line
/// does not follow the bits that chose the key's shard: keys of one full shard spread over
/// every line.
fn cell_hash(hash: u64) -> u64 {
    let mut h = hash ^ (hash >> 33);
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// `algorithm` as kova's GCRA, when it is one.
fn gcra_of<A: Algorithm>(algorithm: &A) -> Option<&Gcra> {
    let any: &dyn Any = algorithm;
    match any.downcast_ref::<Gcra>() {
        Some(gcra) => Some(gcra),
        None => match any.downcast_ref::<AnyAlgorithm>() {
            Some(AnyAlgorithm::Gcra(gcra)) => Some(gcra),
            _ => None,
        },
    }
}
