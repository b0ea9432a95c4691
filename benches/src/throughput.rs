//! The measuring loop: threads released together by a barrier, run for a fixed time (or a fixed
//! number of operations), one operation in [`SAMPLE_EVERY`] timed with the TSC.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::subject::Subject;

/// One operation in this many is timed on its own (two TSC reads), so sampling adds about
/// `2 * 10 ns / 64` per operation on average.
pub const SAMPLE_EVERY: u64 = 64;

/// Where each thread's keys come from, one per operation.
pub trait KeyStream: Send {
    /// The next key.
    fn next_key(&mut self) -> u64;
}

/// The same key every time.
#[derive(Debug, Clone, Copy)]
pub struct FixedKey(pub u64);

impl KeyStream for FixedKey {
    #[inline]
    fn next_key(&mut self) -> u64 {
        self.0
    }
}

/// Cycles through a pre-computed sequence (length a power of two), so drawing the key costs one
/// sequential read and no random-number generation.
#[derive(Debug, Clone)]
pub struct CycleKeys {
    keys: Arc<[u32]>,
    index: usize,
}

impl CycleKeys {
    /// Cycles through `keys` (its length must be a power of two), starting at `offset`.
    pub fn new(keys: Arc<[u32]>, offset: usize) -> Self {
        assert!(keys.len().is_power_of_two(), "key sequence length must be a power of two");
        CycleKeys { keys, index: offset }
    }
}

impl KeyStream for CycleKeys {
    #[inline]
    fn next_key(&mut self) -> u64 {
        let key = self.keys[self.index & (self.keys.len() - 1)];
        self.index = self.index.wrapping_add(1);
        u64::from(key)
    }
}

/// A key never seen before on every call: `first`, `first + step`, ... (threads interleave by
/// starting at their index and stepping by the thread count).
#[derive(Debug, Clone, Copy)]
pub struct FreshKeys {
    next: u64,
    step: u64,
}

impl FreshKeys {
    /// Keys `first, first + step, ...`.
    pub fn new(first: u64, step: u64) -> Self {
        FreshKeys { next: first, step }
    }
}

impl KeyStream for FreshKeys {
    #[inline]
    fn next_key(&mut self) -> u64 {
        let key = self.next;
        self.next = self.next.wrapping_add(self.step);
        key
    }
}

/// How long one measurement runs.
#[derive(Debug, Clone, Copy)]
pub struct RunPlan {
    /// Wall time of the measurement.
    pub duration: Duration,
    /// Stop early after this many operations in total (split over the threads).
    pub max_ops: Option<u64>,
    /// Nanoseconds that two back-to-back TSC reads cost, subtracted from each sample.
    pub timer_overhead_ns: u64,
    /// Rounds of [`work`] each thread does between two operations (0: a tight loop).
    pub work_rounds: u32,
}

/// What a request handler does between two checks, in the "with work" scenarios: `rounds` steps
/// of a xorshift on a value the optimiser cannot see through, touching no shared memory, so that
/// the work and not the limiter sets the pace. [`work_nanos`] measures what it costs.
#[inline]
pub fn work(rounds: u32) {
    let mut x = std::hint::black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = std::hint::black_box(x);
    }
    std::hint::black_box(x);
}

/// Nanoseconds one [`work`] of `rounds` costs on this machine (the median of many, timer
/// overhead removed), for the report.
pub fn work_nanos(rounds: u32) -> u64 {
    let clock = quanta::Clock::new();
    let mut samples = latency_histogram();
    for _ in 0..20_000 {
        let start = clock.raw();
        work(rounds);
        let end = clock.raw();
        samples.saturating_record(clock.delta_as_nanos(start, end));
    }
    samples.value_at_quantile(0.5).saturating_sub(timer_overhead_ns())
}

/// What one measurement found.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunResult {
    /// Decisions per second, all threads together.
    pub ops_per_sec: f64,
    /// Median latency of one sampled decision, nanoseconds (timer overhead removed).
    pub ns_p50: f64,
    /// 99th percentile latency, nanoseconds.
    pub ns_p99: f64,
    /// Share of decisions that admitted.
    pub allowed_share: f64,
    /// Operations done.
    pub ops: u64,
    /// With several threads, the share of the union of the threads' measuring spans during
    /// which all of them were measuring ([`overlap`]); `None` for one thread.
    pub overlap: Option<f64>,
    /// With several threads, the slowest thread's operations per second over the fastest's
    /// (1: shared evenly); `None` for one thread.
    pub thread_share: Option<f64>,
    /// With several threads, the 99th percentile of the slowest thread's own samples: what the
    /// requests on the core that lost the contention waited.
    pub slowest_p99: Option<f64>,
}

