//! Random concurrent histories of boxed word cells, checked for linearizability
//! (`kova::model::lincheck`) as `tests/linearizable.rs` does for inline words: `AnyAlgorithm` of
//! the four word kinds keeps each key's cell on the heap, and a keyed table hides the line (a
//! marker swapped in, then a `SeqCst` fence) rather than freezing the word before it looks at
//! the cell; a check that wrote the cell looks at the line again (`keyed/line/cell.rs`). The
//! kinds decide as the word algorithms do, so each key's calls are checked exactly against the
//! word algorithm's own pure functions (`model::lincheck::word_api::WordApi`), built from the
//! same quota.
//!
//! Subjects:
//! - `Keyed<u64, AnyAlgorithm>`, door on and off, two mixes: checks, peeks, refunds, resets,
//!   removals, settlements and charges on two keys; and a churn of four keys in one shard of two
//!   (`TableFullPolicy::DenyNew`) with `sweep_idle` calls, so idle keys are reclaimed (by the
//!   sweeps, and by inserts into the full shard that find one) and re-inserted while other
//!   threads check them.
//!   A key the table does not hold may get the full table's answer: a denial with a fallback,
//!   or nothing charged. The specification allows that only while the key's state could be one
//!   the table does not hold (fresh, or with the door on fresh charged the one unit the door
//!   admitted), and then changes nothing: so state lost by an eviction still shows in the key's later
//!   answers (`a_sweep_that_evicts_held_keys_is_rejected`).
//! - `RateLimiter<AnyAlgorithm>` (checks, peeks, refunds, resets: what it offers).
//!
//! `AnyAlgorithm` offers no reservations (they are `WordAlgorithm`'s), and its direct limiter
//! no settlements or charges: those calls are left out.
//!
//! `KOVA_LINCHECK_HISTORIES` and `KOVA_LINCHECK_SEED` as in `tests/linearizable.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use kova::keyed::TableFullPolicy;
use kova::model::lincheck::word_api::{Op, Output, WordApi, WordState};
use kova::model::lincheck::{check, minimal_violation, History, Spec, Verdict};
use kova::reservation::Settlement;
use kova::{
    AlgorithmKind, AnyAlgorithm, FixedWindow, Gcra, Keyed, ManualClock, Quota, RateLimiter,
    SlidingWindowCounter, TokenBucket, WordAlgorithm,
};

#[path = "support/lincheck_harness.rs"]
mod harness;

use harness::{seeds, Step};

/// A call of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// An operation on a key (a direct limiter ignores the key).
    On(u64, Op),
    /// `sweep_idle`: it reclaims only keys whose state is indistinguishable from fresh, so it is
    /// in no key's specification (and no key's sub-history).
    Sweep,
}

/// What a call returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    Api(Output),
    /// A check decided by the full table's policy, its fields not compared: its retry hint is
    /// the time until another key becomes idle.
    TableFull,
    /// What a sweep returned (it is in no key's sub-history).
    Swept,
}

/// What a plan may contain.
#[derive(Debug, Clone, Copy)]
struct Mix {
    keys: u64,
    /// Settlements and charges (a direct limiter of `AnyAlgorithm` has neither).
    charges: bool,
    /// One shard of two keys under `DenyNew`, and sweeps.
    churn: bool,
}

fn plan(rng: &mut fastrand::Rng, mix: Mix, period: u64, capacity: u64) -> Vec<Step<Call>> {
    (0..rng.usize(3..=7))
        .map(|_| {
            let op = match rng.u32(0..100) {
                0..=34 => Op::Check(rng.u64(1..=2)),
                35..=39 => Op::Check(rng.u64(0..=capacity.min(3))),
                40..=47 => Op::Peek,
                48..=55 => Op::Refund(rng.u64(1..=2)),
                56..=61 => Op::Reset,
                62..=69 if mix.charges => Op::Settle(rng.u64(0..=3), rng.u64(0..=4)),
                70..=75 if mix.charges => Op::Charge(rng.u64(1..=3)),
                76..=83 if mix.churn => return Step::Call(Call::Sweep),
                _ => return Step::Advance(rng.u64(1..=period / 3)),
            };
            Step::Call(Call::On(rng.u64(0..mix.keys), op))
        })
        .collect()
}

