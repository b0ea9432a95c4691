//! The linearizability check: find a sequential order of recorded calls that a sequential
//! specification reproduces exactly.
//!
//! A call reads the clock somewhere between the two readings its thread took around it
//! ([`Call::before`], [`Call::after`]), so the search tries every value the clock held in that
//! range. Calls of one lane keep their program order; lanes of a lower phase (the prelude) finish
//! before any lane of a higher phase (the concurrent threads, then the final peek) starts. With
//! 2-3 threads of 1-2 calls each the search is a few hundred steps.

use std::fmt;

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
    /// The state the calls are applied to.
    type State: Clone + fmt::Debug;
    /// The operations.
    type Op: Clone + fmt::Debug;
    /// What an operation returns (compared with `==`).
    type Output: PartialEq + fmt::Debug;

    /// Whether the specification needs the times of successive calls to be non-decreasing (the
    /// reference models do; the algorithms' own pure decisions do not).
    fn needs_monotone_time(&self) -> bool;

    /// Applies `op` at `now`.
    fn call(&self, state: &mut Self::State, now: u64, op: &Self::Op) -> Self::Output;
}

/// One step of a found order: which lane's next call, at which time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Index of the lane.
    pub lane: usize,
    /// Index of the call in its lane.
    pub call: usize,
    /// The clock value the specification was given.
    pub now: u64,
}

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
    let mut search = Search { spec, lanes, clock_values, accept: &accept, order: Vec::new() };
    let mut next = vec![0usize; lanes.len()];
    if search.dfs(&mut next, initial, None) {
        Some(search.order)
    } else {
        None
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

struct Search<'a, S: Spec, F> {
    spec: &'a S,
    lanes: &'a [Lane<S::Op, S::Output>],
    clock_values: &'a [u64],
    accept: &'a F,
    order: Vec<Step>,
}

impl<S: Spec, F: Fn(&S::State) -> bool> Search<'_, S, F> {
    fn dfs(&mut self, next: &mut [usize], state: S::State, last_time: Option<u64>) -> bool {
        let open_phase = self
            .lanes
            .iter()
            .zip(next.iter())
            .filter(|(lane, &n)| n < lane.calls.len())
            .map(|(l, _)| l.phase)
            .min();
        let Some(phase) = open_phase else {
            return (self.accept)(&state);
        };
        for lane_index in 0..self.lanes.len() {
            let lane = &self.lanes[lane_index];
            let call_index = next[lane_index];
            if lane.phase != phase || call_index >= lane.calls.len() {
                continue;
            }
            let call = &lane.calls[call_index];
            for &now in self.clock_values.iter().filter(|&&t| call.before <= t && t <= call.after) {
                if self.spec.needs_monotone_time() && last_time.is_some_and(|last| now < last) {
                    continue;
                }
                let mut after = state.clone();
                if self.spec.call(&mut after, now, &call.op) != call.result {
                    continue;
                }
                next[lane_index] += 1;
                self.order.push(Step { lane: lane_index, call: call_index, now });
                let last = Some(last_time.map_or(now, |l| l.max(now)));
                if self.dfs(next, after, last) {
                    return true;
                }
                self.order.pop();
                next[lane_index] -= 1;
            }
        }
        false
    }
}
