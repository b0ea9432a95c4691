//! Settling: charge an estimate at the check, then the real cost once it is known.

use std::hash::Hash;

use crate::cas::update_word;
use crate::{Algorithm, CheckError, Clock, Decision, GiveBack, Keyed, Quota, RateLimiter, WordAlgorithm};

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
        settle_with(
            estimated,
            actual,
            |back| if self.refund(back) { back } else { 0 },
            |extra| self.charge(extra),
        )
    }

    /// Checks `cost` units, an estimate to [settle](Self::settle_estimate) once the real cost
    /// is known: [`check_n`](Self::check_n), remembering when it was made.
    pub fn estimate(&self, cost: u64) -> Result<Estimate, CheckError> {
        // Read before the check's own reading: the time since can only be found longer than it
        // was, so a settlement gives back too little, never too much.
        let checked_at = self.clock.now_nanos();
        let resets = self.resets_before();
        let decision = self.check_n(cost)?;
        Ok(Estimate { decision, cost, checked_at, forgotten: resets, quota: Some(self.algorithm.quota()) })
    }

    /// [`settle`](Self::settle) for an [`estimate`](Self::estimate), right however late: a
    /// lower real cost gives back only what the estimate's units still count for
    /// ([`Algorithm::still_counted`]: nothing once its window has ended, for GCRA and the token
    /// bucket not what has refilled since), so the state never admits more than its quota over
    /// the estimate's span. Nothing comes back after a [`reset`](Self::reset) (it gave
    /// everything back) or from an estimate of another quota ([`set_quota`](Self::set_quota)).
    /// A higher real cost is charged as `settle` charges it. A denied estimate took nothing: its
    /// whole real cost is charged.
    ///
    /// ```
    /// use kova::reservation::Settlement;
    /// use kova::{FixedWindow, ManualClock, Quota, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::<FixedWindow, _>::with_clock(Quota::per_minute(10)?, clock.clone())?;
    /// clock.set(55_000_000_000); // 0:55
    /// let estimate = limiter.estimate(10)?;
    /// assert!(estimate.decision().is_allowed());
    /// clock.set(61_000_000_000); // the answer comes at 1:01, in the next window
    /// assert!(limiter.check_n(10)?.is_allowed());
    /// // Used 2 of the 10: the other 8 counted in a window that has ended. Nothing comes back.
    /// assert_eq!(limiter.settle_estimate(estimate, 2), Settlement::default());
    /// assert!(!limiter.check().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_estimate(&self, estimate: Estimate, actual: u64) -> Settlement {
        let back = |back: u64| {
            let counted = estimate.still_counted(&self.algorithm, self.clock.now_nanos()).min(back);
            if counted == 0 || estimate.quota != Some(self.algorithm.quota()) {
                return 0;
            }
            update_word(&*self.cell, &self.clock, |word, now| {
                // After `word`'s Acquire load: see `RateLimiter::gives_back_after`.
                if self.gives_back_after(estimate.forgotten) {
                    (counted, self.algorithm.refund(word, now, counted))
                } else {
                    (0, word)
                }
            })
        };
        settle_with(estimate.taken(), actual, back, |extra| self.charge(extra))
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

/// A check of an estimated cost, to settle once the real cost is known
/// ([`RateLimiter::estimate`], [`Keyed::estimate`]): its decision, and what it took and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "settle it once the real cost is known"]
pub struct Estimate {
    decision: Decision,
    cost: u64,
    /// On the limiter's clock, read before the check.
    checked_at: u64,
    /// The limiter's count of forgotten states (its resets; a table's forgotten keys, as a
    /// keyed reservation reads it) before the check: once it has moved, the state the
    /// estimate's units went into may be gone, and nothing is given back.
    forgotten: u64,
    /// The direct limiter's quota at the check (a table's quota moves count as forgotten).
    quota: Option<Quota>,
}

impl Estimate {
    /// The check's decision.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// The units it took: its cost when allowed, none when denied.
    pub fn taken(&self) -> u64 {
        if self.decision.is_allowed() {
            self.cost
        } else {
            0
        }
    }

    /// Of the units it took, those `algorithm` still counts at `now`.
    fn still_counted<A: Algorithm>(&self, algorithm: &A, now: u64) -> u64 {
        let elapsed = now.saturating_sub(self.checked_at);
        algorithm.still_counted(self.taken(), elapsed, self.decision.reset_after_nanos(), GiveBack::Settle)
    }
}

/// The difference between `estimated` and `actual`, given back or charged. `refund` returns
/// the units it gave back.
fn settle_with(
    estimated: u64,
    actual: u64,
    refund: impl FnOnce(u64) -> u64,
    charge: impl FnOnce(u64) -> u64,
) -> Settlement {
    if actual <= estimated {
        let back = estimated - actual;
        // What could not be given back (a sliding log, a key no longer held) is not reported.
        let refunded = if back > 0 { refund(back) } else { 0 };
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
        let refund = |back| if self.refund(key, back) { back } else { 0 };
        settle_with(estimated, actual, refund, |extra| self.charge(key, extra))
    }

    /// [`RateLimiter::estimate`] for `key`.
    pub fn estimate(&self, key: &K, cost: u64) -> Result<Estimate, CheckError> {
        // Read before the check's own reading, as `RateLimiter::estimate` does.
        let checked_at = self.clock().now_nanos();
        let forgotten = self.forgets_seen();
        let decision = self.check_n(key, cost)?;
        Ok(Estimate { decision, cost, checked_at, forgotten, quota: None })
    }

    /// [`RateLimiter::settle_estimate`] for `key`, under the key's own quota: a lower real cost
    /// gives back only what the estimate's units still count for. Nothing comes back once the
    /// table has forgotten any key's state since the estimate (a reset, a removal, a reclaimed
    /// or evicted key, a quota change): the table keeps one count of these for all its keys, as
    /// its reservations do, so on a table that reclaims keys all the time a late settlement
    /// mostly gives nothing back (the stricter answer).
    pub fn settle_estimate(&self, key: &K, estimate: Estimate, actual: u64) -> Settlement {
        let refund = |back: u64| {
            self.refund_with(key, estimate.forgotten, |algorithm| {
                estimate.still_counted(algorithm, self.clock().now_nanos()).min(back)
            })
        };
        settle_with(estimate.taken(), actual, refund, |extra| self.charge(key, extra))
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
