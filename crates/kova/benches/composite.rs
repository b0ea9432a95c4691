//! The composite's check beside one limit's, and what waiting costs a caller that never waits,
//! in the same run (one thread, a quota of 10^9 per second that admits every check):
//! - `composite/limits_N`: `Limits::check` over N GCRA limits (1: one word; 2: one 128-bit CAS;
//!   3 and 4: check then refund), beside `RateLimiter::check` (`single`);
//! - `waiting/until_ready_admitted`: `until_ready()` polled once on a limiter that admits at
//!   once (the future's construction and first poll), beside `check` (`check`).
//!
//! Run: `cargo bench -p kova --bench composite`.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kova::{Gcra, Limits, Quota, RateLimiter};

fn quota() -> Quota {
    Quota::per_second(1_000_000_000).unwrap()
}

fn composite(c: &mut Criterion) {
    let mut group = c.benchmark_group("composite");
    group.throughput(Throughput::Elements(1));
    let single = RateLimiter::<Gcra>::new(quota()).unwrap();
    group.bench_function("single", |b| b.iter(|| black_box(single.check())));
    for n in 1..=kova::MAX_LIMITS {
        let limits = Limits::<Gcra>::new(vec![quota(); n]).unwrap();
        group.bench_function(format!("limits_{n}"), |b| b.iter(|| black_box(limits.check())));
    }
    group.finish();
}

fn waiting(c: &mut Criterion) {
    let mut group = c.benchmark_group("waiting");
    group.throughput(Throughput::Elements(1));
    let limiter = RateLimiter::<Gcra>::new(quota()).unwrap();
    group.bench_function("check", |b| b.iter(|| black_box(limiter.check())));
    let mut cx = Context::from_waker(Waker::noop());
    group.bench_function("until_ready_admitted", |b| {
        b.iter(|| match pin!(limiter.until_ready()).as_mut().poll(&mut cx) {
            Poll::Ready(decision) => black_box(decision),
            Poll::Pending => unreachable!("the quota admits every check"),
        })
    });
    group.finish();
}

criterion_group!(benches, composite, waiting);
criterion_main!(benches);
