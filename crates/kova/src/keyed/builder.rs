//! `KeyedBuilder`: the keyed table's options.

use std::fmt;
use std::hash::Hash;

use super::hot::{HotKeys, HotSlots, RefundWord};
use super::line::MAX_KEYS;
use super::policy::{FullSketch, TableFullPolicy};
use super::quotas::{DEFAULT_MAX_QUOTAS, MAX_QUOTAS};
use super::{Keyed, KeyedError};
use crate::clock::BuilderClock;
use crate::striped::StripeShape;
use crate::striped::StripedError;
use crate::{Algorithm, Clock, CoarseClock, Gcra, Quota, QuotaError, WordAlgorithm};

/// A per-key quota function: `None` for the default quota.
pub(super) type QuotaFn<K> = Box<dyn Fn(&K) -> Option<Quota> + Send + Sync>;

/// Options of a [`Keyed`] table: from [`Keyed::builder`] (or
/// [`Keyed::builder_from_algorithm`]), on the coarse clock unless [`clock`](Self::clock) sets
/// another.
///
/// ```
/// use kova::keyed::TableFullPolicy;
/// use kova::{Gcra, Keyed, ManualClock, Quota};
/// let limiter = Keyed::<String, Gcra>::builder(Quota::per_minute(60)?)
///     .clock(ManualClock::new())
///     .max_keys(50_000)
///     .shards(16)
///     .table_full(TableFullPolicy::DenyNew)
///     .reclaim_scan(32)
///     // Admins get more; everyone else the default quota.
///     .quota_fn(|user: &String| user.starts_with("admin:").then(|| Quota::per_minute(600).unwrap()))
///     .build()?;
/// assert_eq!(limiter.check(&"admin:root".to_string()).remaining(), 599);
/// assert_eq!(limiter.check(&"guest".to_string()).remaining(), 59);
/// assert_eq!(limiter.shard_count(), 16);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedBuilder<K, A: Algorithm = Gcra, C: Clock = CoarseClock> {
    algorithm: Result<A, QuotaError>,
    clock: BuilderClock<C>,
    shards: Option<usize>,
    max_keys: usize,
    policy: TableFullPolicy,
    scan: usize,
    quota_fn: Option<QuotaFn<K>>,
    /// Words of the doorkeeper asked for ([`doorkeeper`](Self::doorkeeper)); `None` for the
    /// default, which follows `max_keys`.
    door_words: Option<usize>,
    /// Hot slots asked for ([`hot_keys`](Self::hot_keys)): their count, shape and the
    /// algorithm's word refund.
    hot: Option<(HotKeys, StripeShape, RefundWord<A>)>,
    /// Bytes of the sketch of [`TableFullPolicy::Sketch`] ([`sketch_memory_bytes`](Self::sketch_memory_bytes)).
    sketch_bytes: usize,
    /// Distinct quotas the table holds at most ([`max_quotas`](Self::max_quotas)).
    max_quotas: usize,
}

impl<K, A: Algorithm, C: Clock> fmt::Debug for KeyedBuilder<K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuilder")
            .field("quota", &self.algorithm.as_ref().map(|a| a.quota()))
            .field("shards", &self.shards)
            .field("max_keys", &self.max_keys)
            .field("policy", &self.policy)
            .field("reclaim_scan", &self.scan)
            .field("quota_fn", &self.quota_fn.is_some())
            .field("sketch_memory_bytes", &self.sketch_bytes)
            .field("max_quotas", &self.max_quotas)
            .finish_non_exhaustive()
    }
}

