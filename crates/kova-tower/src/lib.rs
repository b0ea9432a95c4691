//! # kova-tower: rate limiting for tower, axum, hyper and tonic
//!
//! A tower [`Layer`](tower_layer::Layer) ([`RateLimitLayer`]) that checks each request against
//! one or more named [`Limit`]s, each a kova limiter (in-memory [`kova::Keyed`], a shared store
//! such as Redis, or your own, through the one async trait [`KeyedLimiter`]) keyed by whom the
//! request comes from ([`Key`]: client IP through trusted proxies, API key, authenticated user,
//! global, or a pair).
//!
//! - Allowed requests go on; their responses carry `RateLimit-Policy: "ip";q=60;w=60` and
//!   `RateLimit: "ip";r=59;t=1` (draft-ietf-httpapi-ratelimit-headers-11; see [`headers`]),
//!   with `qu` for limits not counted in requests, an opt-in partition key `pk` that is a keyed
//!   digest of the client's key ([`PartitionKeys`]), and optionally the legacy `X-RateLimit-*`.
//! - Denied requests get `429 Too Many Requests`, `Retry-After` in whole seconds rounded up
//!   (never earlier than the denying policy's `t`), `Cache-Control: no-store`, the `RateLimit`
//!   headers and an `application/problem+json` body of the draft's `quota-exceeded` type naming
//!   the `violated-policies` ([`Rejection`]; customisable with
//!   [`RateLimitLayer::on_rejection`]).
//! - A request whose key cannot be found is answered with a clear error (or, where configured,
//!   skipped or given a fallback key): never one shared bucket for every unknown client.
//! - Several limits on one key can be one [`CompositeLimit`]: decided all or nothing in one
//!   step (kova's [`KeyedLimits`](kova::limits::KeyedLimits), or a store's own through
//!   [`CompositeLimiter`]), every limit's `RateLimit` member showing its state after it.
//! - A limit's cost can be settled from the response ([`Limit::settle_from_header`],
//!   [`ActualCost`]): the estimate checked first, the difference given back or charged into the
//!   quota's overdraft once the response says what the request cost.
//! - Shadow mode decides and records without denying; a [`Metrics`] hook sees every decision,
//!   near-limit pass, key failure, backend failure and settle.
//! - Responses carry a [`ResponseBody`] around the inner service's body or the layer's own, for
//!   any inner body; with [`RateLimitLayer::same_body`] they keep the inner body type instead
//!   (`From<Bytes>`: axum's `Body`), which axum then does not box again: use it under axum.
//!
//! ```
//! use std::net::SocketAddr;
//! use axum::{body::Body, routing::get, Router};
//! use http::{Request, StatusCode};
//! use kova::{Gcra, ManualClock, Quota};
//! use kova_tower::{Key, Limit, PeerAddr, RateLimitLayer};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = ManualClock::new();
//! // 2 requests per minute per client; /report costs 2.
//! let per_ip = Limit::in_memory_with::<Gcra, _>("ip", Quota::per_minute(2)?, Key::peer_ip(), clock)?
//!     .cost_fn(|parts| if parts.uri.path() == "/report" { 2 } else { 1 });
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .route("/report", get(|| async { "report" }))
//!     .layer(RateLimitLayer::new(per_ip));
//!
//! // axum's `into_make_service_with_connect_info` sets the peer address; here we set it by hand.
//! let peer = PeerAddr("203.0.113.7:50000".parse::<SocketAddr>()?);
//! let get = |path: &str| Request::get(path).extension(peer).body(Body::empty()).unwrap();
//!
//! let ok = app.clone().oneshot(get("/")).await?;
//! assert_eq!(ok.status(), StatusCode::OK);
//! assert_eq!(ok.headers()["ratelimit-policy"], r#""ip";q=2;w=60"#);
//! assert_eq!(ok.headers()["ratelimit"], r#""ip";r=1;t=30"#);
//!
//! let limited = app.clone().oneshot(get("/report")).await?;
//! assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(limited.headers()["retry-after"], "30");
//! assert_eq!(limited.headers()["content-type"], "application/problem+json");
//! # Ok(())
//! # }
//! ```
//!
//! ## Keys too many to store
//!
//! Where the keys cannot all be held (every IPv6 /64, forged API keys), [`Limit::sketch`] keeps
//! every key in fixed memory (a [`kova::sketch::Sketch`], 64 KiB by default): no key is ever
//! admitted more than its quota, a collision can only deny early, and each decision says so
//! ([`Fallback::Sketch`](kova::Fallback::Sketch)).
//!
//! ```
//! use std::net::SocketAddr;
//! use axum::{body::Body, routing::get, Router};
//! use http::{Request, StatusCode};
//! use kova::sketch::Sketch;
//! use kova::{ManualClock, Quota};
//! use kova_tower::{Key, Limit, PeerAddr, RateLimitLayer};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 2 requests a minute per client network, in 64 KiB for any number of networks.
//! let sketch = Sketch::builder(Quota::per_minute(2)?).clock(ManualClock::new()).build()?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(Limit::sketch_with("net", sketch, Key::peer_ip())?));
//! let from = |peer: &str| {
//!     let peer = PeerAddr(peer.parse::<SocketAddr>().unwrap());
//!     Request::get("/").extension(peer).body(Body::empty()).unwrap()
//! };
//! for _ in 0..2 {
//!     assert_eq!(app.clone().oneshot(from("[2001:db8:1:2::7]:5000")).await?.status(), StatusCode::OK);
//! }
//! // Another address of the same /64 is the same client.
//! let limited = app.clone().oneshot(from("[2001:db8:1:2::8]:5000")).await?;
//! assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(app.clone().oneshot(from("198.51.100.7:5000")).await?.status(), StatusCode::OK);
//! # Ok(())
//! # }
//! ```
//!
//! See [`client_ip`] for how the client address is found behind proxies, and the crate's
//! `examples/server/` (`main.rs`, its routes in `app.rs`) for a small API with per-IP,
//! per-API-key and per-route limits.
//!
//! ## Features
//! - `axum` (default): read the peer address from axum's `ConnectInfo<SocketAddr>`.
//! - `metrics`: every decision reported through the `metrics` crate (see `metrics_facade` for
//!   the names), to whatever recorder the application installs.
//! - `grpc`: `RateLimitLayer::grpc` answers denials as gRPC status `RESOURCE_EXHAUSTED` with
//!   `google.rpc.RetryInfo` (for a tonic server's `Server::builder().layer(..)`).
//! - `client`: `PacingLayer`, for outgoing requests: holds requests until the server's
//!   `Retry-After` / `RateLimit` say it would admit them, then waits on a local kova limit.
//! - `redis`: `RedisBackend`, a [`KeyedLimiter`] over `kova_redis::RedisLimiter` (limits shared
//!   by every server, settled in Redis), with `Limit::redis` to build a limit from it; and
//!   `RedisCompositeBackend`, several Redis limits decided in one script, with
//!   `CompositeLimit::redis`.
#![forbid(unsafe_code)]
// Nothing a request carries may panic a server's worker: each site that could panic in the
// library is an `#[expect]` saying why it cannot fire, so a new one is a decision (unit tests
// are allowed them by `clippy.toml`).
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::indexing_slicing
)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod body;
pub mod client_ip;
mod composite;
mod composite_limiter;
mod config;
mod enforce;
mod extract;
mod failure;
mod future;
#[cfg(feature = "grpc")]
mod grpc;
pub mod headers;
mod interned;
mod key;
mod layer;
mod limit;
mod limiter;
mod metrics;
#[cfg(feature = "metrics")]
pub mod metrics_facade;
#[cfg(feature = "client")]
mod pacing;
mod partition;
mod pending;
mod ready;
#[cfg(feature = "redis")]
mod redis;
mod response;
#[cfg(feature = "client")]
pub mod server_hints;
mod service;
mod settle;
mod stopwatch;

pub use body::{BodyMode, ResponseBody, SameBody, Wrap};
pub use composite::CompositeLimit;
pub use composite_limiter::{CompositeCheckFuture, CompositeLimiter};
pub use extract::{peer_ip, IpKey, Key, KeyError, KeyExtractor, PeerAddr, MAX_HEADER_KEY_LEN};
pub use failure::BackendFailurePolicy;
pub use future::ResponseFuture;
pub use key::LimitKey;
pub use layer::RateLimitLayer;
pub use limit::{ConfigError, Limit, MissingKeyPolicy};
pub use limiter::{CheckFuture, KeyedLimiter, LimiterError};
pub use metrics::{CountingMetrics, Counts, Event, EventKind, Metrics};
#[cfg(feature = "client")]
pub use pacing::{Pacing, PacingLayer};
pub use partition::{PartitionKeys, PARTITION_KEY_LEN};
#[cfg(feature = "redis")]
pub use redis::{RedisBackend, RedisCompositeBackend};
pub use response::{Rejection, QUOTA_EXCEEDED, TEMPORARY_REDUCED_CAPACITY};
pub use service::RateLimit;
pub use settle::{ActualCost, SettleError, SettleFuture, Settled};
