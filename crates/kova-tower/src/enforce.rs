//! Running a request's limits: find each key, check it, and turn the decisions into a verdict
//! (pass with headers, or a response written by the layer).
//!
//! The same steps serve the synchronous path (every check ready: in-memory limiters) and the
//! asynchronous one (a check that waits on a store), which resumes where the pending check was.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Response};
use kova::{Decision, Fallback};

use crate::headers::{
    self, RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
};
use crate::layer::Config;
use crate::partition::PARTITION_KEY_LEN;
use crate::stopwatch::Stopwatch;
use crate::{CheckFuture, Event, EventKind, LimitKey, LimiterError, OnMissingKey, Rejection};

/// One limit checked: its index in the layer, its decision, and its `pk` when the layer
/// publishes partition keys.
#[derive(Debug)]
struct Entry {
    index: usize,
    decision: Decision,
    partition_key: Option<[u8; PARTITION_KEY_LEN]>,
}

/// The checks of one request so far.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// The next limit to look at.
    next: usize,
    /// Every limit checked, in order.
    entries: Vec<Entry>,
    /// What allowed checks took, while a later limit could still reject the request: given
    /// back if one does, so that a rejected request consumes no quota.
    charged: Vec<(usize, LimitKey, u64)>,
}

/// A check that has to be awaited.
pub(crate) struct Pending {
    pub(crate) check: Check,
    pub(crate) future: CheckFuture,
}

/// Which check a pending future answers.
pub(crate) struct Check {
    index: usize,
    key: LimitKey,
    cost: u64,
    started: Stopwatch,
}

pub(crate) enum Progress {
    Done(Verdict),
    Pending(Pending),
}

pub(crate) enum Verdict {
    /// Pass the request on; add these headers to its response.
    Pass(Option<RateLimitHeaders>),
    /// Answer with this response.
    Reject(Response<Bytes>),
}

/// The headers an allowed response gets.
#[derive(Debug)]
pub(crate) struct RateLimitHeaders {
    policy: HeaderValue,
    state: Option<HeaderValue>,
    legacy: Option<[HeaderValue; 3]>,
}

impl RateLimitHeaders {
    /// Appends the headers (appends, so that an outer layer's members are kept).
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        headers.append(RATELIMIT_POLICY, self.policy);
        if let Some(state) = self.state {
            headers.append(RATELIMIT, state);
        }
        if let Some([limit, remaining, reset]) = self.legacy {
            headers.insert(X_RATELIMIT_LIMIT, limit);
            headers.insert(X_RATELIMIT_REMAINING, remaining);
            headers.insert(X_RATELIMIT_RESET, reset);
        }
    }
}

impl Run {
    /// Checks limits from where the run stands until all are done, one rejects, or one must be
    /// awaited.
    pub(crate) fn drive(&mut self, config: &Config, parts: &Parts) -> Progress {
        while let Some(limit) = config.limits.get(self.next) {
            let index = self.next;
            self.next += 1;
            if !limit.applies_to(parts) {
                continue;
            }
            let key = match limit.key().extract(parts) {
                Ok(key) => key,
                Err(error) => {
                    config.record(limit.name(), None, EventKind::KeyError(&error));
                    if config.shadow || limit.missing_key_policy() == OnMissingKey::Skip {
                        continue;
                    }
                    self.refund_charged(config);
                    let rejection = Rejection::KeyError { limit, error: &error };
                    return Progress::Done(Verdict::Reject(self.respond(config, &rejection)));
                }
            };
            let cost = limit.cost_of(parts);
            let started = Stopwatch::start();
            match limit.limiter().check(&key, cost).into_ready() {
                Ok(result) => {
                    if let Some(verdict) = self.settle(config, index, &key, cost, started, result) {
                        return Progress::Done(verdict);
                    }
                }
                Err(future) => {
                    let check = Check { index, key, cost, started };
                    return Progress::Pending(Pending { check, future });
                }
            }
        }
        Progress::Done(Verdict::Pass(self.pass_headers(config)))
    }