impl<K, A: Algorithm, C: Clock> KeyedBuilder<K, A, C> {
    /// The default [`max_keys`](Self::max_keys): 2^20 = 1,048,576 keys (about 26 MB for `u64`
    /// keys with a single-word algorithm, when full).
    pub const DEFAULT_MAX_KEYS: usize = 1 << 20;
    /// The default [`reclaim_scan`](Self::reclaim_scan).
    pub const DEFAULT_RECLAIM_SCAN: usize = 16;
    /// The most shards a table has.
    pub const MAX_SHARDS: usize = 1 << 16;
    /// The most keys a table holds: [`MAX_SHARDS`](Self::MAX_SHARDS) shards of at most 2^24
    /// keys each (one shard's rehash, which holds its lock while it moves every key, stays short).
    pub const MAX_KEYS: usize = Self::MAX_SHARDS * MAX_KEYS;
    /// The most entries one insert into a full shard examines: as many as a shard holds.
    pub const MAX_RECLAIM_SCAN: usize = MAX_KEYS;
    /// The most words of a [`doorkeeper`](Self::doorkeeper) (128 MiB): far more than a flood of
    /// one-off keys needs for the time a unit takes to become idle.
    pub const MAX_DOOR_WORDS: usize = 1 << 24;
    /// The default [`max_quotas`](Self::max_quotas).
    pub const DEFAULT_MAX_QUOTAS: usize = DEFAULT_MAX_QUOTAS;
    /// The most [`max_quotas`](Self::max_quotas): every id a line can store.
    pub const MAX_QUOTAS: usize = MAX_QUOTAS;
    /// The fewest words of the default [`doorkeeper`](Self::doorkeeper) (8 KiB).
    pub const MIN_DEFAULT_DOOR_WORDS: usize = 1 << 10;
    /// The most words of the default [`doorkeeper`](Self::doorkeeper) (512 KiB): enough for
    /// a flood of millions of one-off keys a second whose units become idle within a few
    /// milliseconds, and small next to a full table of the default [`max_keys`](Self::max_keys).
    pub const MAX_DEFAULT_DOOR_WORDS: usize = 1 << 16;

    /// A builder for a table whose default quota is `quota`, reading `clock`.
    pub(crate) fn new(quota: Quota, clock: BuilderClock<C>) -> Self {
        Self::from_result(A::from_quota(quota), clock)
    }

    /// The default doorkeeper's words for a table of at most `max_keys` keys.
    fn default_door_words(max_keys: usize) -> usize {
        max_keys.next_power_of_two().clamp(Self::MIN_DEFAULT_DOOR_WORDS, Self::MAX_DEFAULT_DOOR_WORDS)
    }

    /// A builder for a table whose default quota is `algorithm`'s, reading `clock`.
    pub(crate) fn from_algorithm(algorithm: A, clock: BuilderClock<C>) -> Self {
        Self::from_result(Ok(algorithm), clock)
    }

    fn from_result(algorithm: Result<A, QuotaError>, clock: BuilderClock<C>) -> Self {
        KeyedBuilder {
            algorithm,
            clock,
            shards: None,
            max_keys: Self::DEFAULT_MAX_KEYS,
            policy: TableFullPolicy::default(),
            scan: Self::DEFAULT_RECLAIM_SCAN,
            quota_fn: None,
            door_words: None,
            hot: None,
            sketch_bytes: crate::sketch::DEFAULT_MEMORY_BYTES,
            max_quotas: Self::DEFAULT_MAX_QUOTAS,
        }
    }

    /// Reads `clock` instead.
    pub fn clock<C2: Clock>(self, clock: C2) -> KeyedBuilder<K, A, C2> {
        KeyedBuilder {
            algorithm: self.algorithm,
            clock: BuilderClock::Given(clock),
            shards: self.shards,
            max_keys: self.max_keys,
            policy: self.policy,
            scan: self.scan,
            quota_fn: self.quota_fn,
            door_words: self.door_words,
            hot: self.hot,
            sketch_bytes: self.sketch_bytes,
            max_quotas: self.max_quotas,
        }
    }

