//! A limit keyed in fixed memory by kova's sketch (`Limit::sketch`), through the layer: 429 once
//! a key's quota is spent, other keys untouched, every decision marked `Fallback::Sketch`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::{body::Body, routing::get, Router};
use http::{Request, StatusCode};
use kova::sketch::{Sketch, SketchError};
use kova::{Fallback, ManualClock, Quota};
use kova_tower::{ConfigError, Event, EventKind, Key, Limit, PeerAddr, RateLimitLayer};
use tower::ServiceExt;

/// (allowed, fallback) of every decision the layer reports.
type Seen = Arc<Mutex<Vec<(bool, Option<Fallback>)>>>;

fn from(peer: &str) -> Request<Body> {
    let peer = PeerAddr(peer.parse::<SocketAddr>().unwrap());
    Request::get("/").extension(peer).body(Body::empty()).unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn a_sketch_limit_answers_429_once_a_keys_quota_is_spent() {
    let clock = ManualClock::new();
    let sketch = Sketch::builder(Quota::per_minute(3).unwrap()).clock(clock.clone()).build().unwrap();
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    let metrics = Arc::new(move |event: &Event<'_>| {
        let entry = match event.kind {
            EventKind::Allowed(d) | EventKind::NearLimit(d) => (true, d.fallback()),
            EventKind::Denied(d) => (false, d.fallback()),
            _ => return,
        };
        record.lock().unwrap().push(entry);
    });
    let limit = Limit::sketch_with("net", sketch, Key::peer_ip()).unwrap();
    let app =
        Router::new().route("/", get(|| async { "ok" })).layer(RateLimitLayer::new(limit).metrics(metrics));

    for remaining in [2, 1, 0] {
        let ok = app.clone().oneshot(from("[2001:db8:0:1::1]:4000")).await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(ok.headers()["ratelimit-policy"], r#""net";q=3;w=60"#);
        assert!(ok.headers()["ratelimit"].to_str().unwrap().starts_with(&format!(r#""net";r={remaining};"#)));
    }
    // The same /64 from another address: the same key, its quota spent.
    let limited = app.clone().oneshot(from("[2001:db8:0:1::2]:4000")).await.unwrap();
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.headers()["retry-after"], "20");
    // Another network is not limited by it.
    assert_eq!(app.clone().oneshot(from("198.51.100.7:4000")).await.unwrap().status(), StatusCode::OK);
    // One unit back after 20 s.
    clock.advance(Duration::from_secs(20));
    assert_eq!(app.clone().oneshot(from("[2001:db8:0:1::3]:4000")).await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        app.clone().oneshot(from("[2001:db8:0:1::3]:4000")).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    let seen = seen.lock().unwrap();
    let marked = Some(Fallback::Sketch);
    assert_eq!(
        *seen,
        [
            (true, marked),
            (true, marked),
            (true, marked),
            (false, marked),
            (true, marked),
            (true, marked),
            (false, marked)
        ]
    );
}

#[test]
fn a_sketch_limit_names_a_bad_quota() {
    let error =
        Limit::sketch("net", Quota::per_second(1).unwrap().with_burst(u64::MAX / 4).unwrap(), Key::peer_ip())
            .unwrap_err();
    assert!(matches!(error, ConfigError::Sketch(SketchError::Quota(_))), "{error:?}");
    assert!(error.to_string().starts_with("invalid sketch"), "{error}");
}
