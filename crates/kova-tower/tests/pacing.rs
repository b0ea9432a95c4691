//! The pacing client against kova-tower's own example server (its router, on a loopback port):
//! as many requests as fast as the client allows, zero 429s, and a total time within a stated
//! tolerance of what the quota allows.

#[allow(dead_code)]
#[path = "../examples/server/app.rs"]
mod app;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kova::{Gcra, PreciseClock, Quota, RateLimiter};
use kova_tower::client_ip::TrustedProxies;
use kova_tower::PacingLayer;
use metrics_exporter_prometheus::PrometheusBuilder;
use tower::{Service, ServiceBuilder, ServiceExt};

/// The example server with `per_ip` as its anonymous quota.
async fn example_server(per_ip: Quota) -> SocketAddr {
    // A recorder of its own (not installed): the test reads no metrics.
    let metrics = PrometheusBuilder::new().build_recorder().handle();
    let router = app::app(app::Settings { trusted: TrustedProxies::none(), per_ip }, metrics).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await
    });
    addr
}

/// Sends `n` GETs of `/` one after another through `layer`; returns the statuses and the time
/// from the first send to the last answer.
async fn run(addr: SocketAddr, layer: PacingLayer, n: usize) -> (Vec<StatusCode>, Duration) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut service = ServiceBuilder::new().layer(layer).service(client);
    let mut statuses = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let request = Request::get(format!("http://{addr}/")).body(Empty::new()).unwrap();
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        statuses.push(response.status());
        response.into_body().collect().await.unwrap();
    }
    (statuses, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_the_servers_fields_sees_no_429_and_runs_at_the_quotas_rate() {
    // 5 a second, bursts of 5 (`q=5;w=1`): 20 requests take at least (20 - 5) / 5 = 3 s.
    let addr = example_server(Quota::per_second(5).unwrap()).await;
    let (statuses, elapsed) = run(addr, PacingLayer::new(), 20).await;
    let denied = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!(denied, 0, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == StatusCode::OK), "{statuses:?}");
    // No faster than the server admits (it would have said 429), and within 0.5 s of it: the
    // client holds from `r=0` for the whole `t`, rounded up to the second, after each burst.
    let ideal = Duration::from_secs(3);
    eprintln!("20 requests through the pacing layer: {elapsed:?} (ideal {ideal:?}), no 429");
    assert!(elapsed >= ideal - Duration::from_millis(50), "{elapsed:?}");
    assert!(elapsed <= ideal + Duration::from_millis(500), "{elapsed:?} vs {ideal:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_pacing_layer_the_same_run_is_denied() {
    // The control: the same server and run, sent as fast as possible, meets 429s.
    let addr = example_server(Quota::per_second(5).unwrap()).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut denied = 0;
    for _ in 0..20 {
        let request = Request::get(format!("http://{addr}/")).body(Empty::new()).unwrap();
        let response = client.request(request).await.unwrap();
        denied += usize::from(response.status() == StatusCode::TOO_MANY_REQUESTS);
    }
    assert!(denied > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_limit_paces_requests_before_they_are_sent() {
    // The server allows plenty; the client's own limit is 20 a second, one at a time: 11
    // requests take (11 - 1) / 20 = 0.5 s.
    let addr = example_server(Quota::per_minute(1000).unwrap()).await;
    let local = RateLimiter::<Gcra, _>::with_clock(
        Quota::per_second(20).unwrap().with_burst(1).unwrap(),
        PreciseClock::new(),
    )
    .unwrap();
    let (statuses, elapsed) = run(addr, PacingLayer::new().local_limit(local), 11).await;
    assert!(statuses.iter().all(|s| *s == StatusCode::OK), "{statuses:?}");
    let ideal = Duration::from_millis(500);
    eprintln!("11 requests under a local 20/s limit: {elapsed:?} (ideal {ideal:?})");
    assert!(elapsed >= ideal - Duration::from_millis(5), "{elapsed:?}");
    assert!(elapsed <= ideal + Duration::from_millis(250), "{elapsed:?} vs {ideal:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_429_the_next_request_waits_for_retry_after() {
    // Someone else on the same address used the whole quota: the pacing client's first request
    // is denied (it cannot know), and its next one waits the announced Retry-After.
    let addr = example_server(Quota::per_minute(120).unwrap().with_burst(2).unwrap()).await;
    let plain = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    for _ in 0..2 {
        let request = Request::get(format!("http://{addr}/")).body(Empty::new()).unwrap();
        assert_eq!(plain.request(request).await.unwrap().status(), StatusCode::OK);
    }
    let started = Instant::now();
    let (statuses, elapsed) = run(addr, PacingLayer::new(), 2).await;
    assert_eq!(statuses, [StatusCode::TOO_MANY_REQUESTS, StatusCode::OK]);
    // `Retry-After: 1` (half a second, rounded up).
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
    assert!(started.elapsed() <= Duration::from_millis(1500), "{elapsed:?}");
}
