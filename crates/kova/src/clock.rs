//! Clocks: where a limiter reads the time.
//!
//! Every clock reads `u64` nanoseconds on one monotonic timeline. [`CoarseClock`] (the default) and
//! [`PreciseClock`] share the process-wide timeline whose origin is the first time kova read the
//! clock, so their readings can be mixed. [`ManualClock`] is a timeline of its own that only moves
//! when told to: tests, loom models, fuzzing and simulation use it.

use std::sync::OnceLock;
use std::time::Duration;

use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::{Arc, StaticAtomicBool, StaticAtomicU64};

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

    /// How far a reading of [`now_nanos`](Self::now_nanos) may trail
    /// [`now_nanos_precise`](Self::now_nanos_precise). A limiter decides a denial again on the
    /// precise time when its retry time lies within this lag (a *near miss*): a coarse reading
    /// that moves in steps would otherwise lose whatever the rate refills between two steps
    /// beyond one burst. 0, the default, for a clock whose every reading is precise: no check is
    /// ever decided twice.
    fn max_lag_nanos(&self) -> u64 {
        0
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }

    fn now_nanos_precise(&self) -> u64 {
        (**self).now_nanos_precise()
    }

    fn max_lag_nanos(&self) -> u64 {
        (**self).max_lag_nanos()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }

    fn now_nanos_precise(&self) -> u64 {
        (**self).now_nanos_precise()
    }

    fn max_lag_nanos(&self) -> u64 {
        (**self).max_lag_nanos()
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
/// How many upkeep rounds make one window of the lag bound ([`LAG_BOUND_NANOS`]).
const LAG_WINDOW_ROUNDS: u32 = 1024;
/// The least lag bound: a few upkeep intervals, so that a round that comes a little late
/// still finds its near misses decided again.
const MIN_LAG_BOUND_NANOS: u64 = 4 * UPKEEP_INTERVAL.as_nanos() as u64;

struct Timeline {
    origin: quanta::Instant,
    /// Whether kova's upkeep thread runs (it keeps [`RECENT_NANOS`] fresh). When it could not
    /// be started, `CoarseClock` reads the precise time instead.
    recent_is_live: bool,
}

/// The coarse time: nanoseconds from the timeline's origin to the upkeep thread's last reading
/// of the precise time. Written only by that thread (`fetch_max`, so it never goes back), read
/// by every [`CoarseClock`] with one relaxed load, inlined where the limiter is: quanta's own
/// `recent()` is an out-of-line call plus a `Duration` round trip on every check. Relaxed: a
/// reading is a number, not a publication of other memory.
static RECENT_NANOS: StaticAtomicU64 = StaticAtomicU64::new(0);

/// What [`RECENT_NANOS`] holds in a process forked from one whose upkeep thread ran: `fork`
/// copies only the forking thread, so no thread moves the coarse time there, and a limiter would
/// read the time of the fork for ever (every denial final). The first coarse reading that finds it
/// starts a new upkeep thread ([`after_fork`]) and reads the precise time until that thread has
/// written. No reading is ever this late (584 years from the origin).
const FORKED: u64 = u64::MAX;

/// How far [`RECENT_NANOS`] may trail the precise time, as the upkeep thread sees it: twice the
/// longest gap between two of its rounds over the current and the previous window of
/// [`LAG_WINDOW_ROUNDS`], and at least [`MIN_LAG_BOUND_NANOS`]. A reader's lag is less than the
/// gap its round ends, so twice the recent longest covers a round that comes late again.
/// Relaxed, as `RECENT_NANOS`: a number.
static LAG_BOUND_NANOS: StaticAtomicU64 = StaticAtomicU64::new(MIN_LAG_BOUND_NANOS);

/// The latest precise reading any thread has been given ([`precise_nanos`]). On its own cache
/// line: near misses and [`PreciseClock`] write it, and the coarse hit path must not share
/// their line.
static PRECISE_HIGH_NANOS: crossbeam_utils::CachePadded<StaticAtomicU64> =
    crossbeam_utils::CachePadded::new(StaticAtomicU64::new(0));

/// The one timeline, made by the first clock.
static TIMELINE: OnceLock<Timeline> = OnceLock::new();

/// The coarse time where a clock has started the upkeep thread, for kova's own bookkeeping,
/// which must not start that thread itself (no background work the caller did not ask for):
/// one load. `None` before any clock was made, where the thread could not be started, and in a
/// forked child until its first coarse reading.
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri), not(kova_loom)))]
pub(crate) fn coarse_nanos_if_running() -> Option<u64> {
    TIMELINE.get().filter(|timeline| timeline.recent_is_live)?;
    match RECENT_NANOS.load(Ordering::Relaxed) {
        FORKED => None,
        recent => Some(recent),
    }
}

