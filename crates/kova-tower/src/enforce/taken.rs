//! When an allowed check took its units, to tell how many of them still count before anything
//! is given back.
//!
//! A refund or a settlement's give-back does not say which window or which part of the state it
//! is for: given back late, units would come off what later checks took (a fixed window's or a
//! sliding window counter's next window; a GCRA or token bucket state that has refilled since
//! and been taken again), which would then admit more than the quota. So at most what still
//! counts is given back, by the limit's own rule ([`kova::Algorithm::still_counted`], through
//! [`KeyedLimiter::still_counted`](crate::KeyedLimiter::still_counted) and
//! [`CompositeLimiter::still_counted`](crate::CompositeLimiter::still_counted)), from the time
//! since the check and the reset its decision said.

use std::time::Instant;

use kova::limits::MAX_LIMITS;
use kova::{Decision, GiveBack, Quota};
use smallvec::SmallVec;

use crate::config::Config;
use crate::{Limit, LimitKey};

/// A reading of the limiter's clock, or of [`Instant`] where the limiter has none.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reading {
    Clock(u64),
    Instant(Instant),
}

impl Reading {
    /// Now, on `clock` (the limiter's [`now_nanos`](crate::KeyedLimiter::now_nanos)) if it has
    /// one. Read before the check: the time since is then found no shorter than it is, so a
    /// give-back is cut early (stricter), never late.
    pub(crate) fn now(clock: Option<u64>) -> Self {
        clock.map_or_else(|| Reading::Instant(Instant::now()), Reading::Clock)
    }

    /// Nanoseconds since this reading, on the same `clock`.
    fn elapsed_nanos(self, clock: Option<u64>) -> u64 {
        match (self, clock) {
            (Reading::Clock(then), Some(now)) => now.saturating_sub(then),
            (Reading::Instant(then), _) => u64::try_from(then.elapsed().as_nanos()).unwrap_or(u64::MAX),
            // The limiter no longer says its time: the state is taken as whole again (nothing
            // given back is the stricter answer).
            (Reading::Clock(_), None) => u64::MAX,
        }
    }
}

/// When a charge was taken, and the reset each decision of its check said (one limit's, or each
/// of a composite's members', in order).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Taken {
    at: Reading,
    reset_after_nanos: [u64; MAX_LIMITS],
    len: usize,
}

impl Taken {
    /// A charge read `at` (before its check) whose check answered `decisions`.
    pub(crate) fn new(at: Reading, decisions: &[Decision]) -> Self {
        let mut reset_after_nanos = [0; MAX_LIMITS];
        for (slot, decision) in reset_after_nanos.iter_mut().zip(decisions) {
            *slot = decision.reset_after_nanos();
        }
        Taken { at, reset_after_nanos, len: decisions.len().min(MAX_LIMITS) }
    }

    /// Of `units` this charge took of `key` from the limit at `index` (and every other member
    /// of the composite it heads, for `composite`), how many a give-back returns now
    /// (`give_back`: a settlement's, or an undo's for a denied request), by the limiter's own
    /// rule.
    pub(crate) fn still_counted(
        &self,
        config: &Config,
        index: usize,
        composite: bool,
        key: &LimitKey,
        units: u64,
        give_back: GiveBack,
    ) -> u64 {
        let limit = config.limit(index);
        let elapsed = self.elapsed_nanos(super::clock_of(limit, composite));
        match limit.member().filter(|_| composite) {
            Some(member) => {
                let limits = config.members(index, member.group.len);
                // A decision per member was checked when the charge was taken; should they
                // differ, what each still counts is not known: nothing is given back.
                if limits.len() != self.reset_after_nanos().len() {
                    return 0;
                }
                let members: SmallVec<[(Quota, u64); MAX_LIMITS]> =
                    limits.iter().map(Limit::quota).zip(self.reset_after_nanos().iter().copied()).collect();
                member.group.limiter.still_counted(key, units, elapsed, &members, give_back)
            }
            None => limit.limiter().still_counted(
                key,
                units,
                elapsed,
                self.soonest_reset_after_nanos(),
                give_back,
            ),
        }
    }

    /// Nanoseconds since the check (`clock` as for [`Reading::now`]).
    fn elapsed_nanos(&self, clock: Option<u64>) -> u64 {
        self.at.elapsed_nanos(clock)
    }

    /// The reset each decision said, in order.
    fn reset_after_nanos(&self) -> &[u64] {
        self.reset_after_nanos.get(..self.len).unwrap_or(&[])
    }

    /// The reset of a single limit's decision (the soonest, should there be several: the
    /// stricter for every rule, which gives less back the sooner the reset).
    fn soonest_reset_after_nanos(&self) -> u64 {
        self.reset_after_nanos().iter().copied().min().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_since_is_read_on_the_limiters_clock() {
        let taken = Taken::new(Reading::Clock(1_000), &[Decision::allowed(10, 9, 60)]);
        assert_eq!(taken.elapsed_nanos(Some(1_059)), 59);
        assert_eq!(taken.soonest_reset_after_nanos(), 60);
        // A clock that went back: no time has passed.
        assert_eq!(taken.elapsed_nanos(Some(0)), 0);
        // No clock any more: all the time in the world (nothing still counts).
        assert_eq!(taken.elapsed_nanos(None), u64::MAX);
        // A composite: each member's reset, in order.
        let both = [Decision::allowed(10, 9, 60), Decision::allowed(100, 99, 30)];
        let taken = Taken::new(Reading::Clock(0), &both);
        assert_eq!(taken.reset_after_nanos(), [60, 30]);
        assert_eq!(taken.soonest_reset_after_nanos(), 30);
        // Without a clock, measured with `Instant`.
        let taken = Taken::new(Reading::now(None), &[Decision::allowed(10, 9, u64::MAX)]);
        assert!(taken.elapsed_nanos(None) < u64::MAX);
    }
}
