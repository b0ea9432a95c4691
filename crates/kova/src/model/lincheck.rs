//! A linearizability checker in the shape of Jepsen's Knossos and porcupine: Wing and Gong's
//! search for a sequential order of a concurrent history's calls, with memoisation (Lowe's
//! refinement: a pair of the calls linearized so far and the specification's state is explored
//! once).
//!
//! A [`History`] is what threads recorded while they called one shared object: per thread (a
//! [`Lane`]) its calls in program order, each with the global order of its invocation and
//! response (a counter every thread bumps, so "returned before the other was invoked" is known)
//! and the clock readings its thread took around the call. The object read the clock somewhere
//! in between, so the search tries each value the clock held in that range
//! ([`History::clock_values`]). A call without a response (a history cut short by
//! [`minimal_violation`]) may take effect with any result, or never.
//!
//! The linearized calls of a lane are always a prefix of it, so the set of linearized calls is
//! the vector of each lane's next call: that vector, the state and (for a specification that
//! needs non-decreasing time) the latest time used form the memoised key.
//!
//! ```
//! use kova::model::lincheck::{check, Call, History, Lane, Spec, Verdict};
//!
//! // A register of one counter: `add` returns the new value.
//! struct Counter;
//! impl Spec for Counter {
//!     type State = u64;
//!     type Op = u64;
//!     type Output = u64;
//!     fn call(&self, state: &mut u64, _now: u64, add: &u64) -> u64 {
//!         *state += add;
//!         *state
//!     }
//! }
//! // Two overlapping adds: either order is fine, but both cannot return 1.
//! let add = |invoked, returned, result| Call::completed(1, invoked, 0, returned, 0, result);
//! let ok = History::new(vec![Lane::new("a", vec![add(0, 2, 2)]), Lane::new("b", vec![add(1, 3, 1)])], vec![0]);
//! assert!(matches!(check(&Counter, 0, &ok, |_| true), Verdict::Linearizable(_)));
//! let lost = History::new(vec![Lane::new("a", vec![add(0, 2, 1)]), Lane::new("b", vec![add(1, 3, 1)])], vec![0]);
//! assert!(matches!(check(&Counter, 0, &lost, |_| true), Verdict::Violation));
//! ```

pub mod composite;
mod record;
pub mod word_api;

pub use record::{LaneRecorder, Recorder};

use std::collections::HashSet;
use std::fmt;
use std::hash::Hash;

/// A sequential specification: what one call returns from a state at a time.
pub trait Spec {
    /// The state calls are applied to (hashed for the memo).
    type State: Clone + Eq + Hash + fmt::Debug;
    /// The operations.
    type Op: fmt::Debug;
    /// What an operation returns (compared with `==`).
    type Output: PartialEq + fmt::Debug;

    /// Whether successive calls must be given non-decreasing times (the reference models need
    /// it; the algorithms' own pure functions take any order, as a CAS loop that read the clock
    /// before another call's write may land after it).
    fn needs_monotone_time(&self) -> bool {
        false
    }

    /// Applies `op` at `now`.
    fn call(&self, state: &mut Self::State, now: u64, op: &Self::Op) -> Self::Output;

    /// Every way `op` at `now` may go from `state`: what it returns and the state after. One
    /// way, [`call`](Self::call)'s, unless the object promises less than one exact answer (a
    /// composite's check whose internal steps the caller cannot see).
    fn outcomes(&self, state: &Self::State, now: u64, op: &Self::Op) -> Vec<(Self::Output, Self::State)> {
        let mut after = state.clone();
        let output = self.call(&mut after, now, op);
        vec![(output, after)]
    }
}

/// One call as its thread recorded it.
#[derive(Clone, PartialEq, Eq)]
pub struct Call<O, R> {
    /// What was called.
    pub op: O,
    /// The call's place in the history's global order of invocations and responses.
    pub invoked: u64,
    /// The clock read by the same thread just before the call.
    pub before: u64,
    /// The response, or `None` for a call still running where the history was cut.
    pub response: Option<Response<R>>,
}

/// A call's response.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Response<R> {
    /// Its place in the global order (after the call's `invoked`).
    pub returned: u64,
    /// The clock read by the same thread just after the call.
    pub after: u64,
    /// What the call returned.
    pub result: R,
}

impl<O, R> Call<O, R> {
    /// A call that returned.
    pub fn completed(op: O, invoked: u64, before: u64, returned: u64, after: u64, result: R) -> Self {
        Call { op, invoked, before, response: Some(Response { returned, after, result }) }
    }

    fn returned(&self) -> u64 {
        self.response.as_ref().map_or(u64::MAX, |r| r.returned)
    }
}

