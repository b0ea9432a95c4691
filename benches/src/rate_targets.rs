//! The per-key rate targets: every algorithm admits its quota's rate within 1% at every
//! offered rate (with governor's more accurate row beside), and the sliding window log as many
//! as any exact sliding window could of the same requests.

use crate::comparison::governor_beside;
use crate::report::{RateRecord, Report, Status, SubjectKind, TargetResult};
use crate::stats::si;
use crate::target_ratio::not_measured;

impl Report {
    /// Per offered rate (and small burst), the worst of the five algorithms against the quota;
    /// then the log against an exact window.
    pub(crate) fn rate_targets(&self, t: &mut Vec<TargetResult>) {
        let mut offered: Vec<(Option<u64>, f64)> =
            self.rates.iter().map(|r| (r.burst, r.offered_target)).collect();
        offered.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        offered.dedup();
        for (burst, o) in offered {
            let rows: Vec<&RateRecord> = self
                .rates
                .iter()
                .filter(|r| r.offered_target == o && r.burst == burst && r.kind == SubjectKind::Kova)
                .collect();
            let worst = rows.iter().max_by(|a, b| a.error_pct.abs().total_cmp(&b.error_pct.abs()));
            let burst_text = burst.map_or(String::new(), |b| format!(", burst {b}"));
            let name = format!(
                "per-key rate, {}/s offered{burst_text}: admitted vs quota, all five algorithms",
                si(o)
            );
            t.push(match worst {
                Some(w) => TargetResult {
                    name,
                    goal: "within 1%".into(),
                    measured: format!(
                        "worst {:+.3}% ({}){}",
                        w.error_pct,
                        w.subject,
                        governor_beside(
                            self.rates
                                .iter()
                                .filter(|r| r.offered_target == o && r.burst == burst)
                                .map(|r| (r.subject.as_str(), r.error_pct)),
                            "closer to the quota",
                            |e| e.abs(),
                            |e| format!("{e:+.3}%"),
                        )
                    ),
                    status: Status::from_bool(rows.len() == 5 && w.error_pct.abs() <= 1.0),
                    within_noise: false,
                },
                None => not_measured(name, "within 1%"),
            });
        }
        if let Some(t_log) = self.exact_window_target() {
            t.push(t_log);
        }
    }

    /// The sliding window log against the most an exact sliding window admits of the same
    /// requests, over every offered rate: the bound on its per-key rate rows that any exact
    /// limiter shares. `None` when no log row carries it.
    fn exact_window_target(&self) -> Option<TargetResult> {
        let gaps: Vec<(f64, &RateRecord)> = self
            .rates
            .iter()
            .filter_map(|r| r.exact_window_per_sec.map(|e| ((r.admitted_per_sec / e - 1.0) * 100.0, r)))
            .collect();
        let (gap, worst) = gaps.iter().max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))?;
        let burst = worst.burst.map_or(String::new(), |b| format!(", burst {b}"));
        Some(TargetResult {
            name: "per-key rate, sliding_window_log, every offered rate: admitted vs the most an exact \
                   sliding window admits of the same requests"
                .into(),
            goal: "within 1%".into(),
            measured: format!(
                "worst {gap:+.3}% ({}/s offered{burst}: {:+.3}% of the quota)",
                si(worst.offered_target),
                worst.error_pct
            ),
            status: Status::from_bool(gaps.iter().all(|(g, _)| g.abs() <= 1.0)),
            within_noise: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::*;

    #[test]
    fn the_rate_target_names_governors_more_accurate_row() {
        let row = |subject: &str, kind, error_pct: f64| RateRecord {
            subject: subject.into(),
            kind,
            offered_target: 1e4,
            offered_per_sec: 1e4,
            quota_per_sec: 5e3,
            admitted_per_sec: 5e3 * (1.0 + error_pct / 100.0),
            error_pct,
            burst: None,
            exact_window_per_sec: None,
        };
        let mut r = report(vec![]);
        r.rates = ["token_bucket", "gcra", "fixed_window", "sliding_window_counter", "sliding_window_log"]
            .into_iter()
            .map(|a| row(a, SubjectKind::Kova, if a == "fixed_window" { -0.2 } else { 0.0 }))
            .chain([
                row("governor", SubjectKind::Peer, 0.3),
                row(crate::governor_tuned::GOVERNOR_TUNED, SubjectKind::Peer, -0.1),
            ])
            .collect();
        let mut t = Vec::new();
        r.rate_targets(&mut t);
        assert_eq!(t[0].status, Status::Met);
        assert_eq!(
            t[0].measured,
            "worst -0.200% (fixed_window); governor_tuned -0.100%, the closer to the quota of governor's two \
             rows; governor +0.300%"
        );
    }

    #[test]
    fn the_log_is_held_to_the_most_an_exact_window_admits() {
        let row = |admitted: f64, exact: Option<f64>, burst| RateRecord {
            subject: "sliding_window_log".into(),
            kind: SubjectKind::Kova,
            offered_target: 2e5,
            offered_per_sec: 2e5,
            quota_per_sec: 1e5,
            admitted_per_sec: admitted,
            error_pct: (admitted / 1e5 - 1.0) * 100.0,
            burst,
            exact_window_per_sec: exact,
        };
        let target = |rates: Vec<RateRecord>| {
            let mut r = report(vec![]);
            r.rates = rates;
            r.exact_window_target()
        };
        assert!(target(vec![row(97e3, None, None)]).is_none());
        // 3% under the quota, 0.5% under what an exact window admits of the same requests.
        let met = target(vec![row(99.9e3, Some(1e5), None), row(96.5e3, Some(97e3), Some(10))]).unwrap();
        assert_eq!(met.status, Status::Met, "{met:?}");
        assert!(met.measured.contains("-0.515%") && met.measured.contains("burst 10"), "{met:?}");
        let missed = target(vec![row(95e3, Some(97e3), Some(10))]).unwrap();
        assert_eq!(missed.status, Status::NotMet, "{missed:?}");
    }
}
