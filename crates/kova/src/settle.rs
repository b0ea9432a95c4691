//! Settling: charge an estimate at the check, then the real cost once it is known.

use crate::algorithm::update_word;
use crate::{Clock, RateLimiter, WordAlgorithm};

/// What [`RateLimiter::settle`] did with the difference between the estimate and the real cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settlement {
    /// Units given back (the real cost was lower than the estimate).
    pub refunded: u64,
    /// Extra units charged (the real cost was higher).
    pub charged: u64,
    /// Extra units that did not fit, even in the quota's overdraft, and were not charged.
    pub uncharged: u64,
}

impl<W: WordAlgorithm, C: Clock> RateLimiter<W, C> {
    /// Settles a check of `estimated` units whose real cost turned out to be `actual` (an LLM
    /// call's tokens, known from the response): a refund of the difference when lower, an extra
    /// charge when higher. The extra charge never waits and is never denied: it takes what is
    /// left, then runs into a debt of up to the quota's [overdraft](crate::Quota::with_overdraft)
    /// (checks are denied until it has refilled); what does not fit is reported `uncharged`.
    ///
    /// The bound, for [`Gcra`](crate::Gcra) with interval `T`, burst `B` and overdraft `D`: over
    /// any interval of length `L`, checks plus extra charges take at most `B + D + L / T` units
    /// (checks alone stay within `B + L / T` whenever no debt is outstanding).
    ///
    /// ```
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter, Settlement};
    /// let quota = Quota::per_minute(1_000)?.with_overdraft(500);
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(quota, ManualClock::new())?;
    /// assert!(limiter.check_n(800)?.is_allowed()); // the estimate
    /// let settled = limiter.settle(800, 1_600); // the response used 1,600 tokens
    /// assert_eq!(settled, Settlement { refunded: 0, charged: 700, uncharged: 100 });
    /// assert!(!limiter.check().is_allowed()); // 500 in debt: paid off before the next check
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, estimated: u64, actual: u64) -> Settlement {
        if actual <= estimated {
            let refunded = estimated - actual;
            if refunded > 0 {
                self.refund(refunded);
            }
            return Settlement { refunded, ..Settlement::default() };
        }
        let extra = actual - estimated;
        let charged = self.charge(extra);
        Settlement { refunded: 0, charged, uncharged: extra - charged }
    }

    /// Charges up to `cost` units now, never denied (see [`settle`](Self::settle)): takes what
    /// is left, then up to the quota's overdraft. Returns the units charged.
    ///
    /// ```
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// assert_eq!(limiter.charge(25), 10); // no overdraft: only what is left
    /// assert_eq!(limiter.charge(1), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge(&self, cost: u64) -> u64 {
        if cost == 0 {
            return 0;
        }
        update_word(&self.cell, &self.clock, |word, now| self.algorithm.charge(word, now, cost))
    }
}
