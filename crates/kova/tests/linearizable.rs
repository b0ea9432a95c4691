//! Random concurrent histories, checked for linearizability (`kova::model::lincheck`): 2-4
//! threads call one shared limiter under a shared `ManualClock` (checks, peeks, refunds, resets,
//! reservations and their cancellation, settling, charges, and clock steps), every call's
//! invocation and response recorded, and the history must have a sequential order that the
//! algorithm's own pure functions reproduce call for call (`model::lincheck::word_api`).
//!
//! Subjects: `RateLimiter` for the four word algorithms; `Keyed` with the doorkeeper on and off
//! (each key's calls checked on their own: linearizability is local). The suite runs a fixed
//! number of histories per subject; `KOVA_LINCHECK_HISTORIES=<n>` runs more, and
//! `KOVA_LINCHECK_SEED=<seed>` replays one seed's plan. A failure names the seed and prints the
//! shortest prefix of the history that no order explains.

use std::time::Instant;

use kova::keyed::KeyedReservation;
use kova::model::lincheck::word_api::{Op, Output, WordApi};
use kova::model::lincheck::{check, minimal_violation, History, Spec, Verdict};
use kova::reservation::{Reservation, Settlement};
use kova::{
    FixedWindow, Gcra, Keyed, ManualClock, Quota, RateLimiter, SlidingWindowCounter, TokenBucket,
    WordAlgorithm,
};

#[path = "support/lincheck_harness.rs"]
mod harness;

use harness::seeds;

/// A step of a plan: a call on a key (ignored by a direct limiter), or a clock move.
type Step = harness::Step<(u64, Op)>;

/// What a plan may contain.
#[derive(Debug, Clone, Copy)]
struct Mix {
    keys: u64,
    /// Reservations and cancels (a table's cancel gives back nothing after any key's removal or
    /// reset, a table-wide count: the two do not mix in one keyed history).
    reservations: bool,
    resets: bool,
    /// Charges and settlements of a higher cost than estimated.
    charges: bool,
}

fn plan(rng: &mut fastrand::Rng, mix: Mix, period: u64, capacity: u64, thread: u32) -> Vec<Step> {
    let mut next_id = thread * 1_000;
    let mut reserved_key = 0;
    let len = rng.usize(3..=7);
    (0..len)
        .map(|_| {
            let mut key = rng.u64(0..mix.keys);
            let cost = rng.u64(0..=capacity.min(3));
            let op = match rng.u32(0..100) {
                0..=34 => Op::Check(rng.u64(1..=2)),
                35..=39 => Op::Check(cost),
                40..=47 => Op::Peek,
                48..=55 => Op::Refund(rng.u64(1..=2)),
                56..=59 if mix.resets => Op::Reset,
                60..=69 if mix.reservations => {
                    next_id += 1;
                    reserved_key = key;
                    Op::Reserve { id: next_id, cost }
                }
                70..=77 if mix.reservations => {
                    // The latest reservation, of its own key.
                    key = reserved_key;
                    Op::Cancel(next_id)
                }
                78..=85 => {
                    let estimated = rng.u64(0..=3);
                    let most = if mix.charges { 4 } else { estimated };
                    Op::Settle(estimated, rng.u64(0..=most))
                }
                86..=89 if mix.charges => Op::Charge(rng.u64(1..=3)),
                _ => return Step::Advance(rng.u64(1..=period / 3)),
            };
            Step::Call((key, op))
        })
        .collect()
}

/// What threads call: a direct limiter or a table.
trait Subject: Sync {
    /// A reservation it hands out.
    type Held<'a>: Send
    where
        Self: 'a;

    /// Calls `op` on `key`; a reservation made goes into `held`, a cancel takes it from there.
    fn call<'a>(&'a self, key: u64, op: Op, held: &mut Vec<(u32, Self::Held<'a>)>) -> Output;
}

fn take<T>(held: &mut Vec<(u32, T)>, id: u32) -> Option<T> {
    let at = held.iter().position(|(i, _)| *i == id)?;
    Some(held.swap_remove(at).1)
}

impl<W: WordAlgorithm> Subject for RateLimiter<W, ManualClock> {
    type Held<'a> = Reservation<'a, W, ManualClock>;

    fn call<'a>(&'a self, _key: u64, op: Op, held: &mut Vec<(u32, Self::Held<'a>)>) -> Output {
        match op {
            Op::Check(cost) => Output::Decided(self.check_n(cost)),
            Op::Peek => Output::Decided(Ok(self.peek())),
            Op::Refund(cost) => Output::Bool(self.refund(cost)),
            Op::Reset => {
                self.reset();
                Output::Done
            }
            Op::Reserve { id, cost } => Output::Reserved(self.reserve_n(cost).map(|r| {
                let made = (r.delay().as_nanos() as u64, r.ready_at_nanos());
                held.push((id, r));
                made
            })),
            Op::Cancel(id) => Output::Units(take(held, id).map_or(0, Reservation::cancel)),
            Op::Settle(estimated, actual) => Output::Settled(self.settle(estimated, actual)),
            Op::Charge(cost) => Output::Charged(self.charge(cost)),
        }
    }
}

impl<W: WordAlgorithm> Subject for Keyed<u64, W, ManualClock> {
    type Held<'a> = KeyedReservation<'a, u64, W, ManualClock>;

