//! Single node: conformance with the in-memory algorithms, and two clients sharing one limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kova::{AlgorithmKind, ManualClock, Quota};
use kova_redis::{RedisLimit, RedisLimiter};

use crate::server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_single_node() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter = crate::deterministic(&clock).connect(&server.url()).await.unwrap();
    let compared = crate::conformance::run_suite(&limiter, &clock, "single", 300).await;
    assert!(compared > 8_000, "only {compared} decisions compared");
    eprintln!("conformance (single node): {compared} decisions identical");
}

/// The same suite with every case running at once on one limiter: checks that wait together go
/// as one batch script call, and every decision must still be the in-memory one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_single_node_batched() {
    let Some(server) = RedisServer::start() else { return };
    let limiter = RedisLimiter::builder()
        .client_clock(crate::conformance::TaskClock)
        .timeout(Duration::from_secs(5))
        .ttl_margin(Duration::from_secs(3600))
        .connect(&server.url())
        .await
        .unwrap();
    let compared = crate::conformance::run_suite_concurrently(&limiter, "batched", 300).await;
    let stats = limiter.batch_stats();
    eprintln!(
        "conformance (single node, batched): {compared} decisions identical; {} batches, mean {:.1}, \
         largest {}, {} sent alone",
        stats.batches,
        stats.mean_batch(),
        stats.largest_batch,
        stats.single_calls
    );
    assert!(compared > 8_000, "only {compared} decisions compared");
    assert!(stats.batched_checks > compared as u64 / 4, "few checks were batched: {stats:?}");
    assert!(stats.largest_batch >= 8, "{stats:?}");
}

/// A key of another type (a list) at a check's Redis key, in the middle of batches: that check
/// fails (with `ReturnError`), alone, whether it would write (a check) or not (a peek); the
/// list is left as it was (the batch reads with MGET, which answers nil for it, so a plain SET
/// would have replaced it); every other check in the batch is decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_fails_only_its_own_check_in_a_batch() {
    let Some(server) = RedisServer::start() else { return };
    let limiter = RedisLimiter::builder()
        .store_failure(kova_redis::StoreFailurePolicy::ReturnError)
        .timeout(Duration::from_secs(5))
        .max_in_flight(1)
        .connect(&server.url())
        .await
        .unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(1000).unwrap()).unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    for wrong in ["wrong:check", "wrong:peek"] {
        let () = redis::cmd("RPUSH")
            .arg(limiter.redis_key(wrong, &limit))
            .arg("kept")
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    for round in 0..5 {
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let (limiter, limit) = (limiter.clone(), limit);
                tokio::spawn(async move {
                    match i {
                        19 => limiter.check("wrong:check", &limit).await,
                        20 => limiter.peek("wrong:peek", &limit).await,
                        _ => limiter.check(format!("right:{round}:{i}"), &limit).await,
                    }
                })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            let result = task.await.unwrap();
            match i {
                19 | 20 => assert!(matches!(result, Err(kova_redis::Error::Store(_))), "{i}: {result:?}"),
                _ => assert!(matches!(&result, Ok(d) if d.is_allowed()), "{i}: {result:?}"),
            }
        }
    }
    for wrong in ["wrong:check", "wrong:peek"] {
        let list: Vec<String> = redis::cmd("LRANGE")
            .arg(limiter.redis_key(wrong, &limit))
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(list, ["kept"], "{wrong}");
    }
    let stats = limiter.batch_stats();
    assert!(stats.batched_checks >= 100, "{stats:?}");
}

/// Reads Redis TIME in microseconds.
async fn redis_micros(url: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    s * 1_000_000 + us
}

