//! [`LocalClock`]: the time this server's own state is kept on (the local layer's leases and
//! cached denials, the degrade policy's tables), as opposed to the time the scripts read.

use std::sync::Arc;

use kova::{Clock, CoarseClock};

/// The limiter's client clock when it has one (so tests are deterministic), else kova's coarse
/// clock: one relaxed load per reading, where a precise reading (quanta's, kept monotonic through
/// one high mark every thread writes) would put a shared write on every local answer. What
/// depends on a time within the coarse reading's lag of a boundary is decided again on the
/// precise time ([`Clock::max_lag_nanos`]), as kova's limiters do.
#[derive(Clone)]
pub(crate) enum LocalClock {
    Client(Arc<dyn Clock>),
    Coarse(CoarseClock),
}

impl LocalClock {
    pub(crate) fn new(client: Option<&Arc<dyn Clock>>) -> Self {
        match client {
            Some(clock) => LocalClock::Client(Arc::clone(clock)),
            None => LocalClock::Coarse(CoarseClock::new()),
        }
    }
}

impl Clock for LocalClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        match self {
            LocalClock::Client(clock) => clock.now_nanos(),
            LocalClock::Coarse(clock) => clock.now_nanos(),
        }
    }

    fn now_nanos_precise(&self) -> u64 {
        match self {
            LocalClock::Client(clock) => clock.now_nanos_precise(),
            LocalClock::Coarse(clock) => clock.now_nanos_precise(),
        }
    }

    #[inline]
    fn max_lag_nanos(&self) -> u64 {
        match self {
            LocalClock::Client(clock) => clock.max_lag_nanos(),
            LocalClock::Coarse(clock) => clock.max_lag_nanos(),
        }
    }
}
