//! Differential testing: drive a real limiter and its reference model with the same operations
//! and report the first step where they disagree. The proptests, the fuzz target and anyone
//! extending kova share this driver.

use std::fmt;

use super::{BucketModel, FixedWindowModel, SlidingCounterModel, SlidingLogModel};
use crate::{Algorithm, AlgorithmKind, AnyAlgorithm, CheckError, Decision, ManualClock, Quota, RateLimiter};

/// One step of a differential run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Move the clock forward by this many nanoseconds.
    Advance(u64),
    /// `check_n(cost)`.
    Check(u64),
    /// `peek()`.
    Peek,
    /// `reset()`.
    Reset,
}

/// Where and how the limiter and the model disagreed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Which algorithm.
    pub kind: AlgorithmKind,
    /// The quota.
    pub quota: Quota,
    /// Index of the op in the sequence.
    pub step: usize,
    /// The op.
    pub op: Op,
    /// The clock reading at that step.
    pub now: u64,
    /// What the real limiter answered.
    pub real: Result<Decision, CheckError>,
    /// What the model answered.
    pub model: Result<Decision, CheckError>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?}: step {} {:?} at t={}ns\n  real:  {:?}\n  model: {:?}",
            self.kind, self.quota, self.step, self.op, self.now, self.real, self.model
        )
    }
}

impl std::error::Error for Mismatch {}

/// The reference model matching an algorithm.
#[derive(Debug)]
enum Model {
    Bucket(BucketModel),
    Fixed(FixedWindowModel),
    Counter(SlidingCounterModel),
    Log(SlidingLogModel),
}

impl Model {
    fn for_algorithm(algorithm: &AnyAlgorithm) -> Model {
        let quota = algorithm.quota();
        let (limit, period) = (quota.limit(), quota.period_nanos());
        match algorithm {
            AnyAlgorithm::Gcra(gcra) => Model::Bucket(BucketModel::new(gcra.interval_nanos(), quota.burst())),
            AnyAlgorithm::TokenBucket(bucket) => Model::Bucket(BucketModel::with_quantum(
                bucket.interval_nanos(),
                quota.burst(),
                1 << bucket.shift(),
            )),
            AnyAlgorithm::FixedWindow(_) => Model::Fixed(FixedWindowModel::new(limit, period)),
            AnyAlgorithm::SlidingWindowCounter(_) => Model::Counter(SlidingCounterModel::new(limit, period)),
            AnyAlgorithm::SlidingWindowLog(_) => Model::Log(SlidingLogModel::new(limit, period)),
        }
    }

    fn decide(&mut self, now: u64, cost: u64) -> Decision {
        match self {
            Model::Bucket(m) => m.decide(now, cost),
            Model::Fixed(m) => m.decide(now, cost),
            Model::Counter(m) => m.decide(now, cost),
            Model::Log(m) => m.decide(now, cost),
        }
    }

    fn reset(&mut self) {
        match self {
            Model::Bucket(m) => m.reset(),
            Model::Fixed(m) => m.reset(),
            Model::Counter(m) => m.reset(),
            Model::Log(m) => m.reset(),
        }
    }
}

/// Drives `RateLimiter<AnyAlgorithm, ManualClock>` for (`kind`, `quota`) and its reference model
/// with `ops`, comparing every decision in full (allowed, limit, remaining, retry_after,
/// reset_after) and every error. The clock starts at 0 and saturates at `u64::MAX`; the models
/// are exact, so no tolerance is allowed (the token bucket's model samples time at the bucket's
/// stamp unit, its documented rounding).
///
/// Returns `Ok(())` when the algorithm rejects the quota (nothing to compare).
///
/// ```
/// use kova::model::differential::{run, Op};
/// use kova::{AlgorithmKind, Quota};
/// let ops = [Op::Check(3), Op::Advance(250_000_000), Op::Check(8), Op::Peek, Op::Reset, Op::Check(10)];
/// for kind in AlgorithmKind::ALL {
///     run(kind, Quota::per_second(10)?, &ops)?;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run(kind: AlgorithmKind, quota: Quota, ops: &[Op]) -> Result<(), Box<Mismatch>> {
    let Ok(algorithm) = AnyAlgorithm::new(kind, quota) else {
        return Ok(());
    };
    let clock = ManualClock::new();
    let mut now = 0u64;
    let mut model = Model::for_algorithm(&algorithm);
    let capacity = algorithm.capacity();
    let limiter = RateLimiter::from_algorithm(algorithm, clock.clone());
    for (step, &op) in ops.iter().enumerate() {
        let (real, expected) = match op {
            Op::Advance(nanos) => {
                now = now.saturating_add(nanos);
                clock.set(now);
                continue;
            }
            Op::Reset => {
                limiter.reset();
                model.reset();
                continue;
            }
            Op::Peek => (Ok(limiter.peek()), Ok(model.decide(now, 0))),
            Op::Check(cost) => {
                let expected = if cost > capacity {
                    Err(CheckError::CostExceedsCapacity { cost, capacity })
                } else {
                    Ok(model.decide(now, cost))
                };
                (limiter.check_n(cost), expected)
            }
        };
        if real != expected {
            return Err(Box::new(Mismatch { kind, quota, step, op, now, real, model: expected }));
        }
    }
    Ok(())
}