/// Two separate clients (two connections, as two servers would have), 8 tasks each, hammer one
/// key with Redis time: together they admit exactly what one limiter would. Each client's
/// checks wait together, so its batches hold the key several times (each later check reads what
/// the earlier ones wrote).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_share_one_limit() {
    let Some(server) = RedisServer::start() else { return };
    let a = RedisLimiter::builder().timeout(Duration::from_secs(5)).connect(&server.url()).await.unwrap();
    let b = RedisLimiter::builder().timeout(Duration::from_secs(5)).connect(&server.url()).await.unwrap();
    for kind in AlgorithmKind::ALL {
        // 100 per hour: within a sub-second test at most one more unit can refill (buckets), and
        // unless the test straddles an aligned hour the windows admit exactly 100.
        let quota = Quota::per_hour(100).unwrap();
        let limit = RedisLimit::new(kind, quota).unwrap();
        let key = format!("shared:{kind}");
        a.reset(&key, &limit).await.unwrap();
        let admitted = Arc::new(AtomicU64::new(0));
        let attempts = Arc::new(AtomicU64::new(0));
        let start = redis_micros(&server.url()).await;
        let mut tasks = Vec::new();
        for i in 0..16 {
            let limiter = if i % 2 == 0 { a.clone() } else { b.clone() };
            let (admitted, attempts, key) = (admitted.clone(), attempts.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..25 {
                    let decision = limiter.check(&key, &limit).await.unwrap();
                    assert_eq!(decision.fallback(), None);
                    attempts.fetch_add(1, Ordering::Relaxed);
                    if decision.is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let end = redis_micros(&server.url()).await;
        let admitted = admitted.load(Ordering::Relaxed);
        assert_eq!(attempts.load(Ordering::Relaxed), 400);
        let elapsed = end - start;
        let hour = 3_600_000_000;
        let windows = end / hour - start / hour + 1;
        let max = match kind {
            // burst + refill over the elapsed time (one unit per 36 s).
            AlgorithmKind::Gcra | AlgorithmKind::TokenBucket => 100 + elapsed / 36_000_000 + 1,
            AlgorithmKind::FixedWindow | AlgorithmKind::SlidingWindowCounter => 100 * windows,
            AlgorithmKind::SlidingWindowLog => 100,
        };
        assert!(
            (100..=max).contains(&admitted),
            "{kind}: two clients admitted {admitted} of 400 (expected 100..={max})"
        );
    }
    let largest = a.batch_stats().largest_batch.max(b.batch_stats().largest_batch);
    assert!(largest >= 2, "no batch held the key twice: {:?} {:?}", a.batch_stats(), b.batch_stats());
}

fn dirty(server: &RedisServer) -> u64 {
    let info = server.cli(&["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .expect("rdb_changes_since_last_save in INFO")
        .trim()
        .parse()
        .unwrap()
}

/// Redis counts every write in `rdb_changes_since_last_save`: denials and peeks must leave it
/// unchanged. And each admission sets the key's TTL to the decision's reset time (Redis time,
/// no margin), rounded up to the millisecond.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denials_and_peeks_write_nothing_and_ttls_are_reset_times() {
    let Some(server) = RedisServer::start() else { return };
    let limiter =
        RedisLimiter::builder().timeout(Duration::from_secs(5)).connect(&server.url()).await.unwrap();
    for kind in AlgorithmKind::ALL {
        let limit = RedisLimit::new(kind, Quota::per_minute(3).unwrap()).unwrap();
        let key = format!("quiet:{kind}");
        let mut last = None;
        for _ in 0..3 {
            last = Some(limiter.check(&key, &limit).await.unwrap());
        }
        let admitted = last.unwrap();
        assert!(admitted.is_allowed(), "{kind}");
        let redis_key = String::from_utf8(limiter.redis_key(&key, &limit)).unwrap();
        let pttl: u64 = server.cli(&["PTTL", &redis_key]).trim().parse().unwrap();
        let reset_ms = admitted.reset_after().as_millis() as u64;
        // A few ms may pass between the script and PTTL; never longer than the reset time.
        assert!(
            pttl <= reset_ms + 1 && pttl + 200 >= reset_ms,
            "{kind}: PTTL {pttl} ms vs reset {reset_ms} ms"
        );
        let before = dirty(&server);
        for _ in 0..5 {
            assert!(!limiter.check(&key, &limit).await.unwrap().is_allowed(), "{kind}");
            assert!(limiter.peek(&key, &limit).await.unwrap().is_allowed(), "{kind}");
            assert!(!limiter.check_n(&key, &limit, 3).await.unwrap().is_allowed(), "{kind}");
        }
        assert_eq!(dirty(&server), before, "{kind}: a denial or a peek wrote to Redis");
        // A fresh key's peek creates nothing either.
        limiter.peek(format!("never:{kind}"), &limit).await.unwrap();
        assert_eq!(dirty(&server), before, "{kind}: a peek of a fresh key wrote to Redis");
    }
}

/// A sliding window log read by a clock behind its newest unit stores the new units at that
/// unit's time, so they count until a period after it: the key's TTL must last that long
/// (with no margin, a shorter TTL would drop units still in the window, and admit them twice).
/// Alone and in a composite (limits.lua runs the same decision).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_behind_its_newest_unit_keeps_its_key_until_the_units_leave() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::new();
    let limiter =
        crate::deterministic(&clock).ttl_margin(Duration::ZERO).connect(&server.url()).await.unwrap();
    let limit = RedisLimit::sliding_window_log(Quota::new(2, Duration::from_millis(200)).unwrap()).unwrap();
    let limits = kova_redis::Limits::new([limit]).unwrap();
    let pttl = |key: &str| -> i64 { server.cli(&["PTTL", key]).trim().parse().unwrap() };

    clock.set(10_000_000_000);
    assert!(limiter.check("behind", &limit).await.unwrap().is_allowed());
    assert!(limiter.check_limits("behind", &limits).await.unwrap().is_allowed());
    // 100 ms back: both units now stand at 10.000 s, in the window until 10.200 s, 300 ms on.
    clock.set(9_900_000_000);
    assert!(limiter.check("behind", &limit).await.unwrap().is_allowed());
    assert!(limiter.check_limits("behind", &limits).await.unwrap().is_allowed());

    let single = String::from_utf8(limiter.redis_key("behind", &limit)).unwrap();
    let composite = server.cli(&["KEYS", "*limits*"]).trim().to_owned();
    assert!(!composite.is_empty() && !composite.contains('\n'), "composite key: {composite:?}");
    for key in [single, composite] {
        // Time passes between the script and PTTL (a loaded machine: tens of ms); a TTL counted
        // from the reading would be 200 ms at most.
        let ttl = pttl(&key);
        assert!((201..=300).contains(&ttl), "{key}: PTTL {ttl} ms, the units count for 300 ms");
    }
}
