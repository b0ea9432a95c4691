//! Running a request's limits: find each key, check it, and turn the decisions into a verdict
//! (pass with headers, or a response written by the layer).
//!
//! The same steps serve the synchronous path (every check ready: in-memory limiters) and the
//! asynchronous one (a check that waits on a store), which resumes where the pending check was.
//! The members of a [`CompositeLimit`](crate::CompositeLimit) are decided in one step; every
//! other limit on its own, with what earlier limits took given back when a later one rejects.

mod awaiting;
mod checked;
mod settling;
mod taken;

use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::Response;
use kova::limits::MAX_LIMITS;
use kova::{Decision, Fallback, GiveBack};
use smallvec::SmallVec;

pub(crate) use self::awaiting::Awaiting;
use self::checked::{Checked, Entry, ToSettle};
pub(crate) use self::settling::Settling;
pub(crate) use self::taken::Reading;
use self::taken::Taken;
use crate::config::Config;
use crate::headers::{self, RateLimitHeaders};
pub(crate) use crate::pending::{Answer, Check, Pending, PendingCheck};
use crate::stopwatch::Stopwatch;
use crate::{EventKind, KeyError, Limit, LimitKey, LimiterError, MissingKeyPolicy, Rejection};

/// What an allowed check took, while a later limit could still reject the request.
#[derive(Debug)]
struct Charge {
    /// The limit (the first member, for a composite decided in one step).
    index: usize,
    key: LimitKey,
    cost: u64,
    composite: bool,
    /// When: only what still counts of it is given back.
    taken: Taken,
}

/// The checks of one request so far.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// The next limit to look at.
    next: usize,
    /// Every limit checked, and what to settle.
    checked: Checked,
    /// Given back if a later limit rejects, so that a rejected request consumes no quota.
    charged: Vec<Charge>,
}

/// How the run of a layer of one plain limit starts: passed at once (allowed), or a run under
/// way (boxed: the rare answers, a denial, a key error or a check to await, which build far more
/// than a box).
pub(crate) enum Start {
    /// Pass the request on with these headers.
    Passed(Option<RateLimitHeaders>),
    Running(Box<Run>, Progress),
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

impl Run {
    /// Checks limits from where the run stands until all are done, one rejects, or one must be
    /// awaited.
    pub(crate) fn drive(&mut self, config: &Config, parts: &Parts) -> Progress {
        while let Some(limit) = config.limits.get(self.next) {
            let index = self.next;
            let group = limit
                .member()
                .filter(|m| config.limits.get(index..).is_some_and(|rest| m.heads_whole_group(rest)));
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
            // Read only for a check that may be given back: a later limit may reject, or the
            // response settles it.
            let refundable = self.next < config.limits.len() || limit.settle_from().is_some();
            let at = refundable.then(|| Reading::now(clock_of(limit, group.is_some())));
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
            let check = Check { index, key, cost, started, at };
            if let Some(future) = future {
                return Progress::Pending(Pending { check, future });
            }
            if let Some(verdict) = answer.and_then(|answer| self.answered(config, &check, answer)) {
                return Progress::Done(verdict);
            }
        }
        Progress::Done(Verdict::Pass(self.pass(config)))
    }

    /// Starts the run of a layer of one plain limit (see [`Config::one_plain_limit`]): a ready
    /// allowed answer goes straight to its headers, without a run's bookkeeping (there is
    /// nothing to refund or settle); any other answer goes on in a run.
    pub(crate) fn start_one(config: &Config, limit: &Limit, parts: &Parts) -> Start {
        // A run past the only limit, for the answers that need its bookkeeping.
        let run = || Box::new(Run { next: 1, ..Run::default() });
        if !limit.applies_to(parts) {
            return Start::Passed(None);
        }
        let key = match limit.key().extract(parts) {
            Ok(key) => key,
            Err(error) => {
                let mut run = run();
                let verdict = run.key_missing(config, 0, 1, &error);
                let progress = Progress::Done(verdict.map_or(Verdict::Pass(Pass::Now(None)), |v| *v));
                return Start::Running(run, progress);
            }
        };
        let cost = limit.cost_of(parts);
        let started = Stopwatch::start();
        let result = match limit.limiter().check(&key, cost).into_ready() {
            Ok(result) => result,
            Err(future) => {
                let check = Check { index: 0, key, cost, started, at: None };
                let pending = Pending { check, future: PendingCheck::One(future) };
                return Start::Running(run(), Progress::Pending(pending));
            }
        };
        match result {
            Ok(decision) if decision.is_allowed() && decision.fallback().is_none() => {
                report(config, limit.name(), &key, &decision, started.elapsed());
                Start::Passed((!config.shadow).then(|| RateLimitHeaders {
                    policy: config.all_policies.clone(),
                    state: headers::state_value_of(limit.state_prefix(), &decision),
                    legacy: config.legacy_headers.then(|| headers::legacy_values(&decision)),
                }))
            }
            result => {
                let mut run = run();
                let check = Check { index: 0, key, cost, started, at: None };
                let progress = match run.answered(config, &check, Answer::One(result)) {
                    Some(verdict) => Progress::Done(verdict),
                    None => Progress::Done(Verdict::Pass(run.pass(config))),
                };
                Start::Running(run, progress)
            }
        }
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
        match config.limit(index).key().extract(parts) {
            Ok(key) => Ok(Some(key)),
            Err(error) => self.key_missing(config, index, members, &error).map_or(Ok(None), Err),
        }
    }

