//! Settling and reservations, decision by decision against kova's in-memory `RateLimiter` on
//! the same manual clock (whole microseconds): checks, peeks, settles, charges, refunds,
//! reservations (with and without a maximum delay) and cancels in random order.

use std::time::Duration;

use kova::reservation::{ReserveError, Settlement};
use kova::{
    AlgorithmKind, Decision, FixedWindow, Gcra, ManualClock, Quota, RateLimiter, SlidingWindowCounter,
    TokenBucket, WordAlgorithm,
};
use kova_redis::{Error, RedisLimit, RedisLimiter, Reservation, MICROS};

use crate::conformance::{quantise_counter_times, Rng};
use crate::server::RedisServer;

/// The limits compared: GCRA with and without an overdraft, and the other word algorithms
/// (the token bucket at quotas where the in-memory bucket reads time unshifted).
pub fn cases() -> Vec<RedisLimit> {
    let q = |limit, period: Duration| Quota::new(limit, period).unwrap();
    let mut out = Vec::new();
    for quota in [
        q(10, Duration::from_secs(1)),
        q(10, Duration::from_secs(1)).with_overdraft(15),
        q(3, Duration::from_secs(1)).with_burst(5).unwrap().with_overdraft(2), // 333,334 µs
        q(1000, Duration::from_millis(1)).with_overdraft(1000),                // 1 µs per unit
        q(60, Duration::from_secs(60)).with_burst(1).unwrap().with_overdraft(1),
    ] {
        out.push(RedisLimit::gcra(quota).unwrap());
    }
    // Intervals of 1 and 2 µs: the in-memory bucket samples longer ones in 2^shift ns units.
    let per = |nanos| Quota::from_nanos(1, nanos).unwrap();
    for quota in [per(1_000).with_burst(20).unwrap(), per(2_000).with_burst(7).unwrap()] {
        let limit = RedisLimit::token_bucket(quota).unwrap();
        let bucket = <TokenBucket as WordAlgorithm>::from_quota(limit.effective_quota()).unwrap();
        assert_eq!(bucket.shift(), 0, "{quota:?}: compared only where the in-memory bucket is exact");
        out.push(limit);
    }
    for quota in [q(5, Duration::from_secs(1)), q(100, Duration::from_millis(10))] {
        out.push(RedisLimit::fixed_window(quota).unwrap());
        out.push(RedisLimit::sliding_window_counter(quota).unwrap());
    }
    out
}

