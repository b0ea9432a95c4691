//! The in-memory backend's clock: kova's coarse clock with the Unix epoch as its origin.

use std::time::{SystemTime, UNIX_EPOCH};

use kova::{Clock, CoarseClock};

/// A kova clock that reads nanoseconds since the Unix epoch: `inner`'s readings shifted by how
/// far the system time was from `inner`'s origin when it was built. Fixed windows
/// (`now / period`) then start where envoyproxy/ratelimit's do, at the epoch's multiples of the
/// unit (a `unit: day` window at midnight UTC), where on kova's own timeline they would start at
/// multiples of the unit from the process's start. The shift is taken once: later steps of the
/// system time (NTP) do not move it, so the clock stays monotonic.
#[derive(Debug, Clone)]
pub struct UnixClock<C = CoarseClock> {
    inner: C,
    shift: u64,
}

impl UnixClock {
    /// kova's coarse clock, shifted to the epoch.
    pub fn new() -> Self {
        UnixClock::shifting(CoarseClock::new())
    }
}

impl Default for UnixClock {
    fn default() -> Self {
        UnixClock::new()
    }
}

impl<C: Clock> UnixClock<C> {
    /// `inner`, shifted so that it reads the system time's nanoseconds since the epoch now (0 if
    /// the system time is before the epoch).
    pub fn shifting(inner: C) -> Self {
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let since_epoch = u64::try_from(since_epoch).unwrap_or(u64::MAX);
        UnixClock { shift: since_epoch.saturating_sub(inner.now_nanos_precise()), inner }
    }
}

impl<C: Clock> Clock for UnixClock<C> {
    #[inline]
    fn now_nanos(&self) -> u64 {
        self.inner.now_nanos().saturating_add(self.shift)
    }

    #[inline]
    fn now_nanos_precise(&self) -> u64 {
        self.inner.now_nanos_precise().saturating_add(self.shift)
    }

    #[inline]
    fn max_lag_nanos(&self) -> u64 {
        self.inner.max_lag_nanos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kova::ManualClock;

    #[test]
    fn reads_the_epochs_nanoseconds_and_moves_with_its_inner_clock() {
        let inner = ManualClock::new();
        inner.advance_nanos(5_000);
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let clock = UnixClock::shifting(inner.clone());
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let read = clock.now_nanos();
        assert!((before..=after).contains(&read), "{before} <= {read} <= {after}");
        inner.advance_nanos(1_000_000_000);
        assert_eq!(clock.now_nanos(), read + 1_000_000_000);
        assert_eq!(clock.now_nanos_precise(), clock.now_nanos());
        assert_eq!(clock.max_lag_nanos(), 0);
        // The default clock too: within a second of the system time.
        let unix = UnixClock::new();
        let system = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert!(unix.now_nanos().abs_diff(system) < 1_000_000_000, "{} vs {system}", unix.now_nanos());
    }
}
