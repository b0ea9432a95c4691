//! One user key checked under two quotas of one algorithm. Their Redis key names the algorithm,
//! not the quota (`prefix:{key}:<algorithm>`), so the second quota reads the state the first
//! wrote. It must read it as the in-memory algorithm reads a word stored under another quota:
//! never a negative `remaining` (which a batch reply would turn into an admission), never a
//! lockout because another period's window index looks like a clock running backwards.

use std::time::Duration;

use kova::{ManualClock, Quota};
use kova_redis::{RedisLimit, RedisLimiter, StoreFailurePolicy};

use crate::server::RedisServer;

/// Nanoseconds since the Unix epoch at a time like today's: the client clock then gives window
/// indices like Redis `TIME` would.
const EPOCH_LIKE_NANOS: u64 = 1_765_000_000_000_000_000;

/// A limiter on `clock` that returns store errors (so that a malformed reply is seen, not
/// answered by a failure policy); `batched` sends one script call at a time, so that checks
/// waiting together go as one batch.
async fn limiter(server: &RedisServer, clock: &ManualClock, batched: bool) -> RedisLimiter {
    let builder = crate::deterministic(clock).store_failure(StoreFailurePolicy::ReturnError);
    let builder = if batched { builder.max_in_flight(1) } else { builder };
    builder.connect(&server.url()).await.unwrap()
}

/// Checks `key` under `limit` `n` times at once (a batch when the limiter is batched) and
/// returns each answer's (allowed, remaining); panics on an error or a fallback.
async fn check_together(limiter: &RedisLimiter, key: &str, limit: &RedisLimit, n: usize) -> Vec<(bool, u64)> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (limiter, limit, key) = (limiter.clone(), *limit, key.to_owned());
            tokio::spawn(async move { limiter.check(key, &limit).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        let decision = task.await.unwrap().expect("decided, not a store error");
        assert_eq!(decision.fallback(), None, "{decision:?}");
        answers.push((decision.is_allowed(), decision.remaining()));
    }
    answers
}

/// A window filled under a larger limit reads as full under a smaller one: denied with nothing
/// remaining, alone and in a batch, for both algorithms that count units in a window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_above_a_smaller_limit_reads_as_full() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    clock.set(EPOCH_LIKE_NANOS);
    let minute = Duration::from_secs(60);
    for batched in [false, true] {
        let limiter = limiter(&server, &clock, batched).await;
        let cases = [
            (
                RedisLimit::fixed_window(Quota::new(100, minute).unwrap()).unwrap(),
                RedisLimit::fixed_window(Quota::new(10, minute).unwrap()).unwrap(),
            ),
            (
                RedisLimit::sliding_window_log(Quota::new(100, minute).unwrap()).unwrap(),
                RedisLimit::sliding_window_log(Quota::new(10, minute).unwrap()).unwrap(),
            ),
        ];
        for (i, (large, small)) in cases.into_iter().enumerate() {
            let key = format!("shrunk:{batched}:{i}");
            for _ in 0..50 {
                assert!(limiter.check(&key, &large).await.unwrap().is_allowed());
            }
            let answers = check_together(&limiter, &key, &small, 20).await;
            assert!(answers.iter().all(|&a| a == (false, 0)), "batched {batched}, case {i}: {answers:?}");
            let peek = limiter.peek(&key, &small).await.unwrap();
            assert_eq!(peek.remaining(), 0, "batched {batched}, case {i}");
            // Nothing was written by the denials: the larger limit still has its 50.
            assert_eq!(
                limiter.peek(&key, &large).await.unwrap().remaining(),
                50,
                "batched {batched}, case {i}"
            );
        }
        if batched {
            assert!(limiter.batch_stats().batched_checks >= 10, "{:?}", limiter.batch_stats());
        }
    }
}

/// A window written under a short period, read under a long one: the stored index is far
/// ahead of the long period's, which is no clock running backwards (that is at most a few
/// windows), so it reads as fresh, as the in-memory algorithms read it, and not as a window
/// that ends thousands of years from now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_periods_window_is_not_a_clock_running_backwards() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    clock.set(EPOCH_LIKE_NANOS);
    let limiter = limiter(&server, &clock, false).await;
    let pairs = [
        (
            RedisLimit::fixed_window(Quota::per_second(5).unwrap()).unwrap(),
            RedisLimit::fixed_window(Quota::per_minute(5).unwrap()).unwrap(),
        ),
        (
            RedisLimit::sliding_window_counter(Quota::per_second(5).unwrap()).unwrap(),
            RedisLimit::sliding_window_counter(Quota::per_minute(5).unwrap()).unwrap(),
        ),
    ];
    for (i, (short, long)) in pairs.into_iter().enumerate() {
        let key = format!("periods:{i}");
        for _ in 0..5 {
            assert!(limiter.check(&key, &short).await.unwrap().is_allowed());
        }
        let first = limiter.check(&key, &long).await.unwrap();
        assert!(first.is_allowed(), "case {i}: {first:?}");
        assert!(first.reset_after() <= Duration::from_secs(120), "case {i}: {first:?}");
        for _ in 0..4 {
            assert!(limiter.check(&key, &long).await.unwrap().is_allowed(), "case {i}");
        }
        let denied = limiter.check(&key, &long).await.unwrap();
        assert!(!denied.is_allowed(), "case {i}: {denied:?}");
        assert!(denied.retry_after() <= Duration::from_secs(120), "case {i}: {denied:?}");
    }
}

/// A clock that runs a little behind the stored window still counts in it (never a fresh count),
/// as before: the tolerance above is for indices far apart, not for a clock that steps back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_a_few_windows_behind_still_counts_in_the_stored_window() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    clock.set(EPOCH_LIKE_NANOS);
    let limiter = limiter(&server, &clock, false).await;
    for (i, limit) in [
        RedisLimit::fixed_window(Quota::per_second(3).unwrap()).unwrap(),
        RedisLimit::sliding_window_counter(Quota::per_second(3).unwrap()).unwrap(),
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("behind:{i}");
        clock.set(EPOCH_LIKE_NANOS + 10_000_000_000);
        for _ in 0..3 {
            assert!(limiter.check(&key, &limit).await.unwrap().is_allowed());
        }
        // Five windows back.
        clock.set(EPOCH_LIKE_NANOS + 5_000_000_000);
        let denied = limiter.check(&key, &limit).await.unwrap();
        assert!(!denied.is_allowed(), "case {i}: {denied:?}");
    }
}
