//! governor on its fast configuration, measured beside its default one ([`crate::peers`]): the
//! clock it ships for speed, `QuantaUpkeepClock` (an upkeep thread refreshes the time once a
//! millisecond and a check reads it with one atomic load, as kova's coarse clock does, where the
//! default `QuantaClock` reads the TSC on every check), and, keyed, its `DashMap` store with
//! ahash instead of std's SipHash (`dashmap_with_clock_and_hasher`). A user who tunes governor
//! gets these rows; every comparison with governor takes the better of the two
//! ([`Report::governor_row`](crate::report::Report::governor_row)).

use std::sync::OnceLock;
use std::time::Duration;

use governor::clock::QuantaUpkeepClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};

use crate::peers::governor_quota;
use crate::subject::Subject;

/// The rows' subject name.
pub const GOVERNOR_TUNED: &str = "governor_tuned";

/// How often the upkeep thread refreshes the clock: kova's coarse clock's tick, so that both
/// read a time of the same staleness.
pub const UPKEEP_INTERVAL: Duration = Duration::from_millis(1);

/// The one upkeep clock of the process: quanta runs at most one upkeep thread, so every tuned
/// limiter shares this one (a clone shares its thread). It is kept once started: its thread
/// wakes once a millisecond beside kova's own clock thread, for every subject alike.
fn upkeep_clock() -> QuantaUpkeepClock {
    static CLOCK: OnceLock<QuantaUpkeepClock> = OnceLock::new();
    CLOCK
        .get_or_init(|| {
            QuantaUpkeepClock::from_interval(UPKEEP_INTERVAL).expect("quanta's upkeep thread starts")
        })
        .clone()
}

type Instant = <QuantaUpkeepClock as governor::clock::Clock>::Instant;

/// governor's direct limiter on its upkeep clock.
pub struct GovernorTunedDirect(
    pub governor::RateLimiter<NotKeyed, InMemoryState, QuantaUpkeepClock, NoOpMiddleware<Instant>>,
);

impl std::fmt::Debug for GovernorTunedDirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GovernorTunedDirect").finish_non_exhaustive()
    }
}

impl GovernorTunedDirect {
    /// A direct governor limiter for the kova quota on the upkeep clock.
    pub fn new(quota: kova::Quota) -> Self {
        let quota = governor_quota(quota).expect("burst fits in u32");
        GovernorTunedDirect(governor::RateLimiter::direct_with_clock(quota, upkeep_clock()))
    }
}

impl Subject for GovernorTunedDirect {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.0.check().is_ok()
    }
}

/// governor's keyed limiter on its upkeep clock, its `DashMap` hashing with ahash.
pub struct GovernorTunedKeyed(
    pub  governor::RateLimiter<
        u64,
        DashMapStateStore<u64, ahash::RandomState>,
        QuantaUpkeepClock,
        NoOpMiddleware<Instant>,
    >,
);

impl std::fmt::Debug for GovernorTunedKeyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GovernorTunedKeyed").field("keys", &self.0.len()).finish()
    }
}

impl GovernorTunedKeyed {
    /// A keyed governor limiter for the kova quota on the upkeep clock, hashing with ahash.
    pub fn new(quota: kova::Quota) -> Self {
        let quota = governor_quota(quota).expect("burst fits in u32");
        GovernorTunedKeyed(governor::RateLimiter::dashmap_with_clock_and_hasher(
            quota,
            upkeep_clock(),
            ahash::RandomState::new(),
        ))
    }
}

impl Subject for GovernorTunedKeyed {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        self.0.check_key(&key).is_ok()
    }

    fn keys(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tuned_rows_limit_as_the_default_ones_do() {
        let quota = kova::Quota::per_hour(3).unwrap();
        let direct = GovernorTunedDirect::new(quota);
        assert_eq!((0..5).filter(|_| direct.hit(0)).count(), 3);
        let keyed = GovernorTunedKeyed::new(quota);
        assert_eq!((0..5).filter(|_| keyed.hit(9)).count(), 3);
        assert!(keyed.hit(10));
        assert_eq!(keyed.keys(), Some(2));
        // A second limiter shares the running upkeep thread rather than failing to start one.
        let again = GovernorTunedDirect::new(quota);
        assert!(again.hit(0));
    }

    #[test]
    fn the_upkeep_clock_advances() {
        let clock = upkeep_clock();
        let before = governor::clock::Clock::now(&clock);
        std::thread::sleep(Duration::from_millis(20));
        let after = governor::clock::Clock::now(&clock);
        assert!(after > before);
    }
}
