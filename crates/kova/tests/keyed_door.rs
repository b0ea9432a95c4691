//! The doorkeeper (`KeyedBuilder::doorkeeper`): a table with one decides exactly as a table
//! without one, key for key and check for check, while keys seen once stay out of it; and
//! threads racing on the first checks of the same keys never get more than the quota.

use std::sync::Arc;
use std::time::Duration;

use kova::{
    Algorithm, CheckError, Clock, FixedWindow, Gcra, Keyed, ManualClock, Quota, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};

/// A small deterministic generator (xorshift), so that a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random checks (cost 1 mostly, some 2, peeks and checks of cost 0), resets, removals and
/// refunds of a few keys, with the clock moving by random steps around the quota's period, on a
/// table with a door and one without: every decision the same (a reset, removal or refund of a
/// key only the door has seen forgets its unit, as the plain table forgets or refunds the key's).
fn same_decisions<A: Algorithm>(quota: Quota, seed: u64) {
    let clock = ManualClock::new();
    let builder = || Keyed::<u64, A>::builder(quota).clock(clock.clone()).shards(2);
    let plain = builder().doorkeeper(0).build().unwrap();
    let small_door = builder().doorkeeper(1 << 12).build().unwrap();
    // The door every table gets unless told otherwise.
    let default_door = builder().build().unwrap();
    let period = quota.period_nanos();
    let mut rng = Rng(seed);
    // Under Miri a few hundred steps: enough for every operation to meet a door-only key.
    let steps = if cfg!(miri) { 300 } else { 4_000 };
    for step in 0..steps {
        let key = rng.next() % 6;
        let op = rng.next() % 13;
        let expected = apply(&plain, op, key);
        for (name, door) in [("small door", &small_door), ("default door", &default_door)] {
            assert_eq!(
                expected,
                apply(door, op, key),
                "{} {name} step {step}, key {key} at {} ns",
                quota_name::<A>(quota),
                clock.now_nanos()
            );
        }
        let advance = match rng.next() % 4 {
            0 => 0,
            1 => rng.next() % (period / 8 + 1),
            2 => rng.next() % (period + 1),
            _ => rng.next() % (3 * period + 1),
        };
        clock.advance(Duration::from_nanos(advance));
    }
    assert!(small_door.len() <= plain.len(), "the door keeps keys out of the table");
    assert!(default_door.len() <= plain.len(), "the door keeps keys out of the table");
}

/// Operation `op` (of 13, drawn at random) on `key`: what it decided, or what a peek then says.
fn apply<A: Algorithm>(
    table: &Keyed<u64, A, ManualClock>,
    op: u64,
    key: u64,
) -> Result<(bool, u64), CheckError> {
    let seen = |d: kova::Decision| (d.is_allowed(), d.remaining());
    match op {
        10 => table.reset(&key),
        11 => {
            table.remove(&key);
        }
        // Whether a refund returns true can differ (the plain table holds idle keys the door
        // table never inserted); what it leaves cannot.
        12 => {
            table.refund(&key, 1);
        }
        0 => {}
        1 => return table.check_n(&key, 2).map(seen),
        2 => return table.check_n(&key, 0).map(seen),
        _ => return Ok(seen(table.check(&key))),
    }
    Ok(seen(table.peek(&key)))
}

fn quota_name<A: Algorithm>(quota: Quota) -> String {
    format!("{} {quota:?}", A::from_quota(quota).unwrap().name())
}

#[test]
fn a_door_decides_exactly_as_the_table_does() {
    let bursty = Quota::per_second(4).unwrap().with_burst(3).unwrap();
    let seeds = if cfg!(miri) { 1 } else { 6 };
    for seed in 1..=seeds {
        same_decisions::<Gcra>(bursty, seed);
        same_decisions::<TokenBucket>(bursty, seed);
        same_decisions::<FixedWindow>(Quota::per_second(3).unwrap(), seed);
        same_decisions::<SlidingWindowCounter>(Quota::per_second(3).unwrap(), seed);
        same_decisions::<SlidingWindowLog>(Quota::per_second(3).unwrap(), seed);
        // A quota of one: the door's unit is all a key has.
        same_decisions::<Gcra>(Quota::per_second(1).unwrap(), seed);
    }
}

