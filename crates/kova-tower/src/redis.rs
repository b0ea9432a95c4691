//! The Redis backend (feature `redis`): a limit shared by every server, through
//! [`kova_redis::RedisLimiter`].

use std::sync::Arc;

use kova::{CheckError, Quota};

use crate::{CheckFuture, ConfigError, Key, KeyedLimiter, Limit, LimitKey, LimiterError};

/// One [`kova_redis::Limit`] on a [`kova_redis::RedisLimiter`], as a [`KeyedLimiter`].
///
/// Keys are sent as their text form ([`LimitKey`]'s `Display`, e.g. `ip:203.0.113.7/32`), which
/// the Redis limiter escapes into its own key space. The Redis limiter's
/// [`FailurePolicy`](kova_redis::FailurePolicy) applies when Redis is down or slow: fail-open and
/// fail-closed decisions come back marked with their [`Fallback`](kova::Fallback) (reported to
/// the metrics hook as backend failures); with `ReturnError` the layer's
/// [`OnBackendError`](crate::OnBackendError) decides.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use kova::Quota;
/// use kova_redis::FailurePolicy;
/// use kova_tower::{Key, Limit, RateLimitLayer, RedisBackend};
///
/// let redis = kova_redis::RedisLimiter::builder()
///     .timeout(Duration::from_millis(20))
///     .failure_policy(FailurePolicy::FailOpen)
///     .connect("redis://127.0.0.1:6379")
///     .await?;
/// let per_ip = kova_redis::Limit::gcra(Quota::per_minute(60)?)?;
/// let layer = RateLimitLayer::new(Limit::redis("ip", Key::peer_ip(), RedisBackend::new(redis, per_ip))?);
/// # let _ = layer; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisBackend {
    limiter: kova_redis::RedisLimiter,
    limit: Arc<kova_redis::Limit>,
}

impl RedisBackend {
    /// `limit` enforced in the Redis behind `limiter` (one limiter, one connection, can serve
    /// many limits).
    pub fn new(limiter: kova_redis::RedisLimiter, limit: kova_redis::Limit) -> Self {
        RedisBackend { limiter, limit: Arc::new(limit) }
    }

    /// The quota the Redis limit enforces.
    pub fn quota(&self) -> Quota {
        self.limit.quota()
    }
}

impl KeyedLimiter for RedisBackend {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        let backend = self.clone();
        let key = key.to_string();
        CheckFuture::new(async move {
            backend.limiter.check_n(key.as_bytes(), &backend.limit, cost).await.map_err(|e| match e {
                kova_redis::Error::Cost(CheckError::CostExceedsCapacity { cost, capacity }) => {
                    LimiterError::CostExceedsCapacity { cost, capacity }
                }
                other => LimiterError::backend(other),
            })
        })
    }
}

impl Limit {
    /// A limit kept in Redis, shared by every server using the same Redis and prefix; its
    /// `RateLimit-Policy` announces the Redis limit's quota.
    pub fn redis(name: &str, key: impl Into<Key>, backend: RedisBackend) -> Result<Self, ConfigError> {
        let quota = backend.quota();
        Limit::new(name, quota, key, backend)
    }
}
