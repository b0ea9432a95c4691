//! `Keyed`: the table's operations.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use super::builder::{KeyedBuilder, QuotaFn};
use super::epoch::{self, Guard};
use super::line_shard::LineShard;
use super::policy::TableFullPolicy;
use super::quotas::{QuotaId, Quotas, DEFAULT_ID, MAX_QUOTAS};
use super::shard::{Shard, ShardConfig};
use super::slot::Slot;
use super::store::{Store, StoreHit, StoreLocked};
use super::word::{self, WordFreezer};
use super::KeyedError;
use crate::{Algorithm, CheckError, Clock, CoarseClock, Decision, Fallback, Gcra, Quota, QuotaError};

/// Limits each key separately: one limiter state per client key (IP, user, API key), in a
/// sharded, bounded table whose lookups take no lock.
///
/// - **Lock-free hits**: checking a key the table holds takes no lock and writes only the key's
///   state word (plus the thread's own epoch record, `epoch.rs`). New keys take their shard's lock.
/// - **Inline state**: a `u64` key and a single-word algorithm's state take 16 bytes side by side
///   in the probed array (one cache line per check), about 22–31 bytes per key in all.
/// - **Bounded**: at most [`max_keys`](KeyedBuilder::max_keys) keys and
///   [`memory_bound_bytes`](Self::memory_bound_bytes) bytes; idle keys are reclaimed by inserts
///   into full shards and by [`sweep_idle`](Self::sweep_idle); beyond that a
///   [`TableFullPolicy`] decides, and says so in the decision's [`Fallback`].
/// - **Per-key quotas**: [`KeyedBuilder::quota_fn`], [`check_n_with_quota`](Self::check_n_with_quota),
///   [`set_quota`](Self::set_quota).
///
/// [`KeyedBuilder`] holds the options.
///
/// ```
/// use kova::{Gcra, Keyed, Quota};
/// let limiter = Keyed::<&str, Gcra>::new(Quota::per_second(1)?)?;
/// assert!(limiter.check(&"alice").is_allowed());
/// assert!(!limiter.check(&"alice").is_allowed());
/// assert!(limiter.check(&"bob").is_allowed());
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Keyed<K, A: Algorithm = Gcra, C: Clock = CoarseClock> {
    shards: Shards<K, A>,
    shard_mask: usize,
    configs: Box<[ShardConfig]>,
    hasher: ahash::RandomState,
    quotas: Quotas<A>,
    clock: C,
    policy: TableFullPolicy,
    scan: usize,
    max_keys: usize,
    quota_fn: Option<QuotaFn<K>>,
    /// The table owns keys and cells (through raw pointers in its chunks).
    _owns: PhantomData<(K, A::Cell)>,
}

// SAFETY: the table owns its keys and cells (dropped, possibly on another thread, when removed or
// when the table is dropped), so moving it to another thread needs `K: Send` and `A::Cell: Send`
// (the cell is `Send` by `Algorithm`'s bound); the rest is `Send` (`C: Clock` is `Send + Sync`).
unsafe impl<K: Send, A: Algorithm, C: Clock> Send for Keyed<K, A, C> {}

// SAFETY: shared use reads keys and cells from many threads (`K: Sync`, `A::Cell: Sync`), and a
// key is dropped by whichever thread removes or reclaims it (`K: Send`). Every mutation of shared
// state is through atomics or under a shard's mutex; see `shard.rs` for the protocol.
unsafe impl<K: Send + Sync, A: Algorithm, C: Clock> Sync for Keyed<K, A, C> {}

impl<K, A: Algorithm, C: Clock> fmt::Debug for Keyed<K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("algorithm", &self.quotas.default_algorithm().name())
            .field("quota", &self.quotas.default_algorithm().quota())
            .field("len", &self.len())
            .field("max_keys", &self.max_keys)
            .field("shards", &self.configs.len())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// The shards, in the layout the algorithm's cells take (`store.rs`).
enum Shards<K, A: Algorithm> {
    /// Keys beside their state words: algorithms whose cell is one word.
    Lines(Box<[LineShard<K, A>]>),
    /// An index naming slots: any cell.
    Slots(Box<[Shard<K, A::Cell>]>),
}

