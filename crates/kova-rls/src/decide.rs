//! One `ShouldRateLimit` call: match each descriptor, check its limit, answer all or nothing.

use std::sync::Arc;

use crate::backend::{refunded, took_local_units, took_units, Backend, BackendError};
use crate::limit_override::override_rule;
use crate::response::{self, Outcome};
use crate::telemetry::{self, UNKNOWN_DOMAIN};
use crate::{descriptor_key, Config, Limit, Limited, MemoryBackend, Rule};
use arc_swap::ArcSwap;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use kova::{AlgorithmKind, Decision};

/// Bounds on one request's shape. Envoy's route configuration, not the client, decides how
/// many descriptors and entries a request carries, so a request past them is a configuration
/// mistake, refused with `INVALID_ARGUMENT`; the values, which clients choose, are never
/// refused (a long one is keyed by its digest, [`crate::MAX_EXACT_KEY_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// The most descriptors in one request.
    pub max_descriptors: usize,
    /// The most entries in one descriptor.
    pub max_entries: usize,
}

impl Default for RequestLimits {
    /// 256 descriptors of up to 32 entries: far beyond any route's rate limit actions.
    fn default() -> Self {
        RequestLimits { max_descriptors: 256, max_entries: 32 }
    }
}

/// Why a call got a gRPC error instead of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// `domain` is empty (envoyproxy/ratelimit refuses it too).
    EmptyDomain,
    /// No descriptor at all.
    NoDescriptors,
    /// More descriptors than [`RequestLimits::max_descriptors`].
    TooManyDescriptors {
        /// In the request.
        count: usize,
        /// Allowed.
        max: usize,
    },
    /// A descriptor with more entries than [`RequestLimits::max_entries`].
    TooManyEntries {
        /// In the descriptor.
        count: usize,
        /// Allowed.
        max: usize,
    },
    /// A descriptor's own `limit` is unusable (an unknown `unit`).
    BadLimitOverride(String),
    /// The backend gave no decision (a table holding too many distinct quotas, Redis down
    /// under `--redis-failure error`); nothing the call had consumed is kept.
    Backend(String),
}

