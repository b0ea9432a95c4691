//! A request descriptor's own `limit` (Envoy's `RateLimitDescriptor.limit`, set by a route's
//! `limit` action from dynamic metadata): it replaces the file's limit for that descriptor.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use kova::{AnyAlgorithm, Quota};

use crate::config::policy_name_of;
use crate::{Limit, Limited, RequestError, Rule, Unit, DEFAULT_ALGORITHM};

/// The rule a descriptor's `limit` makes, as envoyproxy/ratelimit applies it: in a domain the
/// configuration defines, whether or not a node matches, `requests_per_unit` per `unit`
/// counted with [`DEFAULT_ALGORITHM`] (fixed windows, as envoyproxy/ratelimit counts), never
/// in shadow mode, replacing no other rule, named in the headers as the matched rule is (else
/// by the entries' keys).
/// A `requests_per_unit` of 0 is [`Limit::Zero`]: every check that counts is over the limit,
/// as in envoyproxy/ratelimit, so a route that sets 0 shuts its descriptor rather than the
/// whole request failing (which Envoy's `failure_mode_deny: false` lets through). An unknown
/// `unit` is [`RequestError::BadLimitOverride`].
pub(crate) fn override_rule(
    descriptor: &RateLimitDescriptor,
    matched: Option<&Rule>,
) -> Result<Option<Rule>, RequestError> {
    let Some(limit) = &descriptor.limit else { return Ok(None) };
    let limit = limit_of(limit)?;
    let policy = match matched {
        Some(rule) => rule.policy_name().to_owned(),
        None => policy_name_of(&descriptor.entries.iter().map(|e| e.key.clone()).collect::<Vec<_>>()),
    };
    Ok(Some(Rule {
        policy,
        name: matched.and_then(|r| r.name().map(str::to_owned)),
        limit,
        shadow: false,
        replaces: Vec::new(),
        line: matched.map_or(0, Rule::line),
    }))
}

fn limit_of(limit: &RateLimitOverride) -> Result<Limit, RequestError> {
    let bad = |problem: String| RequestError::BadLimitOverride(problem);
    let unit = match RateLimitUnit::try_from(limit.unit) {
        Ok(RateLimitUnit::Second) => Unit::Second,
        Ok(RateLimitUnit::Minute) => Unit::Minute,
        Ok(RateLimitUnit::Hour) => Unit::Hour,
        Ok(RateLimitUnit::Day) => Unit::Day,
        Ok(RateLimitUnit::Month) => Unit::Month,
        Ok(RateLimitUnit::Year) => Unit::Year,
        Ok(RateLimitUnit::Unknown) | Err(_) => return Err(bad(format!("unknown unit {}", limit.unit))),
    };
    let requests_per_unit = limit.requests_per_unit;
    if requests_per_unit == 0 {
        return Ok(Limit::Zero(unit));
    }
    let quota = Quota::new(u64::from(requests_per_unit), unit.duration())
        .map_err(|e| bad(format!("requests_per_unit {requests_per_unit}: {e}")))?;
    AnyAlgorithm::new(DEFAULT_ALGORITHM, quota).map_err(|e| bad(e.to_string()))?;
    Ok(Limit::Limited(Limited { requests_per_unit, unit, algorithm: DEFAULT_ALGORITHM, quota }))
}
