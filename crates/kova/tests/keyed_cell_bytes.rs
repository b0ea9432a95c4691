//! What a keyed table reports it holds is what it allocated: inserting keys grows
//! `memory_bytes` by exactly the bytes a counting allocator sees, for inline cells (GCRA), the
//! sliding log's self-addressed cells and `AnyAlgorithm`'s boxed ones.
//!
//! Its own test binary (the allocator counts the whole process), one test in it.
//!
//! The table has no doorkeeper (`doorkeeper(0)`), so that each key's first check inserts it.

use kova::{Algorithm, AlgorithmKind, AnyAlgorithm, Gcra, Keyed, ManualClock, Quota, SlidingWindowLog};

#[path = "support/counting_allocator.rs"]
mod counting_allocator;
use counting_allocator::live;

/// Reported and allocated growth after inserting `keys` keys into a table of `algorithm`.
fn growth<A: Algorithm>(algorithm: A, keys: u64) -> (isize, isize) {
    let keyed = Keyed::<u64, A>::builder_from_algorithm(algorithm)
        .clock(ManualClock::new())
        .shards(1)
        .max_keys(10_000)
        .doorkeeper(0)
        .build()
        .unwrap();
    // The thread's epoch record, allocated on its first check, is not the table's.
    keyed.check(&u64::MAX);
    let (reported, allocated) = (keyed.memory_bytes() as isize, live());
    for key in 0..keys {
        assert!(keyed.check(&key).is_allowed());
    }
    (keyed.memory_bytes() as isize - reported, live() - allocated)
}

#[test]
fn inserted_keys_are_counted_exactly() {
    let quota = Quota::per_second(100).unwrap();
    for keys in [1, 7, 300] {
        let gcra = growth(Gcra::from_quota(quota).unwrap(), keys);
        assert_eq!(gcra.0, gcra.1, "gcra, {keys} keys: reported, allocated");
        let log = growth(SlidingWindowLog::from_quota(quota).unwrap(), keys);
        assert_eq!(log.0, log.1, "sliding log, {keys} keys: reported, allocated");
        // Each log key holds at least its ring of 100 slots.
        assert!(log.1 >= keys as isize * 1_600, "{log:?}");
        let any = growth(AnyAlgorithm::new(AlgorithmKind::SlidingWindowLog, quota).unwrap(), keys);
        assert_eq!(any.0, any.1, "AnyAlgorithm's log, {keys} keys: reported, allocated");
    }
}
