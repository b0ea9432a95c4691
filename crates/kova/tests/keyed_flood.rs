//! A flood of distinct keys: the table stays within its bounds (keys and bytes, as it reports
//! them and as the allocator sees them), and actively limited keys are never reset.
//!
//! The full flood is 10 million keys. Debug builds (the plain `cargo test`) run 2 million unless
//! `KOVA_FLOOD_KEYS` says otherwise; release builds (`cargo test --release`) run 10 million. The
//! bound is reached after the first few thousand keys, so the shorter flood checks the same
//! steady state, for longer than any shard takes to fill and recycle its reserve many times.

use std::time::Duration;

use kova::keyed::TableFullPolicy;
use kova::{Fallback, Gcra, Keyed, ManualClock, Quota};

/// Live heap bytes of the whole test binary (requested sizes).
#[path = "support/counting_allocator.rs"]
mod counting_allocator;
use counting_allocator::live;

fn flood_keys() -> u64 {
    std::env::var("KOVA_FLOOD_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(if cfg!(debug_assertions) {
        2_000_000
    } else {
        10_000_000
    })
}

/// Slack for what the allocator sees beyond the table's own figure: the threads' epoch records
/// (128 bytes each) and the test's own small allocations.
const SLACK: isize = 64 << 10;

/// One test (the allocator counts the whole process, so nothing else may run meanwhile).
#[test]
fn a_key_flood_stays_within_the_bound() {
    let keys = flood_keys();
    let max_keys = 50_000;
    let quota = Quota::per_second(10).unwrap();

    // Phase 1, the default policy (evict the closest to idle), time standing still: every flood
    // key stays active, so each insert into a full shard evicts one.
    let clock = ManualClock::new();
    let before = live();
    let keyed = Keyed::<u64, Gcra>::builder(quota).clock(clock.clone()).max_keys(max_keys).build().unwrap();
    let bound = keyed.memory_bound_bytes();
    // What the table holds before its first key: the doorkeeper's array and each shard's first
    // line array.
    let fixed = keyed.memory_bytes();
    // A key being limited right now, and one half used.
    let limited = u64::MAX;
    let half = u64::MAX - 1;
    assert!(keyed.check_n(&limited, 10).unwrap().is_allowed());
    assert!(keyed.check_n(&half, 5).unwrap().is_allowed());
    let limited_retry = keyed.check(&limited).retry_after_nanos();
    let mut peak = 0;
    let mut fallbacks = 0u64;
    for key in 0..keys {
        let decision = keyed.check(&key);
        fallbacks += u64::from(decision.fallback().is_some());
        if key % 250_000 == 0 || key == keys - 1 {
            let reported = keyed.memory_bytes();
            let seen = live() - before;
            assert!(keyed.len() <= max_keys, "{} keys", keyed.len());
            assert!(reported <= bound, "{reported} reported > bound {bound}");
            assert!(seen <= bound as isize + SLACK, "{seen} allocated > bound {bound}");
            // The report is honest: what the allocator sees, give or take the slack.
            assert!((seen - reported as isize).abs() <= SLACK, "reported {reported}, allocated {seen}");
            peak = peak.max(reported);
        }
    }
    // At most ~30 bytes per key held for a u64 key and GCRA beyond what the table held empty: 16
    // in the line, the load factor's spare lines, the grace-period reserve and rounding.
    assert!(peak - fixed <= max_keys * 40, "peak {peak} bytes ({fixed} before any key) for {max_keys} keys");
    assert_eq!(fallbacks, 0, "a victim was always found: flood keys are never limited");
    // The limited key was never evicted: still limited, same wait.
    let again = keyed.check(&limited);
    assert!(!again.is_allowed());
    assert_eq!(again.retry_after_nanos(), limited_retry);
    // The half-used key may have been evicted (it was not limited); if it is still held, its
    // state is intact.
    if keyed.quota_of(&half).is_some() {
        assert_eq!(keyed.peek(&half).remaining(), 5);
    }
    println!(
        "flood of {keys} keys: len {}, peak {peak} B reported ({:.1} B/key at max_keys), bound {bound} B",
        keyed.len(),
        peak as f64 / max_keys as f64
    );

    // Phase 2, time moving: keys go idle and inserts reclaim them (no eviction of active keys
    // needed). Every decision is a real one.
    for (i, key) in (keys..keys + keys / 4).enumerate() {
        if i % 20_000 == 0 {
            clock.advance(Duration::from_secs(1));
        }
        assert_eq!(keyed.check(&key).fallback(), None);
    }
    assert!(keyed.len() <= max_keys);
    assert!(keyed.memory_bytes() <= bound);
    drop(keyed);

    // Phase 3, fail closed and fail open: the flood gets the policy's fallback, the table stays
    // at its bound, and a limited key stays limited.
    for policy in [TableFullPolicy::DenyNew, TableFullPolicy::AllowUntracked] {
        let keyed = Keyed::<u64, Gcra>::builder(quota)
            .clock(ManualClock::new())
            .max_keys(10_000)
            .table_full(policy)
            // So that every flood key past the bound meets the policy (a doorkeeper would admit
            // as many keys as it has words first, the clock standing still).
            .doorkeeper(0)
            .build()
            .unwrap();
        keyed.check_n(&limited, 10).unwrap();
        let mut seen = [0u64; 2];
        for key in 0..keys / 10 {
            match keyed.check(&key).fallback() {
                Some(Fallback::TableFullDenied) => seen[0] += 1,
                Some(Fallback::TableFullUntracked) => seen[1] += 1,
                _ => {}
            }
        }
        assert!(keyed.len() <= 10_000);
        assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes());
        assert!(!keyed.check(&limited).is_allowed());
        let expected = if policy == TableFullPolicy::DenyNew { seen[0] } else { seen[1] };
        assert!(expected >= keys / 10 - 10_001, "{policy:?}: {seen:?}");
    }
    // Phase 4, the sketch as the policy: the whole flood into a full table, time standing
    // still. Every flood key past the bound is decided by the sketch (marked), the table and its
    // memory stay at their bound (the sketch's cells fixed when it is built), the held keys stay,
    // and keys hammered through the flood never get more than their burst.
    let keyed = Keyed::<u64, Gcra>::builder(quota)
        .clock(ManualClock::new())
        .max_keys(10_000)
        .table_full(TableFullPolicy::Sketch)
        .build()
        .unwrap();
    let fixed = live() - before;
    keyed.check_n(&limited, 10).unwrap();
    let probes: Vec<u64> = (0..64).map(|i| u64::MAX - 1_000 - i).collect();
    let mut probe_admitted = vec![0u64; probes.len()];
    let (mut sketched, mut admitted) = (0u64, 0u64);
    for key in 0..keys {
        let decision = keyed.check(&key);
        if decision.fallback() == Some(Fallback::Sketch) {
            sketched += 1;
            admitted += u64::from(decision.is_allowed());
        }
        if key % 1_000 == 0 {
            let i = (key / 1_000) as usize % probes.len();
            probe_admitted[i] += u64::from(keyed.check(&probes[i]).is_allowed());
        }
        if key % 250_000 == 0 || key == keys - 1 {
            assert!(keyed.len() <= 10_000);
            let seen = live() - before;
            assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes());
            assert!(seen <= keyed.memory_bound_bytes() as isize + SLACK, "{seen} allocated");
            assert!((seen - keyed.memory_bytes() as isize).abs() <= SLACK);
        }
    }
    assert!(sketched >= keys - 10_001, "{sketched} of {keys} decided by the sketch");
    // Time stands still: each probe key (checked about keys / 64_000 times) gets at most its
    // burst, collisions with the flood only taking from it.
    assert!(probe_admitted.iter().all(|&n| n <= quota.burst()), "{probe_admitted:?}");
    assert!(!keyed.check(&limited).is_allowed());
    println!(
        "sketch policy: {sketched} of {keys} flood keys decided by the sketch, {admitted} admitted; \
         {} B allocated from the table's first check ({fixed} B at build), bound {} B",
        live() - before,
        keyed.memory_bound_bytes()
    );
    drop(keyed);

    // Everything the tables allocated is back.
    assert!(live() - before <= SLACK, "{} bytes still allocated", live() - before);
}
