//! A window algorithm's period, kept with the divisor that finds a reading's window.

use strength_reduce::StrengthReducedU64;

/// A period in nanoseconds (at least 1) with its multiply-and-shift divisor. The window
/// algorithms find a reading's window on every check, between the load and the
/// compare-and-swap, where a hardware division's latency would widen the span in which another
/// core's write makes the compare-and-swap fail.
#[derive(Debug, Clone, Copy)]
pub(super) struct Period {
    nanos: u64,
    divisor: StrengthReducedU64,
}

impl Period {
    /// A period of `nanos` nanoseconds; a quota's period is never 0.
    pub(super) fn new(nanos: u64) -> Self {
        Period { nanos, divisor: StrengthReducedU64::new(nanos) }
    }

    /// The period in nanoseconds.
    #[inline(always)]
    pub(super) fn nanos(&self) -> u64 {
        self.nanos
    }

    /// `value / period`, rounded down: for a reading, the index of the window it falls in.
    #[inline(always)]
    pub(super) fn divide(&self, value: u64) -> u64 {
        value / self.divisor
    }

    /// The index of the window `now` falls in, and the nanoseconds from that window's start.
    #[inline(always)]
    pub(super) fn window_and_elapsed(&self, now: u64) -> (u64, u64) {
        StrengthReducedU64::div_rem(now, self.divisor)
    }
}

/// Two periods are equal when their nanoseconds are (the divisor derives from them).
impl PartialEq for Period {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Period {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_divisor_agrees_with_division() {
        for nanos in [1, 2, 3, 999_983, 1_000_000_000, 1 << 44, u64::MAX - 1, u64::MAX] {
            let period = Period::new(nanos);
            for now in [0, 1, nanos - 1, nanos, nanos.saturating_add(1), u64::MAX / 3, u64::MAX] {
                assert_eq!(period.divide(now), now / nanos, "{now} / {nanos}");
                assert_eq!(period.window_and_elapsed(now), (now / nanos, now % nanos), "{now} / {nanos}");
            }
        }
        assert_eq!(Period::new(7), Period::new(7));
        assert_ne!(Period::new(7), Period::new(8));
    }
}