fn timeline() -> &'static Timeline {
    TIMELINE.get_or_init(|| {
        let origin = quanta::Instant::now();
        // One upkeep thread per process, started with the timeline. If it cannot be spawned,
        // `recent_is_live` stays false and the coarse clock reads the precise time: a limiter
        // never sees a clock stuck at the origin.
        let upkeep = std::thread::Builder::new().name("kova-clock".into()).spawn(move || upkeep(origin));
        if upkeep.is_ok() {
            forget_upkeep_in_forked_children();
        }
        Timeline { origin, recent_is_live: upkeep.is_ok() }
    })
}

/// Has a child forked from this process mark the coarse time as [`FORKED`]: its copy of the
/// upkeep thread does not exist.
#[cfg(all(unix, not(miri), not(kova_loom)))]
fn forget_upkeep_in_forked_children() {
    extern "C" fn in_child() {
        // A store only: all a child may do before it execs or starts threads of its own.
        RECENT_NANOS.store(FORKED, Ordering::Relaxed);
        UPKEEP_RESTARTED.store(false, Ordering::Relaxed);
    }
    // SAFETY: `in_child` is a plain `extern "C" fn` with no arguments that only stores to two
    // atomics (async-signal-safe); registered once, from the timeline's one initialisation.
    // Registration fails only for want of memory; the child then keeps the frozen time, as
    // before the handler existed.
    let _ = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
}

/// Without `fork` (or under Miri and loom, which cannot run the handler) there is nothing to do.
#[cfg(not(all(unix, not(miri), not(kova_loom))))]
fn forget_upkeep_in_forked_children() {}

/// Whether a forked child has started its own upkeep thread (one per process, as the first).
static UPKEEP_RESTARTED: StaticAtomicBool = StaticAtomicBool::new(false);

/// The coarse time in a forked child before its upkeep thread has written: the first reader
/// starts that thread, and every reader reads the precise time meanwhile (no earlier than any
/// coarse reading the parent gave, which were precise readings once). Out of line: the hit path
/// stays one load and one compare.
#[cold]
#[inline(never)]
fn after_fork(origin: quanta::Instant) -> u64 {
    if UPKEEP_RESTARTED.compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        // If it cannot be spawned, every reading stays precise: slower, never stuck.
        let _ = std::thread::Builder::new().name("kova-clock".into()).spawn(move || upkeep(origin));
    }
    precise_nanos(origin)
}

/// The upkeep thread's loop: refresh the coarse time, and keep the lag bound.
fn upkeep(origin: quanta::Instant) -> ! {
    let mut last = precise_nanos(origin);
    let (mut longest, mut longest_before) = (0u64, 0u64);
    let mut round = 0u32;
    loop {
        let now = precise_nanos(origin);
        // The only writers are this thread and a fork's child handler, which leaves `FORKED`
        // for this thread (the child's) to replace; `fetch_max` alone would keep it.
        if RECENT_NANOS.load(Ordering::Relaxed) == FORKED {
            RECENT_NANOS.store(now, Ordering::Relaxed);
        } else {
            RECENT_NANOS.fetch_max(now, Ordering::Relaxed);
        }
        longest = longest.max(now.saturating_sub(last));
        last = now;
        let bound = longest.max(longest_before).saturating_mul(2).max(MIN_LAG_BOUND_NANOS);
        if bound != LAG_BOUND_NANOS.load(Ordering::Relaxed) {
            LAG_BOUND_NANOS.store(bound, Ordering::Relaxed);
        }
        round += 1;
        if round == LAG_WINDOW_ROUNDS {
            (round, longest_before, longest) = (0, longest, 0);
        }
        std::thread::sleep(UPKEEP_INTERVAL);
    }
}

