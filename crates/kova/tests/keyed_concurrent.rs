//! The keyed table under concurrent inserts, lookups, evictions, removals and quota changes,
//! checked against a sequential model of the keys each thread owns.
//!
//! Its tables have no doorkeeper (`doorkeeper(0)`): the model is of keys inserted by their first
//! check (`keyed_door.rs` checks the door against the model of a table without one).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use kova::keyed::TableFullPolicy;
use kova::{Clock, Decision, Gcra, Keyed, ManualClock, Quota, RateLimiter, TokenBucket, WordAlgorithm};

/// A barrier that gives up (panics) after a minute, so that a thread failing an assertion
/// fails the test instead of leaving the others waiting forever.
struct Barrier {
    state: Mutex<(usize, u64)>,
    turned: Condvar,
    threads: usize,
}

impl Barrier {
    fn new(threads: usize) -> Self {
        Barrier { state: Mutex::new((0, 0)), turned: Condvar::new(), threads }
    }

    fn wait(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = state.1;
        state.0 += 1;
        if state.0 == self.threads {
            *state = (0, generation + 1);
            self.turned.notify_all();
            return;
        }
        while state.1 == generation {
            let (next, timeout) =
                self.turned.wait_timeout(state, Duration::from_secs(60)).unwrap_or_else(|e| e.into_inner());
            state = next;
            assert!(
                !timeout.timed_out() || state.1 != generation,
                "barrier timed out: another thread failed"
            );
        }
    }
}

/// A small deterministic generator (xorshift64*), one per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Whether the table holds a key, as far as the model knows: an idle key may have been
/// reclaimed (its state is fresh either way, so decisions do not depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    Yes,
    No,
    Maybe,
}

/// One thread's keys: the model's state word for each and whether the table holds it.
struct Model<W> {
    algorithm: W,
    keys: HashMap<u64, (u64, Held)>,
}

impl<W: WordAlgorithm> Model<W> {
    fn new(algorithm: W) -> Self {
        Model { algorithm, keys: HashMap::new() }
    }

    fn check(&mut self, key: u64, now: u64, cost: u64) -> Decision {
        let fresh = self.algorithm.fresh_word();
        let (word, held) = self.keys.entry(key).or_insert((fresh, Held::No));
        let (decision, next) = self.algorithm.decide(*word, now, cost);
        *word = next;
        if cost > 0 {
            // A check inserts the key; an allowed one makes it active (not idle).
            *held = Held::Yes;
        }
        decision
    }

    /// The table answered `key` by its table-full policy: legitimate only for a key it did not
    /// hold (all slots of the shard held or waiting for their grace period). Nothing was
    /// recorded.
    fn fell_back(&mut self, key: u64) {
        let fresh = self.algorithm.fresh_word();
        let (word, held) = self.keys.entry(key).or_insert((fresh, Held::No));
        assert_ne!(*held, Held::Yes, "a held key got a fallback");
        assert_eq!(*word, fresh, "a key with state got a fallback");
        *held = Held::No;
    }

    /// Removes the key; `Err` when the model cannot tell whether the table held it.
    fn remove(&mut self, key: u64) -> Result<bool, ()> {
        let fresh = self.algorithm.fresh_word();
        let (word, held) = self.keys.entry(key).or_insert((fresh, Held::No));
        let was = *held;
        (*word, *held) = (fresh, Held::No);
        match was {
            Held::Yes => Ok(true),
            Held::No => Ok(false),
            Held::Maybe => Err(()),
        }
    }

    fn reset(&mut self, key: u64) {
        let fresh = self.algorithm.fresh_word();
        if let Some((word, held)) = self.keys.get_mut(&key) {
            // Fresh is idle: the table may reclaim it from now on.
            *word = fresh;
            if *held == Held::Yes {
                *held = Held::Maybe;
            }
        }
    }

    /// After time passed: idle keys may have been reclaimed.
    fn forget_idle(&mut self, now: u64) {
        let fresh = self.algorithm.fresh_word();
        for (word, held) in self.keys.values_mut() {
            if *held != Held::No && self.algorithm.is_idle_word(*word, now) {
                (*word, *held) = (fresh, Held::Maybe);
            }
        }
    }
}