    /// Records the result of an awaited check and goes on.
    pub(crate) fn resume(
        &mut self,
        config: &Config,
        parts: &Parts,
        check: &Check,
        result: Result<Decision, LimiterError>,
    ) -> Progress {
        match self.settle(config, check.index, &check.key, check.cost, check.started, result) {
            Some(verdict) => Progress::Done(verdict),
            None => self.drive(config, parts),
        }
    }

    /// Records one check's result; `Some` when it ends the run with a response.
    fn settle(
        &mut self,
        config: &Config,
        index: usize,
        key: &LimitKey,
        cost: u64,
        started: Stopwatch,
        result: Result<Decision, LimiterError>,
    ) -> Option<Verdict> {
        let verdict = self.record_result(config, index, key, cost, started, result);
        if verdict.is_some() {
            self.refund_charged(config);
        }
        verdict
    }

    /// Gives back what this request's earlier allowed checks took (it is being rejected).
    fn refund_charged(&mut self, config: &Config) {
        for (index, key, cost) in self.charged.drain(..) {
            config.limits[index].limiter().refund(&key, cost);
        }
    }

    fn record_result(
        &mut self,
        config: &Config,
        index: usize,
        key: &LimitKey,
        cost: u64,
        started: Stopwatch,
        result: Result<Decision, LimiterError>,
    ) -> Option<Verdict> {
        // The decision's time ends here: what follows is the layer's own bookkeeping.
        let decision_time = started.elapsed();
        let limit = &config.limits[index];
        let name = limit.name();
        let decision = match result {
            Ok(decision) => {
                if let Some(
                    fallback @ (Fallback::StoreUnavailableAllowed
                    | Fallback::StoreUnavailableDenied
                    | Fallback::StoreUnavailableLocal),
                ) = decision.fallback()
                {
                    let kind = EventKind::BackendFailure { error: None, fallback: Some(fallback) };
                    config.record(name, Some(key), kind);
                }
                decision
            }
            Err(LimiterError::CostExceedsCapacity { cost, capacity }) => {
                config.record(name, Some(key), EventKind::CostExceedsCapacity { cost, capacity });
                if config.shadow {
                    return None;
                }
                let rejection = Rejection::CostExceedsCapacity { limit, cost, capacity };
                return Some(Verdict::Reject(self.respond(config, &rejection)));
            }
            Err(error) => {
                let decided = config.on_backend_error.decide(&limit.quota());
                let fallback = decided.and_then(|d| d.fallback());
                config.record(name, Some(key), EventKind::BackendFailure { error: Some(&error), fallback });
                match decided {
                    Some(decision) => decision,
                    None if config.shadow => return None,
                    None => {
                        let rejection = Rejection::BackendUnavailable { limit, error: &error };
                        return Some(Verdict::Reject(self.respond(config, &rejection)));
                    }
                }
            }
        };
        let kind = if !decision.is_allowed() {
            EventKind::Denied(&decision)
        } else if headers::is_measurement(&decision) && config.is_near_limit(&decision) {
            EventKind::NearLimit(&decision)
        } else {
            EventKind::Allowed(&decision)
        };
        config.record(name, Some(key), kind);
        #[cfg(feature = "metrics")]
        crate::metrics_facade::record_decision_time(name, decision_time);
        #[cfg(not(feature = "metrics"))]
        let _ = decision_time;
        let partition_key = config.partition_keys.as_ref().map(|keys| keys.digest(name, key));
        self.entries.push(Entry { index, decision, partition_key });
        // A real (not fallback) admission, with limits still to come that could reject the
        // request: remember it, to give it back if one does.
        let more_to_come = index + 1 < config.limits.len();
        if decision.is_allowed() && !config.shadow && decision.fallback().is_none() && more_to_come {
            self.charged.push((index, key.clone(), cost));
        }
        if decision.is_allowed() || config.shadow {
            return None;
        }
        let rejection = Rejection::Limited { limit, decision: &decision };
        Some(Verdict::Reject(self.respond(config, &rejection)))
    }

