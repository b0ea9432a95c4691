//! Integer safety of the settling, reservation and composite scripts: at the largest quotas,
//! overdrafts and times each accepts, decision by decision against kova's in-memory GCRA (exact
//! in u64 nanoseconds at these sizes), exact arithmetic for the other algorithms' refunds and
//! charges, and kova's exact models for composites. A script that formed a number above 2^53
//! would round and disagree here.

use std::time::Duration;

use kova::limits::LimitsDecision;
use kova::model::{BucketModel, FixedWindowModel, SlidingCounterModel, SlidingLogModel};
use kova::reservation::ReserveError;
use kova::{AlgorithmKind, Decision, Gcra, ManualClock, Quota, RateLimiter};
use kova_redis::{
    Error, Limits, RedisLimit, RedisLimitError, MAX_LOG_LIMIT, MAX_SPAN_MICROS, MAX_TIME_MICROS, MICROS,
};

use crate::conformance::{quantise_counter_times, Rng};
use crate::server::RedisServer;

const M: u64 = MAX_SPAN_MICROS;
const LAST: u64 = MAX_TIME_MICROS - 1;

fn bucket(interval_us: u64, burst: u64) -> Quota {
    Quota::from_nanos(1, interval_us * MICROS).unwrap().with_burst(burst).unwrap()
}

async fn limiter(server: &RedisServer, clock: &ManualClock) -> kova_redis::RedisLimiter {
    crate::deterministic(clock)
        .ttl_margin(Duration::MAX)
        .timeout(Duration::from_secs(10))
        .connect(&server.url())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_and_reservations_stay_exact_at_the_largest_debts_and_times() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = limiter(&server, &clock).await;
    let mut compared = 0;
    // (interval µs, burst, overdraft) with (burst + overdraft) * interval = 2^52 µs.
    for (i, (interval, burst, overdraft)) in
        [(1, M / 2, M / 2), (1 << 26, 1 << 25, 1 << 25), (M, 1, 0), (3, M / 6, M / 3 - M / 6), (1, 1, M - 1)]
            .into_iter()
            .enumerate()
    {
        let limit = RedisLimit::gcra(bucket(interval, burst).with_overdraft(overdraft)).unwrap();
        let memory = RateLimiter::<Gcra, _>::with_clock(limit.effective_quota(), clock.clone()).unwrap();
        let key = format!("integers-settle:{i}");
        limiter.reset(&key, &limit).await.unwrap();
        let span = burst * interval;
        let debt = burst + overdraft;
        let mut rng = Rng::new(7000 + i as u64);
        let mut t = LAST - span.min(LAST / 2);
        let mut held = Vec::new();
        for op in 0..80 {
            t = (t + match rng.upto(4) {
                0..=1 => 0,
                2 => rng.upto(16),
                3 => rng.upto(span / 2),
                _ => rng.upto(span.saturating_mul(2)),
            })
            .min(LAST);
            clock.set(t * MICROS);
            let what = format!("case {i} ({interval}, {burst}, {overdraft}) op {op} at {t} µs");
            let big = |rng: &mut Rng, max: u64| if rng.upto(1) == 0 { max } else { rng.upto(max) };
            match rng.upto(6) {
                0 => {
                    let cost = 1 + big(&mut rng, burst - 1);
                    let expected = memory.check_n(cost).unwrap();
                    assert_eq!(limiter.check_n(&key, &limit, cost).await.unwrap(), expected, "check: {what}");
                }
                1 => {
                    let c = big(&mut rng, debt + 2);
                    assert_eq!(
                        limiter.charge(&key, &limit, c).await.unwrap(),
                        memory.charge(c),
                        "charge: {what}"
                    );
                }
                2 => {
                    let (e, a) = (big(&mut rng, debt), big(&mut rng, 2 * debt));
                    assert_eq!(
                        limiter.settle(&key, &limit, e, a).await.unwrap(),
                        memory.settle(e, a),
                        "{what}"
                    );
                }
                3 => {
                    let back = big(&mut rng, u64::MAX / 2);
                    memory.refund(back);
                    limiter.refund(&key, &limit, back).await.unwrap();
                }
                4 | 5 => {
                    // Within the longest delay the scripts accept (2^52 µs less the span).
                    let cost = 1 + big(&mut rng, burst - 1);
                    let max_delay = Duration::from_micros(big(&mut rng, M - span));
                    match (
                        memory.reserve_n_within(cost, max_delay),
                        limiter.reserve_n_within(&key, &limit, cost, max_delay).await,
                    ) {
                        (Ok(m), Ok(r)) => {
                            assert_eq!(
                                (r.delay(), r.ready_at_micros() * MICROS),
                                (m.delay(), m.ready_at_nanos()),
                                "{what}"
                            );
                            held.push((m, r));
                        }
                        (Err(m), Err(Error::Reserve(r))) => assert_eq!(r, m, "{what}"),
                        (m, r) => panic!("reserve: {what}: memory {m:?}, redis {r:?}"),
                    }
                }
                _ => {
                    if let Some((m, r)) = held.pop() {
                        assert_eq!(r.cancel().await.unwrap(), m.cancel(), "cancel: {what}");
                    }
                }
            }
            assert_eq!(limiter.peek(&key, &limit).await.unwrap(), memory.peek(), "state: {what}");
            compared += 1;
        }
        // Past the longest delay accepted, a reservation is refused and takes nothing.
        clock.set(LAST * MICROS);
        let before = limiter.peek(&key, &limit).await.unwrap();
        // The deepest debt (within an interval of 2^52 µs): past the span plus the longest delay.
        limiter.charge(&key, &limit, debt).await.unwrap();
        let full = limiter.peek(&key, &limit).await.unwrap();
        assert!(
            full.reset_after_nanos() + interval * MICROS > debt * interval * MICROS,
            "case {i}: {full:?}"
        );
        assert!(matches!(
            limiter.reserve_n(&key, &limit, burst).await,
            Err(Error::Reserve(ReserveError::DelayTooLong { max_delay: Duration::MAX, .. }))
        ));
        assert_eq!(limiter.peek(&key, &limit).await.unwrap(), full);
        assert!(before.reset_after_nanos() <= M * MICROS);
    }
    eprintln!("integer edges of settling and reservations: {compared} operations identical to kova's GCRA");
    assert_eq!(compared, 5 * 80);
    // One past the debt edge is a typed error.
    assert!(matches!(
        RedisLimit::gcra(bucket(1, M / 2).with_overdraft(M / 2 + 1)),
        Err(RedisLimitError::OutOfRange { field: "(burst + overdraft) * interval (µs)", .. })
    ));
}

