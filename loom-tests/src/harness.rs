//! The scenario runner shared by every algorithm model.
//!
//! A [`Plan`] is a sequential prelude on the main thread (checks and clock advances), 2-3
//! concurrent threads each making one or two `check_n` calls, optionally one more thread
//! advancing the clock while they run, then a final peek on the main thread. In every execution
//! loom explores, [`check_plan`] then asserts:
//! 1. **bound**: the units admitted never exceed what the algorithm's model allows over the
//!    elapsed time ([`LoomAlgorithm::max_admitted`]);
//! 2. **linearizable, nothing lost**: some order of the calls (each thread's in program order,
//!    each at a clock value it could have read) run through the algorithm's exact sequential
//!    specification gives every recorded decision field for field and ends in the very state the
//!    cell holds;
//! 3. **the reference model agrees**: when the clock does not move during the concurrent part,
//!    the same holds against kova's independent reference model.

use std::fmt;

use kova::model::{BucketModel, FixedWindowModel, SlidingCounterModel, SlidingLogModel};
use kova::{
    Algorithm, CheckError, Clock, Decision, FixedWindow, Gcra, ManualClock, Quota, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket, WordAlgorithm,
};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

use crate::linearize::{assert_linearizable, Call, Checked, Cost, Lane, Spec};
use crate::specs::{LogSpec, Reference, ReferenceSpec, WordSpec};

/// Preemptions explored when `LOOM_MAX_PREEMPTIONS` is not set (run.sh sets it explicitly).
pub const DEFAULT_PREEMPTIONS: usize = 2;

/// The least `max_branches` a model gets (loom's default is 1,000; `LOOM_MAX_BRANCHES` may raise it).
pub const MIN_MAX_BRANCHES: usize = 10_000;

/// Runs `f` under loom, exploring every interleaving up to the preemption bound
/// (`LOOM_MAX_PREEMPTIONS`, else [`DEFAULT_PREEMPTIONS`]).
/// Prints the number of executions explored to stderr (`--nocapture` shows it).
pub fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    model_with_cap(None, f);
}

/// Runs a should-fail model: `run` must panic (loom found the interleaving), with a message that
/// contains `expected`, the model's own assertion (not another failure). `what` names the
/// defect, for the message when loom finds nothing. Prints what loom caught.
pub fn expect_caught(run: impl FnOnce(), expected: &str, what: &str) {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let Err(payload) = catch_unwind(AssertUnwindSafe(run)) else {
        panic!("loom explored every interleaving and found no {what}");
    };
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains(expected), "loom failed for another reason: {message}");
    eprintln!("loom caught it: {message}");
}

/// [`model`], with the preemption bound lowered to `cap` when `LOOM_MAX_PREEMPTIONS` (or the
/// default) is higher: for the few models too big to explore at the suite's bound.
pub fn model_with_cap<F: Fn() + Sync + Send + 'static>(cap: Option<usize>, f: F) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut builder = loom::model::Builder::new();
    let bound = builder.preemption_bound.unwrap_or(DEFAULT_PREEMPTIONS);
    builder.preemption_bound = Some(cap.map_or(bound, |cap| bound.min(cap)));
    // Loom counts every atomic access of an execution as a branch (default limit 1,000, meant to
    // catch spin loops); the table models run the table's epoch on loom too, and the
    // index-growth model's prelude alone fills a table with six keys.
    builder.max_branches = builder.max_branches.max(MIN_MAX_BRANCHES);
    let executions = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&executions);
    builder.check(move || {
        // Relaxed: a statistic, read after the model returned.
        counter.fetch_add(1, Ordering::Relaxed);
        f();
    });
    eprintln!(
        "loom: {} executions (preemption bound {:?})",
        executions.load(Ordering::Relaxed),
        builder.preemption_bound
    );
}

/// How a call reaches the cell: the real `check_cell`, or a deliberately racy variant from
/// `kova::loom_racy`.
pub type CheckFn<A> = fn(&A, &<A as Algorithm>::Cell, &ManualClock, u64) -> Result<Decision, CheckError>;

/// The real thing: `Algorithm::check_cell`, the code `RateLimiter::check_n` runs.
pub fn real_check<A: Algorithm>(
    algorithm: &A,
    cell: &A::Cell,
    clock: &ManualClock,
    cost: u64,
) -> Result<Decision, CheckError> {
    algorithm.check_cell(cell, clock, cost)
}

/// What the harness needs to know about an algorithm to check it.
pub trait LoomAlgorithm: Algorithm + Copy + fmt::Debug {
    /// The exact sequential specification (tolerates stale clock readings).
    type Exact: Spec<State = Self::ExactState, Op = Cost, Output = Checked>;
    /// Its state.
    type ExactState: Clone + fmt::Debug + PartialEq;

