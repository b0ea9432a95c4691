//! The `metrics` feature: every decision reaches the installed recorder, read back the way
//! Prometheus reads it (the text format), in-process and from the example server's `/metrics`.

mod support;

#[allow(dead_code)]
#[path = "../examples/server/app.rs"]
mod app;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::OnceLock;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::header::HeaderName;
use http::{Request, StatusCode};
use kova::{Decision, Fallback, Quota};
use kova_tower::metrics_facade as names;
use kova_tower::{CheckFuture, Key, KeyedLimiter, Limit, LimitKey, PeerAddr, RateLimitLayer};
use metrics_exporter_prometheus::PrometheusHandle;
use support::{serve, HttpClient, CLIENT};
use tower::ServiceExt;

/// The process's recorder: one per test binary, shared by its tests (which use distinct limit
/// names, so their counts never mix).
fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| app::install_prometheus().expect("the first recorder installs"))
}

/// The value of the sample `name{labels}` in a Prometheus text exposition; `None` if absent.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<&str, &str> = labels.iter().copied().collect();
    text.lines().filter(|line| !line.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, label_text) = match series.split_once('{') {
            Some((metric, rest)) => (metric, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        if metric != name {
            return None;
        }
        let found: BTreeMap<&str, &str> = label_text
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').expect("label=value");
                (k, v.trim_matches('"'))
            })
            .collect();
        (found == wanted).then(|| value.parse().expect("a number"))
    })
}

/// A shared store that is down, with a fail-open policy of its own.
struct FailingOpen;

impl KeyedLimiter for FailingOpen {
    fn check(&self, _: &LimitKey, _: u64) -> CheckFuture {
        CheckFuture::ready(Ok(Decision::allowed(5, 5, 0).with_fallback(Fallback::StoreUnavailableAllowed)))
    }
}

#[tokio::test]
async fn every_decision_reaches_the_recorder_with_its_limit_name() {
    let handle = prometheus();
    let user = Limit::in_memory(
        "m-user",
        Quota::per_minute(100).unwrap(),
        Key::header(HeaderName::from_static("x-user")),
    )
    .unwrap();
    let ip = Limit::in_memory("m-ip", Quota::per_minute(2).unwrap(), Key::peer_ip()).unwrap();
    let store = Limit::new("m-store", Quota::per_minute(5).unwrap(), Key::global(), FailingOpen).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .layer(RateLimitLayer::new(user).limit(ip).limit(store));
    let peer = PeerAddr("203.0.113.7:1".parse::<SocketAddr>().unwrap());
    let request = |user: Option<&str>| {
        let mut builder = Request::get("/").extension(peer);
        if let Some(user) = user {
            builder = builder.header("x-user", user);
        }
        builder.body(Body::empty()).unwrap()
    };
    let statuses = [
        app.clone().oneshot(request(Some("alice"))).await.unwrap().status(),
        app.clone().oneshot(request(Some("alice"))).await.unwrap().status(),
        app.clone().oneshot(request(Some("alice"))).await.unwrap().status(),
        app.clone().oneshot(request(None)).await.unwrap().status(),
    ];
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS, StatusCode::BAD_REQUEST]
    );

    let text = handle.render();
    let get = |name: &str, labels: &[(&str, &str)]| sample(&text, name, labels);
    assert_eq!(get(names::ALLOWED, &[("limit", "m-user")]), Some(3.0), "{text}");
    assert_eq!(get(names::ALLOWED, &[("limit", "m-ip")]), Some(2.0));
    assert_eq!(get(names::DENIED, &[("limit", "m-ip"), ("mode", "enforced")]), Some(1.0));
    assert_eq!(get(names::DENIED, &[("limit", "m-user"), ("mode", "enforced")]), None);
    assert_eq!(get(names::ALLOWED, &[("limit", "m-store")]), Some(2.0));
    assert_eq!(
        get(names::FALLBACK, &[("limit", "m-store"), ("fallback", "store_unavailable_allowed")]),
        Some(2.0)
    );
    assert_eq!(get(names::KEY_ERRORS, &[("limit", "m-user")]), Some(1.0));
    // One decision time per decision made (a key error decides nothing).
    let count = format!("{}_count", names::DECISION_SECONDS);
    assert_eq!(get(&count, &[("limit", "m-user")]), Some(3.0));
    assert_eq!(get(&count, &[("limit", "m-ip")]), Some(3.0));
    assert_eq!(get(&count, &[("limit", "m-store")]), Some(2.0));
    let bucket = format!("{}_bucket", names::DECISION_SECONDS);
    assert_eq!(get(&bucket, &[("limit", "m-ip"), ("le", "+Inf")]), Some(3.0));
}

#[tokio::test]
async fn a_sketch_limits_decisions_are_counted_as_sketch_fallbacks() {
    let handle = prometheus();
    let sketch = Limit::sketch("m-sketch", Quota::per_minute(1).unwrap(), Key::peer_ip()).unwrap();
    let app = Router::new().route("/", get(|| async { "hi" })).layer(RateLimitLayer::new(sketch));
    let peer = PeerAddr("203.0.113.8:1".parse::<SocketAddr>().unwrap());
    for expected in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
        let response =
            app.clone().oneshot(Request::get("/").extension(peer).body(Body::empty()).unwrap()).await;
        assert_eq!(response.unwrap().status(), expected);
    }
    let text = handle.render();
    let get = |name: &str, labels: &[(&str, &str)]| sample(&text, name, labels);
    assert_eq!(get(names::FALLBACK, &[("limit", "m-sketch"), ("fallback", "sketch")]), Some(2.0), "{text}");
    assert_eq!(get(names::FALLBACK, &[("limit", "m-sketch"), ("fallback", "other")]), None);
    assert_eq!(get(names::DENIED, &[("limit", "m-sketch"), ("mode", "enforced")]), Some(1.0));
}

#[tokio::test]
async fn the_example_server_exposes_them_on_metrics() {
    let handle = prometheus().clone();
    let settings = app::Settings {
        trusted: kova_tower::client_ip::TrustedProxies::none(),
        per_ip: Quota::per_minute(10).unwrap(),
    };
    let server = serve(app::app(settings, handle).unwrap()).await;
    let client = HttpClient::new(server, CLIENT);
    // A search costs 5 of the 10 a minute.
    let statuses = [
        client.get("/search", &[]).await.status,
        client.get("/search", &[]).await.status,
        client.get("/search", &[]).await.status,
    ];
    assert_eq!(statuses, [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
    let scrape = client.get("/metrics", &[]).await;
    assert_eq!(scrape.status, StatusCode::OK);
    assert_eq!(scrape.header("content-type"), Some("text/plain; version=0.0.4"));
    // The scrape is not rate-limited (and not counted).
    assert!(scrape.header("ratelimit").is_none());
    let text = scrape.body;
    assert!(text.contains("# TYPE kova_allowed_total counter"), "{text}");
    assert!(text.contains("# HELP kova_allowed_total Requests a kova limit admitted."), "{text}");
    assert!(text.contains("# TYPE kova_decision_seconds histogram"), "{text}");
    assert_eq!(sample(&text, names::ALLOWED, &[("limit", "ip")]), Some(2.0), "{text}");
    assert_eq!(sample(&text, names::DENIED, &[("limit", "ip"), ("mode", "enforced")]), Some(1.0));
    assert_eq!(sample(&text, "kova_decision_seconds_count", &[("limit", "ip")]), Some(3.0));
}
