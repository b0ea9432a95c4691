//! A loom model of a keyed table under `TableFullPolicy::Sketch` (`crates/kova/src/keyed/policy.rs`):
//! a new key's check decided by the sketch while the table is full, racing the key's insert once a
//! removal made room. The sketch decides under the key's shard lock and the insert seeds the key
//! from the sketch, so in every interleaving the key gets at most its burst in all (time stands
//! still, nothing refills): no admission of the sketch is missed by the insert.
#![cfg(kova_loom)]

use kova::keyed::TableFullPolicy;
use kova::{Gcra, Keyed, ManualClock, Quota};
use kova_loom_tests::harness::model;
use loom::sync::Arc;

/// The burst of every key; nothing refills while the model runs.
const BURST: u64 = 3;

/// A table of one key (1 held), full. Thread A checks key 2 for 2 units (the sketch decides, or
/// the table once key 2 is in); thread B removes key 1 and checks key 2 for 2 units (an insert,
/// when it finds the room first). At most one of them is admitted, and the key's state after
/// both holds what was admitted.
#[test]
fn a_sketch_check_racing_the_keys_insert_never_over_grants() {
    model(|| {
        let table = Arc::new(
            Keyed::<u32, Gcra>::builder(Quota::per_hour(BURST).unwrap())
                .clock(ManualClock::new())
                .shards(1)
                .max_keys(1)
                .table_full(TableFullPolicy::Sketch)
                .sketch_memory_bytes(64)
                .build()
                .unwrap(),
        );
        assert!(table.check(&1).is_allowed());
        let a = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || u64::from(table.check_n(&2, 2).unwrap().is_allowed()) * 2)
        };
        let b = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || {
                table.remove(&1);
                u64::from(table.check_n(&2, 2).unwrap().is_allowed()) * 2
            })
        };
        let admitted = a.join().unwrap() + b.join().unwrap();
        let left = table.peek(&2).remaining();
        assert!(admitted + left <= BURST, "over-granted: {admitted} admitted, {left} left");
        assert_eq!(admitted, 2, "one of the two checks fits");
    });
}