    /// The exact specification and its fresh state.
    fn exact(&self) -> (Self::Exact, Self::ExactState);

    /// The exact specification's state as read from a cell, where the cell holds it whole.
    fn cell_state(&self, cell: &Self::Cell) -> Option<Self::ExactState>;

    /// The reference model (fresh), matched when the clock is still during the concurrent part.
    fn reference(&self) -> Reference;

    /// The most units the algorithm's model admits between time 0 and `t_end`.
    fn max_admitted(&self, t_end: u64) -> u64;
}

fn word_of(cell: &AtomicU64) -> u64 {
    // SeqCst: read after every thread was joined; any ordering would do.
    cell.load(Ordering::SeqCst)
}

macro_rules! word_algorithm {
    ($ty:ty, |$a:ident| $reference:expr, |$b:ident, $t:ident| $bound:expr) => {
        impl LoomAlgorithm for $ty {
            type Exact = WordSpec<$ty>;
            type ExactState = u64;

            fn exact(&self) -> (WordSpec<$ty>, u64) {
                (WordSpec(*self), self.fresh_word())
            }

            fn cell_state(&self, cell: &AtomicU64) -> Option<u64> {
                Some(word_of(cell))
            }

            fn reference(&self) -> Reference {
                let $a = self;
                $reference
            }

            fn max_admitted(&self, $t: u64) -> u64 {
                let $b = <Self as WordAlgorithm>::quota(self);
                $bound
            }
        }
    };
}

/// Bucket bound: the burst, plus one unit per emission interval elapsed.
fn bucket_bound(quota: Quota, t_end: u64) -> u64 {
    quota.burst() + t_end / quota.emission_interval_nanos()
}

/// Window bound: the limit in each aligned window the run touched.
fn window_bound(quota: Quota, t_end: u64) -> u64 {
    quota.limit() * (t_end / quota.period_nanos() + 1)
}

word_algorithm!(
    Gcra,
    |a| Reference::Bucket(BucketModel::new(a.interval_nanos(), WordAlgorithm::capacity(a))),
    |q, t| bucket_bound(q, t)
);
word_algorithm!(
    TokenBucket,
    |a| Reference::Bucket(BucketModel::with_quantum(
        a.interval_nanos(),
        WordAlgorithm::capacity(a),
        1 << a.shift(),
    )),
    |q, t| bucket_bound(q, t)
);
word_algorithm!(
    FixedWindow,
    |a| {
        let q = WordAlgorithm::quota(a);
        Reference::Fixed(FixedWindowModel::new(q.limit(), q.period_nanos()))
    },
    |q, t| window_bound(q, t)
);
word_algorithm!(
    SlidingWindowCounter,
    |a| {
        let q = WordAlgorithm::quota(a);
        Reference::Counter(SlidingCounterModel::new(q.limit(), q.period_nanos()))
    },
    |q, t| window_bound(q, t)
);

impl LoomAlgorithm for SlidingWindowLog {
    type Exact = LogSpec;
    type ExactState = Vec<u64>;

    fn exact(&self) -> (LogSpec, Vec<u64>) {
        let q = Algorithm::quota(self);
        (LogSpec { limit: q.limit(), period: q.period_nanos() }, Vec::new())
    }

    fn cell_state(&self, _cell: &kova::cell::LogCell) -> Option<Vec<u64>> {
        // The ring's slots are private; the final peek pins the state instead.
        None
    }

    fn reference(&self) -> Reference {
        let q = Algorithm::quota(self);
        Reference::Log(SlidingLogModel::new(q.limit(), q.period_nanos()))
    }

    fn max_admitted(&self, t_end: u64) -> u64 {
        window_bound(Algorithm::quota(self), t_end)
    }
}

/// A step of the sequential prelude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pre {
    /// `check_n(cost)` on the main thread.
    Check(u64),
    /// Move the clock forward by this many nanoseconds.
    Advance(u64),
}

/// One scenario.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The quota the algorithm is built for.
    pub quota: Quota,
    /// Sequential steps on the main thread before the threads start.
    pub prelude: Vec<Pre>,
    /// The costs each concurrent thread checks, in order (2-3 threads).
    pub threads: Vec<Vec<u64>>,
    /// Advances made by one more thread while the others run (none: the clock is still).
    pub advancer: Vec<u64>,
}

/// A call of the direct-limiter models.
pub type CheckCall = Call<Cost, Checked>;

