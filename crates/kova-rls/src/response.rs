//! The answer to one call: the overall code, a status per descriptor, and the headers Envoy
//! adds to the client's response (`RateLimit-Policy` / `RateLimit` in draft-11's syntax, as
//! kova-tower writes them, and `Retry-After` when over the limit).

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit as ProtoUnit, Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use kova::Decision;
use kova_tower::headers;

use crate::{Limited, Rule, Unit};

/// What became of one descriptor.
#[derive(Debug)]
pub(crate) enum Outcome<'a> {
    /// No rule: unknown domain, no matching node, or replaced by another rule.
    Free,
    /// `unlimited: true`.
    Unlimited,
    /// Checked against its limit, the backend's clock reading `checked_at` just before.
    Checked {
        rule: &'a Rule,
        limited: &'a Limited,
        key: Vec<u8>,
        cost: u64,
        decision: Decision,
        checked_at: u64,
    },
    /// Its cost is more than the limit ever admits at once: over the limit, nothing taken.
    TooCostly { rule: &'a Rule, limited: &'a Limited },
    /// A shadow rule's check that the backend could not make (Redis down under
    /// `--redis-failure error`, a table holding too many distinct quotas): `OK`, as a shadow
    /// rule never changes what is enforced, and counted in `kova_rls_fallbacks_total`.
    Unavailable { rule: &'a Rule, limited: &'a Limited },
    /// `is_negative_hits`: units given back.
    Refunded { rule: &'a Rule, limited: &'a Limited },
    /// A limit of 0 ([`Limit::Zero`](crate::Limit::Zero)): over it when the check counts a
    /// unit, nothing taken either way.
    Zero { rule: &'a Rule, unit: Unit, counts: bool },
}

impl Outcome<'_> {
    /// Whether this descriptor puts the request over the limit (shadow rules never do).
    pub(crate) fn enforced_denial(&self) -> bool {
        match self {
            Outcome::Checked { rule, decision, .. } => !decision.is_allowed() && !rule.is_shadow(),
            Outcome::TooCostly { rule, .. } => !rule.is_shadow(),
            Outcome::Zero { rule, counts, .. } => *counts && !rule.is_shadow(),
            _ => false,
        }
    }

    fn status(&self) -> DescriptorStatus {
        let code = if self.enforced_denial() { Code::OverLimit } else { Code::Ok };
        let mut status = DescriptorStatus { code: code as i32, ..Default::default() };
        match self {
            Outcome::Free => {}
            // As envoyproxy/ratelimit answers an unlimited descriptor.
            Outcome::Unlimited => status.limit_remaining = u32::MAX,
            Outcome::TooCostly { rule, limited }
            | Outcome::Refunded { rule, limited }
            | Outcome::Unavailable { rule, limited } => {
                status.current_limit = Some(current_limit(rule, limited));
            }
            // Nothing remains, and no moment makes it whole (as `TooCostly`, no reset).
            Outcome::Zero { rule, unit, .. } => {
                status.current_limit = Some(RateLimit {
                    name: rule.name().unwrap_or_default().to_owned(),
                    requests_per_unit: 0,
                    unit: proto_unit(*unit) as i32,
                });
            }
            Outcome::Checked { rule, limited, decision, .. } => {
                status.current_limit = Some(current_limit(rule, limited));
                status.limit_remaining = u32::try_from(decision.remaining()).unwrap_or(u32::MAX);
                status.duration_until_reset = Some(proto_duration(until_reset_nanos(decision)));
            }
        }
        status
    }
}

/// `duration_until_reset`: the moment `RateLimit`'s `t` names, to the nanosecond: when the
/// quota is whole again, or for a denial when the denied request would be admitted.
fn until_reset_nanos(decision: &Decision) -> u64 {
    if decision.is_allowed() {
        decision.reset_after_nanos()
    } else {
        decision.retry_after_nanos()
    }
}

