//! Accuracy: every algorithm replayed on the same traces with a [`ManualClock`], against the
//! exact sliding log ([`SlidingLogModel`]).
//!
//! - **Boundary burst** (the seeds' example): 60 per minute; a client sends 60 requests in the
//!   second before a window edge and 60 in the second after it. Reported: the most admitted in
//!   any sliding window of one period.
//! - **Flood**: a client offers 10x the limit, evenly, for five periods. Same measure.
//! - **Realistic trace**: many clients (normal, heavy, abusive), Poisson arrivals with bursts and
//!   on/off sessions. Each client's requests go through each algorithm and through the reference
//!   independently; a request is *wrongly allowed* when the algorithm admits it and the reference
//!   denies it, *wrongly denied* the other way round. The admitted-rate gap compares, per client
//!   and per period-long window, the algorithm's admitted count with the reference's.
//! - **Cloudflare's method** for the sliding window counter ([`estimate_vs_exact`]): at each
//!   request, the counter's estimate against the exact count, both over all requests (the way
//!   Cloudflare's 2017 figures were measured), so the two see the same history.

use std::time::Duration;

use kova::{Algorithm, AlgorithmKind, Quota};
use rayon::prelude::*;

use crate::peer_accuracy::{governor_accuracy, pingora_accuracy};
use crate::replay::{admitted_times, compare, pct, replay, replay_reference, Comparison};
use crate::report::{AccuracyRecord, CounterEstimate, TraceSummary};
use crate::scenarios::{each_algorithm, AlgorithmVisitor};
use crate::sketch_accuracy::sketch_accuracy;
pub use crate::trace::{boundary_trace, client_times, flood_trace, ClientClass, TraceConfig};
use kova::model::max_in_sliding_window;

/// The counter's estimate against the exact sliding count, at every request of one client.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EstimateStats {
    /// Requests compared.
    pub requests: u64,
    /// Requests where exactly one of the two says "over the limit".
    pub disagree: u64,
    /// Of those, the estimate said "under" while the exact count was over.
    pub under: u64,
    /// Sum of `|estimate - exact| / exact`.
    pub gap_sum: f64,
}

impl EstimateStats {
    /// Adds another client's.
    pub fn merge(self, o: EstimateStats) -> EstimateStats {
        EstimateStats {
            requests: self.requests + o.requests,
            disagree: self.disagree + o.disagree,
            under: self.under + o.under,
            gap_sum: self.gap_sum + o.gap_sum,
        }
    }
}

/// At each request `i` at time `t` (all requests counted, none dropped): the exact count of
/// requests in `(t - period, t]` and the counter's estimate `prev * (period - elapsed) / period
/// + current` over aligned windows (integer arithmetic, scaled by `period`); "over" means more
/// than `limit`.
pub fn estimate_vs_exact(times: &[u64], limit: u64, period: u64) -> EstimateStats {
    let mut stats = EstimateStats { requests: times.len() as u64, ..EstimateStats::default() };
    let p = u128::from(period);
    let (mut lo, mut window_start, mut prev, mut current) = (0usize, 0usize, 0u64, 0u64);
    let mut window = None;
    for (i, &t) in times.iter().enumerate() {
        // Exact: requests j <= i with t - t_j < period.
        while t - times[lo] >= period {
            lo += 1;
        }
        let exact = (i - lo + 1) as u128;
        let w = t / period;
        if window != Some(w) {
            // Counts of the previous aligned window (w - 1) from the requests of window `window`.
            prev = if window == Some(w.wrapping_sub(1)) { (i - window_start) as u64 } else { 0 };
            window = Some(w);
            window_start = i;
            current = 0;
        }
        current += 1;
        let elapsed = u128::from(t % period);
        let scaled_estimate = u128::from(prev) * (p - elapsed) + u128::from(current) * p;
        let limit_scaled = u128::from(limit) * p;
        let (est_over, exact_over) = (scaled_estimate > limit_scaled, exact * p > limit_scaled);
        if est_over != exact_over {
            stats.disagree += 1;
            stats.under += u64::from(exact_over);
        }
        let estimate = scaled_estimate as f64 / p as f64;
        stats.gap_sum += (estimate - exact as f64).abs() / exact as f64;
    }
    stats
}

/// The settings of the accuracy section.
#[derive(Debug, Clone, Copy)]
pub struct AccuracyConfig {
    /// The realistic trace.
    pub trace: TraceConfig,
}

struct ClientVisitor<'a> {
    quota: Quota,
    times: &'a [u64],
    reference: &'a [bool],
    out: [Comparison; 5],
    index: usize,
}

impl AlgorithmVisitor for ClientVisitor<'_> {
    fn visit<A: Algorithm>(&mut self, _kind: AlgorithmKind) {
        let decisions = replay::<A>(self.quota, self.times);
        self.out[self.index] = compare(self.times, &decisions, self.reference, self.quota.period_nanos());
        self.index += 1;
    }
}

