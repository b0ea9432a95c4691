//! What the rate-limit layer adds to a request, measured three ways, each alternating rounds
//! without and with each layer and quoting medians:
//!
//! 1. **In process**: the axum router is called directly (`Service::call`), without and with
//!    each layer: the added latency per request at p50 and p99, and calls per second on one
//!    thread. Requests come from 4096 client addresses (a realistic table, not one hot key),
//!    carried as axum's `ConnectInfo<SocketAddr>`, as `axum::serve` sets it.
//! 2. **Over HTTP**: the same router served on a loopback port and loaded by an in-process
//!    HTTP/1 client: the round-trip latency on one keep-alive connection (requests one after
//!    the other: p50, p99), and requests per second over 16 connections. Client and server
//!    share the machine, so these carry the machine's noise.
//! 3. **Under wrk** (`wrk` on the PATH): each router served by its own one-thread runtime on a
//!    loopback port, loaded in turn by `wrk -t1 -c64` (one client IP, 127.0.0.1): requests per
//!    second and wrk's latency percentiles, rounds interleaved. Run only when asked for.
//!
//! The limit is one per-IP limit with a quota no client reaches (every request is allowed: the
//! common path). kova-tower's responses carry its `RateLimit-Policy` and `RateLimit` headers,
//! in axum's own body type (`RateLimitLayer::same_body`; `count kova-wrap` counts the default
//! `ResponseBody`, which axum boxes again).
//! Beside it, the same router with tower_governor's layer (per peer IP, a quota no run
//! reaches), as its docs build it: once as it comes (no headers on allowed responses) and once
//! with `use_headers` (`x-ratelimit-limit` and `x-ratelimit-remaining`). Both are added with
//! `Router::layer`, so both pay what axum adds for a route layer (a boxed service and future
//! per route, the response body boxed again).
//!
//! In process, under wrk and counted, two more rows split kova-tower's cost in two: kova-tower in shadow
//! mode (the same check, no headers written) and the bare router whose handler writes the same
//! two header fields kova-tower writes (the fields' cost with no limiter at all).
//!
//! Also beside it (in process and over HTTP), tower's own `tower::limit::RateLimit`, with a rate
//! no run reaches: one rate for the whole service (no keys, no headers, no 429: it makes callers
//! wait). In process it wraps the router directly; over HTTP it sits behind
//! `tower::buffer::Buffer`, because its service cannot be cloned and axum needs one per
//! connection (the setup axum's docs show), so that row measures the buffer's channel too.
//!
//! ```text
//! cargo run --release -p kova-tower --example overhead            # in process and over HTTP
//! cargo run --release -p kova-tower --example overhead -- in-process
//! cargo run --release -p kova-tower --example overhead -- http
//! cargo run --release -p kova-tower --example overhead -- wrk     # ROUNDS=5 WRK_SECS=5
//! cargo run --release -p kova-tower --example overhead -- threads # in process, 1 and 2 threads
//! ```
//!
//! 4. **Counted**: `-- count SUBJECT N` makes N in-process calls of one subject (`bare`, `noop`
//!    (a layer that does nothing, added the same way: what axum adds for any route layer), `kova`,
//!    `kova-wrap`, `kova-shadow`, `bare-headers`, `governor`, `governor-headers`) after a warm-up,
//!    in one function an instruction counter can count alone: its count over N is the instructions per request, exact on a busy host
//!    where wall time is not:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='*serve_calls*' --callgrind-out-file=/tmp/kova.cg \
//!   target/release/examples/overhead count kova 10000 2>&1 | grep Collected
//! ```
//!
//! 5. **On two threads** (`-- threads`): the router called in process from one thread, then
//!    from two at once, each with its own clone of the router and its own clients: calls per
//!    second and the ratio. What a layer writes to shared memory on every request (a reference
//!    count) shows here as two threads serving little more than one.

mod threads;
mod wrk;

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use kova::Quota;
use kova_tower::{Key, Limit, RateLimitLayer};
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;

const ROUNDS: usize = 5;
const CALLS_PER_ROUND: usize = 200_000;
const HTTP_SECS_PER_ROUND: f64 = 1.5;
const CONNECTIONS: usize = 16;
const WRK_CONNECTIONS: usize = 64;

