//! The doorkeeper (`KeyedBuilder::doorkeeper`): a table with one decides exactly as a table
//! without one, key for key and check for check, while keys seen once stay out of it; and
//! threads racing on the first checks of the same keys never get more than the quota.

use std::sync::Arc;
use std::time::Duration;

use kova::{
    Algorithm, Clock, FixedWindow, Gcra, KeyedBuilder, ManualClock, Quota, SlidingWindowCounter,
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
    let plain = KeyedBuilder::<u64, A, _>::new(quota, clock.clone()).shards(2).build().unwrap();
    let door =
        KeyedBuilder::<u64, A, _>::new(quota, clock.clone()).shards(2).doorkeeper(1 << 12).build().unwrap();
    let period = quota.period_nanos();
    let mut rng = Rng(seed);
    // Under Miri a few hundred steps: enough for every operation to meet a door-only key.
    let steps = if cfg!(miri) { 300 } else { 4_000 };
    for step in 0..steps {
        let key = rng.next() % 6;
        let seen = |d: kova::Decision| (d.is_allowed(), d.remaining());
        let (expected, got) = match rng.next() % 13 {
            10 => {
                plain.reset(&key);
                door.reset(&key);
                (Ok(seen(plain.peek(&key))), Ok(seen(door.peek(&key))))
            }
            11 => {
                plain.remove(&key);
                door.remove(&key);
                (Ok(seen(plain.peek(&key))), Ok(seen(door.peek(&key))))
            }
            // Whether a refund returns true can differ (the plain table holds idle keys the
            // door table never inserted); what it leaves cannot.
            12 => {
                plain.refund(&key, 1);
                door.refund(&key, 1);
                (Ok(seen(plain.peek(&key))), Ok(seen(door.peek(&key))))
            }
            0 => (Ok(seen(plain.peek(&key))), Ok(seen(door.peek(&key)))),
            1 => (plain.check_n(&key, 2).map(seen), door.check_n(&key, 2).map(seen)),
            2 => (plain.check_n(&key, 0).map(seen), door.check_n(&key, 0).map(seen)),
            _ => (Ok(seen(plain.check(&key))), Ok(seen(door.check(&key)))),
        };
        assert_eq!(
            expected,
            got,
            "{} step {step}, key {key} at {} ns",
            quota_name::<A>(quota),
            clock.now_nanos()
        );
        let advance = match rng.next() % 4 {
            0 => 0,
            1 => rng.next() % (period / 8 + 1),
            2 => rng.next() % (period + 1),
            _ => rng.next() % (3 * period + 1),
        };
        clock.advance(Duration::from_nanos(advance));
    }
    assert!(door.len() <= plain.len(), "the door keeps keys out of the table");
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
    let table = KeyedBuilder::<u64, Gcra, _>::new(Quota::per_second(2).unwrap(), clock.clone())
        .doorkeeper(1 << 16)
        .build()
        .unwrap();
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
        KeyedBuilder::<u64, Gcra, _>::new(Quota::per_second(1).unwrap().with_burst(burst).unwrap(), clock)
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
