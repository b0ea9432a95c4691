//! Stopwatch: how long a decision took, measured only when the `metrics` feature reports it (a
//! zero-sized no-op otherwise, so the request path pays for no clock read it does not use).

use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopwatch {
    #[cfg(feature = "metrics")]
    started: std::time::Instant,
}

impl Stopwatch {
    pub(crate) fn start() -> Self {
        Stopwatch {
            #[cfg(feature = "metrics")]
            started: std::time::Instant::now(),
        }
    }

    /// The time since [`start`](Self::start); zero without the `metrics` feature.
    pub(crate) fn elapsed(&self) -> Duration {
        #[cfg(feature = "metrics")]
        return self.started.elapsed();
        #[cfg(not(feature = "metrics"))]
        Duration::ZERO
    }
}