/// The share of the union of `spans` (start, end) covered by all of them at once: 1 when they
/// coincide, 0 when some two do not meet. Threads released by one barrier should overlap almost
/// entirely; a thread that started late (descheduled) or ran alone shows here.
///
/// ```
/// use kova_bench::throughput::overlap;
/// assert_eq!(overlap(&[(0, 10), (0, 10)]), 1.0);
/// assert_eq!(overlap(&[(0, 10), (5, 15)]), 5.0 / 15.0);
/// assert_eq!(overlap(&[(0, 10), (20, 30)]), 0.0);
/// ```
pub fn overlap(spans: &[(u64, u64)]) -> f64 {
    let (Some(first), Some(last)) = (spans.iter().map(|s| s.0).min(), spans.iter().map(|s| s.1).max()) else {
        return 0.0;
    };
    let (latest_start, earliest_end) =
        (spans.iter().map(|s| s.0).max().unwrap_or(first), spans.iter().map(|s| s.1).min().unwrap_or(last));
    let union = last.saturating_sub(first);
    if union == 0 {
        return 1.0;
    }
    earliest_end.saturating_sub(latest_start) as f64 / union as f64
}

/// A latency histogram: nanoseconds up to `u32::MAX`, three significant digits.
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_max(u64::from(u32::MAX), 3).expect("valid histogram bounds")
}

/// Nanoseconds that two back-to-back raw TSC reads cost (the median of many).
pub fn timer_overhead_ns() -> u64 {
    let clock = quanta::Clock::new();
    let mut deltas = latency_histogram();
    for _ in 0..20_000 {
        let start = clock.raw();
        let end = clock.raw();
        deltas.saturating_record(clock.delta_as_nanos(start, end));
    }
    deltas.value_at_quantile(0.5)
}

struct ThreadOutcome {
    ops: u64,
    allowed: u64,
    elapsed_ns: u64,
    /// The measuring span on the process's shared timeline (nanoseconds since `origin`).
    span: (u64, u64),
    samples: Histogram<u64>,
}

/// How often a run with an operation cap looks whether its threads have all finished.
const CAPPED_POLL: Duration = Duration::from_millis(2);

