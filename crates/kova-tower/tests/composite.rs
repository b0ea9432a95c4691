//! Several limits on one request: a `CompositeLimit` decides them all or nothing in one step,
//! and limits added one by one give back what earlier ones took when a later one denies. Either
//! way every limit's `RateLimit` member shows its state after the decision.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::{body::Body, routing::get, Router};
use http::{HeaderName, Request, StatusCode};
use kova::limits::KeyedLimits;
use kova::{Gcra, ManualClock, Quota};
use kova_tower::{
    CompositeCheckFuture, CompositeLimit, CompositeLimiter, Key, Limit, LimitKey, PeerAddr, RateLimitLayer,
};
use tower::ServiceExt;

const API_KEY: HeaderName = HeaderName::from_static("x-api-key");

fn quotas() -> [(&'static str, Quota); 2] {
    // 10 a minute and 3 an hour: the second denies first.
    [("minute", Quota::per_minute(10).unwrap()), ("hour", Quota::per_hour(3).unwrap())]
}

fn router(layer: RateLimitLayer) -> Router {
    Router::new().route("/", get(|| async { "ok" })).layer(layer)
}

async fn send(app: &Router, api_key: &str) -> (StatusCode, String) {
    let peer = PeerAddr("203.0.113.9:40000".parse::<SocketAddr>().unwrap());
    let request = Request::get("/").extension(peer).header(API_KEY, api_key).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let state = response.headers().get("ratelimit").map(|v| v.to_str().unwrap().to_owned());
    (response.status(), state.unwrap_or_default())
}

/// The same two limits as a composite and as two limits added one by one.
fn both_paths(clock: &ManualClock) -> [Router; 2] {
    let composite =
        CompositeLimit::in_memory_with::<Gcra, _>(Key::header(API_KEY), quotas(), clock.clone()).unwrap();
    let [(a, qa), (b, qb)] = quotas();
    let one =
        |name, quota| Limit::in_memory_with::<Gcra, _>(name, quota, Key::header(API_KEY), clock.clone());
    let separate = RateLimitLayer::new(one(a, qa).unwrap()).limit(one(b, qb).unwrap());
    [router(RateLimitLayer::from_composite(composite)), router(separate)]
}

#[tokio::test(flavor = "current_thread")]
async fn after_a_denial_by_the_second_limit_every_header_shows_what_is_left() {
    let clock = ManualClock::new();
    for app in both_paths(&clock) {
        for left in [9, 8, 7] {
            let (status, _) = send(&app, "k").await;
            assert_eq!(status, StatusCode::OK, "{left} left");
        }
        let (status, state) = send(&app, "k").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        // The minute limit took nothing for the denied request: 7 left, not 6.
        assert_eq!(state, r#""minute";r=7;t=18, "hour";r=0;t=1200"#);
        let (status, state) = send(&app, "k").await;
        assert_eq!(
            (status, state.as_str()),
            (StatusCode::TOO_MANY_REQUESTS, r#""minute";r=7;t=18, "hour";r=0;t=1200"#)
        );
        // Another key is untouched.
        assert_eq!(
            send(&app, "other").await,
            (StatusCode::OK, r#""minute";r=9;t=6, "hour";r=2;t=1200"#.into())
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_composite_denied_by_a_later_limit_is_given_back_whole() {
    let clock = ManualClock::new();
    let composite =
        CompositeLimit::in_memory_with::<Gcra, _>(Key::header(API_KEY), quotas(), clock.clone()).unwrap();
    // Then a global limit of 1 a minute: the second request is denied by it.
    let global =
        Limit::in_memory_with::<Gcra, _>("global", Quota::per_minute(1).unwrap(), Key::global(), clock)
            .unwrap();
    let app = router(RateLimitLayer::from_composite(composite).limit(global));
    assert_eq!(send(&app, "k").await.0, StatusCode::OK);
    let (status, state) = send(&app, "k").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(state, r#""minute";r=9;t=6, "hour";r=2;t=1200, "global";r=0;t=60"#);
}

/// A composite whose checks complete later (as a shared store's would), counting its calls.
/// `leaky` is the should-fail twin: a request the hour limit denies still takes units of both
/// limits (a charge with no check), which the test below must catch.
struct Remote {
    limits: Arc<KeyedLimits<LimitKey, Gcra, ManualClock>>,
    checks: Arc<AtomicUsize>,
    leaky: bool,
}

impl CompositeLimiter for Remote {
    fn check(&self, key: &LimitKey, cost: u64) -> CompositeCheckFuture {
        let (limits, key, leaky) = (self.limits.clone(), key.clone(), self.leaky);
        self.checks.fetch_add(1, Ordering::Relaxed);
        CompositeCheckFuture::new(async move {
            tokio::task::yield_now().await;
            let decision = limits.check_n(&key, cost).map_err(kova_tower::LimiterError::from)?;
            if leaky && !decision.is_allowed() {
                // Takes from every limit though the check was denied.
                let _ = limits.settle(&key, 0, cost);
            }
            Ok(decision)
        })
    }
}

/// 64 concurrent requests through a composite of 30 a minute and 12 an hour, shared by every
/// request (one key): how many were admitted, each limit's units left, and the checks made.
async fn concurrent_run(leaky: bool) -> (usize, Vec<u64>, usize) {
    let clock = ManualClock::new();
    let quotas = [("minute", Quota::per_minute(30).unwrap()), ("hour", Quota::per_hour(12).unwrap())];
    let limits = Arc::new(KeyedLimits::with_clock(quotas.map(|(_, q)| q), clock).unwrap());
    let checks = Arc::new(AtomicUsize::new(0));
    let remote = Remote { limits: limits.clone(), checks: checks.clone(), leaky };
    let composite = CompositeLimit::new(Key::global(), quotas, remote).unwrap();
    let app = router(RateLimitLayer::from_composite(composite));
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { send(&app, "k").await.0 })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        if task.await.unwrap() == StatusCode::OK {
            admitted += 1;
        }
    }
    let after = limits.peek(&LimitKey::Global);
    let left = after.limit_decisions().iter().map(|d| d.remaining()).collect();
    (admitted, left, checks.load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_admit_what_the_sequential_composite_admits_in_one_check_each() {
    // The sequential composite admits 12 (the hour limit) and takes 12 from each limit; the 52
    // denials take nothing from either. One composite check per request, not one per limit.
    assert_eq!(concurrent_run(false).await, (12, vec![18, 0], 64));
    // The twin whose denials take units is caught.
    let (admitted, left, _) = concurrent_run(true).await;
    assert_eq!(admitted, 12);
    assert_ne!(left, [18, 0], "a composite whose denials take units must fail this test");
}

/// A member used on its own is denied when another member of its composite denies: the
/// composite took nothing, so neither may the request. (Its own entry of a denied composite is a
/// look at its state, which admits.)
#[tokio::test(flavor = "current_thread")]
async fn a_member_used_on_its_own_is_denied_when_another_member_denies() {
    let clock = ManualClock::new();
    let composite = CompositeLimit::in_memory_with::<Gcra, _>(Key::header(API_KEY), quotas(), clock).unwrap();
    let minute_alone = router(RateLimitLayer::new(composite.limits()[0].clone()));
    for remaining in [9, 8, 7] {
        let state = format!(r#""minute";r={remaining};t={}"#, 6 * (10 - remaining));
        assert_eq!(send(&minute_alone, "k").await, (StatusCode::OK, state));
    }
    // The hour (3) is used up: every later request is denied, the minute limit's units kept.
    for _ in 0..5 {
        let (status, state) = send(&minute_alone, "k").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{state}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_member_used_on_its_own_checks_its_whole_composite() {
    let clock = ManualClock::new();
    let composite = CompositeLimit::in_memory_with::<Gcra, _>(Key::header(API_KEY), quotas(), clock).unwrap();
    let hour_alone = router(RateLimitLayer::new(composite.limits()[1].clone()));
    let whole = router(RateLimitLayer::from_composite(composite));
    assert_eq!(send(&hour_alone, "k").await, (StatusCode::OK, r#""hour";r=2;t=1200"#.into()));
    // It took from the minute limit too: one check of the composite.
    assert_eq!(send(&whole, "k").await, (StatusCode::OK, r#""minute";r=8;t=12, "hour";r=1;t=2400"#.into()));
}

/// A member used on its own, then a later limit that denies: the whole composite gets its units
/// back (a denial takes nothing), though the layer holds only this member's decision.
#[tokio::test(flavor = "current_thread")]
async fn a_member_used_on_its_own_gives_the_composite_back_its_units_on_a_later_denial() {
    let clock = ManualClock::new();
    let composite =
        CompositeLimit::in_memory_with::<Gcra, _>(Key::header(API_KEY), quotas(), clock.clone()).unwrap();
    let global =
        Limit::in_memory_with::<Gcra, _>("global", Quota::per_minute(1).unwrap(), Key::global(), clock)
            .unwrap();
    let minute_alone = router(RateLimitLayer::new(composite.limits()[0].clone()).limit(global));
    let whole = router(RateLimitLayer::from_composite(composite));
    assert_eq!(send(&minute_alone, "k").await.0, StatusCode::OK);
    for _ in 0..4 {
        assert_eq!(send(&minute_alone, "k").await.0, StatusCode::TOO_MANY_REQUESTS);
    }
    // One request's units taken (the first), none of the four denied ones': the hour has 2 left
    // before this look takes its own.
    assert_eq!(send(&whole, "k").await, (StatusCode::OK, r#""minute";r=8;t=12, "hour";r=1;t=2400"#.into()));
}
