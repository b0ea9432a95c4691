//! The Redis backend (feature `redis`): a limit shared by every server, through
//! [`kova_redis::RedisLimiter`].

use std::sync::Arc;

use kova::{CheckError, GiveBack, Quota};

use crate::{
    CheckFuture, CompositeCheckFuture, CompositeLimit, CompositeLimiter, ConfigError, Key, KeyedLimiter,
    Limit, LimitKey, LimiterError, SettleError, SettleFuture, Settled,
};

/// A Redis error as the layer's: a cost above the capacity is the caller's, anything else the
/// backend's.
fn limiter_error(error: kova_redis::Error) -> LimiterError {
    match error {
        kova_redis::Error::Cost(CheckError::CostExceedsCapacity { cost, capacity }) => {
            LimiterError::CostExceedsCapacity { cost, capacity }
        }
        other => LimiterError::backend(other),
    }
}

/// One [`kova_redis::RedisLimit`] on a [`kova_redis::RedisLimiter`], as a [`KeyedLimiter`].
///
/// Keys are sent as their text form ([`LimitKey`]'s `Display`, e.g. `ip:203.0.113.7/32`) after
/// the limit's name (`per_ip/ip:203.0.113.7/32` for [`Limit::redis`]`("per_ip", ..)`), which the
/// Redis limiter escapes into its own key space: limits of one algorithm on the same key keep
/// their own state, as in-memory limits keep their own tables. The Redis limiter's
/// [`StoreFailurePolicy`](kova_redis::StoreFailurePolicy) applies when Redis is down or slow: fail-open and
/// fail-closed decisions come back marked with their [`Fallback`](kova::Fallback) (reported to
/// the metrics hook as backend failures); with `ReturnError` the layer's
/// [`BackendFailurePolicy`](crate::BackendFailurePolicy) decides.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use kova::Quota;
/// use kova_redis::StoreFailurePolicy;
/// use kova_tower::{Key, Limit, RateLimitLayer, RedisBackend};
///
/// let redis = kova_redis::RedisLimiter::builder()
///     .timeout(Duration::from_millis(20))
///     .store_failure(StoreFailurePolicy::FailOpen)
///     .connect("redis://127.0.0.1:6379")
///     .await?;
/// let per_ip = kova_redis::RedisLimit::gcra(Quota::per_minute(60)?)?;
/// let layer = RateLimitLayer::new(Limit::redis("ip", Key::peer_ip(), RedisBackend::new(redis, per_ip))?);
/// # let _ = layer; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisBackend {
    limiter: kova_redis::RedisLimiter,
    limit: Arc<kova_redis::RedisLimit>,
    /// The limit's algorithm in memory, for its rule of what a late give-back may return
    /// ([`kova::Algorithm::still_counted`]); `None` (nothing given back) should kova not build it.
    rule: Option<kova::AnyAlgorithm>,
    /// The limit's name, which [`Limit::redis`] sets: the Redis key of a layer's key is
    /// `name/key`, so that limits of one algorithm on the same key keep their own state (their
    /// Redis keys would otherwise be the same: kova-redis keys by algorithm, not by quota).
    name: Arc<str>,
}

impl RedisBackend {
    /// `limit` enforced in the Redis behind `limiter` (one limiter, one connection, can serve
    /// many limits: each [`Limit::redis`] keeps its own state, under its name).
    pub fn new(limiter: kova_redis::RedisLimiter, limit: kova_redis::RedisLimit) -> Self {
        let rule = kova::AnyAlgorithm::new(limit.kind(), limit.quota()).ok();
        RedisBackend { limiter, limit: Arc::new(limit), rule, name: Arc::from("") }
    }

    /// The quota the Redis limit enforces.
    pub fn quota(&self) -> Quota {
        self.limit.quota()
    }
}

impl KeyedLimiter for RedisBackend {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        let backend = self.clone();
        let key = redis_key(&self.name, key);
        CheckFuture::new(async move {
            backend.limiter.check_n(key.as_bytes(), &backend.limit, cost).await.map_err(limiter_error)
        })
    }

    /// Gives the units back where they were counted: to this server's local share when Redis
    /// was down (`kova_redis::RedisLimiter::refund_local`), else to Redis, in a task of the
    /// current tokio runtime (the layer does not wait for it; a refund that fails leaves the
    /// units consumed, stricter, never looser). `false` for the sliding window log, which takes
    /// no refunds, and outside a runtime.
    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        if self.limit.kind() == kova::AlgorithmKind::SlidingWindowLog {
            return false;
        }
        let key = redis_key(&self.name, key);
        if self.limiter.refund_local(key.as_bytes(), &self.limit, cost) {
            return true;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return false };
        let backend = self.clone();
        runtime.spawn(async move {
            let _ = backend.limiter.refund(key.as_bytes(), &backend.limit, cost).await;
        });
        true
    }

    /// The rule of the Redis limit's algorithm under its quota, which Redis enforces as kova
    /// does in memory: none once a window has ended, not what GCRA or a token bucket has
    /// refilled since. For a quota Redis takes and kova's in-memory algorithm does not (a larger
    /// burst), the window rule: the whole charge until the decision's reset, none after.
    fn still_counted(
        &self,
        _: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        match self.rule {
            Some(rule) => {
                kova::Algorithm::still_counted(&rule, taken, elapsed_nanos, reset_after_nanos, give_back)
            }
            None if elapsed_nanos < reset_after_nanos => taken,
            None => 0,
        }
    }

    /// Settles in Redis (`kova_redis::RedisLimiter::settle`: a refund when lower, a charge into
    /// the quota's overdraft when higher), then peeks the key for the `RateLimit` header. When
    /// Redis cannot answer, the estimate stands and the failure is reported
    /// ([`SettleError::Backend`]): no failure policy makes up a settlement.
    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture {
        let backend = self.clone();
        let key = redis_key(&self.name, key);
        SettleFuture::new(async move {
            let redis = &backend.limiter;
            let settlement = redis
                .settle(key.as_bytes(), &backend.limit, estimated, actual)
                .await
                .map_err(|e| SettleError::Backend(Box::new(e)))?;
            let after = redis.peek(key.as_bytes(), &backend.limit).await.ok();
            Ok(Settled::new(settlement, after))
        })
    }
}

