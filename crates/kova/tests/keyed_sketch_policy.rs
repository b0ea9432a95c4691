//! A keyed table under `TableFullPolicy::Sketch`: new keys that find the table full are decided
//! by the sketch, never granted more than their quota (checked per key against exact GCRA run on
//! that key's admitted history, across the sketch, inserts and reclamations), every such decision
//! marked `Fallback::Sketch`, and a configuration the sketch cannot serve is a typed error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kova::keyed::{KeyedBuilder, KeyedError, TableFullPolicy};
use kova::reservation::ReserveError;
use kova::sketch::{SketchError, DEFAULT_MEMORY_BYTES};
use kova::{
    AlgorithmKind, AnyAlgorithm, Clock, Fallback, Gcra, Keyed, ManualClock, Quota, TokenBucket, WordAlgorithm,
};
use proptest::prelude::*;

fn quota(limit: u64, period_nanos: u64, burst: u64) -> Quota {
    Quota::from_nanos(limit, period_nanos).unwrap().with_burst(burst).unwrap()
}

/// A table of `max_keys` in one shard under the sketch policy, with a sketch of `bytes`; keys
/// whose number is a multiple of 3 get `other` as their quota.
fn table(
    default: Quota,
    other: Quota,
    max_keys: usize,
    bytes: usize,
    clock: &ManualClock,
) -> Keyed<u16, Gcra, ManualClock> {
    Keyed::<u16, Gcra>::builder(default)
        .clock(clock.clone())
        .shards(1)
        .max_keys(max_keys)
        .table_full(TableFullPolicy::Sketch)
        .sketch_memory_bytes(bytes)
        .quota_fn(move |key: &u16| (key % 3 == 0).then_some(other))
        .build()
        .unwrap()
}

/// What [`run`] counts.
#[derive(Debug, Default)]
struct Tally {
    /// Admissions exact GCRA on the key's own admitted history would deny.
    over: usize,
    /// Decisions marked `Fallback::Sketch`, and those admitted.
    sketch: usize,
    sketch_admitted: usize,
    /// Decisions of held keys (no fallback).
    table: usize,
}

