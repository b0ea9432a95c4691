//! Random concurrent histories of the sliding window log (boxed, self-addressed cells), 2-4
//! threads under a shared `ManualClock`, on `RateLimiter<SlidingWindowLog>`,
//! `Keyed<u64, SlidingWindowLog>` and `Keyed<u64, AnyAlgorithm>` of the log's kind (door on and
//! off), checked two ways:
//! - **Its bound**, with clock steps, resets, removals and sweeps: the log is exact, but a
//!   reader meeting a slot still being written counts that unit as inside the window, and a
//!   reset racing an admission may leave its units counted; both only deny. So from the
//!   recorded history: units admitted by calls whose clock readings all lie within less than a
//!   `period` of each other, with no reset of the key overlapping them, number at most `limit`
//!   (a unit was decided at a reading between its call's two, so they were all inside one
//!   window).
//! - **Exactly**, against `kova::model::SlidingLogModel`, while the clock stands still and
//!   nothing is reset: then a slot still being written holds a unit of the present time, which
//!   counts as inside the window as the model's would, and the log is a counter with every
//!   answer known. Exactness here is the liveness side: nothing it admits less than `limit`.
//!
//! `KOVA_LINCHECK_HISTORIES` and `KOVA_LINCHECK_SEED` as in `tests/linearizable.rs`.

use std::time::Instant;

use kova::model::lincheck::{check, minimal_violation, History, Spec, Verdict};
use kova::model::SlidingLogModel;
use kova::reservation::Settlement;
use kova::{
    Algorithm, AlgorithmKind, AnyAlgorithm, CheckError, Decision, Keyed, ManualClock, Quota, RateLimiter,
    SlidingWindowLog,
};

#[path = "support/lincheck_harness.rs"]
mod harness;

use harness::{seeds, Step};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `check_n(cost)`.
    Check(u64),
    Peek,
    /// `refund(cost)`: the log gives nothing back.
    Refund(u64),
    /// `reset`, or a table's `remove` for an odd key.
    Reset,
    /// A table's `charge(cost)`.
    Charge(u64),
    /// A table's `settle(estimated, actual)`.
    Settle(u64, u64),
    /// A table's `sweep_idle` (in no key's sub-history).
    Sweep,
}

/// A call on a key (ignored by a direct limiter).
type KeyOp = (u64, Op);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    Decided(Result<Decision, CheckError>),
    Bool(bool),
    Charged(u64),
    Settled(Settlement),
    Done,
}

impl Got {
    /// Units the call admitted.
    fn admitted(self, op: Op) -> u64 {
        match (op, self) {
            (Op::Check(cost), Got::Decided(Ok(d))) if d.is_allowed() => cost,
            (_, Got::Charged(units)) => units,
            (_, Got::Settled(s)) => s.charged,
            _ => 0,
        }
    }
}

/// What threads call.
trait Subject: Sync {
    /// Whether it is a table (charges, settlements and sweeps).
    const KEYED: bool;

    fn call(&self, key: u64, op: Op) -> Got;
}

impl Subject for RateLimiter<SlidingWindowLog, ManualClock> {
    const KEYED: bool = false;

    fn call(&self, _key: u64, op: Op) -> Got {
        match op {
            Op::Check(cost) => Got::Decided(self.check_n(cost)),
            Op::Peek => Got::Decided(Ok(self.peek())),
            Op::Refund(cost) => Got::Bool(self.refund(cost)),
            Op::Reset => {
                self.reset();
                Got::Done
            }
            other => panic!("a direct limiter of the log does not offer {other:?}"),
        }
    }
}

impl<A: Algorithm> Subject for Keyed<u64, A, ManualClock> {
    const KEYED: bool = true;

    fn call(&self, key: u64, op: Op) -> Got {
        match op {
            Op::Check(cost) => Got::Decided(self.check_n(&key, cost)),
            Op::Peek => Got::Decided(Ok(self.peek(&key))),
            Op::Refund(cost) => Got::Bool(self.refund(&key, cost)),
            Op::Reset => {
                if key % 2 == 0 {
                    self.reset(&key);
                } else {
                    self.remove(&key);
                }
                Got::Done
            }
            Op::Charge(cost) => Got::Charged(self.charge(&key, cost)),
            Op::Settle(estimated, actual) => Got::Settled(self.settle(&key, estimated, actual)),
            Op::Sweep => {
                self.sweep_idle();
                Got::Done
            }
        }
    }
}

