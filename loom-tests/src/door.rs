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

/// Key 0's first check (one unit, admitted at the door without the lock) races a check of two
/// units of key 0 on another thread (which inserts it under the lock), in a table of one shard
/// and a quota of three: the three units go to the first two checks, exactly, and a third check
/// afterwards finds none left. The door's admission either is taken by the insert (which
/// charges it, and the admission stands even if it then sees the insert's announcement) or
/// sees the announcement first and goes to the lock.
pub fn door_admission_races_an_insert() {
    model(|| {
        let table = Arc::new(
            KeyedBuilder::<u64, Gcra, _>::new(Quota::per_second(3).expect("valid quota"), ManualClock::new())
                .shards(1)
                .doorkeeper(1)
                .build()
                .expect("valid table"),
        );
        let theirs = Arc::clone(&table);
        let thread = loom::thread::spawn(move || theirs.check_n(&0, 2).expect("cost fits").is_allowed());
        let one = table.check(&0).is_allowed();
        let two = thread.join().expect("the other check returns");
        let after = table.check(&0).is_allowed();
        let units = u64::from(one) + 2 * u64::from(two) + u64::from(after);
        assert!(two, "door: the check of two units is denied");
        assert!(units <= 3, "door: not linearizable: one unit too many: {units} admitted of 3 (first check {one}, after {after})");
        assert!(units == 3, "door: not linearizable: a unit charged twice: {units} admitted of 3 (first check {one}, after {after})");
    });
}