impl RequestError {
    /// The `reason` label of `kova_rls_request_errors_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            RequestError::EmptyDomain => "empty_domain",
            RequestError::NoDescriptors => "no_descriptors",
            RequestError::TooManyDescriptors { .. } => "too_many_descriptors",
            RequestError::TooManyEntries { .. } => "too_many_entries",
            RequestError::BadLimitOverride(_) => "bad_limit_override",
            RequestError::Backend(_) => "backend",
        }
    }

    /// The gRPC status Envoy receives (its `failure_mode_deny` decides what the request gets).
    pub fn to_status(&self) -> tonic::Status {
        match self {
            RequestError::Backend(_) => tonic::Status::unavailable(self.to_string()),
            _ => tonic::Status::invalid_argument(self.to_string()),
        }
    }
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::EmptyDomain => f.write_str("rate limit domain must not be empty"),
            RequestError::NoDescriptors => f.write_str("rate limit descriptor list must not be empty"),
            RequestError::TooManyDescriptors { count, max } => {
                write!(f, "{count} descriptors, at most {max} allowed")
            }
            RequestError::TooManyEntries { count, max } => {
                write!(f, "a descriptor of {count} entries, at most {max} allowed")
            }
            RequestError::BadLimitOverride(problem) => write!(f, "a descriptor's limit override: {problem}"),
            RequestError::Backend(problem) => write!(f, "no decision: {problem}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// The configuration serving now, the backend and the request bounds: everything a call needs.
#[derive(Debug)]
pub struct Decider<B: Backend = MemoryBackend> {
    config: ArcSwap<Config>,
    backend: B,
    limits: RequestLimits,
}

impl<B: Backend> Decider<B> {
    /// Decides with `config` on `backend`.
    pub fn new(config: Config, backend: B, limits: RequestLimits) -> Self {
        Decider { config: ArcSwap::from_pointee(config), backend, limits }
    }

    /// The configuration serving now.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Serves `config` from the next call on. The backend's state stays: a key whose rule kept
    /// its quota keeps counting; one whose quota changed moves to the new quota keeping what it
    /// consumed (kova's quota change); one whose algorithm changed starts fresh in that
    /// algorithm's table.
    pub fn set_config(&self, config: Config) {
        self.config.store(Arc::new(config));
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Answers one request. The cost of a descriptor is its own `hits_addend` when set (0: a
    /// check that counts nothing), else the request's, where 0 means 1 (as Envoy sends it). A
    /// descriptor's own `limit` replaces the file's (see the README). When any enforced limit
    /// denies, the whole request is over the limit and the units the other descriptors took are
    /// given back: a request Envoy rejects consumes nothing (a sliding window log, which takes
    /// no refunds, is charged last and only when everything fits: `check_logs`).
    ///
    /// Run the returned future to its end: one dropped between its checks, or while giving
    /// back, keeps the units already taken. [`RateLimitGrpc`](crate::RateLimitGrpc) runs it on a
    /// task of its own, which a cancelled call does not drop.
    pub async fn decide(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, RequestError> {
        self.check_shape(request)?;
        let config = self.config.load();
        let domain = config.domain(&request.domain);
        let label = domain.map_or(UNKNOWN_DOMAIN, |d| d.name());
        let mut rules: Vec<Option<&Rule>> = request
            .descriptors
            .iter()
            .map(|d| {
                domain.and_then(|domain| {
                    domain.find(d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str())))
                })
            })
            .map(|rule| rule.map(|r| &**r))
            .collect();
        // Overrides apply in a defined domain only, as envoyproxy/ratelimit's do.
        let overrides: Vec<Option<Rule>> =
            if domain.is_some() && request.descriptors.iter().any(|d| d.limit.is_some()) {
                request
                    .descriptors
                    .iter()
                    .zip(&rules)
                    .map(|(d, rule)| override_rule(d, *rule))
                    .collect::<Result<_, _>>()?
            } else {
                Vec::new()
            };
        // envoyproxy/ratelimit's order: a descriptor's own `limit` takes its place first, then
        // `replaces` acts among the limits that result (an override neither replaces nor is
        // replaced).
        for (rule, overridden) in rules.iter_mut().zip(&overrides) {
            if let Some(overridden) = overridden {
                *rule = Some(overridden);
            }
        }
        drop_replaced(&mut rules, &overrides);

        let base_cost = u64::from(request.hits_addend).max(1);
        let mut outcomes: Vec<Outcome<'_>> = Vec::with_capacity(rules.len());
        // The sliding window log's checks, decided after every other (`check_logs`).
        let mut logs = Vec::new();
        for (descriptor, rule) in request.descriptors.iter().zip(rules) {
            // Envoy's own rule (envoyproxy/ratelimit's too): a descriptor's `hits_addend`, when
            // set, is its cost, 0 included (checked without counting); else the request's,
            // where 0 means 1.
            let cost = descriptor.hits_addend.as_ref().map_or(base_cost, |h| h.value);
            let outcome = match rule.map(|r| (r, r.limit())) {
                None => Outcome::Free,
                Some((_, Limit::Unlimited)) => Outcome::Unlimited,
                Some((rule, Limit::Zero(unit))) => {
                    Outcome::Zero { rule, unit: *unit, counts: cost > 0 && !descriptor.is_negative_hits }
                }
                Some((rule, Limit::Limited(limited))) => {
                    let key = descriptor_key(&request.domain, &descriptor.entries);
                    if descriptor.is_negative_hits {
                        self.backend.refund(limited, &key, cost).await;
                        Outcome::Refunded { rule, limited }
                    } else if !takes_refunds(limited) {
                        logs.push((outcomes.len(), LogCheck { rule, limited, key, cost }));
                        Outcome::Free
                    } else {
                        let checked_at = self.backend.now_nanos();
                        match self.backend.check(limited, &key, cost).await {
                            Ok(decision) => {
                                Outcome::Checked { rule, limited, key, cost, decision, checked_at }
                            }
                            Err(BackendError::TooCostly) => Outcome::TooCostly { rule, limited },
                            // A shadow rule never changes what is enforced.
                            Err(BackendError::Unavailable(_)) if rule.is_shadow() => {
                                Outcome::Unavailable { rule, limited }
                            }
                            Err(BackendError::Unavailable(problem)) => {
                                self.give_back(&mut outcomes).await;
                                return Err(RequestError::Backend(problem));
                            }
                        }
                    }
                }
            };
            outcomes.push(outcome);
        }
        if !logs.is_empty() {
            let over = outcomes.iter().any(Outcome::enforced_denial);
            match self.check_logs(&logs, over).await {
                Ok(decided) => {
                    for ((at, _), outcome) in logs.iter().zip(decided) {
                        if let Some(slot) = outcomes.get_mut(*at) {
                            *slot = outcome;
                        }
                    }
                }
                Err(problem) => {
                    self.give_back(&mut outcomes).await;
                    return Err(RequestError::Backend(problem));
                }
            }
        }
        let over_limit = outcomes.iter().any(Outcome::enforced_denial);
        if over_limit {
            self.give_back(&mut outcomes).await;
        }
        for outcome in &outcomes {
            count(label, outcome);
        }
        Ok(response::build(&outcomes, over_limit))
    }

    fn check_shape(&self, request: &RateLimitRequest) -> Result<(), RequestError> {
        if request.domain.is_empty() {
            return Err(RequestError::EmptyDomain);
        }
        if request.descriptors.is_empty() {
            return Err(RequestError::NoDescriptors);
        }
        let max = self.limits.max_descriptors;
        if request.descriptors.len() > max {
            return Err(RequestError::TooManyDescriptors { count: request.descriptors.len(), max });
        }
        let max = self.limits.max_entries;
        match request.descriptors.iter().map(|d| d.entries.len()).find(|&n| n > max) {
            Some(count) => Err(RequestError::TooManyEntries { count, max }),
            None => Ok(()),
        }
    }

    /// Decides the sliding window log's checks of a request, whose other limits are decided
    /// (`over`: one of them denied). A log takes no refunds, so no enforced log is charged
    /// unless every enforced log's cost fits now (a peek of each) and nothing else denied;
    /// otherwise each answers without taking anything: a peek's answer where its cost fits,
    /// else a check's denial (a denial takes nothing). Shadow logs take no part in that: their
    /// denials are not enforced, so one used up must not keep the enforced logs of an admitted
    /// request uncharged. They are decided last, charged when the request is not over the
    /// limit; one the backend cannot decide answers `OK` ([`Outcome::Unavailable`]), as a
    /// shadow rule never changes what is enforced. Two checks of the same log racing between
    /// the peeks and the charges can still deny a later log after an earlier one was charged.
    async fn check_logs<'r>(
        &self,
        logs: &[(usize, LogCheck<'r>)],
        over: bool,
    ) -> Result<Vec<Outcome<'r>>, String> {
        let mut peeks = Vec::with_capacity(logs.len());
        for (_, log) in logs {
            peeks.push(match self.backend.check(log.limited, &log.key, 0).await {
                Ok(peek) => Peek::Left(peek),
                Err(BackendError::TooCostly) => Peek::TooCostly,
                Err(BackendError::Unavailable(_)) if log.rule.is_shadow() => Peek::Unavailable,
                Err(BackendError::Unavailable(problem)) => return Err(problem),
            });
        }
        let enforced = |log: &LogCheck<'_>| !log.rule.is_shadow();
        let charge = !over
            && logs
                .iter()
                .zip(&peeks)
                .filter(|((_, log), _)| enforced(log))
                .all(|((_, log), peek)| fits(log, peek));
        let mut decided: Vec<Outcome<'r>> = logs.iter().map(|_| Outcome::Free).collect();
        for (at, ((_, log), peek)) in logs.iter().zip(&peeks).enumerate() {
            if enforced(log) {
                let outcome = self.check_log(log, peek, charge, &mut decided).await?;
                set(&mut decided, at, outcome);
            }
        }
        // A log whose peek did not fit may still have been admitted by its check (a racing
        // check's units aged out, a failure policy allowed it): if the request is then not over
        // the limit, the enforced logs answered by a peek owe their cost.
        let mut over = over || decided.iter().any(Outcome::enforced_denial);
        if !over && !charge {
            for (at, ((_, log), peek)) in logs.iter().zip(&peeks).enumerate() {
                let peeked = matches!(decided.get(at), Some(Outcome::Checked { cost: 0, .. }));
                if enforced(log) && peeked && log.cost > 0 {
                    let outcome = self.check_log(log, peek, true, &mut decided).await?;
                    over = outcome.enforced_denial();
                    set(&mut decided, at, outcome);
                    if over {
                        break;
                    }
                }
            }
        }
        for (at, ((_, log), peek)) in logs.iter().zip(&peeks).enumerate() {
            if !enforced(log) {
                let outcome = self.check_log(log, peek, !over, &mut decided).await?;
                set(&mut decided, at, outcome);
            }
        }
        Ok(decided)
    }

    /// One log's answer given its `peek`: charged when `charge`, else a peek's answer where
    /// its cost fits and a check's denial where it does not. On an unavailable backend what
    /// `decided` took is given back.
    async fn check_log<'r>(
        &self,
        log: &LogCheck<'r>,
        peek: &Peek,
        charge: bool,
        decided: &mut [Outcome<'r>],
    ) -> Result<Outcome<'r>, String> {
        let (rule, limited) = (log.rule, log.limited);
        Ok(match peek {
            Peek::TooCostly => Outcome::TooCostly { rule, limited },
            Peek::Unavailable => Outcome::Unavailable { rule, limited },
            // A peek takes nothing: no refund is ever owed for it.
            Peek::Left(left) if !charge && fits(log, peek) => {
                let (key, decision) = (log.key.clone(), *left);
                Outcome::Checked { rule, limited, key, cost: 0, decision, checked_at: 0 }
            }
            Peek::Left(_) => {
                let checked_at = self.backend.now_nanos();
                match self.backend.check(limited, &log.key, log.cost).await {
                    Ok(decision) => {
                        let (key, cost) = (log.key.clone(), log.cost);
                        Outcome::Checked { rule, limited, key, cost, decision, checked_at }
                    }
                    Err(BackendError::TooCostly) => Outcome::TooCostly { rule, limited },
                    Err(BackendError::Unavailable(_)) if rule.is_shadow() => {
                        Outcome::Unavailable { rule, limited }
                    }
                    Err(BackendError::Unavailable(problem)) => {
                        self.give_back(decided).await;
                        return Err(problem);
                    }
                }
            }
        })
    }

    /// Refunds what the allowed checks among `outcomes` took while it still counts
    /// ([`still_counted`]), and makes each refunded decision say what its limit has left after
    /// the refund (the response reports it).
    async fn give_back(&self, outcomes: &mut [Outcome<'_>]) {
        for outcome in outcomes {
            if let Outcome::Checked { limited, key, cost, decision, checked_at, .. } = outcome {
                let counted = still_counted(limited, decision, *checked_at, self.backend.now_nanos());
                let given = if !counted {
                    false
                } else if took_units(decision) {
                    self.backend.refund(limited, key, *cost).await
                } else if took_local_units(decision) {
                    self.backend.refund_local(limited, key, *cost).await
                } else {
                    false
                };
                if given {
                    *decision = refunded(decision, *cost);
                }
            }
        }
    }
}

/// A sliding window log's check, waiting for the request's other limits (`check_logs`).
struct LogCheck<'r> {
    rule: &'r Rule,
    limited: &'r Limited,
    key: Vec<u8>,
    cost: u64,
}

/// What a peek at a sliding window log found (`check_logs`).
enum Peek {
    /// What the log has left.
    Left(Decision),
    /// The cost is more than the log ever admits at once.
    TooCostly,
    /// The backend could not tell (a shadow log's only: an enforced one fails the call).
    Unavailable,
}

/// Whether `log`'s cost fits what its `peek` found left.
fn fits(log: &LogCheck<'_>, peek: &Peek) -> bool {
    matches!(peek, Peek::Left(left) if left.remaining() >= log.cost)
}

fn set<'r>(decided: &mut [Outcome<'r>], at: usize, outcome: Outcome<'r>) {
    if let Some(slot) = decided.get_mut(at) {
        *slot = outcome;
    }
}