fn nanos_since_origin(origin: quanta::Instant, instant: quanta::Instant) -> u64 {
    // Saturates at u64::MAX after 584 years.
    u64::try_from(instant.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

/// quanta's precise time, made monotonic across threads: never less than any reading this
/// function returned before, to this thread or any other. quanta reads the CPU's time-stamp
/// counter, and on some machines the counters of different cores disagree, so a thread moved
/// from one core to another (or two threads on two cores) could see time go back, and a limiter
/// deny a check its state has room for. Here a reading behind the latest one given out returns
/// that one instead: on a core whose counter lags, time stands still until it catches up.
fn precise_nanos(origin: quanta::Instant) -> u64 {
    monotonic(&PRECISE_HIGH_NANOS, nanos_since_origin(origin, quanta::Instant::now()))
}

/// `raw`, or the latest reading `high` has given out if that is later; raises `high` to `raw`.
#[inline]
fn monotonic(high: &StaticAtomicU64, raw: u64) -> u64 {
    // Relaxed: the high mark is a number; no other memory is published through it. Its total
    // modification order is what makes every returned reading no older than one returned before.
    let latest = high.load(Ordering::Relaxed);
    if raw <= latest {
        return latest;
    }
    high.fetch_max(raw, Ordering::Relaxed).max(raw)
}

/// The default clock: the precise time as read every millisecond by one upkeep thread
/// (`kova-clock`) that kova starts lazily, once per process, the first time any clock is created.
///
/// Reading it costs one relaxed atomic load, inlined. Its resolution is the upkeep interval
/// (1 ms, later on a busy machine), so decisions within one step see the same time. A coarse time
/// alone would lose rate: one step can refill at most one burst, so at a rate whose refill in one
/// step exceeds the burst (10,000/s with a burst of 1 is one unit every 100 us) the rest of the
/// rate would be denied. kova's limiters therefore decide a *near miss* again on the precise time
/// ([`Clock::max_lag_nanos`]): a denial whose retry time lies within the coarse time's possible
/// lag. So:
/// - an admitted check, and a denial farther from its retry time than the lag, cost one load of
///   the coarse time, as before;
/// - a near miss costs one more decision on a precise reading (quanta's `now()`, kept monotonic
///   across threads, a compare with a shared high mark and a write to it when time has moved);
/// - at any quota, a limiter on this clock admits its full rate, as on [`PreciseClock`], and never
///   more than its quota. The lag bound is twice the longest recent gap between the upkeep
///   thread's rounds (at least 4 ms); a check during a longer stall than that is decided on the
///   coarse time, denying a little more than the quota's rate, never admitting more.
///
/// Every reading, coarse or precise, is monotonic for every thread (see [`PreciseClock`]). If no
/// upkeep thread can run, it reads the precise time instead: a limiter never sees a clock stuck
/// at zero. A process forked from one whose clock had started (a pre-forking server's workers)
/// has no upkeep thread, since `fork` copies only the forking thread: on Unix its first coarse
/// reading starts one, and its limiters, built before or after the fork, go on moving with it. A keyed table decides whether a key is idle on
/// [`now_nanos_precise`](Clock::now_nanos_precise).
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
    /// // The upkeep thread moves it about every millisecond; later on a loaded machine.
    /// let waited = std::time::Instant::now();
    /// while clock.now_nanos() == a && waited.elapsed() < std::time::Duration::from_secs(5) {
    ///     std::thread::sleep(std::time::Duration::from_millis(1));
    /// }
    /// assert!(clock.now_nanos() > a);
    /// assert!(clock.now_nanos_precise() >= clock.now_nanos());
    /// assert!(clock.max_lag_nanos() >= 4_000_000);
    /// ```
    pub fn new() -> Self {
        let timeline = timeline();
        CoarseClock { origin: timeline.origin, live: timeline.recent_is_live }
    }
}

/// A builder's clock: one it was given, or the coarse clock, made only when the limiter is built.
/// A builder that starts on the coarse clock and is then given another (a [`ManualClock`] in a
/// test) must never have started the coarse clock's upkeep thread: no background work the
/// caller did not ask for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BuilderClock<C> {
    /// The clock the caller gave.
    Given(C),
    /// Made at build time.
    Deferred(fn() -> C),
}

