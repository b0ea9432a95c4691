//! The sketch (`kova::sketch::Sketch`) against exact per-key GCRA: on random multi-key workloads
//! every check the sketch admits is admitted by GCRA run on that key's own admitted history (no
//! over-grant), collisions only deny more, the errors, and threads on one key within the bound.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kova::sketch::{Sketch, SketchError, DEFAULT_MEMORY_BYTES, MAX_MEMORY_BYTES};
use kova::{CheckError, Clock, Fallback, Gcra, ManualClock, Quota, QuotaError, WordAlgorithm};
use proptest::prelude::*;

/// Runs `ops` (key, cost, clock step) on a sketch of `bytes` and on exact per-key GCRA fed only
/// with the checks the sketch admitted; returns (over-grants, sketch admissions, exact-only
/// admissions of keys the sketch denied).
fn run(quota: Quota, bytes: usize, cells: u32, ops: &[(u16, u64, u64)]) -> (usize, usize, usize) {
    let clock = ManualClock::new();
    let sketch =
        Sketch::builder(quota).memory_bytes(bytes).cells_per_key(cells).clock(clock.clone()).build().unwrap();
    let gcra = <Gcra as WordAlgorithm>::from_quota(quota).unwrap();
    let mut exact: HashMap<u16, u64> = HashMap::new();
    let (mut over, mut admitted, mut denied_but_exact_admits) = (0, 0, 0);
    for &(key, cost, step) in ops {
        clock.advance_nanos(step);
        let now = clock.now_nanos();
        let cost = cost.min(gcra.capacity());
        let decision = sketch.check_n(&key, cost).unwrap();
        assert_eq!(decision.fallback(), Some(Fallback::Sketch));
        let tat = exact.entry(key).or_insert(gcra.fresh_word());
        let (model, new_tat) = gcra.decide(*tat, now, cost);
        if decision.is_allowed() {
            admitted += 1;
            if !model.is_allowed() {
                over += 1;
            }
            // The key's own admitted history: only what the sketch admitted.
            *tat = new_tat;
            // Never more remaining than the key's own state gives.
            assert!(decision.remaining() <= model.remaining(), "{decision:?} vs {model:?}");
        } else {
            assert!(decision.retry_after_nanos() > 0);
            if model.is_allowed() {
                denied_but_exact_admits += 1;
            }
        }
    }
    (over, admitted, denied_but_exact_admits)
}

fn quota(limit: u64, period_nanos: u64, burst: u64) -> Quota {
    Quota::from_nanos(limit, period_nanos).unwrap().with_burst(burst).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random keys, costs and clock steps on sketches from one line (every key collides) to 16
    /// lines, 1 to 8 cells per key: no check admitted that the exact GCRA would deny.
    #[test]
    fn never_admits_what_the_key_alone_would_not(
        limit in 1u64..20,
        burst in 1u64..8,
        lines in 0u32..5,
        cells in 1u32..=8,
        ops in prop::collection::vec((0u16..40, 0u64..4, 0u64..400), 1..600),
    ) {
        let (over, _, _) = run(quota(limit, 1_000, burst.max(1)), 64 << lines, cells, &ops);
        prop_assert_eq!(over, 0);
    }
}

#[test]
fn collisions_deny_more_but_never_grant_more() {
    // 200 keys in one line: heavy collisions. The sketch must deny some checks the exact
    // per-key limiters admit (the model can see a collision), and over-grant none.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let ops: Vec<(u16, u64, u64)> = (0..20_000).map(|_| ((next() % 200) as u16, 1, next() % 50)).collect();
    let (over, admitted, false_denials) = run(quota(10, 10_000, 3), 64, 2, &ops);
    assert_eq!(over, 0);
    assert!(admitted > 0 && false_denials > 0, "admitted {admitted}, false denials {false_denials}");
    // With room for every key (8,192 cells for 200 keys) almost nothing is over-charged.
    let (over, admitted, roomy) = run(quota(10, 10_000, 3), 1 << 16, 2, &ops);
    assert_eq!(over, 0);
    assert!(roomy * 10 < false_denials, "roomy {roomy}, cramped {false_denials}, admitted {admitted}");
}

