//! `Keyed`: the table's operations.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use super::builder::{KeyedBuilder, QuotaFn};
use super::door::{self, Door};
use super::epoch::{self, Guard};
use super::hot::HotSlots;
use super::line_cell;
use super::line_shard::{LineHit, LineShard};
use super::policy::TableFullPolicy;
use super::quotas::{Quotas, MAX_QUOTAS};
use super::word;
use super::KeyedError;
use crate::{Algorithm, CheckError, Clock, CoarseClock, Decision, Gcra, Quota, QuotaError};
use slow::{Prior, Slow};

/// Limits each key separately: one limiter state per client key (IP, user, API key), in a
/// sharded, bounded table whose lookups take no lock.
///
/// - **Lock-free hits**: checking a key the table holds takes no lock and writes only the key's
///   state word (plus the thread's own epoch record, `epoch.rs`). New keys take their shard's lock.
/// - **Inline state**: a `u64` key and a single-word algorithm's state take 16 bytes side by side
///   in the probed array (one cache line per check); with the array's spare room and marks, at
///   most 32 bytes per key (`line_shard.rs`'s load constants).
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
    /// The table owns keys and cells (through raw pointers in its chunks).
    _owns: PhantomData<(K, A::Cell)>,
}

// SAFETY: the table owns its keys and cells (dropped, possibly on another thread, when removed or
// when the table is dropped), so moving it to another thread needs `K: Send` and `A::Cell: Send`
// (the cell is `Send` by `Algorithm`'s bound); the rest is `Send` (`C: Clock` is `Send + Sync`).
unsafe impl<K: Send, A: Algorithm, C: Clock> Send for Keyed<K, A, C> {}

// SAFETY: shared use reads keys and cells from many threads (`K: Sync`, `A::Cell: Sync`), and a
// key is dropped by whichever thread removes or reclaims it (`K: Send`). Every mutation of shared
// state is through atomics or under a shard's mutex; see `line_shard.rs` for the protocol.
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

/// A randomly seeded hasher (fixed seeds under loom, whose models must be deterministic).
fn new_hasher() -> ahash::RandomState {
    if cfg!(kova_loom) {
        ahash::RandomState::with_seeds(0x243F_6A88, 0x85A3_08D3, 0x1319_8A2E, 0x0370_7344)
    } else {
        ahash::RandomState::new()
    }
}

/// Whether `cost` fits the algorithm's capacity, or the error.
fn check_cost<A: Algorithm>(algorithm: &A, cost: u64) -> Result<(), CheckError> {
    let capacity = algorithm.capacity();
    if cost > capacity {
        return Err(CheckError::CostExceedsCapacity { cost, capacity });
    }
    Ok(())
}

/// Whether a lock-free `decision` of `cost` units on `hit`'s cell stands. One that wrote nothing
/// (a peek, a denial) cannot be lost; one that wrote stands if the cell is frozen before any
/// unlink looks at it (a word: nothing to check after the CAS), or if its line was still linked
/// after the write. Otherwise the check is redone under the lock.
#[inline(always)]
fn stands<K, A: Algorithm>(
    shard: &LineShard<K, A>,
    hit: &LineHit<'_, A>,
    algorithm: &A,
    decision: &Decision,
    cost: u64,
) -> bool {
    cost == 0 || !decision.is_allowed() || word::freezes(algorithm, hit.cell()) || shard.still_linked(hit)
}

/// Heap bytes one cell of `algorithm` owns.
fn heap_of<A: Algorithm>(algorithm: &A) -> usize {
    algorithm.cell_bytes().saturating_sub(std::mem::size_of::<A::Cell>())
}

