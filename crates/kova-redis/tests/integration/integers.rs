//! Integer safety: every script at the largest quotas it accepts and at the latest times it
//! accepts (just below 2^52 µs), decision by decision against kova's exact reference models
//! (`kova::model`, plain u128 arithmetic). Lua numbers are doubles, exact only below 2^53: a
//! script that formed a larger intermediate would round and disagree with the model here.

use std::time::Duration;

use kova::model::{BucketModel, FixedWindowModel, SlidingCounterModel, SlidingLogModel};
use kova::{AlgorithmKind, Decision, ManualClock, Quota};
use kova_redis::{
    Error, RedisLimit, RedisLimitError, RedisLimiter, MAX_LOG_LIMIT, MAX_SPAN_MICROS, MAX_TIME_MICROS, MICROS,
};

use crate::conformance::{quantise_counter_times, Rng, TaskClock, TASK_NOW};
use crate::server::RedisServer;

/// An exact model of one limit, in nanoseconds.
enum Model {
    Bucket(BucketModel),
    Fixed(FixedWindowModel),
    Counter(SlidingCounterModel),
    Log(SlidingLogModel),
}

impl Model {
    fn new(kind: AlgorithmKind, a: u64, b: u64) -> Self {
        match kind {
            // (interval µs, burst)
            AlgorithmKind::Gcra | AlgorithmKind::TokenBucket => {
                Model::Bucket(BucketModel::with_quantum(a * MICROS, b, MICROS))
            }
            // (limit, period µs)
            AlgorithmKind::FixedWindow => Model::Fixed(FixedWindowModel::new(a, b * MICROS)),
            AlgorithmKind::SlidingWindowCounter => Model::Counter(SlidingCounterModel::new(a, b * MICROS)),
            AlgorithmKind::SlidingWindowLog => Model::Log(SlidingLogModel::new(a, b * MICROS)),
        }
    }

    fn decide(&mut self, now_ns: u64, cost: u64) -> Decision {
        match self {
            Model::Bucket(m) => m.decide(now_ns, cost),
            Model::Fixed(m) => m.decide(now_ns, cost),
            Model::Counter(m) => quantise_counter_times(m.decide(now_ns, cost)),
            Model::Log(m) => m.decide(now_ns, cost),
        }
    }
}

/// The largest quotas each script accepts: (kind, a, b) as in [`Model::new`], with the quota
/// that gives them.
fn edge_limits() -> Vec<(AlgorithmKind, u64, u64, Quota)> {
    let m = MAX_SPAN_MICROS;
    let bucket = |interval_us: u64, burst: u64| {
        Quota::from_nanos(1, interval_us * MICROS).unwrap().with_burst(burst).unwrap()
    };
    let window = |limit: u64, period_us: u64| Quota::from_nanos(limit, period_us * MICROS).unwrap();
    let mut out = Vec::new();
    for kind in [AlgorithmKind::Gcra, AlgorithmKind::TokenBucket] {
        // burst * interval = 2^52 µs, at both ends and in the middle.
        for (interval, burst) in [(1, m), (m, 1), (1 << 26, 1 << 26), (3, m / 3)] {
            out.push((kind, interval, burst, bucket(interval, burst)));
        }
    }
    // A quota admits at most one unit per nanosecond: limit <= period (µs) * 1000.
    for (limit, period) in [(m, m), (1, m), (m, m.div_ceil(1000)), (1000, 1), (1 << 30, 1 << 40)] {
        out.push((AlgorithmKind::FixedWindow, limit, period, window(limit, period)));
    }
    // limit * period = 2^52.
    for (limit, period) in [(1 << 26, 1 << 26), (1, m), (1 << 30, 1 << 22), (1000, 1), (1 << 12, 1 << 40)] {
        out.push((AlgorithmKind::SlidingWindowCounter, limit, period, window(limit, period)));
    }
    for (limit, period) in [(MAX_LOG_LIMIT, m), (MAX_LOG_LIMIT, 66), (1, m), (MAX_LOG_LIMIT, 1 << 20)] {
        out.push((AlgorithmKind::SlidingWindowLog, limit, period, window(limit, period)));
    }
    out
}

