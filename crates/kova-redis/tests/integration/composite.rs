//! Composites: several limits on one key in one script run, decision by decision against kova's
//! in-memory `Limits` (one algorithm) and against a sequential composite of kova's in-memory
//! limiters (mixed algorithms, the sliding window log included), on the same manual clock.

use std::time::Duration;

use kova::limits::{LimitsDecision, LimitsError, MAX_LIMITS};
use kova::{
    AlgorithmKind, CheckError, Decision, FixedWindow, Gcra, ManualClock, Quota, RateLimiter,
    SlidingWindowCounter, SlidingWindowLog, TokenBucket,
};
use kova_redis::{Error, Limits, RedisLimit, RedisLimiter, MICROS};

use crate::conformance::{quantise_counter_times, Rng};
use crate::server::RedisServer;

/// One in-memory limiter, whatever its algorithm: check (cost 0 = peek).
type Check = Box<dyn Fn(u64) -> Decision + Send + Sync>;

fn in_memory(limit: &RedisLimit, clock: &ManualClock) -> Check {
    fn boxed<A: kova::Algorithm + Send + Sync + 'static>(q: Quota, clock: &ManualClock) -> Check
    where
        A::Cell: Send + Sync,
    {
        let limiter = RateLimiter::<A, _>::with_clock(q, clock.clone()).unwrap();
        Box::new(move |cost| limiter.check_n(cost).unwrap())
    }
    let q = limit.effective_quota();
    let check = match limit.kind() {
        AlgorithmKind::Gcra => boxed::<Gcra>(q, clock),
        AlgorithmKind::TokenBucket => boxed::<TokenBucket>(q, clock),
        AlgorithmKind::FixedWindow => boxed::<FixedWindow>(q, clock),
        AlgorithmKind::SlidingWindowCounter => boxed::<SlidingWindowCounter>(q, clock),
        AlgorithmKind::SlidingWindowLog => boxed::<SlidingWindowLog>(q, clock),
    };
    if limit.kind() == AlgorithmKind::SlidingWindowCounter {
        Box::new(move |cost| quantise_counter_times(check(cost)))
    } else {
        check
    }
}

/// The sequential composite (kova's `decide_all`) over in-memory limiters of any algorithms:
/// every limit peeked; if the cost fits them all, each is charged; otherwise the denying ones
/// report their denial and the others their peek.
fn sequential(limiters: &[Check], cost: u64) -> LimitsDecision {
    let peeks: Vec<Decision> = limiters.iter().map(|check| check(0)).collect();
    if cost == 0 {
        return LimitsDecision::from_decisions(&peeks, true).unwrap();
    }
    let fits = peeks.iter().all(|p| p.remaining() >= cost);
    let each: Vec<Decision> = limiters
        .iter()
        .zip(&peeks)
        .map(|(check, peek)| if fits || peek.remaining() < cost { check(cost) } else { *peek })
        .collect();
    assert_eq!(each.iter().all(Decision::is_allowed), fits, "the in-memory side disagrees with itself");
    LimitsDecision::from_decisions(&each, fits).unwrap()
}

/// The same answer, with the sliding window counter's retry rounded up to a microsecond.
fn quantised(d: LimitsDecision) -> (bool, usize, Vec<Decision>) {
    (d.is_allowed(), d.decided_by(), d.limit_decisions().iter().map(|&d| quantise_counter_times(d)).collect())
}

fn q(limit: u64, period: Duration) -> Quota {
    Quota::new(limit, period).unwrap()
}

/// Composites of one algorithm (compared with kova's `Limits`) and mixed ones.
fn same_kind_cases() -> Vec<Vec<RedisLimit>> {
    let (s, m, h) = (Duration::from_secs(1), Duration::from_secs(60), Duration::from_secs(3600));
    let gcra = |quota| RedisLimit::gcra(quota).unwrap();
    let fixed = |quota| RedisLimit::fixed_window(quota).unwrap();
    let counter = |quota| RedisLimit::sliding_window_counter(quota).unwrap();
    let per = |nanos, burst| Quota::from_nanos(1, nanos).unwrap().with_burst(burst).unwrap();
    let bucket = |quota| RedisLimit::token_bucket(quota).unwrap();
    vec![
        vec![gcra(q(10, s).with_burst(5).unwrap())],
        vec![gcra(q(10, s).with_burst(5).unwrap()), gcra(q(30, m))],
        vec![gcra(q(10, s).with_burst(8).unwrap()), gcra(q(20, m)), gcra(q(3, Duration::from_millis(10)))],
        vec![gcra(q(20, s)), gcra(q(40, m)), gcra(q(60, h)), gcra(q(3, s).with_burst(10).unwrap())],
        vec![fixed(q(5, s)), fixed(q(12, m))],
        vec![counter(q(5, s)), counter(q(12, m)), counter(q(30, h))],
        vec![bucket(per(1_000, 20)), bucket(per(2_000, 7))],
    ]
}

