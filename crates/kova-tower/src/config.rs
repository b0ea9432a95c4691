//! Config: what every [`RateLimit`](crate::RateLimit) service made by one layer shares, with
//! what can be worked out once instead of per request.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response};
use kova::Decision;

use crate::headers;
use crate::interned;
use crate::{BackendFailurePolicy, Event, EventKind, Limit, LimitKey, Metrics, PartitionKeys, Rejection};

pub(crate) type Responder = dyn Fn(&Rejection<'_>, Response<Bytes>) -> Response<Bytes> + Send + Sync;

/// What every [`RateLimit`](crate::RateLimit) service made by one layer shares.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) limits: Vec<Limit>,
    pub(crate) shadow: bool,
    pub(crate) legacy_headers: bool,
    pub(crate) near_limit_percent: u8,
    pub(crate) metrics: Option<Arc<dyn Metrics>>,
    pub(crate) backend_failure: BackendFailurePolicy,
    pub(crate) responder: Option<Arc<Responder>>,
    /// Publishes each limit's `pk` when set.
    pub(crate) partition_keys: Option<PartitionKeys>,
    /// Answers denials the gRPC way (status in headers, HTTP 200).
    #[cfg(feature = "grpc")]
    pub(crate) grpc: bool,
    /// `RateLimit-Policy` when every limit applied (the common case), written once, over
    /// `'static` bytes (`interned.rs`) so that cloning it writes nothing shared.
    pub(crate) all_policies: HeaderValue,
}

impl Config {
    /// No limits yet, every option at its default.
    pub(crate) fn new() -> Self {
        Config {
            limits: Vec::new(),
            shadow: false,
            legacy_headers: false,
            near_limit_percent: 10,
            metrics: None,
            backend_failure: BackendFailurePolicy::default(),
            responder: None,
            partition_keys: None,
            #[cfg(feature = "grpc")]
            grpc: false,
            all_policies: HeaderValue::from_static(""),
        }
    }

    /// Adds `limit` after the others, and writes the policy of them all again.
    pub(crate) fn push(&mut self, limit: Limit) {
        self.limits.push(limit);
        let items = self.limits.iter().map(|limit| (limit.policy_item(), None));
        if let Some(value) = headers::policy_value(items) {
            // Cloned onto every allowed response, from every worker thread.
            self.all_policies = interned::interned(value);
        }
    }

    /// The limit at `index`.
    #[expect(
        clippy::indexing_slicing,
        reason = "every index a request's run holds comes from walking these limits, which never change once the layer is built"
    )]
    pub(crate) fn limit(&self, index: usize) -> &Limit {
        &self.limits[index]
    }

    /// The `len` limits from `index`: a composite's members, in order.
    #[expect(
        clippy::indexing_slicing,
        reason = "a composite's members are counted only where `Member::heads_whole_group` found all of them, in order, from `index`"
    )]
    pub(crate) fn members(&self, index: usize, len: usize) -> &[Limit] {
        &self.limits[index..index + len]
    }

    /// The layer's only limit when it needs none of a run's bookkeeping: not a composite's
    /// member, not settled from the response, no partition key to publish.
    pub(crate) fn one_plain_limit(&self) -> Option<&Limit> {
        match &self.limits[..] {
            [limit]
                if limit.member().is_none()
                    && limit.settle_from().is_none()
                    && self.partition_keys.is_none() =>
            {
                Some(limit)
            }
            _ => None,
        }
    }

    /// Whether [`record`](Self::record) reports anywhere: a metrics hook, or the `metrics`
    /// facade.
    pub(crate) fn records(&self) -> bool {
        cfg!(feature = "metrics") || self.metrics.is_some()
    }

    /// Reports `kind` for the limit named `limit` to the metrics hook and, with the `metrics`
    /// feature, the `metrics` facade.
    pub(crate) fn record(&self, limit: &str, key: Option<&LimitKey>, kind: EventKind<'_>) {
        let event = Event { limit, key, shadow: self.shadow, kind };
        #[cfg(feature = "metrics")]
        crate::metrics_facade::record(&event);
        if let Some(metrics) = &self.metrics {
            metrics.record(&event);
        }
    }

    /// Whether an allowed `decision` has at most the near-limit share of its quota left.
    pub(crate) fn is_near_limit(&self, decision: &Decision) -> bool {
        let remaining = u128::from(decision.remaining()) * 100;
        remaining <= u128::from(decision.limit()) * u128::from(self.near_limit_percent)
    }
}
