//! The cost of one clock read: kova's three clocks, quanta's, std's and governor's default.

use std::hint::black_box;

use criterion::Criterion;
use governor::clock::Clock as _;
use kova::{Clock, CoarseClock, ManualClock, PreciseClock};

/// The clock benchmarks.
pub(crate) fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("clock");
    let coarse = CoarseClock::new();
    group.bench_function("kova_coarse", |b| b.iter(|| black_box(coarse.now_nanos())));
    let precise = PreciseClock::new();
    group.bench_function("kova_precise", |b| b.iter(|| black_box(precise.now_nanos())));
    let manual = ManualClock::new();
    group.bench_function("kova_manual", |b| b.iter(|| black_box(manual.now_nanos())));
    group.bench_function("quanta_recent", |b| b.iter(|| black_box(quanta::Instant::recent())));
    group.bench_function("quanta_now", |b| b.iter(|| black_box(quanta::Instant::now())));
    let governor_clock = governor::clock::DefaultClock::default();
    group.bench_function("governor_default", |b| b.iter(|| black_box(governor_clock.now())));
    group.bench_function("std_instant", |b| b.iter(|| black_box(std::time::Instant::now())));
    group.finish();
}
