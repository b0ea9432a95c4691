//! Limit: one named quota, the limiter that enforces it, whom it counts and what each request
//! costs.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::HeaderName;
use kova::sketch::{Sketch, SketchError};
use kova::{Algorithm, Clock, CoarseClock, Gcra, Keyed, Quota, QuotaError};

use crate::headers::{self, QuotaUnit};
use crate::settle::SettleFrom;
use crate::{CompositeLimiter, Key, KeyedLimiter, LimitKey};

type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;
pub(crate) type Filter = dyn Fn(&Parts) -> bool + Send + Sync;

/// What a limit does when its key cannot be found for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MissingKeyPolicy {
    /// Answer with an error response (400 or 500, see [`KeyError::status`](crate::KeyError::status))
    /// naming the cause. The default.
    #[default]
    Reject,
    /// The limit does not apply to this request (a per-user limit on an anonymous request).
    /// Use it only where the key is optional by design: a client able to make its key
    /// unreadable is then not limited by this limit.
    Skip,
}

/// A limit that could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The quota was rejected by the algorithm.
    Quota(QuotaError),
    /// A limit's name must be 1 to 64 characters of `A-Z a-z 0-9 _ - .` (it appears in headers,
    /// JSON bodies and metrics).
    InvalidName(String),
    /// The quotas of a [`CompositeLimit`](crate::CompositeLimit) could not make a composite.
    Composite(kova::limits::LimitsError),
    /// The keyed table could not be built with these options.
    Table(kova::keyed::KeyedError),
    /// A [`Limit::sketch`]'s sketch could not be built.
    Sketch(SketchError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Quota(e) => write!(f, "invalid quota: {e}"),
            ConfigError::InvalidName(name) => {
                write!(f, "limit name {name:?} must be 1 to 64 characters of A-Z a-z 0-9 _ - .")
            }
            ConfigError::Composite(e) => write!(f, "invalid composite: {e}"),
            ConfigError::Table(e) => write!(f, "invalid table: {e}"),
            ConfigError::Sketch(e) => write!(f, "invalid sketch: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Quota(e) => Some(e),
            ConfigError::InvalidName(_) => None,
            ConfigError::Composite(e) => Some(e),
            ConfigError::Table(e) => Some(e),
            ConfigError::Sketch(e) => Some(e),
        }
    }
}

impl From<QuotaError> for ConfigError {
    fn from(e: QuotaError) -> Self {
        ConfigError::Quota(e)
    }
}

impl From<kova::keyed::KeyedError> for ConfigError {
    /// A quota the table's algorithm rejects stays a [`ConfigError::Quota`].
    fn from(e: kova::keyed::KeyedError) -> Self {
        match e {
            kova::keyed::KeyedError::Quota(e) => ConfigError::Quota(e),
            e => ConfigError::Table(e),
        }
    }
}

#[derive(Clone)]
pub(crate) enum Cost {
    Fixed(u64),
    PerRequest(Arc<CostFn>),
}

/// One named limit: a quota, the limiter enforcing it, the key it counts by, and the cost of a
/// request. Clones share the limiter (and so the counts): the same limit at cost 1 on cheap
/// routes and cost 5 on an expensive one draws from one bucket per client.
///
/// ```
/// use http::header::HeaderName;
/// use kova::Quota;
/// use kova_tower::{Key, Limit};
/// // 60 requests a minute per client network; a search costs 5 of them.
/// let per_ip = Limit::in_memory("ip", Quota::per_minute(60)?, Key::peer_ip())?
///     .cost_fn(|parts| if parts.uri.path().starts_with("/search") { 5 } else { 1 });
/// // 1000 an hour per API key, only on /api.
/// let per_key = Limit::in_memory("api", Quota::per_hour(1000)?, Key::header(HeaderName::from_static("x-api-key")))?
///     .when(|parts| parts.uri.path().starts_with("/api/"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Limit {
    name: Arc<str>,
    quota: Quota,
    limiter: Arc<dyn KeyedLimiter>,
    key: Key,
    cost: Cost,
    filter: Option<Arc<Filter>>,
    missing_key: MissingKeyPolicy,
    unit: QuotaUnit,
    policy_item: Arc<str>,
    /// The start of this limit's `RateLimit` member, `"name";r=`, written once so that an
    /// allowed request's value is its two numbers and one copy of this.
    state_prefix: Arc<str>,
    settle_from: Option<SettleFrom>,
    /// Set when the limit is one of a [`CompositeLimit`](crate::CompositeLimit)'s.
    member: Option<Member>,
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("name", &self.name)
            .field("quota", &self.quota)
            .field("missing_key", &self.missing_key)
            .finish_non_exhaustive()
    }
}