async fn run<W: WordAlgorithm + Send + Sync + 'static>(
    limiter: &RedisLimiter,
    clock: &ManualClock,
    key: &str,
    limit: &RedisLimit,
    seed: u64,
    n: usize,
) -> usize {
    // Leaked so that its reservations may be held across the loop ('static borrows).
    let memory: &'static RateLimiter<W, ManualClock> =
        Box::leak(Box::new(RateLimiter::with_clock(limit.effective_quota(), clock.clone()).unwrap()));
    limiter.reset(key, limit).await.unwrap();
    let counter = limit.kind() == AlgorithmKind::SlidingWindowCounter;
    let fix = |d: Decision| if counter { quantise_counter_times(d) } else { d };
    let fix_reserve = |e: ReserveError| match e {
        ReserveError::NotAvailableNow { algorithm, retry_after } if counter => {
            let micros = (retry_after.as_nanos() as u64).div_ceil(MICROS);
            ReserveError::NotAvailableNow { algorithm, retry_after: Duration::from_micros(micros) }
        }
        other => other,
    };
    let mut rng = Rng::new(seed);
    let capacity = limit.capacity();
    let step = limit.step_nanos() / MICROS;
    let unit = match limit.kind() {
        AlgorithmKind::Gcra | AlgorithmKind::TokenBucket => step,
        _ => (step / capacity).max(1),
    };
    let mut t = 1_000_000 + rng.upto(1_000_000);
    let mut held: Vec<(kova::reservation::Reservation<'static, W, ManualClock>, Reservation)> = Vec::new();
    let mut compared = 0;
    for i in 0..n {
        t += match rng.upto(9) {
            0..=3 => 0,
            4..=6 => rng.upto(unit),
            7..=8 => rng.upto(unit * capacity.min(8)),
            _ => rng.upto(step * 2),
        };
        clock.set(t * MICROS);
        let what = format!("{:?} {:?}, seed {seed}, op #{i} at {t} µs", limit.kind(), limit.quota());
        let cost = 1 + rng.upto(capacity - 1);
        match rng.upto(99) {
            0..=24 => {
                let expected = fix(memory.check_n(cost).unwrap());
                assert_eq!(
                    limiter.check_n(key, limit, cost).await.unwrap(),
                    expected,
                    "check {cost}: {what}"
                );
            }
            25..=34 => {
                assert_eq!(limiter.peek(key, limit).await.unwrap(), fix(memory.peek()), "peek: {what}");
            }
            35..=54 => {
                let (estimated, actual) = (rng.upto(capacity), rng.upto(capacity + limit.overdraft() + 2));
                let expected: Settlement = memory.settle(estimated, actual);
                let settled = limiter.settle(key, limit, estimated, actual).await.unwrap();
                assert_eq!(settled, expected, "settle {estimated} -> {actual}: {what}");
            }
            55..=62 => {
                let extra = rng.upto(capacity + limit.overdraft() + 2);
                assert_eq!(
                    limiter.charge(key, limit, extra).await.unwrap(),
                    memory.charge(extra),
                    "charge: {what}"
                );
            }
            63..=69 => {
                let back = rng.upto(capacity + 1);
                memory.refund(back);
                limiter.refund(key, limit, back).await.unwrap();
            }
            70..=89 => {
                let max_delay = match rng.upto(2) {
                    0 => Duration::MAX,
                    _ => Duration::from_micros(rng.upto(unit * capacity * 2)),
                };
                let expected = memory.reserve_n_within(cost, max_delay);
                let actual = limiter.reserve_n_within(key, limit, cost, max_delay).await;
                match (expected, actual) {
                    (Ok(m), Ok(r)) => {
                        assert_eq!(r.delay(), m.delay(), "reserve {cost} within {max_delay:?}: {what}");
                        assert_eq!(r.ready_at_micros() * MICROS, m.ready_at_nanos(), "ready at: {what}");
                        assert_eq!(r.fallback(), None);
                        held.push((m, r));
                    }
                    (Err(m), Err(Error::Reserve(r))) => assert_eq!(r, fix_reserve(m), "refused: {what}"),
                    (m, r) => {
                        panic!("reserve {cost} within {max_delay:?}: {what}: memory {m:?}, redis {r:?}")
                    }
                }
            }
            _ => {
                if !held.is_empty() {
                    let (m, r) = held.swap_remove(rng.upto(held.len() as u64 - 1) as usize);
                    assert_eq!(r.cancel().await.unwrap(), m.cancel(), "cancel: {what}");
                }
            }
        }
        compared += 1;
        if rng.upto(3) == 0 {
            // The state itself, after whatever the op did.
            assert_eq!(limiter.peek(key, limit).await.unwrap(), fix(memory.peek()), "state: {what}");
        }
    }
    compared
}

pub async fn run_case(
    limiter: &RedisLimiter,
    clock: &ManualClock,
    key: &str,
    limit: &RedisLimit,
    seed: u64,
    n: usize,
) -> usize {
    match limit.kind() {
        AlgorithmKind::Gcra => run::<Gcra>(limiter, clock, key, limit, seed, n).await,
        AlgorithmKind::TokenBucket => run::<TokenBucket>(limiter, clock, key, limit, seed, n).await,
        AlgorithmKind::FixedWindow => run::<FixedWindow>(limiter, clock, key, limit, seed, n).await,
        AlgorithmKind::SlidingWindowCounter => {
            run::<SlidingWindowCounter>(limiter, clock, key, limit, seed, n).await
        }
        AlgorithmKind::SlidingWindowLog => unreachable!("the log takes no refunds"),
    }
}

/// Every case through `limiter` (which must read `clock`); returns the operations compared.
pub async fn run_suite(
    limiter: &RedisLimiter,
    clock: &ManualClock,
    tag: &str,
    seeds: u64,
    n: usize,
) -> usize {
    let mut compared = 0;
    for (i, limit) in cases().iter().enumerate() {
        for seed in 0..seeds {
            let key = format!("{tag}:settle-reserve:{i}:{seed}");
            compared += run_case(limiter, clock, &key, limit, 100 * i as u64 + seed, n).await;
        }
    }
    compared
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_and_reservations_match_the_in_memory_limiter() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    let compared = run_suite(&limiter, &clock, "single", 4, 150).await;
    eprintln!("settle and reservations: {compared} operations identical to kova's in-memory limiter");
    assert_eq!(compared, cases().len() * 4 * 150);
}

/// kova's cancel rule (`WordAlgorithm::cancel_reservation`) where it is subtle, the same in
/// Redis and in memory: units charged after a reservation, over a TAT that a refund had
/// brought back to `now`, are a grant still counted, so the cancel gives back nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_keeps_the_units_charged_after_the_reservation() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(10).unwrap().with_overdraft(15)).unwrap();
    let memory = RateLimiter::<Gcra, _>::with_clock(limit.effective_quota(), clock.clone()).unwrap();
    let key = "cancel-after";
    clock.set(5_000_000 * MICROS);
    let (m, r) = (memory.reserve_n(10).unwrap(), limiter.reserve_n(key, &limit, 10).await.unwrap());
    assert_eq!((r.delay(), m.delay()), (Duration::ZERO, Duration::ZERO));
    let (m, r) = (memory.reserve_n(5).unwrap(), limiter.reserve_n(key, &limit, 5).await.unwrap());
    assert_eq!((r.delay(), m.delay()), (Duration::from_millis(500), Duration::from_millis(500)));
    memory.refund(20);
    limiter.refund(key, &limit, 20).await.unwrap();
    clock.set(5_250_001 * MICROS);
    assert_eq!(limiter.charge(key, &limit, 13).await.unwrap(), memory.charge(13));
    // Charged past the mark: nothing comes back, in either.
    let (back, expected_back) = (r.cancel().await.unwrap(), m.cancel());
    assert_eq!((back, expected_back), (0, 0));
    let (peek, expected) = (limiter.peek(key, &limit).await.unwrap(), memory.peek());
    assert_eq!(peek, expected);
    assert_eq!(peek.reset_after(), Duration::from_millis(1_300)); // 1.3 s charged, none back
}

