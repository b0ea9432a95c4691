//! Striped mode for a hot direct limiter: per-thread stripes leasing batches from the central word.

mod builder;
pub(crate) mod lease;
pub(crate) mod stripe;

use std::time::Duration;

use crossbeam_utils::CachePadded;

pub(crate) use builder::StripeShape;
pub use builder::{StripedBuilder, StripedError, DEFAULT_LEASE, MAX_STRIPES};
use lease::{Central, Stripes};
use stripe::STAMP_UNIT_SHIFT;

use crate::loom::atomic::AtomicU64;
use crate::loom::StaticAtomicU64;
use crate::{Algorithm, CheckError, Clock, CoarseClock, Decision, Gcra, Quota, WordAlgorithm};

/// A direct limiter for one hot limit shared by many threads (a global limit on an upstream, one
/// tenant's quota), opt-in where [`RateLimiter`](crate::RateLimiter)'s one word is contended.
///
/// The budget lives in a central word driven by the algorithm `W`, exactly as in `RateLimiter`.
/// Checks do not spend from it one by one: each thread spends from its **stripe** (one of
/// [`stripes`](Self::stripes), each on its own cache line), which takes [`batch`](Self::batch)
/// units from the central word at once with the algorithm's own check, and gives back what it
/// does not spend (a [refund](WordAlgorithm::refund)) once its [lease](Self::lease) has expired:
/// at the next check on that stripe, at any denial, or at [`flush`](Self::flush).
///
/// # The bound
/// Over any interval of length `T`, the limiter admits at most
/// - what `W` admits over `T`, plus `stripes x batch` units (what the stripes can hold when the
///   interval begins), plus one batch for each check that is taking a batch at that instant; and
/// - what `W` admits over `T + lease`: every unit admitted from a stripe was taken from the
///   central word at most one lease earlier.
///
/// Nothing is lost: every unit taken from the central word is admitted, still held by a stripe,
/// or given back (where the algorithm no longer counts it, say a fixed window that has passed,
/// the unit has expired). A denial never takes units. A check of more than `batch` units, and a
/// check made while the central word cannot give a whole batch, is decided on the central word
/// alone, exactly.
///
/// # What a decision says
/// A decision spent from units a stripe held is marked [`Fallback::StripeLease`](crate::Fallback::StripeLease): its
/// `remaining` counts the units its stripe still holds and its `reset_after` the time until that
/// stripe's lease expires. Every denial is marked too: units held by stripes, or on their way
/// back to the central word, might have admitted it (its `retry_after` is the central word's).
/// An admission decided on the central word alone is not marked: it is exact.
///
/// ```
/// use kova::striped::StripedLimiter;
/// use kova::{Fallback, Gcra, ManualClock, Quota};
/// let limiter = StripedLimiter::<Gcra>::builder(Quota::per_second(1_000)?)
///     .stripes(2)
///     .batch(10)
///     .clock(ManualClock::new()).build()?;
/// let decision = limiter.check();
/// assert!(decision.is_allowed());
/// assert_eq!(decision.fallback(), Some(Fallback::StripeLease));
/// assert_eq!(limiter.peek().remaining(), 999); // 990 in the central word, 9 in a stripe
/// assert_eq!(limiter.flush(), 9); // the stripe's units back in the central word
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct StripedLimiter<W: WordAlgorithm = Gcra, C: Clock = CoarseClock> {
    algorithm: W,
    /// Padded so that the stripes' lines are not this line.
    central: CachePadded<AtomicU64>,
    stripes: Stripes,
    clock: C,
}

/// The limiter's own central word, which never closes.
struct Exact<'a, W, C> {
    algorithm: &'a W,
    word: &'a AtomicU64,
    clock: &'a C,
}

impl<W: WordAlgorithm, C: Clock> Central for Exact<'_, W, C> {
    fn capacity(&self) -> u64 {
        self.algorithm.capacity()
    }

    #[inline]
    fn decide(&self, cost: u64) -> Option<Decision> {
        Some(self.algorithm.decide_cell(self.word, self.clock, cost))
    }

    fn give_back(&self, units: u64) -> bool {
        self.algorithm.refund_cell(self.word, self.clock, units)
    }

    #[inline(always)]
    fn closed(&self) -> bool {
        false
    }
}

impl<W: WordAlgorithm> StripedLimiter<W, CoarseClock> {
    /// A limiter for `quota` with the default stripes, batch and lease, on the coarse clock.
    ///
    /// ```
    /// use kova::striped::StripedLimiter;
    /// use kova::{Quota, TokenBucket};
    /// let limiter = StripedLimiter::<TokenBucket>::new(Quota::per_second(10_000)?)?;
    /// assert!(limiter.check().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<Self, StripedError> {
        Self::builder(quota).build()
    }
}

impl<W: WordAlgorithm, C: Clock> StripedLimiter<W, C> {
    /// A limiter for `quota` with the default stripes, batch and lease, reading `clock`.
    ///
    /// ```
    /// use kova::striped::StripedLimiter;
    /// use kova::{Gcra, ManualClock, Quota};
    /// let limiter = StripedLimiter::<Gcra, _>::with_clock(Quota::per_second(100)?, ManualClock::new())?;
    /// assert!(limiter.check().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, StripedError> {
        StripedLimiter::builder(quota).clock(clock).build()
    }
}

