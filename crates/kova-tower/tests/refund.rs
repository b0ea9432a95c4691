//! A request rejected by a later limit consumes no quota from the earlier ones: what they took
//! is refunded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::{body::Body, routing::get, Router};
use http::{HeaderName, Request, StatusCode};
use kova::{Decision, FixedWindow, Gcra, Keyed, ManualClock, Quota};
use kova_tower::{CheckFuture, Key, KeyedLimiter, Limit, LimitKey, PeerAddr, RateLimitLayer};
use tower::ServiceExt;

#[tokio::test(flavor = "current_thread")]
async fn a_request_denied_by_the_second_limit_keeps_the_first_limits_quota() {
    let clock = ManualClock::new();
    // Per IP: 10 a minute. Per API key: 1 a minute, checked second.
    let per_ip =
        Limit::in_memory_with::<Gcra, _>("ip", Quota::per_minute(10).unwrap(), Key::peer_ip(), clock.clone())
            .unwrap();
    let per_key = Limit::in_memory_with::<Gcra, _>(
        "key",
        Quota::per_minute(1).unwrap(),
        Key::header(HeaderName::from_static("x-api-key")),
        clock,
    )
    .unwrap();
    let app =
        Router::new().route("/", get(|| async { "ok" })).layer(RateLimitLayer::new(per_ip).limit(per_key));
    let peer = PeerAddr("203.0.113.9:40000".parse::<SocketAddr>().unwrap());
    let request = || Request::get("/").extension(peer).header("x-api-key", "k").body(Body::empty()).unwrap();

    let first = app.clone().oneshot(request()).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["ratelimit"], r#""ip";r=9;t=6, "key";r=0;t=60"#);

    // Five requests denied by the per-key limit...
    for _ in 0..5 {
        let denied = app.clone().oneshot(request()).await.unwrap();
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    // ...left the per-IP limit where the first request put it: 9 remaining, not 4.
    let other_key =
        Request::get("/").extension(peer).header("x-api-key", "other").body(Body::empty()).unwrap();
    let next = app.clone().oneshot(other_key).await.unwrap();
    assert_eq!(next.status(), StatusCode::OK);
    assert_eq!(next.headers()["ratelimit"], r#""ip";r=8;t=12, "key";r=0;t=60"#);
}

/// A store that never answers.
struct NeverAnswers;

impl KeyedLimiter for NeverAnswers {
    fn check(&self, _: &LimitKey, _: u64) -> CheckFuture {
        CheckFuture::new(std::future::pending())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_request_dropped_while_a_later_check_waits_gives_back_what_earlier_limits_took() {
    let quota = Quota::per_minute(10).unwrap();
    let shared = Arc::new(Keyed::<LimitKey, Gcra, _>::with_clock(quota, ManualClock::new()).unwrap());
    let first = Limit::new("local", quota, Key::global(), shared.clone()).unwrap();
    let second = Limit::new("store", quota, Key::global(), NeverAnswers).unwrap();
    let app =
        Router::new().route("/", get(|| async { "ok" })).layer(RateLimitLayer::new(first).limit(second));
    let request = Request::get("/").body(Body::empty()).unwrap();
    // The client gives up (or an outer timeout fires) while the second limit's check waits.
    let gave_up = tokio::time::timeout(Duration::from_millis(1), app.oneshot(request)).await;
    assert!(gave_up.is_err(), "the second limit never answers");
    // The request was never served: the first limit has all its quota.
    assert_eq!(shared.peek(&LimitKey::Global).remaining(), 10);
}

/// A later limit whose check is answered a minute on, after another request took 5 units of the
/// shared limit's new window, and denies.
struct DeniesAMinuteLater {
    clock: ManualClock,
    shared: Arc<Keyed<LimitKey, FixedWindow, ManualClock>>,
}

impl KeyedLimiter for DeniesAMinuteLater {
    fn check(&self, _: &LimitKey, _: u64) -> CheckFuture {
        self.clock.advance(Duration::from_secs(60));
        assert!(self.shared.check_n(&LimitKey::Global, 5).unwrap().is_allowed());
        CheckFuture::ready(Ok(Decision::denied(1, 0, 1_000_000_000, 1_000_000_000)))
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_refund_after_its_window_ended_gives_nothing_to_the_next_window() {
    let clock = ManualClock::new();
    let quota = Quota::per_minute(10).unwrap();
    let shared = Arc::new(Keyed::<LimitKey, FixedWindow, _>::with_clock(quota, clock.clone()).unwrap());
    let first = Limit::new("window", quota, Key::global(), shared.clone()).unwrap().cost(5);
    let later = DeniesAMinuteLater { clock, shared: shared.clone() };
    let second = Limit::new("later", Quota::per_minute(1).unwrap(), Key::global(), later).unwrap();
    let app =
        Router::new().route("/", get(|| async { "ok" })).layer(RateLimitLayer::new(first).limit(second));
    let response = app.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    // The 5 went into the ended window: the new one holds only the other request's 5.
    let passed = (0..10).filter(|_| shared.check_n(&LimitKey::Global, 1).unwrap().is_allowed()).count();
    assert_eq!(passed, 5);
}

/// A later limit whose check is answered half a second on, after another request took 5 units
/// of the shared GCRA limit, and denies.
struct DeniesHalfASecondLater {
    clock: ManualClock,
    shared: Arc<Keyed<LimitKey, Gcra, ManualClock>>,
}

impl KeyedLimiter for DeniesHalfASecondLater {
    fn check(&self, _: &LimitKey, _: u64) -> CheckFuture {
        self.clock.advance(Duration::from_millis(500));
        assert!(self.shared.check_n(&LimitKey::Global, 5).unwrap().is_allowed());
        CheckFuture::ready(Ok(Decision::denied(1, 0, 1_000_000_000, 1_000_000_000)))
    }
}

/// GCRA 10 a second (burst 10): the request took 10 at 0 and is denied at 500 ms, after another
/// request took 5. Half its units have refilled and been taken again: 5 come back, not 10
/// (which admitted 15 at one instant against the burst of 10).
#[tokio::test(flavor = "current_thread")]
async fn a_late_refund_gives_back_only_what_has_not_refilled() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap();
    let shared = Arc::new(Keyed::<LimitKey, Gcra, _>::with_clock(quota, clock.clone()).unwrap());
    let first = Limit::new("gcra", quota, Key::global(), shared.clone()).unwrap().cost(10);
    let later = DeniesHalfASecondLater { clock, shared: shared.clone() };
    let second = Limit::new("later", Quota::per_minute(1).unwrap(), Key::global(), later).unwrap();
    let app =
        Router::new().route("/", get(|| async { "ok" })).layer(RateLimitLayer::new(first).limit(second));
    let response = app.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let passed = (0..20).filter(|_| shared.check_n(&LimitKey::Global, 1).unwrap().is_allowed()).count();
    assert_eq!(passed, 5);
}
