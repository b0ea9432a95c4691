//! What the rate-limit layer adds to a request, measured two ways in one run, each alternating
//! rounds without and with the layer and quoting medians:
//!
//! 1. **In process**: the axum router is called directly (`Service::call`), without and with
//!    each layer: the added latency per request at p50 and p99, and calls per second on one
//!    thread. Requests come from 4096 client addresses (a realistic table, not one hot key).
//! 2. **Over HTTP**: the same router served on a loopback port and loaded by an in-process
//!    HTTP/1 client: the round-trip latency on one keep-alive connection (requests one after
//!    the other: p50, p99), and requests per second over 16 connections. Client and server
//!    share the machine, so these carry the machine's noise.
//!
//! The limit is one per-IP GCRA limit with a quota no client reaches (every request is allowed
//! and gets its `RateLimit-Policy` and `RateLimit` headers: the common path).
//!
//! Beside it, tower's own `tower::limit::RateLimit`, also with a rate no run reaches: one rate
//! for the whole service (no keys, no headers, no 429: it makes callers wait). In process it
//! wraps the router directly; over HTTP it sits behind `tower::buffer::Buffer`, because its
//! service cannot be cloned and axum needs one per connection (the setup axum's docs show), so
//! that row measures the buffer's channel too.
//!
//! ```text
//! cargo run --release -p kova-tower --example overhead            # both
//! cargo run --release -p kova-tower --example overhead -- in-process
//! cargo run --release -p kova-tower --example overhead -- http
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use kova::Quota;
use kova_tower::{Key, Limit, PeerAddr, RateLimitLayer};
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

const ROUNDS: usize = 5;
const CALLS_PER_ROUND: usize = 200_000;
const HTTP_SECS_PER_ROUND: f64 = 1.5;
const CONNECTIONS: usize = 16;

/// What wraps the router.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Subject {
    Bare,
    Kova,
    Tower,
}

const SUBJECTS: [Subject; 3] = [Subject::Bare, Subject::Kova, Subject::Tower];

impl Subject {
    fn label(self) -> &'static str {
        match self {
            Subject::Bare => "without layer",
            Subject::Kova => "kova-tower",
            Subject::Tower => "tower RateLimit",
        }
    }
}

/// tower's rate limit with a rate no run reaches.
fn tower_limit() -> tower::limit::RateLimitLayer {
    tower::limit::RateLimitLayer::new(1_000_000_000, Duration::from_secs(1))
}

fn router(subject: Subject) -> Router {
    let app =
        Router::new().route("/", get(|| async { "hello\n" })).route("/search", get(|| async { "results\n" }));
    match subject {
        Subject::Bare => return app,
        Subject::Tower => {
            let buffered = ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: BoxError| async { StatusCode::SERVICE_UNAVAILABLE }))
                .layer(tower::buffer::BufferLayer::new(1024))
                .layer(tower_limit());
            return app.layer(buffered);
        }
        Subject::Kova => {}
    }
    // A quota no client reaches: every request takes the allowed path.
    let quota = Quota::per_second(1_000_000_000).expect("quota");
    let per_ip = Limit::in_memory("ip", quota, Key::peer_ip()).expect("limit").cost_fn(|parts| {
        if parts.uri.path() == "/search" {
            5
        } else {
            1
        }
    });
    app.layer(RateLimitLayer::new(per_ip))
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

struct Round {
    p50_ns: f64,
    p99_ns: f64,
    per_sec: f64,
}

/// Calls the router directly (tower's limit: wrapping it, unbuffered), one request at a time.
async fn in_process_round(subject: Subject) -> Round {
    match subject {
        Subject::Tower => calls_round(tower_limit().layer(router(Subject::Bare))).await,
        _ => calls_round(router(subject)).await,
    }
}

async fn calls_round<S>(mut app: S) -> Round
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: std::fmt::Debug,
{
    let peers: Vec<PeerAddr> = (0..4096u32)
        .map(|i| PeerAddr(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), 40_000)))
        .collect();
    let mut latencies = Vec::with_capacity(CALLS_PER_ROUND);
    let started = Instant::now();
    for i in 0..CALLS_PER_ROUND {
        let request =
            Request::get("/").extension(peers[i % peers.len()]).body(Body::empty()).expect("request");
        let t = Instant::now();
        let service = app.ready().await.expect("ready");
        let response = service.call(request).await.expect("response");
        latencies.push(t.elapsed().as_nanos() as u64);
        assert!(response.status().is_success());
        drop(response);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Round {
        p50_ns: percentile(&latencies, 0.5) as f64,
        p99_ns: percentile(&latencies, 0.99) as f64,
        per_sec: CALLS_PER_ROUND as f64 / elapsed,
    }
}

