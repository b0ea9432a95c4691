//! Random concurrent histories of composites, checked for linearizability
//! (`kova::model::lincheck`), as `tests/linearizable.rs` does for one limit:
//! - `Limits` of one or two limits (one compare-and-swap over both words) against the sequential
//!   composite (`model::lincheck::composite::Composite`): all or nothing, exactly;
//! - `KeyedLimits` of two limits (one compare-and-swap over the key's cell) the same way, on one
//!   key;
//! - `Limits` and `KeyedLimits` of three limits (check then refund) limit by limit (`OneLimit`):
//!   each limit linearizable to its own word, with a denied check's steps on it (not reached,
//!   denied, or charged and given back; then its answer).
//!
//! `KOVA_LINCHECK_HISTORIES` and `KOVA_LINCHECK_SEED` as in `tests/linearizable.rs`, but each of
//! the 20 subjects runs a quarter of the histories ([`SHARE`]), to keep the default run short.

use std::time::Instant;

use kova::limits::{KeyedLimits, Limits};
use kova::model::lincheck::composite::{Composite, LimitStep, LimitsOp, LimitsOutput, OneLimit};
use kova::model::lincheck::word_api::{Op, Output, WordApi};
use kova::model::lincheck::{check, minimal_violation, Call, History, Lane, Spec, Verdict};
use kova::{FixedWindow, Gcra, ManualClock, Quota, SlidingWindowCounter, TokenBucket, WordAlgorithm};

#[path = "support/lincheck_harness.rs"]
mod harness;

use harness::{seeds, Step};

/// Each subject runs every `SHARE`th seed.
const SHARE: usize = 4;

/// A call of a plan: an operation on a key (ignored by a direct composite).
type KeyOp = (u64, LimitsOp);

fn plan(rng: &mut fastrand::Rng, keys: u64, period: u64, capacity: u64) -> Vec<Step<KeyOp>> {
    (0..rng.usize(3..=7))
        .map(|_| {
            let op = match rng.u32(0..100) {
                0..=54 => LimitsOp::Check(rng.u64(1..=capacity.min(3))),
                55..=69 => LimitsOp::Peek,
                70..=84 => LimitsOp::Refund(rng.u64(1..=2)),
                _ => return Step::Advance(rng.u64(1..=period / 3)),
            };
            Step::Call((rng.u64(0..keys), op))
        })
        .collect()
}

/// `limits` quotas of a short and a long period, small enough that checks are denied.
fn quotas<W: WordAlgorithm>(rng: &mut fastrand::Rng, limits: usize) -> Vec<Quota> {
    (0..limits)
        .map(|i| {
            let limit = rng.u64(2..=5);
            let quota = if i % 2 == 0 { Quota::per_second(limit) } else { Quota::per_minute(limit + 2) };
            let quota = quota.expect("a valid quota");
            if W::NAME == "gcra" || W::NAME == "token_bucket" {
                quota.with_burst(rng.u64(1..=limit)).expect("valid burst")
            } else {
                quota
            }
        })
        .collect()
}

