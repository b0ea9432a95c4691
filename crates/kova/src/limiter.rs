//! The direct limiter: one state cell, no key.

use crossbeam_utils::CachePadded;

use crate::loom::atomic::{AtomicU64, Ordering};

/// What a reset adds to [`RateLimiter::resets`] as it starts: one under way.
const RESET_STARTED: u64 = 1;
/// What it adds once done: one done, one fewer under way. Every step adds, so the count only
/// grows: a give-back that reads the same count as its reservation saw no reset since.
const RESET_DONE: u64 = (1 << 32) - 1;
/// The resets under way.
const RESETS_UNDER_WAY: u64 = (1 << 32) - 1;
use crate::{Algorithm, CheckError, Clock, CoarseClock, Decision, Gcra, Quota, QuotaError};

/// A limiter for one thing (a whole service, one upstream): one cell driven by the algorithm.
///
/// `check` is lock-free: for the single-word algorithms, a CAS loop on one `AtomicU64`.
///
/// ```
/// use kova::{Gcra, Quota, RateLimiter};
/// let limiter = RateLimiter::<Gcra>::new(Quota::per_second(100)?)?;
/// let decision = limiter.check();
/// assert!(decision.is_allowed());
/// assert_eq!(decision.remaining(), 99);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RateLimiter<A: Algorithm = Gcra, C: Clock = CoarseClock> {
    pub(crate) algorithm: A,
    /// On cache lines of its own: every check reads the algorithm's parameters and the clock,
    /// and on a line the cell's writes invalidate, a thread whose check another thread's write
    /// just beat would miss on them as well as on the cell.
    pub(crate) cell: CachePadded<A::Cell>,
    pub(crate) clock: C,
    /// The resets done (high 32 bits) and under way (low 32 bits) ([`Resets`]).
    pub(crate) resets: AtomicU64,
}

impl<A: Algorithm> RateLimiter<A, CoarseClock> {
    /// A limiter for `quota` on the coarse clock.
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Self::with_clock(quota, CoarseClock::new())
    }
}

impl<A: Algorithm, C: Clock> RateLimiter<A, C> {
    /// A limiter for `quota` reading `clock`.
    ///
    /// ```
    /// use kova::{ManualClock, Quota, RateLimiter, TokenBucket};
    /// let limiter = RateLimiter::<TokenBucket, _>::with_clock(Quota::per_second(1)?, ManualClock::new())?;
    /// assert!(limiter.check().is_allowed());
    /// assert!(!limiter.check().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Ok(Self::from_algorithm(A::from_quota(quota)?, clock))
    }

    /// A limiter for an algorithm built beforehand (an [`AnyAlgorithm`](crate::AnyAlgorithm) of
    /// a configured kind), reading `clock` ([`CoarseClock::new`] for the default).
    ///
    /// ```
    /// use kova::{AnyAlgorithm, CoarseClock, Quota, RateLimiter};
    /// let algorithm = AnyAlgorithm::new("fixed_window".parse()?, Quota::per_minute(5)?)?;
    /// let limiter = RateLimiter::from_algorithm(algorithm, CoarseClock::new());
    /// assert_eq!(limiter.check().limit(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_algorithm(algorithm: A, clock: C) -> Self {
        let cell = CachePadded::new(algorithm.new_cell());
        RateLimiter { algorithm, cell, clock, resets: AtomicU64::new(0) }
    }

    /// Checks one unit.
    #[inline]
    pub fn check(&self) -> Decision {
        // Every capacity is at least 1, so a cost of 1 is always checkable.
        self.algorithm.decide_cell(&self.cell, &self.clock, 1)
    }

    /// Checks `cost` units; an error (not a denial) when `cost` exceeds the capacity. Cost 0 is a
    /// peek.
    ///
    /// ```
    /// use kova::{CheckError, Gcra, Quota, RateLimiter};
    /// let limiter = RateLimiter::<Gcra>::new(Quota::per_second(10)?)?;
    /// assert!(limiter.check_n(5)?.is_allowed());
    /// assert_eq!(limiter.check_n(11), Err(CheckError::CostExceedsCapacity { cost: 11, capacity: 10 }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_n(&self, cost: u64) -> Result<Decision, CheckError> {
        self.algorithm.check_cell(&self.cell, &self.clock, cost)
    }

    /// Reports the state (remaining, reset) without changing it.
    pub fn peek(&self) -> Decision {
        self.algorithm.decide_cell(&self.cell, &self.clock, 0)
    }

    /// Gives back `cost` units an earlier allowed check took (for example when a later limit
    /// denied the same request). Returns `false`, changing nothing, for the sliding log. Meant
    /// for the moment the request that took them ends: the limiter cannot tell which check the
    /// units came from, and a refund made after its check's
    /// [`reset_after`](crate::Decision::reset_after) (a new window, a refilled bucket) gives
    /// them to the state as it is then (see [`WordAlgorithm::refund`](crate::WordAlgorithm::refund)).
    ///
    /// ```
    /// use kova::{Gcra, Quota, RateLimiter};
    /// let limiter = RateLimiter::<Gcra>::new(Quota::per_minute(10)?)?;
    /// assert!(limiter.check_n(4)?.is_allowed());
    /// assert!(limiter.refund(4));
    /// assert_eq!(limiter.peek().remaining(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund(&self, cost: u64) -> bool {
        self.algorithm.refund_cell(&self.cell, &self.clock, cost)
    }

    /// Puts the limiter back to full. A [reservation](crate::reservation) or an
    /// [estimate](Self::estimate) made before it gives back nothing when cancelled or settled:
    /// the reset gave its units back already.
    pub fn reset(&self) {
        if crate::loom::faults::reset_counted_once() {
            // The racy variant: counted as done before the cell changes.
            self.resets.fetch_add(RESET_STARTED + RESET_DONE, Ordering::Relaxed);
            self.algorithm.reset_cell(&self.cell);
            return;
        }
        // Under way, before the cell changes, Relaxed: the cell's reset publishes it (Release),
        // so a give-back that reads the reset cell (Acquire) also reads this count.
        self.resets.fetch_add(RESET_STARTED, Ordering::Relaxed);
        self.algorithm.reset_cell(&self.cell);
        // Release: a reservation that reads the count done (Acquire) then reads a cell no older
        // than the reset, so it cannot be made on the cell the reset wiped.
        self.resets.fetch_add(RESET_DONE, Ordering::Release);
    }

    /// The resets as a reservation or an estimate sees them before it takes its units: what
    /// its give-back compares with [`gives_back_after`](Self::gives_back_after).
    pub(crate) fn resets_before(&self) -> u64 {
        // Acquire: pairs with `reset`'s last count.
        self.resets.load(Ordering::Acquire)
    }

    /// Whether units taken when the resets read `before` may be given back now: no reset was
    /// under way then or since. Called after an Acquire load of the cell (a give-back's
    /// compare-and-swap loop): a reset that cell follows was counted under way before it.
    pub(crate) fn gives_back_after(&self, before: u64) -> bool {
        // Relaxed: ordered by the caller's load of the cell (see `reset`).
        before & RESETS_UNDER_WAY == 0 && self.resets.load(Ordering::Relaxed) == before
    }

    /// The algorithm.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}