fn mixed_cases() -> Vec<Vec<RedisLimit>> {
    let s = Duration::from_secs(1);
    vec![
        vec![
            RedisLimit::gcra(q(10, s).with_burst(6).unwrap()).unwrap(),
            RedisLimit::sliding_window_log(q(15, Duration::from_secs(5))).unwrap(),
        ],
        vec![
            RedisLimit::token_bucket(Quota::from_nanos(1, 2_000).unwrap().with_burst(9).unwrap()).unwrap(),
            RedisLimit::fixed_window(q(40, Duration::from_millis(100))).unwrap(),
            RedisLimit::sliding_window_counter(q(25, Duration::from_millis(50))).unwrap(),
            RedisLimit::gcra(q(100, s)).unwrap(),
        ],
    ]
}

async fn run(
    limiter: &RedisLimiter,
    clock: &ManualClock,
    key: &str,
    limits: &[RedisLimit],
    seed: u64,
    n: usize,
) -> usize {
    let redis_limits = Limits::new(limits.iter().copied()).unwrap();
    let each: Vec<Check> = limits.iter().map(|l| in_memory(l, clock)).collect();
    let kind = limits[0].kind();
    let same_kind = limits.iter().all(|l| l.kind() == kind);
    let reference: Option<Box<dyn Fn(u64) -> LimitsDecision + Send + Sync>> = if same_kind {
        let quotas: Vec<Quota> = limits.iter().map(RedisLimit::effective_quota).collect();
        macro_rules! of {
            ($w:ty) => {{
                let l = kova::limits::Limits::<$w, _>::with_clock(quotas, clock.clone()).unwrap();
                Some(Box::new(move |cost| l.check_n(cost).unwrap())
                    as Box<dyn Fn(u64) -> LimitsDecision + Send + Sync>)
            }};
        }
        match kind {
            AlgorithmKind::Gcra => of!(Gcra),
            AlgorithmKind::TokenBucket => of!(TokenBucket),
            AlgorithmKind::FixedWindow => of!(FixedWindow),
            AlgorithmKind::SlidingWindowCounter => of!(SlidingWindowCounter),
            AlgorithmKind::SlidingWindowLog => None,
        }
    } else {
        None
    };
    redis_reset(limiter, key, &redis_limits).await;
    let capacity = redis_limits.capacity();
    let unit = limits.iter().map(|l| l.step_nanos() / MICROS / l.capacity().max(1)).min().unwrap().max(1);
    let mut rng = Rng::new(seed);
    let mut t = 2_000_000 + rng.upto(1_000_000);
    for i in 0..n {
        t += match rng.upto(9) {
            0..=3 => 0,
            4..=7 => rng.upto(unit * 2),
            8 => rng.upto(unit * capacity * 4),
            _ => rng.upto(limits.iter().map(|l| l.step_nanos() / MICROS).max().unwrap()),
        };
        clock.set(t * MICROS);
        let cost = match rng.upto(9) {
            0 => 0,
            1..=6 => 1,
            _ => 1 + rng.upto(capacity - 1),
        };
        let actual = limiter.check_limits_n(key, &redis_limits, cost).await.unwrap();
        let expected = sequential(&each, cost);
        let what = format!("{limits:?}, seed {seed}, op #{i} cost {cost} at {t} µs");
        assert_eq!(quantised(actual), quantised(expected), "against the sequential composite: {what}");
        if let Some(reference) = &reference {
            assert_eq!(quantised(actual), quantised(reference(cost)), "against kova::limits::Limits: {what}");
        }
        assert!(actual.limit_decisions().iter().all(|d| d.fallback().is_none()));
    }
    n
}