    /// The limit at `index` (and its composite's other members) found no key: reports it, and
    /// gives the rejection, or `None` to go on without the limit (shadow mode, or
    /// [`MissingKeyPolicy::Skip`]).
    fn key_missing(
        &mut self,
        config: &Config,
        index: usize,
        members: usize,
        error: &KeyError,
    ) -> Option<Box<Verdict>> {
        for member in config.members(index, members) {
            config.record(member.name(), None, EventKind::KeyError(error));
        }
        let limit = config.limit(index);
        if config.shadow || limit.missing_key_policy() == MissingKeyPolicy::Skip {
            return None;
        }
        Some(Box::new(self.reject(config, &Rejection::KeyError { limit, error })))
    }

    /// Records one check's answer; `Some` when it ends the run with a response.
    fn answered(&mut self, config: &Config, check: &Check, answer: Answer) -> Option<Verdict> {
        // The decision's time ends here: what follows is the layer's own bookkeeping.
        let decision_time = check.started.elapsed();
        match answer {
            Answer::One(result) => {
                let decision = match self.decision_of(config, check, result) {
                    Ok(decision) => decision,
                    Err(verdict) => return verdict.map(|v| *v),
                };
                let decided = Decided { decisions: &[decision], by: 0, allowed: decision.is_allowed() };
                self.decided(config, check, decided, false, decision_time)
            }
            Answer::All(result) => {
                let index = check.index;
                let members = config.limit(index).member().map_or(1, |m| m.group.len);
                // A composite that answers for another number of limits is a failing backend.
                let result = result.and_then(|all| match all.limit_decisions().len() {
                    len if len == members => Ok(all),
                    len => Err(LimiterError::backend(format!(
                        "a composite of {members} answered {len} decisions"
                    ))),
                });
                // Every decision of this check, without allocating.
                let (decisions, by, allowed): (SmallVec<[Decision; MAX_LIMITS]>, _, _) = match result {
                    Ok(all) => {
                        if let Some(fallback) = store_fallback(&all.decision()) {
                            let kind = EventKind::BackendFailure { error: None, fallback: Some(fallback) };
                            for member in config.members(index, members) {
                                config.record(member.name(), Some(&check.key), kind);
                            }
                        }
                        let decisions = all.limit_decisions().iter().copied().collect();
                        (decisions, all.decided_by(), all.is_allowed())
                    }
                    Err(error) => {
                        let decided = match self.fallback_of(config, check, error, members) {
                            Ok(decided) => decided,
                            Err(verdict) => return verdict.map(|v| *v),
                        };
                        let by = decided.iter().position(|d| !d.is_allowed()).unwrap_or(0);
                        let allowed = decided.iter().all(Decision::is_allowed);
                        (decided.into_iter().collect(), by, allowed)
                    }
                };
                let decided = Decided { decisions: &decisions, by, allowed };
                self.decided(config, check, decided, true, decision_time)
            }
        }
    }

