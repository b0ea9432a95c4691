//! A user's key type whose `Eq` disagrees with itself: the table may then give wrong answers
//! for that key (as std's `HashMap` may), but never touches another key's line or memory it
//! does not own.

use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::keyed::line::keys_in_first_array;
use crate::{Gcra, ManualClock};

/// Whether the next clone of a `Fickle` breaks every `Fickle`'s `Eq`.
static ARMED: AtomicBool = AtomicBool::new(false);
/// Whether every `Fickle` compares unequal.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// A key whose `Eq` stops finding anything once a clone was made while armed.
#[derive(Debug, Hash)]
#[expect(clippy::derived_hash_with_manual_eq, reason = "the point of the test: an Eq that disagrees")]
struct Fickle(u64);

impl PartialEq for Fickle {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 && !BROKEN.load(Ordering::Relaxed)
    }
}

impl Eq for Fickle {}

impl Clone for Fickle {
    fn clone(&self) -> Self {
        if ARMED.load(Ordering::Relaxed) {
            BROKEN.store(true, Ordering::Relaxed);
        }
        Fickle(self.0)
    }
}

/// A key moved to another quota (its own quota passed with a check) when the move grows the
/// shard's array: the move clones the key, and its `Eq` then fails. The move must still find
/// the key's line where the growth put it (not by `Eq`), and decide on that line, never on the
/// line the key had in the old array's numbering, which in the new array is another key's or
/// none.
#[test]
fn a_move_that_grows_the_array_keeps_the_keys_line_whatever_its_eq_says() {
    let max_keys = 64;
    let keyed = Keyed::<Fickle, Gcra, _>::builder(Quota::per_second(5).unwrap())
        .clock(ManualClock::new())
        .shards(1)
        .max_keys(max_keys)
        .doorkeeper(0)
        .build()
        .unwrap();
    let keys = keys_in_first_array(max_keys) as u64;
    for k in 0..keys {
        assert!(keyed.check(&Fickle(k)).is_allowed());
    }
    ARMED.store(true, Ordering::Relaxed);
    let moved = keyed.check_n_with_quota(&Fickle(0), Quota::per_second(7).unwrap(), 1);
    ARMED.store(false, Ordering::Relaxed);
    let broke = BROKEN.swap(false, Ordering::Relaxed);
    assert!(broke, "the move cloned the key");
    assert_eq!(moved.unwrap().remaining(), 5, "decided on the key's own state, moved to 7 a second");
    assert_eq!(keyed.quota_of(&Fickle(0)), Some(Quota::per_second(7).unwrap()));
    assert_eq!(keyed.len(), keys as usize);
    for k in 1..keys {
        assert_eq!(keyed.peek(&Fickle(k)).remaining(), 4, "key {k} untouched");
    }
}