/// A table of `AnyAlgorithm`: its answer to `call`, a full table's decision normalised.
fn call_keyed(table: &Keyed<u64, AnyAlgorithm, ManualClock>, call: Call, churn: &Churn) -> Got {
    let Call::On(key, op) = call else {
        churn.swept.fetch_add(table.sweep_idle(), Ordering::Relaxed);
        return Got::Swept;
    };
    Got::Api(match op {
        Op::Check(cost) => match table.check_n(&key, cost) {
            Ok(decision) if decision.fallback().is_some() => {
                churn.full.fetch_add(1, Ordering::Relaxed);
                return Got::TableFull;
            }
            decided => Output::Decided(decided),
        },
        Op::Peek => Output::Decided(Ok(table.peek(&key))),
        Op::Refund(cost) => {
            // Whether the key was held: not compared (`WordApi::keyed`).
            table.refund(&key, cost);
            Output::Done
        }
        Op::Reset => {
            // A removal, every other key: both leave the key fresh.
            if key % 2 == 0 {
                table.reset(&key);
            } else {
                table.remove(&key);
            }
            Output::Done
        }
        // Whether a refund was made says whether the key was held: not compared.
        Op::Settle(estimated, actual) => {
            Output::Settled(Settlement { refunded: 0, ..table.settle(&key, estimated, actual) })
        }
        Op::Charge(cost) => Output::Charged(table.charge(&key, cost)),
        Op::Reserve { .. } | Op::Cancel(_) => panic!("AnyAlgorithm offers no reservations"),
    })
}

/// A direct limiter of `AnyAlgorithm`: its answer to `call`.
fn call_direct(limiter: &RateLimiter<AnyAlgorithm, ManualClock>, call: Call) -> Got {
    Got::Api(match call {
        Call::On(_, Op::Check(cost)) => Output::Decided(limiter.check_n(cost)),
        Call::On(_, Op::Peek) => Output::Decided(Ok(limiter.peek())),
        Call::On(_, Op::Refund(cost)) => Output::Bool(limiter.refund(cost)),
        Call::On(_, Op::Reset) => {
            limiter.reset();
            Output::Done
        }
        other => panic!("a direct limiter of AnyAlgorithm does not offer {other:?}"),
    })
}

/// One key's specification: the word algorithm's, and under a full table the table's answer
/// to a key it does not hold.
struct OneKey<W> {
    api: WordApi<W>,
    door: bool,
    full_table: bool,
}

impl<W: WordAlgorithm> OneKey<W> {
    /// Whether the key's state at `now` could be one the table does not hold: fresh, or fresh
    /// charged the unit the door admitted of the key's first check (the door keeps it while
    /// the table has no room for the key).
    fn maybe_not_held(&self, state: &WordState, now: u64) -> bool {
        let algorithm = &self.api.algorithm;
        algorithm.is_idle_word(state.word, now) || (self.door && algorithm.consumed(state.word, now) <= 1)
    }
}

impl<W: WordAlgorithm> Spec for OneKey<W> {
    type State = WordState;
    type Op = Call;
    type Output = Got;

    fn call(&self, state: &mut WordState, now: u64, call: &Call) -> Got {
        match call {
            Call::On(_, op) => Got::Api(self.api.call(state, now, op)),
            Call::Sweep => Got::Swept,
        }
    }

    fn outcomes(&self, state: &WordState, now: u64, call: &Call) -> Vec<(Got, WordState)> {
        let mut after = state.clone();
        let mut ways = vec![(self.call(&mut after, now, call), after)];
        if self.full_table && self.maybe_not_held(state, now) {
            // The table found no room to insert the key: nothing changes.
            let full = match *call {
                Call::On(_, Op::Check(cost)) if cost <= self.api.algorithm.capacity() => Some(Got::TableFull),
                Call::On(_, Op::Charge(_)) => Some(Got::Api(Output::Charged(0))),
                Call::On(_, Op::Settle(estimated, actual)) if actual > estimated => {
                    let uncharged = actual - estimated;
                    Some(Got::Api(Output::Settled(Settlement { uncharged, ..Settlement::default() })))
                }
                _ => None,
            };
            ways.extend(full.map(|got| (got, state.clone())));
        }
        ways
    }
}

/// Checks every key's sub-history; panics with the seed and the shortest violating prefix.
fn assert_history<W: WordAlgorithm>(
    what: &str,
    seed: u64,
    spec: &OneKey<W>,
    history: &History<Call, Got>,
    keys: u64,
) {
    for key in 0..keys {
        let ours = history.project(|call| matches!(call, Call::On(k, _) if *k == key));
        match check(spec, spec.api.fresh(), &ours, |_| true) {
            Verdict::Linearizable(_) => {}
            Verdict::GaveUp => panic!("{what}, seed {seed}, key {key}: the search gave up on\n{ours:?}"),
            Verdict::Violation => {
                let minimal =
                    minimal_violation(spec, spec.api.fresh(), &ours, |_| true).unwrap_or(ours.clone());
                panic!(
                    "{what}: not linearizable, seed {seed} (KOVA_LINCHECK_SEED={seed} replays the plan), key \
                     {key}.\nShortest violating prefix:\n{minimal:?}\nThe key's whole history:\n{ours:?}"
                );
            }
        }
    }
}