    fn call<'a>(&'a self, key: u64, op: Op, held: &mut Vec<(u32, Self::Held<'a>)>) -> Output {
        match op {
            Op::Check(cost) => Output::Decided(self.check_n(&key, cost)),
            Op::Peek => Output::Decided(Ok(self.peek(&key))),
            Op::Refund(cost) => {
                self.refund(&key, cost);
                Output::Done
            }
            Op::Reset => {
                // A removal, every other time: both leave the key fresh.
                if key % 2 == 0 {
                    self.reset(&key);
                } else {
                    self.remove(&key);
                }
                Output::Done
            }
            Op::Reserve { id, cost } => Output::Reserved(self.reserve_n(&key, cost).map(|r| {
                assert_eq!(r.fallback(), None, "the table is far from full");
                let made = (r.delay().as_nanos() as u64, r.ready_at_nanos());
                held.push((id, r));
                made
            })),
            Op::Cancel(id) => Output::Units(take(held, id).map_or(0, KeyedReservation::cancel)),
            Op::Settle(estimated, actual) => {
                // Whether a refund was made says whether the key was held: not compared.
                Output::Settled(Settlement { refunded: 0, ..self.settle(&key, estimated, actual) })
            }
            Op::Charge(cost) => Output::Charged(self.charge(&key, cost)),
        }
    }
}

/// Runs one history of `plans` (one thread each) on `subject`, then a final peek of every key.
fn record<S: Subject>(
    subject: &S,
    clock: &ManualClock,
    plans: &[Vec<Step>],
    keys: u64,
) -> History<(u64, Op), Output> {
    let finals: Vec<_> = (0..keys).map(|key| (key, Op::Peek)).collect();
    harness::record(clock, plans, &finals, |&(key, op), held: &mut Vec<_>| subject.call(key, op, held))
}

/// The specification of one key's calls (the key itself ignored: the history is projected).
struct OneKey<W>(WordApi<W>);

impl<W: WordAlgorithm> Spec for OneKey<W> {
    type State = kova::model::lincheck::word_api::WordState;
    type Op = (u64, Op);
    type Output = Output;

