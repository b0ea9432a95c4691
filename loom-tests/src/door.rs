//! A model of the keyed table's doorkeeper (`crates/kova/src/keyed/door.rs`): two keys in two
//! shards share the door's only word, so their first checks race for it without a common lock.
//! The door must admit at most one of them there, and keep that key's entry, so that the key's
//! second check is charged the first one's unit (a quota of one: denied).

use kova::{Gcra, KeyedBuilder, ManualClock, Quota};
use loom::sync::Arc;

use crate::harness::model;

/// Keys 0 and `other`, checked on two threads (key 0 twice) in a table of two shards and a
/// one-word door, with the clock still: key 0 must be admitted once, `other` once. Run for a
/// few `other`s, so that some pair lands in two shards (the hasher's seeds are fixed under loom).
pub fn first_checks_share_a_door_word(other: u64) {
    model(move || {
        let table = Arc::new(
            KeyedBuilder::<u64, Gcra, _>::new(Quota::per_second(1).expect("valid quota"), ManualClock::new())
                .shards(2)
                .doorkeeper(1)
                .build()
                .expect("valid table"),
        );
        let theirs = Arc::clone(&table);
        let thread = loom::thread::spawn(move || theirs.check(&other).is_allowed());
        let first = table.check(&0).is_allowed();
        let second = table.check(&0).is_allowed();
        let other_allowed = thread.join().expect("the other check returns");
        assert!(
            first && !second && other_allowed,
            "door: not linearizable: key 0 admitted {first} then {second} (quota 1), key {other} {other_allowed}"
        );
    });
}
