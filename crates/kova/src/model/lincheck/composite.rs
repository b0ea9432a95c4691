//! The sequential specification of a composite of limits ([`Composite`], what
//! [`Limits`](crate::limits::Limits) promises for one or two limits): each limit a plain word driven by
//! the algorithm's pure `decide` and `refund`; a check is admitted only if every limit admits it,
//! and then takes its cost from every limit; a denial takes nothing, and the limits that would
//! admit report a peek.
//!
//! Three or four limits (check then refund over two words) and
//! [`KeyedLimits`](crate::limits::KeyedLimits) are not that object: limits 0 and 1 are charged by one
//! compare-and-swap, then the rest by another, and a denial by the second gives the first its
//! units back, so a concurrent call can see them held. They are checked
//! limit by limit ([`OneLimit`]): each limit must be linearizable to its own word with the steps
//! a composite call makes on it, the conjunction of the per-limit specifications.

use crate::limits::LimitsDecision;
use crate::{CheckError, Decision, WordAlgorithm};

use super::word_api::{self, WordApi, WordState};
use super::Spec;

/// An operation on a composite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitsOp {
    /// `check_n(cost)`.
    Check(u64),
    /// `peek()`.
    Peek,
    /// `refund(cost)`.
    Refund(u64),
}

/// What a composite's operation returned (`None` for a refund).
pub type LimitsOutput = Option<Result<LimitsDecision, CheckError>>;

/// The specification: the limits' algorithms, in the composite's order.
#[derive(Debug, Clone)]
pub struct Composite<W> {
    /// One per limit.
    pub algorithms: Vec<W>,
}

impl<W: WordAlgorithm> Composite<W> {
    /// The words of a fresh composite.
    pub fn fresh(&self) -> Vec<u64> {
        self.algorithms.iter().map(WordAlgorithm::fresh_word).collect()
    }

    fn decide(&self, words: &mut [u64], now: u64, cost: u64) -> LimitsDecision {
        let each: Vec<(Decision, u64)> =
            self.algorithms.iter().zip(words.iter()).map(|(a, &w)| a.decide(w, now, cost)).collect();
        let allowed = each.iter().all(|(d, _)| d.is_allowed());
        let decisions: Vec<Decision> = if allowed {
            for (word, (_, new)) in words.iter_mut().zip(&each) {
                *word = *new;
            }
            each.iter().map(|(d, _)| *d).collect()
        } else {
            let peek = |i: usize| self.algorithms[i].decide(words[i], now, 0).0;
            each.iter().enumerate().map(|(i, (d, _))| if d.is_allowed() { peek(i) } else { *d }).collect()
        };
        // The specification is built from a composite's own algorithms, between 1 and MAX_LIMITS
        // of them (`Limits` and `KeyedLimits` refuse any other count), one decision each.
        LimitsDecision::from_decisions(&decisions, allowed).expect("one to four limits")
    }
}

impl<W: WordAlgorithm> Spec for Composite<W> {
    type State = Vec<u64>;
    type Op = LimitsOp;
    type Output = LimitsOutput;

    fn call(&self, words: &mut Vec<u64>, now: u64, op: &LimitsOp) -> LimitsOutput {
        match *op {
            LimitsOp::Check(cost) => {
                let capacity = self.algorithms.iter().map(WordAlgorithm::capacity).min().unwrap_or(0);
                if cost > capacity {
                    return Some(Err(CheckError::CostExceedsCapacity { cost, capacity }));
                }
                Some(Ok(self.decide(words, now, cost)))
            }
            LimitsOp::Peek => Some(Ok(self.decide(words, now, 0))),
            LimitsOp::Refund(cost) => {
                for (word, algorithm) in words.iter_mut().zip(&self.algorithms) {
                    *word = algorithm.refund(*word, now, cost);
                }
                None
            }
        }
    }
}