/// What an operation's hit path does with a key found without the lock ([`Keyed::lookup`]).
enum OnHit<R> {
    /// Answers at once, reading no state.
    Answer(R),
    /// Decides this many units on the key's cell.
    Decide(u64),
    /// Leaves it to the slow path.
    Slow,
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
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Self::builder(quota).build_checked()
    }

    /// A builder for a keyed limiter for `quota` (the default quota) on the coarse clock.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, Quota, TableFullPolicy};
    /// let limiter = Keyed::<u64, Gcra>::builder(Quota::per_second(10)?)
    ///     .max_keys(100_000)
    ///     .table_full(TableFullPolicy::AllowUntracked)
    ///     .build()?;
    /// assert_eq!(limiter.max_keys(), 100_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(quota: Quota) -> KeyedBuilder<K, A, CoarseClock> {
        KeyedBuilder::new(quota, CoarseClock::new())
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
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        KeyedBuilder::new(quota, clock).build_checked()
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
            hasher: new_hasher(),
            quotas: Quotas::new(algorithm),
            clock,
            policy,
            scan,
            max_keys,
            quota_fn,
            forgets: reserve::Forgets::default(),
            door: None,
            hot: None,
            _owns: PhantomData,
        }
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

    #[inline]
    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of `hash` (chosen by its low bits).
    #[inline(always)]
    fn shard(&self, hash: u64) -> &LineShard<K, A> {
        &self.shards[hash as usize & self.shard_mask]
    }

    /// The hit path, written once for every operation that can answer without the lock: hashes
    /// `key`, picks its shard, pins the thread and looks the key up. For a key found, `on_hit`
    /// (given its quota's algorithm) answers at once, or asks for `cost` units to be decided on
    /// its cell, a decision `decided` turns into the answer when it stands. Anything else (a key
    /// not found, a frozen cell, a write that may be lost) goes to `slow`, with what the hit
    /// path already did on the key's place.
    #[inline(always)]
    fn lookup<R>(
        &self,
        key: &K,
        on_hit: impl FnOnce(&A) -> OnHit<R>,
        decided: impl FnOnce(Decision) -> R,
        slow: impl FnOnce(&LineShard<K, A>, u64, Prior, Guard) -> R,
    ) -> R {
        let hash = self.hash(key);
        let shard = self.shard(hash);
        shard.prefetch(hash);
        if let Some(door) = &self.door {
            // A flood of new keys reads the door after the probe misses: both misses overlap.
            door.prefetch(hash);
        }
        let guard = epoch::pin();
        let mut prior = None;
        if let Some(hit) = shard.find(hash, key, &guard) {
            let algorithm = self.quotas.get(hit.quota());
            match on_hit(algorithm) {
                OnHit::Answer(answer) => return answer,
                OnHit::Slow => {}
                OnHit::Decide(cost) => {
                    match word::decide_noting(algorithm, hit.cell(), &self.clock, cost, |now| {
                        // Only after a failed compare-exchange: an uncontended check never gets here.
                        if let Some(hot) = &self.hot {
                            self.contended(hot, shard, hash, key, now, &guard);
                        }
                    }) {
                        Some(decision) => {
                            if stands(shard, &hit, algorithm, &decision, cost) {
                                return decided(decision);
                            }
                            prior = Some((hit.place(), decision));
                        }
                        // A marker: a hot key's goes to its slot (`table/hot.rs`); any other
                        // (frozen by the lock holder) is decided under the lock.
                        None => {
                            if let Some(hot) = &self.hot {
                                if let Some(decision) =
                                    self.hot_hit(hot, shard, hash, key, &hit, algorithm, cost, &guard)
                                {
                                    return decided(decision);
                                }
                            }
                        }
                    }
                }
            }
        }
        slow(shard, hash, prior, guard)
    }

    /// Checks one unit for `key`.
    #[inline]
    pub fn check(&self, key: &K) -> Decision {
        // `check_n`'s path without its `Result`: merging that with the slow path's result sent
        // every decision through the stack.
        self.lookup(
            key,
            |algorithm| if algorithm.capacity() >= 1 { OnHit::Decide(1) } else { OnHit::Slow },
            |decision| decision,
            // Copied, so that the slow path's decision is not written straight into the place
            // this function returns it in: that place would then be memory the call writes, and
            // the hit path would store its whole decision there too, even when the caller reads
            // one field.
            |shard, hash, prior, guard| self.check_one_slow(shard, hash, key, prior, guard).copied(),
        )
    }

    /// Checks `cost` units for `key`; an error (not a denial) when `cost` exceeds the capacity
    /// of the key's quota. Cost 0 is a peek.
    ///
    /// ```
    /// use kova::{CheckError, Gcra, Keyed, Quota};
    /// let limiter = Keyed::<&str, Gcra>::new(Quota::per_minute(60)?)?;
    /// assert_eq!(limiter.check_n(&"upload", 5)?.remaining(), 55);
    /// assert_eq!(
    ///     limiter.check_n(&"upload", 61),
    ///     Err(CheckError::CostExceedsCapacity { cost: 61, capacity: 60 })
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn check_n(&self, key: &K, cost: u64) -> Result<Decision, CheckError> {
        self.lookup(
            key,
            |algorithm| match check_cost(algorithm, cost) {
                Ok(()) => OnHit::Decide(cost),
                Err(error) => OnHit::Answer(Err(error)),
            },
            Ok,
            |shard, hash, prior, guard| self.check_n_slow(shard, hash, key, cost, prior, guard),
        )
    }

    /// Checks `cost` units for `key` under `quota`, the key's own quota (a plan, a tier, a
    /// per-customer limit). A key first seen gets it; a key held under another quota moves to it,
    /// keeping what it consumed (see [`set_quota`](Self::set_quota)).
    ///
    /// The common case costs one comparison of the key's quota with `quota` more than
    /// [`check_n`](Self::check_n). Errors: `quota` unusable for the algorithm (or one distinct
    /// quota too many: a table holds up to 4,095 besides its default), or `cost` above its
    /// capacity.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let limiter = Keyed::<&str, Gcra, _>::with_clock(Quota::per_minute(10)?, ManualClock::new())?;
    /// let pro = Quota::per_minute(100)?;
    /// assert_eq!(limiter.check_n_with_quota(&"pro-user", pro, 1)?.remaining(), 99);
    /// assert_eq!(limiter.check(&"free-user").remaining(), 9);
    /// // An upgrade keeps what was consumed: 10 used of the new 1000.
    /// limiter.check_n_with_quota(&"free-user", Quota::per_minute(10)?, 9)?;
    /// let upgraded = limiter.check_n_with_quota(&"free-user", Quota::per_minute(1000)?, 1)?;
    /// assert_eq!(upgraded.remaining(), 989);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_n_with_quota(&self, key: &K, quota: Quota, cost: u64) -> Result<Decision, KeyedError> {
        self.lookup(
            key,
            |algorithm| match check_cost(algorithm, cost) {
                _ if algorithm.quota() != quota => OnHit::Slow,
                Ok(()) => OnHit::Decide(cost),
                Err(error) => OnHit::Answer(Err(error.into())),
            },
            Ok,
            |shard, hash, prior, guard| {
                let id = self.quotas.intern(quota)?;
                let slow = Slow { hash, key, cost, new_quota: id, force: Some(id), at_door: true };
                Ok(self.check_slow(shard, slow, prior, guard)?)
            },
        )
    }

    /// Reports `key`'s state without changing it (and without inserting it): for a key not held,
    /// what a fresh key would get.
    pub fn peek(&self, key: &K) -> Decision {
        self.lookup(
            key,
            |_| OnHit::Decide(0),
            |decision| decision,
            // Frozen: the lock holder is done with it once we hold the lock.
            |shard, hash, _, guard| {
                let locked = shard.lock(&guard);
                match locked.find(hash, key) {
                    Some(pos) => match self.hot_decide_locked(&locked, pos, hash, 0) {
                        Some(decision) => decision,
                        None => {
                            self.cool(&locked, pos, hash);
                            self.quotas.get(locked.quota(pos)).decide_cell(locked.cell(pos), &self.clock, 0)
                        }
                    },
                    None => {
                        drop(locked);
                        self.peek_new(self.quotas.get(self.quota_for_new(key)), hash)
                    }
                }
            },
        )
    }

    /// Puts `key` back to full, keeping it (and its quota) in the table. For a key not held,
    /// forgets only what the doorkeeper admitted of it ([`KeyedBuilder::doorkeeper`]).
    pub fn reset(&self, key: &K) {
        let hash = self.hash(key);
        let guard = epoch::pin();
        let locked = self.shard(hash).lock(&guard);
        self.forget_at_door(hash);
        if let Some(pos) = locked.find(hash, key) {
            self.forgets.note();
            self.cool(&locked, pos, hash);
            self.quotas.get(locked.quota(pos)).reset_cell(locked.cell(pos));
        }
    }

    /// Gives back `cost` units an earlier allowed check of `key` took (for example when a later
    /// limit denied the same request; see [`WordAlgorithm::refund`](crate::WordAlgorithm::refund)).
    /// Returns `false`, changing nothing, when the key is not held (its state is fresh: nothing
    /// to give back, unless the doorkeeper admitted its first check: that unit is given back) or
    /// the algorithm cannot refund (the sliding log). Takes the key's shard lock,
    /// so that no eviction or quota change can lose it; checks of the key run meanwhile.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, Quota};
    /// let limiter = Keyed::<u64, Gcra>::new(Quota::per_minute(10)?)?;
    /// assert!(limiter.check_n(&1, 4)?.is_allowed());
    /// assert!(limiter.refund(&1, 4));
    /// assert_eq!(limiter.peek(&1).remaining(), 10);
    /// assert!(!limiter.refund(&2, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund(&self, key: &K, cost: u64) -> bool {
        let hash = self.hash(key);
        let guard = epoch::pin();
        let locked = self.shard(hash).lock(&guard);
        match locked.find(hash, key) {
            Some(pos) => {
                self.cool(&locked, pos, hash);
                self.quotas.get(locked.quota(pos)).refund_cell(locked.cell(pos), &self.clock, cost)
            }
            None => self.refund_at_door(hash, cost),
        }
    }

    /// Forgets `key` (its state, its own quota, and what the doorkeeper admitted of it); returns
    /// whether it was held. Its memory is reused once no check can still be reading it.
    pub fn remove(&self, key: &K) -> bool {
        let hash = self.hash(key);
        let guard = epoch::pin();
        let mut locked = self.shard(hash).lock(&guard);
        self.forget_at_door(hash);
        let Some(pos) = locked.find(hash, key) else { return false };
        self.forgets.note();
        self.cool(&locked, pos, hash);
        let heap = heap_of(self.quotas.get(locked.quota(pos)));
        locked.remove(pos, heap);
        true
    }

    /// The quota `key` is held under (`None` when not held).
    pub fn quota_of(&self, key: &K) -> Option<Quota> {
        self.lookup(
            key,
            |algorithm| OnHit::Answer(Some(algorithm.quota())),
            // Not asked for: `on_hit` never decides.
            |_| None,
            |shard, hash, _, guard| {
                let locked = shard.lock(&guard);
                locked.find(hash, key).map(|pos| self.quotas.get(locked.quota(pos)).quota())
            },
        )
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

    /// How many quotas from the quota function could not be used (invalid for the algorithm,
    /// or beyond the table's 4,095 distinct quotas); those keys got the default quota.
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
    }

    /// The most [`memory_bytes`](Self::memory_bytes) can ever report for this table, whatever
    /// keys arrive: every shard full, its array at its largest with the arrays it replaced still
    /// waiting, a boxed cell for every line of them, bookkeeping queues at twice their contents,
    /// and all 4,095 extra quotas built. Counts each cell's heap (the sliding
    /// log's ring) at the default quota's size: per-key quotas with bigger logs can exceed it.
    pub fn memory_bound_bytes(&self) -> usize {
        let cell_bytes = line_cell::held_bytes::<A>(heap_of(self.quotas.default_algorithm()));
        std::mem::size_of::<Self>()
            + self.shards_bytes()
            + std::mem::size_of_val(&*self.shard_keys)
            + self
                .shard_keys
                .iter()
                .map(|&keys| LineShard::<K, A>::bound_bytes(keys, cell_bytes))
                .sum::<usize>()
            + MAX_QUOTAS * (std::mem::size_of::<A>() + 64)
            + self.door_bytes()
            + self.hot_bytes()
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

mod door_keys;
mod evict;
mod held_cell;
mod hot;
mod reserve;
mod set_quota;
mod slow;

pub use reserve::KeyedReservation;

#[cfg(test)]
mod tests;