/// One composite's histories: `build` makes the subject (its `call`), `verify` checks one.
fn run<W: WordAlgorithm, S: Sync>(
    what: &str,
    salt: u64,
    limits: usize,
    keys: u64,
    build: impl Fn(&[Quota], ManualClock) -> S,
    call: impl Fn(&S, KeyOp) -> LimitsOutput + Sync,
    verify: impl Fn(u64, &[W], &History<KeyOp, LimitsOutput>),
) {
    let started = Instant::now();
    let seeds: Vec<u64> = seeds(salt).into_iter().step_by(SHARE).collect();
    for &seed in &seeds {
        let mut rng = fastrand::Rng::with_seed(seed);
        let quotas = quotas::<W>(&mut rng, limits);
        let algorithms: Vec<W> = quotas.iter().map(|&q| W::from_quota(q).expect("valid")).collect();
        let capacity = algorithms.iter().map(WordAlgorithm::capacity).min().expect("limits");
        let period = quotas[0].period_nanos();
        let plans: Vec<_> = (0..rng.u32(2..=4)).map(|_| plan(&mut rng, keys, period, capacity)).collect();
        let clock = ManualClock::starting_at(rng.u64(0..period));
        let subject = build(&quotas, clock.clone());
        let finals: Vec<_> = (0..keys).map(|key| (key, LimitsOp::Peek)).collect();
        let history = harness::record(&clock, &plans, &finals, |&op, _: &mut ()| call(&subject, op));
        verify(seed, &algorithms, &history);
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{what}: {} histories in {secs:.2} s ({:.0}/s)", seeds.len(), seeds.len() as f64 / secs);
}

fn fail<S: Spec>(what: &str, seed: u64, spec: &S, initial: S::State, history: &History<S::Op, S::Output>) -> !
where
    S::Op: Clone,
    S::Output: Clone,
{
    let minimal = minimal_violation(spec, initial, history, |_| true).unwrap_or_else(|| history.clone());
    panic!(
        "{what}: not linearizable, seed {seed} (KOVA_LINCHECK_SEED={seed} replays the plan).\nShortest violating \
         prefix:\n{minimal:?}\nWhole history:\n{history:?}"
    );
}

/// The specification of a direct composite's calls (the key ignored).
struct Direct<W>(Composite<W>);

impl<W: WordAlgorithm> Spec for Direct<W> {
    type State = Vec<u64>;
    type Op = KeyOp;
    type Output = LimitsOutput;

    fn call(&self, words: &mut Vec<u64>, now: u64, op: &KeyOp) -> LimitsOutput {
        self.0.call(words, now, &op.1)
    }
}

/// Checks a history against the sequential composite.
fn exactly<W: WordAlgorithm + Clone>(
    what: &str,
    seed: u64,
    algorithms: &[W],
    history: &History<KeyOp, LimitsOutput>,
) {
    let spec = Direct(Composite { algorithms: algorithms.to_vec() });
    match check(&spec, spec.0.fresh(), history, |_| true) {
        Verdict::Linearizable(_) => {}
        Verdict::GaveUp => panic!("{what}, seed {seed}: the search gave up on\n{history:?}"),
        Verdict::Violation => fail(what, seed, &spec, spec.0.fresh(), history),
    }
}

/// The steps a composite call of `history` made on limit `limit` of `key`: a lane per thread,
/// each call split into its steps there, all within the call's interval.
fn on_limit(history: &History<KeyOp, LimitsOutput>, key: u64, limit: usize) -> History<LimitStep, Output> {
    let lanes = history.lanes.iter().enumerate().map(|(lane, l)| {
        let lane_id = u8::try_from(lane).expect("few threads");
        let calls = l.calls.iter().filter(|c| c.op.0 == key).flat_map(|c| {
            let response = c.response.as_ref().expect("a whole history");
            let step = |op, result| {
                Call::completed(op, c.invoked, c.before, response.returned, response.after, result)
            };
            match (c.op.1, response.result) {
                (LimitsOp::Refund(cost), _) => vec![step(LimitStep::Plain(Op::Refund(cost)), Output::Done)],
                (LimitsOp::Peek, Some(Ok(answer))) => {
                    vec![step(
                        LimitStep::Plain(Op::Peek),
                        Output::Decided(Ok(answer.limit_decisions()[limit])),
                    )]
                }
                (LimitsOp::Check(cost), Some(Ok(answer))) if answer.is_allowed() => vec![step(
                    LimitStep::Plain(Op::Check(cost)),
                    Output::Decided(Ok(answer.limit_decisions()[limit])),
                )],
                (LimitsOp::Check(cost), Some(Ok(answer))) => vec![
                    // What the try did is not seen: no response to compare.
                    Call { response: None, ..step(LimitStep::Try(cost, lane_id), Output::Done) },
                    step(LimitStep::Undo(cost, lane_id), Output::Done),
                    step(
                        LimitStep::Answer(cost, lane_id),
                        Output::Decided(Ok(answer.limit_decisions()[limit])),
                    ),
                ],
                // An error takes nothing from any limit (the plans stay within the capacity).
                (op, result) => panic!("{op:?} answered {result:?}"),
            }
        });
        Lane::new(l.name.clone(), calls.collect())
    });
    History { lanes: lanes.collect(), clock_values: history.clock_values.clone() }
}

/// Checks every key's history limit by limit.
fn limit_by_limit<W: WordAlgorithm + Clone>(
    what: &str,
    seed: u64,
    algorithms: &[W],
    history: &History<KeyOp, LimitsOutput>,
    keys: u64,
) {
    for key in 0..keys {
        for (limit, algorithm) in algorithms.iter().enumerate() {
            let ours = on_limit(history, key, limit);
            // A composite's refund answers nothing, as a table's does.
            let spec = OneLimit(WordApi::keyed(algorithm.clone()));
            let what = format!("{what}, key {key}, limit {limit}");
            match check(&spec, spec.fresh(), &ours, |_| true) {
                Verdict::Linearizable(_) => {}
                Verdict::GaveUp => panic!("{what}, seed {seed}: the search gave up on\n{ours:?}"),
                Verdict::Violation => fail(&what, seed, &spec, spec.fresh(), &ours),
            }
        }
    }
}

fn direct<W: WordAlgorithm + Clone>(salt: u64, limits: usize) {
    let what = format!("Limits<{}> of {limits}", W::NAME);
    run::<W, _>(
        &what,
        salt ^ (limits as u64) << 40,
        limits,
        1,
        |quotas, clock| Limits::<W, _>::with_clock(quotas.iter().copied(), clock).expect("valid limits"),
        |limits, (_, op)| match op {
            LimitsOp::Check(cost) => Some(limits.check_n(cost)),
            LimitsOp::Peek => Some(Ok(limits.peek())),
            LimitsOp::Refund(cost) => {
                limits.refund(cost);
                None
            }
        },
        |seed, algorithms, history| {
            if limits <= 2 {
                exactly(&what, seed, algorithms, history);
            } else {
                limit_by_limit(&what, seed, algorithms, history, 1);
            }
        },
    );
}

/// `KeyedLimits` keeps a key's limits in one cell: two limits are one compare-and-swap, checked
/// exactly (on one key, where the checks race); three are checked then refunded, limit by
/// limit (on two keys).
fn keyed<W: WordAlgorithm + Clone>(salt: u64, limits: usize) {
    let what = format!("KeyedLimits<{}> of {limits}", W::NAME);
    let keys = if limits <= 2 { 1 } else { 2 };
    run::<W, _>(
        &what,
        salt ^ (limits as u64) << 40,
        limits,
        keys,
        |quotas, clock| {
            KeyedLimits::<u64, W>::builder(quotas.iter().copied())
                .clock(clock)
                .shards(2)
                .build()
                .expect("valid limits")
        },
        |limits, (key, op)| match op {
            LimitsOp::Check(cost) => Some(limits.check_n(&key, cost)),
            LimitsOp::Peek => Some(Ok(limits.peek(&key))),
            LimitsOp::Refund(cost) => {
                limits.refund(&key, cost);
                None
            }
        },
        |seed, algorithms, history| {
            if limits <= 2 {
                exactly(&what, seed, algorithms, history);
            } else {
                limit_by_limit(&what, seed, algorithms, history, keys);
            }
        },
    );
}

fn every_composite<W: WordAlgorithm + Clone>(salt: u64) {
    for limits in 1..=3 {
        direct::<W>(salt, limits);
    }
    for limits in 2..=3 {
        keyed::<W>(salt, limits);
    }
}

#[test]
fn limits_gcra() {
    every_composite::<Gcra>(11);
}

#[test]
fn limits_token_bucket() {
    every_composite::<TokenBucket>(12);
}

#[test]
fn limits_fixed_window() {
    every_composite::<FixedWindow>(13);
}

#[test]
fn limits_sliding_window_counter() {
    every_composite::<SlidingWindowCounter>(14);
}

/// Histories of `limits` GCRA limits with 2-4 threads, each recorded on a real `Limits`.
fn gcra_histories(limits: usize, count: u64) -> Vec<(Vec<Gcra>, History<KeyOp, LimitsOutput>)> {
    (0..count)
        .map(|seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            let quotas = quotas::<Gcra>(&mut rng, limits);
            let algorithms: Vec<Gcra> = quotas.iter().map(|&q| Gcra::from_quota(q).unwrap()).collect();
            let plans: Vec<_> = (0..3).map(|_| plan(&mut rng, 1, quotas[0].period_nanos(), 1)).collect();
            let clock = ManualClock::new();
            let subject = Limits::<Gcra, _>::with_clock(quotas, clock.clone()).unwrap();
            let history =
                harness::record(&clock, &plans, &[(0, LimitsOp::Peek)], |&(_, op), _: &mut ()| match op {
                    LimitsOp::Check(cost) => Some(subject.check_n(cost)),
                    LimitsOp::Peek => Some(Ok(subject.peek())),
                    LimitsOp::Refund(cost) => {
                        subject.refund(cost);
                        None
                    }
                });
            (algorithms, history)
        })
        .collect()
}

