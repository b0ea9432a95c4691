//! Bad input: hostile keys, zero and huge quotas, costs above the burst, times out of range,
//! and decisions at the edges of the documented ranges.

use std::collections::HashSet;
use std::time::Duration;

use kova::model::BucketModel;
use kova::{AlgorithmKind, CheckError, Decision, Gcra, ManualClock, Quota, QuotaError, WordAlgorithm};
use kova_redis::{
    Error, RedisLimit, RedisLimitError, RedisLimiter, MAX_LOG_LIMIT, MAX_SPAN_MICROS, MAX_TIME_MICROS, MICROS,
};

use crate::server::RedisServer;

pub fn hostile_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b" ".to_vec(),
        b"{".to_vec(),
        b"}".to_vec(),
        b"}{".to_vec(),
        b"{}".to_vec(),
        b"{a}".to_vec(),
        b"a".to_vec(),
        b"%7Ba%7D".to_vec(),
        b"=a".to_vec(),
        b"kova:{=a}:gcra".to_vec(),
        b"a}:gcra".to_vec(),
        b"with space\r\n*1\r\n$4\r\nPING\r\n".to_vec(),
        "ключ 🔑".as_bytes().to_vec(),
        vec![0, 0, 0],
        vec![0xff; 7],
        vec![b'x'; 128],
        vec![b'x'; 129],
        vec![b'{'; 10_000],
        vec![b'k'; 1 << 20],
    ];
    keys.extend((0..=255u8).step_by(17).map(|b| vec![b'k', b]));
    keys
}

