//! Rounds: every throughput and feature measurement runs in several rounds, interleaved with
//! the other subjects of its scenario or section (so a slow moment of a shared machine hits them
//! all). A record keeps the median round's figures at every thread count ([`keep`]), and every
//! round's rate beside them
//! ([`Rounds`]): the rounds' spread is what the machine's noise did to that subject in this run,
//! and a target whose margin to its goal is smaller than the spread of the rows it compares is
//! marked "within noise" ([`noise_note`]): another run may land on the other side of its goal.

use crate::report::{FeatureRecord, Record};
use crate::stats::si;
use crate::throughput::RunResult;

/// The round a record keeps, at every thread count: the median round by throughput (the
/// project's standard: repeat, quote medians). On one thread the best round was kept before;
/// it is the one least disturbed, but quoting it flatters every subject by the machine's luck,
/// and a ratio of two best rounds is not what another run will see. The best round stays in
/// the record's rounds ([`Rounds::best_ops`]).
pub fn kept_round(rounds: Vec<RunResult>, _threads: usize) -> Option<RunResult> {
    median_round(rounds)
}

/// The median round by throughput; the lower median of an even count: a round that was
/// measured, not an average.
pub(crate) fn median_round(mut rounds: Vec<RunResult>) -> Option<RunResult> {
    rounds.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
    rounds.get(rounds.len().saturating_sub(1) / 2).copied()
}

/// The median of `values` (the lower median of an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// What a record keeps of its rounds.
#[derive(Debug, Clone)]
pub struct Kept {
    /// The kept round: the median ([`kept_round`]).
    pub round: RunResult,
    /// Every round's rate, in run order.
    pub round_ops_per_sec: Vec<f64>,
}

/// The median round of `rounds` and every round's rate; `None` without rounds.
pub fn keep(rounds: Vec<RunResult>, threads: usize) -> Option<Kept> {
    let round_ops_per_sec = rounds.iter().map(|r| r.ops_per_sec).collect();
    kept_round(rounds, threads).map(|round| Kept { round, round_ops_per_sec })
}

/// A record that keeps its rounds: a throughput row or a feature row.
pub trait Rounds {
    /// The kept (median) round's rate.
    fn kept_ops(&self) -> f64;

    /// Every round's rate, in run order (empty in reports written before they were kept).
    fn round_ops(&self) -> &[f64];

    /// The best round's rate, shown beside the median where the report has room; the kept
    /// rate where no rounds were kept.
    fn best_ops(&self) -> f64 {
        self.round_range().map_or(self.kept_ops(), |(_, max)| max)
    }

    /// The rounds' spread, `(max - min) / kept`, as a share of the kept (median) figure, the
    /// one every ratio is made of; `None` with fewer than two rounds (one round says nothing
    /// about noise).
    fn spread(&self) -> Option<f64> {
        if self.round_ops().len() < 2 || self.kept_ops() <= 0.0 {
            return None;
        }
        let (min, max) = self.round_range()?;
        Some((max - min) / self.kept_ops())
    }

    /// The rounds' spread in time per operation, nanoseconds (the slowest round's time less
    /// the fastest's); `None` with fewer than two rounds.
    fn spread_ns(&self) -> Option<f64> {
        let (min, max) = self.round_range().filter(|&(min, _)| self.round_ops().len() > 1 && min > 0.0)?;
        Some(1e9 / min - 1e9 / max)
    }

    /// The slowest and the fastest round's rate.
    fn round_range(&self) -> Option<(f64, f64)> {
        let min = self.round_ops().iter().copied().reduce(f64::min)?;
        let max = self.round_ops().iter().copied().reduce(f64::max)?;
        Some((min, max))
    }

    /// "24.10M-25.80M": the rounds' range, for the report; "-" with fewer than two rounds.
    fn range_text(&self) -> String {
        match self.round_range() {
            Some((min, max)) if self.round_ops().len() > 1 => format!("{}-{}", si(min), si(max)),
            _ => "-".into(),
        }
    }
}

impl Rounds for Record {
    fn kept_ops(&self) -> f64 {
        self.ops_per_sec
    }