/// The exact checker can fail: real histories of two limits, checked against a composite whose
/// denial still takes the cost from the limits that admitted it, are rejected; the true
/// composite accepts them.
#[test]
fn a_composite_whose_denial_takes_units_rejects_real_histories() {
    struct Greedy(Composite<Gcra>);
    impl Spec for Greedy {
        type State = Vec<u64>;
        type Op = KeyOp;
        type Output = LimitsOutput;
        fn call(&self, words: &mut Vec<u64>, now: u64, op: &KeyOp) -> LimitsOutput {
            let before = words.clone();
            let output = self.0.call(words, now, &op.1);
            if let (LimitsOp::Check(cost), Some(Ok(answer))) = (op.1, output) {
                if !answer.is_allowed() {
                    for (i, algorithm) in self.0.algorithms.iter().enumerate() {
                        let (decision, word) = algorithm.decide(before[i], now, cost);
                        if decision.is_allowed() {
                            words[i] = word;
                        }
                    }
                }
            }
            output
        }
    }
    let mut rejected = 0;
    for (algorithms, history) in gcra_histories(2, 40) {
        let truth = Direct(Composite { algorithms: algorithms.clone() });
        assert!(matches!(check(&truth, truth.0.fresh(), &history, |_| true), Verdict::Linearizable(_)));
        let greedy = Greedy(Composite { algorithms });
        if check(&greedy, greedy.0.fresh(), &history, |_| true) == Verdict::Violation {
            rejected += 1;
        }
    }
    // Only a history with a denial by one limit of two, and a later call, tells them apart.
    assert!(rejected >= 5, "only {rejected} of 40 histories rejected");
}