/// Each hostile key has its own state (one unit each, then denied), none touches another's, and
/// every Redis key holds exactly one hash tag.
pub async fn hostile_keys_are_isolated(limiter: &RedisLimiter) {
    let limit = RedisLimit::gcra(Quota::per_hour(1).unwrap()).unwrap();
    let keys = hostile_keys();
    for key in &keys {
        limiter.reset(key, &limit).await.unwrap();
    }
    for key in &keys {
        let first = limiter.check(key, &limit).await.unwrap();
        assert!(
            first.is_allowed(),
            "{:?}: first check denied (shares state with another key?)",
            &key[..key.len().min(40)]
        );
    }
    for key in &keys {
        let second = limiter.check(key, &limit).await.unwrap();
        assert!(!second.is_allowed(), "{:?}: second check allowed", &key[..key.len().min(40)]);
    }
    let names: HashSet<Vec<u8>> = keys.iter().map(|k| limiter.redis_key(k, &limit)).collect();
    assert_eq!(names.len(), keys.iter().collect::<HashSet<_>>().len());
    for name in &names {
        assert!(name.len() <= 200, "a Redis key of {} bytes", name.len());
        let braces: Vec<u8> = name.iter().copied().filter(|b| *b == b'{' || *b == b'}').collect();
        assert_eq!(braces, b"{}", "{:?}", String::from_utf8_lossy(name));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_keys_single_node() {
    let Some(server) = RedisServer::start() else { return };
    let limiter =
        RedisLimiter::builder().timeout(Duration::from_secs(5)).connect(&server.url()).await.unwrap();
    hostile_keys_are_isolated(&limiter).await;
    // Exactly the keys the limiter named exist in Redis, nothing else.
    let dbsize: usize = server.cli(&["DBSIZE"]).trim().parse().unwrap();
    assert_eq!(dbsize, hostile_keys().iter().collect::<HashSet<_>>().len());
}

#[test]
fn zero_and_huge_quotas_are_typed_errors() {
    assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroLimit));
    assert_eq!(Quota::per_second(5).unwrap().with_burst(0), Err(QuotaError::ZeroBurst));
    assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
    // 1 ns periods: below the scripts' microsecond.
    let one_ns = Quota::from_nanos(1, 1).unwrap();
    for kind in AlgorithmKind::ALL {
        assert!(
            matches!(RedisLimit::new(kind, one_ns), Err(RedisLimitError::TooFine { nanos: 1, .. })),
            "{kind}"
        );
    }
    let huge_burst = Quota::per_second(1).unwrap().with_burst(u64::MAX).unwrap();
    for kind in [AlgorithmKind::Gcra, AlgorithmKind::TokenBucket] {
        assert!(
            matches!(RedisLimit::new(kind, huge_burst), Err(RedisLimitError::OutOfRange { .. })),
            "{kind}"
        );
    }
    let huge_limit = Quota::from_nanos(u64::MAX / 1000, u64::MAX).unwrap();
    for kind in
        [AlgorithmKind::FixedWindow, AlgorithmKind::SlidingWindowCounter, AlgorithmKind::SlidingWindowLog]
    {
        assert!(
            matches!(RedisLimit::new(kind, huge_limit), Err(RedisLimitError::OutOfRange { .. })),
            "{kind}"
        );
    }
    let windowed_burst = Quota::per_second(5).unwrap().with_burst(6).unwrap();
    assert!(matches!(
        RedisLimit::fixed_window(windowed_burst),
        Err(RedisLimitError::Quota(QuotaError::BurstUnsupported { .. }))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_above_capacity_and_times_out_of_range_are_typed_errors() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(1_000_000_000);
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    for kind in AlgorithmKind::ALL {
        let limit = RedisLimit::new(kind, Quota::per_second(10).unwrap()).unwrap();
        for cost in [11, 1 << 53, u64::MAX] {
            match limiter.check_n("k", &limit, cost).await {
                Err(Error::Cost(CheckError::CostExceedsCapacity { cost: c, capacity: 10 })) => {
                    assert_eq!(c, cost)
                }
                other => panic!("{kind} cost {cost}: {other:?}"),
            }
        }
        // Exactly the capacity is fine.
        assert!(limiter.check_n("k", &limit, 10).await.unwrap().is_allowed());
    }
    let limit = RedisLimit::gcra(Quota::per_second(10).unwrap()).unwrap();
    clock.set(MAX_TIME_MICROS * MICROS);
    assert!(matches!(
        limiter.check("k", &limit).await,
        Err(Error::TimeOutOfRange { micros, .. }) if micros == MAX_TIME_MICROS
    ));
    clock.set((MAX_TIME_MICROS - 1) * MICROS);
    assert!(limiter.check("k", &limit).await.unwrap().is_allowed());
    // A bad prefix is a typed error too.
    assert!(matches!(
        RedisLimiter::builder().prefix("a{b}").open(&server.url()),
        Err(Error::Prefix(kova_redis::PrefixError::Brace))
    ));
}

/// Decisions at the largest accepted spans, against the in-memory algorithm or exact model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_at_the_edges_of_the_ranges() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = crate::deterministic(&clock)
        .ttl_margin(Duration::ZERO)
        .timeout(Duration::from_secs(10))
        .connect(&server.url())
        .await
        .unwrap();
    let t0 = 1_700_000_000_000_000u64; // µs: late 2023, as Redis TIME would read
                                       // GCRA and the token bucket at burst * interval = 2^52 µs, 1 µs per unit.
    let quota = Quota::from_nanos(1, MICROS).unwrap().with_burst(MAX_SPAN_MICROS).unwrap();
    let gcra = <Gcra as WordAlgorithm>::from_quota(quota).unwrap();
    let ops: [(u64, u64); 6] =
        [(0, MAX_SPAN_MICROS - 1), (0, 2), (0, 1), (1, 1), (5, 0), (1 << 40, MAX_SPAN_MICROS)];
    for kind in [AlgorithmKind::Gcra, AlgorithmKind::TokenBucket] {
        let limit = RedisLimit::new(kind, quota).unwrap();
        limiter.reset("edge", &limit).await.unwrap();
        let (mut word, mut model) =
            (gcra.fresh_word(), BucketModel::with_quantum(MICROS, MAX_SPAN_MICROS, MICROS));
        let mut t = t0;
        for (dt, cost) in ops {
            t += dt;
            clock.set(t * MICROS);
            let actual = limiter.check_n("edge", &limit, cost).await.unwrap();
            let (expected, new) = gcra.decide(word, t * MICROS, cost);
            word = new;
            assert_eq!(actual, expected, "{kind} at +{} µs cost {cost}", t - t0);
            assert_eq!(actual, model.decide(t * MICROS, cost), "{kind} vs model");
        }
    }
    // Fixed window with the largest limit, counter at limit * period = 2^52, log at 2^16.
    // One window of 2^52 µs (142 years) holding 2^52 units.
    let fw = RedisLimit::fixed_window(Quota::from_nanos(MAX_SPAN_MICROS, MAX_SPAN_MICROS * MICROS).unwrap())
        .unwrap();
    clock.set(t0 * MICROS);
    limiter.reset("edge", &fw).await.unwrap();
    let d = limiter.check_n("edge", &fw, MAX_SPAN_MICROS - 1).await.unwrap();
    assert_eq!(d.remaining(), 1);
    assert!(limiter.check("edge", &fw).await.unwrap().is_allowed());
    let denied = limiter.check("edge", &fw).await.unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.retry_after_nanos(), (MAX_SPAN_MICROS - t0) * MICROS);

    let period_us = 1u64 << 26;
    let swc =
        RedisLimit::sliding_window_counter(Quota::from_nanos(1 << 26, period_us * MICROS).unwrap()).unwrap();
    let algo = <kova::SlidingWindowCounter as WordAlgorithm>::from_quota(swc.effective_quota());
    // The in-memory counter holds at most 2^20 - 1 per window: compare with the model instead.
    assert!(algo.is_err());
    let mut model = kova::model::SlidingCounterModel::new(1 << 26, period_us * MICROS);
    limiter.reset("edge", &swc).await.unwrap();
    let base = (t0 / period_us + 1) * period_us; // a window start, so the model's history is aligned
    let mut t = base;
    for (dt, cost) in [
        (0u64, (1u64 << 26) - 1),
        (period_us / 2, 1 << 25),
        (period_us / 2, 1),
        (period_us / 4, 1 << 24),
        (0, 1),
    ] {
        t += dt;
        clock.set(t * MICROS);
        let actual = limiter.check_n("edge", &swc, cost).await.unwrap();
        let expected: Decision = crate::conformance::quantise_counter_times(model.decide(t * MICROS, cost));
        assert_eq!(actual, expected, "counter at +{} µs cost {cost}", t - base);
    }

    let log = RedisLimit::sliding_window_log(Quota::per_second(MAX_LOG_LIMIT).unwrap()).unwrap();
    let mut model = kova::model::SlidingLogModel::new(MAX_LOG_LIMIT, 1_000_000 * MICROS);
    limiter.reset("edge", &log).await.unwrap();
    let mut t = t0;
    for (dt, cost) in [(0u64, MAX_LOG_LIMIT), (1, 1), (999_999, MAX_LOG_LIMIT), (0, 1)] {
        t += dt;
        clock.set(t * MICROS);
        let actual = limiter.check_n("edge", &log, cost).await.unwrap();
        assert_eq!(actual, model.decide(t * MICROS, cost), "log at +{} µs cost {cost}", t - t0);
    }
    let members: u64 = server
        .cli(&["ZCARD", std::str::from_utf8(&limiter.redis_key("edge", &log)).unwrap()])
        .trim()
        .parse()
        .unwrap();
    assert_eq!(members, MAX_LOG_LIMIT);
}