/// The quota of a seed: small limits, so that checks are denied; for the bucket kinds a burst
/// other than the rate, and for GCRA a debt to run into.
fn quota_for<W: WordAlgorithm>(rng: &mut fastrand::Rng) -> Quota {
    let quota = Quota::per_second(rng.u64(2..=5)).expect("a valid quota");
    match W::NAME {
        "gcra" => quota.with_burst(rng.u64(1..=4)).expect("valid burst").with_overdraft(rng.u64(0..=2)),
        "token_bucket" => quota.with_burst(rng.u64(1..=4)).expect("valid burst"),
        _ => quota,
    }
}

/// One history of seed `seed`: the subject `build` makes (from the algorithm and the clock)
/// called through `call`, and the specification of each of its keys. `None` for a quota the
/// algorithm cannot represent.
fn history_of<W: WordAlgorithm, S: Sync>(
    seed: u64,
    mix: Mix,
    door: bool,
    build: impl Fn(AnyAlgorithm, ManualClock) -> S,
    call: impl Fn(&S, Call) -> Got + Sync,
) -> Option<(OneKey<W>, History<Call, Got>)> {
    let kind: AlgorithmKind = W::NAME.parse().expect("a word algorithm's name is a kind");
    let mut rng = fastrand::Rng::with_seed(seed);
    let quota = quota_for::<W>(&mut rng);
    let (Ok(word), Ok(any)) = (W::from_quota(quota), AnyAlgorithm::new(kind, quota)) else { return None };
    let period = quota.period_nanos();
    let plans: Vec<_> = (0..rng.u32(2..=4)).map(|_| plan(&mut rng, mix, period, word.capacity())).collect();
    let clock = ManualClock::starting_at(rng.u64(0..period));
    let subject = build(any, clock.clone());
    let finals: Vec<_> = (0..mix.keys).map(|key| Call::On(key, Op::Peek)).collect();
    let history = harness::record(&clock, &plans, &finals, |&op, _: &mut ()| call(&subject, op));
    let api = if mix.keys > 1 { WordApi::keyed(word) } else { WordApi::direct(word) };
    Some((OneKey { api, door, full_table: mix.churn }, history))
}

