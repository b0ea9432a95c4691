//! Clocks: where a limiter reads the time.
//!
//! Every clock reads `u64` nanoseconds on one monotonic timeline. [`CoarseClock`] (the default) and
//! [`PreciseClock`] share the process-wide timeline whose origin is the first time kova read the
//! clock, so their readings can be mixed. [`ManualClock`] is a timeline of its own that only moves
//! when told to: tests, loom models, fuzzing and simulation use it.

use std::sync::OnceLock;
use std::time::Duration;

use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::{Arc, StaticAtomicU64};

/// A source of monotonic time in nanoseconds.
///
/// Limiters tolerate a clock that seems to run backwards (a reading older than the stored state):
/// such a reading never grants tokens and never panics.
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin.
    fn now_nanos(&self) -> u64;

    /// Nanoseconds since this clock's origin, read as exactly as the clock can, and never less
    /// than what [`now_nanos`](Self::now_nanos) returns on this thread. A keyed table reads it
    /// (once per insert into a full shard, and per sweep step) to tell whether a key is idle
    /// before reclaiming it, so that a cached reading running late never keeps keys that are in
    /// fact idle. By default, `now_nanos`; [`CoarseClock`] reads the precise time here.
    fn now_nanos_precise(&self) -> u64 {
        self.now_nanos()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }

    fn now_nanos_precise(&self) -> u64 {
        (**self).now_nanos_precise()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }

    fn now_nanos_precise(&self) -> u64 {
        (**self).now_nanos_precise()
    }
}

/// Under `--cfg kova_loom` quanta is not built (Cargo.toml leaves it out): this stand-in keeps the
/// clocks below, and so the public API (`Keyed`'s default clock included), compiling on std's
/// `Instant`. Loom models read a `ManualClock`; nothing here is model-checked.
#[cfg(kova_loom)]
mod quanta {
    use std::time::Duration;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub(super) struct Instant(std::time::Instant);

    impl Instant {
        pub(super) fn now() -> Self {
            Instant(std::time::Instant::now())
        }

        pub(super) fn saturating_duration_since(&self, earlier: Instant) -> Duration {
            self.0.saturating_duration_since(earlier.0)
        }
    }
}

/// How often the upkeep thread refreshes the coarse time.
const UPKEEP_INTERVAL: Duration = Duration::from_millis(1);

struct Timeline {
    origin: quanta::Instant,
    /// Whether kova's upkeep thread runs (it keeps [`RECENT_NANOS`] fresh). When it could not
    /// be started, `CoarseClock` reads the precise time instead.
    recent_is_live: bool,
}

/// The coarse time: nanoseconds from the timeline's origin to the upkeep thread's last reading
/// of quanta's precise clock. Written only by that thread (`fetch_max`, so it never goes back),
/// read by every [`CoarseClock`] with one relaxed load, inlined where the limiter is: quanta's
/// own `recent()` is an out-of-line call plus a `Duration` round trip, about 25 instructions on
/// every check. Relaxed: a reading is a number, not a publication of other memory.
static RECENT_NANOS: StaticAtomicU64 = StaticAtomicU64::new(0);

fn timeline() -> &'static Timeline {
    static TIMELINE: OnceLock<Timeline> = OnceLock::new();
    TIMELINE.get_or_init(|| {
        let origin = quanta::Instant::now();
        // One upkeep thread per process, started with the timeline. If it cannot be spawned,
        // `recent_is_live` stays false and the coarse clock reads the precise time: a limiter
        // never sees a clock stuck at the origin.
        let upkeep = std::thread::Builder::new().name("kova-clock".into()).spawn(move || loop {
            RECENT_NANOS.fetch_max(nanos_since_origin(origin, quanta::Instant::now()), Ordering::Relaxed);
            std::thread::sleep(UPKEEP_INTERVAL);
        });
        Timeline { origin, recent_is_live: upkeep.is_ok() }
    })
}

fn nanos_since_origin(origin: quanta::Instant, instant: quanta::Instant) -> u64 {
    // Saturates at u64::MAX after 584 years.
    u64::try_from(instant.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

/// The default clock: quanta's precise time as read every millisecond by one upkeep thread
/// (`kova-clock`) that kova starts lazily, once per process, the first time any clock is created.
///
/// Reading it costs one relaxed atomic load, inlined. Its resolution is the upkeep interval
/// (1 ms), so decisions within one millisecond see the same time; limits stay exact because
/// refills are computed from elapsed time, never from the number of reads. If no upkeep thread can run, it
/// reads the precise time instead: a limiter never sees a clock stuck at zero.
///
/// On a machine whose CPUs are all busy, the upkeep thread waits for one like any other thread,
/// and readings fall further behind: on the 2-core dev VM, with two threads checking flat out,
/// up to 5.8 ms. Limits hold on the clock's own timeline; in real time, two admissions can come
/// closer than the quota spaces them by as much as the lateness changed between them. A keyed
/// table decides whether a key is idle on [`now_nanos_precise`](Clock::now_nanos_precise).
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
        if self.live {
            RECENT_NANOS.load(Ordering::Relaxed)
        } else {
            nanos_since_origin(self.origin, quanta::Instant::now())
        }
    }

    /// quanta's precise time, or the coarse reading if that is later (the upkeep thread's last
    /// reading may come from a core whose counter runs a little ahead).
    fn now_nanos_precise(&self) -> u64 {
        nanos_since_origin(self.origin, quanta::Instant::now()).max(self.now_nanos())
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