/// Several [`kova_redis::RedisLimit`]s on one key, decided all or nothing in one Redis script
/// ([`kova_redis::RedisLimiter::check_limits_n`]), as a [`CompositeLimiter`]: build the layer's
/// limit with [`CompositeLimit::redis`]. The Redis limiter's failure policy applies as for one
/// limit, each decision marked with its [`Fallback`](kova::Fallback).
#[derive(Debug, Clone)]
pub struct RedisCompositeBackend {
    limiter: kova_redis::RedisLimiter,
    limits: Arc<kova_redis::Limits>,
    quotas: Arc<[Quota]>,
    /// The members' names joined by `+`, which [`CompositeLimit::redis`] sets: as
    /// [`RedisBackend`]'s name, so that two composites on the same key keep their own state.
    name: Arc<str>,
}

impl RedisCompositeBackend {
    /// `limits` (in order; at most [`kova::limits::MAX_LIMITS`]) enforced together in the Redis behind
    /// `limiter`.
    pub fn new(
        limiter: kova_redis::RedisLimiter,
        limits: impl IntoIterator<Item = kova_redis::RedisLimit>,
    ) -> Result<Self, kova::limits::LimitsError> {
        let limits: Vec<kova_redis::RedisLimit> = limits.into_iter().collect();
        let quotas = limits.iter().map(kova_redis::RedisLimit::quota).collect();
        let limits = Arc::new(kova_redis::Limits::new(limits)?);
        Ok(RedisCompositeBackend { limiter, limits, quotas, name: Arc::from("") })
    }

    /// The quotas, in order.
    pub fn quotas(&self) -> &[Quota] {
        &self.quotas
    }
}

impl CompositeLimiter for RedisCompositeBackend {
    fn check(&self, key: &LimitKey, cost: u64) -> CompositeCheckFuture {
        let backend = self.clone();
        let key = redis_key(&self.name, key);
        CompositeCheckFuture::new(async move {
            backend.limiter.check_limits_n(key.as_bytes(), &backend.limits, cost).await.map_err(limiter_error)
        })
    }
}

impl CompositeLimit {
    /// Several limits kept in Redis behind `limiter`, named and in order, decided all or
    /// nothing in one script ([`RedisCompositeBackend`]); each gets its own `RateLimit` member.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use kova::Quota;
    /// use kova_tower::{CompositeLimit, Key, RateLimitLayer};
    ///
    /// let redis = kova_redis::RedisLimiter::builder().connect("redis://127.0.0.1:6379").await?;
    /// let limits = CompositeLimit::redis(
    ///     Key::peer_ip(),
    ///     redis,
    ///     [
    ///         ("second", kova_redis::RedisLimit::gcra(Quota::per_second(10)?.with_burst(50)?)?),
    ///         ("day", kova_redis::RedisLimit::gcra(Quota::per_day(10_000)?)?),
    ///     ],
    /// )?;
    /// let layer = RateLimitLayer::from_composite(limits);
    /// # let _ = layer; Ok(()) }
    /// ```
    pub fn redis<'a>(
        key: impl Into<Key>,
        limiter: kova_redis::RedisLimiter,
        limits: impl IntoIterator<Item = (&'a str, kova_redis::RedisLimit)>,
    ) -> Result<Self, ConfigError> {
        let (names, limits): (Vec<&str>, Vec<kova_redis::RedisLimit>) = limits.into_iter().unzip();
        let mut backend = RedisCompositeBackend::new(limiter, limits).map_err(ConfigError::Composite)?;
        backend.name = Arc::from(names.join("+"));
        let named: Vec<(&str, Quota)> = names.into_iter().zip(backend.quotas().iter().copied()).collect();
        CompositeLimit::new(key, named, backend)
    }
}

impl Limit {
    /// A limit kept in Redis, shared by every server using the same Redis and prefix; its
    /// `RateLimit-Policy` announces the Redis limit's quota.
    pub fn redis(name: &str, key: impl Into<Key>, mut backend: RedisBackend) -> Result<Self, ConfigError> {
        let quota = backend.quota();
        backend.name = Arc::from(name);
        Limit::new(name, quota, key, backend)
    }
}

/// The text a layer's `key` is sent to Redis as under `name`: `name/key` (policy names have no
/// `/`, so the first `/` ends the name), or the key alone without a name.
fn redis_key(name: &str, key: &LimitKey) -> String {
    if name.is_empty() {
        key.to_string()
    } else {
        format!("{name}/{key}")
    }
}
