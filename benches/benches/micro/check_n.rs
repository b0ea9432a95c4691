//! `check_n`: a cost of 5 on the allow path, and a cost above the capacity (a typed error).

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use kova::{Algorithm, AlgorithmKind, RateLimiter};
use kova_bench::scenarios::{each_algorithm, AlgorithmVisitor, Scenario};

struct CheckN<'a, 'b> {
    group: &'a mut BenchmarkGroup<'b, WallTime>,
}

impl AlgorithmVisitor for CheckN<'_, '_> {
    fn visit<A: Algorithm>(&mut self, kind: AlgorithmKind) {
        let limiter = RateLimiter::<A>::new(Scenario::Direct.quota(kind)).expect("valid quota");
        self.group.bench_function(format!("cost_5/{kind}"), |b| {
            b.iter(|| black_box(limiter.check_n(black_box(5)).map(|d| d.is_allowed())))
        });
    }
}

/// The `check_n` benchmarks.
pub(crate) fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("check_n");
    each_algorithm(&mut CheckN { group: &mut group });
    let quota = Scenario::Direct.quota(AlgorithmKind::Gcra);
    let governor = governor::RateLimiter::direct(kova_bench::peers::governor_quota(quota).expect("fits"));
    let five = std::num::NonZeroU32::new(5).expect("non-zero");
    group.bench_function("cost_5/governor", |b| {
        b.iter(|| black_box(governor.check_n(black_box(five)).is_ok()))
    });
    let gcra = RateLimiter::<kova::Gcra>::new(quota).expect("valid quota");
    let over = quota.burst() + 1;
    group.bench_function("cost_over_capacity/gcra", |b| {
        b.iter(|| black_box(gcra.check_n(black_box(over)).is_err()))
    });
    group.finish();
}