    /// Records the decisions of one check (one limit's, or a composite's `via_composite`), keeps
    /// what it took for a refund should a later limit reject, and rejects when it denied.
    fn decided(
        &mut self,
        config: &Config,
        check: &Check,
        decided: Decided<'_>,
        via_composite: bool,
        decision_time: Duration,
    ) -> Option<Verdict> {
        let index = check.index;
        // A check read no time for (nothing could give it back) reads it now.
        let at = check.at.unwrap_or_else(|| Reading::now(clock_of(config.limit(index), via_composite)));
        let taken = Taken::new(at, decided.decisions);
        for (offset, decision) in decided.decisions.iter().enumerate() {
            // A composite's limits are settled together, through its first.
            let settles = offset == 0 || !via_composite;
            self.note(config, index + offset, check, *decision, decision_time, settles.then_some(taken));
        }
        let all_took_units = decided.decisions.iter().all(took_units);
        // An admission that took units (not a failure policy's), with limits still to come that
        // could reject the request: remember it, to give it back if one does.
        let more_to_come = index + decided.decisions.len() < config.limits.len();
        if decided.allowed && !config.shadow && all_took_units && more_to_come {
            let key = check.key.clone();
            let charge = Charge { index, key, cost: check.cost, composite: via_composite, taken };
            self.charged.push(charge);
        }
        if decided.allowed || config.shadow {
            return None;
        }
        let limit = config.limit(index + decided.by);
        Some(self.reject(config, &Rejection::Limited { limit, decision: decided.decider() }))
    }

