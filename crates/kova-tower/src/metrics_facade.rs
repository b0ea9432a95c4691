//! Reporting through the [`metrics`](https://docs.rs/metrics) facade (the `metrics` feature):
//! every decision of every layer, to whichever recorder the application installs (a Prometheus
//! exporter, StatsD, ...). Without a recorder the calls do nothing.
//!
//! The names follow Prometheus conventions (`_total` counters, base unit seconds), each with a
//! `limit` label holding the limit's name:
//!
//! | name | kind | labels | counts |
//! |---|---|---|---|
//! | `kova_allowed_total` | counter | `limit` | requests a limit admitted (fallbacks included) |
//! | `kova_denied_total` | counter | `limit`, `mode` (`enforced` / `shadow`) | requests a limit denied |
//! | `kova_fallback_total` | counter | `limit`, `fallback` | decisions a failure policy or cache made ([`FALLBACK_LABELS`]) |
//! | `kova_key_errors_total` | counter | `limit` | requests whose key could not be found |
//! | `kova_backend_errors_total` | counter | `limit` | limiter errors (the layer's `BackendFailurePolicy` then applied) |
//! | `kova_misconfigured_total` | counter | `limit` | requests costing more than the limit's capacity |
//! | `kova_decision_seconds` | histogram | `limit` | time from a check's start to its decision |
//! | `kova_settled_total` | counter | `limit` | allowed requests whose cost was settled from the response |
//! | `kova_settle_failures_total` | counter | `limit`, `reason` (`unsupported` / `unreadable_cost` / `backend` / `overdraft_exhausted`) | responses whose cost could not be settled in full |
//!
//! A limit's check that allowed a request later denied by another limit counts as allowed (its
//! units were given back); the request's outcome is the denying limit's `kova_denied_total`.
//! The [`Metrics`](crate::Metrics) hook still sees the same events, and more detail.

use std::time::Duration;

use kova::Fallback;

use crate::{Event, EventKind};

/// Requests a limit admitted.
pub const ALLOWED: &str = "kova_allowed_total";
/// Requests a limit denied.
pub const DENIED: &str = "kova_denied_total";
/// Decisions a failure policy or a local cache made, by `fallback`.
pub const FALLBACK: &str = "kova_fallback_total";
/// Requests whose key could not be found.
pub const KEY_ERRORS: &str = "kova_key_errors_total";
/// Errors a limiter returned.
pub const BACKEND_ERRORS: &str = "kova_backend_errors_total";
/// Requests costing more than their limit's capacity.
pub const MISCONFIGURED: &str = "kova_misconfigured_total";
/// Allowed requests whose cost was settled from the response.
pub const SETTLED: &str = "kova_settled_total";
/// Responses whose cost could not be settled in full, by `reason`.
pub const SETTLE_FAILURES: &str = "kova_settle_failures_total";
/// Seconds from a check's start to its decision.
pub const DECISION_SECONDS: &str = "kova_decision_seconds";

/// The `fallback` label values, in the order of [`kova::Fallback`]'s variants.
pub const FALLBACK_LABELS: [&str; 9] = [
    "table_full_denied",
    "table_full_untracked",
    "store_unavailable_allowed",
    "store_unavailable_denied",
    "local_cache",
    "store_unavailable_local",
    "stripe_lease",
    "sketch",
    "quota_not_moved",
];

fn fallback_label(fallback: Fallback) -> &'static str {
    match fallback {
        Fallback::TableFullDenied => FALLBACK_LABELS[0],
        Fallback::TableFullUntracked => FALLBACK_LABELS[1],
        Fallback::StoreUnavailableAllowed => FALLBACK_LABELS[2],
        Fallback::StoreUnavailableDenied => FALLBACK_LABELS[3],
        Fallback::LocalCache => FALLBACK_LABELS[4],
        Fallback::StoreUnavailableLocal => FALLBACK_LABELS[5],
        Fallback::StripeLease => FALLBACK_LABELS[6],
        Fallback::Sketch => FALLBACK_LABELS[7],
        Fallback::QuotaNotMoved => FALLBACK_LABELS[8],
        // A variant added to kova after this list.
        _ => "other",
    }
}

/// Counts one event.
pub(crate) fn record(event: &Event<'_>) {
    let limit = event.limit.to_owned();
    match event.kind {
        EventKind::Allowed(decision) | EventKind::NearLimit(decision) => {
            metrics::counter!(ALLOWED, "limit" => limit.clone()).increment(1);
            if let Some(fallback) = decision.fallback() {
                metrics::counter!(FALLBACK, "limit" => limit, "fallback" => fallback_label(fallback))
                    .increment(1);
            }
        }
        EventKind::Denied(decision) => {
            let mode = if event.shadow { "shadow" } else { "enforced" };
            metrics::counter!(DENIED, "limit" => limit.clone(), "mode" => mode).increment(1);
            if let Some(fallback) = decision.fallback() {
                metrics::counter!(FALLBACK, "limit" => limit, "fallback" => fallback_label(fallback))
                    .increment(1);
            }
        }
        EventKind::BackendFailure { error: Some(_), .. } => {
            metrics::counter!(BACKEND_ERRORS, "limit" => limit).increment(1);
        }
        // A failure policy inside the limiter decided: its decision's event counts the fallback.
        EventKind::BackendFailure { error: None, .. } => {}
        EventKind::KeyError(_) => metrics::counter!(KEY_ERRORS, "limit" => limit).increment(1),
        EventKind::CostExceedsCapacity { .. } => {
            metrics::counter!(MISCONFIGURED, "limit" => limit).increment(1);
        }
        EventKind::Settled { settlement, .. } => {
            metrics::counter!(SETTLED, "limit" => limit.clone()).increment(1);
            if settlement.uncharged > 0 {
                metrics::counter!(SETTLE_FAILURES, "limit" => limit, "reason" => "overdraft_exhausted")
                    .increment(1);
            }
        }
        EventKind::SettleFailed { error, .. } => {
            metrics::counter!(SETTLE_FAILURES, "limit" => limit, "reason" => error.label()).increment(1);
        }
    }
}

/// Records how long one decision took.
pub(crate) fn record_decision_time(limit: &str, elapsed: Duration) {
    metrics::histogram!(DECISION_SECONDS, "limit" => limit.to_owned()).record(elapsed.as_secs_f64());
}

/// Registers the help text and unit of every metric with the installed recorder (call it once,
/// after installing one), so an exporter can print `# HELP` lines.
///
/// ```
/// kova_tower::metrics_facade::describe();
/// ```
pub fn describe() {
    use metrics::{describe_counter, describe_histogram, Unit};
    describe_counter!(ALLOWED, Unit::Count, "Requests a kova limit admitted.");
    describe_counter!(DENIED, Unit::Count, "Requests a kova limit denied (mode: enforced or shadow).");
    describe_counter!(FALLBACK, Unit::Count, "Decisions a failure policy or local cache made.");
    describe_counter!(KEY_ERRORS, Unit::Count, "Requests whose limit key could not be found.");
    describe_counter!(BACKEND_ERRORS, Unit::Count, "Errors a kova limiter returned.");
    describe_counter!(MISCONFIGURED, Unit::Count, "Requests costing more than their limit's capacity.");
    describe_counter!(SETTLED, Unit::Count, "Allowed requests whose cost was settled from the response.");
    describe_counter!(SETTLE_FAILURES, Unit::Count, "Responses whose cost could not be settled in full.");
    describe_histogram!(DECISION_SECONDS, Unit::Seconds, "Time from a limit check's start to its decision.");
}
