//! `RateLimitLayer::same_body`: responses keep the inner service's body type, and the layer's own
//! responses (429, 400) arrive in it whole, with the same headers as without it.

use std::convert::Infallible;

use axum::body::Body;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use kova::{Gcra, ManualClock, Quota};
use kova_tower::{Key, Limit, PeerAddr, RateLimitLayer};
use tower::{Layer, ServiceExt};

fn limit() -> Limit {
    Limit::in_memory_with::<Gcra, _>("ip", Quota::per_minute(1).unwrap(), Key::peer_ip(), ManualClock::new())
        .unwrap()
}

fn request(peer: Option<&str>) -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    if let Some(peer) = peer {
        request.extensions_mut().insert(PeerAddr(peer.parse().unwrap()));
    }
    request
}

async fn text(response: Response<Body>) -> String {
    String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

#[tokio::test]
async fn the_inner_body_type_carries_every_answer() {
    let hello = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::from("hello")))
    });
    // The response type is axum's own `Body`: this binding does not compile otherwise.
    let service = RateLimitLayer::new(limit()).same_body().layer(hello);

    let ok: Response<Body> = service.clone().oneshot(request(Some("203.0.113.7:1"))).await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(ok.headers()["ratelimit-policy"], r#""ip";q=1;w=60"#);
    assert_eq!(ok.headers()["ratelimit"], r#""ip";r=0;t=60"#);
    assert_eq!(text(ok).await, "hello");

    let limited = service.clone().oneshot(request(Some("203.0.113.7:1"))).await.unwrap();
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.headers()["retry-after"], "60");
    assert_eq!(limited.headers()["ratelimit"], r#""ip";r=0;t=60"#);
    assert_eq!(limited.headers()["content-type"], "application/problem+json");
    let problem: serde_json::Value = serde_json::from_str(&text(limited).await).unwrap();
    assert_eq!(problem["violated-policies"], serde_json::json!(["ip"]));

    let no_peer = service.oneshot(request(None)).await.unwrap();
    assert_eq!(no_peer.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let problem: serde_json::Value = serde_json::from_str(&text(no_peer).await).unwrap();
    assert_eq!(problem["policy"], "ip");
}

/// The same answers as the default body mode, header for header and byte for byte.
#[tokio::test]
async fn same_answers_as_the_wrapped_body() {
    let hello = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::from("hello")))
    });
    let limit = limit();
    let same = RateLimitLayer::new(limit.clone()).same_body().layer(hello);
    let other = limit.clone();
    let wrapped = RateLimitLayer::new(
        Limit::in_memory_with::<Gcra, _>("ip", other.quota(), Key::peer_ip(), ManualClock::new()).unwrap(),
    )
    .layer(hello);
    for _ in 0..2 {
        let a = same.clone().oneshot(request(Some("198.51.100.1:1"))).await.unwrap();
        let b = wrapped.clone().oneshot(request(Some("198.51.100.1:1"))).await.unwrap();
        assert_eq!(a.status(), b.status());
        assert_eq!(a.headers(), b.headers());
        let b_body = b.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(text(a).await.as_bytes(), &b_body[..]);
    }
}
