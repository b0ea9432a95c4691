//! Several limits at once ("10 a second, bursts of 50, AND 1,000 an hour, AND 10,000 a day"),
//! decided all or nothing.

mod cells;
mod composite;
mod decision;
mod estimate;
mod keyed;
mod keyed_builder;
mod link;
mod seen;

pub use decision::LimitsDecision;
pub use estimate::LimitsEstimate;
pub use keyed::KeyedLimits;
pub use keyed_builder::KeyedLimitsBuilder;

use std::fmt;

use crossbeam_utils::CachePadded;

use cells::Cells;
use composite::Composite;

use crate::keyed::KeyedError;
use crate::reservation::Settlement;
use crate::{CheckError, Clock, CoarseClock, Gcra, Quota, QuotaError, WordAlgorithm};

/// The most limits one [`Limits`] holds.
pub const MAX_LIMITS: usize = 4;

/// Up to [`MAX_LIMITS`] quotas on one thing, checked together: a check is admitted only if every
/// limit admits it, and then takes its cost from every limit; a denial takes nothing from any.
///
/// How the limits' words are kept consistent depends on how many there are:
/// - **one or two limits**: one compare-and-swap over all of them (two words in one
///   [`portable_atomic::AtomicU128`]): exactly the sequential composite, under any
///   interleaving (loom-checked).
/// - **three or four**: check then refund over two words. Limits 0 and 1 share one 128-bit
///   word, the rest a second word (64-bit for three limits, 128-bit for four), each charged by
///   one compare-and-swap, the first word before the second; when the second denies, the first
///   is given back what its charge still counts ([`WordAlgorithm::undo`]: the units in the
///   window the charge went into, or the part of a bucket's deficit not yet refilled) before
///   the check returns. A denial has taken nothing once it returns. Nothing is admitted beyond
///   a fixed window's or a sliding window counter's bound, however long a check stalls between
///   its two words. GCRA and the token bucket are exact too while the checks in flight
///   together are given their units back youngest first, or the clock does not move while they
///   are; otherwise a check's give-back can exceed what its charge still counts by up to the
///   emission intervals it was in flight, rounded up (at most its cost), because an older
///   check's give-back moved the younger's units earlier than the word it wrote says
///   (`tests/undo.rs` checks both bounds). Two limits are exact. The bound on the
///   difference from the sequential composite: while a check that the second word will deny
///   runs, the units it took from limits 0 and 1 are held, so a concurrent check can be denied
///   because of them: at any instant, limit 0 or 1 may deny a check the sequential composite
///   would admit only by as much as the cost of the checks in flight that limit 2 or 3 will
///   deny (loom shows the case). Put the limits most likely to deny first: a check denied by
///   the first word holds nothing.
///
/// ```
/// use kova::limits::Limits;
/// use kova::{Gcra, ManualClock, Quota};
/// let limits = Limits::<Gcra, _>::with_clock(
///     [Quota::per_second(10)?.with_burst(50)?, Quota::per_hour(1_000)?, Quota::per_day(10_000)?],
///     ManualClock::new(),
/// )?;
/// let decision = limits.check_n(50)?;
/// assert!(decision.is_allowed());
/// assert_eq!(decision.decided_by(), 0); // the per-second limit has least left (0)
/// assert_eq!(decision.limit_decisions()[1].remaining(), 950);
/// let denied = limits.check();
/// assert!(!denied.is_allowed());
/// assert_eq!(denied.decided_by(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Limits<W: WordAlgorithm = Gcra, C: Clock = CoarseClock> {
    algorithms: Vec<W>,
    /// On cache lines of their own, as [`RateLimiter`](crate::RateLimiter)'s cell: apart from
    /// the capacity, the clock and the algorithms' address that every check reads.
    cells: CachePadded<Cells>,
    capacity: u64,
    clock: C,
}

impl<W: WordAlgorithm, C: Clock> fmt::Debug for Limits<W, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quotas: Vec<Quota> = self.algorithms.iter().map(WordAlgorithm::quota).collect();
        f.debug_struct("Limits").field("algorithm", &W::NAME).field("quotas", &quotas).finish()
    }
}

/// Why a set of quotas could not make a [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitsError {
    /// No quota was given.
    Empty,
    /// More than [`MAX_LIMITS`] quotas.
    TooMany {
        /// How many were given.
        count: usize,
        /// The most accepted.
        max: usize,
    },
    /// One of the quotas was rejected by the algorithm.
    Quota {
        /// Its position in the list.
        index: usize,
        /// Why.
        error: QuotaError,
    },
    /// An option of a [`KeyedLimits`] table is out of its range
    /// ([`KeyedLimitsBuilder::build`]).
    Table(KeyedError),
}

impl fmt::Display for LimitsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LimitsError::Empty => f.write_str("a composite needs at least one quota"),
            LimitsError::TooMany { count, max } => write!(f, "{count} quotas given, at most {max} supported"),
            LimitsError::Quota { index, error } => write!(f, "quota {index}: {error}"),
            LimitsError::Table(error) => write!(f, "the table: {error}"),
        }
    }
}

impl std::error::Error for LimitsError {}

impl<W: WordAlgorithm> Limits<W, CoarseClock> {
    /// The limits of `quotas`, in order, on the coarse clock.
    ///
    /// ```
    /// use kova::limits::{Limits, LimitsError};
    /// use kova::Quota;
    /// let limits = Limits::<kova::Gcra>::new([Quota::per_second(5)?, Quota::per_minute(100)?])?;
    /// assert_eq!(limits.len(), 2);
    /// assert_eq!(Limits::<kova::Gcra>::new([]).unwrap_err(), LimitsError::Empty);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quotas: impl IntoIterator<Item = Quota>) -> Result<Self, LimitsError> {
        Self::with_clock(quotas, CoarseClock::new())
    }
}

