//! What the keyed benches share: the subjects' constructors, the key generator and the
//! CPU-time timer.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use criterion::Criterion;
use governor::DefaultKeyedRateLimiter;
use kova::{Gcra, Keyed, Quota};

/// The quota of both subjects: 10^9 per second admits every check, so every check writes its
/// key's state, as most checks in a server do.
pub const RATE: u32 = 1_000_000_000;

/// kova's keyed GCRA table with room for `max_keys` keys.
pub fn kova_table(max_keys: usize) -> Keyed<u64, Gcra> {
    Keyed::builder(Quota::per_second(u64::from(RATE)).unwrap()).max_keys(max_keys).build().unwrap()
}

/// governor's keyed limiter (a `DashMap`, its default store, on its default clock).
pub fn governor_table() -> DefaultKeyedRateLimiter<u64> {
    governor::RateLimiter::keyed(governor::Quota::per_second(NonZeroU32::new(RATE).unwrap()))
}

/// A cheap generator (xorshift64*), the same for both subjects.
pub struct Rng(pub u64);

impl Rng {
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        // Multiply-shift: uniform enough, no division.
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) * n) >> 32
    }
}

/// CPU time of the calling thread, from `/proc/thread-self/schedstat` (nanoseconds on the CPU);
/// `None` where that file is missing.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// Times `iters` runs of `f` by thread CPU time (wall time where unavailable).
pub fn cpu_timed(iters: u64, mut f: impl FnMut()) -> Duration {
    let (cpu, wall) = (thread_cpu_time(), Instant::now());
    for _ in 0..iters {
        f();
    }
    match (cpu, thread_cpu_time()) {
        (Some(start), Some(end)) => end.saturating_sub(start),
        _ => wall.elapsed(),
    }
}

/// The benches' criterion settings: short warm-up, 3 s of measurement, 20 samples.
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}
