//! The conformance suite: the same operation sequences against kova's in-memory algorithm and the
//! Redis script, with client-supplied time in whole microseconds; decisions must be identical
//! (allowed, limit, remaining, retry_after, reset_after, to the nanosecond).

use std::time::Duration;

use kova::model::BucketModel;
use kova::{
    AlgorithmKind, Decision, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket, WordAlgorithm,
};
use kova_redis::{RedisLimit, RedisLimiter, MICROS};

/// A deterministic generator (xorshift64*), so a failure names its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in 0..=max.
    pub fn upto(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            self.next()
        } else {
            self.next() % (max + 1)
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Op {
    Check(u64),
    Peek,
    Reset,
}

/// The in-memory side.
enum Reference {
    Word { decide: Box<dyn Fn(u64, u64, u64) -> (Decision, u64) + Send>, fresh: u64, word: u64 },
    Model { make: Box<dyn Fn() -> BucketModel + Send>, model: BucketModel },
    Log { limiter: RateLimiter<SlidingWindowLog, ManualClock>, clock: ManualClock },
}

fn word<W: WordAlgorithm>(algorithm: W) -> Reference {
    let fresh = algorithm.fresh_word();
    Reference::Word {
        decide: Box::new(move |w, now, cost| algorithm.decide(w, now, cost)),
        fresh,
        word: fresh,
    }
}

impl Reference {
    /// The in-memory algorithm for `limit`, and whether it handles a clock running backwards
    /// the way the script does (the exact bucket model assumes monotonic time).
    fn new(limit: &RedisLimit) -> (Self, bool) {
        let quota = limit.effective_quota();
        match limit.kind() {
            AlgorithmKind::Gcra => (word(<Gcra as WordAlgorithm>::from_quota(quota).unwrap()), true),
            AlgorithmKind::FixedWindow => {
                (word(<FixedWindow as WordAlgorithm>::from_quota(quota).unwrap()), true)
            }
            AlgorithmKind::SlidingWindowCounter => {
                (word(<SlidingWindowCounter as WordAlgorithm>::from_quota(quota).unwrap()), true)
            }
            AlgorithmKind::TokenBucket => match <TokenBucket as WordAlgorithm>::from_quota(quota) {
                // At shift 0 the in-memory bucket reads nanoseconds exactly, as the script reads
                // microseconds: the same decisions.
                Ok(bucket) if bucket.shift() == 0 => (word(bucket), true),
                // Otherwise (a full refill over 2^30 ns, or a burst over 2^22) the in-memory
                // bucket samples time in 2^shift ns units; the script is compared with the
                // exact bucket it approximates instead.
                _ => {
                    let (interval, burst) = (quota.emission_interval_nanos(), quota.burst());
                    let make = move || BucketModel::with_quantum(interval, burst, MICROS);
                    (Reference::Model { model: make(), make: Box::new(make) }, false)
                }
            },
            AlgorithmKind::SlidingWindowLog => {
                let clock = ManualClock::new();
                let limiter = RateLimiter::with_clock(quota, clock.clone()).unwrap();
                (Reference::Log { limiter, clock }, true)
            }
        }
    }

    fn apply(&mut self, now_ns: u64, op: Op) -> Option<Decision> {
        match (self, op) {
            (Reference::Word { fresh, word, .. }, Op::Reset) => {
                *word = *fresh;
                None
            }
            (Reference::Word { decide, word, .. }, Op::Check(cost)) => {
                let (decision, new) = decide(*word, now_ns, cost);
                *word = new;
                Some(decision)
            }
            (Reference::Word { decide, word, .. }, Op::Peek) => Some(decide(*word, now_ns, 0).0),
            (Reference::Model { make, model }, Op::Reset) => {
                *model = make();
                None
            }
            (Reference::Model { model, .. }, Op::Check(cost)) => Some(model.decide(now_ns, cost)),
            (Reference::Model { model, .. }, Op::Peek) => Some(model.decide(now_ns, 0)),
            (Reference::Log { limiter, .. }, Op::Reset) => {
                limiter.reset();
                None
            }
            (Reference::Log { limiter, clock }, Op::Check(cost)) => {
                clock.set(now_ns);
                Some(limiter.check_n(cost).unwrap())
            }
            (Reference::Log { limiter, clock }, Op::Peek) => {
                clock.set(now_ns);
                Some(limiter.peek())
            }
        }
    }
}

/// The limits the suite runs: every algorithm at ordinary quotas, inexact steps (rounded up to
/// whole microseconds), 1 µs steps, and large bursts.
pub fn cases() -> Vec<RedisLimit> {
    let q = |limit, period: Duration| Quota::new(limit, period).unwrap();
    let mut out = Vec::new();
    for kind in [AlgorithmKind::Gcra, AlgorithmKind::TokenBucket] {
        for quota in [
            q(10, Duration::from_secs(1)),
            q(10, Duration::from_secs(1)).with_burst(3).unwrap(),
            q(3, Duration::from_secs(1)), // 333,333.33 µs -> 333,334 µs
            q(7, Duration::from_millis(10)).with_burst(20).unwrap(), // 1428.57 µs -> 1429 µs
            q(1000, Duration::from_millis(1)), // 1 µs per unit
            q(1, Duration::from_micros(1)).with_burst(50).unwrap(),
            q(100, Duration::from_secs(60)).with_burst(5000).unwrap(), // in-memory bucket shift > 0
            q(1, Duration::from_secs(3600)).with_burst(2).unwrap(),
        ] {
            out.push(RedisLimit::new(kind, quota).unwrap());
        }
    }
    for kind in
        [AlgorithmKind::FixedWindow, AlgorithmKind::SlidingWindowCounter, AlgorithmKind::SlidingWindowLog]
    {
        for quota in [
            q(5, Duration::from_secs(1)),
            q(1, Duration::from_secs(1)),
            q(100, Duration::from_millis(10)),
            q(1, Duration::from_micros(1)),
            q(3, Duration::from_nanos(2_500)), // 2.5 µs -> 3 µs windows
            q(60, Duration::from_secs(60)),
            q(1000, Duration::from_secs(3600)),
        ] {
            out.push(RedisLimit::new(kind, quota).unwrap());
        }
    }
    out
}

/// Generates `n` (time in µs, op) pairs for `limit`.
pub fn sequence(limit: &RedisLimit, seed: u64, n: usize, backwards: bool) -> Vec<(u64, Op)> {
    let mut rng = Rng::new(seed);
    let capacity = limit.capacity();
    let step = limit.step_nanos() / MICROS;
    let (unit, full) = match limit.kind() {
        AlgorithmKind::Gcra | AlgorithmKind::TokenBucket => (step, step.saturating_mul(capacity)),
        _ => ((step / capacity).max(1), step),
    };
    let start = 1_000_000 + rng.upto(1_000_000);
    let mut t = start;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let dt = match rng.upto(99) {
            0..=29 => 0,
            30..=54 => rng.upto(unit),
            55..=69 => rng.upto(2 * unit),
            70..=79 => rng.upto(full / 10),
            80..=89 => rng.upto(full),
            90..=94 => rng.upto(3 * full),
            _ => {
                if backwards {
                    // A clock stepping back, by less than a second (within every in-memory
                    // algorithm's backwards tolerance).
                    let back = rng.upto(unit.min(full / 4).min(1_000_000));
                    t = t.saturating_sub(back).max(start);
                }
                0
            }
        };
        t = t.saturating_add(dt).min(kova_redis::MAX_TIME_MICROS - 1);
        let op = match rng.upto(99) {
            0..=2 => Op::Reset,
            3..=12 => Op::Peek,
            13..=69 => Op::Check(1),
            70..=89 => Op::Check(1 + rng.upto(capacity.min(5) - 1)),
            _ => Op::Check(1 + rng.upto(capacity - 1)),
        };
        out.push((t, op));
    }
    out
}