impl<W: WordAlgorithm, C: Clock> Limits<W, C> {
    /// The limits of `quotas`, in order, reading `clock`.
    ///
    /// ```
    /// use kova::limits::Limits;
    /// use kova::{FixedWindow, ManualClock, Quota};
    /// let limits = Limits::<FixedWindow, _>::with_clock([Quota::per_second(2)?], ManualClock::new())?;
    /// assert!(limits.check().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(quotas: impl IntoIterator<Item = Quota>, clock: C) -> Result<Self, LimitsError> {
        Self::build(quotas, clock, false)
    }

    /// `chained`: two limits checked then refunded, one word each (the loom models' should-fail
    /// twin).
    pub(crate) fn build(
        quotas: impl IntoIterator<Item = Quota>,
        clock: C,
        chained: bool,
    ) -> Result<Self, LimitsError> {
        let (algorithms, capacity) = Composite::<W>::new(quotas)?.into_parts();
        let cells = CachePadded::new(Cells::new(&algorithms, chained));
        Ok(Limits { algorithms, cells, capacity, clock })
    }

    /// Checks one unit against every limit.
    #[inline]
    pub fn check(&self) -> LimitsDecision {
        // Every capacity is at least 1.
        self.cells.check(&self.algorithms, &self.clock, 1).answer(&self.algorithms, 1)
    }

    /// Checks `cost` units against every limit, all or nothing; an error when `cost` exceeds
    /// the smallest capacity (it could never be admitted). Cost 0 is a peek.
    ///
    /// ```
    /// use kova::limits::Limits;
    /// use kova::{CheckError, Gcra, Quota};
    /// let limits = Limits::<Gcra>::new([Quota::per_second(10)?, Quota::per_minute(5)?])?;
    /// assert_eq!(limits.check_n(6).unwrap_err(), CheckError::CostExceedsCapacity { cost: 6, capacity: 5 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_n(&self, cost: u64) -> Result<LimitsDecision, CheckError> {
        if cost > self.capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity: self.capacity });
        }
        Ok(self.cells.check(&self.algorithms, &self.clock, cost).answer(&self.algorithms, cost))
    }

    /// Every limit's state, changing nothing.
    pub fn peek(&self) -> LimitsDecision {
        self.cells.check(&self.algorithms, &self.clock, 0).answer(&self.algorithms, 0)
    }

    /// Gives `cost` units back to every limit (see [`WordAlgorithm::refund`]). Returns whether
    /// units were given back, as every `refund` does: always `true` here, since every limit is a
    /// word algorithm, which keeps a count it can give back to.
    ///
    /// ```
    /// use kova::limits::Limits;
    /// use kova::{Gcra, Quota};
    /// let limits = Limits::<Gcra>::new([Quota::per_second(10)?, Quota::per_minute(50)?])?;
    /// assert!(limits.check_n(4)?.is_allowed());
    /// assert!(limits.refund(4));
    /// assert_eq!(limits.peek().limit_decisions()[1].remaining(), 50);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund(&self, cost: u64) -> bool {
        self.cells.refund(&self.algorithms, &self.clock, cost);
        true
    }

    /// [`RateLimiter::settle`](crate::RateLimiter::settle) for every limit: a check of
    /// `estimated` units whose real cost was `actual`. A lower cost gives the difference back to
    /// every limit; a higher one charges the extra to every limit, never denied, each as far as
    /// its state and overdraft hold it (so the limits may take different amounts). One
    /// settlement per limit, in order, as [`KeyedLimits::settle`] gives per key.
    ///
    /// ```
    /// use kova::limits::Limits;
    /// use kova::reservation::Settlement;
    /// use kova::{Gcra, ManualClock, Quota};
    /// let quotas = [Quota::per_minute(10)?, Quota::per_hour(100)?.with_overdraft(50)];
    /// let limits = Limits::<Gcra, _>::with_clock(quotas, ManualClock::new())?;
    /// assert!(limits.check_n(4)?.is_allowed());
    /// let settled = limits.settle(4, 20);
    /// assert_eq!(settled[0], Settlement { refunded: 0, charged: 6, uncharged: 10 });
    /// assert_eq!(settled[1], Settlement { refunded: 0, charged: 16, uncharged: 0 });
    /// assert_eq!(limits.settle(10, 4), vec![Settlement { refunded: 6, ..Settlement::default() }; 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, estimated: u64, actual: u64) -> Vec<Settlement> {
        if actual <= estimated {
            let back = estimated - actual;
            if back > 0 {
                self.cells.refund(&self.algorithms, &self.clock, back);
            }
            return vec![Settlement { refunded: back, ..Settlement::default() }; self.len()];
        }
        let extra = actual - estimated;
        let charged = self.cells.charge(&self.algorithms, &self.clock, extra);
        charged
            .iter()
            .take(self.len())
            .map(|&charged| Settlement { refunded: 0, charged, uncharged: extra - charged })
            .collect()
    }

    /// How many limits.
    pub fn len(&self) -> usize {
        self.algorithms.len()
    }

    /// Always false: a composite has at least one limit.
    pub fn is_empty(&self) -> bool {
        self.algorithms.is_empty()
    }

    /// The limits' algorithms, in order.
    pub fn algorithms(&self) -> &[W] {
        &self.algorithms
    }

    /// The most units one check can be admitted for (the smallest capacity).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}
