//! Faults: kill -9 under load, restart, SCRIPT FLUSH, an unreachable server, timeouts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kova::{Fallback, Quota};
use kova_redis::{Error, RedisLimit, RedisLimiter, StoreError, StoreFailurePolicy};

use crate::server::RedisServer;

const TIMEOUT: Duration = Duration::from_millis(50);
/// Scheduling slack allowed on top of the timeout on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(250);

fn limit() -> RedisLimit {
    RedisLimit::gcra(Quota::per_second(1_000_000).unwrap()).unwrap()
}

/// kill -9 under load: every call ends within the timeout, answered by the policy and marked so;
/// after a restart on the same port, real decisions come back within a second.
async fn kill_and_restart(policy: StoreFailurePolicy, fallback: Fallback) {
    let Some(mut server) = RedisServer::start() else { return };
    let limiter =
        RedisLimiter::builder().timeout(TIMEOUT).store_failure(policy).connect(&server.url()).await.unwrap();
    let limit = limit();
    let stop = Arc::new(AtomicBool::new(false));
    let fallbacks = Arc::new(AtomicU64::new(0));
    let real = Arc::new(AtomicU64::new(0));
    let slowest_us = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (limiter, stop, fallbacks, real, slowest_us) =
            (limiter.clone(), stop.clone(), fallbacks.clone(), real.clone(), slowest_us.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let start = Instant::now();
                let decision = limiter.check(format!("load:{t}:{}", i % 64), &limit).await.unwrap();
                slowest_us.fetch_max(start.elapsed().as_micros() as u64, Ordering::Relaxed);
                match decision.fallback() {
                    None => real.fetch_add(1, Ordering::Relaxed),
                    Some(f) => {
                        assert_eq!(f, fallback);
                        assert_eq!(decision.is_allowed(), f == Fallback::StoreUnavailableAllowed);
                        fallbacks.fetch_add(1, Ordering::Relaxed)
                    }
                };
                i += 1;
                if decision.fallback().is_some() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = real.load(Ordering::Relaxed);
    assert!(before > 0, "no decisions before the kill");
    server.kill9();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let during = fallbacks.load(Ordering::Relaxed);
    assert!(during > 0, "no fallback decisions while the server was down");
    let real_at_restart = real.load(Ordering::Relaxed);
    server.restart();
    let restarted = Instant::now();
    while real.load(Ordering::Relaxed) == real_at_restart {
        assert!(restarted.elapsed() < Duration::from_secs(1), "no real decision within 1 s of the restart");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let recovered_after = restarted.elapsed();
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("a task hung").unwrap();
    }
    let slowest = Duration::from_micros(slowest_us.load(Ordering::Relaxed));
    eprintln!(
        "{policy:?}: {before} real decisions before kill -9, {during} fallbacks while down, \
         served again {recovered_after:?} after restart, slowest call {slowest:?}"
    );
    assert!(slowest <= TIMEOUT + SLACK, "a call took {slowest:?} (timeout {TIMEOUT:?})");
    assert_eq!(limiter.stats().fallback_decisions, fallbacks.load(Ordering::Relaxed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_fail_open() {
    kill_and_restart(StoreFailurePolicy::FailOpen, Fallback::StoreUnavailableAllowed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_fail_closed() {
    kill_and_restart(StoreFailurePolicy::FailClosed, Fallback::StoreUnavailableDenied).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_reloads_scripts() {
    let Some(server) = RedisServer::start() else { return };
    let limiter =
        RedisLimiter::builder().timeout(Duration::from_secs(5)).connect(&server.url()).await.unwrap();
    for kind in kova::AlgorithmKind::ALL {
        // Per hour: a fixed window's edge falling between the two checks (which reset its count)
        // is then a chance of about 1 in 100,000, not of a few percent.
        let limit = RedisLimit::new(kind, Quota::per_hour(10).unwrap()).unwrap();
        let first = limiter.check("flush", &limit).await.unwrap();
        assert_eq!((first.fallback(), first.remaining()), (None, 9), "{kind}");
        assert_eq!(server.cli(&["SCRIPT", "FLUSH"]).trim(), "OK");
        assert_eq!(server.cli(&["SCRIPT", "EXISTS", &sha1_of(kind)]).trim(), "0");
        let second = limiter.check("flush", &limit).await.unwrap();
        assert_eq!((second.fallback(), second.remaining()), (None, 8), "{kind}: script not reloaded");
        assert_eq!(server.cli(&["SCRIPT", "EXISTS", &sha1_of(kind)]).trim(), "1");
    }
}

fn sha1_of(kind: kova::AlgorithmKind) -> String {
    redis::Script::new(kova_redis::script_source(kind)).get_hash().to_owned()
}

/// A limiter opened while Redis is down answers by its policy (or returns the error), without
/// waiting past the timeout, and serves once Redis is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_then_up() {
    let Some(mut server) = RedisServer::start() else { return };
    server.kill9();
    let limit = limit();
    let open = RedisLimiter::builder()
        .timeout(TIMEOUT)
        .reconnect_interval(Duration::from_millis(20))
        .open(&server.url())
        .unwrap();
    let strict = RedisLimiter::builder()
        .timeout(TIMEOUT)
        .store_failure(StoreFailurePolicy::ReturnError)
        .open(&server.url())
        .unwrap();
    let start = Instant::now();
    let decision = open.check("k", &limit).await.unwrap();
    assert_eq!(decision.fallback(), Some(Fallback::StoreUnavailableAllowed));
    assert!(decision.is_allowed());
    assert!(matches!(strict.check("k", &limit).await, Err(Error::Store(_))));
    assert!(matches!(strict.reset("k", &limit).await, Err(Error::Store(_))));
    assert!(start.elapsed() <= 3 * TIMEOUT + SLACK);
    assert!(RedisLimiter::builder().timeout(TIMEOUT).connect(&server.url()).await.is_err());
    server.restart();
    let up = Instant::now();
    loop {
        if open.check("k", &limit).await.unwrap().fallback().is_none() {
            break;
        }
        assert!(up.elapsed() < Duration::from_secs(1), "not served within 1 s of Redis coming up");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A server that accepts connections but never answers (SIGSTOP'd): every call ends at the
/// timeout, by the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_times_out() {
    let Some(server) = RedisServer::start() else { return };
    let limiter = RedisLimiter::builder()
        .timeout(TIMEOUT)
        .store_failure(StoreFailurePolicy::FailClosed)
        .unavailable_retry_after(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    let strict = RedisLimiter::builder()
        .timeout(TIMEOUT)
        .store_failure(StoreFailurePolicy::ReturnError)
        .connect(&server.url())
        .await
        .unwrap();
    let limit = limit();
    assert!(limiter.check("k", &limit).await.unwrap().fallback().is_none());
    let pid = server_pid(&server);
    signal(&pid, "-STOP");
    let start = Instant::now();
    let decision = limiter.check("k", &limit).await.unwrap();
    let took = start.elapsed();
    let strict_result = strict.check("k", &limit).await;
    signal(&pid, "-CONT");
    assert_eq!(decision.fallback(), Some(Fallback::StoreUnavailableDenied));
    assert!(!decision.is_allowed());
    assert_eq!(decision.retry_after(), Duration::from_secs(2));
    assert!(took >= TIMEOUT && took <= TIMEOUT + SLACK, "took {took:?}");
    assert!(matches!(strict_result, Err(Error::Store(StoreError::Timeout(t))) if t == TIMEOUT));
    // Once the server runs again, real decisions come back.
    let resumed = Instant::now();
    while limiter.check("k", &limit).await.unwrap().fallback().is_some() {
        assert!(resumed.elapsed() < Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn server_pid(server: &RedisServer) -> String {
    let info = server.cli(&["INFO", "server"]);
    info.lines().find_map(|l| l.strip_prefix("process_id:")).expect("process_id in INFO").trim().to_owned()
}

fn signal(pid: &str, sig: &str) {
    let status = std::process::Command::new("kill").args([sig, pid]).status().expect("run kill");
    assert!(status.success());
}

/// Checks queued behind a call that times out (Redis frozen by SIGSTOP) get their own
/// timeouts, and the connection's flights are all handed back: once Redis answers again, a burst
/// of concurrent checks is decided at once, in batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_survive_timeouts_and_cancellation() {
    let Some(server) = RedisServer::start() else { return };
    let limiter = RedisLimiter::builder()
        .timeout(TIMEOUT)
        .store_failure(StoreFailurePolicy::ReturnError)
        .connect(&server.url())
        .await
        .unwrap();
    let limit = limit();
    assert!(limiter.check("warm", &limit).await.unwrap().fallback().is_none());
    let burst = |tag: &'static str| {
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.check(format!("{tag}:{i}"), &limit).await })
            })
            .collect();
        async move {
            let mut out = Vec::new();
            for task in tasks {
                out.push(task.await.unwrap());
            }
            out
        }
    };
    let pid = server_pid(&server);
    signal(&pid, "-STOP");
    let busy = burst("busy").await;
    signal(&pid, "-CONT");
    assert!(busy.iter().all(|r| matches!(r, Err(Error::Store(StoreError::Timeout(_))))), "{busy:?}");
    // Let the flights that were cut off end (their answers arrive once Redis runs again).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = limiter.batch_stats();
    let start = Instant::now();
    let after = burst("after").await;
    let took = start.elapsed();
    assert!(
        after.iter().all(|r| matches!(r, Ok(d) if d.fallback().is_none() && d.is_allowed())),
        "{after:?}"
    );
    assert!(took < TIMEOUT + SLACK, "took {took:?}");
    let stats = limiter.batch_stats();
    assert!(stats.batched_checks > before.batched_checks, "{stats:?}");
}
