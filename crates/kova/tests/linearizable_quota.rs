//! Random concurrent histories of a `Keyed` table whose keys change quota while they are checked
//! (`set_quota` between two quotas, beside checks, peeks, refunds, settling and charges; door on
//! and off), checked for linearizability (`kova::model::lincheck`) against each key's
//! specification: `model::lincheck::word_api` under the key's current quota, and a quota change
//! that carries over what the key consumed (the units the old quota counts as used at that
//! instant, charged to a fresh state of the new one: `Keyed::set_quota`'s docs).
//! `KOVA_LINCHECK_HISTORIES` and `KOVA_LINCHECK_SEED` as in `tests/linearizable.rs`.

use std::time::Instant;

use kova::model::lincheck::word_api::{Op, Output, WordApi, WordState};
use kova::model::lincheck::{check, minimal_violation, History, Spec, Verdict};
use kova::reservation::Settlement;
use kova::{FixedWindow, Gcra, Keyed, ManualClock, Quota, SlidingWindowCounter, TokenBucket, WordAlgorithm};

#[path = "support/lincheck_harness.rs"]
mod harness;

use harness::{seeds, Step};

/// A call on a key: an operation of the word API, or a change to quota `0` or `1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum QuotaOp {
    Api(Op),
    SetQuota(usize),
}

/// One key's specification: the word under quota `.1`, of the two.
struct Requota<W>([W; 2]);

impl<W: WordAlgorithm + Clone> Spec for Requota<W> {
    type State = (WordState, usize);
    type Op = (u64, QuotaOp);
    type Output = Output;

    fn call(&self, state: &mut Self::State, now: u64, op: &(u64, QuotaOp)) -> Output {
        let (output, after) = self.outcomes(state, now, op).swap_remove(0);
        *state = after;
        output
    }

    fn outcomes(&self, state: &Self::State, now: u64, op: &(u64, QuotaOp)) -> Vec<(Output, Self::State)> {
        let (word, quota) = state;
        match op.1 {
            QuotaOp::Api(api) => {
                let mut after = word.clone();
                let output = WordApi::keyed(self.0[*quota].clone()).call(&mut after, now, &api);
                vec![(output, (after, *quota))]
            }
            // `false`: not held (or no line free of its grace period), nothing changed.
            QuotaOp::SetQuota(to) if to == *quota => {
                vec![(Output::Bool(true), state.clone()), (Output::Bool(false), state.clone())]
            }
            QuotaOp::SetQuota(to) => {
                let moved = WordApi::keyed(self.0[to].clone()).carried_over_from(&self.0[*quota], word, now);
                vec![(Output::Bool(true), (moved, to)), (Output::Bool(false), state.clone())]
            }
        }
    }
}

fn plan(rng: &mut fastrand::Rng, period: u64, capacity: u64) -> Vec<Step<(u64, QuotaOp)>> {
    (0..rng.usize(3..=7))
        .map(|_| {
            let op = match rng.u32(0..100) {
                0..=34 => Op::Check(rng.u64(1..=capacity.min(2))),
                35..=44 => Op::Peek,
                45..=54 => Op::Refund(rng.u64(1..=2)),
                55..=62 => {
                    let estimated = rng.u64(0..=2);
                    Op::Settle(estimated, rng.u64(0..=3))
                }
                63..=69 => Op::Charge(rng.u64(1..=2)),
                70..=87 => return Step::Call((rng.u64(0..2), QuotaOp::SetQuota(rng.usize(0..2)))),
                _ => return Step::Advance(rng.u64(1..=period / 3)),
            };
            Step::Call((rng.u64(0..2), QuotaOp::Api(op)))
        })
        .collect()
}

