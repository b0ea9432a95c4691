//! Direct limiters: one check, allow path and deny path, per algorithm; two threads on one.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use kova::{Algorithm, AlgorithmKind, RateLimiter};
use kova_bench::peers::{GovernorDirect, MutexBucket};
use kova_bench::scenarios::{each_algorithm, AlgorithmVisitor, Scenario};
use kova_bench::subject::{CasFloor, KovaDirect, Subject};

/// One call of `iter_custom` with `threads` threads: each does `iters` checks once the barrier
/// releases them all; the time is the slowest thread's. One iteration = one check per thread.
pub(crate) fn contended<S: Subject + ?Sized>(subject: &S, threads: usize, iters: u64) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(subject.hit(black_box(0)));
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("bench thread")).max().unwrap_or_default()
    })
}

fn bench_subject<S: Subject>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    subject: &S,
    threads: usize,
) {
    if threads == 1 {
        group.bench_function(name, |b| b.iter(|| black_box(subject.hit(black_box(0)))));
    } else {
        group.bench_function(name, |b| b.iter_custom(|iters| contended(subject, threads, iters)));
    }
}

struct Direct<'a, 'b> {
    scenario: Scenario,
    threads: usize,
    group: &'a mut BenchmarkGroup<'b, WallTime>,
}

impl AlgorithmVisitor for Direct<'_, '_> {
    fn visit<A: Algorithm>(&mut self, kind: AlgorithmKind) {
        let limiter = KovaDirect(RateLimiter::<A>::new(self.scenario.quota(kind)).expect("valid quota"));
        if self.scenario == Scenario::DirectDeny {
            while limiter.hit(0) {}
        }
        bench_subject(self.group, kind.as_str(), &limiter, self.threads);
    }
}

fn group(c: &mut Criterion, name: &str, scenario: Scenario, threads: usize) {
    let mut group = c.benchmark_group(name);
    each_algorithm(&mut Direct { scenario, threads, group: &mut group });
    let quota = scenario.quota(AlgorithmKind::Gcra);
    let governor = GovernorDirect::new(quota);
    let mutex = MutexBucket::new(quota);
    if scenario == Scenario::DirectDeny {
        while governor.hit(0) {}
        while mutex.hit(0) {}
    }
    bench_subject(&mut group, "governor", &governor, threads);
    bench_subject(&mut group, "mutex_bucket", &mutex, threads);
    bench_subject(&mut group, "floor_cas", &CasFloor::default(), threads);
    group.finish();
}

/// The direct-limiter benchmarks.
pub(crate) fn bench(c: &mut Criterion) {
    group(c, "direct/allow", Scenario::Direct, 1);
    group(c, "direct/deny", Scenario::DirectDeny, 1);
    group(c, "direct/allow_2_threads", Scenario::Direct, 2);
}
