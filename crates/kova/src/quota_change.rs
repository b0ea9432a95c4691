//! Changing a direct limiter's quota at run time, keeping what it has consumed.

use crossbeam_utils::CachePadded;

use crate::algorithm::carry_over;
use crate::loom::atomic::AtomicU64;
use crate::{Algorithm, Clock, Quota, QuotaError, RateLimiter};

impl<A: Algorithm, C: Clock> RateLimiter<A, C> {
    /// Moves the limiter to `quota`, keeping what it has consumed, by the rule of
    /// [`Keyed::set_quota`](crate::Keyed::set_quota): the units the old quota counts as used now
    /// (`capacity - remaining`) are taken from a fresh state of the new quota, capped at its
    /// capacity; a bucket then refills at the new rate from now. An error, changing nothing,
    /// when the algorithm cannot represent `quota`.
    ///
    /// It takes `&mut self`: the algorithm's parameters are plain fields read by every check
    /// without synchronisation. To change the quota of a limiter shared between threads, share
    /// a [`Keyed`](crate::Keyed) table (whose `set_quota` takes `&self`) or swap in the limiter
    /// [`with_quota`](Self::with_quota) builds.
    ///
    /// ```
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter};
    /// let mut limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// limiter.check_n(8)?;
    /// limiter.set_quota(Quota::per_second(20)?)?;
    /// assert_eq!(limiter.peek().remaining(), 12); // 8 used of the new 20
    /// assert!(limiter.set_quota(Quota::per_second(10)?.with_overdraft(u64::MAX)).is_err());
    /// assert_eq!(limiter.peek().limit(), 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&mut self, quota: Quota) -> Result<(), QuotaError> {
        let algorithm = self.algorithm.with_quota(quota)?;
        self.cell =
            CachePadded::new(carry_over(&self.algorithm, &algorithm, &self.cell, self.clock.now_nanos()));
        self.algorithm = algorithm;
        Ok(())
    }

    /// A new limiter for `quota` on a clone of this one's clock that has consumed what this one
    /// has now (the rule of [`set_quota`](Self::set_quota)), for swapping behind a shared
    /// pointer.
    ///
    /// ```
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// limiter.check_n(4)?;
    /// let upgraded = limiter.with_quota(Quota::per_second(100)?)?;
    /// assert_eq!(upgraded.peek().remaining(), 96);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_quota(&self, quota: Quota) -> Result<Self, QuotaError>
    where
        C: Clone,
    {
        let algorithm = self.algorithm.with_quota(quota)?;
        let cell = carry_over(&self.algorithm, &algorithm, &self.cell, self.clock.now_nanos());
        let (cell, clock) = (CachePadded::new(cell), self.clock.clone());
        Ok(RateLimiter { algorithm, cell, clock, resets: AtomicU64::new(0) })
    }
}