fn proto_duration(nanos: u64) -> ProtoDuration {
    const NANOS_PER_SEC: u64 = 1_000_000_000;
    // Below 2^63 s for any u64 of nanoseconds; the remainder is below 10^9.
    ProtoDuration { seconds: (nanos / NANOS_PER_SEC) as i64, nanos: (nanos % NANOS_PER_SEC) as i32 }
}

fn current_limit(rule: &Rule, limited: &Limited) -> RateLimit {
    RateLimit {
        name: rule.name().unwrap_or_default().to_owned(),
        requests_per_unit: limited.requests_per_unit(),
        unit: proto_unit(limited.unit()) as i32,
    }
}

fn proto_unit(unit: Unit) -> ProtoUnit {
    match unit {
        Unit::Second => ProtoUnit::Second,
        Unit::Minute => ProtoUnit::Minute,
        Unit::Hour => ProtoUnit::Hour,
        Unit::Day => ProtoUnit::Day,
        Unit::Week => ProtoUnit::Week,
        Unit::Month => ProtoUnit::Month,
        Unit::Year => ProtoUnit::Year,
    }
}

/// The response for `outcomes`, one per descriptor in the request's order.
pub(crate) fn build(outcomes: &[Outcome<'_>], over_limit: bool) -> RateLimitResponse {
    let overall = if over_limit { Code::OverLimit } else { Code::Ok };
    RateLimitResponse {
        overall_code: overall as i32,
        statuses: outcomes.iter().map(Outcome::status).collect(),
        response_headers_to_add: response_headers(outcomes),
        ..Default::default()
    }
}

/// The `RateLimit-Policy` member of a limit of 0 per `unit`: `"name";q=0;w=W`, as
/// `kova_tower::headers` writes a quota's (whose quotas cannot be 0): `w` is the unit's seconds.
fn write_zero_policy_item(out: &mut String, name: &str, unit: Unit) {
    out.push('"');
    out.push_str(name);
    out.push_str("\";q=0;w=");
    out.push_str(&unit.duration().as_secs().to_string());
}

/// `Retry-After`, lower case as HTTP/2 writes every field name.
const RETRY_AFTER: &str = "retry-after";

/// Starts the next member of a structured-field list.
fn member(list: &mut String) {
    if !list.is_empty() {
        list.push_str(", ");
    }
}

/// One list member per enforced limit checked (shadow limits stay out of the client's view,
/// as kova-tower's shadow mode writes no headers), in the request's order; `Retry-After` the
/// latest moment a denying limit names.
fn response_headers(outcomes: &[Outcome<'_>]) -> Vec<HeaderValue> {
    let mut policy = String::new();
    let mut state = String::new();
    let mut retry_after: Option<u64> = None;
    for outcome in outcomes {
        match outcome {
            Outcome::Checked { rule, limited, decision, .. } if !rule.is_shadow() => {
                member(&mut policy);
                headers::write_policy_item(&mut policy, rule.policy_name(), &limited.quota());
                if headers::is_measurement(decision) {
                    member(&mut state);
                    headers::write_state_item(&mut state, rule.policy_name(), decision);
                }
                if !decision.is_allowed() {
                    let secs = headers::retry_after_secs(decision);
                    retry_after = Some(retry_after.map_or(secs, |r| r.max(secs)));
                }
            }
            Outcome::TooCostly { rule, limited } if !rule.is_shadow() => {
                member(&mut policy);
                headers::write_policy_item(&mut policy, rule.policy_name(), &limited.quota());
            }
            // No `Retry-After`: a limit of 0 admits nothing at any time.
            Outcome::Zero { rule, unit, .. } if !rule.is_shadow() => {
                member(&mut policy);
                write_zero_policy_item(&mut policy, rule.policy_name(), *unit);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut push = |name: &str, value: String| {
        out.push(HeaderValue { key: name.to_owned(), value, ..Default::default() });
    };
    if !policy.is_empty() {
        push(headers::RATELIMIT_POLICY.as_str(), policy);
    }
    if !state.is_empty() {
        push(headers::RATELIMIT.as_str(), state);
    }
    if let Some(secs) = retry_after {
        push(RETRY_AFTER, secs.to_string());
    }
    out
}