/// Runs one subject's histories, checking each key against `W` of the same quota.
fn run<W: WordAlgorithm, S: Sync>(
    what: &str,
    salt: u64,
    mix: Mix,
    door: bool,
    build: impl Fn(AnyAlgorithm, ManualClock) -> S,
    call: impl Fn(&S, Call) -> Got + Sync,
) {
    let started = Instant::now();
    let seeds = seeds(salt);
    for &seed in &seeds {
        if let Some((spec, history)) = history_of::<W, S>(seed, mix, door, &build, &call) {
            assert_history(what, seed, &spec, &history, mix.keys);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{what}: {} histories in {secs:.2} s ({:.0}/s)", seeds.len(), seeds.len() as f64 / secs);
}

/// The two keyed mixes.
const KEYED: Mix = Mix { keys: 2, charges: true, churn: false };
const CHURN: Mix = Mix { keys: 4, charges: true, churn: true };
const DIRECT: Mix = Mix { keys: 1, charges: false, churn: false };

fn table(
    any: AnyAlgorithm,
    clock: ManualClock,
    mix: Mix,
    door: bool,
) -> Keyed<u64, AnyAlgorithm, ManualClock> {
    let builder = Keyed::<u64, AnyAlgorithm>::builder_from_algorithm(any).clock(clock);
    let builder = if mix.churn {
        // Two keys' room for four keys: an insert reclaims an idle key, or finds none.
        builder.shards(1).max_keys(2).table_full(TableFullPolicy::DenyNew)
    } else {
        builder.shards(2)
    };
    if door { builder } else { builder.doorkeeper(0) }.build().expect("quota checked")
}

/// What the churn histories did that the check relies on happening.
#[derive(Debug, Default)]
struct Churn {
    /// Keys the sweeps reclaimed.
    swept: AtomicUsize,
    /// Checks the full table answered.
    full: AtomicUsize,
}

fn keyed<W: WordAlgorithm>(salt: u64) {
    let churn = Churn::default();
    for door in [true, false] {
        for (mix, name) in [(KEYED, "two keys"), (CHURN, "churn")] {
            let what =
                format!("Keyed<AnyAlgorithm({})> door {}, {name}", W::NAME, if door { "on" } else { "off" });
            let salt = salt ^ u64::from(door) << 40 ^ u64::from(mix.churn) << 41;
            let build = |any, clock| table(any, clock, mix, door);
            run::<W, _>(&what, salt, mix, door, build, |table, call| call_keyed(table, call, &churn));
        }
    }
    let (swept, full) = (churn.swept.into_inner(), churn.full.into_inner());
    eprintln!(
        "Keyed<AnyAlgorithm({})>: sweeps reclaimed {swept} keys, the full table answered {full} checks",
        W::NAME
    );
    // The churn is not idle: keys are reclaimed and re-inserted, and the full table is met.
    if seeds(salt).len() >= 200 {
        assert!(
            swept > 0 && full > 0,
            "the churn mix reclaimed {swept} keys and met a full table {full} times"
        );
    }
}

fn direct<W: WordAlgorithm>(salt: u64) {
    let what = format!("RateLimiter<AnyAlgorithm({})>", W::NAME);
    run::<W, _>(&what, salt, DIRECT, false, RateLimiter::from_algorithm, call_direct);
}

#[test]
fn keyed_any_gcra() {
    keyed::<Gcra>(31);
}

#[test]
fn keyed_any_token_bucket() {
    keyed::<TokenBucket>(32);
}

#[test]
fn keyed_any_fixed_window() {
    keyed::<FixedWindow>(33);
}

#[test]
fn keyed_any_sliding_window_counter() {
    keyed::<SlidingWindowCounter>(34);
}

#[test]
fn rate_limiter_any_word_kinds() {
    direct::<Gcra>(35);
    direct::<TokenBucket>(36);
    direct::<FixedWindow>(37);
    direct::<SlidingWindowCounter>(38);
}

/// How many of `of` seeds' histories of a subject `call` answers for are not linearizable.
fn rejected<W: WordAlgorithm, S: Sync>(
    of: u64,
    mix: Mix,
    door: bool,
    build: impl Fn(AnyAlgorithm, ManualClock) -> S,
    call: impl Fn(&S, Call) -> Got + Sync,
) -> usize {
    let mut rejected = 0;
    for seed in 0..of {
        let Some((spec, history)) = history_of::<W, S>(seed, mix, door, &build, &call) else { continue };
        let violated = (0..mix.keys).any(|key| {
            let ours = history.project(|call| matches!(call, Call::On(k, _) if *k == key));
            match check(&spec, spec.api.fresh(), &ours, |_| true) {
                Verdict::Violation => {
                    let minimal =
                        minimal_violation(&spec, spec.api.fresh(), &ours, |_| true).expect("rejected");
                    assert!(minimal.len() <= ours.len());
                    true
                }
                _ => false,
            }
        });
        rejected += usize::from(violated);
    }
    eprintln!("{rejected} of {of} histories rejected ({mix:?}, door {door})");
    rejected
}

/// The check can fail: a table whose resets and removals do nothing is rejected, on both
/// mixes; the true table passes the same seeds (`keyed_any_*`).
#[test]
fn a_table_that_drops_resets_is_rejected() {
    let churn = Churn::default();
    for (mix, door) in [(KEYED, false), (KEYED, true), (CHURN, false)] {
        let build = |any, clock| table(any, clock, mix, door);
        let dropped = |table: &Keyed<u64, AnyAlgorithm, ManualClock>, call| match call {
            Call::On(_, Op::Reset) => Got::Api(Output::Done),
            call => call_keyed(table, call, &churn),
        };
        let rejected = rejected::<Gcra, _>(60, mix, door, build, dropped);
        // A history whose resets meet a fresh key cannot tell.
        assert!(rejected >= 5, "only {rejected} of 60 histories rejected ({mix:?}, door {door})");
    }
}

/// The check can fail through the full table's allowance: a sweep that evicts every key, idle
/// or not, loses state that the key's next calls show (a full table's answer is allowed only
/// to a key whose state could be fresh).
#[test]
fn a_sweep_that_evicts_held_keys_is_rejected() {
    let churn = Churn::default();
    for door in [false, true] {
        let build = |any, clock| table(any, clock, CHURN, door);
        let evicting = |table: &Keyed<u64, AnyAlgorithm, ManualClock>, call| match call {
            Call::Sweep => {
                for key in 0..CHURN.keys {
                    table.remove(&key);
                }
                Got::Swept
            }
            call => call_keyed(table, call, &churn),
        };
        let rejected = rejected::<TokenBucket, _>(100, CHURN, door, build, evicting);
        assert!(rejected >= 5, "only {rejected} of 100 histories rejected (door {door})");
    }
}

/// The check can fail on the direct limiter: one whose reset does nothing is rejected.
#[test]
fn a_direct_limiter_that_drops_resets_is_rejected() {
    let dropped = |limiter: &RateLimiter<AnyAlgorithm, ManualClock>, call| match call {
        Call::On(_, Op::Reset) => Got::Api(Output::Done),
        call => call_direct(limiter, call),
    };
    let rejected = rejected::<FixedWindow, _>(60, DIRECT, false, RateLimiter::from_algorithm, dropped);
    assert!(rejected >= 5, "only {rejected} of 60 histories rejected");
}