/// Whether the units an admission (`decision`) of `limited` took, checked at `checked_at` on
/// the backend's clock, may still count at `now`, so that a refund is owed. A fixed window's
/// admission resets when the window its units went into ends; once it has, a refund would come
/// off the next window's count, which other checks may have opened meanwhile. A sliding window
/// counter's admission resets up to a period after its window ends (the previous count's
/// decay), so its window has surely not ended only while less than that reset less a period
/// has passed. Every other algorithm is whole again at its reset, when a refund has nothing
/// left to give back. Both readings are taken before the backend's own (the check's, the
/// refund's), so the window can only be found ended too soon: a refund skipped, never one
/// made to the wrong window, but for a refund racing the very edge against another check.
fn still_counted(limited: &Limited, decision: &Decision, checked_at: u64, now: u64) -> bool {
    let reset = decision.reset_after_nanos();
    let horizon = match limited.algorithm() {
        AlgorithmKind::SlidingWindowCounter => reset.saturating_sub(limited.quota().period_nanos()),
        _ => reset,
    };
    now.saturating_sub(checked_at) < horizon
}

/// Whether `limited`'s algorithm gives units back on a refund (every algorithm but the sliding
/// window log, whose ring of times cannot take a unit out).
fn takes_refunds(limited: &Limited) -> bool {
    limited.algorithm() != AlgorithmKind::SlidingWindowLog
}

