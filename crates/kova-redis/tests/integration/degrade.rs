//! The degrade policy: local limits at this server's share while Redis is down, and the way
//! back (what was spent locally charged to Redis, no second full quota).

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kova::{Fallback, ManualClock, Quota};
use kova_redis::{RedisLimit, RedisLimiter, StoreFailurePolicy};

use crate::server::RedisServer;

fn degrade(servers: u32) -> StoreFailurePolicy {
    StoreFailurePolicy::Degrade { servers: NonZeroU32::new(servers).unwrap() }
}

/// On simulated time: the share is the quota over the server count (or the limit's local
/// quota), every local decision says so, and the first check after Redis is back charges what
/// was used locally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_share_while_down_then_charged_to_redis() {
    let Some(mut server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = crate::deterministic(&clock)
        .timeout(Duration::from_millis(200))
        .reconnect_interval(Duration::from_millis(10))
        .store_failure(degrade(4))
        .connect(&server.url())
        .await
        .unwrap();
    // 100 per second, burst 100: a share of 25 per second, burst 25, per server.
    let limit = RedisLimit::gcra(Quota::per_second(100).unwrap()).unwrap();
    let window = RedisLimit::fixed_window(Quota::per_minute(40).unwrap()).unwrap();
    let given = window.with_local_quota(Quota::per_minute(3).unwrap()).unwrap();
    assert_eq!(limiter.check("k", &limit).await.unwrap().remaining(), 99);
    server.kill9();

    let mut allowed = 0;
    for i in 0..30 {
        let d = limiter.check("k", &limit).await.unwrap();
        assert_eq!(d.fallback(), Some(Fallback::StoreUnavailableLocal), "check {i}");
        assert_eq!(d.limit(), 25);
        allowed += u64::from(d.is_allowed());
    }
    assert_eq!(allowed, 25, "the local share is burst / servers");
    // 40 ms later one unit has refilled at the share's rate (25/s).
    clock.advance(Duration::from_millis(40));
    assert!(limiter.check("k", &limit).await.unwrap().is_allowed());
    assert!(!limiter.check("k", &limit).await.unwrap().is_allowed());
    // A cost above the share (but within the limit) cannot be admitted locally.
    let big = limiter.check_n("other", &limit, 26).await.unwrap();
    assert_eq!((big.is_allowed(), big.fallback()), (false, Some(Fallback::StoreUnavailableLocal)));
    // A window's share is limit / servers, unless the limit gives its own local quota.
    let shares: Vec<bool> = futures_count(&limiter, "w", &window, 12).await;
    assert_eq!(shares.iter().filter(|a| **a).count(), 10);
    let given_shares = futures_count(&limiter, "g", &given, 5).await;
    assert_eq!(given_shares.iter().filter(|a| **a).count(), 3);
    // "k", "w" and "g" hold local state; "other" was never admitted, so never held.
    assert_eq!(limiter.degraded_keys(), 3);

    // Back: the first check of "k" charges the 25 units its local limiter still counts (it
    // refilled one, and spent it again) before deciding in Redis, which lost its state with the
    // kill -9: 100 - 25 charged - 1 = 74, not a fresh 99.
    server.restart();
    let back = Instant::now();
    let first = loop {
        let d = limiter.check("k", &limit).await.unwrap();
        if d.fallback().is_none() {
            break d;
        }
        assert!(back.elapsed() < Duration::from_secs(2), "Redis not used again within 2 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(first.is_allowed());
    assert_eq!(first.remaining(), 74, "{first:?}");
    assert_eq!(limiter.degraded_keys(), 2);
    let w = limiter.check("w", &window).await.unwrap();
    assert_eq!((w.fallback(), w.remaining()), (None, 40 - 10 - 1));
    let g = limiter.check("g", &given).await.unwrap();
    assert_eq!((g.fallback(), g.remaining()), (None, 40 - 3 - 1));
    // A key that used nothing locally ("other": its big cost was denied) owes nothing.
    let o = limiter.check("other", &limit).await.unwrap();
    assert_eq!((o.fallback(), o.remaining()), (None, 99));
    assert_eq!(limiter.degraded_keys(), 0);

    assert!(window.with_local_quota(Quota::per_minute(41).unwrap()).is_err());
    assert!(window.with_local_quota(Quota::per_minute(4).unwrap().with_burst(2).unwrap()).is_err());
}

/// A reset after an outage ends what the key owed from it: the units admitted locally while
/// Redis was down are not charged into the fresh key (which would deny what the reset frees).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_forgets_what_the_key_owed_from_an_outage() {
    let Some(mut server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = crate::deterministic(&clock)
        .timeout(Duration::from_millis(200))
        .reconnect_interval(Duration::from_millis(10))
        .store_failure(degrade(1))
        .connect(&server.url())
        .await
        .unwrap();
    let limit = RedisLimit::fixed_window(Quota::per_minute(10).unwrap()).unwrap();
    assert!(limiter.check("k", &limit).await.unwrap().is_allowed());
    server.kill9();
    let shares = futures_count(&limiter, "k", &limit, 12).await;
    assert_eq!(shares.iter().filter(|a| **a).count(), 10);
    assert_eq!(limiter.degraded_keys(), 1);
    server.restart();
    let back = Instant::now();
    while limiter.reset("k", &limit).await.is_err() {
        assert!(back.elapsed() < Duration::from_secs(2), "Redis not used again within 2 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(limiter.degraded_keys(), 0);
    let fresh = limiter.check("k", &limit).await.unwrap();
    assert_eq!((fresh.fallback(), fresh.is_allowed(), fresh.remaining()), (None, true, 9));
}

async fn futures_count(limiter: &RedisLimiter, key: &str, limit: &RedisLimit, n: usize) -> Vec<bool> {
    let mut out = Vec::new();
    for _ in 0..n {
        let d = limiter.check(key, limit).await.unwrap();
        assert_eq!(d.fallback(), Some(Fallback::StoreUnavailableLocal));
        out.push(d.is_allowed());
    }
    out
}

/// kill -9 under load, four simulated servers (four limiters on their own connections, four
/// tasks each) on one key with Redis time. While Redis is down, together they admit at most
/// 4 x their share (the limit); once it is back, what they spent locally is in Redis: from the
/// kill on, they admit at most the limit plus what servers still to return held (3 x share),
/// where returning without charging would admit a second full limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_degrades_to_shares() {
    let Some(mut server) = RedisServer::start() else { return };
    const SERVERS: u64 = 4;
    // 400 per hour, burst 400: under a second of test, at most one unit refills.
    let (quota, share) = (400u64, 100u64);
    let limit = RedisLimit::gcra(Quota::per_hour(quota).unwrap()).unwrap();
    let mut limiters = Vec::new();
    for _ in 0..SERVERS {
        let limiter = RedisLimiter::builder()
            .timeout(Duration::from_millis(50))
            .reconnect_interval(Duration::from_millis(20))
            .store_failure(degrade(SERVERS as u32))
            .connect(&server.url())
            .await
            .unwrap();
        limiters.push(limiter);
    }
    let stop = Arc::new(AtomicBool::new(false));
    // Per server: admitted by Redis before the kill, locally, and by Redis after the kill.
    let counts: Arc<Vec<[AtomicU64; 3]>> = Arc::new((0..SERVERS).map(|_| Default::default()).collect());
    let killed = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (s, limiter) in limiters.iter().enumerate() {
        for _ in 0..4 {
            let (limiter, stop, counts, killed) =
                (limiter.clone(), stop.clone(), counts.clone(), killed.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let after_kill = killed.load(Ordering::Relaxed);
                    let d = limiter.check("shared", &limit).await.unwrap();
                    let slot = match d.fallback() {
                        None if after_kill => 2,
                        None => 0,
                        Some(Fallback::StoreUnavailableLocal) => 1,
                        other => panic!("unexpected fallback {other:?}"),
                    };
                    if d.is_allowed() {
                        counts[s][slot].fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_micros(500)).await;
                }
            }));
        }
    }
    let sum = |slot: usize| counts.iter().map(|c| c[slot].load(Ordering::Relaxed)).sum::<u64>();
    // Each phase runs until the load has spent what it can (bounded, for a slow machine).
    let until = |slot: usize, target: u64| {
        let sum = &sum;
        async move {
            let start = Instant::now();
            while sum(slot) < target && start.elapsed() < Duration::from_secs(5) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    until(0, quota).await;
    killed.store(true, Ordering::Relaxed);
    server.kill9();
    until(1, SERVERS * share).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let local_at_restart = sum(1);
    server.restart();
    let restarted = Instant::now();
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("a task hung").unwrap();
    }
    let (before, local, after) = (sum(0), sum(1), sum(2));
    let per_server: Vec<u64> = counts.iter().map(|c| c[1].load(Ordering::Relaxed)).collect();
    eprintln!(
        "degrade: {before} admitted by Redis before kill -9, {local} locally while down \
         ({per_server:?} per server, share {share}), {after} by Redis in the {:?} after the restart",
        restarted.elapsed()
    );
    assert!(before >= quota && before <= quota + 1, "before the kill: {before}");
    assert!(local_at_restart > 0, "no local decisions while Redis was down");
    for (s, &n) in per_server.iter().enumerate() {
        assert!(n <= share + 1, "server {s} admitted {n} locally, share {share}");
    }
    assert!(local <= SERVERS * share + SERVERS, "{local} admitted while down");
    assert!(
        local + after <= quota + (SERVERS - 1) * share + 1,
        "from the kill on: {local} local + {after} after the restart, limit {quota}"
    );
    assert_eq!(limiters.iter().map(|l| l.degraded_keys()).sum::<usize>(), 0);
}
