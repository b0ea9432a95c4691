//! CompositeLimit: several limits on one key (10 a second AND 1,000 an hour AND 10,000 a day per
//! API key), decided all or nothing in one step by a composite limiter: kova's [`KeyedLimits`]
//! in memory, or a backend's own through [`CompositeLimiter`]. Each member is a [`Limit`] that
//! knows its place in the composite (`Member`, in `limit.rs`).

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use kova::limits::{KeyedLimits, LimitsDecision, LimitsError};
use kova::{Clock, CoarseClock, Decision, Gcra, GiveBack, Quota, WordAlgorithm};

use crate::headers::QuotaUnit;
use crate::limit::{Cost, Filter, Group, Member};
use crate::{
    CheckFuture, CompositeLimiter, ConfigError, Key, KeyedLimiter, Limit, LimitKey, LimiterError,
    MissingKeyPolicy, SettleError, SettleFuture, Settled,
};

/// A member limit used on its own (cloned out of its composite into another layer): it checks
/// and refunds the whole composite, and answers with its own quota's decision. Its quota is the
/// one the composite names for it.
struct MemberLimiter(Member, Quota);

impl KeyedLimiter for MemberLimiter {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        let position = self.0.position;
        // A composite (a store's own, say) that answers for fewer limits is a failing backend.
        let pick = move |all: LimitsDecision| {
            let len = all.limit_decisions().len();
            let own = all.limit_decisions().get(position).copied().ok_or_else(|| {
                LimiterError::backend(format!(
                    "a composite answered {len} decisions, none for limit {position}"
                ))
            })?;
            if all.is_allowed() || !own.is_allowed() {
                return Ok(own);
            }
            // Another member denied: this member's entry is a look at its state, which admits,
            // but the composite took nothing, so the request is denied until the deciding
            // member admits it.
            let retry = all.decision().retry_after_nanos();
            Ok(Decision::denied(own.limit(), own.remaining(), retry, own.reset_after_nanos()))
        };
        match self.0.group.limiter.check(key, cost).into_ready() {
            Ok(result) => CheckFuture::ready(result.and_then(pick)),
            Err(future) => CheckFuture::new(async move { future.await.and_then(pick) }),
        }
    }

    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        self.0.group.limiter.refund(key, cost)
    }

    /// A refund gives back to every member of the composite, but the layer holds only this
    /// member's decision: what the others still count is not known. A composite of this member
    /// alone has its own rule. Otherwise a settlement gives nothing back (the stricter answer);
    /// an undo (the request was denied, and a denial takes nothing) gives the whole charge back
    /// while this member's reset has not passed, as a window would.
    fn still_counted(
        &self,
        key: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        if self.0.group.len == 1 {
            self.0.group.limiter.still_counted(
                key,
                taken,
                elapsed_nanos,
                &[(self.1, reset_after_nanos)],
                give_back,
            )
        } else if give_back == GiveBack::Undo && elapsed_nanos < reset_after_nanos {
            taken
        } else {
            0
        }
    }

    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture {
        let position = self.0.position;
        let pick = move |all: Vec<Settled>| {
            all.get(position)
                .copied()
                .ok_or_else(|| SettleError::Backend("a composite settle left out a limit".into()))
        };
        let settle = self.0.group.limiter.settle(key, estimated, actual);
        SettleFuture::new(async move { settle.await.and_then(pick) })
    }
}

/// Several named limits on one key, decided all or nothing in one step: a request is admitted
/// only if every limit admits it, a denial takes nothing from any, and every limit's `RateLimit`
/// member shows its state after the decision. They share the key, the cost, the filter and the
/// missing-key policy; each keeps its own name and quota in the headers, bodies and metrics.
///
/// Add it to a layer with [`RateLimitLayer::composite`](crate::RateLimitLayer::composite). A
/// composite is kept only in memory ([`in_memory`](Self::in_memory), on kova's
/// [`KeyedLimits`]) or by a backend that implements [`CompositeLimiter`]
/// ([`new`](Self::new)); limits of a backend without a composite are added one by one as
/// [`Limit`]s instead, and checked in order with a refund on a later denial.
///
/// ```
/// use axum::{body::Body, routing::get, Router};
/// use http::{header::HeaderName, Request, StatusCode};
/// use kova::{Gcra, ManualClock, Quota};
/// use kova_tower::{CompositeLimit, Key, RateLimitLayer};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let clock = ManualClock::new();
/// // Per API key: 10 a second with bursts of 50, AND 100 an hour, AND 1,000 a day.
/// let api_key = HeaderName::from_static("x-api-key");
/// let quotas = [
///     ("second", Quota::per_second(10)?.with_burst(50)?),
///     ("hour", Quota::per_hour(100)?),
///     ("day", Quota::per_day(1_000)?),
/// ];
/// let per_key = CompositeLimit::in_memory_with::<Gcra, _>(Key::header(api_key), quotas, clock)?
///     .cost_fn(|parts| if parts.uri.path() == "/batch" { 40 } else { 1 });
/// let app = Router::new()
///     .route("/", get(|| async { "ok" }))
///     .route("/batch", get(|| async { "done" }))
///     .layer(RateLimitLayer::from_composite(per_key));
/// let call = |path: &str| Request::get(path).header("x-api-key", "k1").body(Body::empty()).unwrap();
///
/// let batch = app.clone().oneshot(call("/batch")).await?;
/// assert_eq!(batch.headers()["ratelimit"], r#""second";r=10;t=4, "hour";r=60;t=1440, "day";r=960;t=3456"#);
/// // A second batch fits the second's burst (10 + refill) no more: denied, and nothing is
/// // taken from the hour or the day.
/// let denied = app.clone().oneshot(call("/batch")).await?;
/// assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(denied.headers()["ratelimit"], r#""second";r=10;t=3, "hour";r=60;t=1440, "day";r=960;t=3456"#);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct CompositeLimit {
    limits: Vec<Limit>,
}

