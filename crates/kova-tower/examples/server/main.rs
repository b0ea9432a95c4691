//! A small axum API with kova limits:
//!
//! - anonymous routes (`/`, `/search`) limited per client IP, 10 units a minute; a search is
//!   expensive and costs 5;
//! - authenticated routes (`/api/...`, header `x-api-key: demo-key-1` or `demo-key-2`) limited
//!   per API key, 100 a minute; `/api/report` has its own quota of 2 a minute per key, and
//!   `POST /api/upload` one of 10 MB a minute counted in bytes;
//! - `/metrics`: every decision, in Prometheus text format (the `metrics` feature).
//!
//! ```text
//! cargo run -p kova-tower --features metrics --example server   # PORT=8080 to change the port
//! curl -i http://127.0.0.1:3000/search
//! curl -i -H 'x-api-key: demo-key-1' http://127.0.0.1:3000/api/report
//! curl -i -H 'x-api-key: demo-key-1' --data-binary @somefile http://127.0.0.1:3000/api/upload
//! curl http://127.0.0.1:3000/metrics
//! ```
//!
//! Behind a reverse proxy, set `TRUSTED_PROXIES=10.0.0.0/8` (a list of networks): the client is
//! then the rightmost `X-Forwarded-For` address that is not a trusted proxy.

mod app;

use std::net::SocketAddr;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = std::env::var("PORT").ok().map(|p| p.parse()).transpose()?.unwrap_or(3000);
    let metrics = app::install_prometheus()?;
    let router = app::app(app::Settings::from_env()?, metrics)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("kova-tower example listening on http://{}", listener.local_addr()?);
    // Connection info gives the layer each request's peer address.
    axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}
