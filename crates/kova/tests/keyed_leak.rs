//! A removed key's memory is freed or reused: no growth across a million insert/remove cycles,
//! measured by the table (`memory_bytes`) and by a counting allocator (keys are `String`s, and
//! the sliding log's cells own rings, so a leaked key or cell shows up in the live heap).
//!
//! The table has no doorkeeper (`doorkeeper(0)`), so that each cycle's check inserts its key.

use kova::{Algorithm, Gcra, Keyed, ManualClock, Quota, SlidingWindowLog};

#[path = "support/counting_allocator.rs"]
mod counting_allocator;
use counting_allocator::live;

/// Slack for the grace-period reserve (slots unlinked and still waiting, with the log's rings)
/// and the threads' epoch records (128 bytes each).
const SLACK: isize = 1 << 20;

fn cycles<A: Algorithm>(quota: Quota, cycles: u64) {
    let before = live();
    let keyed = Keyed::<String, A>::builder(quota)
        .clock(ManualClock::new())
        .shards(4)
        .max_keys(10_000)
        .doorkeeper(0)
        .build()
        .unwrap();
    for i in 0..1_000 {
        keyed.check(&format!("resident-{i}"));
    }
    let baseline_reported = keyed.memory_bytes() as isize;
    let baseline_live = live();
    for i in 0..cycles {
        let key = format!("client-{i}");
        assert!(keyed.check(&key).is_allowed());
        assert!(keyed.remove(&key));
    }
    assert_eq!(keyed.len(), 1_000);
    let reported = keyed.memory_bytes() as isize - baseline_reported;
    let grown = live() - baseline_live;
    // A million leaked keys would be tens of megabytes (and the log's rings more).
    assert!(reported <= SLACK, "{} reports {reported} bytes more", A::name_of());
    assert!(grown <= SLACK, "{}: the heap grew by {grown} bytes", A::name_of());
    drop(keyed);
    let left = live() - before;
    assert!(left <= SLACK, "{}: {left} bytes left after dropping the table", A::name_of());
    println!(
        "{}: {cycles} cycles, reported +{reported} B, heap +{grown} B, after drop +{left} B",
        A::name_of()
    );
}

/// The algorithm's name without an instance.
trait NameOf {
    fn name_of() -> &'static str;
}

impl<A: Algorithm> NameOf for A {
    fn name_of() -> &'static str {
        std::any::type_name::<A>().rsplit("::").next().unwrap_or("?")
    }
}

/// One test (the allocator counts the whole process).
#[test]
fn a_million_insert_remove_cycles_leak_nothing() {
    cycles::<Gcra>(Quota::per_second(10).unwrap(), 1_000_000);
    // Each log cell owns a ring of 16 bytes per unit: 1.6 KB per key here.
    cycles::<SlidingWindowLog>(Quota::per_second(100).unwrap(), 200_000);
}