impl fmt::Debug for CompositeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompositeLimit").field("limits", &self.limits).finish()
    }
}

impl CompositeLimit {
    /// In memory (GCRA on the coarse clock): the named quotas, in order, for every key `key`
    /// finds. At most [`kova::limits::MAX_LIMITS`].
    pub fn in_memory<'a>(
        key: impl Into<Key>,
        limits: impl IntoIterator<Item = (&'a str, Quota)>,
    ) -> Result<Self, ConfigError> {
        Self::in_memory_with::<Gcra, _>(key, limits, CoarseClock::new())
    }

    /// In memory with algorithm `W` reading `clock` (a [`ManualClock`](kova::ManualClock) in
    /// tests).
    ///
    /// ```
    /// use kova::{Gcra, ManualClock, Quota};
    /// use kova_tower::{CompositeLimit, Key};
    /// let clock = ManualClock::new();
    /// let both = CompositeLimit::in_memory_with::<Gcra, _>(
    ///     Key::peer_ip(),
    ///     [("minute", Quota::per_minute(10)?), ("hour", Quota::per_hour(100)?)],
    ///     clock,
    /// )?;
    /// assert_eq!(both.limits()[1].name(), "hour");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_memory_with<'a, W: WordAlgorithm, C: Clock + Clone + 'static>(
        key: impl Into<Key>,
        limits: impl IntoIterator<Item = (&'a str, Quota)>,
        clock: C,
    ) -> Result<Self, ConfigError> {
        let named: Vec<(&str, Quota)> = limits.into_iter().collect();
        let quotas = named.iter().map(|&(_, quota)| quota);
        let composite =
            KeyedLimits::<LimitKey, W, C>::with_clock(quotas, clock).map_err(ConfigError::Composite)?;
        Self::new(key, named, composite)
    }

    /// Over a backend's composite: `limits` name the quotas `composite` enforces, in its order
    /// (they are what `RateLimit-Policy` announces).
    pub fn new<'a>(
        key: impl Into<Key>,
        limits: impl IntoIterator<Item = (&'a str, Quota)>,
        composite: impl CompositeLimiter,
    ) -> Result<Self, ConfigError> {
        let named: Vec<(&str, Quota)> = limits.into_iter().collect();
        if named.is_empty() {
            return Err(ConfigError::Composite(LimitsError::Empty));
        }
        if named.len() > kova::limits::MAX_LIMITS {
            let error = LimitsError::TooMany { count: named.len(), max: kova::limits::MAX_LIMITS };
            return Err(ConfigError::Composite(error));
        }
        let key = key.into();
        let group = Arc::new(Group { limiter: Arc::new(composite), len: named.len() });
        let mut members = Vec::with_capacity(named.len());
        for (position, (name, quota)) in named.into_iter().enumerate() {
            let member = Member { group: group.clone(), position };
            let limiter = Arc::new(MemberLimiter(member.clone(), quota));
            members.push(Limit::from_shared(name, quota, key.clone(), limiter)?.into_member(member));
        }
        Ok(CompositeLimit { limits: members })
    }

    fn map(self, f: impl Fn(Limit) -> Limit) -> Self {
        CompositeLimit { limits: self.limits.into_iter().map(f).collect() }
    }

    /// Every request costs `cost` units of every limit (default 1).
    pub fn cost(self, cost: u64) -> Self {
        self.map(|limit| limit.cost(cost))
    }

    /// A request costs what `f` says, of every limit.
    pub fn cost_fn(self, f: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        let rule = Cost::PerRequest(Arc::new(f));
        self.map(|limit| limit.with_cost_rule(rule.clone()))
    }

    /// The limits apply only to requests for which `f` is true.
    pub fn when(self, f: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        let filter: Arc<Filter> = Arc::new(f);
        self.map(|limit| limit.with_filter(Some(filter.clone())))
    }

    /// What to do when the key cannot be found (default: [`MissingKeyPolicy::Reject`]).
    pub fn missing_key(self, policy: MissingKeyPolicy) -> Self {
        self.map(|limit| limit.missing_key(policy))
    }

    /// Settles each allowed request's cost from the response's header `name`, for every limit
    /// (see [`Limit::settle_from_header`]; each limit runs into its own overdraft).
    pub fn settle_from_header(self, name: http::HeaderName) -> Self {
        self.map(|limit| limit.settle_from_header(name.clone()))
    }

    /// Settles each allowed request's cost from the [`ActualCost`](crate::ActualCost) response
    /// extension, for every limit.
    pub fn settle_from_extension(self) -> Self {
        self.map(Limit::settle_from_extension)
    }

    /// What every quota counts (see [`Limit::quota_unit`]).
    pub fn quota_unit(self, unit: QuotaUnit) -> Self {
        self.map(|limit| limit.quota_unit(unit))
    }

    /// The member limits, in order.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    pub(crate) fn into_limits(self) -> Vec<Limit> {
        self.limits
    }
}
