//! kova's keyed table against governor's keyed limiter (a `DashMap`, its default store, on its
//! default quanta clock), in the same run, on `u64` keys:
//! - `uniform_1m`: 1,000,000 live keys, uniform random access, one thread;
//! - `hot_1k`: 1,000 hot keys, uniform, one thread;
//! - `threads`: 1,000 hot keys per thread, one thread vs two threads on distinct keys
//!   (`iter_custom` with a start barrier; the time is the slower thread's);
//! - memory per live key, printed before the benches: kova's `memory_bytes()` and, for both, the
//!   heap growth a counting global allocator sees while a table of 1,000,000 keys is filled.
//!
//! The quota (10^9 per second) admits every check, so every check writes its key's state, as
//! most checks in a server do. Run: `cargo bench -p kova --bench keyed` (add a filter such as
//! `-- uniform_1m`).
//!
//! The single-thread groups time each sample by the thread's CPU time (from
//! `/proc/thread-self/schedstat`, wall time where it is missing), so that time the thread spends
//! descheduled on a shared machine does not count; the `threads` group uses wall time (it
//! measures running in parallel).

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};

/// Live heap bytes (requested sizes), counted always: the bench loops do not allocate.
#[path = "../tests/support/counting_allocator.rs"]
mod counting_allocator;
use counting_allocator::live;

mod support;
use support::{cpu_timed, governor_table, kova_table, Rng};

const LIVE_KEYS: u64 = 1_000_000;
const HOT_KEYS: u64 = 1_000;

/// Fills both subjects with `keys` keys and benches one uniform check at a time.
fn single_thread(c: &mut Criterion, name: &str, keys: u64) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    let kova = kova_table(2 * keys as usize);
    let governor = governor_table();
    for key in 0..keys {
        kova.check(&key);
        let _ = governor.check_key(&key);
    }
    assert_eq!(kova.len() as u64, keys);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    group.bench_function(BenchmarkId::new("kova", keys), |b| {
        b.iter_custom(|iters| {
            cpu_timed(iters, || {
                black_box(kova.check(&rng.below(keys)).is_allowed());
            })
        })
    });
    group.bench_function(BenchmarkId::new("governor", keys), |b| {
        b.iter_custom(|iters| {
            cpu_timed(iters, || {
                black_box(governor.check_key(&rng.below(keys)).is_ok());
            })
        })
    });
    group.finish();
}

fn uniform_1m(c: &mut Criterion) {
    single_thread(c, "uniform_1m", LIVE_KEYS);
}

fn hot_1k(c: &mut Criterion) {
    single_thread(c, "hot_1k", HOT_KEYS);
}

/// Runs `iters` checks on each of `threads` threads, each on its own `HOT_KEYS` keys; returns the
/// slower thread's time from a common start.
fn run_threads(threads: u64, iters: u64, check: &(impl Fn(u64) -> bool + Sync)) -> Duration {
    let barrier = Barrier::new(threads as usize);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                    let base = t * HOT_KEYS;
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(check(base + rng.below(HOT_KEYS)));
                    }
                    start.elapsed()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).max().unwrap_or_default()
    })
}

fn threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads");
    let kova = kova_table(1 << 16);
    let governor = governor_table();
    for key in 0..2 * HOT_KEYS {
        kova.check(&key);
        let _ = governor.check_key(&key);
    }
    for threads in [1u64, 2] {
        // Elements per iteration: one check on every thread.
        group.throughput(Throughput::Elements(threads));
        group.bench_function(BenchmarkId::new("kova", threads), |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &|key| kova.check(&key).is_allowed()))
        });
        group.bench_function(BenchmarkId::new("governor", threads), |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &|key| governor.check_key(&key).is_ok()))
        });
    }
    group.finish();
}

/// Heap bytes allocated by `fill` (net), from the counting allocator.
fn heap_of<T>(fill: impl FnOnce() -> T) -> (T, isize) {
    let before = live();
    let value = fill();
    (value, live() - before)
}

/// Memory per live key, printed once.
fn memory_report() {
    let keys = LIVE_KEYS;
    let (kova, kova_heap) = heap_of(|| {
        let table = kova_table(2 * keys as usize);
        for key in 0..keys {
            table.check(&key);
        }
        table
    });
    let reported = kova.memory_bytes();
    drop(kova);
    let (governor, governor_heap) = heap_of(|| {
        let table = governor_table();
        for key in 0..keys {
            let _ = table.check_key(&key);
        }
        table
    });
    assert_eq!(governor.len() as u64, keys);
    drop(governor);
    let per = |bytes: isize| bytes as f64 / keys as f64;
    println!("memory per live u64 key ({keys} keys, GCRA, max_keys {}):", 2 * keys);
    println!("  kova     memory_bytes(): {:>6.1} B/key ({reported} B)", per(reported as isize));
    println!("  kova     heap growth:    {:>6.1} B/key ({kova_heap} B)", per(kova_heap));
    println!("  governor heap growth:    {:>6.1} B/key ({governor_heap} B)", per(governor_heap));
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = uniform_1m, hot_1k, threads
}

fn main() {
    memory_report();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
