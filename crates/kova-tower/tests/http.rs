//! The middleware over real HTTP: an axum server on a loopback port, real requests, every header
//! checked to the byte with a ManualClock.

mod support;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use http::header::HeaderName;
use http::StatusCode;
use kova::{Decision, Fallback, Gcra, Keyed, ManualClock, Quota};
use kova_tower::client_ip::TrustedProxies;
use kova_tower::{
    BackendFailurePolicy, CheckFuture, CountingMetrics, Counts, Key, KeyedLimiter, Limit, LimitKey,
    LimiterError, MissingKeyPolicy, RateLimitLayer,
};
use support::{serve, serve_with, HttpClient, CLIENT, PROXY};

fn quota(limit: u64, secs: u64) -> Quota {
    Quota::new(limit, Duration::from_secs(secs)).unwrap()
}

fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/search", get(|| async { "results" }))
        .route("/huge", get(|| async { "huge" }))
        .route("/report", get(|| async { "report" }))
        .route("/login", get(|| async { "welcome" }))
        .layer(layer)
}

fn counts(metrics: &CountingMetrics) -> Counts {
    metrics.snapshot()
}

#[tokio::test]
async fn allowed_and_denied_headers_are_exact_and_retry_after_rounds_up() {
    let clock = ManualClock::new();
    // 3 per minute: one unit back every 20 s.
    let limit = Limit::in_memory_with::<Gcra, _>("ip", quota(3, 60), Key::peer_ip(), clock.clone()).unwrap();
    let server = serve(app(RateLimitLayer::new(limit).legacy_headers(true))).await;
    let client = HttpClient::new(server, CLIENT);

    for (remaining, reset) in [(2, 20), (1, 40), (0, 60)] {
        let reply = client.get("/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "hello");
        assert_eq!(reply.header("ratelimit-policy"), Some(r#""ip";q=3;w=60"#));
        assert_eq!(reply.header("ratelimit"), Some(format!(r#""ip";r={remaining};t={reset}"#).as_str()));
        assert_eq!(reply.header("x-ratelimit-limit"), Some("3"));
        assert_eq!(reply.header("x-ratelimit-remaining"), Some(remaining.to_string().as_str()));
        assert_eq!(reply.header("x-ratelimit-reset"), Some(reset.to_string().as_str()));
        assert_eq!(reply.header("retry-after"), None);
    }

    let denied = client.get("/", &[]).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.header("retry-after"), Some("20"));
    assert_eq!(denied.header("cache-control"), Some("no-store"));
    assert_eq!(denied.header("content-type"), Some("application/problem+json"));
    assert_eq!(denied.header("ratelimit-policy"), Some(r#""ip";q=3;w=60"#));
    // On a denial, `t` names the moment of `Retry-After`; the legacy reset stays the full refill.
    assert_eq!(denied.header("ratelimit"), Some(r#""ip";r=0;t=20"#));
    assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(denied.header("x-ratelimit-reset"), Some("60"));
    let body: serde_json::Value = serde_json::from_str(&denied.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
            "title": "Request cannot be satisfied as assigned quota has been exceeded",
            "status": 429,
            "detail": "Too many requests (limit ip: 3 per minute). Try again in 20 seconds.",
            "violated-policies": ["ip"],
            "retry_after": 20,
        })
    );

    // 19.000000001 s to wait: rounded up to 20, never down to 19.
    clock.advance_nanos(999_999_999);
    let denied = client.get("/", &[]).await;
    assert_eq!(denied.header("retry-after"), Some("20"));
    assert_eq!(denied.header("ratelimit"), Some(r#""ip";r=0;t=20"#));
    // Exactly 19 s to wait.
    clock.advance_nanos(1);
    let denied = client.get("/", &[]).await;
    assert_eq!(denied.header("retry-after"), Some("19"));
    assert_eq!(denied.header("ratelimit"), Some(r#""ip";r=0;t=19"#));
    // Half a second to wait: 1, never 0.
    clock.set(19_500_000_000);
    let denied = client.get("/", &[]).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.header("retry-after"), Some("1"));
    assert!(denied.body.contains("Try again in 1 second."), "{}", denied.body);
    // A client that waited what it was told is admitted.
    clock.set(20_000_000_000);
    let allowed = client.get("/", &[]).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(allowed.header("ratelimit"), Some(r#""ip";r=0;t=60"#));
}

#[tokio::test]
async fn routes_have_their_own_costs_and_quotas() {
    let clock = ManualClock::new();
    let per_ip = Limit::in_memory_with::<Gcra, _>("ip", quota(5, 60), Key::peer_ip(), clock.clone())
        .unwrap()
        .cost_fn(|parts| match parts.uri.path() {
            "/search" => 3,
            "/huge" => 6,
            _ => 1,
        });
    let reports = Limit::in_memory_with::<Gcra, _>("report", quota(1, 3600), Key::peer_ip(), clock.clone())
        .unwrap()
        .when(|parts| parts.uri.path() == "/report");
    let server = serve(app(RateLimitLayer::new(per_ip).limit(reports))).await;
    let client = HttpClient::new(server, CLIENT);

    let huge = client.get("/huge", &[]).await;
    assert_eq!(huge.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        huge.body.contains(
            "Rate limit ip is misconfigured: this request costs 6 but at most 5 are admitted at once."
        ),
        "{}",
        huge.body
    );

    let cheap = client.get("/", &[]).await;
    assert_eq!(cheap.header("ratelimit-policy"), Some(r#""ip";q=5;w=60"#));
    assert_eq!(cheap.header("ratelimit"), Some(r#""ip";r=4;t=12"#));
    let search = client.get("/search", &[]).await;
    assert_eq!(search.status, StatusCode::OK);
    assert_eq!(search.header("ratelimit"), Some(r#""ip";r=1;t=48"#));
    // 3 more units need 2 more intervals of 12 s.
    let search = client.get("/search", &[]).await;
    assert_eq!(search.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(search.header("retry-after"), Some("24"));
    assert_eq!(search.header("ratelimit"), Some(r#""ip";r=1;t=24"#));
    // A cheap request still fits, and /report has a quota of its own on top.
    let report = client.get("/report", &[]).await;
    assert_eq!(report.status, StatusCode::OK);
    assert_eq!(report.header("ratelimit-policy"), Some(r#""ip";q=5;w=60, "report";q=1;w=3600"#));
    assert_eq!(report.header("ratelimit"), Some(r#""ip";r=0;t=60, "report";r=0;t=3600"#));
    clock.advance(Duration::from_secs(60));
    let report = client.get("/report", &[]).await;
    assert_eq!(report.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(report.header("retry-after"), Some("3540"));
    assert!(report.body.contains("limit report: 1 per hour"), "{}", report.body);
}

#[tokio::test]
async fn ipv6_clients_are_keyed_by_prefix() {
    for (prefix, same, other) in [
        (64, "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:3::1"),
        (48, "2001:db8:1:ffff::9", "2001:db8:2::1"),
    ] {
        let key = Key::client_ip(TrustedProxies::parse(PROXY).unwrap()).ipv6_prefix(prefix);
        let limit = Limit::in_memory_with::<Gcra, _>("ip", quota(1, 60), key, ManualClock::new()).unwrap();
        let server = serve(app(RateLimitLayer::new(limit))).await;
        let proxy = HttpClient::new(server, PROXY);
        let from = |ip: &'static str| [("x-forwarded-for", ip)];
        assert_eq!(proxy.get("/", &from("2001:db8:1:2::1")).await.status, StatusCode::OK, "/{prefix}");
        assert_eq!(proxy.get("/", &from(same)).await.status, StatusCode::TOO_MANY_REQUESTS, "/{prefix}");
        assert_eq!(proxy.get("/", &from(other)).await.status, StatusCode::OK, "/{prefix}");
    }
}

#[tokio::test]
async fn forwarded_for_is_honoured_from_trusted_proxies_only() {
    let key = Key::client_ip(TrustedProxies::parse(PROXY).unwrap());
    let limit = Limit::in_memory_with::<Gcra, _>("ip", quota(1, 60), key, ManualClock::new()).unwrap();
    let server = serve(app(RateLimitLayer::new(limit))).await;
    let direct = HttpClient::new(server, CLIENT);
    let proxy = HttpClient::new(server, PROXY);
    let xff = |value: &'static str| [("x-forwarded-for", value)];

    // An untrusted client cannot pick its key by writing the header.
    assert_eq!(direct.get("/", &xff("198.51.100.1")).await.status, StatusCode::OK);
    assert_eq!(direct.get("/", &xff("198.51.100.2")).await.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(direct.get("/", &[]).await.status, StatusCode::TOO_MANY_REQUESTS);

    // Through the trusted proxy, the rightmost address that is not a proxy is the client...
    assert_eq!(proxy.get("/", &xff("198.51.100.1")).await.status, StatusCode::OK);
    // ...so an address the client prepended changes nothing,
    assert_eq!(proxy.get("/", &xff("6.6.6.6, 198.51.100.1")).await.status, StatusCode::TOO_MANY_REQUESTS);
    // a different client has its own bucket, and proxy hops on the right are skipped.
    assert_eq!(proxy.get("/", &xff("198.51.100.2")).await.status, StatusCode::OK);
    assert_eq!(proxy.get("/", &xff("198.51.100.3, 127.0.0.2")).await.status, StatusCode::OK);

    // A trusted proxy that does not say whom it forwards for gets a clear error, not a bucket.
    let missing = proxy.get("/", &[]).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.header("content-type"), Some("application/problem+json"));
    assert!(
        missing.body.contains(
            "\"detail\":\"Cannot apply rate limit ip: the request came through a trusted proxy without a x-forwarded-for header.\""
        ),
        "{}",
        missing.body
    );
    let garbage = proxy.get("/", &xff("198.51.100.4, not-an-ip")).await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
    assert!(garbage.body.contains("is not a list of addresses"), "{}", garbage.body);
}

#[derive(Clone)]
struct User(String);

impl fmt::Display for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[tokio::test]
async fn layered_policy_ip_for_anonymous_user_for_authenticated_ip_and_username_on_login() {
    let clock = ManualClock::new();
    let in_memory = |name: &str, q: Quota, key: Key| {
        Limit::in_memory_with::<Gcra, _>(name, q, key, clock.clone()).unwrap()
    };
    // Every request from an IP, authenticated or not.
    let per_ip = in_memory("ip", quota(100, 60), Key::peer_ip().into());
    // The user when authenticated, else the IP.
    let per_client = in_memory("client", quota(3, 60), Key::user::<User>().or(Key::peer_ip()));
    // Login attempts per IP and username.
    let login = in_memory(
        "login",
        quota(1, 60),
        Key::peer_ip().and(Key::header_as("user", HeaderName::from_static("x-username"))),
    )
    .when(|parts| parts.uri.path() == "/login");
    let layer = RateLimitLayer::new(per_ip).limit(per_client).limit(login);
    // A stand-in authentication layer: "Authorization: Bearer NAME" becomes a User extension.
    let authenticate = tower::util::MapRequestLayer::new(|mut request: http::Request<axum::body::Body>| {
        let user = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|name| User(name.to_owned()));
        if let Some(user) = user {
            request.extensions_mut().insert(user);
        }
        request
    });
    let server = serve(app(layer).layer(authenticate)).await;
    let client = HttpClient::new(server, CLIENT);
    let alice = [("authorization", "Bearer alice")];

    let anonymous = client.get("/", &[]).await;
    assert_eq!(anonymous.header("ratelimit-policy"), Some(r#""ip";q=100;w=60, "client";q=3;w=60"#));
    assert_eq!(anonymous.header("ratelimit"), Some(r#""ip";r=99;t=1, "client";r=2;t=20"#));
    for _ in 0..3 {
        assert_eq!(client.get("/", &alice).await.status, StatusCode::OK);
    }
    let limited = client.get("/", &alice).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.header("retry-after"), Some("20"));
    // The IP check passed, but the user limit denied the request, so the IP limit's unit is
    // refunded (a rejected request consumes no quota) and its member shows what is left after.
    assert_eq!(limited.header("ratelimit"), Some(r#""ip";r=96;t=3, "client";r=0;t=20"#));
    assert!(limited.body.contains("limit client: 3 per minute"), "{}", limited.body);
    // Another user on the same IP, and the anonymous IP bucket, are untouched by alice.
    // Bob's request is the IP's fifth charged unit (alice's denied one was given back).
    let bob = client.get("/", &[("authorization", "Bearer bob")]).await;
    assert_eq!(bob.header("ratelimit"), Some(r#""ip";r=95;t=3, "client";r=2;t=20"#));
    let anonymous = client.get("/", &[]).await;
    assert_eq!(anonymous.header("ratelimit"), Some(r#""ip";r=94;t=4, "client";r=1;t=40"#));

    // Logins (from another address): one attempt per minute per IP and username.
    let other = HttpClient::new(server, PROXY);
    let first = other.get("/login", &[("x-username", "alice")]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some(r#""ip";q=100;w=60, "client";q=3;w=60, "login";q=1;w=60"#)
    );
    let again = other.get("/login", &[("x-username", "alice")]).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(again.header("retry-after"), Some("60"));
    assert_eq!(other.get("/login", &[("x-username", "bob")]).await.status, StatusCode::OK);
    let nameless = HttpClient::new(server, "127.0.0.3").get("/login", &[]).await;
    assert_eq!(nameless.status, StatusCode::BAD_REQUEST);
    assert!(nameless.body.contains("the request has no x-username header"), "{}", nameless.body);
}

#[tokio::test]
async fn shadow_mode_decides_and_records_but_denies_nothing() {
    let metrics = Arc::new(CountingMetrics::default());
    let limit =
        Limit::in_memory_with::<Gcra, _>("ip", quota(1, 60), Key::peer_ip(), ManualClock::new()).unwrap();
    let layer = RateLimitLayer::new(limit).shadow(true).metrics(metrics.clone());
    let server = serve(app(layer)).await;
    let client = HttpClient::new(server, CLIENT);
    for _ in 0..3 {
        let reply = client.get("/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.header("ratelimit"), None);
        assert_eq!(reply.header("ratelimit-policy"), None);
    }
    let counts = counts(&metrics);
    // The first request took the last unit (near the limit); the two after it would have been
    // denied.
    assert_eq!((counts.allowed, counts.near_limit, counts.denied, counts.shadow_denied), (0, 1, 0, 2));
}

/// A store that is down: every check fails after a moment.
struct DownStore;

impl KeyedLimiter for DownStore {
    fn check(&self, _: &LimitKey, _: u64) -> CheckFuture {
        CheckFuture::new(async {
            tokio::task::yield_now().await;
            Err(LimiterError::backend("connection refused"))
        })
    }
}

/// A store that is down, with a fail-open policy of its own.
struct FailOpenStore;

impl KeyedLimiter for FailOpenStore {
    fn check(&self, _: &LimitKey, _: u64) -> CheckFuture {
        CheckFuture::new(async {
            tokio::task::yield_now().await;
            Ok(Decision::allowed(10, 0, 0).with_fallback(Fallback::StoreUnavailableAllowed))
        })
    }
}

#[tokio::test]
async fn a_failing_backend_follows_the_failure_policy_and_shows_in_metrics() {
    let store = |limiter: Arc<dyn KeyedLimiter>| {
        Limit::from_shared("store", quota(10, 60), Key::peer_ip(), limiter).unwrap()
    };

    // No policy anywhere: 503, not silently unlimited.
    let metrics = Arc::new(CountingMetrics::default());
    let server = serve(app(RateLimitLayer::new(store(Arc::new(DownStore))).metrics(metrics.clone()))).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(reply.header("content-type"), Some("application/problem+json"));
    assert!(reply.body.contains("Rate limit store cannot be checked right now"), "{}", reply.body);
    assert!(!reply.body.contains("connection refused"), "internal errors stay internal: {}", reply.body);
    assert_eq!(counts(&metrics).backend_failures, 1);

    // The layer's fail-open: passes, announces the policy, publishes no made-up remaining count.
    let metrics = Arc::new(CountingMetrics::default());
    let layer = RateLimitLayer::new(store(Arc::new(DownStore))).backend_failure(BackendFailurePolicy::Allow);
    let server = serve(app(layer.metrics(metrics.clone()))).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("ratelimit-policy"), Some(r#""store";q=10;w=60"#));
    assert_eq!(reply.header("ratelimit"), None);
    let c = counts(&metrics);
    assert_eq!((c.backend_failures, c.allowed, c.near_limit), (1, 1, 0));

    // The layer's fail-closed: 429 with the configured wait, rounded up.
    let layer = RateLimitLayer::new(store(Arc::new(DownStore)))
        .backend_failure(BackendFailurePolicy::Deny { retry_after: Duration::from_millis(1500) });
    let server = serve(app(layer)).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.header("retry-after"), Some("2"));
    assert_eq!(reply.header("ratelimit"), Some(r#""store";r=0;t=2"#));
    assert!(
        reply.body.contains(
            "Rate limit store cannot be checked right now, so requests are refused. Try again in 2 seconds."
        ),
        "{}",
        reply.body
    );

    // The backend's own fail-open policy: enforced as decided, and counted as a failure.
    let metrics = Arc::new(CountingMetrics::default());
    let server =
        serve(app(RateLimitLayer::new(store(Arc::new(FailOpenStore))).metrics(metrics.clone()))).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("ratelimit"), None);
    assert_eq!(counts(&metrics).backend_failures, 1);

    // Shadow mode lets even a failing backend's requests through.
    let layer = RateLimitLayer::new(store(Arc::new(DownStore))).shadow(true);
    let server = serve(app(layer)).await;
    assert_eq!(HttpClient::new(server, CLIENT).get("/", &[]).await.status, StatusCode::OK);
}

/// A store that is down, whose own degrade policy decided locally at this server's share and
/// denied.
struct DegradedStore;

impl KeyedLimiter for DegradedStore {
    fn check(&self, _: &LimitKey, _: u64) -> CheckFuture {
        CheckFuture::ready(Ok(Decision::denied(10, 0, 3_000_000_000, 6_000_000_000)
            .with_fallback(Fallback::StoreUnavailableLocal)))
    }
}

#[tokio::test]
async fn a_store_deciding_locally_is_counted_as_a_failure_and_says_its_capacity_is_reduced() {
    let metrics = Arc::new(CountingMetrics::default());
    let limit = Limit::from_shared("store", quota(10, 60), Key::peer_ip(), Arc::new(DegradedStore)).unwrap();
    let server = serve(app(RateLimitLayer::new(limit).metrics(metrics.clone()))).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.header("retry-after"), Some("3"));
    let body: serde_json::Value = serde_json::from_str(&reply.body).expect("a JSON problem body");
    assert_eq!(body["type"], kova_tower::TEMPORARY_REDUCED_CAPACITY, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("decided on this server alone"), "{body}");
    assert_eq!(counts(&metrics).backend_failures, 1);
}

/// An in-memory limiter behind an await, as a networked store would be.
struct Slow(Arc<Keyed<LimitKey, Gcra, ManualClock>>);

impl KeyedLimiter for Slow {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        let (limiter, key) = (self.0.clone(), key.clone());
        CheckFuture::new(async move {
            tokio::task::yield_now().await;
            limiter.check_n(&key, cost).map_err(LimiterError::from)
        })
    }
}

#[tokio::test]
async fn asynchronous_limiters_give_the_same_answers_and_chain_with_others() {
    let clock = ManualClock::new();
    let slow = Slow(Arc::new(Keyed::with_clock(quota(2, 60), clock.clone()).unwrap()));
    let shared = Limit::new("shared", quota(2, 60), Key::peer_ip(), slow).unwrap();
    let local = Limit::in_memory_with::<Gcra, _>("local", quota(10, 60), Key::global(), clock).unwrap();
    let server = serve(app(RateLimitLayer::new(shared).limit(local))).await;
    let client = HttpClient::new(server, CLIENT);
    let first = client.get("/", &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header("ratelimit"), Some(r#""shared";r=1;t=30, "local";r=9;t=6"#));
    assert_eq!(client.get("/", &[]).await.status, StatusCode::OK);
    let denied = client.get("/", &[]).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.header("retry-after"), Some("30"));
    // The denial came from the first limit: the second was not charged.
    assert_eq!(denied.header("ratelimit-policy"), Some(r#""shared";q=2;w=60"#));
    assert_eq!(denied.header("ratelimit"), Some(r#""shared";r=0;t=30"#));
}

#[tokio::test]
async fn missing_keys_are_errors_or_skips_never_a_shared_bucket() {
    // No connection info: the peer is unknown.
    let limit = Limit::in_memory("ip", quota(1, 60), Key::peer_ip()).unwrap();
    let server = serve_with(app(RateLimitLayer::new(limit)), false).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(reply.body.contains("the server does not know the client's address"), "{}", reply.body);

    // An API-key limit: no key is a 400; a repeated header is malformed.
    let metrics = Arc::new(CountingMetrics::default());
    let api_key = || Key::header(HeaderName::from_static("x-api-key"));
    let limit = Limit::in_memory("api", quota(2, 60), api_key()).unwrap();
    let server = serve(app(RateLimitLayer::new(limit).metrics(metrics.clone()))).await;
    let client = HttpClient::new(server, CLIENT);
    let reply = client.get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.body.contains("the request has no x-api-key header"), "{}", reply.body);
    let reply = client.get("/", &[("x-api-key", "a"), ("x-api-key", "b")]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let reply = client.get("/", &[("x-api-key", "k-123")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("ratelimit"), Some(r#""api";r=1;t=30"#));
    assert_eq!(counts(&metrics).key_errors, 2);

    // Skip: the limit does not apply to requests without the key.
    let limit = Limit::in_memory("api", quota(2, 60), api_key()).unwrap().missing_key(MissingKeyPolicy::Skip);
    let server = serve(app(RateLimitLayer::new(limit))).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("ratelimit"), None);
}

#[tokio::test]
async fn the_rejection_response_can_be_customised() {
    let limit =
        Limit::in_memory_with::<Gcra, _>("ip", quota(1, 60), Key::peer_ip(), ManualClock::new()).unwrap();
    let layer = RateLimitLayer::new(limit).on_rejection(|rejection, mut response| {
        let secs = rejection.retry_after_secs().unwrap_or(1);
        *response.body_mut() =
            bytes::Bytes::from(format!("slow down: {} again in {secs}s\n", rejection.limit().name()));
        response.headers_mut().insert("content-type", "text/plain".parse().unwrap());
        response
    });
    let server = serve(app(layer)).await;
    let client = HttpClient::new(server, CLIENT);
    assert_eq!(client.get("/", &[]).await.status, StatusCode::OK);
    let reply = client.get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.body, "slow down: ip again in 60s\n");
    assert_eq!(reply.header("content-type"), Some("text/plain"));
    assert_eq!(reply.header("retry-after"), Some("60"));
    assert_eq!(reply.header("ratelimit"), Some(r#""ip";r=0;t=60"#));
}