    /// Number of shards, from 1 to [`MAX_SHARDS`](Self::MAX_SHARDS) ([`KeyedError::Shards`]
    /// otherwise), rounded up to a power of two (default: 4 per available core, rounded up to a
    /// power of two). Then kept at most `max_keys` (so that every shard holds a key), and at
    /// least what `max_keys` needs (one shard holds at most about 16.7 million keys). One shard
    /// makes a small model for tests.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// The most keys the table holds, from 1 to [`MAX_KEYS`](Self::MAX_KEYS)
    /// ([`KeyedError::MaxKeys`] otherwise; default [`DEFAULT_MAX_KEYS`](Self::DEFAULT_MAX_KEYS)).
    /// They are split evenly over the shards, so
    /// a shard may fill a little before the table does; when a new key finds its shard full, the
    /// insert reclaims idle keys or applies the [`TableFullPolicy`]. Memory is allocated as keys
    /// arrive, up to [`Keyed::memory_bound_bytes`].
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// What to do with a new key when its shard is full of keys that are not idle (default:
    /// [`TableFullPolicy::EvictClosestToIdle`]).
    pub fn table_full(mut self, policy: TableFullPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Bytes of the sketch that decides new keys under [`TableFullPolicy::Sketch`] (default
    /// [`sketch::DEFAULT_MEMORY_BYTES`](crate::sketch::DEFAULT_MEMORY_BYTES), 64 KiB): a power of
    /// two from 64 to [`sketch::MAX_MEMORY_BYTES`](crate::sketch::MAX_MEMORY_BYTES)
    /// ([`KeyedError::Sketch`] otherwise), allocated when the table is built and counted in
    /// [`Keyed::memory_bytes`]. The [`sketch`](crate::sketch) module's sizing rule applies to the
    /// keys that overflow the table at once. Unused (and not allocated) under another policy.
    ///
    /// ```
    /// use kova::sketch::SketchError;
    /// use kova::keyed::{KeyedError, TableFullPolicy};
    /// use kova::{Gcra, Keyed, ManualClock, Quota, TokenBucket};
    /// let odd = Keyed::<u64, Gcra>::builder(Quota::per_second(1)?).clock(ManualClock::new())
    ///     .table_full(TableFullPolicy::Sketch)
    ///     .sketch_memory_bytes(1000)
    ///     .build();
    /// assert_eq!(odd.unwrap_err(), KeyedError::Sketch(SketchError::Memory { bytes: 1000 }));
    /// let bucket = Keyed::<u64, TokenBucket>::builder(Quota::per_second(1)?).clock(ManualClock::new())
    ///     .table_full(TableFullPolicy::Sketch)
    ///     .build();
    /// assert_eq!(bucket.unwrap_err(), KeyedError::SketchAlgorithm { algorithm: "token_bucket" });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sketch_memory_bytes(mut self, bytes: usize) -> Self {
        self.sketch_bytes = bytes;
        self
    }

    /// How many entries an insert into a full shard examines, from the shard's sweep cursor, to
    /// reclaim idle keys and to choose an eviction victim, from 1 to
    /// [`MAX_RECLAIM_SCAN`](Self::MAX_RECLAIM_SCAN) ([`KeyedError::ReclaimScan`] otherwise;
    /// default [`DEFAULT_RECLAIM_SCAN`](Self::DEFAULT_RECLAIM_SCAN)). More finds idle keys sooner and
    /// better victims, at more work per insert into a full shard.
    pub fn reclaim_scan(mut self, entries: usize) -> Self {
        self.scan = entries;
        self
    }

    /// The doorkeeper's size, in words of 8 bytes (rounded up to a power of two; 0 for none), at
    /// most [`MAX_DOOR_WORDS`](Self::MAX_DOOR_WORDS) ([`KeyedError::Doorkeeper`] otherwise).
    /// By default a table has one of `max_keys` words (rounded up to a power of two), kept
    /// between [`MIN_DEFAULT_DOOR_WORDS`](Self::MIN_DEFAULT_DOOR_WORDS) and
    /// [`MAX_DEFAULT_DOOR_WORDS`](Self::MAX_DEFAULT_DOOR_WORDS): the pages of its array are
    /// zeroed by the system as they are first written, so a table that sees few keys touches
    /// little of it.
    ///
    /// A key's first check at the default quota is admitted at the door, its time written in one
    /// word, and the key enters the table only on its second check within the time one unit
    /// takes to become idle, charged the first check's unit at the time it was made. A flood of
    /// keys seen once (rotating addresses, random API keys) then never inserts, evicts or
    /// rehashes, leaves the held keys in place, and takes no lock (the admission is one
    /// compare-exchange on the door's word).
    ///
    /// No key gets more than its quota: the door charges exactly what the table would (see the
    /// `keyed::door` module), and a key whose word holds another key's young entry goes to the
    /// table. What changes: a key admitted only at the door is not held, so [`Keyed::len`] does
    /// not count it, and [`Keyed::promote`], [`Keyed::set_quota`] and [`Keyed::quota_of`] find it
    /// only from its second check (a quota function or a quota passed with the check applies
    /// from its first); [`Keyed::peek`] reports its unit,
    /// and [`Keyed::reset`], [`Keyed::remove`] and [`Keyed::refund`] forget it, as they would the
    /// state of a held key. Two keys that share a word and a fingerprint (of 24 bits) can make the
    /// second pay the first one's unit. Default quotas whose unit never becomes idle get no
    /// doorkeeper. Turn it off (`doorkeeper(0)`) where every key's first check must insert it:
    /// a table whose `len()` counts clients, or one that promotes keys by name before their
    /// second check.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let limiter = Keyed::<u64, Gcra>::builder(Quota::per_second(1)?).clock(ManualClock::new()).build()?;
    /// assert!(limiter.check(&7).is_allowed()); // admitted at the door
    /// assert_eq!(limiter.len(), 0);
    /// assert!(!limiter.check(&7).is_allowed()); // inserted, charged the first check's unit
    /// assert_eq!(limiter.len(), 1);
    ///
    /// let no_door = Keyed::<u64, Gcra>::builder(Quota::per_second(1)?).clock(ManualClock::new())
    ///     .doorkeeper(0)
    ///     .build()?;
    /// assert!(no_door.check(&7).is_allowed());
    /// assert_eq!(no_door.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn doorkeeper(mut self, words: usize) -> Self {
        self.door_words = Some(words);
        self
    }