impl<O: fmt::Debug, R: fmt::Debug> fmt::Debug for Call<O, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.response {
            Some(r) => write!(
                f,
                "[{}..{}] {:?} at t in [{}, {}] -> {:?}",
                self.invoked, r.returned, self.op, self.before, r.after, r.result
            ),
            None => write!(f, "[{}..] {:?} at t >= {} (no response)", self.invoked, self.op, self.before),
        }
    }
}

/// The calls of one thread, in program order.
#[derive(Debug, Clone)]
pub struct Lane<O, R> {
    /// A name for messages ("thread 1").
    pub name: String,
    /// The calls.
    pub calls: Vec<Call<O, R>>,
}

impl<O, R> Lane<O, R> {
    /// A lane named `name`.
    pub fn new(name: impl Into<String>, calls: Vec<Call<O, R>>) -> Self {
        Lane { name: name.into(), calls }
    }
}

/// A concurrent history of calls on one object.
#[derive(Clone)]
pub struct History<O, R> {
    /// One lane per thread.
    pub lanes: Vec<Lane<O, R>>,
    /// Every value the clock held while the history was recorded (sorted, no duplicates).
    pub clock_values: Vec<u64>,
}

impl<O, R> History<O, R> {
    /// A history of `lanes`, on a clock that held `clock_values` (sorted here).
    pub fn new(lanes: Vec<Lane<O, R>>, mut clock_values: Vec<u64>) -> Self {
        clock_values.sort_unstable();
        clock_values.dedup();
        History { lanes, clock_values }
    }

    /// How many calls.
    pub fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.calls.len()).sum()
    }

    /// Whether it has no call.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The calls whose op `keep` selects, lane by lane (a per-key sub-history: linearizability
    /// is local, so a keyed table is linearizable when each key's calls are).
    pub fn project(&self, keep: impl Fn(&O) -> bool) -> Self
    where
        O: Clone,
        R: Clone,
    {
        self.filter_map(|c| keep(&c.op).then(|| c.clone()))
    }

    /// The history as it stood at global event `cut`: calls invoked before it, and of those
    /// the responses given before it.
    pub fn prefix(&self, cut: u64) -> Self
    where
        O: Clone,
        R: Clone,
    {
        self.filter_map(|c| {
            (c.invoked < cut)
                .then(|| Call { response: c.response.clone().filter(|r| r.returned < cut), ..c.clone() })
        })
    }

    /// Each lane's calls through `f`.
    fn filter_map(&self, f: impl Fn(&Call<O, R>) -> Option<Call<O, R>>) -> Self {
        let lanes =
            self.lanes.iter().map(|l| Lane::new(l.name.clone(), l.calls.iter().filter_map(&f).collect()));
        History { lanes: lanes.collect(), clock_values: self.clock_values.clone() }
    }

    fn end(&self) -> u64 {
        let last = |c: &Call<O, R>| c.response.as_ref().map_or(c.invoked, |r| r.returned);
        self.lanes.iter().flat_map(|l| &l.calls).map(|c| last(c) + 1).max().unwrap_or(0)
    }
}

impl<O: fmt::Debug, R: fmt::Debug> fmt::Debug for History<O, R> {
    /// Every call in the order of invocation, with its lane.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut calls: Vec<(&str, &Call<O, R>)> =
            self.lanes.iter().flat_map(|l| l.calls.iter().map(move |c| (l.name.as_str(), c))).collect();
        calls.sort_by_key(|(_, c)| c.invoked);
        writeln!(f, "clock values {:?}", self.clock_values)?;
        for (lane, call) in calls {
            writeln!(f, "  {lane}: {call:?}")?;
        }
        Ok(())
    }
}

/// One step of a found order: which lane's call, at which time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Index of the lane.
    pub lane: usize,
    /// Index of the call in its lane.
    pub call: usize,
    /// The clock value the specification was given.
    pub now: u64,
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This order reproduces every response (calls without one may be missing from it).
    Linearizable(Vec<Step>),
    /// No order does.
    Violation,
    /// The search visited [`MAX_VISITS`] states without an answer.
    GaveUp,
}

/// The most states one search visits before it gives up.
pub const MAX_VISITS: usize = 2_000_000;

/// Searches for an order of `history`'s calls that respects real time (a call that returned
/// before another was invoked comes first) and each lane's program order, gives each call a
/// clock value within its readings, and for which `spec`, started from `initial`, returns
/// every recorded result and ends in a state `accept` takes.
pub fn check<S: Spec>(
    spec: &S,
    initial: S::State,
    history: &History<S::Op, S::Output>,
    accept: impl Fn(&S::State) -> bool,
) -> Verdict {
    let mut search =
        Search { spec, history, accept: &accept, order: Vec::new(), seen: HashSet::new(), visits: 0 };
    let mut next = vec![0u32; history.lanes.len()];
    match search.dfs(&mut next, initial, None) {
        Some(true) => Verdict::Linearizable(search.order),
        Some(false) => Verdict::Violation,
        None => Verdict::GaveUp,
    }
}