fn record<A: Algorithm>(
    check: CheckFn<A>,
    algorithm: &A,
    cell: &A::Cell,
    clock: &ManualClock,
    cost: u64,
) -> CheckCall {
    let before = clock.now_nanos();
    let result = Checked(check(algorithm, cell, clock, cost));
    let after = clock.now_nanos();
    Call { op: Cost(cost), before, after, result }
}

/// Runs `plan` under loom with calls made through `check`, asserting the bound, linearizability
/// against the exact specification (with the final state), and agreement with the reference
/// model when the clock is still during the concurrent part. Panics (failing the loom model) on
/// the first execution that breaks one: "admitted ... over the bound" or "not linearizable".
pub fn check_plan<A: LoomAlgorithm>(plan: Plan, check: CheckFn<A>) {
    assert!((2..=3).contains(&plan.threads.len()), "2-3 threads per model");
    model(move || run_once::<A>(&plan, check, Checks::All));
}

/// Like [`check_plan`], asserting only the bound (1): safety, never over-admitting, for code
/// whose decisions are known not to be linearizable yet.
pub fn check_plan_bound_only<A: LoomAlgorithm>(plan: Plan, check: CheckFn<A>) {
    assert!((2..=3).contains(&plan.threads.len()), "2-3 threads per model");
    model(move || run_once::<A>(&plan, check, Checks::BoundOnly));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checks {
    All,
    BoundOnly,
}

fn run_once<A: LoomAlgorithm>(plan: &Plan, check: CheckFn<A>, checks: Checks) {
    let algorithm = A::from_quota(plan.quota).expect("the plan's quota suits the algorithm");
    let cell = Arc::new(algorithm.new_cell());
    let clock = ManualClock::new();
    let mut clock_values = vec![clock.now_nanos()];

    let mut prelude = Vec::new();
    for step in &plan.prelude {
        match *step {
            Pre::Advance(nanos) => {
                clock.advance_nanos(nanos);
                clock_values.push(clock.now_nanos());
            }
            Pre::Check(cost) => prelude.push(record(check, &algorithm, &cell, &clock, cost)),
        }
    }
    // The advancer is the only thread moving the clock meanwhile, so the values it passes
    // through are known in advance.
    let mut t = clock.now_nanos();
    for &nanos in &plan.advancer {
        t = t.saturating_add(nanos);
        clock_values.push(t);
    }

    let workers: Vec<_> = plan
        .threads
        .iter()
        .map(|costs| {
            let (costs, cell, clock) = (costs.clone(), Arc::clone(&cell), clock.clone());
            loom::thread::spawn(move || {
                costs.iter().map(|&cost| record(check, &algorithm, &cell, &clock, cost)).collect::<Vec<_>>()
            })
        })
        .collect();
    let advancer = (!plan.advancer.is_empty()).then(|| {
        let (advances, clock) = (plan.advancer.clone(), clock.clone());
        loom::thread::spawn(move || advances.iter().for_each(|&nanos| clock.advance_nanos(nanos)))
    });
    let mut lanes = vec![Lane { name: "prelude".into(), phase: 0, calls: prelude }];
    for (i, worker) in workers.into_iter().enumerate() {
        lanes.push(Lane { name: format!("thread {}", i + 1), phase: 1, calls: worker.join().unwrap() });
    }
    if let Some(advancer) = advancer {
        advancer.join().unwrap();
    }
    let peek = record(check, &algorithm, &cell, &clock, 0);
    lanes.push(Lane { name: "final peek".into(), phase: 2, calls: vec![peek] });

    // 1. The bound over the whole run.
    let admitted: u64 = lanes.iter().flat_map(|l| &l.calls).map(|c| c.result.admitted(c.op.0)).sum();
    let t_end = clock.now_nanos();
    let bound = algorithm.max_admitted(t_end);
    assert!(
        admitted <= bound,
        "{} admitted {admitted} units by t={t_end}, over the bound of {bound}:\n{lanes:#?}",
        algorithm.name()
    );

    if checks == Checks::BoundOnly {
        return;
    }

    // 2. Linearizable against the exact specification, ending in the cell's state.
    let final_state = algorithm.cell_state(&cell);
    let (exact, fresh) = algorithm.exact();
    assert_linearizable(algorithm.name(), &exact, fresh, &lanes, &clock_values, |state| match &final_state {
        Some(f) => f == state,
        None => true,
    });

    // 3. The independent reference model, where its time never has to run backwards.
    if plan.advancer.is_empty() {
        let spec = ReferenceSpec { capacity: algorithm.capacity() };
        assert_linearizable(
            "its reference model",
            &spec,
            algorithm.reference(),
            &lanes,
            &clock_values,
            |_| true,
        );
    }
}
