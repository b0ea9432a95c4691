//! The metrics hook: one event per decision, key failure and backend failure.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use kova::reservation::Settlement;
use kova::{Decision, Fallback};

use crate::{KeyError, LimitKey, LimiterError, SettleError};

/// Receives the layer's events. Called on the request path: keep it cheap (count, don't log
/// every event).
///
/// Implemented for closures `Fn(&Event<'_>)`; [`CountingMetrics`] counts each kind.
pub trait Metrics: Send + Sync + 'static {
    /// One event.
    fn record(&self, event: &Event<'_>);
}

impl<F: Fn(&Event<'_>) + Send + Sync + 'static> Metrics for F {
    fn record(&self, event: &Event<'_>) {
        self(event)
    }
}

/// Something the layer did for one limit of one request.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Event<'a> {
    /// The limit's name.
    pub limit: &'a str,
    /// The key checked, when one was found.
    pub key: Option<&'a LimitKey>,
    /// Whether the layer runs in shadow mode (a denial was recorded, not enforced).
    pub shadow: bool,
    /// What happened.
    pub kind: EventKind<'a>,
}

/// What happened. Every checked limit gives exactly one of `Allowed`, `NearLimit` and `Denied`;
/// a backend failure gives a `BackendFailure` first (and then, if a failure policy decided, that
/// decision's event). A limit that settles from the response gives, once the response's head
/// arrives, `Settled` or `SettleFailed` when the response said what the request cost.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum EventKind<'a> {
    /// Allowed, with more than the near-limit share of the quota left.
    Allowed(&'a Decision),
    /// Allowed, with at most the near-limit share left (10% by default).
    NearLimit(&'a Decision),
    /// Denied (in shadow mode the request still went through).
    Denied(&'a Decision),
    /// The backend failed: `error` when it returned one (the layer's
    /// [`BackendFailurePolicy`](crate::BackendFailurePolicy) then applied), `fallback` when a failure
    /// policy (the backend's or the layer's) decided instead.
    BackendFailure {
        /// The error the limiter returned, if any.
        error: Option<&'a LimiterError>,
        /// The failure policy's decision, if one was made.
        fallback: Option<Fallback>,
    },
    /// No key could be found for the request.
    KeyError(&'a KeyError),
    /// The request's cost is above the limit's capacity (a configuration error).
    CostExceedsCapacity {
        /// The request's cost.
        cost: u64,
        /// The limit's capacity.
        capacity: u64,
    },
    /// An allowed request's cost was settled from its response. `settlement.uncharged > 0`
    /// means the extra cost did not fit even in the quota's overdraft: those units were not
    /// charged (the request was served on credit the limit did not have).
    Settled {
        /// The units checked before the request was served.
        estimated: u64,
        /// What the response said the request cost.
        actual: u64,
        /// What was given back, charged and left uncharged.
        settlement: Settlement,
    },
    /// A response's real cost could not be settled; the estimate stands.
    SettleFailed {
        /// The units checked before the request was served.
        estimated: u64,
        /// What the response said the request cost, when it could be read.
        actual: Option<u64>,
        /// Why.
        error: &'a SettleError,
    },
}

/// Counts events by kind, with relaxed atomic counters (each counter is independent; a snapshot
/// taken while requests run may mix counts from slightly different moments).
///
/// ```
/// use std::sync::Arc;
/// use kova_tower::CountingMetrics;
/// let metrics = Arc::new(CountingMetrics::default());
/// // RateLimitLayer::new(limit).metrics(metrics.clone()); ... later:
/// assert_eq!(metrics.snapshot().denied, 0);
/// ```
#[derive(Debug, Default)]
pub struct CountingMetrics {
    allowed: AtomicU64,
    near_limit: AtomicU64,
    denied: AtomicU64,
    shadow_denied: AtomicU64,
    backend_failures: AtomicU64,
    key_errors: AtomicU64,
    misconfigured: AtomicU64,
    settled: AtomicU64,
    settle_failures: AtomicU64,
    settle_shortfalls: AtomicU64,
}

/// A copy of [`CountingMetrics`]' counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// `Allowed` events.
    pub allowed: u64,
    /// `NearLimit` events (allowed, close to the limit).
    pub near_limit: u64,
    /// `Denied` events that were enforced.
    pub denied: u64,
    /// `Denied` events in shadow mode (the request went through).
    pub shadow_denied: u64,
    /// `BackendFailure` events.
    pub backend_failures: u64,
    /// `KeyError` events.
    pub key_errors: u64,
    /// `CostExceedsCapacity` events.
    pub misconfigured: u64,
    /// `Settled` events.
    pub settled: u64,
    /// `SettleFailed` events.
    pub settle_failures: u64,
    /// `Settled` events with units left uncharged (the overdraft was exhausted).
    pub settle_shortfalls: u64,
}

impl CountingMetrics {
    /// The counters now.
    pub fn snapshot(&self) -> Counts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counts {
            allowed: get(&self.allowed),
            near_limit: get(&self.near_limit),
            denied: get(&self.denied),
            shadow_denied: get(&self.shadow_denied),
            backend_failures: get(&self.backend_failures),
            key_errors: get(&self.key_errors),
            misconfigured: get(&self.misconfigured),
            settled: get(&self.settled),
            settle_failures: get(&self.settle_failures),
            settle_shortfalls: get(&self.settle_shortfalls),
        }
    }
}

impl Metrics for CountingMetrics {
    fn record(&self, event: &Event<'_>) {
        let counter = match event.kind {
            EventKind::Allowed(_) => &self.allowed,
            EventKind::NearLimit(_) => &self.near_limit,
            EventKind::Denied(_) if event.shadow => &self.shadow_denied,
            EventKind::Denied(_) => &self.denied,
            EventKind::BackendFailure { .. } => &self.backend_failures,
            EventKind::KeyError(_) => &self.key_errors,
            EventKind::CostExceedsCapacity { .. } => &self.misconfigured,
            EventKind::Settled { settlement, .. } => {
                if settlement.uncharged > 0 {
                    // Relaxed: independent counters, read only for reporting.
                    self.settle_shortfalls.fetch_add(1, Ordering::Relaxed);
                }
                &self.settled
            }
            EventKind::SettleFailed { .. } => &self.settle_failures,
        };
        // Relaxed: independent counters, read only for reporting.
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "allowed={} near_limit={} denied={} shadow_denied={} backend_failures={} key_errors={} misconfigured={} \
             settled={} settle_failures={} settle_shortfalls={}",
            self.allowed,
            self.near_limit,
            self.denied,
            self.shadow_denied,
            self.backend_failures,
            self.key_errors,
            self.misconfigured,
            self.settled,
            self.settle_failures,
            self.settle_shortfalls
        )
    }
}
