//! What the service counts, through the `metrics` crate (a Prometheus exporter in the binary).
//!
//! Labels carry only what the configuration names (a domain the file does not define is
//! counted as `_unknown`), so a caller cannot grow the number of series.

use kova::Fallback;

/// Decisions per descriptor that reached a limit: labels `domain`, `code` (`OK` /
/// `OVER_LIMIT`: what the limit decided, before shadow mode), `shadow` (`true` / `false`).
pub const DECISIONS: &str = "kova_rls_decisions_total";
/// Descriptors that reached no limit (unknown domain, no matching rule, `unlimited`, replaced):
/// label `domain`.
pub const UNLIMITED: &str = "kova_rls_unlimited_total";
/// Requests answered: label `code` (`OK` / `OVER_LIMIT`).
pub const REQUESTS: &str = "kova_rls_requests_total";
/// Requests refused with a gRPC error: label `reason`.
pub const REQUEST_ERRORS: &str = "kova_rls_request_errors_total";
/// Decisions not made by the limit's own state: labels `domain`, `fallback`
/// (`table_full_denied` / `table_full_untracked`: a full in-memory table;
/// `store_unavailable_allowed` / `store_unavailable_denied` / `store_unavailable_local`:
/// Redis did not answer and the failure policy decided; `local_cache`: a Redis lease or cached
/// denial answered without a round trip; `shadow_unavailable`: a shadow rule's check the
/// backend could not make, answered `OK`).
pub const FALLBACKS: &str = "kova_rls_fallbacks_total";
/// With `--backend redis`: 1 while Redis answers, 0 while its failure policy decides.
pub const BACKEND_AVAILABLE: &str = "kova_rls_backend_available";
/// With `--backend redis`: refunds (of a request denied as a whole) that did not reach Redis;
/// their units stay consumed.
pub const REFUND_FAILURES: &str = "kova_rls_refund_failures_total";
/// Configuration loads: label `result` (`ok` / `error`).
pub const RELOADS: &str = "kova_rls_config_reloads_total";
/// 1 while the configuration serving is the latest file's, 0 while a bad file is refused.
pub const CONFIG_CURRENT: &str = "kova_rls_config_current";

/// The `domain` label of a domain the configuration does not define.
pub const UNKNOWN_DOMAIN: &str = "_unknown";

/// Describes every metric, so the exporter publishes their help text.
pub fn describe() {
    metrics::describe_counter!(DECISIONS, "Descriptor decisions by domain, code and shadow mode");
    metrics::describe_counter!(UNLIMITED, "Descriptors that reached no limit, by domain");
    metrics::describe_counter!(REQUESTS, "ShouldRateLimit answers by overall code");
    metrics::describe_counter!(REQUEST_ERRORS, "ShouldRateLimit calls refused with a gRPC error, by reason");
    metrics::describe_counter!(FALLBACKS, "Decisions made by a failure policy, by domain and fallback");
    metrics::describe_gauge!(BACKEND_AVAILABLE, "1 while Redis answers, 0 while its failure policy decides");
    metrics::describe_counter!(REFUND_FAILURES, "Refunds that did not reach Redis (units stay consumed)");
    metrics::describe_counter!(RELOADS, "Configuration loads by result");
    metrics::describe_gauge!(CONFIG_CURRENT, "1 when the latest configuration file is serving");
}

pub(crate) fn decision(domain: &str, over_limit: bool, shadow: bool) {
    let code = if over_limit { "OVER_LIMIT" } else { "OK" };
    let shadow = if shadow { "true" } else { "false" };
    metrics::counter!(DECISIONS, "domain" => domain.to_owned(), "code" => code, "shadow" => shadow)
        .increment(1);
}

pub(crate) fn unlimited(domain: &str) {
    metrics::counter!(UNLIMITED, "domain" => domain.to_owned()).increment(1);
}

pub(crate) fn request(over_limit: bool) {
    metrics::counter!(REQUESTS, "code" => if over_limit { "OVER_LIMIT" } else { "OK" }).increment(1);
}

pub(crate) fn request_error(reason: &'static str) {
    metrics::counter!(REQUEST_ERRORS, "reason" => reason).increment(1);
}

pub(crate) fn fallback(domain: &str, fallback: Fallback) {
    let label = match fallback {
        Fallback::TableFullDenied => "table_full_denied",
        Fallback::TableFullUntracked => "table_full_untracked",
        Fallback::StoreUnavailableAllowed => "store_unavailable_allowed",
        Fallback::StoreUnavailableDenied => "store_unavailable_denied",
        Fallback::StoreUnavailableLocal => "store_unavailable_local",
        Fallback::LocalCache => "local_cache",
        Fallback::QuotaNotMoved => "quota_not_moved",
        _ => "other",
    };
    metrics::counter!(FALLBACKS, "domain" => domain.to_owned(), "fallback" => label).increment(1);
}

pub(crate) fn shadow_unavailable(domain: &str) {
    metrics::counter!(FALLBACKS, "domain" => domain.to_owned(), "fallback" => "shadow_unavailable")
        .increment(1);
}

pub(crate) fn backend_available(available: bool) {
    metrics::gauge!(BACKEND_AVAILABLE).set(if available { 1.0 } else { 0.0 });
}

pub(crate) fn refund_failed() {
    metrics::counter!(REFUND_FAILURES).increment(1);
}

/// Counts one configuration load and sets [`CONFIG_CURRENT`].
pub fn reload(ok: bool) {
    metrics::counter!(RELOADS, "result" => if ok { "ok" } else { "error" }).increment(1);
    metrics::gauge!(CONFIG_CURRENT).set(if ok { 1.0 } else { 0.0 });
}
