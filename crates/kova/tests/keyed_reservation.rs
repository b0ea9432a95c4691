//! Reservations per key (`Keyed::reserve_n`, `KeyedReservation::cancel`) on a ManualClock:
//! the direct limiter's delays and refusals on each key separately, a cancel that gives back
//! only to the same key's state (nothing after the key was removed, reset or moved to another
//! quota), the full-table policies, and, over random schedules on two keys with removals and
//! quota changes, GCRA's bound on the units each key's state ever hands out.

use std::time::Duration;

use kova::keyed::TableFullPolicy;
use kova::reservation::ReserveError;
use kova::{
    Clock, Fallback, FixedWindow, Gcra, Keyed, ManualClock, Quota, SlidingWindowCounter, TokenBucket,
    WordAlgorithm,
};
use proptest::prelude::*;

#[path = "support/bucket_bound.rs"]
mod bucket_bound;
use bucket_bound::{check_bucket_bound, used_after_cancel};

const MS: Duration = Duration::from_millis(1);

fn quota(limit: u64, burst: u64) -> Quota {
    Quota::per_second(limit).unwrap().with_burst(burst).unwrap()
}

fn table(quota: Quota, clock: &ManualClock) -> Keyed<u64, Gcra, ManualClock> {
    Keyed::with_clock(quota, clock.clone()).unwrap()
}

#[test]
fn each_key_queues_its_own_reservations() {
    let clock = ManualClock::new();
    let table = table(quota(10, 1), &clock);
    let delays: Vec<Duration> = (0..3).map(|_| table.reserve_n(&1, 1).unwrap().delay()).collect();
    assert_eq!(delays, [Duration::ZERO, 100 * MS, 200 * MS]);
    assert_eq!(table.reserve_n(&2, 1).unwrap().delay(), Duration::ZERO);
    assert_eq!(table.check(&1).retry_after(), 300 * MS);
    clock.advance(150 * MS);
    let next = table.reserve_n(&1, 1).unwrap();
    assert_eq!(next.delay(), 150 * MS);
    assert_eq!(next.key(), &1);
}

#[test]
fn refusals_take_nothing_and_do_not_insert() {
    let clock = ManualClock::new();
    let table = table(quota(10, 10), &clock);
    assert_eq!(
        table.reserve_n(&1, 11).unwrap_err(),
        ReserveError::CostExceedsCapacity { cost: 11, capacity: 10 }
    );
    assert!(table.is_empty());
    let _all = table.reserve_n(&1, 10).unwrap();
    let before = table.peek(&1);
    assert_eq!(
        table.reserve_n_within(&1, 3, 299 * MS).unwrap_err(),
        ReserveError::DelayTooLong { delay: 300 * MS, max_delay: 299 * MS }
    );
    assert_eq!(table.peek(&1), before);
    assert_eq!(table.reserve_n_within(&1, 3, 300 * MS).unwrap().delay(), 300 * MS);
}

#[test]
fn a_key_with_its_own_quota_reserves_under_it() {
    let clock = ManualClock::new();
    let table = Keyed::<u64, Gcra>::builder(quota(10, 10))
        .clock(clock.clone())
        .quota_fn(|&key| (key == 7).then(|| quota(1, 2)))
        .build()
        .unwrap();
    assert_eq!(
        table.reserve_n(&7, 3).unwrap_err(),
        ReserveError::CostExceedsCapacity { cost: 3, capacity: 2 }
    );
    assert!(table.is_empty());
    assert_eq!(table.reserve_n(&7, 2).unwrap().delay(), Duration::ZERO);
    assert_eq!(table.reserve_n(&7, 1).unwrap().delay(), Duration::from_secs(1));
    assert_eq!(table.quota_of(&7), Some(quota(1, 2)));
}

#[test]
fn cancel_gives_back_to_its_key_only_what_later_units_did_not_build_on() {
    let clock = ManualClock::new();
    let table = table(quota(10, 1), &clock);
    let _first = table.reserve_n(&1, 1).unwrap();
    let second = table.reserve_n(&1, 1).unwrap();
    let third = table.reserve_n(&1, 1).unwrap();
    let other = table.peek(&2);
    let before = table.peek(&1);
    assert_eq!(second.cancel(), 0);
    assert_eq!(table.peek(&1), before);
    assert_eq!(third.cancel(), 1);
    assert_eq!(table.reserve_n(&1, 1).unwrap().delay(), 200 * MS);
    assert_eq!(table.peek(&2), other);
    clock.advance(201 * MS);
    let due = table.reserve_n(&1, 1).unwrap();
    clock.advance(100 * MS);
    let before = table.peek(&1);
    assert_eq!(due.cancel(), 0);
    assert_eq!(table.peek(&1), before);
}