    fn call(&self, state: &mut Self::State, now: u64, op: &(u64, Op)) -> Output {
        self.0.call(state, now, &op.1)
    }
}

/// Checks every key's sub-history; panics with the seed and the shortest violating prefix.
fn assert_history<W: WordAlgorithm + Clone>(
    what: &str,
    seed: u64,
    spec: WordApi<W>,
    history: &History<(u64, Op), Output>,
    keys: u64,
) {
    for key in 0..keys {
        let ours = history.project(|&(k, _)| k == key);
        let spec = OneKey(spec.clone());
        match check(&spec, spec.0.fresh(), &ours, |_| true) {
            Verdict::Linearizable(_) => {}
            Verdict::GaveUp => panic!("{what}, seed {seed}, key {key}: the search gave up on\n{ours:?}"),
            Verdict::Violation => {
                let minimal =
                    minimal_violation(&spec, spec.0.fresh(), &ours, |_| true).unwrap_or(ours.clone());
                panic!(
                    "{what}: not linearizable, seed {seed} (KOVA_LINCHECK_SEED={seed} replays the plan), key \
                     {key}.\nShortest violating prefix:\n{minimal:?}\nThe key's whole history:\n{ours:?}"
                );
            }
        }
    }
}

fn quota_for<W: WordAlgorithm>(rng: &mut fastrand::Rng) -> Quota {
    let limit = rng.u64(2..=5);
    let quota = Quota::per_second(limit).expect("a valid quota");
    match W::NAME {
        // The bucket algorithms: a burst other than the rate, and for GCRA a debt to run into.
        "gcra" => quota.with_burst(rng.u64(1..=4)).expect("valid burst").with_overdraft(rng.u64(0..=2)),
        "token_bucket" => quota.with_burst(rng.u64(1..=4)).expect("valid burst"),
        _ => quota,
    }
}

/// Runs the histories of one subject built by `build`, printing how many per second it checked.
fn run<W, S>(
    what: &str,
    salt: u64,
    mix: Mix,
    build: impl Fn(Quota, ManualClock) -> S,
    spec: impl Fn(W) -> WordApi<W>,
) where
    W: WordAlgorithm + Clone,
    S: Subject,
{
    let started = Instant::now();
    let seeds = seeds(salt);
    for &seed in &seeds {
        let mut rng = fastrand::Rng::with_seed(seed);
        let quota = quota_for::<W>(&mut rng);
        let Ok(algorithm) = W::from_quota(quota) else { continue };
        let period = quota.period_nanos();
        let threads = rng.u32(2..=4);
        let plans: Vec<_> =
            (0..threads).map(|t| plan(&mut rng, mix, period, algorithm.capacity(), t)).collect();
        let clock = ManualClock::starting_at(rng.u64(0..period));
        let subject = build(quota, clock.clone());
        let history = record(&subject, &clock, &plans, mix.keys);
        assert_history(what, seed, spec(algorithm), &history, mix.keys);
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{what}: {} histories in {secs:.2} s ({:.0}/s)", seeds.len(), seeds.len() as f64 / secs);
}

const DIRECT: Mix = Mix { keys: 1, reservations: true, resets: true, charges: true };

fn direct<W: WordAlgorithm + Clone>(salt: u64) {
    run::<W, _>(
        &format!("RateLimiter<{}>", W::NAME),
        salt,
        DIRECT,
        |quota, clock| RateLimiter::<W, _>::with_clock(quota, clock).expect("quota checked"),
        WordApi::direct,
    );
}

/// The keyed mixes: every call, reservations apart from resets and removals.
const KEYED: [(Mix, &str); 2] = [
    (Mix { keys: 2, reservations: false, resets: true, charges: true }, "resets and charges"),
    (Mix { keys: 2, reservations: true, resets: false, charges: true }, "reservations and charges"),
];

fn keyed<W: WordAlgorithm + Clone>(salt: u64, door: bool) {
    for (mix, name) in KEYED {
        run::<W, _>(
            &format!("Keyed<{}> door {}, {name}", W::NAME, if door { "on" } else { "off" }),
            salt ^ u64::from(door) << 40 ^ u64::from(mix.reservations) << 41,
            mix,
            |quota, clock| table::<W>(quota, clock, door),
            WordApi::keyed,
        );
    }
}

fn table<W: WordAlgorithm>(quota: Quota, clock: ManualClock, door: bool) -> Keyed<u64, W, ManualClock> {
    let builder = Keyed::<u64, W>::builder(quota).clock(clock).shards(2);
    let builder = if door { builder } else { builder.doorkeeper(0) };
    builder.build().expect("quota checked")
}

#[test]
fn rate_limiter_gcra() {
    direct::<Gcra>(1);
}

#[test]
fn rate_limiter_token_bucket() {
    direct::<TokenBucket>(2);
}

#[test]
fn rate_limiter_fixed_window() {
    direct::<FixedWindow>(3);
}

#[test]
fn rate_limiter_sliding_window_counter() {
    direct::<SlidingWindowCounter>(4);
}

#[test]
fn keyed_gcra() {
    keyed::<Gcra>(5, true);
    keyed::<Gcra>(5, false);
}

#[test]
fn keyed_token_bucket() {
    keyed::<TokenBucket>(6, true);
    keyed::<TokenBucket>(6, false);
}

#[test]
fn keyed_fixed_window() {
    keyed::<FixedWindow>(7, true);
    keyed::<FixedWindow>(7, false);
}

#[test]
fn keyed_sliding_window_counter() {
    keyed::<SlidingWindowCounter>(8, true);
    keyed::<SlidingWindowCounter>(8, false);
}

/// The checker can fail: real histories of a direct limiter, checked against a specification
/// whose `decide` is mutated (a check of one unit costs two), are rejected, with a shortest
/// violating prefix no longer than the history; the same histories pass the true one.
#[test]
fn a_mutated_specification_rejects_real_histories() {
    struct Mutated(WordApi<Gcra>);
    impl Spec for Mutated {
        type State = kova::model::lincheck::word_api::WordState;
        type Op = (u64, Op);
        type Output = Output;
        fn call(&self, state: &mut Self::State, now: u64, op: &(u64, Op)) -> Output {
            let op = match op.1 {
                Op::Check(1) => Op::Check(2),
                other => other,
            };
            self.0.call(state, now, &op)
        }
    }
    let quota = Quota::per_second(4).unwrap();
    let mix = Mix { keys: 1, reservations: false, resets: false, charges: false };
    let mut rejected = 0;
    for seed in 0..20 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let plans: Vec<_> = (0..2).map(|t| plan(&mut rng, mix, quota.period_nanos(), 4, t)).collect();
        let clock = ManualClock::new();
        let limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
        let history = record(&limiter, &clock, &plans, 1);
        let truth = OneKey(WordApi::direct(Gcra::from_quota(quota).unwrap()));
        assert!(matches!(check(&truth, truth.0.fresh(), &history, |_| true), Verdict::Linearizable(_)));
        let mutated = Mutated(WordApi::direct(Gcra::from_quota(quota).unwrap()));
        if check(&mutated, mutated.0.fresh(), &history, |_| true) == Verdict::Violation {
            let minimal =
                minimal_violation(&mutated, mutated.0.fresh(), &history, |_| true).expect("rejected");
            assert!(minimal.len() <= history.len());
            rejected += 1;
        }
    }
    // A history without an admitted check of one unit cannot tell the two apart.
    assert!(rejected >= 10, "only {rejected} of 20 histories rejected");
}