/// The sliding window counter's retry and reset times are the first instants at which the
/// weighted estimate fits (is zero): kova finds the first such nanosecond, the script the first
/// such microsecond. That is the in-memory value rounded up to a whole microsecond (every other
/// field, and every duration of the other algorithms, is a difference of whole-microsecond times
/// and comes out exact).
pub fn quantise_counter_times(d: Decision) -> Decision {
    let up = |nanos: u64| nanos.div_ceil(MICROS) * MICROS;
    if d.is_allowed() {
        return Decision::allowed(d.limit(), d.remaining(), up(d.reset_after_nanos()));
    }
    Decision::denied(d.limit(), d.remaining(), up(d.retry_after_nanos()), up(d.reset_after_nanos()))
}

/// Runs every case through `limiter` (which must read `clock`), one after the other; returns
/// the ops compared.
pub async fn run_suite(limiter: &RedisLimiter, clock: &ManualClock, tag: &str, ops_per_case: usize) -> usize {
    let mut compared = 0;
    let set_now = |ns| clock.set(ns);
    for (i, limit) in cases().iter().enumerate() {
        compared +=
            run_case(limiter, &set_now, &format!("{tag}:conformance:{i}"), limit, i as u64 + 1, ops_per_case)
                .await;
    }
    compared
}