    /// The layer's own response: the default, with the `RateLimit` headers on a 429, then the
    /// configured customisation.
    fn respond(&self, config: &Config, rejection: &Rejection<'_>) -> Response<Bytes> {
        let mut response = rejection.default_response();
        if let Rejection::Limited { .. } = rejection {
            // The denying limit is the last entry: it is the one the legacy headers describe.
            if let Some(headers) = self.headers(config, self.entries.last().map(|e| &e.decision)) {
                headers.apply(response.headers_mut());
            }
        }
        #[cfg(feature = "grpc")]
        if config.grpc {
            response = crate::grpc::response(rejection, &response);
        }
        match &config.responder {
            Some(responder) => responder(rejection, response),
            None => response,
        }
    }

    fn pass_headers(&self, config: &Config) -> Option<RateLimitHeaders> {
        if config.shadow {
            return None;
        }
        let tightest = self
            .entries
            .iter()
            .map(|e| &e.decision)
            .filter(|d| headers::is_measurement(d))
            .min_by_key(|d| d.remaining());
        self.headers(config, tightest)
    }

    /// The headers for the limits checked so far; the legacy ones describe `legacy`.
    fn headers(&self, config: &Config, legacy: Option<&Decision>) -> Option<RateLimitHeaders> {
        if self.entries.is_empty() {
            return None;
        }
        let policy = if self.entries.len() == config.limits.len() && config.partition_keys.is_none() {
            config.all_policies.clone()
        } else {
            let mut text = String::with_capacity(48 * self.entries.len());
            for (n, entry) in self.entries.iter().enumerate() {
                if n > 0 {
                    text.push_str(", ");
                }
                text.push_str(config.limits[entry.index].policy_item());
                if let Some(pk) = &entry.partition_key {
                    headers::write_partition_key(&mut text, pk);
                }
            }
            header_value(text)?
        };
        let mut text = String::with_capacity(48 * self.entries.len());
        for entry in self.entries.iter().filter(|e| headers::is_measurement(&e.decision)) {
            if !text.is_empty() {
                text.push_str(", ");
            }
            headers::write_state_item(&mut text, config.limits[entry.index].name(), &entry.decision);
            if let Some(pk) = &entry.partition_key {
                headers::write_partition_key(&mut text, pk);
            }
        }
        let state = if text.is_empty() { None } else { header_value(text) };
        let legacy = match legacy {
            Some(d) if config.legacy_headers => Some([
                HeaderValue::from(d.limit()),
                HeaderValue::from(d.remaining()),
                HeaderValue::from(headers::ceil_secs(d.reset_after_nanos())),
            ]),
            _ => None,
        };
        Some(RateLimitHeaders { policy, state, legacy })
    }
}

/// A header value from text the layer wrote (visible ASCII: never invalid, but never a panic
/// either).
pub(crate) fn header_value(text: String) -> Option<HeaderValue> {
    HeaderValue::from_maybe_shared(Bytes::from(text)).ok()
}

impl Config {
    fn record(&self, limit: &str, key: Option<&LimitKey>, kind: EventKind<'_>) {
        let event = Event { limit, key, shadow: self.shadow, kind };
        #[cfg(feature = "metrics")]
        crate::metrics_facade::record(&event);
        if let Some(metrics) = &self.metrics {
            metrics.record(&event);
        }
    }

    fn is_near_limit(&self, decision: &Decision) -> bool {
        let remaining = u128::from(decision.remaining()) * 100;
        remaining <= u128::from(decision.limit()) * u128::from(self.near_limit_percent)
    }
}

/// Writes the `RateLimit-Policy` value of all limits.
pub(crate) fn all_policies(limits: &[crate::Limit]) -> Option<HeaderValue> {
    let mut text = String::new();
    for limit in limits {
        if !text.is_empty() {
            text.push_str(", ");
        }
        text.push_str(limit.policy_item());
    }
    header_value(text)
}
