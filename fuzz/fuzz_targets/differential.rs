//! Target 1, differential: an arbitrary sequence of operations (advance the clock, check_n with
//! an arbitrary cost, peek, reset) on each algorithm, compared with its sequential reference
//! model after every step, through `kova::model::differential::run` (the same driver as the
//! stable proptest in crates/kova/tests/model_equivalence.rs).
//!
//! Catches: any decision field (allowed, remaining, retry_after, reset_after, error) that differs
//! from the model for some quota and history: off-by-one refills, window-edge mistakes, rounding
//! in the sliding counter's weighting, the log's ring arithmetic, a reset that does not reset,
//! a peek that changes state.
//!
//! Time stays inside each algorithm's documented horizon (the packed words wrap: the token
//! bucket's 42-bit stamp, the windows' 32- and 24-bit indexes; GCRA's TAT saturates past 2^63
//! ns, 292 years); what happens past it is documented behaviour with its own unit tests, not a
//! disagreement with the model.
#![no_main]

use arbitrary::Arbitrary;
use kova::model::differential::{run, Op};
use kova::{AlgorithmKind, AnyAlgorithm, Quota};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Limit {
    Small(u8),
    Any(u64),
}

#[derive(Debug, Arbitrary)]
enum Period {
    Second,
    Minute,
    Hour,
    Millisecond,
    Small(u16),
    Any(u64),
}

#[derive(Debug, Arbitrary)]
enum FuzzOp {
    /// A small cost (the interesting range: around the capacity).
    Check(u8),
    /// Any cost, mostly above the capacity (the error path).
    CheckAny(u64),
    /// A fraction of the period: `period * n / 256` (up to 256 periods).
    Advance(u16),
    /// Any number of nanoseconds (clamped to the horizon).
    AdvanceAny(u64),
    Peek,
    Reset,
}

#[derive(Debug, Arbitrary)]
struct Input {
    kind: u8,
    limit: Limit,
    period: Period,
    /// 0: burst = limit.
    burst: u16,
    ops: Vec<FuzzOp>,
}

/// The time up to which the algorithm's packed state does not wrap (from a clock starting at 0).
fn horizon(algorithm: &AnyAlgorithm) -> u64 {
    let period = algorithm_period(algorithm) as u128;
    let h: u128 = match algorithm {
        // Half the stamp's wrap W = 2^(42 + shift) ns (readings within W/1024 behind count as a
        // clock running backwards).
        AnyAlgorithm::TokenBucket(tb) => (1u128 << (kova::TokenBucket::STAMP_BITS + tb.shift())) / 2,
        // Half the window index ranges.
        AnyAlgorithm::FixedWindow(_) => (1u128 << (kova::FixedWindow::WINDOW_BITS - 1)) * period,
        AnyAlgorithm::SlidingWindowCounter(_) => {
            (1u128 << (kova::SlidingWindowCounter::WINDOW_BITS - 1)) * period
        }
        _ => u64::MAX as u128,
    };
    // And 2^62 ns (146 years) for all: GCRA keeps `now + deficit` exact below 2^63 (its capacity
    // is at most u64::MAX / 2, "meaningful for 292 years"), and the models' searches up to
    // `now + 2 * period` stay within u64 (at the end of the timeline they clip reset_after
    // where the algorithms do not).
    h.min(1u128 << 62) as u64
}

fn algorithm_period(algorithm: &AnyAlgorithm) -> u64 {
    kova::Algorithm::quota(algorithm).period_nanos()
}

fuzz_target!(|input: Input| {
    let kind = AlgorithmKind::ALL[input.kind as usize % AlgorithmKind::ALL.len()];
    let limit = match input.limit {
        Limit::Small(n) => u64::from(n),
        Limit::Any(n) => n,
    };
    let period = match input.period {
        Period::Second => 1_000_000_000,
        Period::Minute => 60_000_000_000,
        Period::Hour => 3_600_000_000_000,
        Period::Millisecond => 1_000_000,
        Period::Small(n) => u64::from(n),
        // Below 2^61 ns (73 years), so that now + 2 periods stays below 2^64: the reference
        // models search up to `now + 2 * period` (kova::model::SlidingCounterModel overflows on
        // `2 * period` above 2^63, a test-model limit, reported).
        Period::Any(n) => n >> 3,
    };
    let Ok(mut quota) = Quota::from_nanos(limit, period) else { return };
    if input.burst != 0 {
        let Ok(q) = quota.with_burst(u64::from(input.burst)) else { return };
        quota = q;
    }
    let Ok(algorithm) = AnyAlgorithm::new(kind, quota) else { return };
    // The sliding log allocates its whole ring up front: keep it small enough to fuzz quickly.
    if kind == AlgorithmKind::SlidingWindowLog && quota.limit() > 4096 {
        return;
    }
    let horizon = horizon(&algorithm);
    let mut now = 0u64;
    let ops: Vec<Op> = input
        .ops
        .iter()
        .take(512)
        .filter_map(|op| {
            Some(match *op {
                FuzzOp::Check(cost) => Op::Check(u64::from(cost)),
                FuzzOp::CheckAny(cost) => Op::Check(cost),
                FuzzOp::Advance(n) => advance(&mut now, (period as u128 * n as u128 / 256) as u64, horizon)?,
                FuzzOp::AdvanceAny(nanos) => advance(&mut now, nanos, horizon)?,
                FuzzOp::Peek => Op::Peek,
                FuzzOp::Reset => Op::Reset,
            })
        })
        .collect();
    if let Err(mismatch) = run(kind, quota, &ops) {
        panic!("the {kind} limiter disagrees with its reference model:\n{mismatch}");
    }
});

/// An advance that keeps the clock below `horizon`, or nothing.
fn advance(now: &mut u64, nanos: u64, horizon: u64) -> Option<Op> {
    let next = now.checked_add(nanos).filter(|&t| t < horizon)?;
    *now = next;
    Some(Op::Advance(nanos))
}