fn call<W: WordAlgorithm>(
    table: &Keyed<u64, W, ManualClock>,
    quotas: [Quota; 2],
    key: u64,
    op: QuotaOp,
) -> Output {
    match op {
        QuotaOp::SetQuota(to) => Output::Bool(table.set_quota(&key, quotas[to]).expect("a valid quota")),
        QuotaOp::Api(Op::Check(cost)) => Output::Decided(table.check_n(&key, cost)),
        QuotaOp::Api(Op::Peek) => Output::Decided(Ok(table.peek(&key))),
        QuotaOp::Api(Op::Refund(cost)) => {
            table.refund(&key, cost);
            Output::Done
        }
        QuotaOp::Api(Op::Settle(estimated, actual)) => {
            Output::Settled(Settlement { refunded: 0, ..table.settle(&key, estimated, actual) })
        }
        QuotaOp::Api(Op::Charge(cost)) => Output::Charged(table.charge(&key, cost)),
        QuotaOp::Api(other) => unreachable!("{other:?} is not planned here"),
    }
}

fn run<W: WordAlgorithm + Clone>(salt: u64, door: bool) {
    let what = format!("Keyed<{}> with quota changes, door {}", W::NAME, if door { "on" } else { "off" });
    let started = Instant::now();
    // A quarter of the histories: 8 subjects.
    let seeds: Vec<u64> = seeds(salt ^ u64::from(door) << 40).into_iter().step_by(4).collect();
    for &seed in &seeds {
        let mut rng = fastrand::Rng::with_seed(seed);
        let limit = rng.u64(2..=4);
        let quotas = [Quota::per_second(limit).unwrap(), Quota::per_second(limit + rng.u64(1..=3)).unwrap()];
        let algorithms = quotas.map(|q| W::from_quota(q).expect("a valid quota"));
        let period = quotas[0].period_nanos();
        let plans: Vec<_> = (0..rng.u32(2..=4)).map(|_| plan(&mut rng, period, limit)).collect();
        let clock = ManualClock::starting_at(rng.u64(0..period));
        let builder = Keyed::<u64, W>::builder(quotas[0]).clock(clock.clone()).shards(2);
        let table = if door { builder } else { builder.doorkeeper(0) }.build().expect("a valid quota");
        let finals: Vec<_> = (0..2).map(|key| (key, QuotaOp::Api(Op::Peek))).collect();
        let history: History<(u64, QuotaOp), Output> =
            harness::record(&clock, &plans, &finals, |&(key, op), _: &mut ()| call(&table, quotas, key, op));
        let spec = Requota(algorithms.clone());
        let fresh = (WordApi::keyed(algorithms[0].clone()).fresh(), 0);
        for key in 0..2 {
            let ours = history.project(|&(k, _)| k == key);
            match check(&spec, fresh.clone(), &ours, |_| true) {
                Verdict::Linearizable(_) => {}
                Verdict::GaveUp => panic!("{what}, seed {seed}, key {key}: the search gave up on\n{ours:?}"),
                Verdict::Violation => {
                    let minimal =
                        minimal_violation(&spec, fresh.clone(), &ours, |_| true).unwrap_or(ours.clone());
                    panic!(
                        "{what}: not linearizable, seed {seed} (KOVA_LINCHECK_SEED={seed} replays the plan), key \
                         {key}.\nShortest violating prefix:\n{minimal:?}\nThe key's whole history:\n{ours:?}"
                    );
                }
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{what}: {} histories in {secs:.2} s ({:.0}/s)", seeds.len(), seeds.len() as f64 / secs);
}

#[test]
fn quota_changes_gcra() {
    run::<Gcra>(31, true);
    run::<Gcra>(31, false);
}

#[test]
fn quota_changes_token_bucket() {
    run::<TokenBucket>(32, true);
    run::<TokenBucket>(32, false);
}

#[test]
fn quota_changes_fixed_window() {
    run::<FixedWindow>(33, true);
    run::<FixedWindow>(33, false);
}

#[test]
fn quota_changes_sliding_window_counter() {
    run::<SlidingWindowCounter>(34, true);
    run::<SlidingWindowCounter>(34, false);
}