impl<W: WordAlgorithm> StripedLimiter<W> {
    /// A builder for `quota`, to choose stripes, batch, lease and clock.
    ///
    /// ```
    /// use kova::striped::{StripedError, StripedLimiter};
    /// use kova::{Gcra, Quota};
    /// let quota = Quota::per_second(100)?;
    /// assert!(matches!(
    ///     StripedLimiter::<Gcra>::builder(quota).stripes(3).build(),
    ///     Err(StripedError::Stripes { stripes: 3 })
    /// ));
    /// assert!(matches!(
    ///     StripedLimiter::<Gcra>::builder(quota).batch(101).build(),
    ///     Err(StripedError::Batch { batch: 101, max: 100 })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(quota: Quota) -> StripedBuilder<W> {
        StripedBuilder::new(quota)
    }
}

/// The next thread's stripe index. std's atomic even under loom (a process-wide static); the
/// models pass their stripe explicitly.
static NEXT_THREAD: StaticAtomicU64 = StaticAtomicU64::new(0);

std::thread_local! {
    /// This thread's place in the stripes (taken modulo their count): threads in turn.
    static THREAD_INDEX: usize =
        // Relaxed: a ticket counter; only distinctness matters.
        NEXT_THREAD.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as usize;
}

/// The calling thread's place in any set of stripes (taken modulo their count).
#[inline]
pub(crate) fn thread_index() -> usize {
    THREAD_INDEX.with(|index| *index)
}

impl<W: WordAlgorithm, C: Clock> StripedLimiter<W, C> {
    pub(super) fn from_parts(algorithm: W, stripes: usize, batch: u64, lease_units: u64, clock: C) -> Self {
        StripedLimiter {
            central: CachePadded::new(algorithm.new_cell()),
            algorithm,
            stripes: Stripes::new(stripes, batch, lease_units),
            clock,
        }
    }

    /// Checks one unit on the calling thread's stripe.
    #[inline]
    pub fn check(&self) -> Decision {
        // Every capacity is at least 1, so a cost of 1 is always checkable.
        self.decide_on(Self::thread_stripe(), 1)
    }

    /// Checks `cost` units on the calling thread's stripe; an error (not a denial) when `cost`
    /// exceeds the capacity. Cost 0 is a [`peek`](Self::peek).
    #[inline]
    pub fn check_n(&self, cost: u64) -> Result<Decision, CheckError> {
        self.check_n_on(Self::thread_stripe(), cost)
    }

    /// Checks `cost` units on stripe `stripe` (taken modulo the count): for a runtime with one
    /// thread per core, which can pass its worker's index instead of relying on kova's
    /// assignment of threads to stripes.
    ///
    /// ```
    /// use kova::striped::StripedLimiter;
    /// use kova::{Gcra, ManualClock, Quota};
    /// let limiter = StripedLimiter::<Gcra>::builder(Quota::per_minute(60)?)
    ///     .stripes(4)
    ///     .batch(5)
    ///     .clock(ManualClock::new()).build()?;
    /// assert_eq!(limiter.check_n_on(1, 2)?.remaining(), 3); // stripe 1 took 5, spent 2
    /// assert_eq!(limiter.check_n_on(2, 1)?.remaining(), 4); // stripe 2 took its own 5
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_n_on(&self, stripe: usize, cost: u64) -> Result<Decision, CheckError> {
        let capacity = self.algorithm.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity });
        }
        Ok(self.decide_on(stripe, cost))
    }

    /// The state without changing it: the central word's peek, with the units the stripes hold
    /// added to `remaining` (and then marked [`Fallback::StripeLease`](crate::Fallback::StripeLease)).
    #[expect(
        clippy::unreachable,
        reason = "the limiter's own central word is never closed: only a keyed table's demotion closes a slot"
    )]
    pub fn peek(&self) -> Decision {
        match self.stripes.peek(&self.exact()) {
            Some(decision) => decision,
            None => unreachable!("the limiter's own word never closes"),
        }
    }

    /// Gives every stripe's units back to the central word now, whatever their lease; returns
    /// how many units the stripes held. Checks go on meanwhile (a stripe may lease again at once).
    pub fn flush(&self) -> u64 {
        // A word that never closes strands nothing.
        self.stripes.flush(&self.exact()).0
    }

    /// Units the stripes hold now.
    pub fn held(&self) -> u64 {
        self.stripes.held()
    }

    /// The number of stripes.
    pub fn stripes(&self) -> usize {
        self.stripes.count()
    }

    /// Units a stripe takes from the central word at once.
    pub fn batch(&self) -> u64 {
        self.stripes.batch()
    }

    /// How long a stripe keeps units it leased (rounded up to the stripes' time step).
    pub fn lease(&self) -> Duration {
        Duration::from_nanos(self.stripes.lease_units() << STAMP_UNIT_SHIFT)
    }

    /// The algorithm of the central word.
    pub fn algorithm(&self) -> &W {
        &self.algorithm
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    #[inline]
    fn thread_stripe() -> usize {
        thread_index()
    }

    /// `cost <= capacity` was checked.
    #[inline]
    #[expect(
        clippy::unreachable,
        reason = "the limiter's own central word is never closed: only a keyed table's demotion closes a slot"
    )]
    fn decide_on(&self, stripe: usize, cost: u64) -> Decision {
        if cost == 0 {
            return self.peek();
        }
        let leased = self.stripes.decide(&self.exact(), stripe, self.clock.now_nanos(), cost);
        match leased.decision {
            Some(decision) => decision,
            None => unreachable!("the limiter's own word never closes"),
        }
    }

    #[inline(always)]
    fn exact(&self) -> Exact<'_, W, C> {
        Exact { algorithm: &self.algorithm, word: &self.central, clock: &self.clock }
    }

    #[cfg(test)]
    fn central_decide(&self, cost: u64) -> Decision {
        self.algorithm.decide_cell(&self.central, &self.clock, cost)
    }
}

#[cfg(test)]
mod tests;