/// Bad input is a typed error before any call (nothing listens on port 1).
#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let limiter = RedisLimiter::builder().open("redis://127.0.0.1:1/").unwrap();
    let log = RedisLimit::sliding_window_log(Quota::per_second(5).unwrap()).unwrap();
    for result in [
        limiter.settle("k", &log, 1, 2).await.map(|_| ()),
        limiter.charge("k", &log, 1).await.map(|_| ()),
        limiter.refund("k", &log, 1).await,
        limiter.reserve_n("k", &log, 1).await.map(|_| ()),
    ] {
        assert!(
            matches!(result, Err(Error::Unsupported { algorithm: "sliding_window_log", .. })),
            "{result:?}"
        );
    }
    let gcra = RedisLimit::gcra(Quota::per_second(5).unwrap()).unwrap();
    assert!(matches!(
        limiter.reserve_n("k", &gcra, 6).await,
        Err(Error::Reserve(ReserveError::CostExceedsCapacity { cost: 6, capacity: 5 }))
    ));
    let overdraft = Quota::per_second(5).unwrap().with_overdraft(3);
    assert!(matches!(
        RedisLimit::token_bucket(overdraft),
        Err(kova_redis::RedisLimitError::Quota(kova::QuotaError::OverdraftUnsupported { .. }))
    ));
    let message = Error::Unsupported { operation: "settle", algorithm: "sliding_window_log" }.to_string();
    assert!(message.contains("settle") && message.contains("sliding_window_log"), "{message}");
}

/// With Redis `TIME` (no client clock) a reservation's times are the server's microseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_on_redis_time() {
    let Some(server) = RedisServer::start() else { return };
    let limiter =
        RedisLimiter::builder().timeout(Duration::from_secs(5)).connect(&server.url()).await.unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(10).unwrap()).unwrap();
    let all = limiter.reserve_n("server-time", &limit, 10).await.unwrap();
    let later = limiter.reserve_n("server-time", &limit, 5).await.unwrap();
    assert_eq!(all.delay(), Duration::ZERO);
    // 500 ms after the first, less the time between the two calls.
    assert!(
        later.delay() <= Duration::from_millis(500) && later.delay() > Duration::from_millis(400),
        "{later:?}"
    );
    let unix_micros =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
    assert!(later.made_at_micros().abs_diff(unix_micros) < 60_000_000, "{later:?}");
    assert_eq!(later.cancel().await.unwrap(), 5);
    assert!(!limiter.check("server-time", &limit).await.unwrap().is_allowed());
    assert!(matches!(
        limiter.reserve_n_within("server-time", &limit, 3, Duration::from_millis(100)).await,
        Err(Error::Reserve(ReserveError::DelayTooLong { .. }))
    ));
}

/// Reservations and charges racing on one key: each script run is atomic, so the reservations
/// get consecutive delays (no two the same unit) and the charges take exactly the burst plus the
/// overdraft between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_reservations_and_charges_lose_no_update() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    clock.set(3_000_000 * MICROS);
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(10).unwrap().with_overdraft(7)).unwrap();
    let spawn_all = |task: fn(RedisLimiter, RedisLimit) -> tokio::task::JoinHandle<u64>| {
        (0..32).map(|_| task(limiter.clone(), limit)).collect::<Vec<_>>()
    };
    let reservations = spawn_all(|limiter, limit| {
        tokio::spawn(
            async move { limiter.reserve_n("race", &limit, 1).await.unwrap().delay().as_millis() as u64 },
        )
    });
    let mut delays = Vec::new();
    for task in reservations {
        delays.push(task.await.unwrap());
    }
    delays.sort_unstable();
    let expected: Vec<u64> = (0..32).map(|i: u64| i.saturating_sub(9) * 100).collect();
    assert_eq!(delays, expected);
    limiter.reset("race", &limit).await.unwrap();
    let charges = spawn_all(|limiter, limit| {
        tokio::spawn(async move { limiter.charge("race", &limit, 1).await.unwrap() })
    });
    let mut charged = 0;
    for task in charges {
        charged += task.await.unwrap();
    }
    assert_eq!(charged, 10 + 7);
}