impl Limit {
    /// An in-memory limit (GCRA on the coarse clock) named `name`, counting by `key`.
    pub fn in_memory(name: &str, quota: Quota, key: impl Into<Key>) -> Result<Self, ConfigError> {
        Self::in_memory_with::<Gcra, _>(name, quota, key, CoarseClock::new())
    }

    /// An in-memory limit with algorithm `A` reading `clock` (a
    /// [`ManualClock`](kova::ManualClock) in tests).
    ///
    /// ```
    /// use kova::{FixedWindow, ManualClock, Quota};
    /// use kova_tower::{Key, Limit};
    /// let clock = ManualClock::new();
    /// let limit = Limit::in_memory_with::<FixedWindow, _>("daily", Quota::per_hour(24)?, Key::global(), clock)?;
    /// assert_eq!(limit.name(), "daily");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_memory_with<A: Algorithm, C: Clock + 'static>(
        name: &str,
        quota: Quota,
        key: impl Into<Key>,
        clock: C,
    ) -> Result<Self, ConfigError> {
        let limiter = Keyed::<LimitKey, A, C>::with_clock(quota, clock)?;
        Self::new(name, quota, key, limiter)
    }

    /// A limit keyed in fixed memory: every key (client IP, API key) limited by GCRA in a
    /// [`Sketch`] of [`DEFAULT_MEMORY_BYTES`](kova::sketch::DEFAULT_MEMORY_BYTES) (64 KiB) on the
    /// coarse clock, however many keys arrive; no key is ever admitted more than `quota`, and a
    /// collision between keys can only deny early (see [`kova::sketch`] for the bound and the
    /// rule for sizing it). Every decision is marked
    /// [`Fallback::Sketch`](kova::Fallback::Sketch) (with the `metrics` feature,
    /// `kova_fallback_total{fallback="sketch"}`). For another memory or clock, build the sketch
    /// and pass it to [`sketch_with`](Self::sketch_with).
    ///
    /// A sketch cannot give units back: a request it admitted that a later limit of the layer
    /// denies keeps its units spent (an over-charge, never a grant). Put it last where that
    /// matters.
    ///
    /// ```
    /// use kova::Quota;
    /// use kova_tower::{Key, Limit};
    /// // 100 a minute per IPv6 /64 (or IPv4 address), in 64 KiB whatever the number of networks.
    /// let per_network = Limit::sketch("net", Quota::per_minute(100)?, Key::peer_ip())?;
    /// assert_eq!(per_network.name(), "net");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sketch(name: &str, quota: Quota, key: impl Into<Key>) -> Result<Self, ConfigError> {
        let sketch = Sketch::new(quota).map_err(ConfigError::Sketch)?;
        Self::sketch_with(name, sketch, key)
    }

    /// [`sketch`](Self::sketch) with a sketch built beforehand (its memory, cells per key and
    /// clock); the limit announces the sketch's quota.
    ///
    /// ```
    /// use kova::sketch::Sketch;
    /// use kova::{ManualClock, Quota};
    /// use kova_tower::{Key, Limit};
    /// let sketch = Sketch::builder(Quota::per_second(5)?).memory_bytes(1 << 20).clock(ManualClock::new()).build()?;
    /// let limit = Limit::sketch_with("ip", sketch, Key::peer_ip())?;
    /// assert_eq!(limit.name(), "ip");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sketch_with<C: Clock + 'static>(
        name: &str,
        sketch: Sketch<C>,
        key: impl Into<Key>,
    ) -> Result<Self, ConfigError> {
        Self::new(name, sketch.quota(), key, sketch)
    }

    /// A limit enforced by any [`KeyedLimiter`] (a shared store, your own). `quota` must be the
    /// one the limiter enforces: it is what `RateLimit-Policy` announces.
    pub fn new(
        name: &str,
        quota: Quota,
        key: impl Into<Key>,
        limiter: impl KeyedLimiter,
    ) -> Result<Self, ConfigError> {
        Self::from_shared(name, quota, key, Arc::new(limiter))
    }

    /// [`new`](Self::new) with a limiter already shared.
    pub fn from_shared(
        name: &str,
        quota: Quota,
        key: impl Into<Key>,
        limiter: Arc<dyn KeyedLimiter>,
    ) -> Result<Self, ConfigError> {
        if !headers::is_valid_policy_name(name) {
            return Err(ConfigError::InvalidName(name.to_owned()));
        }
        let mut item = String::new();
        headers::write_policy_item(&mut item, name, &quota);
        Ok(Limit {
            name: name.into(),
            quota,
            limiter,
            key: key.into(),
            cost: Cost::Fixed(1),
            filter: None,
            missing_key: MissingKeyPolicy::Reject,
            unit: QuotaUnit::Requests,
            policy_item: item.into(),
            state_prefix: headers::state_prefix(name).into(),
            settle_from: None,
            member: None,
        })
    }

    /// Settles each allowed request's cost from the response: the limit checks the estimate
    /// (its [`cost`](Self::cost) or [`cost_fn`](Self::cost_fn)), and once the response's head
    /// arrives, the integer in header `name` (an upstream's tokens-used header) is its real
    /// cost. A lower cost is given back, a higher one charged, into the quota's overdraft
    /// ([`Quota::with_overdraft`](kova::Quota::with_overdraft); GCRA only) where it has one:
    /// a debt that later requests pay off. The response's `RateLimit` header shows the state
    /// after settling.
    ///
    /// A response without the header keeps the estimate. A header that is not a whole number,
    /// or a limiter that cannot settle, also keeps the estimate and is reported as
    /// [`EventKind::SettleFailed`](crate::EventKind::SettleFailed) (with the `metrics` feature,
    /// `kova_settle_failures_total`); an extra charge that did not fit even in the overdraft is
    /// [`EventKind::Settled`](crate::EventKind::Settled)'s `uncharged`. The cost is read from
    /// the response's head, before its body streams (a count sent in trailers is not read). A
    /// request the layer does not pass on (denied) is never settled, and neither is a decision
    /// a failure policy made (nothing was charged) or a local share's while the store is down
    /// (the settlement could not reach it). A decision answered from a lease of the store's
    /// units (`Fallback::LocalCache`) took its units, and is settled like any other.
    ///
    /// ```
    /// use http::header::HeaderName;
    /// use kova::Quota;
    /// use kova_tower::{Key, Limit};
    /// // 100k tokens a minute per API key, up to 20k of debt; a call is estimated at 1,000
    /// // tokens and settled from the upstream's header.
    /// let quota = Quota::per_minute(100_000)?.with_overdraft(20_000);
    /// let tokens = Limit::in_memory("tokens", quota, Key::header(HeaderName::from_static("x-api-key")))?
    ///     .cost(1_000)
    ///     .settle_from_header(HeaderName::from_static("x-tokens-used"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_from_header(self, name: HeaderName) -> Self {
        Limit { settle_from: Some(SettleFrom::Header(name)), ..self }
    }

    /// Settles each allowed request's cost from the [`ActualCost`](crate::ActualCost) response
    /// extension the handler sets, as [`settle_from_header`](Self::settle_from_header) does
    /// from a header.
    pub fn settle_from_extension(self) -> Self {
        Limit { settle_from: Some(SettleFrom::Extension), ..self }
    }

    pub(crate) fn settle_from(&self) -> Option<&SettleFrom> {
        self.settle_from.as_ref()
    }

    pub(crate) fn member(&self) -> Option<&Member> {
        self.member.as_ref()
    }

    pub(crate) fn into_member(self, member: Member) -> Self {
        Limit { member: Some(member), ..self }
    }

    pub(crate) fn with_cost_rule(self, cost: Cost) -> Self {
        Limit { cost, ..self }
    }

    pub(crate) fn with_filter(self, filter: Option<Arc<Filter>>) -> Self {
        Limit { filter, ..self }
    }

    /// What the quota counts, announced as `qu` in `RateLimit-Policy` (default
    /// [`QuotaUnit::Requests`], which the draft leaves unwritten). Set it wherever the cost of a
    /// request is not one request: a cost function counting bytes is
    /// [`QuotaUnit::ContentBytes`].
    ///
    /// ```
    /// use kova::Quota;
    /// use kova_tower::{headers::QuotaUnit, Key, Limit};
    /// let upload = Limit::in_memory("upload", Quota::per_minute(1 << 20)?, Key::peer_ip())?
    ///     .cost_fn(|parts| {
    ///         let length = parts.headers.get(http::header::CONTENT_LENGTH);
    ///         length.and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(1)
    ///     })
    ///     .quota_unit(QuotaUnit::ContentBytes);
    /// assert_eq!(upload.unit(), QuotaUnit::ContentBytes);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota_unit(mut self, unit: QuotaUnit) -> Self {
        let mut item = String::new();
        headers::write_policy_item_in(&mut item, &self.name, &self.quota, unit);
        self.unit = unit;
        self.policy_item = item.into();
        self
    }

    /// Every request costs `cost` units (default 1). A cost above the quota's burst can never be
    /// admitted: such requests get a 500 naming the misconfiguration.
    pub fn cost(self, cost: u64) -> Self {
        Limit { cost: Cost::Fixed(cost), ..self }
    }

    /// A request costs what `f` says (per route, per method, per body size header...).
    pub fn cost_fn(self, f: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        Limit { cost: Cost::PerRequest(Arc::new(f)), ..self }
    }

    /// The limit applies only to requests for which `f` is true (a route with its own quota).
    pub fn when(self, f: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        Limit { filter: Some(Arc::new(f)), ..self }
    }

    /// What to do when the key cannot be found (default: [`MissingKeyPolicy::Reject`]).
    pub fn missing_key(self, policy: MissingKeyPolicy) -> Self {
        Limit { missing_key: policy, ..self }
    }

    /// The name (in headers, bodies and metrics).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The quota announced.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// What the quota counts (see [`quota_unit`](Self::quota_unit)).
    pub fn unit(&self) -> QuotaUnit {
        self.unit
    }

    pub(crate) fn limiter(&self) -> &dyn KeyedLimiter {
        &*self.limiter
    }

    pub(crate) fn key(&self) -> &Key {
        &self.key
    }

    pub(crate) fn missing_key_policy(&self) -> MissingKeyPolicy {
        self.missing_key
    }

    pub(crate) fn policy_item(&self) -> &str {
        &self.policy_item
    }

    /// `"name";r=`: see [`headers::state_value_of`].
    pub(crate) fn state_prefix(&self) -> &str {
        &self.state_prefix
    }

    pub(crate) fn applies_to(&self, parts: &Parts) -> bool {
        match &self.filter {
            Some(filter) => filter(parts),
            None => true,
        }
    }

    pub(crate) fn cost_of(&self, parts: &Parts) -> u64 {
        match &self.cost {
            Cost::Fixed(cost) => *cost,
            Cost::PerRequest(f) => f(parts),
        }
    }
}