/// A subject that reports every denied check as allowed: what the checks must reject.
struct Overadmits<S>(S);

impl<S: Subject> Subject for Overadmits<S> {
    const KEYED: bool = S::KEYED;

    fn call(&self, key: u64, op: Op) -> Got {
        match self.0.call(key, op) {
            Got::Decided(Ok(d)) if !d.is_allowed() => {
                Got::Decided(Ok(Decision::allowed(d.limit(), d.remaining(), d.reset_after_nanos())))
            }
            got => got,
        }
    }
}

/// What a plan may contain.
#[derive(Debug, Clone, Copy)]
struct Mix {
    keys: u64,
    /// Clock steps, resets and sweeps: the bound's mix, not the exact one's.
    moving: bool,
}

fn plan(rng: &mut fastrand::Rng, mix: Mix, keyed: bool, period: u64, limit: u64) -> Vec<Step<KeyOp>> {
    (0..rng.usize(3..=8))
        .map(|_| {
            let op = match rng.u32(0..100) {
                0..=44 => Op::Check(rng.u64(1..=2)),
                45..=49 => Op::Check(rng.u64(0..=limit.min(3))),
                50..=57 => Op::Peek,
                58..=61 => Op::Refund(rng.u64(1..=2)),
                62..=67 if keyed => Op::Charge(rng.u64(1..=3)),
                68..=71 if keyed => Op::Settle(rng.u64(0..=2), rng.u64(0..=4)),
                72..=77 if mix.moving => Op::Reset,
                78..=81 if mix.moving && keyed => Op::Sweep,
                82..=99 if mix.moving => return Step::Advance(rng.u64(1..=period / 3)),
                _ => Op::Check(1),
            };
            Step::Call((rng.u64(0..mix.keys), op))
        })
        .collect()
}

/// One history of seed `seed` on the subject `build` makes (from the algorithm and the clock),
/// with the algorithm's limit and period.
fn history_of<S: Subject>(
    seed: u64,
    mix: Mix,
    build: &impl Fn(SlidingWindowLog, ManualClock) -> S,
) -> (u64, u64, History<KeyOp, Got>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let limit = rng.u64(2..=5);
    let quota = Quota::per_second(limit).expect("a valid quota");
    let log = <SlidingWindowLog as Algorithm>::from_quota(quota).expect("a valid log");
    let period = quota.period_nanos();
    let plans: Vec<_> = (0..rng.u32(2..=4)).map(|_| plan(&mut rng, mix, S::KEYED, period, limit)).collect();
    let clock = ManualClock::starting_at(rng.u64(0..1 << 40));
    let subject = build(log, clock.clone());
    let finals: Vec<_> = (0..mix.keys).map(|key| (key, Op::Peek)).collect();
    let history = harness::record(&clock, &plans, &finals, |&(key, op), _: &mut ()| subject.call(key, op));
    (limit, period, history)
}

/// The most units that calls of `key` admitted within less than `period`, with no reset of the
/// key overlapping them (see the module docs); the calls that did, when that is above `limit`.
fn beyond_the_bound(history: &History<KeyOp, Got>, key: u64, limit: u64, period: u64) -> Option<String> {
    let calls: Vec<_> = history
        .lanes
        .iter()
        .flat_map(|l| &l.calls)
        .filter(|c| c.op.0 == key)
        .map(|c| (c, c.response.as_ref().expect("a whole history")))
        .collect();
    let resets: Vec<(u64, u64)> =
        calls.iter().filter(|(c, _)| c.op.1 == Op::Reset).map(|(c, r)| (c.invoked, r.returned)).collect();
    // Each admission between resets (in the global order of events), by the resets before it;
    // one that overlaps a reset may have been forgotten by it: left out.
    let mut admitted: Vec<(usize, u64, u64, u64)> = calls
        .iter()
        .filter(|(c, r)| r.result.admitted(c.op.1) > 0)
        .filter(|(c, r)| resets.iter().all(|&(i, o)| o < c.invoked || i > r.returned))
        .map(|(c, r)| {
            let era = resets.iter().filter(|&&(_, o)| o < c.invoked).count();
            (era, c.before, r.after, r.result.admitted(c.op.1))
        })
        .collect();
    admitted.sort_unstable();
    for &(era, from, _, _) in &admitted {
        let window: Vec<_> =
            admitted.iter().filter(|a| a.0 == era && a.1 >= from && a.2 < from + period).collect();
        if window.iter().map(|a| a.3).sum::<u64>() > limit {
            return Some(format!("{window:?}"));
        }
    }
    None
}