/// Runs `$body` with `$shards` bound to the table's shards, whichever their layout (the body is
/// compiled once per layout; the match is on a value fixed when the table was built).
macro_rules! on_shards {
    ($self:ident, $shards:ident => $body:expr) => {
        match &$self.shards {
            Shards::Lines($shards) => $body,
            Shards::Slots($shards) => $body,
        }
    };
}

/// A clock stopped at one reading, to look at several cells at the same instant.
struct At(u64);

impl Clock for At {
    fn now_nanos(&self) -> u64 {
        self.0
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
/// unlink looks at it (a word: nothing to check after the CAS), or if the slot was still linked
/// after the write. Otherwise the check is redone under the lock.
#[inline(always)]
fn stands<'g, K, A: Algorithm, S: Store<K, A::Cell>>(
    shard: &S,
    hit: &S::Hit<'g>,
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

/// What a check already did on a slot before finding it unlinked.
type Prior = Option<(u32, Decision)>;

/// A check that takes the slow path.
#[derive(Clone, Copy)]
struct Slow<'k, K> {
    hash: u64,
    key: &'k K,
    cost: u64,
    /// The quota the key gets if it is inserted.
    new_quota: QuotaId,
    /// The quota passed with the check: the key moves to it.
    force: Option<QuotaId>,
}

/// How often a new key waits, unpinned, for a slot to leave its grace period before the
/// table-full policy answers: `NO_SLOT_YIELDS` yields, then sleeps of `NO_SLOT_SLEEP` (about
/// 3 ms in all). Only when every slot of a full shard is held or waiting, which takes a flood of
/// new keys while some thread is preempted in the middle of a check.
const NO_SLOT_RETRIES: usize = 20;
const NO_SLOT_YIELDS: usize = 8;
const NO_SLOT_SLEEP: std::time::Duration = std::time::Duration::from_micros(250);
/// How many times `set_quota` waits for a slot to leave its grace period.
const SET_QUOTA_TRIES: usize = 64;
/// The most idle keys one insert into a full shard reclaims: with the default
/// [`reclaim_scan`](crate::KeyedBuilder::reclaim_scan) of 16, every idle key it examines. A
/// locked section that unlinks anything pays for its grace period (an epoch stamp, and the
/// advances that end it), and the next inserts use the places this one freed. Reclaiming an idle key
/// early changes nothing a check can see, but each parks a place in its grace period, and the
/// inserting check waits for the whole batch. Against 8, kova-bench's `keyed_flood` (GCRA) ran
/// about 9% faster on one thread and 14% on two (medians of 3 alternating runs on the 2-core dev
/// VM), and its p99 rose from about 0.62 to 0.79 µs.
const RECLAIM_BATCH: usize = 16;
/// Entries a sweep examines per lock hold.
const SWEEP_STEP: usize = 256;

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
        Self::builder(quota).build()
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
        Self::builder_with_clock(quota, clock).build()
    }

    /// A builder for a keyed limiter for `quota` reading `clock`.
    pub fn builder_with_clock(quota: Quota, clock: C) -> KeyedBuilder<K, A, C> {
        KeyedBuilder::new(quota, clock)
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
        let configs: Box<[ShardConfig]> = (0..shards)
            .map(|i| ShardConfig::new(max_keys / shards + usize::from(i < max_keys % shards)))
            .collect();
        let max_keys = configs.iter().map(|c| c.max_keys).sum();
        let lines =
            if word::in_lines::<A>() { configs.iter().map(|&c| LineShard::new(c)).collect() } else { None };
        let layout = match lines {
            Some(lines) => Shards::Lines(lines),
            None => Shards::Slots(configs.iter().map(|&c| Shard::new(c)).collect()),
        };
        Keyed {
            shards: layout,
            shard_mask: shards - 1,
            configs,
            hasher: new_hasher(),
            quotas: Quotas::new(algorithm),
            clock,
            policy,
            scan,
            max_keys,
            quota_fn,
            _owns: PhantomData,
        }
    }

    #[inline]
    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of `hash` (chosen by its low bits).
    #[inline(always)]
    fn shard<'s, S>(&self, shards: &'s [S], hash: u64) -> &'s S {
        &shards[hash as usize & self.shard_mask]
    }

    /// Checks one unit for `key`.
    #[inline]
    pub fn check(&self, key: &K) -> Decision {
        on_shards!(self, shards => self.check_in(shards, key))
    }

    #[inline(always)]
    fn check_in<S: Store<K, A::Cell>>(&self, shards: &[S], key: &K) -> Decision {
        // `check_n`'s hit path, without its `Result`: merging that with the slow path's result
        // sent every decision through the stack (seen in `perf` on the 1k-key bench).
        let hash = self.hash(key);
        let shard = self.shard(shards, hash);
        shard.prefetch(hash);
        let guard = epoch::pin();
        let mut prior = None;
        if let Some(hit) = shard.find(hash, key, &guard) {
            let algorithm = self.quotas.get(hit.quota());
            if algorithm.capacity() >= 1 {
                // `None`: the cell is frozen by the lock holder, decide under the lock.
                if let Some(decision) = word::decide(algorithm, hit.cell(), &self.clock, 1) {
                    if stands::<K, A, S>(shard, &hit, algorithm, &decision, 1) {
                        return decision;
                    }
                    prior = Some((hit.slot(), decision));
                }
            }
        }
        // Copied, so that the slow path's decision is not written straight into the place this
        // function returns it in: that place would then be memory the call writes, and the hit
        // path above would store its whole decision there too (five words and their copies: 11%
        // of a 1M-key check, 14.45 against 16.26M/s in kova-bench on the 2-core dev VM), even when
        // the caller reads one field.
        self.check_one_slow(shard, hash, key, prior, guard).copied()
    }

    /// `check`'s slow path (see `check_n_slow`).
    #[cold]
    #[inline(never)]
    fn check_one_slow<S: Store<K, A::Cell>>(
        &self,
        shard: &S,
        hash: u64,
        key: &K,
        prior: Prior,
        guard: Guard,
    ) -> Decision {
        match self.check_n_slow(shard, hash, key, 1, prior, guard) {
            Ok(decision) => decision,
            // Only an algorithm whose capacity is 0 gets here (kova's are all at least 1): one
            // unit can never be admitted.
            Err(CheckError::CostExceedsCapacity { capacity, .. }) => {
                Decision::denied(capacity, 0, u64::MAX, 0)
            }
            // Not made here: the table's cells are always its own algorithms'.
            Err(CheckError::CellMismatch { .. }) => Decision::denied(0, 0, u64::MAX, 0),
        }
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
        on_shards!(self, shards => self.check_n_in(shards, key, cost))
    }

    #[inline(always)]
    fn check_n_in<S: Store<K, A::Cell>>(
        &self,
        shards: &[S],
        key: &K,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        let hash = self.hash(key);
        let shard = self.shard(shards, hash);
        shard.prefetch(hash);
        let guard = epoch::pin();
        if let Some(hit) = shard.find(hash, key, &guard) {
            let algorithm = self.quotas.get(hit.quota());
            check_cost(algorithm, cost)?;
            // `None`: the cell is frozen, decide under the lock.
            let Some(decision) = word::decide(algorithm, hit.cell(), &self.clock, cost) else {
                return self.check_n_slow(shard, hash, key, cost, None, guard);
            };
            if stands::<K, A, S>(shard, &hit, algorithm, &decision, cost) {
                return Ok(decision);
            }
            return self.check_n_slow(shard, hash, key, cost, Some((hit.slot(), decision)), guard);
        }
        self.check_n_slow(shard, hash, key, cost, None, guard)
    }

    /// `check_n` for a key not found without the lock, or found unlinked after the write: kept
    /// out of line so that the hit path stays small.
    #[cold]
    #[inline(never)]
    fn check_n_slow<S: Store<K, A::Cell>>(
        &self,
        shard: &S,
        hash: u64,
        key: &K,
        cost: u64,
        prior: Prior,
        guard: Guard,
    ) -> Result<Decision, CheckError> {
        let new_quota = self.quota_for_new(key);
        self.check_slow(shard, Slow { hash, key, cost, new_quota, force: None }, prior, guard)
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
        on_shards!(self, shards => self.check_n_with_quota_in(shards, key, quota, cost))
    }

    fn check_n_with_quota_in<S: Store<K, A::Cell>>(
        &self,
        shards: &[S],
        key: &K,
        quota: Quota,
        cost: u64,
    ) -> Result<Decision, KeyedError> {
        let hash = self.hash(key);
        let shard = self.shard(shards, hash);
        let guard = epoch::pin();
        if let Some(hit) = shard.find(hash, key, &guard) {
            let algorithm = self.quotas.get(hit.quota());
            if algorithm.quota() == quota {
                check_cost(algorithm, cost)?;
                // As in `check_n`.
                let decided = word::decide(algorithm, hit.cell(), &self.clock, cost);
                if let Some(decision) = decided {
                    if stands::<K, A, S>(shard, &hit, algorithm, &decision, cost) {
                        return Ok(decision);
                    }
                }
                let prior = decided.map(|decision| (hit.slot(), decision));
                let id = self.quotas.intern(quota)?;
                let slow = Slow { hash, key, cost, new_quota: id, force: Some(id) };
                return Ok(self.check_slow(shard, slow, prior, guard)?);
            }
        }
        let id = self.quotas.intern(quota)?;
        Ok(self.check_slow(shard, Slow { hash, key, cost, new_quota: id, force: Some(id) }, None, guard)?)
    }

    /// The quota a key not held yet gets: the quota function's, or the default.
    fn quota_for_new(&self, key: &K) -> QuotaId {
        match &self.quota_fn {
            None => DEFAULT_ID,
            Some(f) => self.quotas.intern_or_default(f(key)),
        }
    }

    /// The slow path: [`check_locked`](Self::check_locked), retried a few times (unpinned for a
    /// moment in between) while every slot of the shard is held or waiting for its grace period.
    fn check_slow<S: Store<K, A::Cell>>(
        &self,
        shard: &S,
        slow: Slow<'_, K>,
        mut prior: Prior,
        mut guard: Guard,
    ) -> Result<Decision, CheckError> {
        let mut attempt = 0;
        loop {
            let last = attempt == NO_SLOT_RETRIES;
            if let Some(decision) = self.check_locked(shard, &slow, prior, &guard, last)? {
                return Ok(decision);
            }
            // Once unpinned, the slot `prior` names may be reused: it no longer identifies
            // anything (and if the key still had it, the first attempt returned).
            prior = None;
            if attempt < NO_SLOT_YIELDS {
                guard.repin_after(std::thread::yield_now);
            } else {
                // A thread preempted while pinned holds every grace period back: give it time.
                guard.repin_after(|| std::thread::sleep(NO_SLOT_SLEEP));
            }
            attempt += 1;
        }
    }

    /// The slow path, under the shard's lock: the key is looked up again (authoritatively); if
    /// `prior` says the check already updated the slot the key still has, that decision stands;
    /// otherwise the check is decided here, after moving the key to `force` (a quota passed with
    /// the check) or inserting it with `new_quota`. `None` when a new key found no slot free of
    /// its grace period (unless `last`: then the table-full policy answers).
    fn check_locked<S: Store<K, A::Cell>>(
        &self,
        shard: &S,
        slow: &Slow<'_, K>,
        prior: Prior,
        guard: &Guard,
        last: bool,
    ) -> Result<Option<Decision>, CheckError> {
        let Slow { hash, key, cost, new_quota, force } = *slow;
        let mut locked = shard.lock(guard);
        if let Some((pos, entry)) = locked.find(hash, key) {
            if let Some((slot, decision)) = prior {
                if locked.slot_of(entry) == slot {
                    return Ok(Some(decision));
                }
            }
            let mut entry = entry;
            if let Some(id) = force {
                if locked.quota(entry) != id {
                    entry = self.convert(&mut locked, pos, entry, hash, id).unwrap_or(entry);
                }
            }
            let algorithm = self.quotas.get(locked.quota(entry));
            check_cost(algorithm, cost)?;
            return Ok(Some(algorithm.decide_cell(locked.cell(entry), &self.clock, cost)));
        }
        let id = force.unwrap_or(new_quota);
        let algorithm = self.quotas.get(id);
        check_cost(algorithm, cost)?;
        if cost == 0 {
            // A peek inserts nothing.
            return Ok(Some(self.fresh_decision(algorithm, 0)));
        }
        let hash_key = |k: &K| self.hash(k);
        let Some(slot) = locked.take_slot(&hash_key) else {
            return Ok(last.then(|| self.table_full(algorithm, cost, None)));
        };
        if locked.is_full() {
            if let Err(retry) = self.make_room(&mut locked, self.clock.now_nanos_precise()) {
                locked.put_back(slot);
                return Ok(Some(self.table_full(algorithm, cost, Some(retry))));
            }
        }
        let entry =
            locked.insert(slot, hash, key.clone(), algorithm.new_cell(), id, heap_of(algorithm), &hash_key);
        Ok(Some(algorithm.decide_cell(locked.cell(entry), &self.clock, cost)))
    }

    /// The decision a fresh key gets for `cost`. Computed on a new cell when cells own no heap
    /// (all but the sliding log); for the log, built directly (reset: one period).
    fn fresh_decision(&self, algorithm: &A, cost: u64) -> Decision {
        if heap_of(algorithm) == 0 {
            return algorithm.decide_cell(&algorithm.new_cell(), &self.clock, cost);
        }
        let capacity = algorithm.capacity();
        let reset = if cost == 0 { 0 } else { algorithm.quota().period_nanos() };
        Decision::allowed(capacity, capacity - cost, reset)
    }

    /// The policy's decision for a new key that found no room. `retry` is the least time until
    /// a sampled key becomes idle, when the insert sampled any.
    fn table_full(&self, algorithm: &A, cost: u64, retry: Option<u64>) -> Decision {
        match self.policy {
            TableFullPolicy::AllowUntracked => {
                self.fresh_decision(algorithm, cost).with_fallback(Fallback::TableFullUntracked)
            }
            TableFullPolicy::DenyNew | TableFullPolicy::EvictClosestToIdle => {
                let retry = match retry {
                    Some(nanos) if nanos > 0 && nanos < u64::MAX => nanos,
                    _ => algorithm.quota().emission_interval_nanos(),
                };
                Decision::denied(algorithm.capacity(), 0, retry, 0).with_fallback(Fallback::TableFullDenied)
            }
        }
    }

    /// Frees room in a full shard: reclaims the idle keys (up to [`RECLAIM_BATCH`]) among the
    /// next `scan` entries from the sweep cursor, or, under
    /// [`TableFullPolicy::EvictClosestToIdle`], evicts the sampled key closest to idle that is
    /// not actively limited. On failure, returns the least
    /// time until a sampled key becomes idle (`u64::MAX` when none was sampled).
    ///
    /// `now` is the clock's precise reading: with the coarse clock running late on a busy
    /// machine, a flood at the bound found every sampled key not yet idle, and denied new keys
    /// whose room was in fact free (tens to hundreds per two seconds of a two-thread flood).
    fn make_room<L: StoreLocked<K, A::Cell>>(&self, locked: &mut L, now: u64) -> Result<(), u64> {
        let at = At(now);
        let hash_key = |k: &K| self.hash(k);
        let positions = locked.positions();
        let order = locked.scan_order();
        let mut pos = locked.cursor();
        let (mut examined, mut steps) = (0, 0);
        let (mut soonest, mut reclaimed) = (u64::MAX, 0);
        // The closest to idle that is not actively limited: (reset, position, entry).
        let mut closest: Option<(u64, usize, L::Entry)> = None;
        while examined < self.scan && steps < positions && reclaimed < RECLAIM_BATCH {
            let Some(entry) = locked.entry_at(pos) else {
                pos = order.next(pos);
                steps += 1;
                continue;
            };
            examined += 1;
            let algorithm = self.quotas.get(locked.quota(entry));
            if algorithm.is_idle(locked.cell(entry), now) {
                let keep = |cell: &A::Cell| !algorithm.is_idle(cell, now);
                if locked.unlink_if(pos, entry, heap_of(algorithm), keep, &WordFreezer(algorithm), &hash_key)
                {
                    // Look at `pos` again (not a step of the pass): a later entry may have
                    // shifted into it. Each unlink counts towards the batch, so this ends.
                    reclaimed += 1;
                    continue;
                }
                // Kept: a racing check used it after it looked idle. It is an active key now,
                // and a candidate for eviction like the others.
            }
            {
                let peek = algorithm.decide_cell(locked.cell(entry), &at, 0);
                let reset = peek.reset_after_nanos();
                soonest = soonest.min(reset);
                let closer = match closest {
                    Some((best, _, _)) => reset < best,
                    None => true,
                };
                if peek.remaining() > 0 && closer {
                    closest = Some((reset, pos, entry));
                }
            }
            pos = order.next(pos);
            steps += 1;
        }
        locked.set_cursor(pos);
        if !locked.is_full() {
            return Ok(());
        }
        if self.policy != TableFullPolicy::EvictClosestToIdle {
            return Err(soonest);
        }
        let Some((_, _, victim)) = closest else { return Err(soonest) };
        // Idle reclamation above may have shifted the victim: find it again by its key.
        let key = locked.key(victim);
        let found = locked.find(self.hash(key), key);
        let Some((pos, entry)) = found.filter(|&(_, e)| e == victim) else { return Err(soonest) };
        let algorithm = self.quotas.get(locked.quota(entry));
        // Keep it after all if a racing check just limited it.
        let keep = |cell: &A::Cell| algorithm.decide_cell(cell, &at, 0).remaining() == 0;
        if locked.unlink_if(pos, entry, heap_of(algorithm), keep, &WordFreezer(algorithm), &hash_key) {
            Ok(())
        } else {
            Err(soonest)
        }
    }

    /// Moves the key at `pos` to quota `id`, carrying over what it consumed. `None` when no slot
    /// is free of its grace period (the key keeps its quota for now).
    fn convert<L: StoreLocked<K, A::Cell>>(
        &self,
        locked: &mut L,
        pos: usize,
        entry: L::Entry,
        hash: u64,
        id: QuotaId,
    ) -> Option<L::Entry> {
        let old = self.quotas.get(locked.quota(entry));
        let new = self.quotas.get(id);
        let key = locked.key(entry).clone();
        let now = self.clock.now_nanos();
        let carry = |cell: &A::Cell| carry_over(old, new, cell, now);
        let hash_key = |k: &K| self.hash(k);
        let (old_heap, new_heap) = (heap_of(old), heap_of(new));
        locked
            .replace(pos, entry, old_heap, hash, key, id, new_heap, carry, &WordFreezer(old), &hash_key)
            .ok()
    }

    /// Reports `key`'s state without changing it (and without inserting it): for a key not held,
    /// what a fresh key would get.
    pub fn peek(&self, key: &K) -> Decision {
        on_shards!(self, shards => self.peek_in(shards, key))
    }

    fn peek_in<S: Store<K, A::Cell>>(&self, shards: &[S], key: &K) -> Decision {
        let hash = self.hash(key);
        let shard = self.shard(shards, hash);
        let guard = epoch::pin();
        if let Some(hit) = shard.find(hash, key, &guard) {
            // `None`: frozen; the lock holder is done with it once we hold the lock.
            if let Some(decision) = word::decide(self.quotas.get(hit.quota()), hit.cell(), &self.clock, 0) {
                return decision;
            }
        }
        let locked = shard.lock(&guard);
        match locked.find(hash, key) {
            Some((_, entry)) => {
                self.quotas.get(locked.quota(entry)).decide_cell(locked.cell(entry), &self.clock, 0)
            }
            None => {
                drop(locked);
                self.fresh_decision(self.quotas.get(self.quota_for_new(key)), 0)
            }
        }
    }

    /// Puts `key` back to full, keeping it (and its quota) in the table. Does nothing for a key
    /// not held.
    pub fn reset(&self, key: &K) {
        on_shards!(self, shards => self.reset_in(shards, key))
    }

    fn reset_in<S: Store<K, A::Cell>>(&self, shards: &[S], key: &K) {
        let hash = self.hash(key);
        let guard = epoch::pin();
        let locked = self.shard(shards, hash).lock(&guard);
        if let Some((_, entry)) = locked.find(hash, key) {
            self.quotas.get(locked.quota(entry)).reset_cell(locked.cell(entry));
        }
    }

    /// Gives back `cost` units an earlier allowed check of `key` took (for example when a later
    /// limit denied the same request; see [`WordAlgorithm::refund`](crate::WordAlgorithm::refund)).
    /// Returns `false`, changing nothing, when the key is not held (its state is fresh: nothing
    /// to give back) or the algorithm cannot refund (the sliding log). Takes the key's shard lock,
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
        on_shards!(self, shards => self.refund_in(shards, key, cost))
    }

    fn refund_in<S: Store<K, A::Cell>>(&self, shards: &[S], key: &K, cost: u64) -> bool {
        let hash = self.hash(key);
        let guard = epoch::pin();
        let locked = self.shard(shards, hash).lock(&guard);
        match locked.find(hash, key) {
            Some((_, entry)) => {
                self.quotas.get(locked.quota(entry)).refund_cell(locked.cell(entry), &self.clock, cost)
            }
            None => false,
        }
    }

    /// Forgets `key` (its state and its own quota); returns whether it was held. Its memory is
    /// reused once no check can still be reading it.
    pub fn remove(&self, key: &K) -> bool {
        on_shards!(self, shards => self.remove_in(shards, key))
    }

    fn remove_in<S: Store<K, A::Cell>>(&self, shards: &[S], key: &K) -> bool {
        let hash = self.hash(key);
        let guard = epoch::pin();
        let mut locked = self.shard(shards, hash).lock(&guard);
        let Some((pos, entry)) = locked.find(hash, key) else { return false };
        let heap = heap_of(self.quotas.get(locked.quota(entry)));
        locked.remove_at(pos, entry, heap, &|k: &K| self.hash(k));
        true
    }

    /// Gives a held key its own quota, keeping what it has consumed; returns whether the key is
    /// held (a key not held gets its quota when it is next checked: from the quota function,
    /// or [`check_n_with_quota`](Self::check_n_with_quota)).
    ///
    /// "Keeping what it consumed" means: the units the old quota counts as used at this instant
    /// (`capacity - remaining`, so a partly refilled unit counts as used) are taken from a fresh
    /// state of the new quota, at this instant, capped at the new capacity. So:
    /// - [`Gcra`] / [`TokenBucket`](crate::TokenBucket): the bucket holds as many tokens fewer
    ///   than full as before, and refills at the new rate from now;
    /// - [`FixedWindow`](crate::FixedWindow): the current window's count is kept (windows are
    ///   re-aligned to the new period);
    /// - [`SlidingWindowCounter`](crate::SlidingWindowCounter): the weighted estimate becomes the
    ///   current window's count (stricter: it now ages out with the current window);
    /// - [`SlidingWindowLog`](crate::SlidingWindowLog): the units in the window are re-dated to
    ///   now (stricter: they leave the window up to one period later).
    ///
    /// Units used beyond the new capacity are dropped: a key moved to a smaller quota and back
    /// comes back with at most the smaller capacity used. A check racing with the change on the
    /// same key counts once for the four single-word algorithms; for the sliding log it may count
    /// twice (never zero times: no update is lost).
    ///
    /// ```
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let limiter = Keyed::<u64, Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// limiter.check_n(&42, 8)?;
    /// assert!(limiter.set_quota(&42, Quota::per_second(5)?)?);
    /// assert!(!limiter.check(&42).is_allowed()); // 8 used of the new 5
    /// assert_eq!(limiter.quota_of(&42), Some(Quota::per_second(5)?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, key: &K, quota: Quota) -> Result<bool, QuotaError> {
        let id = self.quotas.intern(quota)?;
        Ok(on_shards!(self, shards => self.set_quota_in(shards, key, id)))
    }

    fn set_quota_in<S: Store<K, A::Cell>>(&self, shards: &[S], key: &K, id: QuotaId) -> bool {
        let hash = self.hash(key);
        for _ in 0..SET_QUOTA_TRIES {
            let guard = epoch::pin();
            let mut locked = self.shard(shards, hash).lock(&guard);
            let Some((pos, entry)) = locked.find(hash, key) else { return false };
            if locked.quota(entry) == id || self.convert(&mut locked, pos, entry, hash, id).is_some() {
                return true;
            }
            // No slot is free of its grace period: let other threads unpin, then try again.
            drop(locked);
            drop(guard);
            std::thread::yield_now();
        }
        false
    }

    /// The quota `key` is held under (`None` when not held).
    pub fn quota_of(&self, key: &K) -> Option<Quota> {
        on_shards!(self, shards => self.quota_of_in(shards, key))
    }

    fn quota_of_in<S: Store<K, A::Cell>>(&self, shards: &[S], key: &K) -> Option<Quota> {
        let hash = self.hash(key);
        let shard = self.shard(shards, hash);
        let guard = epoch::pin();
        if let Some(hit) = shard.find(hash, key, &guard) {
            return Some(self.quotas.get(hit.quota()).quota());
        }
        let locked = shard.lock(&guard);
        locked.find(hash, key).map(|(_, entry)| self.quotas.get(locked.quota(entry)).quota())
    }

    /// Reclaims every idle key (state indistinguishable from fresh), one shard at a time and a
    /// few hundred entries per lock hold, so checks of held keys never wait and inserts wait
    /// little. Returns how many keys it reclaimed. Inserts into full shards reclaim on their own;
    /// call this to return memory to the free lists sooner, e.g. from a periodic task.
    pub fn sweep_idle(&self) -> usize {
        on_shards!(self, shards => self.sweep_idle_in(shards))
    }

    fn sweep_idle_in<S: Store<K, A::Cell>>(&self, shards: &[S]) -> usize {
        let hash_key = |k: &K| self.hash(k);
        let mut reclaimed = 0;
        for shard in shards.iter() {
            let mut pos = 0;
            loop {
                let guard = epoch::pin();
                let mut locked = shard.lock(&guard);
                let positions = locked.positions();
                if pos >= positions {
                    break;
                }
                let end = (pos + SWEEP_STEP).min(positions);
                let now = self.clock.now_nanos_precise();
                while pos < end {
                    if let Some(entry) = locked.entry_at(pos) {
                        let algorithm = self.quotas.get(locked.quota(entry));
                        let keep = |cell: &A::Cell| !algorithm.is_idle(cell, now);
                        if algorithm.is_idle(locked.cell(entry), now)
                            && locked.unlink_if(
                                pos,
                                entry,
                                heap_of(algorithm),
                                keep,
                                &WordFreezer(algorithm),
                                &hash_key,
                            )
                        {
                            reclaimed += 1;
                            continue;
                        }
                    }
                    pos += 1;
                }
            }
        }
        reclaimed
    }
}