/// The composite a limit belongs to, shared by its members.
pub(crate) struct Group {
    pub(crate) limiter: Arc<dyn CompositeLimiter>,
    pub(crate) len: usize,
}

/// One limit's place in its composite.
#[derive(Clone)]
pub(crate) struct Member {
    pub(crate) group: Arc<Group>,
    pub(crate) position: usize,
}

impl Member {
    /// Whether `limits` (the layer's, from this member on) hold the whole composite in order:
    /// then the layer decides it in one step.
    pub(crate) fn heads_whole_group(&self, limits: &[Limit]) -> bool {
        let Some(members) = limits.get(..self.group.len) else {
            return false;
        };
        self.position == 0
            && members.iter().enumerate().all(|(offset, limit)| {
                limit.member().is_some_and(|m| Arc::ptr_eq(&m.group, &self.group) && m.position == offset)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_and_policy_items_precomputed() {
        let quota = Quota::per_minute(100).unwrap();
        assert_eq!(
            Limit::in_memory("a b", quota, Key::global()).unwrap_err(),
            ConfigError::InvalidName("a b".into())
        );
        assert!(Limit::in_memory("", quota, Key::global()).is_err());
        assert!(Limit::in_memory(&"x".repeat(65), quota, Key::global()).is_err());
        let limit = Limit::in_memory("per-ip_v1.2", quota, Key::global()).unwrap();
        assert_eq!(limit.policy_item(), "\"per-ip_v1.2\";q=100;w=60");
        assert_eq!(limit.state_prefix(), "\"per-ip_v1.2\";r=");
        assert!(matches!(
            Limit::in_memory_with::<kova::FixedWindow, _>(
                "w",
                quota.with_burst(5).unwrap(),
                Key::global(),
                CoarseClock::new()
            ),
            Err(ConfigError::Quota(QuotaError::BurstUnsupported { .. }))
        ));
    }
}