/// The other algorithms' refunds and charges at their largest quotas, at one instant (no time
/// passes, so what a refund or charge does is plain integer arithmetic on `remaining`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_and_charges_stay_exact_at_the_largest_quotas() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = limiter(&server, &clock).await;
    let window = |limit: u64, period_us: u64| Quota::from_nanos(limit, period_us * MICROS).unwrap();
    let cases = [
        RedisLimit::token_bucket(bucket(1, M)).unwrap(),
        RedisLimit::token_bucket(bucket(3, M / 3)).unwrap(),
        RedisLimit::fixed_window(window(M, M)).unwrap(),
        RedisLimit::sliding_window_counter(window(1 << 26, 1 << 26)).unwrap(),
        RedisLimit::sliding_window_counter(window(1 << 30, 1 << 22)).unwrap(),
    ];
    for (i, limit) in cases.iter().enumerate() {
        let key = format!("integers-refund:{i}");
        limiter.reset(&key, limit).await.unwrap();
        let capacity = limit.capacity();
        let mut rng = Rng::new(9000 + i as u64);
        // Late, at the start of a window (a sliding counter then weighs no previous window).
        let step = limit.step_nanos() / MICROS;
        let t = match limit.kind() {
            AlgorithmKind::TokenBucket => LAST,
            _ => (LAST / step) * step,
        };
        clock.set(t * MICROS);
        let mut remaining = capacity;
        for op in 0..40 {
            let what = format!("{:?} {:?} op {op}", limit.kind(), limit.quota());
            let n = if rng.upto(1) == 0 { capacity - rng.upto(3).min(capacity) } else { rng.upto(capacity) };
            match rng.upto(2) {
                0 if n > 0 => {
                    let d = limiter.check_n(&key, limit, n).await.unwrap();
                    assert_eq!(d.is_allowed(), n <= remaining, "{what}");
                    if d.is_allowed() {
                        remaining -= n;
                    }
                }
                1 => {
                    limiter.refund(&key, limit, n).await.unwrap();
                    remaining = (remaining + n).min(capacity);
                }
                _ => {
                    let charged = limiter.charge(&key, limit, n).await.unwrap();
                    assert_eq!(charged, n.min(remaining), "{what}");
                    remaining -= charged;
                }
            }
            assert_eq!(limiter.peek(&key, limit).await.unwrap().remaining(), remaining, "{what}");
        }
    }
}