/// Runs one subject's histories with a moving clock, each key held to the bound; how many
/// histories broke it.
fn bound_checked<S: Subject>(
    what: &str,
    seeds: &[u64],
    mix: Mix,
    build: impl Fn(SlidingWindowLog, ManualClock) -> S,
) -> usize {
    let started = Instant::now();
    let mut broken = 0;
    for &seed in seeds {
        let (limit, period, history) = history_of(seed, mix, &build);
        let beyond: Vec<_> = (0..mix.keys)
            .filter_map(|key| Some((key, beyond_the_bound(&history, key, limit, period)?)))
            .collect();
        for (key, window) in &beyond {
            eprintln!(
                "{what}, seed {seed} (KOVA_LINCHECK_SEED={seed} replays the plan), key {key}: more than {limit} units \
                 admitted within one window: (era, before, after, units) {window}\n{history:?}"
            );
        }
        broken += usize::from(!beyond.is_empty());
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{what}, bound: {} histories in {secs:.2} s ({:.0}/s)", seeds.len(), seeds.len() as f64 / secs);
    broken
}

/// One key's calls, exactly, while the clock stands still and nothing is reset.
struct StillLog {
    limit: u64,
}

impl Spec for StillLog {
    type State = SlidingLogModel;
    type Op = KeyOp;
    type Output = Got;

    fn needs_monotone_time(&self) -> bool {
        true
    }

    fn call(&self, model: &mut SlidingLogModel, now: u64, op: &KeyOp) -> Got {
        let (got, after) = self.outcomes(model, now, op).swap_remove(0);
        *model = after;
        got
    }

    fn outcomes(&self, model: &SlidingLogModel, now: u64, op: &KeyOp) -> Vec<(Got, SlidingLogModel)> {
        let mut after = model.clone();
        let got = match op.1 {
            Op::Check(cost) if cost > self.limit => {
                Got::Decided(Err(CheckError::CostExceedsCapacity { cost, capacity: self.limit }))
            }
            Op::Check(cost) => Got::Decided(Ok(after.decide(now, cost))),
            Op::Peek => Got::Decided(Ok(after.decide(now, 0))),
            Op::Refund(_) => Got::Bool(false),
            Op::Charge(cost) => {
                return self
                    .charges(model, now, cost)
                    .into_iter()
                    .map(|(n, m)| (Got::Charged(n), m))
                    .collect()
            }
            Op::Settle(estimated, actual) if actual > estimated => {
                let extra = actual - estimated;
                let settled = |(charged, m)| {
                    (
                        Got::Settled(Settlement {
                            charged,
                            uncharged: extra - charged,
                            ..Settlement::default()
                        }),
                        m,
                    )
                };
                return self.charges(model, now, extra).into_iter().map(settled).collect();
            }
            // The log gives nothing back.
            Op::Settle(..) => Got::Settled(Settlement::default()),
            Op::Reset | Op::Sweep => panic!("{op:?} is not in the exact mix"),
        };
        vec![(got, after)]
    }
}

impl StillLog {
    /// A charge of `cost`: what a peek found remaining (at most `cost`) taken by a check, or 0
    /// when a racing check took it first (`Algorithm::charge_cell`: two steps, not one).
    fn charges(&self, model: &SlidingLogModel, now: u64, cost: u64) -> Vec<(u64, SlidingLogModel)> {
        let mut after = model.clone();
        let take = cost.min(after.decide(now, 0).remaining());
        let mut ways = vec![(0, model.clone())];
        if take > 0 && after.decide(now, take).is_allowed() {
            ways.insert(0, (take, after));
        }
        ways
    }
}

/// The first key of `history` whose calls no order explains: its shortest violating prefix.
fn not_exact(history: &History<KeyOp, Got>, keys: u64, limit: u64, period: u64) -> Option<String> {
    let spec = StillLog { limit };
    (0..keys).find_map(|key| {
        let ours = history.project(|op| op.0 == key);
        let fresh = SlidingLogModel::new(limit, period);
        match check(&spec, fresh.clone(), &ours, |_| true) {
            Verdict::Linearizable(_) => None,
            Verdict::GaveUp => Some(format!("key {key}: the search gave up on\n{ours:?}")),
            Verdict::Violation => {
                let minimal = minimal_violation(&spec, fresh, &ours, |_| true).unwrap_or(ours.clone());
                Some(format!(
                    "key {key}, shortest violating prefix:\n{minimal:?}\nThe key's whole history:\n{ours:?}"
                ))
            }
        }
    })
}

/// Runs one subject's histories with the clock still and no resets, each key checked exactly;
/// how many histories were not linearizable.
fn exactly_checked<S: Subject>(
    what: &str,
    seeds: &[u64],
    keys: u64,
    build: impl Fn(SlidingWindowLog, ManualClock) -> S,
) -> usize {
    let started = Instant::now();
    let mut broken = 0;
    for &seed in seeds {
        let (limit, period, history) = history_of(seed, Mix { keys, moving: false }, &build);
        if let Some(violation) = not_exact(&history, keys, limit, period) {
            broken += 1;
            eprintln!("{what}: not linearizable, seed {seed} (KOVA_LINCHECK_SEED={seed} replays the plan), {violation}");
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{what}, exact: {} histories in {secs:.2} s ({:.0}/s)", seeds.len(), seeds.len() as f64 / secs);
    broken
}

fn direct(log: SlidingWindowLog, clock: ManualClock) -> RateLimiter<SlidingWindowLog, ManualClock> {
    RateLimiter::from_algorithm(log, clock)
}

fn table<A: Algorithm>(algorithm: A, clock: ManualClock, door: bool) -> Keyed<u64, A, ManualClock> {
    let builder = Keyed::<u64, A>::builder_from_algorithm(algorithm).clock(clock).shards(2);
    if door { builder } else { builder.doorkeeper(0) }.build().expect("a valid quota")
}

fn any(log: SlidingWindowLog) -> AnyAlgorithm {
    AnyAlgorithm::new(AlgorithmKind::SlidingWindowLog, log.quota()).expect("a valid quota")
}

/// Both checks of one subject: the bound with a moving clock, exactness with a still one.
fn both<S: Subject>(what: &str, salt: u64, keys: u64, build: impl Fn(SlidingWindowLog, ManualClock) -> S) {
    let broken = bound_checked(what, &seeds(salt), Mix { keys, moving: true }, &build);
    assert_eq!(broken, 0, "{what}: {broken} histories admitted beyond the bound (above)");
    let broken = exactly_checked(what, &seeds(salt ^ 1 << 42), keys, &build);
    assert_eq!(broken, 0, "{what}: {broken} histories not linearizable with the clock still (above)");
}

#[test]
fn rate_limiter_sliding_window_log() {
    both("RateLimiter<sliding_window_log>", 41, 1, direct);
}

#[test]
fn keyed_sliding_window_log() {
    for door in [true, false] {
        let what = format!("Keyed<sliding_window_log> door {}", if door { "on" } else { "off" });
        both(&what, 42 ^ u64::from(door) << 40, 2, |log, clock| table(log, clock, door));
    }
}

#[test]
fn keyed_any_sliding_window_log() {
    for door in [true, false] {
        let what =
            format!("Keyed<AnyAlgorithm(sliding_window_log)> door {}", if door { "on" } else { "off" });
        both(&what, 43 ^ u64::from(door) << 40, 2, |log, clock| table(any(log), clock, door));
    }
}

/// Both checks can fail: a subject that reports its denials as admissions is rejected by the
/// bound and by the exact check, direct and keyed.
#[test]
fn a_log_that_overadmits_is_rejected() {
    let seeds: Vec<u64> = (0..60).collect();
    let mut rejected = Vec::new();
    let direct = |log, clock| Overadmits(direct(log, clock));
    rejected.push(bound_checked("over-admitting RateLimiter", &seeds, Mix { keys: 1, moving: true }, direct));
    rejected.push(exactly_checked("over-admitting RateLimiter", &seeds, 1, direct));
    let keyed = |log, clock| Overadmits(table(any(log), clock, true));
    rejected.push(bound_checked(
        "over-admitting Keyed<AnyAlgorithm>",
        &seeds,
        Mix { keys: 2, moving: true },
        keyed,
    ));
    rejected.push(exactly_checked("over-admitting Keyed<AnyAlgorithm>", &seeds, 2, keyed));
    eprintln!("over-admitting logs: rejected of 60 (bound, exact; direct, then keyed): {rejected:?}");
    // A history whose checks are all admitted anyway cannot tell.
    assert!(rejected.iter().all(|&r| r >= 5), "rejected of 60: {rejected:?}");
}
