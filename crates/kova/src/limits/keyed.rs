//! Several limits per key: one keyed table whose cell holds every limit of its key.

use std::fmt;
use std::hash::Hash;

use super::composite::Composite;
use super::seen::Seen;
use super::{KeyedLimitsBuilder, LimitsDecision, LimitsError, MAX_LIMITS};
use crate::clock::BuilderClock;
use crate::reservation::Settlement;
use crate::{CheckError, Clock, CoarseClock, Decision, Gcra, Keyed, Quota, WordAlgorithm};

/// [`Limits`](super::Limits) per key: up to [`MAX_LIMITS`] quotas for every key, decided all or
/// nothing, with the key's limits kept together in one cell of one [`Keyed`]-style table. A
/// check hashes and finds its key once and decides as [`Limits`](super::Limits) does: one or
/// two limits by one compare-and-swap over both words, exactly the sequential composite; three
/// or four by check then refund over two words within the key's cell, with the bound stated
/// there.
///
/// The table is bounded as a [`Keyed`] table is ([`builder`](Self::builder) for its options)
/// and has no doorkeeper: every key's first check inserts it. Each key's cell is one allocation
/// padded to its own cache lines (128 bytes on x86-64), so that keys checked on different
/// threads never contend on a line they happen to share.
///
/// ```
/// use kova::limits::KeyedLimits;
/// use kova::{Gcra, ManualClock, Quota};
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
pub struct KeyedLimits<K, W: WordAlgorithm = Gcra, C: Clock = CoarseClock> {
    pub(super) table: Keyed<K, Composite<W>, C>,
    /// The least of the limits' capacities.
    capacity: u64,
    /// How many limits.
    len: usize,
}

impl<K, W: WordAlgorithm, C: Clock> fmt::Debug for KeyedLimits<K, W, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimits").field("limits", &self.len).field("table", &self.table).finish()
    }
}

impl<K: Hash + Eq + Clone, W: WordAlgorithm> KeyedLimits<K, W, CoarseClock> {
    /// Limits for `quotas` (in order) on the coarse clock, with a [`Keyed`] table's default
    /// bounds.
    ///
    /// ```
    /// use kova::limits::KeyedLimits;
    /// use kova::{Gcra, Quota};
    /// let limits = KeyedLimits::<u64, Gcra>::new([Quota::per_second(5)?, Quota::per_day(1_000)?])?;
    /// assert_eq!(limits.check(&7).limit_decisions()[1].remaining(), 999);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quotas: impl IntoIterator<Item = Quota>) -> Result<Self, LimitsError> {
        Self::builder(quotas).build()
    }

    /// A builder for limits for `quotas` (in order), to set the table's bounds and the clock.
    ///
    /// ```
    /// use kova::keyed::TableFullPolicy;
    /// use kova::limits::KeyedLimits;
    /// use kova::{Gcra, ManualClock, Quota};
    /// let limits = KeyedLimits::<u64, Gcra>::builder([Quota::per_second(5)?, Quota::per_day(1_000)?])
    ///     .max_keys(10_000)
    ///     .table_full(TableFullPolicy::DenyNew)
    ///     .clock(ManualClock::new())
    ///     .build()?;
    /// assert_eq!(limits.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(quotas: impl IntoIterator<Item = Quota>) -> KeyedLimitsBuilder<K, W, CoarseClock> {
        KeyedLimitsBuilder::new(Composite::new(quotas), BuilderClock::coarse())
    }
}

impl<K: Hash + Eq + Clone, W: WordAlgorithm, C: Clock> KeyedLimits<K, W, C> {
    /// Limits for `quotas` (in order) on `clock`, with a [`Keyed`] table's default bounds.
    pub fn with_clock(quotas: impl IntoIterator<Item = Quota>, clock: C) -> Result<Self, LimitsError> {
        KeyedLimitsBuilder::new(Composite::new(quotas), BuilderClock::Given(clock)).build()
    }

    /// The limits over a table built for their composite.
    pub(super) fn from_table(table: Keyed<K, Composite<W>, C>, len: usize) -> Self {
        use crate::Algorithm as _;
        let capacity = table.algorithm().capacity();
        KeyedLimits { table, capacity, len }
    }

    /// Checks one unit of `key` against every limit.
    // Inlined, as `check_n` is, so that the answer is built where the caller keeps it: returned
    // from a call, it would be copied out in wide loads stalled on the narrower stores just made.
    #[inline(always)]
    pub fn check(&self, key: &K) -> LimitsDecision {
        // Every capacity is at least 1.
        self.decide(key, 1)
    }

