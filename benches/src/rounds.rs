//! Rounds: every throughput measurement runs in several rounds, interleaved with the other
//! subjects of its scenario (so a slow moment of a shared machine hits them all). A record keeps
//! one round's figures ([`kept_round`]) and every round's rate beside them
//! (`Record::round_ops_per_sec`): the rounds' spread is what the machine's noise did to that
//! subject in this run, and a target whose margin to its goal is smaller than the spread of the
//! rows it compares is marked "within noise" ([`noise_note`]): another run may land on the other
//! side of its goal.

use crate::report::Record;
use crate::stats::si;
use crate::throughput::RunResult;

/// The round a record keeps: on one thread the best (the least disturbed by the rest of the
/// machine); with several the median, since under contention the best round is the one where a
/// thread was off the CPU and the others ran uncontended.
pub fn kept_round(rounds: Vec<RunResult>, threads: usize) -> Option<RunResult> {
    match threads {
        0 | 1 => rounds.into_iter().max_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec)),
        _ => median_round(rounds),
    }
}

/// The median round by throughput; the lower median of an even count: a round that was
/// measured, not an average.
pub(crate) fn median_round(mut rounds: Vec<RunResult>) -> Option<RunResult> {
    rounds.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
    rounds.get(rounds.len().saturating_sub(1) / 2).copied()
}

impl Record {
    /// The rounds' spread, `(max - min) / kept`, as a share of the kept figure; `None` with
    /// fewer than two rounds (one round says nothing about noise).
    pub fn spread(&self) -> Option<f64> {
        if self.round_ops_per_sec.len() < 2 || self.ops_per_sec <= 0.0 {
            return None;
        }
        let (min, max) = self.round_range()?;
        Some((max - min) / self.ops_per_sec)
    }

    /// The slowest and the fastest round's rate.
    pub fn round_range(&self) -> Option<(f64, f64)> {
        let min = self.round_ops_per_sec.iter().copied().reduce(f64::min)?;
        let max = self.round_ops_per_sec.iter().copied().reduce(f64::max)?;
        Some((min, max))
    }

    /// "24.10M-25.80M": the rounds' range, for the report; "-" with fewer than two rounds.
    pub fn range_text(&self) -> String {
        match self.round_range() {
            Some((min, max)) if self.round_ops_per_sec.len() > 1 => format!("{}-{}", si(min), si(max)),
            _ => "-".into(),
        }
    }
}

/// The noise of a ratio of `rows`' throughputs: the sum of their spreads (to first order, the
/// relative error of a ratio is the sum of its terms'); `None` when a row has no spread.
pub fn noise(rows: &[&Record]) -> Option<f64> {
    rows.iter().map(|r| r.spread()).sum()
}

/// "within noise: margin M% under the rounds' spread S%" when `figure` is closer to
/// `goal` (relatively) than `noise`; `None` otherwise, or when the noise is unknown.
pub fn noise_note(figure: f64, goal: f64, noise: Option<f64>) -> Option<String> {
    let noise = noise?;
    let margin = (figure / goal - 1.0).abs();
    (margin < noise).then(|| {
        format!("within noise: margin {:.1}% under the rounds' spread {:.1}%", margin * 100.0, noise * 100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::record;
    use crate::report::SubjectKind;

    #[test]
    fn one_thread_keeps_the_best_round_more_keep_the_median() {
        let round = |ops: f64| RunResult { ops_per_sec: ops, ..RunResult::default() };
        let rounds = vec![round(5.0), round(1.0), round(9.0), round(3.0), round(7.0)];
        assert_eq!(kept_round(rounds.clone(), 1).unwrap().ops_per_sec, 9.0);
        assert_eq!(kept_round(rounds, 2).unwrap().ops_per_sec, 5.0);
        assert_eq!(kept_round(vec![round(4.0), round(2.0)], 2).unwrap().ops_per_sec, 2.0);
        assert!(kept_round(Vec::new(), 2).is_none());
    }

    #[test]
    fn the_spread_of_the_rounds_marks_a_margin_within_noise() {
        let mut a = record("gcra", SubjectKind::Kova, "direct", 2, 100e6);
        a.round_ops_per_sec = vec![95e6, 100e6, 104e6];
        let mut b = record("governor", SubjectKind::Peer, "direct", 2, 50e6);
        b.round_ops_per_sec = vec![50e6, 51e6];
        assert!((a.spread().unwrap() - 0.09).abs() < 1e-12);
        assert_eq!(a.range_text(), "95.00M-104.00M");
        let n = noise(&[&a, &b]);
        assert!((n.unwrap() - 0.11).abs() < 1e-12);
        // 2.0x against a goal of 1.9x: a margin of 5.3% inside 11%.
        assert_eq!(
            noise_note(2.0, 1.9, n).as_deref(),
            Some("within noise: margin 5.3% under the rounds' spread 11.0%")
        );
        assert_eq!(noise_note(2.0, 1.5, n), None);
        // One round: no spread, so no verdict either way.
        let one = record("gcra", SubjectKind::Kova, "direct", 1, 1e6);
        assert_eq!(one.spread(), None);
        assert_eq!(one.range_text(), "-");
        assert_eq!(noise(&[&a, &one]), None);
        assert_eq!(noise_note(1.0, 1.0, None), None);
    }
}