/// What wraps the router.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Subject {
    Bare,
    Kova,
    /// kova-tower with its default body mode (`ResponseBody`, which axum boxes again): counted only.
    KovaWrap,
    /// A layer that does nothing (tower's `Identity`), added by `Router::layer`: what axum itself
    /// adds for a route layer, the floor under every layer here. Counted only.
    Noop,
    KovaAround,
    Governor,
    GovernorHeaders,
    Tower,
    /// kova-tower in shadow mode: the same check, but no headers written (and nothing ever
    /// rejected): what the layer costs before its headers.
    KovaShadow,
    /// The bare router whose handler answers with the two header fields kova-tower writes, the
    /// same bytes: what writing and sending those headers costs without any limiter.
    BareHeaders,
}

const SUBJECTS: [Subject; 8] = [
    Subject::Bare,
    Subject::Kova,
    Subject::KovaAround,
    Subject::Governor,
    Subject::GovernorHeaders,
    Subject::Tower,
    Subject::KovaShadow,
    Subject::BareHeaders,
];

/// What is loaded over HTTP: every subject but kova-tower around the router (the same layer as
/// `Kova`; wrapping the router only changes what the in-process rows compare).
const HTTP_SUBJECTS: [Subject; 5] =
    [Subject::Bare, Subject::Kova, Subject::Governor, Subject::GovernorHeaders, Subject::Tower];

/// What wrk loads: the limiters keyed per client IP.
const WRK_SUBJECTS: [Subject; 6] = [
    Subject::Bare,
    Subject::Kova,
    Subject::Governor,
    Subject::GovernorHeaders,
    Subject::KovaShadow,
    Subject::BareHeaders,
];

impl Subject {
    fn label(self) -> &'static str {
        match self {
            Subject::Bare => "without layer",
            Subject::Kova => "kova-tower",
            Subject::KovaWrap => "kova (wrapped)",
            Subject::Noop => "no-op layer",
            Subject::KovaAround => "kova around",
            Subject::Governor => "tower_governor",
            Subject::GovernorHeaders => "governor+headers",
            Subject::Tower => "tower RateLimit",
            Subject::KovaShadow => "kova, no headers",
            Subject::BareHeaders => "bare+kova's hdrs",
        }
    }
}

/// tower's rate limit with a rate no run reaches.
fn tower_limit() -> tower::limit::RateLimitLayer {
    tower::limit::RateLimitLayer::new(1_000_000_000, Duration::from_secs(1))
}

/// The router of `subject`, with its layer added by `Router::layer` (for `KovaAround`, the bare
/// router that layer then wraps), its routes built.
fn router(subject: Subject) -> Router {
    let app =
        Router::new().route("/", get(|| async { "hello\n" })).route("/search", get(|| async { "results\n" }));
    // tower_governor: one element back every nanosecond (10^9 a second), bursts of a million.
    let mut governor = GovernorConfigBuilder::default();
    governor.per_nanosecond(1).burst_size(1_000_000);
    let app = match subject {
        Subject::Bare => app,
        Subject::KovaShadow => app.layer(kova_layer().shadow(true).same_body()),
        Subject::BareHeaders => {
            let headers = kova_headers();
            Router::new().route("/", get(move || std::future::ready((headers.clone(), "hello\n"))))
        }
        Subject::Tower => {
            let buffered = ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: BoxError| async { StatusCode::SERVICE_UNAVAILABLE }))
                .layer(tower::buffer::BufferLayer::new(1024))
                .layer(tower_limit());
            app.layer(buffered)
        }
        Subject::Governor => app.layer(GovernorLayer::new(governor.finish().expect("governor config"))),
        Subject::GovernorHeaders => {
            app.layer(GovernorLayer::new(governor.use_headers().finish().expect("governor config")))
        }
        Subject::Kova => app.layer(kova_layer().same_body()),
        Subject::KovaWrap => app.layer(kova_layer()),
        Subject::Noop => app.layer(tower::layer::util::Identity::new()),
        // Wrapped by the caller, around the whole router.
        Subject::KovaAround => app,
    };
    // Each route made once, as `axum::serve` does (`into_make_service*` calls it): a router
    // still waiting for its state builds the route of every request anew.
    app.with_state(())
}