/// Each way a key's state can stop holding a reservation's units: its cancel gives back
/// nothing, so the key's new state never gets more than its quota.
#[test]
fn cancel_after_the_key_was_forgotten_or_moved_gives_back_nothing() {
    type Forget = fn(&Keyed<u64, Gcra, ManualClock>);
    let forgets: [(&str, Forget); 6] = [
        ("remove", |t| assert!(t.remove(&1))),
        ("reset", |t| t.reset(&1)),
        ("set_quota", |t| assert!(t.set_quota(&1, quota(5, 10)).unwrap())),
        ("set_quota there and back", |t| {
            assert!(t.set_quota(&1, quota(5, 2)).unwrap());
            assert!(t.set_quota(&1, quota(10, 10)).unwrap());
        }),
        ("check_n_with_quota there and back", |t| {
            t.check_n_with_quota(&1, quota(5, 2), 0).unwrap();
            t.check_n_with_quota(&1, quota(10, 10), 0).unwrap();
        }),
        ("another key removed", |t| {
            // Twice: past the doorkeeper, into the table.
            t.check(&2);
            t.check(&2);
            assert!(t.remove(&2));
        }),
    ];
    for (name, forget) in forgets {
        let clock = ManualClock::new();
        let table = table(quota(10, 10), &clock);
        let _now = table.reserve_n(&1, 10).unwrap();
        let later = table.reserve_n(&1, 10).unwrap();
        forget(&table);
        // Whatever the key's state is now, use it all up.
        let left = table.peek(&1).remaining();
        if left > 0 {
            assert!(table.check_n(&1, left).unwrap().is_allowed(), "{name}");
        }
        let before = table.peek(&1);
        assert_eq!(later.cancel(), 0, "{name}");
        assert_eq!(table.peek(&1), before, "{name}");
    }
}

#[test]
fn cancel_of_a_key_no_longer_held_gives_back_nothing_and_inserts_nothing() {
    let clock = ManualClock::new();
    let table = table(quota(10, 10), &clock);
    let reservation = table.reserve_n(&1, 5).unwrap();
    assert!(table.remove(&1));
    assert_eq!(reservation.cancel(), 0);
    assert!(table.is_empty());
}

#[test]
fn a_full_table_answers_by_its_policy() {
    let build = |policy| {
        let clock = ManualClock::new();
        let table = Keyed::<u64, Gcra>::builder(quota(1, 1))
            .clock(clock.clone())
            .shards(1)
            .max_keys(1)
            .table_full(policy)
            // So that key 1's check inserts it and fills the table.
            .doorkeeper(0)
            .build()
            .unwrap();
        assert!(table.check(&1).is_allowed()); // actively limited: never evicted
        (table, clock)
    };
    let (deny, _clock) = build(TableFullPolicy::DenyNew);
    assert!(matches!(deny.reserve_n(&2, 1), Err(ReserveError::TableFull { .. })));
    assert_eq!(deny.len(), 1);

    let (evict, _clock) = build(TableFullPolicy::EvictClosestToIdle);
    assert!(matches!(evict.reserve_n(&2, 1), Err(ReserveError::TableFull { .. })));
    assert_eq!(evict.peek(&1).remaining(), 0);

    let (open, _clock) = build(TableFullPolicy::AllowUntracked);
    let untracked = open.reserve_n(&2, 1).unwrap();
    assert_eq!(untracked.fallback(), Some(Fallback::TableFullUntracked));
    assert_eq!(untracked.delay(), Duration::ZERO);
    assert_eq!(untracked.cancel(), 0);
    assert_eq!(open.len(), 1);
}

#[test]
fn algorithms_without_units_ahead_of_time_reserve_only_what_is_there() {
    fn check<W: WordAlgorithm>(quota: Quota) {
        let clock = ManualClock::new();
        let table = Keyed::<u64, W, _>::with_clock(quota, clock.clone()).unwrap();
        let all = table.reserve_n(&1, quota.limit()).unwrap();
        assert_eq!(all.delay(), Duration::ZERO);
        let before = table.peek(&1);
        let retry_after = table.check(&1).retry_after();
        assert_eq!(
            table.reserve_n(&1, 1).unwrap_err(),
            ReserveError::NotAvailableNow { algorithm: W::NAME, retry_after },
            "{}",
            W::NAME
        );
        assert_eq!(table.peek(&1), before, "{}", W::NAME);
        assert_eq!(all.cancel(), quota.limit());
        assert_eq!(table.peek(&1).remaining(), quota.limit(), "{}", W::NAME);
    }
    let quota = Quota::per_second(4).unwrap();
    check::<TokenBucket>(quota);
    check::<FixedWindow>(quota);
    check::<SlidingWindowCounter>(quota);
}

