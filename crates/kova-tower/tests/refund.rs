//! A request rejected by a later limit consumes no quota from the earlier ones: what they took
//! is refunded.

use std::net::SocketAddr;

use axum::{body::Body, routing::get, Router};
use http::{HeaderName, Request, StatusCode};
use kova::{Gcra, ManualClock, Quota};
use kova_tower::{Key, Limit, PeerAddr, RateLimitLayer};
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