/// Times (µs, non-decreasing, all below 2^52) and costs for one limit: starting `back` before
/// the last accepted time, with steps from 0 to several spans, and costs up to the capacity.
fn ops(rng: &mut Rng, capacity: u64, span_us: u64, back: u64, n: usize, big_costs: bool) -> Vec<(u64, u64)> {
    let last = MAX_TIME_MICROS - 1;
    let mut t = last - back;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let dt = match rng.upto(9) {
            0..=2 => 0,
            3..=4 => rng.upto(16),
            5..=6 => rng.upto(span_us / 4),
            7 => rng.upto(span_us),
            _ => rng.upto(span_us.saturating_mul(2)),
        };
        t = t.saturating_add(dt).min(last);
        let cost = match rng.upto(9) {
            0..=4 => 1,
            5..=6 => 1 + rng.upto(capacity.min(8) - 1),
            7..=8 if big_costs => 1 + rng.upto(capacity - 1),
            _ => capacity,
        };
        out.push((t, cost));
    }
    out
}

/// Edge case `i`, from `back` before the last accepted time (`j` tells the two apart): a fresh
/// key, its ops decided by `limiter` (reading the time `set_now` sets) and by the exact model;
/// returns the decisions compared.
async fn run_edge_case(
    limiter: &RedisLimiter,
    set_now: &(dyn Fn(u64) + Sync),
    (i, j, back): Run,
    (kind, a, b, quota): Case,
) -> usize {
    let limit = RedisLimit::new(kind, quota).unwrap();
    let (capacity, span_us) = edge_span(kind, a, b);
    assert_eq!(limit.capacity(), capacity, "{kind} case {i}");
    // The log adds one sorted-set member per unit: keep its big costs rare.
    let big_costs = kind != AlgorithmKind::SlidingWindowLog;
    let n = if big_costs { 60 } else { 24 };
    let key = format!("integers:{i}:{j}");
    limiter.reset(&key, &limit).await.unwrap();
    let mut model = Model::new(kind, a, b);
    let mut rng = Rng::new(1000 + i as u64 * 2 + j as u64);
    let mut compared = 0;
    for (t, cost) in ops(&mut rng, capacity, span_us, back, n, big_costs) {
        set_now(t * MICROS);
        let actual = limiter.check_n(&key, &limit, cost).await.unwrap();
        let expected = model.decide(t * MICROS, cost);
        assert_eq!(actual, expected, "{kind} case {i} ({a}, {b}) at {t} µs, cost {cost}");
        compared += 1;
    }
    compared
}

/// (capacity, span in µs) of an edge case.
fn edge_span(kind: AlgorithmKind, a: u64, b: u64) -> (u64, u64) {
    match kind {
        AlgorithmKind::Gcra | AlgorithmKind::TokenBucket => (b, a * b),
        _ => (a, b),
    }
}

/// (case number, 0 or 1, how far before the last accepted time it starts).
type Run = (usize, usize, u64);
/// (kind, a, b, quota) as in [`edge_limits`].
type Case = (AlgorithmKind, u64, u64, Quota);

/// Every edge case from a whole span before the last accepted time and from just before it.
fn edge_runs() -> Vec<(Run, Case)> {
    let mut out = Vec::new();
    for (i, case @ (kind, a, b, _)) in edge_limits().into_iter().enumerate() {
        let span_us = edge_span(kind, a, b).1;
        for (j, back) in [span_us.min(MAX_TIME_MICROS - 1), 1_000].into_iter().enumerate() {
            out.push(((i, j, back), case));
        }
    }
    out
}

