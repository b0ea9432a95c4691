//! A small axum API with kova limits:
//!
//! - anonymous routes (`/`, `/search`) limited per client IP, 10 units a minute; a search is
//!   expensive and costs 5;
//! - authenticated routes (`/api/...`, header `x-api-key: demo-key-1` or `demo-key-2`) limited
//!   per API key, 100 a minute, and `/api/report` has its own quota of 2 a minute per key.
//!
//! ```text
//! cargo run -p kova-tower --example server            # PORT=8080 to change the port
//! curl -i http://127.0.0.1:3000/search
//! curl -i -H 'x-api-key: demo-key-1' http://127.0.0.1:3000/api/report
//! ```
//!
//! Behind a reverse proxy, set `TRUSTED_PROXIES=10.0.0.0/8` (a list of networks): the client is
//! then the rightmost `X-Forwarded-For` address that is not a trusted proxy.

use std::net::SocketAddr;

use axum::extract::Request;
use axum::http::{HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kova::Quota;
use kova_tower::client_ip::TrustedProxies;
use kova_tower::{Key, Limit, RateLimitLayer};

const API_KEY: HeaderName = HeaderName::from_static("x-api-key");
const KNOWN_KEYS: [&str; 2] = ["demo-key-1", "demo-key-2"];

/// Rejects requests without a known API key before they reach the limiter, so that random keys
/// cannot each get a fresh bucket.
async fn require_api_key(request: Request, next: Next) -> Response {
    let known = request
        .headers()
        .get(&API_KEY)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|k| KNOWN_KEYS.contains(&k));
    if known {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, "missing or unknown x-api-key\n").into_response()
    }
}

fn app(trusted: TrustedProxies) -> Result<Router, Box<dyn std::error::Error>> {
    // Anonymous: per client network, 10 units a minute; /search costs 5.
    let per_ip = Limit::in_memory("ip", Quota::per_minute(10)?, Key::client_ip(trusted))?.cost_fn(|parts| {
        if parts.uri.path() == "/search" {
            5
        } else {
            1
        }
    });
    let public = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/search", get(|| async { "results\n" }))
        .layer(RateLimitLayer::new(per_ip));

    // Authenticated: per API key, 100 a minute; reports have their own quota of 2 a minute.
    let per_key = Limit::in_memory("key", Quota::per_minute(100)?, Key::header(API_KEY))?;
    let reports = Limit::in_memory("report", Quota::per_minute(2)?, Key::header(API_KEY))?
        .when(|parts| parts.uri.path() == "/api/report");
    let api = Router::new()
        .route("/api/items", get(|| async { "[\"apple\",\"pear\"]\n" }))
        .route("/api/report", get(|| async { "report\n" }))
        .layer(RateLimitLayer::new(per_key).limit(reports).legacy_headers(true))
        .layer(middleware::from_fn(require_api_key));

    Ok(public.merge(api))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = std::env::var("PORT").ok().map(|p| p.parse()).transpose()?.unwrap_or(3000);
    let trusted = match std::env::var("TRUSTED_PROXIES") {
        Ok(list) => TrustedProxies::parse(&list)?,
        Err(_) => TrustedProxies::none(),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("kova-tower example listening on http://{}", listener.local_addr()?);
    // Connection info gives the layer each request's peer address.
    axum::serve(listener, app(trusted)?.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}
