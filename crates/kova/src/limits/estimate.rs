//! A check of several limits kept to be settled however late ([`Limits::estimate`],
//! [`KeyedLimits::estimate`]): [`crate::reservation::Estimate`] for a composite.

use super::{KeyedLimits, Limits, LimitsDecision};
use crate::reservation::Settlement;
use crate::{Clock, GiveBack, WordAlgorithm};

/// A composite's check of an estimated cost, to settle once the real cost is known: its
/// decision, and what it took and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "settle it once the real cost is known"]
pub struct LimitsEstimate {
    decision: LimitsDecision,
    cost: u64,
    /// On the limits' clock, read before the check.
    checked_at: u64,
    /// A keyed composite's count of forgotten keys before the check (as
    /// [`crate::reservation::Estimate`] keeps it); 0 for a direct one, which forgets nothing.
    forgotten: u64,
}

impl LimitsEstimate {
    fn new(decision: LimitsDecision, cost: u64, checked_at: u64, forgotten: u64) -> Self {
        LimitsEstimate { decision, cost, checked_at, forgotten }
    }

    /// The check's decision.
    pub fn decision(&self) -> &LimitsDecision {
        &self.decision
    }

    /// The units it took from every limit: its cost when allowed, none when denied.
    pub fn taken(&self) -> u64 {
        if self.decision.is_allowed() {
            self.cost
        } else {
            0
        }
    }

    /// Of the units it took, those every limit still counts at `now` (each by its own rule,
    /// [`Algorithm::still_counted`](crate::Algorithm::still_counted), on its own decision's
    /// reset): a refund gives the same units back to every limit, so it may give back no more
    /// than the limit that counts the fewest.
    pub(super) fn still_counted<W: WordAlgorithm>(&self, algorithms: &[W], now: u64) -> u64 {
        let elapsed = now.saturating_sub(self.checked_at);
        algorithms
            .iter()
            .zip(self.decision.limit_decisions())
            .map(|(algorithm, decision)| {
                let reset = decision.reset_after_nanos();
                WordAlgorithm::still_counted(algorithm, self.taken(), elapsed, reset, GiveBack::Settle)
            })
            .min()
            .unwrap_or(0)
    }
}

/// The settlements of a composite that gave `refunded` back to every limit.
pub(super) fn refunded(refunded: u64, len: usize) -> Vec<Settlement> {
    vec![Settlement { refunded, ..Settlement::default() }; len]
}

impl<W: WordAlgorithm, C: Clock> Limits<W, C> {
    /// Checks `cost` units on every limit, an estimate to
    /// [settle](Self::settle_estimate) once the real cost is known.
    pub fn estimate(&self, cost: u64) -> Result<LimitsEstimate, crate::CheckError> {
        // Read before the check's own reading: the time since can only be found longer.
        let checked_at = self.clock.now_nanos();
        Ok(LimitsEstimate::new(self.check_n(cost)?, cost, checked_at, 0))
    }

    /// [`settle`](Self::settle) for an [`estimate`](Self::estimate), right however late: a lower
    /// real cost gives back to every limit only what every limit still counts of the estimate
    /// ([`RateLimiter::settle_estimate`](crate::RateLimiter::settle_estimate)'s rule, the least
    /// across the limits); a higher one is charged as `settle` charges it.
    ///
    /// ```
    /// use kova::limits::Limits;
    /// use kova::{FixedWindow, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let quotas = [Quota::per_second(10)?, Quota::per_minute(100)?];
    /// let limits = Limits::<FixedWindow, _>::with_clock(quotas, clock.clone())?;
    /// let estimate = limits.estimate(10)?;
    /// clock.set(1_500_000_000); // the per-second window has ended
    /// assert!(limits.settle_estimate(estimate, 0).iter().all(|s| s.refunded == 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_estimate(&self, estimate: LimitsEstimate, actual: u64) -> Vec<Settlement> {
        let taken = estimate.taken();
        if actual < taken {
            let counted =
                estimate.still_counted(&self.algorithms, self.clock.now_nanos()).min(taken - actual);
            let back = if counted > 0 && self.refund(counted) { counted } else { 0 };
            return refunded(back, self.len());
        }
        self.settle(taken, actual)
    }
}

impl<K: std::hash::Hash + Eq + Clone, W: WordAlgorithm, C: Clock> KeyedLimits<K, W, C> {
    /// [`Limits::estimate`] for `key`.
    pub fn estimate(&self, key: &K, cost: u64) -> Result<LimitsEstimate, crate::CheckError> {
        let checked_at = self.table.clock().now_nanos();
        let forgotten = self.table.forgets_seen();
        Ok(LimitsEstimate::new(self.check_n(key, cost)?, cost, checked_at, forgotten))
    }

    /// [`Limits::settle_estimate`] for `key` (a key no longer held gets nothing back: its state
    /// is fresh; nor does any once the table has forgotten a key since the estimate, as
    /// [`Keyed::settle_estimate`](crate::Keyed::settle_estimate) says).
    pub fn settle_estimate(&self, key: &K, estimate: LimitsEstimate, actual: u64) -> Vec<Settlement> {
        let taken = estimate.taken();
        if actual < taken {
            let algorithms = self.table.algorithm().algorithms();
            let now = self.table.clock().now_nanos();
            let counted = estimate.still_counted(algorithms, now).min(taken - actual);
            let back = self.table.refund_with(key, estimate.forgotten, |_| counted);
            return refunded(back, self.len());
        }
        self.settle(key, taken, actual)
    }
}
