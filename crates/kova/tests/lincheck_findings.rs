//! What the linearizability checker (`tests/linearizable.rs`) found, each as a regression test of
//! its own history.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kova::{Clock, FixedWindow, Gcra, KeyedBuilder, ManualClock, Quota};

/// A clock that moves one nanosecond on every read, so that a call reading it twice sees two
/// times.
#[derive(Debug, Clone)]
struct Ticking(Arc<AtomicU64>);

impl Clock for Ticking {
    fn now_nanos(&self) -> u64 {
        // Relaxed: a counter read by one thread.
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// Found as `Keyed<fixed_window> door on`: `check(1) in t=[957317327, 1080578860] -> allowed
/// (remaining 2, reset 919421140)`, then `check_n(2) at 1080578860 -> allowed (remaining 1)` with a
/// limit of 3. The door admitted the first check at the time its entry was claimed (window 0)
/// but decided it on a second clock read (window 1), and the insert charged the unit in window
/// 0: the key took four units in the window its decisions named. The admission is now decided
/// at the entry's time.
#[test]
fn a_door_admission_is_decided_at_its_entry_time() {
    let period = 1_000_000_000;
    for start in period - 8..period {
        let clock = Ticking(Arc::new(AtomicU64::new(start)));
        let limit = 3;
        let table = KeyedBuilder::<u64, FixedWindow, _>::new(Quota::per_second(limit).unwrap(), clock)
            .shards(1)
            .build()
            .unwrap();
        // Every decision that names the second window (its reset more than half a period away)
        // counts against that window's limit.
        let in_second_window: u64 = (0..2 * limit)
            .map(|_| table.check(&7))
            .filter(|d| d.is_allowed() && d.reset_after_nanos() > period / 2)
            .count() as u64;
        assert!(
            in_second_window <= limit,
            "start {start}: {in_second_window} admitted in one window of {limit}"
        );
    }
}

/// Found as `Keyed<gcra> door on`: `peek -> remaining 1`, `check(1) -> allowed (remaining 0)`,
/// `charge(2) -> 0` on a quota with an overdraft of 2: a key whose only check the door admitted
/// is not held, so `charge` found nothing to charge, where a table without a door charges the
/// overdraft: `Keyed::charge` of a key not held checked it in first, for what a peek reported
/// left (nothing). A charge now inserts the key, charged the door's unit, and charges it in the
/// same locked step.
#[test]
fn charge_of_a_key_the_door_admitted_runs_into_the_overdraft() {
    let quota = Quota::per_second(2).unwrap().with_burst(1).unwrap().with_overdraft(2);
    let charged = |door: bool| {
        let builder = KeyedBuilder::<u64, Gcra, _>::new(quota, ManualClock::starting_at(2_427_276)).shards(2);
        let table = if door { builder } else { builder.doorkeeper(0) }.build().unwrap();
        assert!(table.check(&0).is_allowed());
        table.charge(&0, 2)
    };
    assert_eq!(charged(false), 2);
    assert_eq!(charged(true), charged(false), "the door changes what charge takes");
}
