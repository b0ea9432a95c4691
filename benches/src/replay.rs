//! The replays every accuracy row shares: a client's request times through an algorithm (or the
//! exact reference) on a manual clock, and the comparison of its decisions with the reference's.

use kova::model::SlidingLogModel;
use kova::{Algorithm, ManualClock, Quota, RateLimiter};

use crate::report::AccuracyRecord;

/// Replays `times` (non-decreasing nanoseconds) through algorithm `A` on a manual clock; one
/// decision per request.
pub fn replay<A: Algorithm>(quota: Quota, times: &[u64]) -> Vec<bool> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::<A, ManualClock>::with_clock(quota, clock.clone()).expect("valid quota");
    times
        .iter()
        .map(|&t| {
            clock.set(t);
            limiter.check().is_allowed()
        })
        .collect()
}

/// Replays `times` through the exact sliding-log reference.
pub fn replay_reference(quota: Quota, times: &[u64]) -> Vec<bool> {
    let mut model = SlidingLogModel::new(quota.limit(), quota.period_nanos());
    times.iter().map(|&t| model.decide(t, 1).is_allowed()).collect()
}

/// The admitted timestamps.
pub fn admitted_times(times: &[u64], decisions: &[bool]) -> Vec<u64> {
    times.iter().zip(decisions).filter(|(_, &ok)| ok).map(|(&t, _)| t).collect()
}

/// How one algorithm's decisions differ from the reference's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Comparison {
    /// Requests compared.
    pub requests: u64,
    /// Admitted by the algorithm, denied by the reference.
    pub wrongly_allowed: u64,
    /// Denied by the algorithm, admitted by the reference.
    pub wrongly_denied: u64,
    /// Sum over limited windows of `|admitted - reference| / reference`.
    pub gap_limited_sum: f64,
    /// Windows where either side denied something.
    pub limited_windows: u64,
    /// Sum over active windows (any request) of the same relative gap.
    pub gap_all_sum: f64,
    /// Windows with at least one request.
    pub active_windows: u64,
}

impl Comparison {
    /// The accuracy row of `algorithm`: this comparison on the trace, beside the burst tests'
    /// `limit` and `(boundary, flood)` results, and its state's size per key (`cell_bytes`), or
    /// for all keys (`fixed_bytes`).
    pub fn into_record(
        self,
        algorithm: &str,
        limit: u64,
        (boundary_max, flood_max): (u64, u64),
        cell_bytes: usize,
        fixed_bytes: Option<usize>,
    ) -> AccuracyRecord {
        AccuracyRecord {
            algorithm: algorithm.to_owned(),
            limit,
            boundary_max,
            flood_max,
            requests: self.requests,
            wrongly_allowed_pct: self.wrongly_allowed_pct(),
            wrongly_denied_pct: self.wrongly_denied_pct(),
            rate_gap_limited_pct: self.gap_limited_pct(),
            rate_gap_all_pct: self.gap_all_pct(),
            cell_bytes,
            fixed_bytes,
            over_grants: None,
        }
    }

    /// Adds another client's comparison.
    pub fn merge(self, o: Comparison) -> Comparison {
        Comparison {
            requests: self.requests + o.requests,
            wrongly_allowed: self.wrongly_allowed + o.wrongly_allowed,
            wrongly_denied: self.wrongly_denied + o.wrongly_denied,
            gap_limited_sum: self.gap_limited_sum + o.gap_limited_sum,
            limited_windows: self.limited_windows + o.limited_windows,
            gap_all_sum: self.gap_all_sum + o.gap_all_sum,
            active_windows: self.active_windows + o.active_windows,
        }
    }

    /// Percent of requests wrongly allowed.
    pub fn wrongly_allowed_pct(&self) -> f64 {
        pct(self.wrongly_allowed, self.requests)
    }

    /// Percent of requests wrongly denied.
    pub fn wrongly_denied_pct(&self) -> f64 {
        pct(self.wrongly_denied, self.requests)
    }

    /// Mean relative admitted-rate gap over limited windows, percent.
    pub fn gap_limited_pct(&self) -> f64 {
        if self.limited_windows == 0 {
            0.0
        } else {
            self.gap_limited_sum / self.limited_windows as f64 * 100.0
        }
    }

    /// Mean relative admitted-rate gap over all active windows, percent.
    pub fn gap_all_pct(&self) -> f64 {
        if self.active_windows == 0 {
            0.0
        } else {
            self.gap_all_sum / self.active_windows as f64 * 100.0
        }
    }
}

pub(crate) fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64 * 100.0
    }
}

/// Compares one client's decisions with the reference's, windows aligned at multiples of
/// `period` nanoseconds.
pub fn compare(times: &[u64], decisions: &[bool], reference: &[bool], period: u64) -> Comparison {
    let mut c = Comparison { requests: times.len() as u64, ..Comparison::default() };
    let mut i = 0;
    while i < times.len() {
        let window = times[i] / period;
        let (mut admitted, mut admitted_ref, mut denied_any) = (0u64, 0u64, false);
        while i < times.len() && times[i] / period == window {
            let (a, r) = (decisions[i], reference[i]);
            c.wrongly_allowed += u64::from(a && !r);
            c.wrongly_denied += u64::from(!a && r);
            admitted += u64::from(a);
            admitted_ref += u64::from(r);
            denied_any |= !a || !r;
            i += 1;
        }
        let gap = admitted.abs_diff(admitted_ref) as f64 / admitted_ref.max(1) as f64;
        c.active_windows += 1;
        c.gap_all_sum += gap;
        if denied_any {
            c.limited_windows += 1;
            c.gap_limited_sum += gap;
        }
    }
    c
}