struct BurstVisitor {
    quota: Quota,
    trace_quota: Quota,
    boundary: Vec<u64>,
    flood: Vec<u64>,
    out: Vec<(AlgorithmKind, usize, usize, usize)>,
}

impl AlgorithmVisitor for BurstVisitor {
    fn visit<A: Algorithm>(&mut self, kind: AlgorithmKind) {
        let period = self.quota.period_nanos();
        let b = admitted_times(&self.boundary, &replay::<A>(self.quota, &self.boundary));
        let f = admitted_times(&self.flood, &replay::<A>(self.quota, &self.flood));
        let cell = A::from_quota(self.trace_quota).map_or(0, |a| a.cell_bytes());
        self.out.push((kind, max_in_sliding_window(&b, period), max_in_sliding_window(&f, period), cell));
    }
}

/// Runs the accuracy section: boundary burst, flood and the realistic trace, for all five,
/// pingora's `Rate` and kova's sketch at pingora's memory, and the counter's estimate the way Cloudflare measured it.
pub fn run_accuracy(config: &AccuracyConfig) -> (Vec<AccuracyRecord>, TraceSummary, CounterEstimate) {
    // (a) the seeds' boundary burst and a flood, 60 per minute.
    let trace = config.trace;
    let quota = trace.quota();
    let burst_quota = Quota::per_minute(60).expect("valid quota");
    let period = burst_quota.period_nanos();
    let mut bursts = BurstVisitor {
        quota: burst_quota,
        trace_quota: quota,
        boundary: boundary_trace(60, period),
        flood: flood_trace(60, period),
        out: Vec::new(),
    };
    each_algorithm(&mut bursts);

    // (b) the realistic trace, generated and replayed client by client in parallel.
    let (per_algorithm, requests, ref_denied, estimate) = (0..trace.clients)
        .into_par_iter()
        .map(|client| {
            let times = client_times(&trace, client);
            let reference = replay_reference(quota, &times);
            let mut visitor = ClientVisitor {
                quota,
                times: &times,
                reference: &reference,
                out: [Comparison::default(); 5],
                index: 0,
            };
            each_algorithm(&mut visitor);
            let denied = reference.iter().filter(|&&ok| !ok).count() as u64;
            let estimate = estimate_vs_exact(&times, trace.limit, trace.period_ns);
            (visitor.out, times.len() as u64, denied, estimate)
        })
        .reduce(
            || ([Comparison::default(); 5], 0, 0, EstimateStats::default()),
            |(a, ra, da, ea), (b, rb, db, eb)| {
                let mut merged = a;
                for (m, o) in merged.iter_mut().zip(b) {
                    *m = m.merge(o);
                }
                (merged, ra + rb, da + db, ea.merge(eb))
            },
        );
    let records = bursts
        .out
        .iter()
        .zip(per_algorithm)
        .map(|(&(kind, boundary_max, flood_max, cell_bytes), cmp)| {
            cmp.into_record(kind.as_str(), 60, (boundary_max as u64, flood_max as u64), cell_bytes, None)
        })
        .collect();
    let mut records: Vec<AccuracyRecord> = records;
    records.push(governor_accuracy(&trace, burst_quota));
    records.push(pingora_accuracy(&trace, burst_quota));
    records.push(sketch_accuracy(&trace, burst_quota));
    let classes = (0..trace.clients).fold((0, 0, 0), |(n, h, a), i| match trace.class_of(i) {
        ClientClass::Normal => (n + 1, h, a),
        ClientClass::Heavy => (n, h + 1, a),
        ClientClass::Abusive => (n, h, a + 1),
    });
    let summary = TraceSummary {
        clients: trace.clients,
        requests,
        duration_s: Duration::from_nanos(trace.duration_ns).as_secs_f64(),
        quota: crate::scenarios::quota_words(quota),
        reference_denied_pct: pct(ref_denied, requests),
        classes,
    };
    let counter_estimate = CounterEstimate {
        requests: estimate.requests,
        wrong_pct: pct(estimate.disagree, estimate.requests),
        wrongly_allowed_pct: pct(estimate.under, estimate.requests),
        rate_gap_pct: if estimate.requests == 0 {
            0.0
        } else {
            estimate.gap_sum / estimate.requests as f64 * 100.0
        },
    };
    (records, summary, counter_estimate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kova::{FixedWindow, Gcra, SlidingWindowCounter, SlidingWindowLog};

    /// 2 per 10 ns. Requests at 8, 9, 10, 11, 15, 18, 19, 20.
    /// Reference (exact sliding log): 8 A, 9 A, 10 D, 11 D, 15 D, 18 A (8 left at 18),
    /// 19 A (9 left at 19), 20 D.
    /// Fixed window ([0,10), [10,20), [20,30)): 8 A, 9 A | 10 A, 11 A, 15 D, 18 D, 19 D | 20 A.
    const TIMES: [u64; 8] = [8, 9, 10, 11, 15, 18, 19, 20];

    fn quota() -> Quota {
        Quota::from_nanos(2, 10).unwrap()
    }

    #[test]
    fn reference_on_a_hand_checked_trace() {
        let reference = replay_reference(quota(), &TIMES);
        assert_eq!(reference, [true, true, false, false, false, true, true, false]);
    }

    #[test]
    fn fixed_window_against_the_reference() {
        let reference = replay_reference(quota(), &TIMES);
        let fixed = replay::<FixedWindow>(quota(), &TIMES);
        assert_eq!(fixed, [true, true, true, true, false, false, false, true]);
        let c = compare(&TIMES, &fixed, &reference, 10);
        // Wrongly allowed: 10, 11, 20. Wrongly denied: 18, 19.
        assert_eq!((c.requests, c.wrongly_allowed, c.wrongly_denied), (8, 3, 2));
        // [0,10) admits all on both sides (not limited); [10,20) 2 vs 2; [20,30) 1 vs 0, a
        // gap of 1 / max(0, 1) = 100%.
        assert_eq!((c.active_windows, c.limited_windows), (3, 2));
        assert!((c.gap_all_pct() - 100.0 / 3.0).abs() < 1e-9);
        assert!((c.gap_limited_pct() - 50.0).abs() < 1e-9);
        // The boundary burst: four admitted within one period ([8, 18)).
        let admitted = admitted_times(&TIMES, &fixed);
        assert_eq!(max_in_sliding_window(&admitted, 10), 4);
    }

    #[test]
    fn the_log_agrees_with_the_reference_exactly() {
        let reference = replay_reference(quota(), &TIMES);
        let log = replay::<SlidingWindowLog>(quota(), &TIMES);
        assert_eq!(log, reference);
        let c = compare(&TIMES, &log, &reference, 10);
        assert_eq!((c.wrongly_allowed, c.wrongly_denied), (0, 0));
        assert_eq!(c.gap_limited_pct(), 0.0);
    }

    #[test]
    fn boundary_burst_per_algorithm() {
        let quota = Quota::per_minute(60).unwrap();
        let period = quota.period_nanos();
        let trace = boundary_trace(60, period);
        assert_eq!(trace.len(), 120);
        let max = |d: Vec<bool>| max_in_sliding_window(&admitted_times(&trace, &d), period);
        // Fixed window lets both halves through: twice the limit within two seconds.
        assert_eq!(max(replay::<FixedWindow>(quota, &trace)), 120);
        // The log never exceeds the limit.
        assert_eq!(max(replay::<SlidingWindowLog>(quota, &trace)), 60);
        // GCRA: the full burst, then one per second refilled: 60 + 2 within the second after.
        let gcra = max(replay::<Gcra>(quota, &trace));
        assert!((60..=62).contains(&gcra), "{gcra}");
        // The counter: a small excess over the limit.
        let counter = max(replay::<SlidingWindowCounter>(quota, &trace));
        assert!((60..=62).contains(&counter), "{counter}");
    }

    #[test]
    fn counter_estimate_on_a_hand_checked_trace() {
        // Limit 2 per 10 ns. Requests at 5, 6, 12, 14.
        // t=5:  exact 1; window 0, prev 0, cur 1: estimate 1.        both under.
        // t=6:  exact 2; estimate 2.                                  both under (not > 2).
        // t=12: exact 3 (5, 6, 12); window 1, prev 2, elapsed 2: 2 * 8/10 + 1 = 2.6: both over.
        // t=14: exact 4 ((4, 14] still holds 5); 2 * 6/10 + 2 = 3.2: both over.
        let s = estimate_vs_exact(&[5, 6, 12, 14], 2, 10);
        assert_eq!((s.requests, s.disagree, s.under), (4, 0, 0));
        let gap = 0.0 + 0.0 + 0.4 / 3.0 + 0.8 / 4.0;
        assert!((s.gap_sum - gap).abs() < 1e-12, "{}", s.gap_sum);
        // Requests at 9, 9, 10: at t=10 exact 3 (over), estimate 2 * 10/10 + 1 = 3 (over).
        // At t=19: exact 1 (only itself), estimate 2 * 1/10 + 2 = 2.2 (over): disagree, the
        // estimate denies what the exact count allows.
        let s = estimate_vs_exact(&[9, 9, 10, 19], 2, 10);
        assert_eq!((s.disagree, s.under), (1, 0));
        // Two windows apart, the previous count is zero: at t=25 the estimate is 1 (not over),
        // as the exact count is. Carrying window 0's count of 2 would give 2 * 5/10 + 1 = 2
        // (over) and a disagreement.
        let s = estimate_vs_exact(&[1, 2, 25], 1, 10);
        assert_eq!((s.disagree, s.under), (0, 0));
    }
}
