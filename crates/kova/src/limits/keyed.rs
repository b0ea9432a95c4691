//! Several limits per key: one keyed table per limit, checked then refunded.

use std::fmt;
use std::hash::Hash;

use super::cells::NONE;
use super::{LimitsDecision, LimitsError, MAX_LIMITS};
use crate::keyed::Pinned;
use crate::loom::atomic::Ordering;
use crate::{CheckError, Clock, Decision, Keyed, Quota, WordAlgorithm};

/// [`Limits`](super::Limits) per key: up to [`MAX_LIMITS`] quotas for every key, decided all or
/// nothing, with each limit's state in its own [`Keyed`] table.
///
/// The protocol is check then refund, with the bound [`Limits`](super::Limits) states for three
/// or four limits (whatever the count here): never more than any limit's own bound, a denial has
/// taken nothing once it returns, and while a check that will be denied runs, the units it holds
/// on the earlier limits of its key can deny a concurrent check of the same key.
///
/// ```
/// use kova::{Gcra, KeyedLimits, ManualClock, Quota};
/// let limits = KeyedLimits::<u64, Gcra, _>::with_clock(
///     [Quota::per_second(10)?, Quota::per_hour(100)?],
///     ManualClock::new(),
/// )?;
/// assert!(limits.check_n(&7, 10)?.is_allowed());
/// let denied = limits.check(&7);
/// assert_eq!((denied.is_allowed(), denied.decided_by()), (false, 0));
/// assert_eq!(denied.limit_decisions()[1].remaining(), 90); // nothing taken
/// assert!(limits.check(&8).is_allowed()); // another key
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedLimits<K, W: WordAlgorithm, C: Clock> {
    tables: Vec<Keyed<K, W, C>>,
    capacity: u64,
    /// Whether every table hashes keys as the first does (tables built here), so that a key
    /// is hashed once.
    one_hash: bool,
}

impl<K, W: WordAlgorithm, C: Clock> fmt::Debug for KeyedLimits<K, W, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimits").field("limits", &self.tables.len()).finish()
    }
}

impl<K: Hash + Eq + Clone, W: WordAlgorithm, C: Clock + Clone> KeyedLimits<K, W, C> {
    /// One table per quota, each with [`Keyed::with_clock`]'s defaults, on clones of `clock`.
    pub fn with_clock(quotas: impl IntoIterator<Item = Quota>, clock: C) -> Result<Self, LimitsError> {
        let mut tables = Vec::new();
        for (index, quota) in quotas.into_iter().enumerate() {
            if index >= MAX_LIMITS {
                return Err(LimitsError::TooMany { count: index + 1, max: MAX_LIMITS });
            }
            let mut table = Keyed::with_clock(quota, clock.clone())
                .map_err(|error| LimitsError::Quota { index, error })?;
            if let Some(first) = tables.first() {
                table.share_hasher_of(first);
            }
            tables.push(table);
        }
        let mut limits = Self::from_tables(tables)?;
        limits.one_hash = true;
        Ok(limits)
    }
}