/// Several threads, each on its own keys, in phases separated by a clock step that makes every
/// key idle. The table is small (one shard), so inserts of new keys keep reclaiming the idle
/// keys of other threads, and of this one, while they are being checked: every decision must
/// still be the model's (reclaiming an idle key changes nothing), and no policy fallback may
/// appear (there is always an idle key to reclaim).
fn owners_match_the_model<A: WordAlgorithm>(threads: u64, phases: u64, ops: u64) {
    let quota = Quota::per_second(5).unwrap();
    let clock = ManualClock::new();
    // Per phase each thread touches at most 8 keys: 8 * threads active keys in a 40 * threads
    // table, the rest idle leftovers of earlier phases.
    let max_keys = 40 * threads as usize;
    let keyed = Keyed::<u64, A>::builder(quota)
        .clock(clock.clone())
        .shards(1)
        .max_keys(max_keys)
        // A full scan finds an idle key whenever there is one (a partial scan may not, and the
        // policy would then answer for a key the model admits).
        .reclaim_scan(max_keys)
        .table_full(TableFullPolicy::DenyNew)
        .doorkeeper(0)
        .build()
        .unwrap();
    let barrier = Barrier::new(threads as usize);
    let rounds_of_removal = Mutex::new(0u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (keyed, clock, barrier, removals) = (&keyed, &clock, &barrier, &rounds_of_removal);
            s.spawn(move || {
                let mut model = Model::new(<A as WordAlgorithm>::from_quota(quota).unwrap());
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                let mut removed = 0;
                let (mut checks, mut fallbacks) = (0u64, 0u64);
                for phase in 0..phases {
                    let now = clock.now_nanos();
                    // Eight keys of this thread per phase, from a pool of 80 (so keys come back
                    // after being reclaimed, and new keys keep arriving): the pools hold twice
                    // the table's keys, so inserts keep reclaiming idle ones.
                    let base = phase * 8 % 72;
                    for _ in 0..ops {
                        let key = (base + rng.below(8)) * threads + t;
                        match rng.below(10) {
                            0..=6 => {
                                let cost = rng.below(4);
                                let got = keyed.check_n(&key, cost).unwrap();
                                checks += 1;
                                if got.fallback().is_some() {
                                    model.fell_back(key);
                                    fallbacks += 1;
                                    continue;
                                }
                                let expected = model.check(key, now, cost);
                                assert_eq!(got, expected, "thread {t} phase {phase} key {key} cost {cost}");
                            }
                            7 => {
                                let got = keyed.remove(&key);
                                if let Ok(expected) = model.remove(key) {
                                    assert_eq!(got, expected, "thread {t} phase {phase} remove {key}");
                                }
                                removed += u64::from(got);
                            }
                            8 => {
                                model.reset(key);
                                keyed.reset(&key);
                            }
                            _ => {
                                let expected = model.check(key, now, 0);
                                assert_eq!(keyed.peek(&key), expected, "peek {key}");
                            }
                        }
                    }
                    barrier.wait();
                    if t == 0 {
                        assert!(keyed.len() <= max_keys);
                        clock.advance(Duration::from_secs(1));
                    }
                    barrier.wait();
                    model.forget_idle(clock.now_nanos());
                }
                assert!(model.keys.len() as u64 > 40, "thread {t} used {} keys", model.keys.len());
                // Fallbacks happen only while reclamation waits on a preempted thread.
                assert!(fallbacks * 5 <= checks, "thread {t}: {fallbacks} fallbacks in {checks} checks");
                *removals.lock().unwrap() += removed;
            });
        }
    });
    assert!(keyed.len() <= max_keys);
    assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes());
    assert!(*rounds_of_removal.lock().unwrap() > 0, "the mix exercised removals");
}

#[test]
fn gcra_owners_match_the_model_under_eviction() {
    owners_match_the_model::<Gcra>(4, 30, 200);
}

#[test]
fn token_bucket_owners_match_the_model_under_eviction() {
    owners_match_the_model::<TokenBucket>(3, 20, 200);
}

/// Many shards, no eviction: threads insert, check and remove their own keys everywhere.
#[test]
fn owners_across_many_shards_match_the_model() {
    let quota = Quota::per_minute(3).unwrap();
    let keyed = Keyed::<u64, Gcra>::builder(quota)
        .clock(ManualClock::new())
        .shards(16)
        .max_keys(100_000)
        .doorkeeper(0)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let keyed = &keyed;
            s.spawn(move || {
                let mut model = Model::new(<Gcra as WordAlgorithm>::from_quota(quota).unwrap());
                let mut rng = Rng(t * 7919 + 1);
                for _ in 0..20_000 {
                    let key = rng.below(2_000) * 4 + t;
                    if rng.below(8) == 0 {
                        // Nothing is idle at a standstill with a minute-long quota: exact.
                        assert_eq!(Ok(keyed.remove(&key)), model.remove(key));
                    } else {
                        let cost = rng.below(3) + 1;
                        assert_eq!(keyed.check_n(&key, cost).unwrap(), model.check(key, 0, cost));
                    }
                }
                let held = model.keys.values().filter(|(_, held)| *held == Held::Yes).count();
                assert!(held <= 2_000);
            });
        }
    });
    assert!(keyed.len() <= 8_000);
}