    /// A single limit's decision from its limiter's result: `Err(None)` to go on without it
    /// (shadow mode), `Err(Some(verdict))` to answer.
    fn decision_of(
        &mut self,
        config: &Config,
        check: &Check,
        result: Result<Decision, LimiterError>,
    ) -> Result<Decision, Halt> {
        let limit = config.limit(check.index);
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
                let decided = config.backend_failure.decide(&limit.quota());
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
        let limits = config.members(check.index, members);
        let key = Some(&check.key);
        if let LimiterError::CostExceedsCapacity { cost, capacity } = error {
            // The member whose quota sets the composite's capacity is the misconfigured one.
            let first = config.limit(check.index);
            let limit = limits.iter().find(|l| l.quota().burst() == capacity).unwrap_or(first);
            return Err(self.misconfigured(config, limit, key, cost, capacity).map(Box::new));
        }
        let decided: Option<Vec<Decision>> =
            limits.iter().map(|limit| config.backend_failure.decide(&limit.quota())).collect();
        for (n, limit) in limits.iter().enumerate() {
            let fallback = decided.as_ref().and_then(|decisions| decisions.get(n)?.fallback());
            config.record(limit.name(), key, EventKind::BackendFailure { error: Some(&error), fallback });
        }
        match decided {
            Some(decisions) => Ok(decisions),
            None if config.shadow => Err(None),
            None => {
                let limit = config.limit(check.index);
                let rejection = Rejection::BackendUnavailable { limit, error: &error };
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
    /// headers) and whether to settle it from the response (`settles`: when its units were
    /// taken, for the limit that settles them).
    fn note(
        &mut self,
        config: &Config,
        index: usize,
        check: &Check,
        decision: Decision,
        decision_time: Duration,
        settles: Option<Taken>,
    ) {
        let key = &check.key;
        let limit = config.limit(index);
        let name = limit.name();
        report(config, name, key, &decision, decision_time);
        let partition_key = config.partition_keys.as_ref().map(|keys| keys.digest(name, key));
        self.checked.entries.push(Entry { index, decision, partition_key });
        // Only what was really charged is settled: not a failure policy's decision, nor a local
        // share's while the store is down (the settlement could not reach it).
        let settleable =
            took_units(&decision) && decision.fallback() != Some(Fallback::StoreUnavailableLocal);
        if let Some(taken) = settles.filter(|_| settleable && limit.settle_from().is_some()) {
            let composite = limit
                .member()
                .is_some_and(|m| config.limits.get(index..).is_some_and(|rest| m.heads_whole_group(rest)));
            self.checked.to_settle.push(ToSettle {
                index,
                key: key.clone(),
                estimated: check.cost,
                composite,
                taken,
            });
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
    /// Only what a charge still counts is given back (see [`Taken`]): nothing once its window
    /// has ended, not what has refilled since. As an undo ([`GiveBack::Undo`]): the request is
    /// denied, and a denial takes nothing, so a unit partly refilled since the check comes back
    /// whole.
    fn refund_charged(&mut self, config: &Config) {
        for charge in std::mem::take(&mut self.charged) {
            let limit = config.limit(charge.index);
            let (index, composite, undo) = (charge.index, charge.composite, GiveBack::Undo);
            let back = charge.taken.still_counted(config, index, composite, &charge.key, charge.cost, undo);
            if back == 0 {
                continue;
            }
            let group = limit.member().filter(|_| charge.composite);
            match group {
                Some(member) => {
                    if member.group.limiter.refund(&charge.key, back) {
                        if let Ok(Ok(now)) = member.group.limiter.check(&charge.key, 0).into_ready() {
                            for (offset, decision) in now.limit_decisions().iter().enumerate() {
                                self.checked.update(charge.index + offset, *decision);
                            }
                        }
                    }
                }
                None => {
                    if limit.limiter().refund(&charge.key, back) {
                        if let Ok(Ok(now)) = limit.limiter().check(&charge.key, 0).into_ready() {
                            self.checked.update(charge.index, now);
                        }
                    }
                }
            }
        }
    }

    /// The layer's own response: the default, with the `RateLimit` headers on a 429, then the
    /// configured customisation.
    fn respond(&self, config: &Config, rejection: &Rejection<'_>) -> Response<Bytes> {
        let mut response = rejection.default_response();
        if let Rejection::Limited { decision, .. } = rejection {
            // The legacy headers describe the denying limit.
            if let Some(headers) = self.checked.headers(config, Some(decision)) {
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

    /// How the allowed request's response gets its headers. It is served: it keeps what its
    /// limits took, whatever becomes of its response.
    fn pass(&mut self, config: &Config) -> Pass {
        self.charged.clear();
        if self.checked.to_settle.is_empty() {
            Pass::Now(self.checked.pass_headers(config))
        } else {
            Pass::AfterResponse(Box::new(Settling::new(std::mem::take(&mut self.checked))))
        }
    }
}

/// The decisions of one check: one limit's, or each of a composite's members'.
struct Decided<'a> {
    decisions: &'a [Decision],
    /// The member that decided (the first that denied).
    by: usize,
    allowed: bool,
}

impl Decided<'_> {
    /// The deciding member's decision.
    #[expect(
        clippy::indexing_slicing,
        reason = "`by` is a position in `decisions`: 0 of one limit's, a composite answer's `decided_by` (checked to hold one decision per member), or the first denial of a failure policy's"
    )]
    fn decider(&self) -> &Decision {
        &self.decisions[self.by]
    }
}

/// The reading of `limit`'s limiter clock, for [`Reading::now`] (none for a composite's: the
/// layer cannot read it).
fn clock_of(limit: &Limit, composite: bool) -> Option<u64> {
    if composite {
        None
    } else {
        limit.limiter().now_nanos()
    }
}

/// A check that gave no decision: `None` to go on without it (shadow mode), or the answer
/// (boxed: the rare path, and a large value).
type Halt = Option<Box<Verdict>>;

/// Reports a checked limit's decision: its event, and (with the `metrics` feature) how long it
/// took.
fn report(config: &Config, name: &str, key: &LimitKey, decision: &Decision, decision_time: Duration) {
    // Nothing listens: the event is not worth building.
    if !config.records() {
        return;
    }
    let kind = if !decision.is_allowed() {
        EventKind::Denied(decision)
    } else if headers::is_measurement(decision) && config.is_near_limit(decision) {
        EventKind::NearLimit(decision)
    } else {
        EventKind::Allowed(decision)
    };
    config.record(name, Some(key), kind);
    #[cfg(feature = "metrics")]
    crate::metrics_facade::record_decision_time(name, decision_time);
    #[cfg(not(feature = "metrics"))]
    let _ = decision_time;
}

/// Whether an allowed `decision` took units from its limiter, which a refund or a settlement
/// then adjusts: every admission but a failure policy's, which counted nothing (a table too full
/// to track the key, a store that could not be reached). A leased unit
/// ([`Fallback::LocalCache`]), a stripe's ([`Fallback::StripeLease`]), a sketch's cells
/// ([`Fallback::Sketch`]) or a local share while the store was down
/// ([`Fallback::StoreUnavailableLocal`]) were taken.
fn took_units(decision: &Decision) -> bool {
    decision.is_allowed()
        && !matches!(
            decision.fallback(),
            Some(Fallback::TableFullUntracked | Fallback::StoreUnavailableAllowed)
        )
}

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
