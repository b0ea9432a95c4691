//! The failure policies for settling, reservations and composites, with nothing listening on
//! the Redis port: every decision the policy made says so, and nothing is silently granted.

use std::num::NonZeroU32;
use std::time::Duration;

use kova::{Fallback, ManualClock, Quota};
use kova_redis::{Error, FailurePolicy, Limit, Limits, RedisLimiter};

/// A limiter whose Redis never answers (port 1 refuses at once).
fn down(policy: FailurePolicy, clock: &ManualClock) -> RedisLimiter {
    RedisLimiter::builder()
        .client_clock(clock.clone())
        .failure_policy(policy)
        .timeout(Duration::from_millis(200))
        .reconnect_interval(Duration::ZERO)
        .unavailable_retry_after(Duration::from_secs(2))
        .open("redis://127.0.0.1:1/")
        .unwrap()
}

fn limits() -> Limits {
    Limits::new([
        Limit::gcra(Quota::per_minute(40).unwrap()).unwrap(),
        Limit::fixed_window(Quota::per_hour(8).unwrap()).unwrap(),
    ])
    .unwrap()
}

fn gcra() -> Limit {
    Limit::gcra(Quota::per_second(10).unwrap().with_overdraft(5)).unwrap()
}

#[tokio::test]
async fn fail_open_marks_what_it_allows_and_records_no_settlement() {
    let clock = ManualClock::new();
    let limiter = down(FailurePolicy::FailOpen, &clock);
    let d = limiter.check_limits_n("k", &limits(), 3).await.unwrap();
    assert!(d.is_allowed());
    assert!(d.limit_decisions().iter().all(|d| d.fallback() == Some(Fallback::StoreUnavailableAllowed)));
    // A reservation is made, marked, and took nothing anywhere: its cancel has nothing to give.
    let r = limiter.reserve_n("k", &gcra(), 4).await.unwrap();
    assert_eq!((r.delay(), r.fallback()), (Duration::ZERO, Some(Fallback::StoreUnavailableAllowed)));
    assert!(!r.cancel().await.unwrap());
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
    let limiter = down(FailurePolicy::FailClosed, &clock);
    let d = limiter.check_limits("k", &limits()).await.unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.decision().retry_after(), Duration::from_secs(2));
    assert!(d.limit_decisions().iter().all(|d| d.fallback() == Some(Fallback::StoreUnavailableDenied)));
    assert!(matches!(limiter.reserve_n("k", &gcra(), 1).await, Err(Error::Store(_))));
    assert!(matches!(limiter.settle("k", &gcra(), 1, 2).await, Err(Error::Store(_))));
    let returning = down(FailurePolicy::ReturnError, &clock);
    assert!(matches!(returning.check_limits("k", &limits()).await, Err(Error::Store(_))));
    assert!(matches!(returning.reserve_n("k", &gcra(), 1).await, Err(Error::Store(_))));
}

#[tokio::test]
async fn degrade_decides_composites_all_or_nothing_on_the_local_shares() {
    let clock = ManualClock::new();
    clock.set(1_000_000_000);
    let limiter = down(FailurePolicy::Degrade { servers: NonZeroU32::new(4).unwrap() }, &clock);
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
