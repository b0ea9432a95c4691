//! Clocks: where a limiter reads the time.
//!
//! Every clock reads `u64` nanoseconds on one monotonic timeline. [`CoarseClock`] (the default) and
//! [`PreciseClock`] share the process-wide timeline whose origin is the first time kova read the
//! clock, so their readings can be mixed. [`ManualClock`] is a timeline of its own that only moves
//! when told to: tests, loom models, fuzzing and simulation use it.

use std::sync::OnceLock;
use std::time::Duration;

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::Arc;

/// A source of monotonic time in nanoseconds.
///
/// Limiters tolerate a clock that seems to run backwards (a reading older than the stored state):
/// such a reading never grants tokens and never panics.
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin.
    fn now_nanos(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }
}

/// How often the upkeep thread refreshes the coarse time.
const UPKEEP_INTERVAL: Duration = Duration::from_millis(1);

struct Timeline {
    origin: quanta::Instant,
    /// Whether `quanta::Instant::recent()` is being kept fresh (by our upkeep thread or the
    /// application's own). When it is not, `CoarseClock` reads the precise time instead.
    recent_is_live: bool,
    /// Keeps kova's upkeep thread running for the life of the process.
    _upkeep: Option<quanta::Handle>,
}

fn timeline() -> &'static Timeline {
    static TIMELINE: OnceLock<Timeline> = OnceLock::new();
    TIMELINE.get_or_init(|| {
        let origin = quanta::Instant::now();
        // Start the shared upkeep thread once. It fails only when another upkeep thread already
        // runs in this process (then `recent()` is live anyway) or the thread cannot be spawned
        // (then `recent()` stays at zero and we fall back on the precise clock).
        let upkeep = quanta::Upkeep::new(UPKEEP_INTERVAL).start().ok();
        let recent_is_live = upkeep.is_some() || quanta::Instant::recent() > origin;
        Timeline { origin, recent_is_live, _upkeep: upkeep }
    })
}

fn nanos_since_origin(origin: quanta::Instant, instant: quanta::Instant) -> u64 {
    // Saturates at zero for a reading older than the origin (quanta's `recent()` is 0 before any
    // upkeep ran) and at u64::MAX after 584 years.
    u64::try_from(instant.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

/// The default clock: quanta's coarse `recent()` time, refreshed every millisecond by one upkeep
/// thread that kova starts lazily, once per process, the first time any clock is created.
///
/// Reading it costs one relaxed atomic load. Its resolution is the upkeep interval (1 ms), so
/// decisions within one millisecond see the same time; limits stay exact because refills are
/// computed from elapsed time, never from the number of reads. If no upkeep thread can run, it
/// reads the precise time instead: a limiter never sees a clock stuck at zero.
#[derive(Debug, Clone, Copy)]
pub struct CoarseClock {
    origin: quanta::Instant,
    live: bool,
}

impl CoarseClock {
    /// Returns the coarse clock, starting the shared upkeep thread if it is not running yet.
    ///
    /// ```
    /// use kova::{Clock, CoarseClock};
    /// let clock = CoarseClock::new();
    /// let a = clock.now_nanos();
    /// std::thread::sleep(std::time::Duration::from_millis(5));
    /// assert!(clock.now_nanos() > a);
    /// ```
    pub fn new() -> Self {
        let timeline = timeline();
        CoarseClock { origin: timeline.origin, live: timeline.recent_is_live }
    }
}

impl Default for CoarseClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        let instant = if self.live { quanta::Instant::recent() } else { quanta::Instant::now() };
        nanos_since_origin(self.origin, instant)
    }
}

/// quanta's precise `now()` (the TSC where it is reliable): nanosecond resolution, a few
/// nanoseconds more per read than [`CoarseClock`]. Shares the coarse clock's timeline.
#[derive(Debug, Clone, Copy)]
pub struct PreciseClock {
    origin: quanta::Instant,
}

impl PreciseClock {
    /// Returns the precise clock.
    ///
    /// ```
    /// use kova::{Clock, PreciseClock};
    /// let clock = PreciseClock::new();
    /// assert!(clock.now_nanos() <= clock.now_nanos());
    /// ```
    pub fn new() -> Self {
        PreciseClock { origin: timeline().origin }
    }
}

impl Default for PreciseClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for PreciseClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        nanos_since_origin(self.origin, quanta::Instant::now())
    }
}

/// A clock that moves only when told to. Clones share one time, so a test can hold a handle while
/// the limiter holds another.
#[derive(Debug, Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A manual clock reading zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// let handle = clock.clone();
    /// handle.advance(Duration::from_millis(3));
    /// assert_eq!(clock.now_nanos(), 3_000_000);
    /// ```
    pub fn new() -> Self {
        Self::starting_at(0)
    }

    /// A manual clock reading `nanos`.
    pub fn starting_at(nanos: u64) -> Self {
        ManualClock { nanos: Arc::new(AtomicU64::new(nanos)) }
    }

    /// Moves the time forward by `by` (saturating at `u64::MAX` nanoseconds).
    pub fn advance(&self, by: Duration) {
        self.advance_nanos(u64::try_from(by.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Moves the time forward by `nanos` (saturating).
    pub fn advance_nanos(&self, nanos: u64) {
        // Relaxed: the clock is a single value with no other data published through it.
        let mut current = self.nanos.load(Ordering::Relaxed);
        loop {
            let next = current.saturating_add(nanos);
            match self.nanos.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Sets the time, also backwards (to test that a stale reading never grants tokens).
    pub fn set(&self, nanos: u64) {
        self.nanos.store(nanos, Ordering::Relaxed);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::Relaxed)
    }
}