/// The same edges decided in batches: every run at once, one task each, on one limiter whose
/// client clock is each task's own, so that their checks wait together and go as batch scripts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_scripts_stay_exact_at_the_largest_quotas_and_times() {
    let Some(server) = RedisServer::start() else { return };
    let limiter = RedisLimiter::builder()
        .client_clock(TaskClock)
        .ttl_margin(Duration::MAX)
        .timeout(Duration::from_secs(10))
        .connect(&server.url())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for (run, case) in edge_runs() {
        let limiter = limiter.clone();
        let task = async move {
            let set_now = |ns| TASK_NOW.with(|now| now.set(ns));
            run_edge_case(&limiter, &set_now, run, case).await
        };
        tasks.push(tokio::spawn(TASK_NOW.scope(std::cell::Cell::new(0), task)));
    }
    let mut compared = 0;
    for task in tasks {
        compared += task.await.expect("an edge case failed");
    }
    let stats = limiter.batch_stats();
    eprintln!(
        "integer edges, batched: {compared} decisions identical to the exact models; {} batches, mean {:.1}",
        stats.batches,
        stats.mean_batch()
    );
    assert!(compared > 1_500, "only {compared} decisions compared");
    assert!(stats.batched_checks > compared as u64 / 4, "few checks were batched: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_stay_exact_at_the_largest_quotas_and_times() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    // The largest TTL margin too: TTLs are clamped below 2^53 µs in the script, decisions
    // unaffected.
    let limiter = crate::deterministic(&clock)
        .ttl_margin(Duration::MAX)
        .timeout(Duration::from_secs(10))
        .connect(&server.url())
        .await
        .unwrap();
    let mut compared = 0;
    let set_now = |ns| clock.set(ns);
    for (run, case) in edge_runs() {
        compared += run_edge_case(&limiter, &set_now, run, case).await;
    }
    eprintln!("integer edges: {compared} decisions identical to the exact models");
    assert!(compared > 1_500, "only {compared} decisions compared");

    // One past each edge is a typed error, never a rounded decision.
    let last = MAX_TIME_MICROS - 1;
    let over = |kind, quota| RedisLimit::new(kind, quota);
    let m = MAX_SPAN_MICROS;
    for kind in [AlgorithmKind::Gcra, AlgorithmKind::TokenBucket] {
        let q = Quota::from_nanos(1, MICROS).unwrap().with_burst(m + 1).unwrap();
        assert!(matches!(over(kind, q), Err(RedisLimitError::OutOfRange { value, .. }) if value == m + 1));
    }
    let q = Quota::from_nanos(m + 1, m * MICROS).unwrap();
    assert!(matches!(
        over(AlgorithmKind::FixedWindow, q),
        Err(RedisLimitError::OutOfRange { field: "limit", .. })
    ));
    let q = Quota::from_nanos(1 << 26, ((1 << 26) + 1) * MICROS).unwrap();
    assert!(matches!(
        over(AlgorithmKind::SlidingWindowCounter, q),
        Err(RedisLimitError::OutOfRange { field: "limit * period (µs)", .. })
    ));
    let q = Quota::from_nanos(MAX_LOG_LIMIT + 1, 66 * MICROS).unwrap();
    assert!(matches!(over(AlgorithmKind::SlidingWindowLog, q), Err(RedisLimitError::OutOfRange { .. })));
    let q = Quota::from_nanos(1, (m + 1) * MICROS).unwrap();
    for kind in
        [AlgorithmKind::FixedWindow, AlgorithmKind::SlidingWindowCounter, AlgorithmKind::SlidingWindowLog]
    {
        assert!(matches!(over(kind, q), Err(RedisLimitError::OutOfRange { .. })), "{kind}");
    }
    let limit = RedisLimit::gcra(Quota::per_second(1).unwrap()).unwrap();
    clock.set((last + 1) * MICROS);
    assert!(matches!(
        limiter.check("integers:late", &limit).await,
        Err(Error::TimeOutOfRange { micros, max }) if micros == last + 1 && max == last
    ));
    clock.set(u64::MAX);
    assert!(matches!(limiter.check("integers:late", &limit).await, Err(Error::TimeOutOfRange { .. })));
}

/// The scripts' integer division (the prelude's `idiv`, one rounded quotient) against Rust's, at
/// the dividends where a rounded quotient could reach the next integer: just below 2^53, and
/// one below, at and above multiples of the divisor, for small, odd, power-of-two-adjacent and
/// random divisors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripts_integer_division_is_exact_below_2_pow_53() {
    let Some(server) = RedisServer::start() else { return };
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(concat!(
        include_str!("../../scripts/prelude.lua"),
        "\nlocal out = {}\n",
        "for i = 1, #ARGV, 2 do out[#out + 1] = fmt(idiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]))) end\n",
        "return out\n"
    ));
    const TOP: u64 = (1 << 53) - 1;
    let mut divisors = vec![1, 2, 3, 7, 10, 999, 1000, 1001, (1 << 26) - 1, (1 << 26) + 1, 3u64.pow(20)];
    divisors.extend([(1 << 52) - 1, 1 << 52, (1 << 52) + 1, TOP - 1, TOP]);
    let mut rng = Rng::new(53);
    divisors.extend((0..200).map(|_| 1 + rng.next() % TOP));
    divisors.extend((0..200).map(|_| 1 + rng.next() % (1 << 27)));
    let mut pairs = Vec::new();
    for &b in &divisors {
        let top_multiple = TOP / b * b;
        for a in
            [TOP, TOP - 1, top_multiple, top_multiple - 1, top_multiple.saturating_sub(b) + 1, b, b - 1, 0]
        {
            pairs.push((a, b));
        }
        pairs.push((rng.next() % (TOP + 1), b));
    }
    for chunk in pairs.chunks(500) {
        let mut invocation = script.prepare_invoke();
        for &(a, b) in chunk {
            invocation.arg(a).arg(b);
        }
        let got: Vec<String> = invocation.invoke_async(&mut conn).await.unwrap();
        for (&(a, b), got) in chunk.iter().zip(&got) {
            assert_eq!(got, &(a / b).to_string(), "idiv({a}, {b})");
        }
    }
}
