//! The Redis backend (feature `redis`) behind the layer, over real HTTP: against a real
//! `redis-server` started by the test, and against a Redis that is down. Built only with the
//! `redis` feature (`required-features` in Cargo.toml).

mod support;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use http::StatusCode;
use kova::{ManualClock, Quota};
use kova_redis::StoreFailurePolicy;
use kova_tower::{
    BackendFailurePolicy, CompositeLimit, CountingMetrics, Key, Limit, RateLimitLayer, RedisBackend,
};
use support::{serve, HttpClient, CLIENT};

/// A `redis-server` on a free loopback port, stopped when dropped.
struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> Option<Self> {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start on port {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("address").port()
}

fn app(layer: RateLimitLayer) -> Router {
    Router::new().route("/", get(|| async { "hello" })).layer(layer)
}

#[tokio::test]
async fn a_redis_limit_gives_the_same_headers_as_an_in_memory_one() {
    let Some(redis) = RedisServer::start() else {
        panic!("redis-server is not installed: the redis feature's tests need it");
    };
    let clock = ManualClock::new();
    // The client clock must be well inside the scripts' range: start at 1 s.
    clock.set(1_000_000_000);
    let limiter = kova_redis::RedisLimiter::builder()
        .client_clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .ttl_margin(Duration::from_secs(3600))
        .connect(&redis.url())
        .await
        .expect("connect to the test's redis-server");
    let limit = kova_redis::RedisLimit::gcra(Quota::per_minute(3).unwrap()).unwrap();
    let limit = Limit::redis("ip", Key::peer_ip(), RedisBackend::new(limiter, limit)).unwrap();
    let server = serve(app(RateLimitLayer::new(limit))).await;
    let client = HttpClient::new(server, CLIENT);
    for (remaining, reset) in [(2, 20), (1, 40), (0, 60)] {
        let reply = client.get("/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.header("ratelimit-policy"), Some(r#""ip";q=3;w=60"#));
        assert_eq!(reply.header("ratelimit"), Some(format!(r#""ip";r={remaining};t={reset}"#).as_str()));
    }
    let denied = client.get("/", &[]).await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.header("retry-after"), Some("20"));
    assert_eq!(denied.header("ratelimit"), Some(r#""ip";r=0;t=20"#));
    clock.advance(Duration::from_millis(19_500));
    assert_eq!(client.get("/", &[]).await.header("retry-after"), Some("1"));
    clock.advance(Duration::from_millis(500));
    assert_eq!(client.get("/", &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_redis_that_is_down_follows_its_failure_policy() {
    // Nothing listens on this port.
    let url = format!("redis://127.0.0.1:{}", free_port());
    let backend = |policy: StoreFailurePolicy| {
        let limiter = kova_redis::RedisLimiter::builder()
            .timeout(Duration::from_millis(200))
            .store_failure(policy)
            .unavailable_retry_after(Duration::from_secs(2))
            .open(&url)
            .expect("a lazily connected limiter");
        let limit = kova_redis::RedisLimit::gcra(Quota::per_minute(3).unwrap()).unwrap();
        Limit::redis("shared", Key::peer_ip(), RedisBackend::new(limiter, limit)).unwrap()
    };

    let metrics = Arc::new(CountingMetrics::default());
    let server =
        serve(app(RateLimitLayer::new(backend(StoreFailurePolicy::FailOpen)).metrics(metrics.clone()))).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("ratelimit"), None);
    assert_eq!(metrics.snapshot().backend_failures, 1);

    let server = serve(app(RateLimitLayer::new(backend(StoreFailurePolicy::FailClosed)))).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.header("retry-after"), Some("2"));

    let metrics = Arc::new(CountingMetrics::default());
    let layer = RateLimitLayer::new(backend(StoreFailurePolicy::ReturnError)).metrics(metrics.clone());
    let server = serve(app(layer)).await;
    let reply = HttpClient::new(server, CLIENT).get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(metrics.snapshot().backend_failures, 1);

    let layer = RateLimitLayer::new(backend(StoreFailurePolicy::ReturnError))
        .backend_failure(BackendFailurePolicy::Allow);
    let server = serve(app(layer)).await;
    assert_eq!(HttpClient::new(server, CLIENT).get("/", &[]).await.status, StatusCode::OK);
}

/// A Redis limiter on a manual client clock, against the test's redis-server.
async fn redis_limiter(redis: &RedisServer, clock: &ManualClock) -> kova_redis::RedisLimiter {
    kova_redis::RedisLimiter::builder()
        .client_clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .ttl_margin(Duration::from_secs(3600))
        .connect(&redis.url())
        .await
        .expect("connect to the test's redis-server")
}

/// Several limits in Redis as one composite: one script decides them all or nothing, so a
/// denial by the second limit takes nothing from the first, and every member's header says so.
#[tokio::test]
async fn a_redis_composite_is_all_or_nothing_and_heads_every_limit() {
    let redis =
        RedisServer::start().expect("redis-server is not installed: the redis feature's tests need it");
    let clock = ManualClock::new();
    clock.set(1_000_000_000);
    let limiter = redis_limiter(&redis, &clock).await;
    let limits = CompositeLimit::redis(
        Key::peer_ip(),
        limiter,
        [
            ("minute", kova_redis::RedisLimit::gcra(Quota::per_minute(3).unwrap()).unwrap()),
            ("hour", kova_redis::RedisLimit::fixed_window(Quota::per_hour(2).unwrap()).unwrap()),
        ],
    )
    .unwrap();
    let server = serve(app(RateLimitLayer::from_composite(limits))).await;
    let client = HttpClient::new(server, CLIENT);
    for (minute, hour) in [(2, 1), (1, 0)] {
        let reply = client.get("/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        let state = reply.header("ratelimit").expect("a RateLimit header");
        assert!(state.contains(&format!(r#""minute";r={minute};"#)), "{state}");
        assert!(state.contains(&format!(r#""hour";r={hour};"#)), "{state}");
    }
    // The hour limit denies; the minute limit keeps its last unit, on this denial and the next.
    for _ in 0..2 {
        let denied = client.get("/", &[]).await;
        assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
        let state = denied.header("ratelimit").expect("a RateLimit header");
        assert!(state.contains(r#""minute";r=1;"#), "{state}");
        assert!(state.contains(r#""hour";r=0;"#), "{state}");
    }
}

/// A Redis limit settles the response's real cost in Redis: the estimate is charged, the
/// lower actual cost refunded before the header is written, and the next request sees it.
#[tokio::test]
async fn a_redis_limit_settles_the_cost_the_response_reports() {
    let redis =
        RedisServer::start().expect("redis-server is not installed: the redis feature's tests need it");
    let clock = ManualClock::new();
    clock.set(1_000_000_000);
    let limiter = redis_limiter(&redis, &clock).await;
    let limit = kova_redis::RedisLimit::gcra(Quota::per_minute(10).unwrap()).unwrap();
    let limit = Limit::redis("tokens", Key::peer_ip(), RedisBackend::new(limiter, limit))
        .unwrap()
        .cost(4)
        .settle_from_header(http::HeaderName::from_static("x-cost"));
    let router = Router::new().route("/", get(|| async { ([("x-cost", "1")], "hello") }));
    let server = serve(router.layer(RateLimitLayer::new(limit))).await;
    let client = HttpClient::new(server, CLIENT);
    for remaining in [9, 8] {
        let reply = client.get("/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        let state = reply.header("ratelimit").expect("a RateLimit header");
        assert!(state.starts_with(&format!(r#""tokens";r={remaining};"#)), "{state}");
    }
}

/// Two limits of one algorithm on one Redis limiter and the same key each keep their own state
/// in Redis (the limit's name is part of the Redis key), as two in-memory limits keep their own
/// tables; so do two Redis composites on the same key.
#[tokio::test]
async fn two_redis_limits_on_one_key_keep_their_own_state() {
    let Some(redis) = RedisServer::start() else {
        panic!("redis-server is not installed: the redis feature's tests need it");
    };
    let clock = ManualClock::new();
    clock.set(1_000_000_000);
    let limiter = redis_limiter(&redis, &clock).await;
    let burst = kova_redis::RedisLimit::gcra(Quota::per_minute(10).unwrap()).unwrap();
    let daily = kova_redis::RedisLimit::gcra(Quota::per_day(1000).unwrap()).unwrap();
    let layer = RateLimitLayer::new(
        Limit::redis("burst", Key::peer_ip(), RedisBackend::new(limiter.clone(), burst)).unwrap(),
    )
    .limit(Limit::redis("daily", Key::peer_ip(), RedisBackend::new(limiter.clone(), daily)).unwrap());
    let server = serve(app(layer)).await;
    let client = HttpClient::new(server, CLIENT);
    for n in 1..=3 {
        let reply = client.get("/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.header("ratelimit"));
        let got = reply.header("ratelimit").unwrap_or_default().to_owned();
        assert!(got.starts_with(&format!(r#""burst";r={};"#, 10 - n)), "{got}");
        assert!(got.contains(&format!(r#""daily";r={};"#, 1000 - n)), "{got}");
    }
    // Two composites on the same key, one in the other's way if they shared their state.
    let tight = CompositeLimit::redis(
        Key::peer_ip(),
        limiter.clone(),
        [("a", kova_redis::RedisLimit::gcra(Quota::per_minute(2).unwrap()).unwrap())],
    )
    .unwrap();
    let loose = CompositeLimit::redis(
        Key::peer_ip(),
        limiter,
        [("b", kova_redis::RedisLimit::gcra(Quota::per_minute(100).unwrap()).unwrap())],
    )
    .unwrap();
    let tight = HttpClient::new(serve(app(RateLimitLayer::from_composite(tight))).await, CLIENT);
    let loose = HttpClient::new(serve(app(RateLimitLayer::from_composite(loose))).await, CLIENT);
    for _ in 0..2 {
        assert_eq!(tight.get("/", &[]).await.status, StatusCode::OK);
    }
    assert_eq!(tight.get("/", &[]).await.status, StatusCode::TOO_MANY_REQUESTS);
    for n in 1..=3 {
        let reply = loose.get("/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        let got = reply.header("ratelimit").unwrap_or_default().to_owned();
        assert!(got.starts_with(&format!(r#""b";r={};"#, 100 - n)), "{got}");
    }
}

/// A Redis limit's units come back when a later limit of the layer rejects the request (a
/// rejected request consumes no quota), given back in Redis in a task of the runtime.
#[tokio::test]
async fn a_redis_limit_gives_its_units_back_when_a_later_limit_rejects() {
    let redis =
        RedisServer::start().expect("redis-server is not installed: the redis feature's tests need it");
    let clock = ManualClock::new();
    clock.set(1_000_000_000);
    let limiter = redis_limiter(&redis, &clock).await;
    let per_ip = kova_redis::RedisLimit::gcra(Quota::per_minute(5).unwrap()).unwrap();
    let user = http::HeaderName::from_static("x-user");
    let layer =
        RateLimitLayer::new(Limit::redis("ip", Key::peer_ip(), RedisBackend::new(limiter, per_ip)).unwrap())
            .limit(Limit::in_memory("user", Quota::per_minute(1).unwrap(), Key::header(user)).unwrap());
    let client = HttpClient::new(serve(app(layer)).await, CLIENT);
    assert_eq!(client.get("/", &[("x-user", "a")]).await.status, StatusCode::OK);
    for _ in 0..3 {
        assert_eq!(client.get("/", &[("x-user", "a")]).await.status, StatusCode::TOO_MANY_REQUESTS);
    }
    // Let the refunds' tasks reach Redis.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let reply = client.get("/", &[("x-user", "b")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let state = reply.header("ratelimit").unwrap_or_default().to_owned();
    assert!(
        state.starts_with(r#""ip";r=3;"#),
        "the three rejected requests took from the IP's limit: {state}"
    );
}

/// A check answered from a lease of Redis units (`Fallback::LocalCache`) took its units, so the
/// cost the response reports is settled in Redis like any other.
#[tokio::test]
async fn a_leased_redis_decision_is_settled_too() {
    let redis =
        RedisServer::start().expect("redis-server is not installed: the redis feature's tests need it");
    let clock = ManualClock::new();
    clock.set(1_000_000_000);
    let leasing = kova_redis::RedisLimiter::builder()
        .client_clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .ttl_margin(Duration::from_secs(3600))
        .leasing(kova_redis::Leasing::new(4, Duration::from_secs(10)))
        .connect(&redis.url())
        .await
        .unwrap();
    let limit = kova_redis::RedisLimit::gcra(Quota::per_minute(1000).unwrap()).unwrap();
    let layer = RateLimitLayer::new(
        Limit::redis("tokens", Key::peer_ip(), RedisBackend::new(leasing.clone(), limit))
            .unwrap()
            .settle_from_header(http::HeaderName::from_static("x-cost")),
    );
    let router = Router::new().route("/", get(|| async { ([("x-cost", "10")], "hello") }));
    let client = HttpClient::new(serve(router.layer(layer)).await, CLIENT);
    for _ in 0..20 {
        assert_eq!(client.get("/", &[]).await.status, StatusCode::OK);
    }
    assert!(leasing.stats().local_decisions > 0, "{:?}", leasing.stats());
    // Redis's own count, read without the lease: 20 requests of 10 each, and at most one lease
    // of 4 units on top.
    let plain = redis_limiter(&redis, &clock).await;
    let key = format!("tokens/{}", kova_tower::LimitKey::ip("127.0.0.1".parse().unwrap(), 32));
    let left = plain.peek(key, &limit).await.unwrap().remaining();
    assert!((1000 - 200 - 4..=1000 - 200).contains(&left), "{left} left in Redis");
}
