//! A key type whose `Clone` panics while its shard's lock is held (the insert copies the key
//! into the table under the lock): the panic reaches the caller, the lock is left poisoned, and
//! the table goes on answering on that shard, alone and from two threads at once, with every
//! other key's state intact and nothing granted for the key that panicked.

use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};

use kova::{Gcra, Keyed, ManualClock, Quota};

/// A key equal to, and hashing as, any other key of the same `id`; cloning one with `trap` set
/// panics.
#[derive(Debug)]
struct Touchy {
    id: u64,
    trap: bool,
}

impl Touchy {
    fn plain(id: u64) -> Self {
        Touchy { id, trap: false }
    }

    fn trapped(id: u64) -> Self {
        Touchy { id, trap: true }
    }
}

impl Clone for Touchy {
    fn clone(&self) -> Self {
        if self.trap {
            panic!("a user's Clone panics");
        }
        Touchy { id: self.id, trap: self.trap }
    }
}

impl PartialEq for Touchy {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Touchy {}

impl Hash for Touchy {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

const QUOTA: u64 = 10;

/// One shard, so that every key shares the lock the panic poisoned; `door_words` 0 (every first
/// check inserts) or the default doorkeeper (`None`: the second check inserts).
fn table(door_words: Option<usize>) -> Keyed<Touchy, Gcra, ManualClock> {
    let quota = Quota::per_second(QUOTA).unwrap();
    let builder = Keyed::<Touchy, Gcra>::builder(quota).clock(ManualClock::new()).shards(1);
    match door_words {
        Some(words) => builder.doorkeeper(words).build().unwrap(),
        None => builder.build().unwrap(),
    }
}

/// Checks the trapped key until its insert panics (the first check, or the door's second);
/// the number of checks that returned first.
fn panic_under_the_lock(table: &Keyed<Touchy, Gcra, ManualClock>) -> u64 {
    for returned in 0..2 {
        let outcome = catch_unwind(AssertUnwindSafe(|| table.check(&Touchy::trapped(7))));
        if outcome.is_err() {
            return returned;
        }
    }
    panic!("the trapped key's insert never ran its Clone");
}

fn table_survives_a_panicking_clone(door_words: Option<usize>) {
    let table = table(door_words);
    // A key in the table before the panic (checked twice: past any door).
    for _ in 0..2 {
        assert!(table.check(&Touchy::plain(1)).is_allowed());
    }
    let admitted_before_the_panic = panic_under_the_lock(&table);
    // The key before the panic kept its state: 2 units taken, 1 more now.
    assert_eq!(table.check(&Touchy::plain(1)).remaining(), QUOTA - 3);
    // A new key on the same (poisoned) shard is inserted and decided.
    for taken in 1..=2 {
        assert_eq!(table.check(&Touchy::plain(2)).remaining(), QUOTA - taken);
    }
    // The key whose insert panicked holds nothing it was not granted: what the door admitted
    // before the panic, and nothing for the check that panicked (an equal key that clones).
    assert_eq!(table.peek(&Touchy::plain(7)).remaining(), QUOTA - admitted_before_the_panic);
}

#[test]
fn a_panicking_clone_under_the_lock_leaves_the_table_working_without_a_door() {
    table_survives_a_panicking_clone(Some(0));
}

#[test]
fn a_panicking_clone_under_the_lock_leaves_the_table_working_with_the_door() {
    table_survives_a_panicking_clone(None);
}

/// After the panic, two threads insert and check their own keys on the poisoned shard at once:
/// every check is decided, and the table holds exactly their keys and the one from before.
#[test]
fn two_threads_share_the_poisoned_lock() {
    let table = table(Some(0));
    assert!(table.check(&Touchy::plain(1)).is_allowed());
    panic_under_the_lock(&table);
    let keys_per_thread = if cfg!(miri) { 20 } else { 2_000 };
    std::thread::scope(|s| {
        for thread in 0..2u64 {
            let table = &table;
            s.spawn(move || {
                for i in 0..keys_per_thread {
                    let key = Touchy::plain(1_000 + thread * keys_per_thread + i);
                    assert_eq!(table.check(&key).remaining(), QUOTA - 1);
                    assert_eq!(table.check(&key).remaining(), QUOTA - 2);
                }
            });
        }
    });
    assert_eq!(table.len(), 1 + 2 * keys_per_thread as usize);
}