/// A key drained by one thread while other threads flood its shard with new keys, which keeps
/// evicting idle keys (this one is idle right before it is drained): the drain must never be
/// lost, so the key's next check is denied. Repeated over many phases.
#[test]
fn a_drain_racing_an_eviction_is_never_lost() {
    let quota = Quota::per_second(4).unwrap();
    let clock = ManualClock::new();
    let keyed = Keyed::<u64, Gcra>::builder(quota)
        .clock(clock.clone())
        .shards(1)
        .max_keys(32)
        .reclaim_scan(32)
        .doorkeeper(0)
        .build()
        .unwrap();
    let barrier = Barrier::new(3);
    let phases = 100u64;
    let mut tested = 0;
    std::thread::scope(|s| {
        let (keyed, barrier, clock) = (&keyed, &barrier, &clock);
        let drainer = s.spawn(move || {
            let mut tested = 0;
            for phase in 0..phases {
                barrier.wait();
                let key = phase % 4;
                let drained = keyed.check_n(&key, 4).unwrap();
                // Under this flood every slot may be waiting for its grace period (a flooding
                // thread preempted while pinned holds them all): the policy then answers, and
                // says so. Nothing was drained then; otherwise the drain must hold.
                if drained.fallback().is_none() {
                    assert!(drained.is_allowed(), "phase {phase}: the key was idle: {drained:?}");
                    let after = keyed.check(&key);
                    assert!(!after.is_allowed(), "phase {phase}: the drain was lost: {after:?}");
                    tested += 1;
                }
                barrier.wait();
                clock.advance(Duration::from_secs(1));
            }
            tested
        });
        for t in 0..2u64 {
            s.spawn(move || {
                for phase in 0..phases {
                    barrier.wait();
                    // 60 new keys into a 32-key shard: idle keys (the drained key among them,
                    // until it is drained) are reclaimed, and when none is idle, one of the
                    // flood's own keys is evicted.
                    for i in 0..30 {
                        keyed.check(&(1_000 + (phase * 2 + t) * 100 + i));
                    }
                    barrier.wait();
                }
            });
        }
        tested = drainer.join().unwrap();
    });
    println!("{tested} of {phases} phases drained the key without a fallback");
    assert!(tested >= phases / 5, "only {tested} of {phases} phases drained the key");
}

/// Checks of one key while another thread raises its quota: the upgrade carries the units used
/// so far, and a check racing with it may be counted twice but never lost, so at most the new
/// capacity is admitted in total (time stands still), and at most one unit per racing thread
/// less.
#[test]
fn a_quota_change_racing_checks_loses_no_unit() {
    let clock = ManualClock::new();
    let small = Quota::per_second(10).unwrap();
    let big = Quota::per_second(20).unwrap();
    let keyed =
        Keyed::<u64, Gcra>::builder(small).clock(clock.clone()).shards(1).doorkeeper(0).build().unwrap();
    for round in 0..200u64 {
        let key = round;
        let admitted = Mutex::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..2 {
                let (keyed, admitted) = (&keyed, &admitted);
                s.spawn(move || {
                    let mut mine = 0;
                    for _ in 0..30 {
                        if keyed.check(&key).is_allowed() {
                            mine += 1;
                        }
                    }
                    *admitted.lock().unwrap() += mine;
                });
            }
            let keyed = &keyed;
            s.spawn(move || {
                std::thread::yield_now();
                keyed.set_quota(&key, big).unwrap();
            });
        });
        let admitted = admitted.into_inner().unwrap();
        let more = (0..25).filter(|_| keyed.check(&key).is_allowed()).count() as u64;
        assert!(admitted + more <= 20, "round {round}: {admitted} + {more} admitted");
        if keyed.quota_of(&key) == Some(big) {
            assert!(admitted + more >= 18, "round {round}: {admitted} + {more} admitted");
        } else {
            // The change found the key not yet held: it kept the default quota.
            assert_eq!(admitted + more, 10, "round {round}");
        }
    }
}

/// The direct limiter and a keyed key agree when driven alike (same algorithm, same clock).
#[test]
fn a_keyed_key_behaves_like_a_direct_limiter() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(7).unwrap().with_burst(3).unwrap();
    let direct = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
    let keyed = Keyed::<&str, Gcra, _>::with_clock(quota, clock.clone()).unwrap();
    let mut rng = Rng(42);
    for _ in 0..2_000 {
        clock.advance_nanos(rng.below(200_000_000));
        let cost = rng.below(4);
        assert_eq!(keyed.check_n(&"k", cost).unwrap(), direct.check_n(cost).unwrap());
    }
}
