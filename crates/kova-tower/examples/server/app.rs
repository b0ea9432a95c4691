//! The example server's router, shared with the tests that run it over loopback.

use std::time::Duration;

use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use kova::Quota;
use kova_tower::client_ip::TrustedProxies;
use kova_tower::headers::QuotaUnit;
use kova_tower::{Key, Limit, PartitionKeys, RateLimitLayer};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

const API_KEY: HeaderName = HeaderName::from_static("x-api-key");
const KNOWN_KEYS: [&str; 2] = ["demo-key-1", "demo-key-2"];
/// axum's default body limit: no upload is larger.
const MAX_UPLOAD: u64 = 2 * 1024 * 1024;

/// What the server enforces.
pub struct Settings {
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted: TrustedProxies,
    /// The anonymous per-IP quota (10 a minute by default; `/search` costs 5 of it).
    pub per_ip: Quota,
}

impl Settings {
    /// The defaults, with `TRUSTED_PROXIES` (a list of networks) from the environment.
    pub fn from_env() -> Result<Self, Box<dyn std::error::Error>> {
        let trusted = match std::env::var("TRUSTED_PROXIES") {
            Ok(list) => TrustedProxies::parse(&list)?,
            Err(_) => TrustedProxies::none(),
        };
        Ok(Settings { trusted, per_ip: Quota::per_minute(10)? })
    }
}

/// Installs the process's Prometheus recorder (once: it is global), with histogram buckets for
/// the decision time.
pub fn install_prometheus() -> Result<PrometheusHandle, Box<dyn std::error::Error>> {
    let buckets = [1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 1e-4, 1e-3, 1e-2];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(kova_tower::metrics_facade::DECISION_SECONDS.into()), &buckets)?
        .install_recorder()?;
    kova_tower::metrics_facade::describe();
    // Histograms keep their samples until upkeep folds them in.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

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

/// The API, and `/metrics` (not rate-limited) rendering `metrics` in Prometheus text format.
pub fn app(settings: Settings, metrics: PrometheusHandle) -> Result<Router, Box<dyn std::error::Error>> {
    // Anonymous: per client network; /search costs 5.
    let per_ip =
        Limit::in_memory("ip", settings.per_ip, Key::client_ip(settings.trusted))?.cost_fn(|parts| {
            if parts.uri.path() == "/search" {
                5
            } else {
                1
            }
        });
    let public = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/search", get(|| async { "results\n" }))
        // `same_body`: responses in axum's own body type, which the router does not box again.
        .layer(RateLimitLayer::new(per_ip).same_body());

    // Authenticated: per API key, 100 a minute; reports have their own quota of 2 a minute, and
    // uploads one of 10 MB a minute, counted in bytes (`qu="content-bytes"`). Responses name
    // each key's partition by a digest (`pk`), never by the key itself.
    let per_key = Limit::in_memory("key", Quota::per_minute(100)?, Key::header(API_KEY))?;
    let reports = Limit::in_memory("report", Quota::per_minute(2)?, Key::header(API_KEY))?
        .when(|parts| parts.uri.path() == "/api/report");
    let upload_bytes = Limit::in_memory("upload", Quota::per_minute(10_000_000)?, Key::header(API_KEY))?
        .when(|parts| parts.uri.path() == "/api/upload")
        .cost_fn(|parts| {
            let length = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
            // Without a length (a chunked body), count the most a request may send.
            length.unwrap_or(MAX_UPLOAD)
        })
        .quota_unit(QuotaUnit::ContentBytes);
    let api = Router::new()
        .route("/api/items", get(|| async { "[\"apple\",\"pear\"]\n" }))
        .route("/api/report", get(|| async { "report\n" }))
        .route(
            "/api/upload",
            post(|body: axum::body::Bytes| async move { format!("stored {} bytes\n", body.len()) }),
        )
        .layer(
            RateLimitLayer::new(per_key)
                .limit(reports)
                .limit(upload_bytes)
                .legacy_headers(true)
                .partition_keys(PartitionKeys::random()?)
                .same_body(),
        )
        .layer(middleware::from_fn(require_api_key));

    let scrape = Router::new().route(
        "/metrics",
        get(move || {
            let text = metrics.render();
            async move { ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
        }),
    );
    Ok(public.merge(api).merge(scrape))
}