/// For a history [`check`] rejects: its shortest prefix ([`History::prefix`]) that is rejected
/// too, the smallest history that shows the violation (linearizability is prefix-closed, so the
/// prefixes' verdicts change once, found by bisection). `None` when `history` is linearizable,
/// or a search gave up.
pub fn minimal_violation<S: Spec>(
    spec: &S,
    initial: S::State,
    history: &History<S::Op, S::Output>,
    accept: impl Fn(&S::State) -> bool,
) -> Option<History<S::Op, S::Output>>
where
    S::Op: Clone,
    S::Output: Clone,
{
    // The final state is only known for the whole history.
    if check(spec, initial.clone(), history, &accept) != Verdict::Violation {
        return None;
    }
    let end = history.end();
    let fails = |cut: u64| check(spec, initial.clone(), &history.prefix(cut), |_| true) == Verdict::Violation;
    if !fails(end) {
        // Only the final state is wrong: the whole history is the smallest.
        return Some(history.clone());
    }
    let (mut lo, mut hi) = (0, end);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if fails(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(history.prefix(hi))
}

/// Like [`check`], but panics when no order exists, with `what`, the shortest violating prefix
/// and the whole history: the message starts with "not linearizable", which should-fail tests
/// expect.
pub fn assert_linearizable<S: Spec>(
    what: &str,
    spec: &S,
    initial: S::State,
    history: &History<S::Op, S::Output>,
    accept: impl Fn(&S::State) -> bool,
) -> Vec<Step>
where
    S::Op: Clone,
    S::Output: Clone,
{
    match check(spec, initial.clone(), history, &accept) {
        Verdict::Linearizable(order) => order,
        Verdict::GaveUp => {
            panic!("{what}: the linearizability search gave up after {MAX_VISITS} states on:\n{history:?}")
        }
        Verdict::Violation => {
            let minimal =
                minimal_violation(spec, initial, history, &accept).unwrap_or_else(|| history.clone());
            panic!(
                "not linearizable against {what}: no sequential order of these calls reproduces them \
                 (and the final state).\nShortest violating prefix:\n{minimal:?}\nWhole history:\n{history:?}"
            )
        }
    }
}

struct Search<'a, S: Spec, F> {
    spec: &'a S,
    history: &'a History<S::Op, S::Output>,
    accept: &'a F,
    order: Vec<Step>,
    seen: HashSet<(Vec<u32>, S::State, Option<u64>)>,
    visits: usize,
}

impl<S: Spec, F: Fn(&S::State) -> bool> Search<'_, S, F> {
    /// `Some(found)`, or `None` when out of visits.
    fn dfs(&mut self, next: &mut [u32], state: S::State, last_time: Option<u64>) -> Option<bool> {
        let lanes = &self.history.lanes;
        let open = |lane: usize, next: &[u32]| lanes[lane].calls.get(next[lane] as usize);
        // Done when every call left has no response (it may never have taken effect).
        if (0..lanes.len()).all(|l| open(l, next).is_none_or(|c| c.response.is_none())) {
            return Some((self.accept)(&state));
        }
        let monotone = self.spec.needs_monotone_time();
        if !self.seen.insert((next.to_vec(), state.clone(), last_time.filter(|_| monotone))) {
            return Some(false);
        }
        self.visits += 1;
        if self.visits > MAX_VISITS {
            return None;
        }
        // A call may go next only if no call still open returned before it was invoked.
        let horizon =
            (0..lanes.len()).filter_map(|l| open(l, next)).map(Call::returned).min().unwrap_or(u64::MAX);
        for lane in 0..lanes.len() {
            let Some(call) = open(lane, next) else { continue };
            if call.invoked >= horizon {
                continue;
            }
            let after = call.response.as_ref().map_or(u64::MAX, |r| r.after);
            let values = &self.history.clock_values;
            let from = values.partition_point(|&t| t < call.before);
            for &now in values[from..].iter().take_while(|&&t| t <= after) {
                if monotone && last_time.is_some_and(|last| now < last) {
                    continue;
                }
                for (output, after_call) in self.spec.outcomes(&state, now, &call.op) {
                    if call.response.as_ref().is_some_and(|r| r.result != output) {
                        continue;
                    }
                    next[lane] += 1;
                    self.order.push(Step { lane, call: next[lane] as usize - 1, now });
                    let found = self.dfs(next, after_call, Some(last_time.map_or(now, |l| l.max(now))));
                    if found != Some(false) {
                        return found;
                    }
                    self.order.pop();
                    next[lane] -= 1;
                }
            }
        }
        Some(false)
    }
}