impl<K, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Number of keys held.
    pub fn len(&self) -> usize {
        on_shards!(self, shards => shards.iter().map(Store::len).sum())
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
        self.configs.len()
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

    /// Bytes the table holds on the heap and inline: shards, index, slots (keys and cells, at
    /// `size_of`), heap owned by cells (the sliding log's rings), slots and indexes waiting for
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
            + std::mem::size_of_val(&*self.configs)
            + on_shards!(self, shards => shards.iter().map(Store::memory).sum::<usize>())
            + self.quotas.bytes()
    }

    /// The most [`memory_bytes`](Self::memory_bytes) can ever report for this table, whatever
    /// keys arrive: every shard full, every slot of its grace-period reserve in use, its index
    /// at its largest with the indexes it replaced still waiting, bookkeeping queues at twice
    /// their contents, and all 4,095 extra quotas built. Counts each cell's heap (the sliding
    /// log's ring) at the default quota's size: per-key quotas with bigger logs can exceed it.
    pub fn memory_bound_bytes(&self) -> usize {
        let slot_bytes = std::mem::size_of::<Slot<K, A::Cell>>();
        let heap = heap_of(self.quotas.default_algorithm());
        let shard_bound = |c: &ShardConfig| match &self.shards {
            Shards::Lines(_) => LineShard::<K, A>::bound_bytes(c.max_keys),
            Shards::Slots(_) => c.bound_bytes(slot_bytes, heap),
        };
        std::mem::size_of::<Self>()
            + self.shards_bytes()
            + std::mem::size_of_val(&*self.configs)
            + self.configs.iter().map(shard_bound).sum::<usize>()
            + MAX_QUOTAS * (std::mem::size_of::<A>() + 64)
    }
}