    /// Per-key quotas: `quota_fn(key)` is called when a key is inserted (first seen, or back
    /// after being reclaimed), outside the table's locks and outside its reclamation's grace
    /// periods, so a function that blocks (a lookup in another service) delays only the checks
    /// that wait for its answer; `None` means the default quota. To change the quota of a key
    /// already held, call [`Keyed::set_quota`] (the function is not consulted again while the
    /// key is held).
    ///
    /// A quota the table cannot use (one the algorithm cannot represent, or one distinct quota
    /// more than [`max_quotas`](Self::max_quotas)) is never silently replaced by another: the
    /// key is not inserted, and each of its checks is answered as the
    /// [table-full policy](Self::table_full) answers a key the table has no room for, under
    /// the default quota and marked so ([`Fallback::TableFullDenied`](crate::Fallback) by
    /// default; untracked, or on the sketch, under the other policies). Each is counted in
    /// [`Keyed::rejected_quotas`], and the function is asked again at the key's next check.
    ///
    /// ```
    /// use kova::{Fallback, FixedWindow, Keyed, ManualClock, Quota};
    /// let table = Keyed::<u64, FixedWindow, _>::builder(Quota::per_second(10)?)
    ///     .clock(ManualClock::new())
    ///     // A fixed window has no burst of its own: this quota cannot be used.
    ///     .quota_fn(|&key| (key == 7).then(|| Quota::per_second(10).unwrap().with_burst(50).unwrap()))
    ///     .build()?;
    /// let refused = table.check(&7);
    /// assert_eq!((refused.is_allowed(), refused.fallback()), (false, Some(Fallback::TableFullDenied)));
    /// assert_eq!(table.rejected_quotas(), 1);
    /// assert!(table.check(&8).is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota_fn(mut self, quota_fn: impl Fn(&K) -> Option<Quota> + Send + Sync + 'static) -> Self {
        self.quota_fn = Some(Box::new(quota_fn));
        self
    }

    /// The most distinct quotas the table holds, its default quota included: from 1 to
    /// [`MAX_QUOTAS`](Self::MAX_QUOTAS) (65,536; [`KeyedError::MaxQuotas`] otherwise), by
    /// default [`DEFAULT_MAX_QUOTAS`](Self::DEFAULT_MAX_QUOTAS) (4,096). Each distinct quota a key
    /// is given ([`quota_fn`](Self::quota_fn), [`Keyed::check_n_with_quota`],
    /// [`Keyed::set_quota`]) keeps one built algorithm for the table's life; one more than this
    /// is refused ([`Keyed::rejected_quotas`] counts the quota function's). A table keyed by
    /// tenants with plans of their own may need more; each costs a built algorithm (pages of
    /// 64 are built as ids are handed out) and an entry of the quotas' map, and
    /// [`Keyed::memory_bound_bytes`] counts the most the table may hold.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, Quota};
    /// let table = Keyed::<u64, Gcra>::builder(Quota::per_second(10)?).max_quotas(2).build()?;
    /// assert!(table.check_n_with_quota(&1, Quota::per_second(20)?, 1).is_ok());
    /// assert!(table.check_n_with_quota(&2, Quota::per_second(30)?, 1).is_err()); // a third quota
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_quotas(mut self, quotas: usize) -> Self {
        self.max_quotas = quotas;
        self
    }
}

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> KeyedBuilder<K, A, C> {
    /// Builds the table; an error when the default quota cannot be represented by the algorithm
    /// ([`KeyedError::Quota`]) or an option is out of its range (the error names it).
    ///
    /// ```
    /// use kova::keyed::KeyedError;
    /// use kova::{Gcra, Keyed, Quota};
    /// let no_keys = Keyed::<u64, Gcra>::builder(Quota::per_second(1)?).max_keys(0).build();
    /// assert_eq!(no_keys.unwrap_err(), KeyedError::MaxKeys { max_keys: 0, max: 1 << 40 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<Keyed<K, A, C>, KeyedError> {
        if let Err(error) = &self.algorithm {
            return Err(KeyedError::Quota(*error));
        }
        self.check_options()?;
        Ok(self.build_checked()?)
    }

    /// Every option within its range, or the error naming the first one that is not.
    fn check_options(&self) -> Result<(), KeyedError> {
        if let Some(shards) = self.shards.filter(|&s| s == 0 || s > Self::MAX_SHARDS) {
            return Err(KeyedError::Shards { shards, max: Self::MAX_SHARDS });
        }
        if self.max_keys == 0 || self.max_keys > Self::MAX_KEYS {
            return Err(KeyedError::MaxKeys { max_keys: self.max_keys, max: Self::MAX_KEYS });
        }
        if self.scan == 0 || self.scan > Self::MAX_RECLAIM_SCAN {
            return Err(KeyedError::ReclaimScan { entries: self.scan, max: Self::MAX_RECLAIM_SCAN });
        }
        if let Some(words) = self.door_words.filter(|&w| w > Self::MAX_DOOR_WORDS) {
            return Err(KeyedError::Doorkeeper { words, max: Self::MAX_DOOR_WORDS });
        }
        if self.max_quotas == 0 || self.max_quotas > Self::MAX_QUOTAS {
            return Err(KeyedError::MaxQuotas { quotas: self.max_quotas, max: Self::MAX_QUOTAS });
        }
        if self.policy == TableFullPolicy::Sketch {
            if let Ok(algorithm) = &self.algorithm {
                FullSketch::check(algorithm, self.sketch_bytes)?;
            }
            if let Some(words) = self.door_words.filter(|&w| w > 0) {
                return Err(KeyedError::SketchDoorkeeper { words });
            }
        }
        Ok(())
    }

    /// Builds the table from options in range (the defaults, or checked by `check_options`).
    pub(super) fn build_checked(self) -> Result<Keyed<K, A, C>, QuotaError> {
        debug_assert_eq!(self.check_options(), Ok(()));
        let algorithm = self.algorithm?;
        let mut shards =
            self.shards.unwrap_or_else(default_shards).clamp(1, Self::MAX_SHARDS).next_power_of_two();
        let max_keys = self.max_keys;
        while shards > 1 && shards > max_keys {
            shards /= 2;
        }
        while shards < Self::MAX_SHARDS && max_keys.div_ceil(shards) > MAX_KEYS {
            shards *= 2;
        }
        // Under the sketch policy the table has no door (`check_options` refused one asked for).
        let sketch = self.policy == TableFullPolicy::Sketch;
        let door_words = match self.door_words {
            _ if sketch => 0,
            Some(words) => words,
            None => Self::default_door_words(max_keys),
        };
        Ok(Keyed::from_parts(
            algorithm,
            self.clock.into_clock(),
            shards,
            max_keys,
            self.policy,
            self.scan,
            self.quota_fn,
        )
        .with_max_quotas(self.max_quotas)
        .with_door(door_words)
        .with_hot(self.hot.map(|(hot, shape, refund)| HotSlots::new(hot, shape, refund)))
        .with_full_sketch(sketch.then(|| FullSketch::new(self.sketch_bytes))))
    }
}

