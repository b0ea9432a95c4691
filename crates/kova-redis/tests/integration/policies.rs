//! The failure policies for settling, reservations and composites, with nothing listening on
//! the Redis port: every decision the policy made says so, and nothing is silently granted.

use std::num::NonZeroU32;
use std::time::Duration;

use kova::{Fallback, ManualClock, Quota};
use kova_redis::{Error, Limits, RedisLimit, RedisLimiter, StoreFailurePolicy};

/// A limiter whose Redis never answers (port 1 refuses at once).
fn down(policy: StoreFailurePolicy, clock: &ManualClock) -> RedisLimiter {
    RedisLimiter::builder()
        .client_clock(clock.clone())
        .store_failure(policy)
        .timeout(Duration::from_millis(200))
        .reconnect_interval(Duration::ZERO)
        .unavailable_retry_after(Duration::from_secs(2))
        .open("redis://127.0.0.1:1/")
        .unwrap()
}

fn limits() -> Limits {
    Limits::new([
        RedisLimit::gcra(Quota::per_minute(40).unwrap()).unwrap(),
        RedisLimit::fixed_window(Quota::per_hour(8).unwrap()).unwrap(),
    ])
    .unwrap()
}

fn gcra() -> RedisLimit {
    RedisLimit::gcra(Quota::per_second(10).unwrap().with_overdraft(5)).unwrap()
}

#[tokio::test]
async fn fail_open_marks_what_it_allows_and_records_no_settlement() {
    let clock = ManualClock::new();
    let limiter = down(StoreFailurePolicy::FailOpen, &clock);
    let d = limiter.check_limits_n("k", &limits(), 3).await.unwrap();
    assert!(d.is_allowed());
    assert!(d.limit_decisions().iter().all(|d| d.fallback() == Some(Fallback::StoreUnavailableAllowed)));
    // A reservation is made, marked, and took nothing anywhere: its cancel has nothing to give.
    let r = limiter.reserve_n("k", &gcra(), 4).await.unwrap();
    assert_eq!((r.delay(), r.fallback()), (Duration::ZERO, Some(Fallback::StoreUnavailableAllowed)));
    assert_eq!(r.cancel().await.unwrap(), 0);
    // A settlement cannot be made up: the caller learns the real cost was not recorded.
    assert!(matches!(limiter.settle("k", &gcra(), 2, 9).await, Err(Error::Store(_))));
    assert!(matches!(limiter.settle("k", &gcra(), 9, 2).await, Err(Error::Store(_))));
    assert!(matches!(limiter.charge("k", &gcra(), 3).await, Err(Error::Store(_))));
    assert!(matches!(limiter.refund("k", &gcra(), 3).await, Err(Error::Store(_))));
    assert!(matches!(limiter.reset_limits("k", &limits()).await, Err(Error::Store(_))));
    assert_eq!(limiter.stats().fallback_decisions, 2);
}

#[tokio::test]
async fn fail_closed_denies_and_refuses() {
    let clock = ManualClock::new();
    let limiter = down(StoreFailurePolicy::FailClosed, &clock);
    let d = limiter.check_limits("k", &limits()).await.unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.decision().retry_after(), Duration::from_secs(2));
    assert!(d.limit_decisions().iter().all(|d| d.fallback() == Some(Fallback::StoreUnavailableDenied)));
    assert!(matches!(limiter.reserve_n("k", &gcra(), 1).await, Err(Error::Store(_))));
    assert!(matches!(limiter.settle("k", &gcra(), 1, 2).await, Err(Error::Store(_))));
    let returning = down(StoreFailurePolicy::ReturnError, &clock);
    assert!(matches!(returning.check_limits("k", &limits()).await, Err(Error::Store(_))));
    assert!(matches!(returning.reserve_n("k", &gcra(), 1).await, Err(Error::Store(_))));
}

#[tokio::test]
async fn degrade_decides_composites_all_or_nothing_on_the_local_shares() {
    let clock = ManualClock::new();
    clock.set(1_000_000_000);
    let limiter = down(StoreFailurePolicy::Degrade { servers: NonZeroU32::new(4).unwrap() }, &clock);
    let limits = limits();
    // Shares: 10 a minute, and 2 an hour.
    let d = limiter.check_limits_n("k", &limits, 2).await.unwrap();
    assert!(d.is_allowed());
    assert!(d.limit_decisions().iter().all(|d| d.fallback() == Some(Fallback::StoreUnavailableLocal)));
    assert_eq!(
        d.limit_decisions().iter().map(|d| (d.limit(), d.remaining())).collect::<Vec<_>>(),
        [(10, 8), (2, 0)]
    );
    // The hour's share denies: the minute's share gives back what it took.
    let denied = limiter.check_limits("k", &limits).await.unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.decided_by(), 1);
    assert_eq!(denied.limit_decisions()[0].remaining(), 8);
    assert_eq!(denied.decision().fallback(), Some(Fallback::StoreUnavailableLocal));
    assert_eq!(limiter.peek_limits("k", &limits).await.unwrap().limit_decisions()[0].remaining(), 8);
    // Reservations and settles are not made locally: a time or a debt only the shared state
    // can promise or record.
    assert!(matches!(limiter.reserve_n("k", &gcra(), 1).await, Err(Error::Store(_))));
    assert!(matches!(limiter.settle("k", &gcra(), 1, 2).await, Err(Error::Store(_))));
}

/// The way back after an outage under degrade: a composite's first check once Redis answers
/// charges each limit with what its local share still counts as used (no second full quota),
/// and so does the first reservation of a key decided locally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degrade_charges_local_units_to_every_limit_on_the_way_back() {
    let Some(mut server) = crate::server::RedisServer::start() else { return };
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = crate::deterministic(&clock)
        .timeout(Duration::from_millis(200))
        .reconnect_interval(Duration::from_millis(10))
        .store_failure(StoreFailurePolicy::Degrade { servers: NonZeroU32::new(4).unwrap() })
        .connect(&server.url())
        .await
        .unwrap();
    let limits = limits(); // shares: 10 a minute, 2 an hour
    let single = RedisLimit::gcra(Quota::per_second(100).unwrap()).unwrap(); // share: 25
    assert!(limiter.check_limits("k", &limits).await.unwrap().is_allowed());
    server.kill9();
    let d = limiter.check_limits_n("k", &limits, 2).await.unwrap();
    assert_eq!((d.is_allowed(), d.decision().fallback()), (true, Some(Fallback::StoreUnavailableLocal)));
    assert!(limiter.check_n("r", &single, 20).await.unwrap().is_allowed());
    assert_eq!(limiter.degraded_keys(), 3);

    server.restart();
    let back = std::time::Instant::now();
    let first = loop {
        let d = limiter.check_limits("k", &limits).await.unwrap();
        if d.decision().fallback().is_none() {
            break d;
        }
        assert!(back.elapsed() < Duration::from_secs(2), "Redis not used again within 2 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // Redis lost its state with the kill -9; it now holds the 2 local units plus this check.
    let left: Vec<u64> = first.limit_decisions().iter().map(|d| d.remaining()).collect();
    assert_eq!((first.is_allowed(), left), (true, vec![40 - 3, 8 - 3]));
    // A reservation of the key decided locally: Redis first counts its 20 local units.
    let r = limiter.reserve_n("r", &single, 80).await.unwrap();
    assert_eq!((r.delay(), r.fallback()), (Duration::ZERO, None));
    assert!(!limiter.check("r", &single).await.unwrap().is_allowed());
    assert_eq!(limiter.degraded_keys(), 0);
}