/// Serves the router on a loopback port and loads it over keep-alive connections.
async fn http_round(subject: Subject, connections: usize) -> Round {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let _ =
            axum::serve(listener, router(subject).into_make_service_with_connect_info::<SocketAddr>()).await;
    });
    let deadline = Instant::now() + Duration::from_secs_f64(HTTP_SECS_PER_ROUND);
    let mut workers = Vec::new();
    for _ in 0..connections {
        workers.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).expect("nodelay");
            let io = hyper_util::rt::TokioIo::new(stream);
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(io).await.expect("handshake");
            tokio::spawn(connection);
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let request =
                    Request::get("/").header("host", "bench").body(Empty::<Bytes>::new()).expect("request");
                let t = Instant::now();
                let response = sender.send_request(request).await.expect("response");
                let body = response.into_body().collect().await.expect("body");
                latencies.push(t.elapsed().as_nanos() as u64);
                drop(body);
            }
            latencies
        }));
    }
    let started = Instant::now();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.expect("worker"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    server.abort();
    latencies.sort_unstable();
    Round {
        p50_ns: percentile(&latencies, 0.5) as f64,
        p99_ns: percentile(&latencies, 0.99) as f64,
        per_sec: latencies.len() as f64 / elapsed,
    }
}

/// Prints each subject's medians, and what each layer adds to the bare router's.
fn report(title: &str, rounds: &[Vec<Round>; 3]) {
    let summarize = |rounds: &[Round]| {
        (
            median(rounds.iter().map(|r| r.p50_ns).collect()),
            median(rounds.iter().map(|r| r.p99_ns).collect()),
            median(rounds.iter().map(|r| r.per_sec).collect()),
        )
    };
    println!("{title} (median of {ROUNDS} rounds)");
    println!("  {:<16} {:>12} {:>12} {:>14} {:>14}", "", "p50", "p99", "requests/s", "added at p50");
    let (bare_p50, _, bare_rate) = summarize(&rounds[0]);
    for (subject, rounds) in SUBJECTS.iter().zip(rounds) {
        let (p50, p99, rate) = summarize(rounds);
        let added = if *subject == Subject::Bare {
            String::new()
        } else {
            format!("{:+.2} us ({:+.1}% req/s)", (p50 - bare_p50) / 1e3, (rate / bare_rate - 1.0) * 100.0)
        };
        println!(
            "  {:<16} {:>9.2} us {:>9.2} us {:>14.0}   {added}",
            subject.label(),
            p50 / 1e3,
            p99 / 1e3,
            rate
        );
    }
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("kova-tower overhead: {cores} CPU(s) available");
    let only = std::env::args().nth(1);
    let run = |part: &str| matches!(only.as_deref(), None | Some("all")) || only.as_deref() == Some(part);

    // In process: one thread, the router called directly.
    if run("in-process") {
        in_process();
    }
    // Over HTTP on loopback: server and load generator share the machine.
    if run("http") {
        over_http();
    }
}

fn in_process() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        // Warm up (allocator, kova's clock thread, caches).
        for subject in SUBJECTS {
            in_process_round(subject).await;
        }
        let mut rounds: [Vec<Round>; 3] = Default::default();
        for _ in 0..ROUNDS {
            for (n, subject) in SUBJECTS.into_iter().enumerate() {
                rounds[n].push(in_process_round(subject).await);
            }
        }
        report(&format!("in process, {CALLS_PER_ROUND} calls per round, one thread"), &rounds);
    });
}

fn over_http() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        for connections in [1, CONNECTIONS] {
            let mut rounds: [Vec<Round>; 3] = Default::default();
            for _ in 0..ROUNDS {
                for (n, subject) in SUBJECTS.into_iter().enumerate() {
                    rounds[n].push(http_round(subject, connections).await);
                }
            }
            report(
                &format!(
                    "over HTTP/1 on loopback, {connections} connection(s), {HTTP_SECS_PER_ROUND} s per round \
                     (tower RateLimit behind Buffer)"
                ),
                &rounds,
            );
        }
    });
}