/// envoyproxy/ratelimit's `replaces`: a matched rule that another rule of the request replaces
/// (by `name`) is not applied. `rules` are the request's after its overrides (`overrides`, by
/// position): an override has no `replaces`, and, though it keeps its node's `name` for the
/// response, is never replaced (envoyproxy/ratelimit's override has no name). A shadow rule
/// replaces nothing: it enforces nothing, so taking an enforced rule's place would lift that
/// limit.
fn drop_replaced<'a>(rules: &mut [Option<&'a Rule>], overrides: &[Option<Rule>]) {
    let replaced: Vec<&'a str> = rules
        .iter()
        .copied()
        .flatten()
        .filter(|r| !r.is_shadow())
        .flat_map(|r| r.replaces())
        .map(String::as_str)
        .collect();
    if replaced.is_empty() {
        return;
    }
    for (at, rule) in rules.iter_mut().enumerate() {
        let overridden = overrides.get(at).is_some_and(Option::is_some);
        if !overridden && rule.and_then(|r| r.name()).is_some_and(|name| replaced.contains(&name)) {
            *rule = None;
        }
    }
}

fn count(domain: &str, outcome: &Outcome<'_>) {
    match outcome {
        Outcome::Free | Outcome::Unlimited => telemetry::unlimited(domain),
        Outcome::Refunded { .. } => {}
        Outcome::Unavailable { .. } => telemetry::shadow_unavailable(domain),
        Outcome::TooCostly { rule, .. } => telemetry::decision(domain, true, rule.is_shadow()),
        Outcome::Zero { rule, counts, .. } => telemetry::decision(domain, *counts, rule.is_shadow()),
        Outcome::Checked { rule, decision, .. } => {
            telemetry::decision(domain, !decision.is_allowed(), rule.is_shadow());
            if let Some(fallback) = decision.fallback() {
                telemetry::fallback(domain, fallback);
            }
        }
    }
}