impl<K, W: WordAlgorithm, C: Clock> KeyedBuilder<K, W, C> {
    /// Stripes contended keys ([`HotKeys`]): a key can move into one of `max_hot` hot slots,
    /// where its checks spend from per-thread stripes (each on its own cache line) that lease
    /// batches from the key's state, as a [`StripedLimiter`](crate::striped::StripedLimiter) does, and
    /// back into its line when it is demoted. Only for word algorithms (whose state is one word
    /// inline in the table): the method does not exist for others.
    ///
    /// A key is promoted when checks of it see [`HotKeys::promote_after`] compare-exchanges of
    /// its word fail within [`CONTENTION_WINDOW`](crate::keyed::CONTENTION_WINDOW) (counted on the CAS
    /// loop's failure branch only), or by [`Keyed::promote`]. It is demoted by
    /// [`sweep_idle`](Keyed::sweep_idle) once no stripe leased from it between two sweeps, by
    /// [`Keyed::demote`], and by itself before anything under the lock reads or writes its
    /// state (a peek under the lock, reset, refund, removal, a quota change, a reservation, a
    /// settled cost). Striped keys are never reclaimed or evicted. So hot keys suit keys that
    /// are checked: a contended key that is also reserved, settled or limited by
    /// [`KeyedLimits`](crate::limits::KeyedLimits) is demoted by each of those calls and promoted again by
    /// the contention that follows, paying a lock-holder move each time.
    ///
    /// **The bound**, per striped key, is the striped limiter's: over any interval of length
    /// `T`, the key admits at most what its algorithm admits over `T` plus `stripes x batch`
    /// units (plus one batch per check leasing at that instant), and at most what the algorithm
    /// admits over `T + lease`. Nothing is lost: unspent units go back when a lease expires and
    /// when the key is demoted. A decision spent from a stripe's lease, and every denial of a
    /// striped key, is marked [`Fallback::StripeLease`](crate::Fallback::StripeLease); an
    /// admission decided on the key's state alone is exact and unmarked.
    ///
    /// **Off by default, and why.** A striped key is held to the bound above, not to its
    /// quota exactly, and each of its decisions may carry a fallback mark; a table built with
    /// no options keeps every key exact, as its docs and [`Decision`](crate::Decision) promise.
    /// What the option costs a table whose keys never get hot is measured by kova-bench beside
    /// the default table (`gcra_hot_keys` in the many-key and new-key scenarios, with its target
    /// of at least 0.98x), so turning it on for such a table costs what the report says.
    ///
    /// **Memory**: the slots are allocated when the table is built, counted in
    /// [`Keyed::memory_bytes`] and [`Keyed::memory_bound_bytes`]: per slot, the central word on
    /// its own 128-byte line, the key's hash and the stripes' pointer, and 128 bytes per stripe.
    ///
    /// Errors: a stripe count, batch or lease out of range (as for the striped limiter), or
    /// `max_hot` 0 or above [`MAX_HOT_KEYS`](crate::keyed::MAX_HOT_KEYS).
    ///
    /// ```
    /// use kova::keyed::HotKeys;
    /// use kova::{Fallback, Gcra, Keyed, ManualClock, Quota};
    /// let limiter = Keyed::<u64, Gcra>::builder(Quota::per_second(100)?).clock(ManualClock::new())
    ///     .hot_keys(HotKeys::new(4).stripes(2).batch(10))?
    ///     .build()?;
    /// limiter.check(&7); // admitted at the doorkeeper
    /// limiter.check(&7); // held from now on
    /// assert!(limiter.promote(&7));
    /// let decision = limiter.check(&7); // a stripe leased 10 units, spent 1
    /// assert_eq!(decision.fallback(), Some(Fallback::StripeLease));
    /// assert_eq!(decision.remaining(), 9);
    /// assert!(limiter.demote(&7)); // the 9 go back
    /// assert_eq!(limiter.peek(&7).remaining(), 97);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hot_keys(mut self, hot: HotKeys) -> Result<Self, StripedError> {
        let capacity = match &self.algorithm {
            Ok(algorithm) => algorithm.capacity(),
            Err(error) => return Err(StripedError::Quota(*error)),
        };
        let (hot, shape) = hot.checked(capacity)?;
        let refund: RefundWord<W> = |algorithm, word, now, units| algorithm.refund(word, now, units);
        self.hot = Some((hot, shape, refund));
        Ok(self)
    }
}

fn default_shards() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores * 4).next_power_of_two()
}