/// A composite of every algorithm at its largest quota, at the latest times, against the
/// sequential composite of kova's exact models.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composites_stay_exact_at_the_largest_quotas_and_times() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = limiter(&server, &clock).await;
    let window = |limit: u64, period_us: u64| Quota::from_nanos(limit, period_us * MICROS).unwrap();
    let limits = Limits::new([
        RedisLimit::gcra(bucket(1, M)).unwrap(),
        RedisLimit::fixed_window(window(M, M)).unwrap(),
        RedisLimit::sliding_window_counter(window(1 << 26, 1 << 26)).unwrap(),
        RedisLimit::sliding_window_log(window(MAX_LOG_LIMIT, 1 << 20)).unwrap(),
    ])
    .unwrap();
    let mut models: (BucketModel, FixedWindowModel, SlidingCounterModel, SlidingLogModel) = (
        BucketModel::with_quantum(MICROS, M, MICROS),
        FixedWindowModel::new(M, M * MICROS),
        SlidingCounterModel::new(1 << 26, (1 << 26) * MICROS),
        SlidingLogModel::new(MAX_LOG_LIMIT, (1 << 20) * MICROS),
    );
    let mut decide = |i: usize, now: u64, cost: u64| -> Decision {
        match i {
            0 => models.0.decide(now, cost),
            1 => models.1.decide(now, cost),
            2 => quantise_counter_times(models.2.decide(now, cost)),
            _ => models.3.decide(now, cost),
        }
    };
    limiter.reset_limits("integers-composite", &limits).await.unwrap();
    let mut rng = Rng::new(4242);
    let mut t = LAST - (1 << 27);
    for op in 0..60 {
        t = (t + match rng.upto(3) {
            0 => 0,
            1 => rng.upto(1 << 10),
            2 => rng.upto(1 << 20),
            _ => rng.upto(1 << 26),
        })
        .min(LAST);
        let now = t * MICROS;
        clock.set(now);
        let cost = match rng.upto(3) {
            0 => 1,
            1 => rng.upto(64),
            _ => MAX_LOG_LIMIT - rng.upto(8),
        };
        // The sequential composite over the models: peek all; charge all only if all fit;
        // otherwise the denying ones deny (which changes nothing) and the others report a peek.
        let peeks: Vec<Decision> = (0..4).map(|i| decide(i, now, 0)).collect();
        let fits = peeks.iter().all(|p| p.remaining() >= cost);
        let each: Vec<Decision> = (0..4)
            .map(|i| {
                if cost > 0 && (fits || peeks[i].remaining() < cost) {
                    decide(i, now, cost)
                } else {
                    peeks[i]
                }
            })
            .collect();
        let expected = LimitsDecision::from_decisions(&each, fits || cost == 0).unwrap();
        let actual = limiter.check_limits_n("integers-composite", &limits, cost).await.unwrap();
        let quantised = |d: LimitsDecision| -> Vec<Decision> {
            d.limit_decisions().iter().map(|&d| quantise_counter_times(d)).collect()
        };
        assert_eq!(quantised(actual), quantised(expected), "op {op} cost {cost} at {t} µs");
        assert_eq!(
            (actual.is_allowed(), actual.decided_by()),
            (expected.is_allowed(), expected.decided_by())
        );
    }
}
