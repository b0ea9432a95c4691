//! Settling: charge an estimate at the check, then the real cost once it is known.

use std::hash::Hash;

use crate::cas::update_word;
use crate::{Algorithm, Clock, Keyed, RateLimiter, WordAlgorithm};

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
    /// The refund part is [`refund`](Self::refund)'s: settle before the check's
    /// [`reset_after`](crate::Decision::reset_after) has passed, or the difference goes to a
    /// window (or refill) the check was not in; `refunded` reports what was offered back, which
    /// the state caps at full.
    ///
    /// The bound, for [`Gcra`](crate::Gcra) with interval `T`, burst `B` and overdraft `D`: over
    /// any interval of length `L`, checks plus extra charges take at most `B + D + L / T` units
    /// (checks alone stay within `B + L / T` whenever no debt is outstanding).
    ///
    /// ```
    /// use kova::reservation::Settlement;
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter};
    /// let quota = Quota::per_minute(1_000)?.with_overdraft(500);
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(quota, ManualClock::new())?;
    /// assert!(limiter.check_n(800)?.is_allowed()); // the estimate
    /// let settled = limiter.settle(800, 1_600); // the response used 1,600 tokens
    /// assert_eq!(settled, Settlement { refunded: 0, charged: 700, uncharged: 100 });
    /// assert!(!limiter.check().is_allowed()); // 500 in debt: paid off before the next check
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, estimated: u64, actual: u64) -> Settlement {
        settle_with(estimated, actual, |back| self.refund(back), |extra| self.charge(extra))
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
        update_word(
            &*self.cell,
            &self.clock,
            #[inline(always)]
            |word, now| self.algorithm.charge(word, now, cost),
        )
    }
}

/// The difference between `estimated` and `actual`, given back or charged.
fn settle_with(
    estimated: u64,
    actual: u64,
    refund: impl FnOnce(u64) -> bool,
    charge: impl FnOnce(u64) -> u64,
) -> Settlement {
    if actual <= estimated {
        let back = estimated - actual;
        // What could not be given back (a sliding log, a key no longer held) is not reported.
        let refunded = if back > 0 && refund(back) { back } else { 0 };
        return Settlement { refunded, ..Settlement::default() };
    }
    let extra = actual - estimated;
    let charged = charge(extra);
    Settlement { refunded: 0, charged, uncharged: extra - charged }
}

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// [`RateLimiter::settle`] for `key`, under the key's own quota (and its overdraft). The
    /// refund and the extra charge take the key's shard lock, as [`refund`](Self::refund) does.
    /// Only a [`WordAlgorithm`]'s state holds a debt; any other charges what is left
    /// ([`Algorithm::charge_cell`]), and the sliding log gives nothing back (its units are
    /// timestamps already written): `refunded` is then 0, as it is for a key no longer held
    /// (its state is already full).
    ///
    /// ```
    /// use kova::reservation::Settlement;
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let quota = Quota::per_minute(1_000)?.with_overdraft(500);
    /// let table = Keyed::<&str, Gcra, _>::with_clock(quota, ManualClock::new())?;
    /// assert!(table.check_n(&"tenant-a", 800)?.is_allowed());
    /// assert_eq!(table.settle(&"tenant-a", 800, 300), Settlement { refunded: 500, ..Settlement::default() });
    /// assert_eq!(table.settle(&"tenant-a", 300, 1_500).charged, 1_200);
    /// assert!(!table.check(&"tenant-a").is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, key: &K, estimated: u64, actual: u64) -> Settlement {
        settle_with(estimated, actual, |back| self.refund(key, back), |extra| self.charge(key, extra))
    }
}

#[cfg(test)]
mod tests {
    use crate::reservation::Settlement;
    use crate::{Keyed, ManualClock, Quota, SlidingWindowLog, TokenBucket};

    #[test]
    fn a_table_of_any_algorithm_settles_within_what_its_state_can_hold() {
        let quota = Quota::per_minute(10).unwrap();
        // The sliding log cannot give back: nothing is reported refunded.
        let log = Keyed::<u8, SlidingWindowLog, _>::with_clock(quota, ManualClock::new()).unwrap();
        assert!(log.check_n(&1, 4).unwrap().is_allowed());
        assert_eq!(log.settle(&1, 4, 1), Settlement::default());
        // It charges what is left, and no more.
        assert_eq!(log.settle(&1, 4, 12), Settlement { refunded: 0, charged: 6, uncharged: 2 });
        assert_eq!(log.peek(&1).remaining(), 0);
        // A word algorithm without a debt charges what is left too.
        let bucket = Keyed::<u8, TokenBucket, _>::with_clock(quota, ManualClock::new()).unwrap();
        assert!(bucket.check_n(&1, 4).unwrap().is_allowed());
        assert_eq!(bucket.settle(&1, 4, 2), Settlement { refunded: 2, ..Settlement::default() });
        assert_eq!(bucket.settle(&1, 2, 20), Settlement { refunded: 0, charged: 8, uncharged: 10 });
    }
}
