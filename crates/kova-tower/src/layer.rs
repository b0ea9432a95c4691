//! RateLimitLayer: the builder of a `Config`, and the tower `Layer` that wraps a service with it.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use tower_layer::Layer;

use crate::body::{SameBody, Wrap};
use crate::config::Config;
use crate::{BackendFailurePolicy, CompositeLimit, Limit, Metrics, PartitionKeys, RateLimit, Rejection};

/// A tower [`Layer`] that rate-limits requests: with axum `Router::layer` /
/// `route_layer`, hyper (through `tower::ServiceBuilder`), or tonic's `Server::layer`.
///
/// Each request is checked against the layer's [`Limit`]s in order (the limits of a
/// [`CompositeLimit`] in one step); the first denial answers `429 Too Many Requests`. Later
/// limits are not charged, and what earlier limits took is refunded
/// ([`KeyedLimiter::refund`](crate::KeyedLimiter::refund)), so a rejected request consumes no
/// quota, and their `RateLimit` members show what is left after the refund; limiters that cannot
/// take units back (the sliding log, Redis) keep the charge, so put them last where that
/// matters. An allowed request goes on, and its
/// response gets `RateLimit-Policy` and `RateLimit` headers for every limit checked.
///
/// ```
/// use axum::{routing::get, Router};
/// use kova::Quota;
/// use kova_tower::{client_ip::TrustedProxies, Key, Limit, RateLimitLayer};
///
/// let per_ip = Limit::in_memory("ip", Quota::per_minute(60)?, Key::client_ip(TrustedProxies::parse("10.0.0.0/8")?))?;
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(RateLimitLayer::new(per_ip).legacy_headers(true));
/// // Serve with `app.into_make_service_with_connect_info::<std::net::SocketAddr>()` so the
/// // layer sees the peer address.
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// `M` is the response body's [`BodyMode`](crate::BodyMode): [`Wrap`] unless
/// [`same_body`](Self::same_body) chose [`SameBody`].
pub struct RateLimitLayer<M = Wrap> {
    config: Arc<Config>,
    mode: PhantomData<fn() -> M>,
}

impl<M> Clone for RateLimitLayer<M> {
    fn clone(&self) -> Self {
        RateLimitLayer { config: self.config.clone(), mode: PhantomData }
    }
}

impl<M> fmt::Debug for RateLimitLayer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limits", &self.config.limits)
            .field("shadow", &self.config.shadow)
            .field("legacy_headers", &self.config.legacy_headers)
            .field("backend_failure", &self.config.backend_failure)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// A layer enforcing `limit`.
    pub fn new(limit: Limit) -> Self {
        Self::with_limits([limit])
    }

    fn with_limits(limits: impl IntoIterator<Item = Limit>) -> Self {
        let mut config = Config::new();
        for limit in limits {
            config.push(limit);
        }
        RateLimitLayer { config: Arc::new(config), mode: PhantomData }
    }

    /// A layer enforcing `composite`: its limits decided all or nothing in one step.
    pub fn from_composite(composite: CompositeLimit) -> Self {
        Self::with_limits(composite.into_limits())
    }
}

impl<M> RateLimitLayer<M> {
    /// Also enforces `limit`, after the ones already added (several limits on one request: per
    /// IP and per user).
    pub fn limit(mut self, limit: Limit) -> Self {
        Arc::make_mut(&mut self.config).push(limit);
        self
    }

    /// Also enforces `composite`, after the limits already added: its limits are decided all or
    /// nothing in one step, and every one's `RateLimit` member shows its state after it (see
    /// [`CompositeLimit`]).
    pub fn composite(mut self, composite: CompositeLimit) -> Self {
        let config = Arc::make_mut(&mut self.config);
        for limit in composite.into_limits() {
            config.push(limit);
        }
        self
    }

    /// Shadow mode: decide and record (metrics see every denial, marked `shadow`), but deny
    /// nothing and add no headers; key and backend failures let the request through too. For
    /// trying a policy on real traffic.
    pub fn shadow(mut self, shadow: bool) -> Self {
        Arc::make_mut(&mut self.config).shadow = shadow;
        self
    }

    /// Also send `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds
    /// until the quota is whole) for the limit closest to its end, for old clients.
    pub fn legacy_headers(mut self, legacy: bool) -> Self {
        Arc::make_mut(&mut self.config).legacy_headers = legacy;
        self
    }

    /// Reports every decision, key failure and backend failure to `metrics`.
    pub fn metrics<R: Metrics>(mut self, metrics: Arc<R>) -> Self {
        Arc::make_mut(&mut self.config).metrics = Some(metrics);
        self
    }

