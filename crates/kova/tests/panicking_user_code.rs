//! A user's algorithm that panics while the table looks at a key under its lock (a sweep asking
//! whether the key is idle): the panic reaches the caller, and the key keeps its line and its
//! state; nothing is left frozen for the next check or for the table's drop.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};

use kova::{Decision, Keyed, ManualClock, Quota, QuotaError, WordAlgorithm};

/// Calls of `is_idle_word` left before it panics (0: never).
static PANIC_AT_CALL: AtomicU32 = AtomicU32::new(0);

/// A counter of units that never refills; its `is_idle_word` says idle, then panics, when armed.
struct Flaky {
    quota: Quota,
}

impl WordAlgorithm for Flaky {
    const NAME: &'static str = "flaky";

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        Ok(Flaky { quota })
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u64 {
        self.quota.burst()
    }

    fn fresh_word(&self) -> u64 {
        0
    }

    fn decide(&self, word: u64, _now: u64, cost: u64) -> (Decision, u64) {
        let capacity = self.quota.burst();
        match word.checked_add(cost) {
            Some(used) if used <= capacity => (Decision::allowed(capacity, capacity - used, 0), used),
            _ => (Decision::denied(capacity, capacity.saturating_sub(word), 1, 0), word),
        }
    }

    fn is_idle_word(&self, word: u64, _now: u64) -> bool {
        match PANIC_AT_CALL.load(Ordering::Relaxed) {
            0 => word == 0,
            1 => panic!("a user's algorithm panics"),
            left => {
                PANIC_AT_CALL.store(left - 1, Ordering::Relaxed);
                true
            }
        }
    }

    fn refund(&self, word: u64, _now: u64, cost: u64) -> u64 {
        word.saturating_sub(cost)
    }
}

#[test]
fn a_panic_during_a_sweeps_look_leaves_the_key_as_it_was() {
    let keyed = Keyed::<u64, Flaky, _>::builder(Quota::per_second(5).unwrap())
        .clock(ManualClock::new())
        .shards(1)
        .doorkeeper(0)
        .build()
        .unwrap();
    assert_eq!(keyed.check_n(&7, 2).unwrap().remaining(), 3);
    // The sweep's first question (before its look) is answered "idle"; the second, asked
    // during the look with the key's word frozen, panics.
    PANIC_AT_CALL.store(2, Ordering::Relaxed);
    let swept = catch_unwind(AssertUnwindSafe(|| keyed.sweep_idle()));
    PANIC_AT_CALL.store(0, Ordering::Relaxed);
    assert!(swept.is_err(), "the algorithm's panic reaches the caller");
    assert_eq!(keyed.len(), 1, "the key stays");
    assert_eq!(keyed.peek(&7).remaining(), 3, "with its state");
    assert_eq!(keyed.check_n(&7, 3).unwrap().remaining(), 0);
    assert!(!keyed.check(&7).is_allowed());
}

/// Drops of each `Key` so far, by its id.
static DROPS: [AtomicU32; 4] = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
/// Whether key 1's drop panics (once).
static PANIC_ON_DROP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A key whose `Drop` counts itself, and panics once when armed (key 1 only).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key(usize, String);

impl Drop for Key {
    fn drop(&mut self) {
        DROPS[self.0].fetch_add(1, Ordering::Relaxed);
        if self.0 == 1 && PANIC_ON_DROP.swap(false, Ordering::Relaxed) {
            panic!("a user's key panics in its drop");
        }
    }
}

/// A removed key whose drop panics when the table frees its line (after the grace period): it
/// is dropped once, never again when the table itself is dropped.
#[test]
fn a_key_whose_drop_panics_is_dropped_once() {
    let keyed = Keyed::<Key, kova::Gcra, _>::builder(Quota::per_second(5).unwrap())
        .clock(ManualClock::new())
        .shards(1)
        .max_keys(64)
        .doorkeeper(0)
        .build()
        .unwrap();
    // Held keys enough that no rehash shrinks the array: the line is freed in place
    // (`LineLocked::collect`), not with an array a rehash replaced.
    for i in 0..32 {
        assert!(keyed.check(&Key(0, i.to_string())).is_allowed());
    }
    assert!(keyed.check(&Key(1, "one".into())).is_allowed());
    let drops_before = DROPS[1].load(Ordering::Relaxed);
    assert!(keyed.remove(&Key(1, "one".into())));
    PANIC_ON_DROP.store(true, Ordering::Relaxed);
    // Locked calls free what finished its grace period (once every thread pinned meanwhile,
    // other tests' included, has moved on): one of them drops key 1's line.
    for _ in 0..100_000 {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            keyed.check(&Key(2, "two".into()));
            keyed.remove(&Key(2, "two".into()));
        }));
        if !PANIC_ON_DROP.load(Ordering::Relaxed) {
            break;
        }
        std::thread::yield_now();
    }
    // Disarmed either way: a panic while this test unwinds would abort the run.
    let never_freed = PANIC_ON_DROP.swap(false, Ordering::Relaxed);
    assert!(!never_freed, "the removed key's line was never freed");
    assert!(DROPS[1].load(Ordering::Relaxed) > drops_before + 1, "the removed key was dropped");
    let freed = DROPS[1].load(Ordering::Relaxed);
    drop(keyed);
    assert_eq!(DROPS[1].load(Ordering::Relaxed), freed, "key 1 dropped again with the table");
}

/// A quota function that panics (a failed lookup unwrapped) runs unpinned: the panic reaches
/// the caller, and the thread's later checks, peeks and reservations are pinned as before (the
/// count of the thread's pins stays true, which a debug build checks on every unpin).
#[test]
fn a_quota_function_that_panics_leaves_the_thread_able_to_check() {
    let table = Keyed::<u64, kova::Gcra>::builder(Quota::per_second(10).expect("valid"))
        .quota_fn(|key: &u64| {
            assert_ne!(*key, 13, "a lookup that failed");
            None
        })
        .build()
        .expect("valid table");
    for _ in 0..3 {
        assert!(catch_unwind(AssertUnwindSafe(|| table.check(&13))).is_err());
        assert!(catch_unwind(AssertUnwindSafe(|| table.peek(&13))).is_err());
        assert!(catch_unwind(AssertUnwindSafe(|| table.reserve_n(&13, 1))).is_err());
    }
    assert!(table.check(&1).is_allowed());
    assert_eq!(table.peek(&1).remaining(), 9);
    assert!(table.reserve_n(&2, 1).is_ok());
    assert!(table.check(&1).is_allowed());
}
