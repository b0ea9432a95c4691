//! The linearizability check of the loom models: their records of each call (the clock readings
//! around it, the result) in lanes of phases, searched by kova's checker
//! (`kova::model::lincheck`, Wing and Gong's search with memoisation) for a sequential order that
//! a sequential specification reproduces exactly.
//!
//! A call reads the clock somewhere between the two readings its thread took around it
//! ([`Call::before`], [`Call::after`]), so the search tries every value the clock held in that
//! range. Calls of one lane keep their program order; lanes of a lower phase (the prelude) finish
//! before any lane of a higher phase (the concurrent threads, then the final peek) starts: each
//! phase's calls are given one invocation and one response time, after the previous phase's.

use std::fmt;
use std::hash::Hash;

use kova::model::lincheck::{self, History};
use kova::{CheckError, Decision};

/// One completed call as its thread saw it.
#[derive(Clone, PartialEq, Eq)]
pub struct Call<O, R> {
    /// What was called.
    pub op: O,
    /// The clock read by the same thread just before the call.
    pub before: u64,
    /// The clock read by the same thread just after the call.
    pub after: u64,
    /// What the call returned.
    pub result: R,
}

impl<O: fmt::Debug, R: fmt::Debug> fmt::Debug for Call<O, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} in t=[{}, {}] -> {:?}", self.op, self.before, self.after, self.result)
    }
}

/// `check_n(cost)`, the operation of the direct-limiter models.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Cost(pub u64);

impl fmt::Debug for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "check_n({})", self.0)
    }
}

/// What a check returned, printed compactly.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Checked(pub Result<Decision, CheckError>);

impl fmt::Debug for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Ok(d) => {
                if d.is_allowed() {
                    write!(f, "allowed(remaining {}, reset {}", d.remaining(), d.reset_after_nanos())?;
                } else {
                    write!(
                        f,
                        "denied(remaining {}, retry {}, reset {}",
                        d.remaining(),
                        d.retry_after_nanos(),
                        d.reset_after_nanos()
                    )?;
                }
                match d.fallback() {
                    Some(fallback) => write!(f, ", {fallback:?})"),
                    None => f.write_str(")"),
                }
            }
            Err(e) => write!(f, "error({e})"),
        }
    }
}

impl Checked {
    /// Units admitted by a check of `cost` that returned this (0 when denied or an error).
    pub fn admitted(&self, cost: u64) -> u64 {
        match &self.0 {
            Ok(d) if d.is_allowed() => cost,
            _ => 0,
        }
    }
}

/// The calls of one thread, in program order.
#[derive(Debug, Clone)]
pub struct Lane<O, R> {
    /// A name for messages ("prelude", "thread 1", "final peek").
    pub name: String,
    /// Lanes of a lower phase finish before any call of a higher phase.
    pub phase: u32,
    /// The calls.
    pub calls: Vec<Call<O, R>>,
}

/// A sequential specification: what one call returns from a state at a time.
pub trait Spec {
    /// The state the calls are applied to (hashed for the search's memo).
    type State: Clone + Eq + Hash + fmt::Debug;
    /// The operations.
    type Op: Clone + fmt::Debug;
    /// What an operation returns (compared with `==`).
    type Output: PartialEq + Clone + fmt::Debug;

    /// Whether the specification needs the times of successive calls to be non-decreasing (the
    /// reference models do; the algorithms' own pure decisions do not).
    fn needs_monotone_time(&self) -> bool;

    /// Applies `op` at `now`.
    fn call(&self, state: &mut Self::State, now: u64, op: &Self::Op) -> Self::Output;
}

/// One step of a found order: which lane's next call, at which time.
pub use kova::model::lincheck::Step;

/// Searches for an order of all calls in `lanes` (each lane in program order, phases in order),
/// with each call at a value of `clock_values` within its `[before, after]`, for which `spec`
/// started from `initial` returns exactly the recorded results and ends in a state `accept`s.
pub fn find_order<S: Spec>(
    spec: &S,
    initial: S::State,
    lanes: &[Lane<S::Op, S::Output>],
    clock_values: &[u64],
    accept: impl Fn(&S::State) -> bool,
) -> Option<Vec<Step>> {
    match lincheck::check(&Adapted(spec), initial, &history(lanes, clock_values), accept) {
        lincheck::Verdict::Linearizable(order) => Some(order),
        lincheck::Verdict::Violation => None,
        lincheck::Verdict::GaveUp => panic!("the linearizability search gave up on:\n{lanes:#?}"),
    }
}

/// The lanes as a history of kova's checker: every call of phase `p` invoked at `2p` and
/// returned at `2p + 1`, so that the calls of one phase overlap and those of the next follow.
fn history<O: Clone, R: Clone>(lanes: &[Lane<O, R>], clock_values: &[u64]) -> History<O, R> {
    let lanes = lanes
        .iter()
        .map(|lane| {
            let (invoked, returned) = (2 * u64::from(lane.phase), 2 * u64::from(lane.phase) + 1);
            let calls = lane
                .calls
                .iter()
                .map(|c| {
                    lincheck::Call::completed(
                        c.op.clone(),
                        invoked,
                        c.before,
                        returned,
                        c.after,
                        c.result.clone(),
                    )
                })
                .collect();
            lincheck::Lane::new(lane.name.clone(), calls)
        })
        .collect();
    History::new(lanes, clock_values.to_vec())
}

/// A specification of these models as one of kova's checker.
struct Adapted<'a, S>(&'a S);

impl<S: Spec> lincheck::Spec for Adapted<'_, S> {
    type State = S::State;
    type Op = S::Op;
    type Output = S::Output;

    fn needs_monotone_time(&self) -> bool {
        self.0.needs_monotone_time()
    }

    fn call(&self, state: &mut S::State, now: u64, op: &S::Op) -> S::Output {
        self.0.call(state, now, op)
    }
}

/// Like [`find_order`], but panics with the whole history when no order exists: the message
/// starts with "not linearizable", which the should-fail tests expect.
pub fn assert_linearizable<S: Spec>(
    what: &str,
    spec: &S,
    initial: S::State,
    lanes: &[Lane<S::Op, S::Output>],
    clock_values: &[u64],
    accept: impl Fn(&S::State) -> bool,
) -> Vec<Step> {
    match find_order(spec, initial, lanes, clock_values, accept) {
        Some(order) => order,
        None => panic!(
            "not linearizable against {what}: no sequential order of these calls (clock values \
             {clock_values:?}) reproduces them and the final state:\n{lanes:#?}"
        ),
    }
}