    fn round_ops(&self) -> &[f64] {
        &self.round_ops_per_sec
    }
}

impl Rounds for FeatureRecord {
    fn kept_ops(&self) -> f64 {
        self.ops_per_sec
    }

    fn round_ops(&self) -> &[f64] {
        &self.round_ops_per_sec
    }
}

/// How far the rounds let the ratio `num / den` of two rows' rates reach above and below the
/// ratio of their kept (median) rates, as shares of it: up to the fastest `num` round over the
/// slowest `den` round, down to the slowest over the fastest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioNoise {
    /// `max(num) / min(den)` over the medians' ratio, less 1.
    pub up: f64,
    /// 1 less `min(num) / max(den)` over the medians' ratio.
    pub down: f64,
}

/// The [`RatioNoise`] of `num / den`; `None` when a row has fewer than two rounds.
pub fn ratio_noise<R: Rounds>(num: &R, den: &R) -> Option<RatioNoise> {
    let enough = |r: &R| r.round_ops().len() > 1 && r.kept_ops() > 0.0;
    if !enough(num) || !enough(den) {
        return None;
    }
    let ((num_min, num_max), (den_min, den_max)) = (num.round_range()?, den.round_range()?);
    if den_min <= 0.0 {
        return None;
    }
    let kept = num.kept_ops() / den.kept_ops();
    Some(RatioNoise { up: num_max / den_min / kept - 1.0, down: 1.0 - num_min / den_max / kept })
}

/// "within noise: margin M% under the rounds' spread S%" when the rounds could have put the
/// ratio `figure` on the other side of `goal`: the goal lies between the lowest and the highest
/// ratio the two rows' rounds make ([`RatioNoise`]), on the side it is on (a miss is within
/// noise only if the rounds reach up to the goal, a pass only if they reach down to it). `None`
/// otherwise, or when the noise is unknown.
pub fn noise_note(figure: f64, goal: f64, noise: Option<RatioNoise>) -> Option<String> {
    let noise = noise?;
    if figure <= 0.0 || goal <= 0.0 {
        return None;
    }
    let (margin, spread) =
        if goal >= figure { (goal / figure - 1.0, noise.up) } else { (1.0 - goal / figure, noise.down) };
    (margin < spread).then(|| {
        format!("within noise: margin {:.1}% under the rounds' spread {:.1}%", margin * 100.0, spread * 100.0)
    })
}