impl BuilderClock<CoarseClock> {
    /// The coarse clock, made at build time.
    pub(crate) fn coarse() -> Self {
        BuilderClock::Deferred(CoarseClock::new)
    }
}

impl<C> BuilderClock<C> {
    /// The clock, made now if it was deferred.
    pub(crate) fn into_clock(self) -> C {
        match self {
            BuilderClock::Given(clock) => clock,
            BuilderClock::Deferred(make) => make(),
        }
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
            match RECENT_NANOS.load(Ordering::Relaxed) {
                FORKED => after_fork(self.origin),
                recent => recent,
            }
        } else {
            precise_nanos(self.origin)
        }
    }

    /// The monotonic precise time, or the coarse reading if that is later.
    fn now_nanos_precise(&self) -> u64 {
        precise_nanos(self.origin).max(self.now_nanos())
    }

    #[inline]
    fn max_lag_nanos(&self) -> u64 {
        if self.live {
            LAG_BOUND_NANOS.load(Ordering::Relaxed)
        } else {
            0
        }
    }
}

/// quanta's precise `now()` (the time-stamp counter where it is reliable): nanosecond resolution,
/// shared with the coarse clock's timeline. Monotonic across threads and cores: a reading never
/// goes back to any thread, even where the cores' counters disagree (a shared high mark, which a
/// reading compares with and, when time has moved, raises: more than a [`CoarseClock`] read, and
/// a write to one shared cache line per check, so threads on many cores checking flat out
/// contend on it).
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
        precise_nanos(self.origin)
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

/// A clock stopped at one reading, to look at one or several cells at the same instant.
pub(crate) struct At(pub(crate) u64);

impl Clock for At {
    fn now_nanos(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two cores whose counters disagree by a second: a thread on the one behind, reading after a
    /// thread on the one ahead, gets no earlier a reading; and time stands still for it until its
    /// counter catches up.
    #[test]
    fn a_reading_from_a_core_whose_counter_lags_never_goes_back() {
        let high = StaticAtomicU64::new(0);
        let skew = 1_000_000_000;
        let ahead = monotonic(&high, 5 + skew);
        assert_eq!(ahead, 5 + skew);
        for behind in [6, 7, skew] {
            assert_eq!(monotonic(&high, behind), ahead, "a lagging core's reading went back");
        }
        assert_eq!(monotonic(&high, skew + 9), skew + 9, "time moves on once the counter catches up");
    }

    #[test]
    fn readings_handed_between_threads_never_go_back() {
        let high = std::sync::Arc::new(StaticAtomicU64::new(0));
        // Each thread's counter runs at its own offset; each checks its readings never decrease
        // and are never below the latest reading any thread published before it read.
        let published = std::sync::Arc::new(StaticAtomicU64::new(0));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (high, published) = (high.clone(), published.clone());
                std::thread::spawn(move || {
                    let mut last = 0;
                    for i in 0..20_000u64 {
                        // Acquire pairs with the Release below: what another thread read before
                        // publishing happened before our reading.
                        let seen = published.load(Ordering::Acquire);
                        let reading = monotonic(&high, i * 10 + t * 7_000);
                        assert!(
                            reading >= last && reading >= seen,
                            "{reading} after {last}, published {seen}"
                        );
                        last = reading;
                        published.fetch_max(reading, Ordering::Release);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }
}