/// A step a composite call makes on one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitStep {
    /// A call the composite passes to every limit as it is: an admitted check (the limit's own
    /// decision is in the answer), a peek, a refund.
    Plain(word_api::Op),
    /// The start of a denied check of `cost` by thread `lane` (below [`LANES`]; its response is
    /// not seen): the limit was not reached (a limit before it denied), or it denied, or it
    /// admitted and took the units.
    Try(u64, u8),
    /// A denied check giving back what its `Try` took, if anything (answers
    /// [`Output::Done`](word_api::Output::Done)).
    Undo(u64, u8),
    /// The denied check's answer for this limit: the denial its `Try` met, or else a look (what a
    /// check of `cost` would say now, writing nothing: a denial, or a peek where it would admit).
    Answer(u64, u8),
}

/// The most threads of a history [`OneLimit`] checks.
pub const LANES: usize = 8;

/// What a denied check's `Try` did on this limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tried {
    /// Nothing in flight.
    Nothing,
    /// Not reached, or took units now given back: the answer is a look.
    Looks,
    /// Took the units, writing `written` at `at`: the `Undo` gives back what they still count
    /// ([`WordAlgorithm::undo`], at a time no earlier than `at`).
    Took {
        /// The word the check wrote.
        written: u64,
        /// The time it decided at.
        at: u64,
    },
    /// Denied: the word it met and when (the denial is decided again from them).
    Denied(u64, u64),
}

/// One limit of a composite checked on its own: [`WordApi`] plus the denied check's steps.
#[derive(Debug, Clone, Copy)]
pub struct OneLimit<W>(pub WordApi<W>);

impl<W: WordAlgorithm> OneLimit<W> {
    /// A fresh limit.
    pub fn fresh(&self) -> (WordState, [Tried; LANES]) {
        (self.0.fresh(), [Tried::Nothing; LANES])
    }
}

impl<W: WordAlgorithm> Spec for OneLimit<W> {
    type State = (WordState, [Tried; LANES]);
    type Op = LimitStep;
    type Output = word_api::Output;

    fn call(&self, state: &mut Self::State, now: u64, op: &LimitStep) -> word_api::Output {
        // The first of the outcomes.
        let (output, after) = self.outcomes(state, now, op).swap_remove(0);
        *state = after;
        output
    }

    fn outcomes(
        &self,
        state: &Self::State,
        now: u64,
        op: &LimitStep,
    ) -> Vec<(word_api::Output, Self::State)> {
        let algorithm = &self.0.algorithm;
        let (word, lanes) = state;
        let with = |word: &WordState, lane: u8, tried| {
            let mut lanes = *lanes;
            lanes[usize::from(lane)] = tried;
            (word.clone(), lanes)
        };
        match *op {
            LimitStep::Plain(op) => {
                let mut after = word.clone();
                let output = self.0.call(&mut after, now, &op);
                vec![(output, (after, *lanes))]
            }
            LimitStep::Try(cost, lane) => {
                let (decision, taken) = algorithm.decide(word.word, now, cost);
                let mut ways = vec![(word_api::Output::Done, with(word, lane, Tried::Looks))];
                if decision.is_allowed() {
                    let mut after = word.clone();
                    after.word = taken;
                    ways.push((
                        word_api::Output::Done,
                        with(&after, lane, Tried::Took { written: taken, at: now }),
                    ));
                } else {
                    ways.push((word_api::Output::Done, with(word, lane, Tried::Denied(word.word, now))));
                }
                ways
            }
            LimitStep::Undo(cost, lane) => match lanes[usize::from(lane)] {
                Tried::Took { written, at } => {
                    let mut after = word.clone();
                    after.word = algorithm.undo(word.word, now.max(at), cost, written);
                    vec![(word_api::Output::Done, with(&after, lane, Tried::Looks))]
                }
                _ => vec![(word_api::Output::Done, state.clone())],
            },
            LimitStep::Answer(cost, lane) => {
                let answer = match lanes[usize::from(lane)] {
                    Tried::Denied(met, at) => algorithm.decide(met, at, cost).0,
                    _ => {
                        let decision = algorithm.decide(word.word, now, cost).0;
                        if decision.is_allowed() {
                            algorithm.decide(word.word, now, 0).0
                        } else {
                            decision
                        }
                    }
                };
                vec![(word_api::Output::Decided(Ok(answer)), with(word, lane, Tried::Nothing))]
            }
        }
    }
}
