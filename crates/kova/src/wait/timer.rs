//! Where a waiter sleeps.

use std::future::Future;
use std::time::Duration;

/// Sleeps for a waiter: asynchronously ([`sleep`](Self::sleep)) and on a blocked thread
/// ([`sleep_blocking`](Self::sleep_blocking)).
///
/// Durations are the limiter clock's: a timer for a simulated clock (a
/// [`ManualClock`](crate::ManualClock) in tests) completes when that clock has moved on.
pub trait Timer: Send + Sync {
    /// The future [`sleep`](Self::sleep) returns.
    type Sleep: Future<Output = ()> + Send;

    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> Self::Sleep;

    /// Blocks the thread for `duration`. By default, [`std::thread::sleep`].
    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// The default timer: [`futures_timer::Delay`], whose one helper thread (started the first time
/// a future sleeps) wakes sleeping futures, under any executor.
///
/// ```
/// use kova::wait::{ThreadTimer, Timer};
/// let timer = ThreadTimer::new();
/// let _sleep = timer.sleep(std::time::Duration::from_millis(1));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadTimer {
    _private: (),
}

impl ThreadTimer {
    /// The default timer.
    pub fn new() -> Self {
        ThreadTimer { _private: () }
    }
}

impl Timer for ThreadTimer {
    type Sleep = futures_timer::Delay;

    fn sleep(&self, duration: Duration) -> futures_timer::Delay {
        futures_timer::Delay::new(duration)
    }
}

/// tokio's timer (`tokio::time::sleep`): must be used inside a tokio runtime with time enabled;
/// follows tokio's paused time in tests.
///
/// ```
/// # #[cfg(feature = "tokio")] {
/// let _timer = kova::wait::TokioTimer::new();
/// # }
/// ```
#[cfg(feature = "tokio")]
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioTimer {
    _private: (),
}

#[cfg(feature = "tokio")]
impl TokioTimer {
    /// tokio's timer.
    pub fn new() -> Self {
        TokioTimer { _private: () }
    }
}

#[cfg(feature = "tokio")]
impl Timer for TokioTimer {
    type Sleep = tokio::time::Sleep;

    fn sleep(&self, duration: Duration) -> tokio::time::Sleep {
        tokio::time::sleep(duration)
    }
}
