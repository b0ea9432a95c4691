//! A removed key's place is reused: 20,000 insert/remove cycles leave a table's memory where it
//! was, on both layouts (lines: GCRA; slots: `AnyAlgorithm`).
//!
//! Its own test binary, and the only test in it: a place is reused once its grace period ends,
//! and a thread that stays pinned meanwhile holds every grace period back. Among the library's
//! unit tests, some hold a pin across a thousand operations (to look at a word a rehash froze),
//! and the cycles running beside them used the whole grace-period reserve: every slot of the
//! shard allocated and the queues at full size, the table's bound but no leak. Here no other
//! thread pins, so what a place waits is two locked sections of the cycles themselves.
//!
//! The table has no doorkeeper (`doorkeeper(0)`), so that each cycle's check inserts its key.

use kova::keyed::TableFullPolicy;
use kova::{Algorithm, AnyAlgorithm, Gcra, Keyed, ManualClock, Quota};

fn cycles<A: Algorithm>() {
    let keyed = Keyed::<u64, A>::builder(Quota::per_second(10).unwrap())
        .clock(ManualClock::new())
        .shards(1)
        .max_keys(1_000)
        .table_full(TableFullPolicy::DenyNew)
        .doorkeeper(0)
        .build()
        .unwrap();
    for key in 0..10 {
        keyed.check(&key);
    }
    let baseline = keyed.memory_bytes();
    for key in 1_000..21_000u64 {
        let decision = keyed.check(&key);
        assert!(decision.is_allowed() && decision.fallback().is_none(), "key {key}: {decision:?}");
        assert!(keyed.remove(&key));
    }
    assert_eq!(keyed.len(), 10);
    // 20,000 leaked keys would take 320 KB of state words alone (800 KB of `AnyAlgorithm`'s
    // 40-byte slots). On the 2-core dev VM the cycles left +320 B (GCRA) and +112 B
    // (`AnyAlgorithm`); 64 KiB leaves room for a rehash that happened to leave a larger array.
    let grown = keyed.memory_bytes().saturating_sub(baseline);
    assert!(grown <= 64 * 1024, "{}: {grown} bytes more after the cycles", std::any::type_name::<A>());
    assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes());
}

#[test]
fn memory_is_reused_across_insert_remove_cycles() {
    cycles::<Gcra>();
    cycles::<AnyAlgorithm>();
}