impl<K, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// The shards, when they are lines (tests).
    #[cfg(test)]
    fn lines(&self) -> &[LineShard<K, A>] {
        match &self.shards {
            Shards::Lines(shards) => shards,
            Shards::Slots(_) => panic!("the table keeps slots"),
        }
    }

    /// The shards, when they are slots (tests).
    #[cfg(test)]
    fn slots(&self) -> &[Shard<K, A::Cell>] {
        match &self.shards {
            Shards::Slots(shards) => shards,
            Shards::Lines(_) => panic!("the table keeps lines"),
        }
    }

    /// Bytes of the shard structs.
    fn shards_bytes(&self) -> usize {
        on_shards!(self, shards => std::mem::size_of_val(&**shards))
    }
}

/// A fresh cell of `new` that has consumed, at `now`, what `cell` of `old` counts as used.
fn carry_over<A: Algorithm>(old: &A, new: &A, cell: &A::Cell, now: u64) -> A::Cell {
    let at = At(now);
    let used = old.capacity().saturating_sub(old.decide_cell(cell, &at, 0).remaining());
    let fresh = new.new_cell();
    let carried = used.min(new.capacity());
    if carried > 0 {
        // Allowed: a fresh state admits up to its capacity at once.
        new.decide_cell(&fresh, &at, carried);
    }
    fresh
}

#[cfg(test)]
mod tests;
