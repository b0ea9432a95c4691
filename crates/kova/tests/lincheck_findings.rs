//! What the linearizability checker (`tests/linearizable.rs`) found, each as a regression test of
//! its own history.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kova::{Clock, FixedWindow, Gcra, Keyed, ManualClock, Quota};

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
        let table = Keyed::<u64, FixedWindow>::builder(Quota::per_second(limit).unwrap())
            .clock(clock)
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
        let builder = Keyed::<u64, Gcra>::builder(quota).clock(ManualClock::starting_at(2_427_276)).shards(2);
        let table = if door { builder } else { builder.doorkeeper(0) }.build().unwrap();
        assert!(table.check(&0).is_allowed());
        table.charge(&0, 2)
    };
    assert_eq!(charged(false), 2);
    assert_eq!(charged(true), charged(false), "the door changes what charge takes");
}

/// Found as `Keyed<sliding_window_counter> door on, resets and charges` (seed
/// 4339186131700801991, about one run in 4,000 of that plan): with a limit of 5, `check(1) ->
/// allowed (remaining 4)` overlapping `charge(2) -> 2`, `check(2) -> allowed (remaining 1)` and
/// `reset`, and then `check(2) -> allowed (remaining 3)`: the first check's unit was charged
/// nowhere. It was a door admission without the lock whose claim met the charge's insert (the
/// shard's insert count changed), so it had to undo its claim and go to the lock; but the reset
/// had forgotten the entry meanwhile, and a failed undo read as "an insert took it": the
/// admission stood on a fresh state the key no longer had. Now only an insert's taken mark makes
/// it stand. This replays the calls of that key (`KOVA_LINCHECK_HISTORIES` times, 300 by
/// default), each history checked against the key's specification. Real threads rarely meet
/// that interleaving (not once in 50,000 rounds before the fix): the checks that always do are
/// `keyed/door.rs`'s `an_undone_claim_stands_only_when_an_insert_took_it` and loom's
/// `door_admission_races_an_insert_and_a_reset`.
#[test]
fn a_door_admission_whose_entry_a_reset_forgot_goes_to_the_lock() {
    use kova::model::lincheck::word_api::{Op, Output, WordApi};
    use kova::model::lincheck::{assert_linearizable, Recorder};
    use kova::{Keyed, SlidingWindowCounter, WordAlgorithm};

    let quota = Quota::per_second(5).unwrap();
    let spec = WordApi::keyed(SlidingWindowCounter::from_quota(quota).unwrap());
    let call = |table: &Keyed<u64, SlidingWindowCounter, ManualClock>, op: &Op| match *op {
        Op::Check(cost) => Output::Decided(table.check_n(&0, cost)),
        Op::Charge(cost) => Output::Charged(table.charge(&0, cost)),
        Op::Peek => Output::Decided(Ok(table.peek(&0))),
        Op::Reset => {
            table.reset(&0);
            Output::Done
        }
        other => unreachable!("{other:?} is not in the plan"),
    };
    let plans: [&[Op]; 2] = [&[Op::Check(1)], &[Op::Charge(2), Op::Check(2), Op::Reset]];
    let rounds = std::env::var("KOVA_LINCHECK_HISTORIES").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    for round in 0..rounds {
        let clock = ManualClock::starting_at(479_447_160 + round);
        let table = Keyed::<u64, SlidingWindowCounter>::builder(quota)
            .clock(clock.clone())
            .shards(2)
            .build()
            .unwrap();
        let recorder = Recorder::new(clock);
        let start = std::sync::Barrier::new(plans.len());
        let mut lanes = std::thread::scope(|scope| {
            let threads: Vec<_> = plans
                .iter()
                .enumerate()
                .map(|(i, plan)| {
                    let (recorder, start, table) = (&recorder, &start, &table);
                    scope.spawn(move || {
                        let mut lane = recorder.lane(format!("thread {}", i + 1));
                        start.wait();
                        for &op in plan.iter() {
                            lane.call(recorder, op, |op| call(table, op));
                        }
                        lane
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
        });
        let mut last = recorder.lane("after");
        for op in [Op::Check(2), Op::Peek] {
            last.call(&recorder, op, |op| call(&table, op));
        }
        lanes.push(last);
        assert_linearizable("the found plan", &spec, spec.fresh(), &recorder.history(lanes), |_| true);
    }
}