#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Check {
        key: u64,
        cost: u64,
    },
    Reserve {
        key: u64,
        cost: u64,
        max_delay: u64,
    },
    /// Cancels the reservation at this index (modulo those still held).
    Cancel(usize),
    Remove(u64),
    /// Moves the key to the other of the two quotas.
    SwitchQuota(u64),
}

/// The units one state of one key (from its insertion, or a removal or quota move, to the next)
/// handed out: `(time used, units)` under the quota `(interval ns, burst)`.
struct Era {
    interval: u64,
    burst: u64,
    used: Vec<(u64, u64)>,
}

proptest! {
    /// On two keys with removals and quota moves between them, every unit a key's state hands
    /// out (an admitted check at its time, a reservation at its ready time, less what its
    /// cancel gave back) keeps the bound of the state it was taken from; a cancel of a
    /// reservation from an earlier state of its key changes nothing; a refusal changes nothing.
    #[test]
    fn every_state_of_every_key_keeps_the_bucket_bound(
        burst in 1u64..6,
        steps in prop::collection::vec(prop_oneof![
            (0u64..400).prop_map(Step::Advance),
            (0u64..2, 1u64..6).prop_map(|(key, cost)| Step::Check { key, cost }),
            (0u64..2, 1u64..6, 0u64..1_000)
                .prop_map(|(key, cost, max_delay)| Step::Reserve { key, cost, max_delay }),
            any::<usize>().prop_map(Step::Cancel),
            (0u64..2).prop_map(Step::Remove),
            (0u64..2).prop_map(Step::SwitchQuota),
        ], 1..60),
    ) {
        // 10 per second (T = 100 ms) with `burst`, or 5 per second (T = 200 ms) with 5.
        let quotas = [(quota(10, burst), 100_000_000, burst), (quota(5, 5), 200_000_000, 5)];
        let clock = ManualClock::new();
        let table = table(quotas[0].0, &clock);
        let mut which = [0usize; 2];
        let mut eras: Vec<Era> = Vec::new();
        let new_era = |eras: &mut Vec<Era>, q: usize| {
            eras.push(Era { interval: quotas[q].1, burst: quotas[q].2, used: Vec::new() });
            eras.len() - 1
        };
        let mut current = [new_era(&mut eras, 0), new_era(&mut eras, 0)];
        // (reservation, the era it was taken from)
        let mut held = Vec::new();
        for step in steps {
            match step {
                Step::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Step::Check { key, cost } => {
                    let k = key as usize;
                    if let Ok(decision) = table.check_n(&key, cost.min(quotas[which[k]].2)) {
                        if decision.is_allowed() {
                            eras[current[k]].used.push((clock.now_nanos(), cost.min(quotas[which[k]].2)));
                        }
                    }
                }
                Step::Reserve { key, cost, max_delay } => {
                    let k = key as usize;
                    let before = table.peek(&key);
                    match table.reserve_n_within(&key, cost, Duration::from_millis(max_delay)) {
                        Ok(reservation) => held.push((reservation, current[k])),
                        Err(_) => prop_assert_eq!(table.peek(&key), before),
                    }
                }
                Step::Cancel(i) if !held.is_empty() => {
                    let (reservation, era) = held.remove(i % held.len());
                    let key = *reservation.key();
                    let (at, cost) = (reservation.ready_at_nanos(), reservation.cost());
                    let before = table.peek(&key);
                    let in_time = clock.now_nanos() <= at;
                    let units = reservation.cancel();
                    let after = table.peek(&key);
                    if era != current[key as usize] {
                        prop_assert_eq!(units, 0);
                        prop_assert_eq!(after, before);
                    }
                    prop_assert!(before.remaining() <= after.remaining());
                    let interval = eras[era].interval;
                    let back = before.reset_after_nanos() - after.reset_after_nanos();
                    prop_assert!(units <= cost && back.div_ceil(interval) <= units);
                    prop_assert!(in_time || units == 0);
                    let kept = used_after_cancel(cost, in_time);
                    if kept > 0 {
                        eras[era].used.push((at, kept));
                    }
                }
                Step::Cancel(_) => {}
                Step::Remove(key) => {
                    let k = key as usize;
                    table.remove(&key);
                    // Inserted again under the default quota.
                    which[k] = 0;
                    current[k] = new_era(&mut eras, 0);
                }
                Step::SwitchQuota(key) => {
                    let k = key as usize;
                    if table.set_quota(&key, quotas[1 - which[k]].0).unwrap() {
                        which[k] = 1 - which[k];
                        current[k] = new_era(&mut eras, which[k]);
                    }
                }
            }
        }
        for (reservation, era) in held {
            eras[era].used.push((reservation.ready_at_nanos(), reservation.cost()));
        }
        for era in &mut eras {
            check_bucket_bound(&mut era.used, era.burst, era.interval)?;
        }
    }
}
