//! Sequential specifications the recorded calls are matched against.
//!
//! - [`WordSpec`]: a single-word algorithm's own pure `decide` over a plain `u64`. The CAS loop
//!   reads the clock after loading the word, so a call may be linearized after a call that read a
//!   later time; `decide` is defined for such stale readings (they never grant), so this spec
//!   takes any order of times. Matching it proves the CAS loop adds nothing and loses nothing.
//! - [`LogSpec`]: the same for the sliding log, whose state is not a word: the list of admitted
//!   units' times, with the log's rule that a reservation's time is clamped up to the newest
//!   unit's.
//! - [`ReferenceSpec`]: kova's independent reference models (`kova::model`), which need
//!   non-decreasing time: used where the clock does not move while threads run.

use kova::model::{BucketModel, FixedWindowModel, SlidingCounterModel, SlidingLogModel};
use kova::{CheckError, Decision, WordAlgorithm};

use crate::linearize::{Checked, Cost, Spec};

fn capacity_error(cost: u64, capacity: u64) -> Result<(), CheckError> {
    if cost > capacity {
        Err(CheckError::CostExceedsCapacity { cost, capacity })
    } else {
        Ok(())
    }
}

/// `check_n(cost)` on a plain word through the algorithm's pure `decide`, as `check_cell` does on
/// the atomic one.
pub fn decide_word<W: WordAlgorithm>(
    algorithm: &W,
    word: &mut u64,
    now: u64,
    cost: u64,
) -> Result<Decision, CheckError> {
    capacity_error(cost, algorithm.capacity())?;
    let (decision, new) = algorithm.decide(*word, now, cost);
    *word = new;
    Ok(decision)
}

/// A single-word algorithm's pure decision function, state = the packed word.
#[derive(Debug, Clone, Copy)]
pub struct WordSpec<W>(pub W);

impl<W: WordAlgorithm> Spec for WordSpec<W> {
    type State = u64;
    type Op = Cost;
    type Output = Checked;

    fn needs_monotone_time(&self) -> bool {
        false
    }

    fn call(&self, word: &mut u64, now: u64, &Cost(cost): &Cost) -> Checked {
        Checked(decide_word(&self.0, word, now, cost))
    }
}

/// The sliding log as a list of admitted units' times (never pruned, so a stale reading sees the
/// same units the ring would).
#[derive(Debug, Clone, Copy)]
pub struct LogSpec {
    /// Units per window.
    pub limit: u64,
    /// Window length in nanoseconds.
    pub period: u64,
}

impl Spec for LogSpec {
    type State = Vec<u64>;
    type Op = Cost;
    type Output = Checked;

    fn needs_monotone_time(&self) -> bool {
        false
    }

    fn call(&self, times: &mut Vec<u64>, now: u64, &Cost(cost): &Cost) -> Checked {
        Checked(self.decide(times, now, cost))
    }
}

impl LogSpec {
    fn decide(&self, times: &mut Vec<u64>, now: u64, cost: u64) -> Result<Decision, CheckError> {
        capacity_error(cost, self.limit)?;
        // The log keeps unit times non-decreasing: a reading older than the newest unit counts
        // as that unit's time.
        let now = times.last().map_or(now, |&newest| now.max(newest));
        let inside: Vec<u64> = times.iter().copied().filter(|&t| now - t < self.period).collect();
        let in_window = inside.len() as u64;
        let reset = inside.last().map_or(0, |&t| t + self.period - now);
        if cost == 0 {
            return Ok(Decision::allowed(self.limit, self.limit - in_window, reset));
        }
        if in_window + cost <= self.limit {
            times.resize(times.len() + cost as usize, now);
            Ok(Decision::allowed(self.limit, self.limit - in_window - cost, self.period))
        } else {
            let must_leave = (in_window + cost - self.limit) as usize;
            let retry = inside[must_leave - 1] + self.period - now;
            Ok(Decision::denied(self.limit, self.limit - in_window, retry, reset))
        }
    }
}

/// One of kova's reference models.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reference {
    /// For Gcra and TokenBucket.
    Bucket(BucketModel),
    /// For FixedWindow.
    Fixed(FixedWindowModel),
    /// For SlidingWindowCounter.
    Counter(SlidingCounterModel),
    /// For SlidingWindowLog.
    Log(SlidingLogModel),
}

/// A reference model behind the capacity check every limiter makes first.
#[derive(Debug, Clone, Copy)]
pub struct ReferenceSpec {
    /// The algorithm's capacity (largest admissible cost).
    pub capacity: u64,
}

impl Spec for ReferenceSpec {
    type State = Reference;
    type Op = Cost;
    type Output = Checked;

    fn needs_monotone_time(&self) -> bool {
        true
    }

    fn call(&self, model: &mut Reference, now: u64, &Cost(cost): &Cost) -> Checked {
        Checked(capacity_error(cost, self.capacity).map(|()| match model {
            Reference::Bucket(m) => m.decide(now, cost),
            Reference::Fixed(m) => m.decide(now, cost),
            Reference::Counter(m) => m.decide(now, cost),
            Reference::Log(m) => m.decide(now, cost),
        }))
    }
}
