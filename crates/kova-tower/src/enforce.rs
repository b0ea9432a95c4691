//! Running a request's limits: find each key, check it, and turn the decisions into a verdict
//! (pass with headers, or a response written by the layer).
//!
//! The same steps serve the synchronous path (every check ready: in-memory limiters) and the
//! asynchronous one (a check that waits on a store), which resumes where the pending check was.
//! The members of a [`CompositeLimit`](crate::CompositeLimit) are decided in one step; every
//! other limit on its own, with what earlier limits took given back when a later one rejects.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Response};
use kova::{Decision, Fallback, MAX_LIMITS};

use crate::headers::{
    self, RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
};
use crate::layer::Config;
use crate::partition::PARTITION_KEY_LEN;
pub(crate) use crate::pending::{Answer, Check, Pending, PendingCheck};
use crate::settle::Settling;
use crate::stopwatch::Stopwatch;
use crate::{Event, EventKind, Limit, LimitKey, LimiterError, OnMissingKey, Rejection};

/// One limit checked: its index in the layer, its decision, and its `pk` when the layer
/// publishes partition keys.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) index: usize,
    pub(crate) decision: Decision,
    partition_key: Option<[u8; PARTITION_KEY_LEN]>,
}

/// What an allowed check took, while a later limit could still reject the request.
#[derive(Debug)]
struct Charge {
    /// The limit (the first member, for a composite decided in one step).
    index: usize,
    key: LimitKey,
    cost: u64,
    composite: bool,
}

/// An allowed check to settle from the response.
#[derive(Debug)]
pub(crate) struct ToSettle {
    pub(crate) index: usize,
    pub(crate) key: LimitKey,
    pub(crate) estimated: u64,
    /// Settled by the composite the limit at `index` heads, for all its limits.
    pub(crate) composite: bool,
}

/// The checks of one request so far.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// The next limit to look at.
    next: usize,
    /// Every limit checked, in order.
    pub(crate) entries: Vec<Entry>,
    /// Given back if a later limit rejects, so that a rejected request consumes no quota.
    charged: Vec<Charge>,
    /// Allowed checks of limits that settle from the response.
    pub(crate) to_settle: Vec<ToSettle>,
}

pub(crate) enum Progress {
    Done(Verdict),
    Pending(Pending),
}

pub(crate) enum Verdict {
    /// Pass the request on.
    Pass(Pass),
    /// Answer with this response.
    Reject(Response<Bytes>),
}