/// Runs `subject` on `threads` threads, thread `i` drawing its keys from `keys(i)`, and measures
/// aggregate decisions per second and sampled latency.
pub fn measure<S, K, F>(subject: &S, threads: usize, plan: &RunPlan, keys: F) -> RunResult
where
    S: Subject + ?Sized,
    K: KeyStream,
    F: Fn(usize) -> K + Sync,
{
    let threads = threads.max(1);
    let stop = AtomicBool::new(false);
    let finished = AtomicUsize::new(0);
    let barrier = Barrier::new(threads + 1);
    let per_thread_cap = plan.max_ops.map(|m| (m / threads as u64).max(SAMPLE_EVERY));
    let origin = Instant::now();

    let outcomes: Vec<ThreadOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, finished, barrier, keys) = (&stop, &finished, &barrier, &keys);
                scope.spawn(move || {
                    let clock = quanta::Clock::new();
                    let mut stream = keys(t);
                    // Allocated in full up front (a fixed range), so recording never allocates.
                    let mut samples = latency_histogram();
                    let (mut ops, mut allowed) = (0u64, 0u64);
                    let cap = per_thread_cap.unwrap_or(u64::MAX);
                    barrier.wait();
                    let span_start = origin.elapsed().as_nanos() as u64;
                    let start = clock.raw();
                    loop {
                        for _ in 0..SAMPLE_EVERY - 1 {
                            let key = stream.next_key();
                            allowed += u64::from(subject.hit(key));
                            if plan.work_rounds > 0 {
                                work(plan.work_rounds);
                            }
                        }
                        let key = stream.next_key();
                        let t0 = clock.raw();
                        let ok = subject.hit(key);
                        let t1 = clock.raw();
                        allowed += u64::from(ok);
                        if plan.work_rounds > 0 {
                            work(plan.work_rounds);
                        }
                        let ns = clock.delta_as_nanos(t0, t1).saturating_sub(plan.timer_overhead_ns);
                        samples.saturating_record(ns);
                        ops += SAMPLE_EVERY;
                        // Relaxed: a plain stop flag; nothing is published through it.
                        if ops >= cap || stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    let end = clock.raw();
                    let span_end = origin.elapsed().as_nanos() as u64;
                    finished.fetch_add(1, Ordering::Relaxed);
                    ThreadOutcome {
                        ops,
                        allowed,
                        elapsed_ns: clock.delta_as_nanos(start, end).max(1),
                        span: (span_start, span_end),
                        samples,
                    }
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        // Woken only to stop the run: on a machine with as many cores as measuring threads, each
        // wake-up of this thread takes a core from one of them. With an operation cap the
        // threads may finish early, so the wait then looks often.
        let poll = if per_thread_cap.is_some() { CAPPED_POLL } else { plan.duration };
        while started.elapsed() < plan.duration && finished.load(Ordering::Relaxed) < threads {
            let left = plan.duration.saturating_sub(started.elapsed());
            std::thread::sleep(left.min(poll));
        }
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().expect("benchmark thread panicked")).collect()
    });

    // Each thread's own rate, summed: robust to a thread that was scheduled late.
    let ops_per_sec = outcomes.iter().map(|o| o.ops as f64 * 1e9 / o.elapsed_ns as f64).sum();
    let ops: u64 = outcomes.iter().map(|o| o.ops).sum();
    let allowed: u64 = outcomes.iter().map(|o| o.allowed).sum();
    let spans: Vec<(u64, u64)> = outcomes.iter().map(|o| o.span).collect();
    let mut samples = latency_histogram();
    for o in &outcomes {
        samples.add(&o.samples).expect("histograms of one range");
    }
    let quantile = |q: f64| if samples.is_empty() { f64::NAN } else { samples.value_at_quantile(q) as f64 };
    let rate = |o: &ThreadOutcome| o.ops as f64 * 1e9 / o.elapsed_ns as f64;
    let slowest = outcomes.iter().min_by(|a, b| rate(a).total_cmp(&rate(b)));
    let fastest = outcomes.iter().map(rate).fold(0.0, f64::max);
    let (thread_share, slowest_p99) = match slowest {
        Some(slowest) if threads > 1 => (
            Some(if fastest > 0.0 { rate(slowest) / fastest } else { 1.0 }),
            (!slowest.samples.is_empty()).then(|| slowest.samples.value_at_quantile(0.99) as f64),
        ),
        _ => (None, None),
    };
    RunResult {
        ops_per_sec,
        ns_p50: quantile(0.50),
        ns_p99: quantile(0.99),
        allowed_share: if ops == 0 { 0.0 } else { allowed as f64 / ops as f64 },
        ops,
        overlap: (threads > 1).then(|| overlap(&spans)),
        thread_share,
        slowest_p99,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::CasFloor;

    #[test]
    fn measures_a_floor() {
        let floor = CasFloor::new(4);
        let plan = RunPlan {
            duration: Duration::from_millis(30),
            max_ops: None,
            timer_overhead_ns: 0,
            work_rounds: 0,
        };
        let result = measure(&floor, 2, &plan, |t| FixedKey(t as u64));
        assert!(result.ops > 0 && result.ops % SAMPLE_EVERY == 0);
        assert!(result.ops_per_sec > 0.0);
        assert_eq!(result.allowed_share, 1.0);
        assert!(result.ns_p50 <= result.ns_p99);
        // Two threads released by one barrier for 30 ms measure together nearly all the time.
        let overlap = result.overlap.expect("two threads");
        assert!(overlap > 0.2 && overlap <= 1.0, "{overlap}");
        let share = result.thread_share.expect("two threads");
        assert!(share > 0.0 && share <= 1.0, "{share}");
        assert!(result.slowest_p99.is_some());
        let alone = measure(&floor, 1, &plan, |_| FixedKey(0));
        assert_eq!((alone.overlap, alone.thread_share, alone.slowest_p99), (None, None, None));
    }

    #[test]
    fn work_between_operations_slows_a_thread_down() {
        let floor = CasFloor::new(4);
        let tight = RunPlan {
            duration: Duration::from_millis(20),
            max_ops: None,
            timer_overhead_ns: 0,
            work_rounds: 0,
        };
        let busy = RunPlan { work_rounds: 400, ..tight };
        let fast = measure(&floor, 1, &tight, |_| FixedKey(0)).ops_per_sec;
        let slow = measure(&floor, 1, &busy, |_| FixedKey(0)).ops_per_sec;
        assert!(slow < fast / 2.0, "work of 400 rounds: {slow} against {fast} ops/s");
        assert!(work_nanos(400) > work_nanos(0));
    }

    #[test]
    fn overlap_of_spans() {
        assert_eq!(overlap(&[(3, 9)]), 1.0);
        assert_eq!(overlap(&[(0, 100), (10, 100), (0, 90)]), 0.8);
        assert_eq!(overlap(&[]), 0.0);
        // A thread that ran entirely after the others: nothing measured together.
        assert_eq!(overlap(&[(0, 10), (10, 20)]), 0.0);
    }

    #[test]
    fn op_cap_stops_early_and_fresh_keys_never_repeat() {
        let keyed = crate::peers::MutexKeyed::new(kova::Quota::per_hour(1).unwrap());
        let plan = RunPlan {
            duration: Duration::from_secs(30),
            max_ops: Some(6_400),
            timer_overhead_ns: 0,
            work_rounds: 0,
        };
        let started = Instant::now();
        let result = measure(&keyed, 2, &plan, |t| FreshKeys::new(t as u64, 2));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(result.ops, 6_400);
        // Every key was new, so every one of them was admitted and stored.
        assert_eq!(result.allowed_share, 1.0);
        assert_eq!(crate::subject::Subject::keys(&keyed), Some(6_400));
    }

    #[test]
    fn cycle_keys_wrap() {
        let mut keys = CycleKeys::new(Arc::from(vec![5u32, 6, 7, 8]), 3);
        let got: Vec<u64> = (0..6).map(|_| keys.next_key()).collect();
        assert_eq!(got, [8, 5, 6, 7, 8, 5]);
    }
}