tokio::task_local! {
    /// The time a [`TaskClock`] reads, per task.
    pub static TASK_NOW: std::cell::Cell<u64>;
}

/// A client clock that reads the current task's own time, so that cases running at the same
/// time on one limiter each keep their own simulated clock.
#[derive(Debug, Clone, Copy)]
pub struct TaskClock;

impl kova::Clock for TaskClock {
    fn now_nanos(&self) -> u64 {
        TASK_NOW.try_with(|now| now.get()).expect("a TaskClock read outside its task's scope")
    }
}

/// Runs every case at the same time through `limiter` (which must read a [`TaskClock`]), one
/// task per case, so that their checks wait together and go in batches; returns the ops
/// compared.
pub async fn run_suite_concurrently(limiter: &RedisLimiter, tag: &str, ops_per_case: usize) -> usize {
    let mut tasks = Vec::new();
    for (i, limit) in cases().into_iter().enumerate() {
        let (limiter, key) = (limiter.clone(), format!("{tag}:conformance:{i}"));
        let case = async move {
            let set_now = |ns| TASK_NOW.with(|now| now.set(ns));
            run_case(&limiter, &set_now, &key, &limit, i as u64 + 1, ops_per_case).await
        };
        tasks.push(tokio::spawn(TASK_NOW.scope(std::cell::Cell::new(0), case)));
    }
    let mut compared = 0;
    for task in tasks {
        compared += task.await.expect("a conformance case failed");
    }
    compared
}

/// One case: fresh key, one sequence, every decision compared. `set_now` sets the time the
/// limiter's client clock reads.
pub async fn run_case(
    limiter: &RedisLimiter,
    set_now: &(dyn Fn(u64) + Sync),
    key: &str,
    limit: &RedisLimit,
    seed: u64,
    n: usize,
) -> usize {
    let (mut reference, handles_backwards) = Reference::new(limit);
    limiter.reset(key, limit).await.unwrap();
    let mut compared = 0;
    for (i, (t_us, op)) in sequence(limit, seed, n, handles_backwards).into_iter().enumerate() {
        let now_ns = t_us * MICROS;
        set_now(now_ns);
        let mut expected = reference.apply(now_ns, op);
        if limit.kind() == AlgorithmKind::SlidingWindowCounter {
            expected = expected.map(quantise_counter_times);
        }
        let actual = match op {
            Op::Reset => {
                limiter.reset(key, limit).await.unwrap();
                None
            }
            Op::Check(cost) => Some(limiter.check_n(key, limit, cost).await.unwrap()),
            Op::Peek => Some(limiter.peek(key, limit).await.unwrap()),
        };
        assert_eq!(
            actual,
            expected,
            "{:?} {:?} (effective {:?}), seed {seed}, op #{i} {op:?} at {t_us} µs",
            limit.kind(),
            limit.quota(),
            limit.effective_quota()
        );
        compared += usize::from(expected.is_some());
    }
    compared
}