/// Runs `ops` (key, cost, clock step) on a full table under the sketch policy and on exact
/// per-key GCRA fed with the checks the table admitted.
fn run(default: Quota, other: Quota, max_keys: usize, bytes: usize, ops: &[(u16, u64, u64)]) -> Tally {
    let clock = ManualClock::new();
    let limiter = table(default, other, max_keys, bytes, &clock);
    let gcra =
        |key: u16| <Gcra as WordAlgorithm>::from_quota(if key % 3 == 0 { other } else { default }).unwrap();
    let mut exact: HashMap<u16, u64> = HashMap::new();
    let mut tally = Tally::default();
    for &(key, cost, step) in ops {
        clock.advance_nanos(step);
        let now = clock.now_nanos();
        let algorithm = gcra(key);
        let cost = cost.clamp(1, algorithm.capacity());
        let decision = limiter.check_n(&key, cost).unwrap();
        let held = limiter.quota_of(&key).is_some();
        match decision.fallback() {
            // Decided by the sketch: the key found no room and is not held.
            Some(Fallback::Sketch) => {
                assert!(!held, "key {key}: a sketch decision, yet held");
                tally.sketch += 1;
                tally.sketch_admitted += usize::from(decision.is_allowed());
            }
            None => {
                assert!(held, "key {key}: a decision without fallback, yet not held");
                tally.table += 1;
            }
            other => panic!("key {key}: {other:?}"),
        }
        let tat = exact.entry(key).or_insert(algorithm.fresh_word());
        let (model, new_tat) = algorithm.decide(*tat, now, cost);
        if decision.is_allowed() {
            tally.over += usize::from(!model.is_allowed());
            *tat = new_tat;
            assert!(decision.remaining() <= model.remaining(), "key {key}: {decision:?} vs exact {model:?}");
        }
    }
    assert!(limiter.len() <= max_keys);
    tally
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A table of a few keys, many more keys checked, sketches from one line (every new key
    /// collides) to 64 lines; clock steps from none to past a key's refill, so held keys go
    /// idle, are reclaimed, and keys of the sketch are inserted in their place.
    #[test]
    fn a_full_table_under_the_sketch_never_grants_a_key_more_than_its_quota(
        max_keys in 1usize..8,
        lines in prop::sample::select(vec![1usize, 4, 64]),
        ops in prop::collection::vec((0u16..40, 1u64..4, prop_oneof![3 => Just(0u64), 3 => 0u64..300_000_000, 1 => 0u64..3_000_000_000]), 1..400),
    ) {
        let tally = run(quota(5, 1_000_000_000, 3), quota(1, 1_000_000_000, 2), max_keys, lines * 64, &ops);
        prop_assert_eq!(tally.over, 0, "{:?}", tally);
    }
}

/// The same on one long fixed workload, where every path is taken many times: the sketch
/// decides most checks and admits many, held keys decide the rest.
#[test]
fn a_long_workload_takes_every_path_and_never_over_grants() {
    let mut rng = fastrand::Rng::with_seed(36);
    let ops: Vec<(u16, u64, u64)> = (0..200_000)
        .map(|_| {
            let step = match rng.u8(0..50) {
                0 => rng.u64(0..500_000_000),
                _ => 0,
            };
            (rng.u16(0..300), rng.u64(1..4), step)
        })
        .collect();
    let tally = run(quota(10, 10_000_000_000, 4), quota(2, 10_000_000_000, 2), 16, 512, &ops);
    println!("{tally:?}");
    assert_eq!(tally.over, 0, "{tally:?}");
    assert!(tally.sketch > 100_000 && tally.sketch_admitted > 10_000, "{tally:?}");
    assert!(tally.table > 10_000, "{tally:?}");
}

/// A key limited by the sketch keeps what it spent when it finds room in the table.
#[test]
fn a_key_inserted_after_the_sketch_keeps_what_it_spent() {
    let clock = ManualClock::new();
    let limiter = table(quota(4, 1_000_000_000, 4), quota(4, 1_000_000_000, 4), 1, 4096, &clock);
    assert!(limiter.check(&1).is_allowed());
    // Key 2 spends its burst in the sketch.
    for _ in 0..4 {
        assert_eq!(limiter.check(&2).fallback(), Some(Fallback::Sketch));
    }
    assert!(!limiter.check(&2).is_allowed());
    // Key 1 goes idle (1 s refills it) but key 2 has refilled only what 1 s gives it: 4 units.
    // Half a second later 2 units: key 1 is still not idle; a full second, and key 1 is idle,
    // reclaimed by key 2's insert, which carries key 2's state over.
    clock.advance(Duration::from_millis(1_000));
    let first = limiter.check_n(&2, 3).unwrap();
    assert_eq!(first.fallback(), None, "key 2 took key 1's idle room");
    assert_eq!(limiter.quota_of(&1), None);
    assert_eq!(first.remaining(), 1);
    assert!(limiter.check(&2).is_allowed());
    assert!(!limiter.check(&2).is_allowed());
}

/// Checks of keys not held from two threads, time standing still: no key gets more than its
/// burst, whatever the collisions and interleavings.
#[test]
fn threads_on_a_full_table_never_over_grant() {
    let clock = ManualClock::new();
    let limiter = Arc::new(table(quota(5, 1_000_000_000, 5), quota(5, 1_000_000_000, 5), 4, 128, &clock));
    for key in 0..4 {
        assert!(limiter.check(&key).is_allowed());
    }
    let admitted: Vec<HashMap<u16, u64>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let limiter = Arc::clone(&limiter);
                s.spawn(move || {
                    let mut admitted = HashMap::new();
                    for i in 0..20_000u32 {
                        let key = 100 + ((i * 7 + t * 13) % 64) as u16;
                        let decision = limiter.check(&key);
                        assert_eq!(decision.fallback(), Some(Fallback::Sketch));
                        *admitted.entry(key).or_insert(0) += u64::from(decision.is_allowed());
                    }
                    admitted
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut total: HashMap<u16, u64> = HashMap::new();
    for map in admitted {
        for (key, n) in map {
            *total.entry(key).or_insert(0) += n;
        }
    }
    assert!(total.values().all(|&n| n <= 5), "{total:?}");
    assert!(total.values().sum::<u64>() > 0);
}

/// Reservations on a full table: the sketch checks the units; an admission is usable at once,
/// marked, and gives nothing back; a denial is `TableFull` and takes nothing.
#[test]
fn a_reservation_on_a_full_table_is_checked_by_the_sketch() {
    let clock = ManualClock::new();
    let limiter = table(quota(3, 1_000_000_000, 3), quota(3, 1_000_000_000, 3), 1, 4096, &clock);
    assert!(limiter.check(&1).is_allowed());
    let granted = limiter.reserve_n(&2, 2).unwrap();
    assert_eq!(granted.fallback(), Some(Fallback::Sketch));
    assert_eq!(granted.delay(), Duration::ZERO);
    assert_eq!(granted.cancel(), 0);
    assert!(matches!(limiter.reserve_n(&2, 2), Err(ReserveError::TableFull { .. })));
    // The denial took nothing: one unit is still there.
    assert!(limiter.check(&2).is_allowed());
    assert!(!limiter.check(&2).is_allowed());
}

#[test]
fn a_configuration_the_sketch_cannot_serve_is_a_typed_error() {
    let q = Quota::per_second(10).unwrap();
    let sketch = |b: KeyedBuilder<u64, Gcra, ManualClock>| b.table_full(TableFullPolicy::Sketch);
    let gcra = || Keyed::<u64, Gcra>::builder(q).clock(ManualClock::new());
    for bytes in [0, 32, 1000, usize::MAX] {
        assert_eq!(
            sketch(gcra()).sketch_memory_bytes(bytes).build().unwrap_err(),
            KeyedError::Sketch(SketchError::Memory { bytes })
        );
    }
    assert_eq!(
        sketch(gcra()).doorkeeper(64).build().unwrap_err(),
        KeyedError::SketchDoorkeeper { words: 64 }
    );
    let bucket =
        Keyed::<u64, TokenBucket>::builder(q).clock(ManualClock::new()).table_full(TableFullPolicy::Sketch);
    let error = bucket.build().unwrap_err();
    assert_eq!(error, KeyedError::SketchAlgorithm { algorithm: "token_bucket" });
    assert!(error.to_string().contains("token_bucket"), "{error}");
    let window = AnyAlgorithm::new(AlgorithmKind::FixedWindow, q).unwrap();
    assert_eq!(
        Keyed::<u64, AnyAlgorithm>::builder_from_algorithm(window)
            .clock(ManualClock::new())
            .table_full(TableFullPolicy::Sketch)
            .build()
            .unwrap_err(),
        KeyedError::SketchAlgorithm { algorithm: "fixed_window" }
    );
    // What it can serve: GCRA, directly or as an `AnyAlgorithm`; the sketch counted in memory;
    // doorkeeper(0) is no doorkeeper; the memory option unused under another policy.
    let any = AnyAlgorithm::new(AlgorithmKind::Gcra, q).unwrap();
    let table = Keyed::<u64, AnyAlgorithm>::builder_from_algorithm(any)
        .clock(ManualClock::new())
        .max_keys(1)
        .shards(1)
        .table_full(TableFullPolicy::Sketch)
        .doorkeeper(0)
        .build()
        .unwrap();
    assert!(table.check(&1).is_allowed());
    assert_eq!(table.check(&2).fallback(), Some(Fallback::Sketch));
    let plain = gcra().doorkeeper(0).max_keys(1).shards(1).build().unwrap();
    assert!(table.memory_bytes() >= plain.memory_bytes() + DEFAULT_MEMORY_BYTES);
    assert!(table.memory_bound_bytes() >= table.memory_bytes());
    assert!(gcra().sketch_memory_bytes(1000).build().is_ok());
    let _ = ManualClock::new().now_nanos();
}
