//! Keyed tables: hits on 1,000 and 1,000,000 `u64` keys, uniform random access, per algorithm
//! and governor's keyed (DashMap) limiter.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use kova::{Algorithm, AlgorithmKind, Keyed};
use kova_bench::peers::GovernorKeyed;
use kova_bench::scenarios::{each_algorithm, AlgorithmVisitor, Scenario};
use kova_bench::subject::{KovaKeyed, Subject};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A random key sequence over `0..n` (a power-of-two length, cycled).
fn key_sequence(n: u32) -> Vec<u32> {
    let mut rng = SmallRng::seed_from_u64(u64::from(n));
    (0..1 << 20).map(|_| rng.random_range(0..n)).collect()
}

/// Benchmarks hits on an already filled table.
fn bench_table<S: Subject>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, table: &S, keys: &[u32]) {
    let mask = keys.len() - 1;
    let mut i = 0usize;
    group.bench_function(name, |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            black_box(table.hit(u64::from(keys[i & mask])))
        })
    });
}

struct KeyedVisitor<'a, 'b> {
    scenario: Scenario,
    n: u32,
    keys: &'a [u32],
    group: &'a mut BenchmarkGroup<'b, WallTime>,
}

impl AlgorithmVisitor for KeyedVisitor<'_, '_> {
    fn visit<A: Algorithm>(&mut self, kind: AlgorithmKind) {
        let table = KovaKeyed(Keyed::<u64, A>::new(self.scenario.quota(kind)).expect("valid quota"));
        // Twice: a kova table holds a key from its second check (its doorkeeper admits the
        // first), so that the benchmark hits held keys, as the report's filled tables do.
        for k in 0..u64::from(self.n) {
            table.hit(k);
            table.hit(k);
        }
        bench_table(self.group, kind.as_str(), &table, self.keys);
    }
}

fn group(c: &mut Criterion, name: &str, scenario: Scenario, n: u32) {
    let keys = key_sequence(n);
    let mut group = c.benchmark_group(name);
    each_algorithm(&mut KeyedVisitor { scenario, n, keys: &keys, group: &mut group });
    let governor = GovernorKeyed::new(scenario.quota(AlgorithmKind::Gcra));
    for k in 0..u64::from(n) {
        governor.hit(k);
    }
    bench_table(&mut group, "governor", &governor, &keys);
    group.finish();
}

/// The keyed-table benchmarks.
pub(crate) fn bench(c: &mut Criterion) {
    group(c, "keyed/1k_keys", Scenario::Keyed1k, 1_000);
    group(c, "keyed/1m_keys", Scenario::Keyed1mUniform, 1_000_000);
}