    /// Checks `cost` units of `key` against every limit, all or nothing; an error when `cost`
    /// exceeds a limit's capacity.
    #[inline(always)]
    pub fn check_n(&self, key: &K, cost: u64) -> Result<LimitsDecision, CheckError> {
        if cost > self.capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity: self.capacity });
        }
        Ok(self.decide(key, cost))
    }

    /// Every limit's state for `key`, changing nothing (a key not held: a fresh key's).
    pub fn peek(&self, key: &K) -> LimitsDecision {
        self.decide(key, 0)
    }

    /// `cost` units of `key` (at most the capacity) decided on its cell. What the check saw
    /// passes through the table's paths, and the answer is worked out from it here, where the
    /// caller reads it: a part the caller never reads is never built.
    #[inline(always)]
    fn decide(&self, key: &K, cost: u64) -> LimitsDecision {
        let visited = self.table.visit(
            key,
            cost,
            #[inline(always)]
            |composite, cell, clock| Visited::Seen(composite.check(cell, clock, cost)),
            Visited::is_allowed,
            Visited::Full,
        );
        match visited {
            // The table's one composite: a key's cell is always checked by the composite the
            // table was built with.
            Visited::Seen(seen) => self.table.algorithm().answer(&seen, cost),
            Visited::Full(decision) => {
                let now = self.table.clock().now_nanos();
                full_answer(decision, self.table.algorithm().algorithms(), cost, now)
            }
        }
    }

    /// Gives `cost` units of `key` back to every limit. Returns whether units were given back,
    /// as [`Keyed::refund`] does: `false`, changing nothing, when the key is not held (its state
    /// is fresh, nothing to give back).
    pub fn refund(&self, key: &K, cost: u64) -> bool {
        self.table.refund(key, cost)
    }

    /// [`Keyed::settle`] for every limit of `key`: a check of `estimated` units whose real cost
    /// was `actual`. A lower cost gives the difference back to every limit; a higher one charges
    /// the extra to every limit, never denied, each as far as its state and overdraft hold it
    /// (so the limits may take different amounts). One settlement per limit, in order. A key not
    /// held is inserted first; a full table charges nothing (reported uncharged).
    ///
    /// ```
    /// use kova::limits::KeyedLimits;
    /// use kova::reservation::Settlement;
    /// use kova::{Gcra, ManualClock, Quota};
    /// let quotas = [Quota::per_minute(10)?, Quota::per_hour(100)?.with_overdraft(50)];
    /// let limits = KeyedLimits::<&str, Gcra, _>::with_clock(quotas, ManualClock::new())?;
    /// assert!(limits.check_n(&"job", 4)?.is_allowed());
    /// let settled = limits.settle(&"job", 4, 20);
    /// assert_eq!(settled[0], Settlement { refunded: 0, charged: 6, uncharged: 10 });
    /// assert_eq!(settled[1], Settlement { refunded: 0, charged: 16, uncharged: 0 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[expect(
        clippy::indexing_slicing,
        reason = "self.len is the composite's limit count, at most MAX_LIMITS, the array's length"
    )]
    pub fn settle(&self, key: &K, estimated: u64, actual: u64) -> Vec<Settlement> {
        if actual <= estimated {
            let back = estimated - actual;
            let refunded = if back > 0 && self.table.refund(key, back) { back } else { 0 };
            return vec![Settlement { refunded, ..Settlement::default() }; self.len];
        }
        let extra = actual - estimated;
        let charged = self
            .table
            .on_held_or_new(key, |composite, cell, clock| composite.charge_each(cell, clock, extra))
            .unwrap_or([0; MAX_LIMITS]);
        charged[..self.len]
            .iter()
            .map(|&charged| Settlement { refunded: 0, charged, uncharged: extra - charged })
            .collect()
    }

    /// How many limits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: there is at least one limit.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many keys the table holds.
    pub fn key_count(&self) -> usize {
        self.table.len()
    }

    /// Reclaims every idle key (see [`Keyed::sweep_idle`]): how many.
    pub fn sweep_idle(&self) -> usize {
        self.table.sweep_idle()
    }
}

/// What a check of a key's cell returned through the table.
#[derive(Clone, Copy)]
enum Visited {
    /// What the check saw of the key's limits.
    Seen(Seen),
    /// The table-full policy's decision for a new key the table had no room for.
    Full(Decision),
}

impl Visited {
    #[inline(always)]
    fn is_allowed(&self) -> bool {
        match self {
            Visited::Seen(seen) => seen.is_allowed(),
            Visited::Full(decision) => decision.is_allowed(),
        }
    }
}

/// The answer for a new key the table had no room for: the policy's decision (`decision`, on
/// the composite) for each limit, in that limit's own numbers (its headers): untracked, what a
/// fresh state of the limit answers for `cost` at `now`; denied, nothing left of its capacity.
/// Marked as the policy's decision is.
// Always inlined, though cold: called out of line, it writes its answer through a pointer to
// `decide`'s return slot, and the hit path then builds its whole answer in memory too (every
// limit's decision, where a caller reading `is_allowed` needs none).
#[inline(always)]
fn full_answer<W: WordAlgorithm>(
    decision: Decision,
    algorithms: &[W],
    cost: u64,
    now: u64,
) -> LimitsDecision {
    let mut each = [decision; MAX_LIMITS];
    for (place, algorithm) in each.iter_mut().zip(algorithms) {
        let own = if decision.is_allowed() {
            algorithm.decide(algorithm.fresh_word(), now, cost).0
        } else {
            Decision::denied(algorithm.capacity(), 0, decision.retry_after_nanos(), 0)
        };
        *place = match decision.fallback() {
            Some(fallback) => own.with_fallback(fallback),
            None => own,
        };
    }
    LimitsDecision::new(each, algorithms.len(), decision.is_allowed())
}