/// How an allowed request's response gets its headers.
pub(crate) enum Pass {
    /// Add these headers (known now).
    Now(Option<RateLimitHeaders>),
    /// Settle from the response first, then write the headers.
    AfterResponse(Box<Settling>),
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
            let group = limit.member().filter(|m| m.heads_whole_group(&config.limits[index..]));
            let members = group.map_or(1, |m| m.group.len);
            self.next += members;
            if !limit.applies_to(parts) {
                continue;
            }
            let key = match self.find_key(config, index, members, parts) {
                Ok(Some(key)) => key,
                Ok(None) => continue,
                Err(verdict) => return Progress::Done(*verdict),
            };
            let cost = limit.cost_of(parts);
            let started = Stopwatch::start();
            let (answer, future) = match group {
                Some(member) => match member.group.limiter.check(&key, cost).into_ready() {
                    Ok(result) => (Some(Answer::All(result)), None),
                    Err(future) => (None, Some(PendingCheck::All(future))),
                },
                None => match limit.limiter().check(&key, cost).into_ready() {
                    Ok(result) => (Some(Answer::One(result)), None),
                    Err(future) => (None, Some(PendingCheck::One(future))),
                },
            };
            let check = Check { index, key, cost, started };
            if let Some(future) = future {
                return Progress::Pending(Pending { check, future });
            }
            if let Some(verdict) = answer.and_then(|answer| self.answered(config, &check, answer)) {
                return Progress::Done(verdict);
            }
        }
        Progress::Done(Verdict::Pass(self.pass(config)))
    }

    /// Records the result of an awaited check and goes on.
    pub(crate) fn resume(
        &mut self,
        config: &Config,
        parts: &Parts,
        check: &Check,
        answer: Answer,
    ) -> Progress {
        match self.answered(config, check, answer) {
            Some(verdict) => Progress::Done(verdict),
            None => self.drive(config, parts),
        }
    }

    /// The key of the limit at `index` (and the `members - 1` after it, for a composite):
    /// `Ok(None)` when the limit is skipped, `Err` with the rejection.
    fn find_key(
        &mut self,
        config: &Config,
        index: usize,
        members: usize,
        parts: &Parts,
    ) -> Result<Option<LimitKey>, Box<Verdict>> {
        let limit = &config.limits[index];
        match limit.key().extract(parts) {
            Ok(key) => Ok(Some(key)),
            Err(error) => {
                for member in &config.limits[index..index + members] {
                    config.record(member.name(), None, EventKind::KeyError(&error));
                }
                if config.shadow || limit.missing_key_policy() == OnMissingKey::Skip {
                    return Ok(None);
                }
                Err(Box::new(self.reject(config, &Rejection::KeyError { limit, error: &error })))
            }
        }
    }

    /// Records one check's answer; `Some` when it ends the run with a response.
    fn answered(&mut self, config: &Config, check: &Check, answer: Answer) -> Option<Verdict> {
        // The decision's time ends here: what follows is the layer's own bookkeeping.
        let decision_time = check.started.elapsed();
        let index = check.index;
        let via_composite = matches!(answer, Answer::All(_));
        // Every decision of this check, without allocating (the in-memory path allocates nothing).
        let mut decisions = [Decision::allowed(0, 0, 0); MAX_LIMITS];
        let (decided_by, allowed, members) = match answer {
            Answer::One(result) => {
                let decision = match self.decision_of(config, check, result) {
                    Ok(decision) => decision,
                    Err(verdict) => return verdict.map(|v| *v),
                };
                decisions[0] = decision;
                (0, decision.is_allowed(), 1)
            }
            Answer::All(result) => {
                let members = config.limits[index].member().map_or(1, |m| m.group.len);
                // A composite that answers for another number of limits is a failing backend.
                let result = result.and_then(|all| match all.limit_decisions().len() {
                    len if len == members => Ok(all),
                    len => Err(LimiterError::backend(format!(
                        "a composite of {members} answered {len} decisions"
                    ))),
                });
                match result {
                    Ok(all) => {
                        if let Some(fallback) = store_fallback(&all.decision()) {
                            let kind = EventKind::BackendFailure { error: None, fallback: Some(fallback) };
                            for member in &config.limits[index..index + members] {
                                config.record(member.name(), Some(&check.key), kind);
                            }
                        }
                        let each = all.limit_decisions();
                        decisions[..each.len()].copy_from_slice(each);
                        (all.decided_by(), all.is_allowed(), each.len())
                    }
                    Err(error) => {
                        let decided = match self.fallback_of(config, check, error, members) {
                            Ok(decided) => decided,
                            Err(verdict) => return verdict.map(|v| *v),
                        };
                        decisions[..decided.len()].copy_from_slice(&decided);
                        let decided_by = decided.iter().position(|d| !d.is_allowed()).unwrap_or(0);
                        (decided_by, decided.iter().all(Decision::is_allowed), decided.len())
                    }
                }
            }
        };
        let decisions = &decisions[..members];
        for (offset, decision) in decisions.iter().enumerate() {
            // A composite's limits are settled together, through its first.
            let settles = offset == 0 || !via_composite;
            self.note(config, index + offset, check, *decision, decision_time, settles);
        }
        let any_fallback = decisions.iter().any(|d| d.fallback().is_some());
        // A real (not fallback) admission, with limits still to come that could reject the
        // request: remember it, to give it back if one does.
        let more_to_come = index + members < config.limits.len();
        if allowed && !config.shadow && !any_fallback && more_to_come {
            let charge = Charge { index, key: check.key.clone(), cost: check.cost, composite: via_composite };
            self.charged.push(charge);
        }
        if allowed || config.shadow {
            return None;
        }
        let limit = &config.limits[index + decided_by];
        Some(self.reject(config, &Rejection::Limited { limit, decision: &decisions[decided_by] }))
    }

    /// A single limit's decision from its limiter's result: `Err(None)` to go on without it
    /// (shadow mode), `Err(Some(verdict))` to answer.
    fn decision_of(
        &mut self,
        config: &Config,
        check: &Check,
        result: Result<Decision, LimiterError>,
    ) -> Result<Decision, Halt> {
        let limit = &config.limits[check.index];
        let name = limit.name();
        let key = Some(&check.key);
        match result {
            Ok(decision) => {
                if let Some(fallback) = store_fallback(&decision) {
                    config.record(
                        name,
                        key,
                        EventKind::BackendFailure { error: None, fallback: Some(fallback) },
                    );
                }
                Ok(decision)
            }
            Err(LimiterError::CostExceedsCapacity { cost, capacity }) => {
                Err(self.misconfigured(config, limit, key, cost, capacity).map(Box::new))
            }
            Err(error) => {
                let decided = config.on_backend_error.decide(&limit.quota());
                let fallback = decided.and_then(|d| d.fallback());
                config.record(name, key, EventKind::BackendFailure { error: Some(&error), fallback });
                match decided {
                    Some(decision) => Ok(decision),
                    None if config.shadow => Err(None),
                    None => {
                        let rejection = Rejection::BackendUnavailable { limit, error: &error };
                        Err(Some(Box::new(self.reject(config, &rejection))))
                    }
                }
            }
        }
    }

    /// A composite's failure: the layer's failure policy decides for every member, as
    /// [`decision_of`](Self::decision_of) does for one.
    fn fallback_of(
        &mut self,
        config: &Config,
        check: &Check,
        error: LimiterError,
        members: usize,
    ) -> Result<Vec<Decision>, Halt> {
        let limits = &config.limits[check.index..check.index + members];
        let key = Some(&check.key);
        if let LimiterError::CostExceedsCapacity { cost, capacity } = error {
            // The member whose quota sets the composite's capacity is the misconfigured one.
            let limit = limits.iter().find(|l| l.quota().burst() == capacity).unwrap_or(&limits[0]);
            return Err(self.misconfigured(config, limit, key, cost, capacity).map(Box::new));
        }
        let decided: Option<Vec<Decision>> =
            limits.iter().map(|limit| config.on_backend_error.decide(&limit.quota())).collect();
        for (n, limit) in limits.iter().enumerate() {
            let fallback = decided.as_ref().and_then(|decisions| decisions[n].fallback());
            config.record(limit.name(), key, EventKind::BackendFailure { error: Some(&error), fallback });
        }
        match decided {
            Some(decisions) => Ok(decisions),
            None if config.shadow => Err(None),
            None => {
                let rejection = Rejection::BackendUnavailable { limit: &limits[0], error: &error };
                Err(Some(Box::new(self.reject(config, &rejection))))
            }
        }
    }

    fn misconfigured(
        &mut self,
        config: &Config,
        limit: &Limit,
        key: Option<&LimitKey>,
        cost: u64,
        capacity: u64,
    ) -> Option<Verdict> {
        config.record(limit.name(), key, EventKind::CostExceedsCapacity { cost, capacity });
        if config.shadow {
            return None;
        }
        Some(self.reject(config, &Rejection::CostExceedsCapacity { limit, cost, capacity }))
    }

    /// Records the decision of the limit at `index` (its event, its time, its entry for the
    /// headers) and whether to settle it from the response.
    fn note(
        &mut self,
        config: &Config,
        index: usize,
        check: &Check,
        decision: Decision,
        decision_time: std::time::Duration,
        settles: bool,
    ) {
        let key = &check.key;
        let limit = &config.limits[index];
        let name = limit.name();
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
        // Only what was really charged is settled: not a failure policy's decision.
        if settles && decision.is_allowed() && decision.fallback().is_none() && limit.settle_from().is_some()
        {
            let composite = limit.member().is_some_and(|m| m.heads_whole_group(&config.limits[index..]));
            self.to_settle.push(ToSettle { index, key: key.clone(), estimated: check.cost, composite });
        }
    }

    /// Ends the run with the layer's own response, after giving back what this request's
    /// earlier allowed checks took (so the response's `RateLimit` shows what is left after it).
    fn reject(&mut self, config: &Config, rejection: &Rejection<'_>) -> Verdict {
        self.refund_charged(config);
        Verdict::Reject(self.respond(config, rejection))
    }

    /// Gives back what this request's earlier allowed checks took (it is being rejected), and
    /// updates their entries to the state after the refund where the limiter can say it now.
    fn refund_charged(&mut self, config: &Config) {
        for charge in std::mem::take(&mut self.charged) {
            let limit = &config.limits[charge.index];
            let group = limit.member().filter(|_| charge.composite);
            match group {
                Some(member) => {
                    if member.group.limiter.refund(&charge.key, charge.cost) {
                        if let Ok(Ok(now)) = member.group.limiter.check(&charge.key, 0).into_ready() {
                            for (offset, decision) in now.limit_decisions().iter().enumerate() {
                                self.update_entry(charge.index + offset, *decision);
                            }
                        }
                    }
                }
                None => {
                    if limit.limiter().refund(&charge.key, charge.cost) {
                        if let Ok(Ok(now)) = limit.limiter().check(&charge.key, 0).into_ready() {
                            self.update_entry(charge.index, now);
                        }
                    }
                }
            }
        }
    }

    pub(crate) fn update_entry(&mut self, index: usize, decision: Decision) {
        if let Some(entry) = self.entries.iter_mut().find(|e| e.index == index) {
            entry.decision = decision;
        }
    }

    /// The layer's own response: the default, with the `RateLimit` headers on a 429, then the
    /// configured customisation.
    fn respond(&self, config: &Config, rejection: &Rejection<'_>) -> Response<Bytes> {
        let mut response = rejection.default_response();
        if let Rejection::Limited { decision, .. } = rejection {
            // The legacy headers describe the denying limit.
            if let Some(headers) = self.headers(config, Some(decision)) {
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

    /// How the allowed request's response gets its headers.
    fn pass(&mut self, config: &Config) -> Pass {
        if self.to_settle.is_empty() {
            Pass::Now(self.pass_headers(config))
        } else {
            Pass::AfterResponse(Box::new(Settling::new(std::mem::take(self))))
        }
    }

    pub(crate) fn pass_headers(&self, config: &Config) -> Option<RateLimitHeaders> {
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

/// A check that gave no decision: `None` to go on without it (shadow mode), or the answer
/// (boxed: the rare path, and a large value).
type Halt = Option<Box<Verdict>>;

/// The store failure a limiter's own failure policy decided, if it did.
fn store_fallback(decision: &Decision) -> Option<Fallback> {
    match decision.fallback() {
        Some(
            fallback @ (Fallback::StoreUnavailableAllowed
            | Fallback::StoreUnavailableDenied
            | Fallback::StoreUnavailableLocal),
        ) => Some(fallback),
        _ => None,
    }
}

impl Config {
    pub(crate) fn record(&self, limit: &str, key: Option<&LimitKey>, kind: EventKind<'_>) {
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
