//! When an allowed check took its units, to tell whether its window has ended before anything is
//! given back.
//!
//! A refund or a settlement's give-back does not say which window it is for: once the key has
//! moved into the next window (a fixed window, a sliding window counter), the units would come off
//! the new window's count, which would then admit more than its quota. So nothing is given back
//! once the time since the check is at least its decision's `reset_after`. That is never looser
//! for GCRA or the token bucket either: their state is full again by then.

use std::time::Instant;

use kova::Decision;

/// A reading of the limiter's clock, or of [`Instant`] where the limiter has none.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reading {
    Clock(u64),
    Instant(Instant),
}

impl Reading {
    /// Now, on `clock` (the limiter's [`now_nanos`](crate::KeyedLimiter::now_nanos)) if it has
    /// one. Read before the check: the window then ends no earlier than the reading plus the
    /// decision's `reset_after`, so a give-back is skipped early (stricter), never late.
    pub(crate) fn now(clock: Option<u64>) -> Self {
        clock.map_or_else(|| Reading::Instant(Instant::now()), Reading::Clock)
    }

    /// Nanoseconds since this reading, on the same `clock`.
    fn elapsed_nanos(self, clock: Option<u64>) -> u64 {
        match (self, clock) {
            (Reading::Clock(then), Some(now)) => now.saturating_sub(then),
            (Reading::Instant(then), _) => u64::try_from(then.elapsed().as_nanos()).unwrap_or(u64::MAX),
            // The limiter no longer says its time: the window is taken as ended (nothing given
            // back is the stricter answer).
            (Reading::Clock(_), None) => u64::MAX,
        }
    }
}

/// When a charge was taken, and how long its window then had to run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Taken {
    at: Reading,
    reset_after_nanos: u64,
}

impl Taken {
    /// A charge read `at` (before its check) whose check answered `decisions` (a composite's:
    /// the soonest window to end counts, for every member is given back together).
    pub(crate) fn new(at: Reading, decisions: &[Decision]) -> Self {
        let reset_after_nanos = decisions.iter().map(Decision::reset_after_nanos).min().unwrap_or(0);
        Taken { at, reset_after_nanos }
    }

    /// Whether the window the units went into has ended (`clock` as for [`Reading::now`]):
    /// nothing is owed back then.
    pub(crate) fn window_ended(&self, clock: Option<u64>) -> bool {
        self.at.elapsed_nanos(clock) >= self.reset_after_nanos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_ends_at_its_reset_after_on_the_limiters_clock() {
        let taken = Taken::new(Reading::Clock(1_000), &[Decision::allowed(10, 9, 60)]);
        assert!(!taken.window_ended(Some(1_059)));
        assert!(taken.window_ended(Some(1_060)));
        // A clock that went back: not ended.
        assert!(!taken.window_ended(Some(0)));
        // No clock any more: ended (stricter).
        assert!(taken.window_ended(None));
        // A composite: the soonest window.
        let both = [Decision::allowed(10, 9, 60), Decision::allowed(100, 99, 30)];
        assert!(Taken::new(Reading::Clock(0), &both).window_ended(Some(30)));
        // Without a clock, measured with `Instant`.
        let taken = Taken::new(Reading::now(None), &[Decision::allowed(10, 9, u64::MAX)]);
        assert!(!taken.window_ended(None));
    }
}