fn kova_layer() -> RateLimitLayer {
    // A quota no client reaches: every request takes the allowed path. Each unit takes an hour
    // to come back, so a client's key is still in use when it returns (4096 clients in turn) and
    // every check finds it in the table, the path of a returning client. With units back within
    // the time between two visits, each key would be idle again, and whether a check finds it,
    // inserts it or is admitted by the table's doorkeeper would depend on the table's random
    // hash seed: counts would differ from run to run.
    let quota = Quota::per_hour(1_000).and_then(|q| q.with_burst(1_000_000_000)).expect("quota");
    let per_ip = Limit::in_memory("ip", quota, Key::peer_ip()).expect("limit").cost_fn(|parts| {
        if parts.uri.path() == "/search" {
            5
        } else {
            1
        }
    });
    RateLimitLayer::new(per_ip)
}

/// The header fields kova-tower writes on an allowed response of [`kova_layer`]'s limit (taken
/// from one call), for the router that writes the same fields without a limiter.
fn kova_headers() -> [(http::HeaderName, http::HeaderValue); 2] {
    let mut app = router(Subject::Kova);
    let peer = peers()[0];
    let request = Request::get("/").extension(peer).body(Body::empty()).expect("request");
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut future = std::pin::pin!(app.call(request));
    let std::task::Poll::Ready(Ok(response)) = future.as_mut().poll(&mut cx) else {
        panic!("the layer answers at once")
    };
    ["ratelimit-policy", "ratelimit"].map(|name| {
        let value = response.headers().get(name).unwrap_or_else(|| panic!("kova-tower writes {name}"));
        (http::HeaderName::from_static(name), value.clone())
    })
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

/// Calls the router directly (tower's limit, and kova-tower's "around" row: wrapping it,
/// unbuffered, rather than through `Router::layer`), one request at a time.
async fn in_process_round(subject: Subject) -> Round {
    match subject {
        Subject::Tower => calls_round(tower_limit().layer(router(Subject::Bare))).await,
        Subject::KovaAround => calls_round(kova_layer().same_body().layer(router(subject))).await,
        _ => calls_round(router(subject)).await,
    }
}

async fn calls_round<S, B>(mut app: S) -> Round
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
{
    let peers = peers();
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

/// Serves `subject`'s router on `listener` until the task is dropped, with connection info (the
/// peer address every per-IP limiter reads).
async fn serve(listener: tokio::net::TcpListener, subject: Subject) {
    let _ = axum::serve(listener, router(subject).into_make_service_with_connect_info::<SocketAddr>()).await;
}

/// Serves the router on a loopback port and loads it over keep-alive connections.
async fn http_round(subject: Subject, connections: usize) -> Round {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(serve(listener, subject));
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
fn report(title: &str, subjects: &[Subject], rounds: &[Vec<Round>]) {
    let summarize = |rounds: &[Round]| {
        (
            median(rounds.iter().map(|r| r.p50_ns).collect()),
            median(rounds.iter().map(|r| r.p99_ns).collect()),
            median(rounds.iter().map(|r| r.per_sec).collect()),
        )
    };
    println!("{title} (median of {} rounds)", rounds[0].len());
    println!("  {:<16} {:>12} {:>12} {:>14} {:>14}", "", "p50", "p99", "requests/s", "added at p50");
    let (bare_p50, _, bare_rate) = summarize(&rounds[0]);
    for (subject, rounds) in subjects.iter().zip(rounds) {
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
    let rates = |rounds: &[Round]| rounds.iter().map(|r| format!("{:.0}", r.per_sec)).collect::<Vec<_>>();
    for (subject, rounds) in subjects.iter().zip(rounds) {
        println!("  {:<16} requests/s by round: {}", subject.label(), rates(rounds).join(" "));
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
    if only.as_deref() == Some("wrk") {
        wrk::under_wrk();
    }
    if only.as_deref() == Some("threads") {
        threads::on_threads(ROUNDS);
    }
    if only.as_deref() == Some("count") {
        counted(std::env::args().nth(2), std::env::args().nth(3));
    }
}

/// Makes `calls` in-process calls of the subject named `name` after a warm-up (see the module
/// docs: for an instruction counter).
fn counted(name: Option<String>, calls: Option<String>) {
    let subject = match name.as_deref() {
        Some("bare") => Subject::Bare,
        Some("kova") => Subject::Kova,
        Some("kova-wrap") => Subject::KovaWrap,
        Some("noop") => Subject::Noop,
        Some("governor") => Subject::Governor,
        Some("governor-headers") => Subject::GovernorHeaders,
        Some("kova-shadow") => Subject::KovaShadow,
        Some("bare-headers") => Subject::BareHeaders,
        other => {
            panic!(
                "count SUBJECT N: SUBJECT is bare, noop, kova, kova-wrap, kova-shadow, bare-headers, governor or governor-headers, not {other:?}"
            )
        }
    };
    let calls: usize = calls.and_then(|n| n.parse().ok()).expect("count SUBJECT N: N is a number of calls");
    // A runtime entered (as a server's handlers run), though nothing here waits.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let _entered = runtime.enter();
    let mut app = router(subject);
    let peers = peers();
    // Warm up: every peer's key seen twice, the allocator's size classes in use.
    calls_answered_at_once(&mut app, &peers, 2 * peers.len());
    serve_calls(&mut app, &peers, calls);
}

/// The counted calls, kept out of line so that an instruction counter can count only them
/// (callgrind's `--toggle-collect=*serve_calls*`).
#[inline(never)]
fn serve_calls(app: &mut Router, peers: &[ConnectInfo<SocketAddr>], calls: usize) {
    calls_answered_at_once(app, peers, calls);
}

/// `calls` requests through `app`, each polled to its response on the spot (every subject
/// answers at once).
fn calls_answered_at_once(app: &mut Router, peers: &[ConnectInfo<SocketAddr>], calls: usize) {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    for (i, peer) in peers.iter().cycle().take(calls).enumerate() {
        let request = Request::get("/").extension(*peer).body(Body::empty()).expect("request");
        let ready = Service::<Request<Body>>::poll_ready(app, &mut cx);
        assert!(matches!(ready, std::task::Poll::Ready(Ok(()))), "the router is always ready");
        let mut future = std::pin::pin!(app.call(request));
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(Ok(response)) => {
                assert!(response.status().is_success(), "call {i}: every request is allowed")
            }
            other => {
                panic!("call {i}: the response is ready at once, got {:?}", other.map(|r| r.map(|_| ())))
            }
        }
    }
}

/// The client addresses the in-process calls come from, as axum's `ConnectInfo`.
fn peers() -> Vec<ConnectInfo<SocketAddr>> {
    (0..4096u32)
        .map(|i| ConnectInfo(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), 40_000)))
        .collect()
}

fn in_process() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        // Warm up (allocator, kova's clock thread, caches).
        for subject in SUBJECTS {
            in_process_round(subject).await;
        }
        let mut rounds: Vec<Vec<Round>> = SUBJECTS.iter().map(|_| Vec::new()).collect();
        for _ in 0..ROUNDS {
            for (n, subject) in SUBJECTS.into_iter().enumerate() {
                rounds[n].push(in_process_round(subject).await);
            }
        }
        report(&format!("in process, {CALLS_PER_ROUND} calls per round, one thread"), &SUBJECTS, &rounds);
    });
}

fn over_http() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        for connections in [1, CONNECTIONS] {
            let mut rounds: Vec<Vec<Round>> = HTTP_SUBJECTS.iter().map(|_| Vec::new()).collect();
            for _ in 0..ROUNDS {
                for (n, subject) in HTTP_SUBJECTS.into_iter().enumerate() {
                    rounds[n].push(http_round(subject, connections).await);
                }
            }
            report(
                &format!(
                    "over HTTP/1 on loopback, {connections} connection(s), {HTTP_SECS_PER_ROUND} s per round \
                     (tower RateLimit behind Buffer)"
                ),
                &HTTP_SUBJECTS,
                &rounds,
            );
        }
    });
}