async fn redis_reset(limiter: &RedisLimiter, key: &str, limits: &Limits) {
    limiter.reset_limits(key, limits).await.unwrap();
}

/// Every composite case through `limiter` (which must read `clock`); returns the decisions
/// compared.
pub async fn run_suite(
    limiter: &RedisLimiter,
    clock: &ManualClock,
    tag: &str,
    seeds: u64,
    n: usize,
) -> usize {
    let mut compared = 0;
    for (i, limits) in same_kind_cases().into_iter().chain(mixed_cases()).enumerate() {
        for seed in 0..seeds {
            let key = format!("{tag}:composite:{i}:{seed}");
            compared += run(limiter, clock, &key, &limits, 10 * i as u64 + seed, n).await;
        }
    }
    compared
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composites_match_kova_limits_decision_by_decision() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    let compared = run_suite(&limiter, &clock, "single", 3, 200).await;
    eprintln!("composites: {compared} decisions identical to the in-memory composites");
    assert_eq!(compared, 9 * 3 * 200);
}

/// One script run over keys that share a hash tag: a denial by the last limit leaves the first
/// untouched, in Redis itself (not only in the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_takes_nothing_from_any_limit() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    clock.set(10_000_000 * MICROS);
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    let per_second = RedisLimit::gcra(q(10, Duration::from_secs(1))).unwrap();
    let per_hour = RedisLimit::fixed_window(q(3, Duration::from_secs(3600))).unwrap();
    let limits = Limits::new([per_second, per_hour]).unwrap();
    let d = limiter.check_limits_n("user:1", &limits, 3).await.unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.decided_by(), 1); // the hour's 0 left
    assert_eq!(d.limit_decisions()[0].remaining(), 7);
    let before = limiter.peek_limits("user:1", &limits).await.unwrap();
    let denied = limiter.check_limits_n("user:1", &limits, 2).await.unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.decided_by(), 1);
    assert_eq!(denied.decision().retry_after(), d.limit_decisions()[1].reset_after());
    // The per-second limit admits 2 but reports its peek, and Redis holds what it held.
    assert_eq!(denied.limit_decisions()[0], before.limit_decisions()[0]);
    assert_eq!(limiter.peek_limits("user:1", &limits).await.unwrap(), before);
    // Single limits on the same key keep their own state.
    assert_eq!(limiter.peek("user:1", &per_second).await.unwrap().remaining(), 10);
    // Bad input: typed errors, before any call.
    assert!(matches!(
        limiter.check_limits_n("user:1", &limits, 4).await,
        Err(Error::Cost(CheckError::CostExceedsCapacity { cost: 4, capacity: 3 }))
    ));
    assert_eq!(Limits::new([]).unwrap_err(), LimitsError::Empty);
    assert_eq!(
        Limits::new([per_second; MAX_LIMITS + 1]).unwrap_err(),
        LimitsError::TooMany { count: MAX_LIMITS + 1, max: MAX_LIMITS }
    );
}

/// Checks racing on one composite: the script is atomic, so exactly what the sequential
/// composite admits is admitted, and every limit is charged for exactly those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_checks_charge_every_limit_together() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    clock.set(10_000_000 * MICROS);
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    let limits = Limits::new([
        RedisLimit::gcra(q(10, Duration::from_secs(1)).with_burst(25).unwrap()).unwrap(),
        RedisLimit::fixed_window(q(100, Duration::from_secs(3600))).unwrap(),
        RedisLimit::sliding_window_log(q(40, Duration::from_secs(60))).unwrap(),
    ])
    .unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (limiter, limits) = (limiter.clone(), limits.clone());
            let cost = 1 + i % 2;
            tokio::spawn(
                async move { (cost, limiter.check_limits_n("racing", &limits, cost).await.unwrap()) },
            )
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        let (cost, d) = task.await.unwrap();
        if d.is_allowed() {
            admitted += cost;
        }
    }
    let peek = limiter.peek_limits("racing", &limits).await.unwrap();
    let used: Vec<u64> = peek.limit_decisions().iter().map(|d| d.limit() - d.remaining()).collect();
    // The burst of 25 runs out first; the other two were charged the same units, no more.
    assert!(used[0] >= 24 && used[0] <= 25, "{used:?}");
    assert_eq!(used, vec![admitted; 3], "admitted {admitted}");
}