#[test]
fn a_key_alone_is_exact() {
    let clock = ManualClock::new();
    let sketch = Sketch::builder(Quota::per_second(10).unwrap().with_burst(3).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    for left in (0..3).rev() {
        let allowed = sketch.check("k");
        assert!(allowed.is_allowed());
        assert_eq!(allowed.remaining(), left);
    }
    let denied = sketch.check("k");
    assert!(!denied.is_allowed());
    assert_eq!(denied.retry_after(), Duration::from_millis(100));
    assert_eq!(denied.reset_after(), Duration::from_millis(300));
    // A denial and a peek change nothing.
    let peek = sketch.peek("k");
    assert!(peek.is_allowed() && peek.remaining() == 0);
    assert_eq!(sketch.check("k"), denied);
    clock.advance(Duration::from_millis(100));
    assert!(sketch.check("k").is_allowed());
    assert!(!sketch.check("k").is_allowed());
}

#[test]
fn a_key_is_decided_on_its_least_consumed_cell() {
    // One line, two cells per key: find two keys that share exactly one cell.
    let clock = ManualClock::new();
    let sketch = Sketch::builder(Quota::per_second(10).unwrap().with_burst(4).unwrap())
        .memory_bytes(64)
        .clock(clock.clone())
        .build()
        .unwrap();
    let cells: Vec<Vec<usize>> = (0..100u32).map(|k| sketch.cells_of(&k)).collect();
    let (a, b) = (0..100)
        .flat_map(|a| (0..100).map(move |b| (a, b)))
        .find(|&(a, b)| cells[a].iter().filter(|c| cells[b].contains(c)).count() == 1)
        .expect("two keys sharing one of their two cells");
    // b spends its whole burst: the shared cell is full, a's other cell untouched.
    assert!(sketch.check_n(&(b as u32), 4).unwrap().is_allowed());
    let seen = sketch.check(&(a as u32));
    assert!(seen.is_allowed(), "a decides on its unshared cell");
    assert_eq!(seen.remaining(), 3);
    // Both of a's cells are now raised past a's own state: b's charge and a's are both there.
    assert!(!sketch.check(&(b as u32)).is_allowed());
}

#[test]
fn cells_of_a_key_are_distinct_and_in_one_line() {
    for cells in 1..=8 {
        let sketch = Sketch::builder(Quota::per_second(1).unwrap()).cells_per_key(cells).build().unwrap();
        let mut lines = std::collections::HashSet::new();
        for key in 0..2_000u32 {
            let of = sketch.cells_of(&key);
            assert_eq!(of.len(), cells as usize);
            assert!(of.windows(2).all(|w| w[0] < w[1]));
            assert!(of.iter().all(|&c| c / 8 == of[0] / 8 && c < sketch.memory_bytes() / 8));
            lines.insert(of[0] / 8);
        }
        // 2,000 keys over 1,024 lines reach most of them.
        assert!(lines.len() > 800, "{} lines", lines.len());
    }
}

#[test]
fn bad_sizes_and_quotas_are_typed_errors() {
    let q = Quota::per_second(10).unwrap();
    for bytes in [0, 32, 63, 100, 1000, MAX_MEMORY_BYTES * 2, usize::MAX] {
        assert_eq!(
            Sketch::builder(q).memory_bytes(bytes).build().unwrap_err(),
            SketchError::Memory { bytes }
        );
    }
    for cells in [0, 9, u32::MAX] {
        assert_eq!(
            Sketch::builder(q).cells_per_key(cells).build().unwrap_err(),
            SketchError::CellsPerKey { cells }
        );
    }
    let huge = Quota::from_nanos(1, u64::MAX).unwrap().with_burst(u64::MAX).unwrap();
    assert!(matches!(Sketch::new(huge), Err(SketchError::Quota(QuotaError::Unrepresentable { .. }))));
    let sketch = Sketch::new(q).unwrap();
    assert_eq!(sketch.memory_bytes(), DEFAULT_MEMORY_BYTES);
    assert_eq!(sketch.check_n("k", 11), Err(CheckError::CostExceedsCapacity { cost: 11, capacity: 10 }));
    assert!(sketch.check_n("k", 10).unwrap().is_allowed());
    let shown = SketchError::Memory { bytes: 100 }.to_string();
    assert!(shown.contains("100") && shown.contains("power of two"), "{shown}");
    assert_eq!(Sketch::builder(q).memory_bytes(64).build().unwrap().memory_bytes(), 64);
}

#[test]
fn threads_on_one_key_and_its_neighbours_never_exceed_the_burst() {
    // No refill during the test (4 units per hour): threads hammering one key, and others on
    // keys sharing its line, admit at most 4 for that key, and together at most 4 per key.
    for round in 0..20 {
        let sketch = Arc::new(
            Sketch::builder(Quota::per_hour(4).unwrap())
                .memory_bytes(64)
                .clock(ManualClock::new())
                .build()
                .unwrap(),
        );
        let workers: Vec<_> = (0..4u32)
            .map(|thread| {
                let sketch = Arc::clone(&sketch);
                std::thread::spawn(move || {
                    let mut admitted = [0u64; 3];
                    for i in 0..300u32 {
                        let key = if thread < 2 { 0 } else { (i + thread + round) % 3 };
                        admitted[key as usize] += u64::from(sketch.check(&key).is_allowed());
                    }
                    admitted
                })
            })
            .collect();
        let mut total = [0u64; 3];
        for worker in workers {
            for (sum, n) in total.iter_mut().zip(worker.join().unwrap()) {
                *sum += n;
            }
        }
        assert!(total.iter().all(|&n| n <= 4), "round {round}: {total:?}");
        assert!(total[0] >= 1, "round {round}: key 0 admitted at least once: {total:?}");
    }
}
