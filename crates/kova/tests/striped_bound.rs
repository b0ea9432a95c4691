//! Random concurrent histories of a `StripedLimiter` (checks and flushes), and of a `Keyed` table
//! with hot keys (checks of two keys, their promotion and demotion, door on and off), 2-4
//! threads under a shared `ManualClock` with clock steps, held to their documented bound: they
//! are not linearizable to one exact word, but over any interval of length `T` they admit (per
//! key) at most what their algorithm admits over `T + lease` (for GCRA: the burst plus
//! `(T + lease) / interval`). `KOVA_LINCHECK_HISTORIES` and `KOVA_LINCHECK_SEED` as in
//! `tests/linearizable.rs`.

use std::time::Duration;

use kova::keyed::HotKeys;
use kova::striped::StripedLimiter;
use kova::{Gcra, Keyed, ManualClock, Quota};

#[path = "support/bucket_bound.rs"]
#[allow(dead_code, reason = "the reservation tests' helpers are not used here")]
mod bucket_bound;
#[path = "support/lincheck_harness.rs"]
mod harness;

use bucket_bound::check_bucket_bound;
use harness::{seeds, Step};

#[derive(Debug, Clone, Copy)]
enum Op {
    /// `check_n(cost)` of a key (ignored by a direct limiter).
    Check(u64, u64),
    /// The striped limiter's `flush`; a table's `promote` of the key.
    Flush(u64),
    /// A table's `demote` of the key.
    Demote(u64),
}

const LEASE: Duration = Duration::from_millis(4);

/// What the threads call.
trait Subject: Sync {
    /// How many keys its plans use (a direct limiter: its checks' keys name one object).
    const KEYS: u64;

    /// Whether `op` admitted units.
    fn call(&self, op: Op) -> bool;
}

impl Subject for StripedLimiter<Gcra, ManualClock> {
    const KEYS: u64 = 1;

    fn call(&self, op: Op) -> bool {
        match op {
            Op::Check(_, cost) => self.check_n(cost).expect("within the burst").is_allowed(),
            Op::Flush(_) | Op::Demote(_) => {
                self.flush();
                false
            }
        }
    }
}

impl Subject for Keyed<u64, Gcra, ManualClock> {
    /// One key: striped, it leases from its state most often.
    const KEYS: u64 = 1;

    fn call(&self, op: Op) -> bool {
        match op {
            Op::Check(key, cost) => self.check_n(&key, cost).expect("within the burst").is_allowed(),
            Op::Flush(key) => {
                self.promote(&key);
                false
            }
            Op::Demote(key) => {
                self.demote(&key);
                false
            }
        }
    }
}

/// One history on a fresh subject `build` makes (of the quota, batch and clock): the units
/// each admitted check took, per key, at the clock reading after it, and the most the clock
/// moved during one call.
fn admitted<S: Subject>(
    seed: u64,
    build: impl Fn(Quota, u64, ManualClock) -> S,
) -> (Quota, Vec<Vec<(u64, u64)>>, u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let quota = Quota::per_second(1_000).unwrap().with_burst(rng.u64(4..=16)).unwrap();
    let batch = rng.u64(1..=4);
    let clock = ManualClock::starting_at(rng.u64(0..1 << 30));
    let subject = build(quota, batch, clock.clone());
    let plans: Vec<Vec<Step<Op>>> = (0..rng.u32(2..=4))
        .map(|_| {
            (0..rng.usize(4..=12))
                .map(|_| {
                    let key = rng.u64(0..S::KEYS);
                    match rng.u32(0..100) {
                        0..=69 => Step::Call(Op::Check(key, rng.u64(1..=3))),
                        70..=76 => Step::Call(Op::Flush(key)),
                        77..=79 => Step::Call(Op::Demote(key)),
                        _ => Step::Advance(rng.u64(1..=3_000_000)),
                    }
                })
                .collect()
        })
        .collect();
    let history = harness::record(&clock, &plans, &[], |&op, _: &mut ()| subject.call(op));
    let calls = history.lanes.iter().flat_map(|l| &l.calls);
    let mut used = vec![Vec::new(); S::KEYS as usize];
    let mut skew = 0;
    for call in calls {
        let response = call.response.as_ref().expect("a whole history");
        skew = skew.max(response.after - call.before);
        if let (Op::Check(key, cost), true) = (call.op, response.result) {
            used[key as usize].push((response.after, cost));
        }
    }
    (quota, used, skew)
}

/// The bound, for units placed at the reading after their check: a unit was decided up to
/// `skew` earlier, so the interval it counts in is longer by that much, and by the lease.
fn within(quota: Quota, used: &mut [(u64, u64)], slack_nanos: u64) -> bool {
    let interval = quota.emission_interval_nanos();
    let burst = quota.burst() + slack_nanos.div_ceil(interval);
    check_bucket_bound(used, burst, interval).is_ok()
}

/// Runs the histories of one subject, each key's admissions held to the bound; how many of them
/// broke the bound without the lease's slack (what one exact word would promise), and of how
/// many.
fn within_the_bound<S: Subject>(
    what: &str,
    salt: u64,
    build: impl Fn(Quota, u64, ManualClock) -> S,
) -> (usize, usize) {
    let seeds = seeds(salt);
    let mut beyond_the_word = 0;
    for &seed in &seeds {
        let (quota, used, skew) = admitted(seed, &build);
        for (key, mut used) in used.into_iter().enumerate() {
            assert!(
                within(quota, &mut used, LEASE.as_nanos() as u64 + skew),
                "{what}, seed {seed} (KOVA_LINCHECK_SEED={seed} replays the plan), key {key}: beyond the bound: \
                 {used:?}"
            );
            // Without the lease's slack: what one exact word would promise.
            if !within(quota, &mut used, skew) {
                beyond_the_word += 1;
            }
        }
    }
    eprintln!(
        "{what}: {beyond_the_word} of {} histories admitted beyond what one exact word would",
        seeds.len()
    );
    (beyond_the_word, seeds.len())
}

/// The check can fail: enough real histories break the bound without the lease's slack.
fn assert_tight((beyond, of): (usize, usize), at_least_of: usize) {
    assert!(
        of < at_least_of || beyond > 0,
        "no history of {of} needed the lease's slack: the bound is not tested"
    );
}

#[test]
fn a_striped_limiter_stays_within_its_documented_bound() {
    within_the_bound("StripedLimiter<gcra>", 21, |quota, batch, clock| {
        StripedLimiter::<Gcra>::builder(quota)
            .stripes(2)
            .batch(batch)
            .lease(LEASE)
            .clock(clock)
            .build()
            .unwrap()
    });
}

#[test]
fn a_table_with_hot_keys_stays_within_its_documented_bound() {
    let mut pooled = (0, 0);
    for door in [true, false] {
        let what = format!("Keyed<gcra> with hot keys, door {}", if door { "on" } else { "off" });
        let (beyond, of) = within_the_bound(&what, 22 ^ u64::from(door) << 40, |quota, batch, clock| {
            let hot = HotKeys::new(2).stripes(2).batch(batch).lease(LEASE).promote_after(1);
            let builder = Keyed::<u64, Gcra>::builder(quota).clock(clock).shards(2).hot_keys(hot).unwrap();
            if door { builder } else { builder.doorkeeper(0) }.build().unwrap()
        });
        pooled = (pooled.0 + beyond, pooled.1 + of);
    }
    // About 3 in 1,000 do: shown in a longer run (KOVA_LINCHECK_HISTORIES=2000 or more).
    assert_tight(pooled, 4_000);
}