/// The limit-by-limit checker can fail: real histories of three limits, checked with a first
/// limit that a denied check always reaches (true of limit 0) but whose `Undo` gives nothing
/// back (a denial consuming quota), are rejected; the true specification accepts them.
#[test]
fn a_limit_whose_denial_keeps_units_rejects_real_histories() {
    struct Keeps(OneLimit<Gcra>);
    impl Spec for Keeps {
        type State = <OneLimit<Gcra> as Spec>::State;
        type Op = LimitStep;
        type Output = Output;
        fn call(&self, state: &mut Self::State, now: u64, op: &LimitStep) -> Output {
            self.0.call(state, now, op)
        }
        fn outcomes(&self, state: &Self::State, now: u64, op: &LimitStep) -> Vec<(Output, Self::State)> {
            match *op {
                // Reached: it took or denied, never "not reached".
                LimitStep::Try(..) => self.0.outcomes(state, now, op).split_off(1),
                LimitStep::Undo(..) => vec![(Output::Done, state.clone())],
                _ => self.0.outcomes(state, now, op),
            }
        }
    }
    let mut rejected = 0;
    // Threads interleave as the machine schedules them: few histories have a denied check
    // whose undo gives back units that a later call then needs, more so on a loaded machine,
    // so many histories are recorded for the few that tell the specifications apart.
    for (algorithms, history) in gcra_histories(3, 160) {
        let ours = on_limit(&history, 0, 0);
        let truth = OneLimit(WordApi::keyed(algorithms[0]));
        assert!(matches!(check(&truth, truth.fresh(), &ours, |_| true), Verdict::Linearizable(_)));
        let keeps = Keeps(OneLimit(WordApi::keyed(algorithms[0])));
        if check(&keeps, keeps.0.fresh(), &ours, |_| true) == Verdict::Violation {
            rejected += 1;
        }
    }
    assert!(rejected >= 5, "only {rejected} of 160 histories rejected");
}