    /// An allowed decision with at most `percent` % of the quota left is reported as
    /// [`EventKind::NearLimit`](crate::EventKind::NearLimit) (default 10).
    pub fn near_limit_percent(mut self, percent: u8) -> Self {
        Arc::make_mut(&mut self.config).near_limit_percent = percent.min(100);
        self
    }

    /// What to do when a limiter fails without a failure policy of its own (default:
    /// [`BackendFailurePolicy::Reject`], a 503).
    pub fn backend_failure(mut self, policy: BackendFailurePolicy) -> Self {
        Arc::make_mut(&mut self.config).backend_failure = policy;
        self
    }

    /// Customises the layer's own responses: `f` gets the rejection and the default response
    /// (status, headers, problem+json body) and returns the one to send.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::header::CONTENT_TYPE;
    /// use kova::Quota;
    /// use kova_tower::{Key, Limit, RateLimitLayer};
    /// let layer = RateLimitLayer::new(Limit::in_memory("ip", Quota::per_second(5)?, Key::peer_ip())?)
    ///     .on_rejection(|rejection, mut response| {
    ///         let secs = rejection.retry_after_secs().unwrap_or(1);
    ///         *response.body_mut() = Bytes::from(format!("slow down, come back in {secs}s\n"));
    ///         response.headers_mut().insert(CONTENT_TYPE, "text/plain".parse().unwrap());
    ///         response
    ///     });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_rejection<F>(mut self, f: F) -> Self
    where
        F: Fn(&Rejection<'_>, Response<Bytes>) -> Response<Bytes> + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.config).responder = Some(Arc::new(f));
        self
    }

    /// Adds the partition key (`pk`) of each limit to `RateLimit-Policy` and `RateLimit`: a
    /// digest of the client's key under `keys`' secret (see [`PartitionKeys`]), so a client can
    /// tell which partition counted it while its IP or API key never appears. Off by default.
    ///
    /// ```
    /// use kova::Quota;
    /// use kova_tower::{Key, Limit, PartitionKeys, RateLimitLayer};
    /// let layer = RateLimitLayer::new(Limit::in_memory("ip", Quota::per_minute(60)?, Key::peer_ip())?)
    ///     .partition_keys(PartitionKeys::random()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition_keys(mut self, keys: PartitionKeys) -> Self {
        Arc::make_mut(&mut self.config).partition_keys = Some(keys);
        self
    }

    /// Answers the layer's rejections as gRPC does (for a tonic server): HTTP 200 with
    /// `grpc-status` `RESOURCE_EXHAUSTED` (8) for a denial, carrying the retry delay as
    /// `google.rpc.RetryInfo` in `grpc-status-details-bin`, and the `RateLimit` and
    /// `Retry-After` headers as response metadata. Other rejections map to `INVALID_ARGUMENT`,
    /// `INTERNAL` and `UNAVAILABLE`. Keys come from metadata with [`Key::header`](crate::Key::header)
    /// (gRPC metadata are HTTP/2 headers). An [`on_rejection`](Self::on_rejection) hook then
    /// receives the gRPC response.
    #[cfg(feature = "grpc")]
    pub fn grpc(mut self, grpc: bool) -> Self {
        Arc::make_mut(&mut self.config).grpc = grpc;
        self
    }

    /// Responses keep the inner service's own body type `B` (which must be `From<Bytes>`: axum's
    /// `Body`, `http_body_util::Full<Bytes>`), the layer's own responses converted into it,
    /// instead of a [`ResponseBody`](crate::ResponseBody) around either. Under axum the router
    /// then takes the response as its own `Body`, where a `ResponseBody` is boxed into one
    /// again: one allocation per request less. Leave it off for inner bodies that are not
    /// `From<Bytes>` (tonic's, hyper's `Incoming`).
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use kova::Quota;
    /// use kova_tower::{Key, Limit, RateLimitLayer};
    /// let per_ip = Limit::in_memory("ip", Quota::per_minute(60)?, Key::peer_ip())?;
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .layer(RateLimitLayer::new(per_ip).same_body());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn same_body(self) -> RateLimitLayer<SameBody> {
        RateLimitLayer { config: self.config, mode: PhantomData }
    }

    /// The limits, in the order they are checked.
    pub fn limits(&self) -> &[Limit] {
        &self.config.limits
    }
}

impl<S, M> Layer<S> for RateLimitLayer<M> {
    type Service = RateLimit<S, M>;

    fn layer(&self, inner: S) -> RateLimit<S, M> {
        RateLimit::new(inner, self.config.clone())
    }
}