#[test]
fn keys_seen_once_stay_out_and_a_second_check_pays_the_first() {
    let clock = ManualClock::new();
    let table =
        Keyed::<u64, Gcra>::builder(Quota::per_second(2).unwrap()).clock(clock.clone()).build().unwrap();
    for key in 0..1_000 {
        let first = table.check(&key);
        assert!(first.is_allowed());
        assert_eq!(first.remaining(), 1);
    }
    // Most stayed out (a few found their word taken by another key's entry and went in).
    assert!(table.len() < 100, "{} keys held", table.len());
    // The door's unit shows in a peek and in the second check, which inserts the key.
    assert_eq!(table.peek(&7).remaining(), 1);
    assert_eq!(table.check(&7).remaining(), 0);
    assert!(!table.check(&7).is_allowed());
    assert!(table.quota_of(&7).is_some());
    // Once a unit is idle, the door admits the key again as new.
    clock.advance(Duration::from_secs(1));
    assert_eq!(table.check(&500).remaining(), 1);
    assert!(table.memory_bytes() <= table.memory_bound_bytes());
}

/// Threads check the same new keys at once, the clock still: each key is admitted exactly its
/// burst, whichever thread reached the door first.
#[test]
fn racing_first_checks_never_exceed_the_quota() {
    let clock = ManualClock::new();
    let burst = 3;
    let table = Arc::new(
        Keyed::<u64, Gcra>::builder(Quota::per_second(1).unwrap().with_burst(burst).unwrap())
            .clock(clock)
            .shards(4)
            // A small door, so that keys of different shards also race for its words.
            .doorkeeper(64)
            .build()
            .unwrap(),
    );
    let keys = if cfg!(miri) { 8 } else { 5_000 };
    let threads = 4;
    let admitted: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let table = Arc::clone(&table);
                scope.spawn(move || {
                    (0..keys)
                        .map(|key| (0..2).filter(|_| table.check(&key).is_allowed()).count() as u64)
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for key in 0..keys as usize {
        let total: u64 = admitted.iter().map(|per_thread| per_thread[key]).sum();
        assert_eq!(total, burst, "key {key}: {total} admitted of 8 checks");
    }
}

/// A reservation and a settling charge work on a key's held state: for a key only the door has
/// seen, they insert it (charged the door's unit) rather than stop at the door, so a charge past
/// the first unit is not lost and a reservation finds the key held.
#[test]
fn reservations_and_charges_of_a_key_at_the_door_insert_it() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(1).unwrap().with_overdraft(5);
    let builder = || Keyed::<u64, Gcra>::builder(quota).clock(clock.clone());
    let (door, plain) = (builder().build().unwrap(), builder().doorkeeper(0).build().unwrap());
    for table in [&door, &plain] {
        assert_eq!(table.charge(&1, 4), 4);
        assert!(!table.check(&1).is_allowed());
        assert_eq!(table.reserve_n(&2, 1).unwrap().delay(), Duration::ZERO);
        assert_eq!(table.reserve_n(&2, 1).unwrap().delay(), Duration::from_secs(1));
        assert_eq!(table.len(), 2);
    }
    assert_eq!(door.peek(&1), plain.peek(&1));
    // A key the door admitted first: the reservation after it waits for that unit.
    assert!(door.check(&3).is_allowed());
    assert_eq!(door.len(), 2);
    assert_eq!(door.reserve_n(&3, 1).unwrap().delay(), Duration::from_secs(1));
    assert_eq!(door.len(), 3);
}

/// A key seen once at the door and back much later is a new key: its first check admitted long
/// ago has long been idle. An entry's time is kept modulo its range, so an old entry must not
/// come back as one written in the future (which charged the key at that future time: a client
/// returning after 9 to 18 minutes was denied for minutes).
#[test]
fn a_key_back_long_after_its_door_entry_is_a_new_key() {
    let clock = ManualClock::new();
    let table = Keyed::<u64, Gcra, _>::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
    assert!(table.check(&7).is_allowed());
    for minutes in [10, 15, 25, 40] {
        clock.set(minutes * 60 * 1_000_000_000);
        assert_eq!(table.peek(&7).remaining(), 10, "after {minutes} min");
        let back = table.check(&7);
        assert!(back.is_allowed(), "after {minutes} min: {back:?}");
        assert!(back.reset_after() <= Duration::from_millis(100), "after {minutes} min: {back:?}");
        table.remove(&7);
    }
}