impl<K: Hash + Eq + Clone, W: WordAlgorithm, C: Clock> KeyedLimits<K, W, C> {
    /// Limits from tables built as needed (their own key bounds, shards, per-key quotas), in
    /// order. They should read the same clock.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, KeyedLimits, Quota};
    /// let per_second = Keyed::<u64, Gcra>::builder(Quota::per_second(5)?).max_keys(10_000).build()?;
    /// let per_day = Keyed::<u64, Gcra>::builder(Quota::per_day(1_000)?).max_keys(10_000).build()?;
    /// let limits = KeyedLimits::from_tables(vec![per_second, per_day])?;
    /// assert_eq!(limits.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_tables(tables: Vec<Keyed<K, W, C>>) -> Result<Self, LimitsError> {
        if tables.len() > MAX_LIMITS {
            return Err(LimitsError::TooMany { count: tables.len(), max: MAX_LIMITS });
        }
        let capacity = tables.iter().map(|t| t.algorithm().capacity()).min().ok_or(LimitsError::Empty)?;
        Ok(KeyedLimits { tables, capacity, one_hash: false })
    }

    /// Checks one unit of `key` against every limit.
    #[inline(always)]
    pub fn check(&self, key: &K) -> LimitsDecision {
        match self.check_n(key, 1) {
            Ok(answer) => answer,
            // Cost 1 never exceeds a capacity; a key's own quota (a table's quota function)
            // with a smaller one cannot exist either (capacities are at least 1).
            Err(_) => self.peek(key),
        }
    }

    /// Checks `cost` units of `key` against every limit, all or nothing; an error when `cost`
    /// exceeds a limit's capacity for this key.
    #[inline(always)]
    pub fn check_n(&self, key: &K, cost: u64) -> Result<LimitsDecision, CheckError> {
        if cost > self.capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity: self.capacity });
        }
        match self.tables.len() {
            1 => self.check_exactly::<1>(key, cost),
            2 => self.check_exactly::<2>(key, cost),
            3 => self.check_exactly::<3>(key, cost),
            _ => self.check_exactly::<MAX_LIMITS>(key, cost),
        }
    }

    /// The check over exactly `N` tables.
    ///
    /// The key is hashed once when the tables share a hasher, every table's line is fetched
    /// before the first is decided, and one pin serves every table the key is found in
    /// without the lock; a table's slow path takes the pin (it may unpin while it waits), and
    /// so does a denial, before the refunds. With `N` known, the decisions stay in registers
    /// until the answer is built.
    #[inline(always)]
    fn check_exactly<const N: usize>(&self, key: &K, cost: u64) -> Result<LimitsDecision, CheckError> {
        let tables: &[Keyed<K, W, C>; N] = self.tables[..].try_into().expect("N is the table count");
        let first = tables[0].key_hash(key);
        let hash_in = |i: usize| {
            if i == 0 || self.one_hash {
                first
            } else {
                tables[i].key_hash(key)
            }
        };
        for (i, table) in tables.iter().enumerate() {
            table.prefetch_hash(hash_in(i));
        }
        let mut decisions = [NONE; N];
        let mut pinned = None;
        for i in 0..N {
            let pin = pinned.take().unwrap_or_else(Pinned::new);
            match tables[i].check_n_pinned(hash_in(i), key, cost, pin, &mut decisions[i]) {
                Ok(back) => pinned = back,
                Err(error) => {
                    self.refund_first(i, key, cost);
                    return Err(error);
                }
            }
            if decisions[i].is_allowed() {
                continue;
            }
            drop(pinned);
            return Ok(self.deny(i, key, cost, &decisions));
        }
        Ok(LimitsDecision::of(decisions, true))
    }

    /// Limit `i` denied `key` after the ones before it took `cost`: they get it back, and the
    /// answer shows what every limit holds now.
    #[cold]
    #[inline(never)]
    fn deny<const N: usize>(&self, i: usize, key: &K, cost: u64, decided: &[Decision; N]) -> LimitsDecision {
        self.refund_first(i, key, cost);
        let mut decisions = *decided;
        for j in (0..N).filter(|&j| j != i) {
            decisions[j] = self.look(j, key, cost);
        }
        LimitsDecision::of(decisions, false)
    }

    /// Every limit's state for `key`, changing nothing.
    pub fn peek(&self, key: &K) -> LimitsDecision {
        let mut decisions = [NONE; MAX_LIMITS];
        for (i, table) in self.tables.iter().enumerate() {
            decisions[i] = table.peek(key);
        }
        LimitsDecision::new(decisions, self.tables.len(), true)
    }

    /// Gives `cost` units of `key` back to every limit.
    pub fn refund(&self, key: &K, cost: u64) {
        self.refund_first(self.tables.len(), key, cost);
    }

    /// How many limits.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// Always false: there is at least one limit.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// The tables, one per limit, in order.
    pub fn tables(&self) -> &[Keyed<K, W, C>] {
        &self.tables
    }

    fn refund_first(&self, count: usize, key: &K, cost: u64) {
        for table in &self.tables[..count] {
            table.refund(key, cost);
        }
    }

    /// What limit `j` would say to `cost` units of `key` now, writing nothing: its denial, or a
    /// peek when it would admit.
    fn look(&self, j: usize, key: &K, cost: u64) -> Decision {
        let table = &self.tables[j];
        // A key not held is looked at in the state its insert would give it: what the doorkeeper
        // admitted of it counts.
        let (algorithm_decision, peek) = table.with_cell_or_new(key, |algorithm, cell, clock| {
            // Acquire as in `decide_cell`: the clock read after it is no older than the writer's.
            let word = cell.load(Ordering::Acquire);
            let now = clock.now_nanos();
            (algorithm.decide(word, now, cost).0, algorithm.decide(word, now, 0).0)
        });
        if algorithm_decision.is_allowed() {
            peek
        } else {
            algorithm_decision
        }
    }
}