/// The same for a sum or difference of times per operation: "within noise: margin M ns under
/// the rounds' spread S ns" when `figure_ns` is closer to `goal_ns` than the sum of `rows`'
/// spreads in nanoseconds (to first order, the error of a sum or difference is the sum of its
/// terms'); `None` otherwise, or when a row has no spread.
pub fn noise_note_ns<R: Rounds>(figure_ns: f64, goal_ns: f64, rows: &[&R]) -> Option<String> {
    let noise: f64 = rows.iter().map(|r| r.spread_ns()).sum::<Option<f64>>()?;
    let margin = (figure_ns - goal_ns).abs();
    (margin < noise)
        .then(|| format!("within noise: margin {margin:.1} ns under the rounds' spread {noise:.1} ns"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::record;
    use crate::report::SubjectKind;

    /// The project's standard at every thread count: the median round, never the best.
    #[test]
    fn every_thread_count_keeps_the_median_round() {
        let round = |ops: f64| RunResult { ops_per_sec: ops, ..RunResult::default() };
        let rounds = vec![round(5.0), round(1.0), round(9.0), round(3.0), round(7.0)];
        assert_eq!(kept_round(rounds.clone(), 1).unwrap().ops_per_sec, 5.0);
        assert_eq!(kept_round(rounds, 2).unwrap().ops_per_sec, 5.0);
        assert_eq!(kept_round(vec![round(4.0), round(2.0)], 1).unwrap().ops_per_sec, 2.0);
        assert!(kept_round(Vec::new(), 2).is_none());
        let one = keep(rounds_of(&[5.0, 1.0, 9.0]), 1).unwrap();
        assert_eq!(one.round.ops_per_sec, 5.0);
        assert_eq!(one.round_ops_per_sec, [5.0, 1.0, 9.0]);
        assert!(keep(Vec::new(), 1).is_none());
        assert_eq!(median(&[5.0, 1.0, 9.0, 3.0]), Some(3.0));
        assert_eq!(median(&[]), None);
    }

    /// The spread is read against the median, as the ratios are, and the best round is kept
    /// beside it.
    #[test]
    fn the_spread_divides_by_the_median_and_the_best_round_is_kept_beside_it() {
        let mut one = record("gcra", SubjectKind::Kova, "direct", 1, 100e6);
        one.round_ops_per_sec = vec![90e6, 100e6, 120e6];
        assert!((one.spread().unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(one.best_ops(), 120e6);
    }

    fn rounds_of(ops: &[f64]) -> Vec<RunResult> {
        ops.iter().map(|&ops_per_sec| RunResult { ops_per_sec, ..RunResult::default() }).collect()
    }

    #[test]
    fn a_difference_of_times_is_within_noise_of_its_terms_spreads_in_nanoseconds() {
        // 10 ns and 12.5 ns a call: rounds at 100M/s and 80M/s, a spread of 2.5 ns.
        let mut wait = record("until_ready", SubjectKind::Kova, "waiting", 1, 100e6);
        wait.round_ops_per_sec = vec![100e6, 80e6];
        let mut check = record("check", SubjectKind::Kova, "waiting", 1, 100e6);
        check.round_ops_per_sec = vec![100e6, 100e6];
        assert!((wait.spread_ns().unwrap() - 2.5).abs() < 1e-9);
        assert_eq!(check.spread_ns(), Some(0.0));
        assert_eq!(
            noise_note_ns(1.0, 3.0, &[&wait, &check]).as_deref(),
            Some("within noise: margin 2.0 ns under the rounds' spread 2.5 ns")
        );
        assert_eq!(noise_note_ns(1.0, 4.0, &[&wait, &check]), None);
        let one = record("check", SubjectKind::Kova, "waiting", 1, 100e6);
        assert_eq!(noise_note_ns(1.0, 1.1, &[&wait, &one]), None);
    }

    #[test]
    fn the_spread_of_the_rounds_marks_a_margin_within_noise() {
        let mut a = record("gcra", SubjectKind::Kova, "direct", 2, 100e6);
        a.round_ops_per_sec = vec![95e6, 100e6, 104e6];
        let mut b = record("governor", SubjectKind::Peer, "direct", 2, 50e6);
        b.round_ops_per_sec = vec![50e6, 51e6];
        assert!((a.spread().unwrap() - 0.09).abs() < 1e-12);
        assert_eq!(a.range_text(), "95.00M-104.00M");
        let n = ratio_noise(&a, &b);
        // The medians' ratio is 2.0; the rounds reach 104 / 50 = 2.08 and 95 / 51 = 1.863.
        let RatioNoise { up, down } = n.unwrap();
        assert!((up - 0.04).abs() < 1e-12 && (down - (1.0 - 95.0 / 51.0 / 2.0)).abs() < 1e-12);
        // 2.0x against a goal of 1.9x: the rounds reach down to 1.863, past it.
        assert_eq!(
            noise_note(2.0, 1.9, n).as_deref(),
            Some("within noise: margin 5.0% under the rounds' spread 6.9%")
        );
        assert_eq!(noise_note(2.0, 1.5, n), None);
        // Against a goal of 2.1x the miss is clear: no round pair reaches 2.1.
        assert_eq!(noise_note(2.0, 2.1, n), None);
        assert_eq!(
            noise_note(2.0, 2.05, n).as_deref(),
            Some("within noise: margin 2.5% under the rounds' spread 4.0%")
        );
        // One round: no spread, so no verdict either way.
        let one = record("gcra", SubjectKind::Kova, "direct", 1, 1e6);
        assert_eq!(one.spread(), None);
        assert_eq!(one.range_text(), "-");
        assert_eq!(ratio_noise(&a, &one), None);
        assert_eq!(noise_note(1.0, 1.0, None), None);
    }
}
