//! The sketch's targets (issue 36): throughput at pingora's memory, at least 1.5x pingora_rate in
//! the keyed scenarios at 1 and 2 threads; on the realistic trace, wrongly allowed no more than
//! exact GCRA's, wrongly denied below pingora's, and no key ever granted beyond its quota.

use crate::pingora::PINGORA_BYTES;
use crate::report::{AccuracyRecord, Report, Status, TargetResult, PINGORA};
use crate::sketch_subject::SKETCH;
use crate::target_ratio::not_measured;

/// The keyed scenarios where the sketch is measured against pingora's `Rate`.
const SCENARIOS: [&str; 4] = ["keyed_1m_uniform", "keyed_1m_zipf", "keyed_churn", "keyed_flood"];

impl Report {
    /// The sketch's throughput and accuracy targets.
    pub(crate) fn sketch_targets(&self, t: &mut Vec<TargetResult>) {
        for scenario in SCENARIOS {
            for (threads, count) in [(1, "1 thread"), (2, "2 threads")] {
                t.push(self.ratio_target(
                    format!("{scenario}, {count}, {SKETCH} at pingora's memory: vs {PINGORA} (sketch issue)"),
                    ">= 1.5x",
                    (scenario, SKETCH, threads),
                    (scenario, PINGORA, threads),
                    1.5,
                ));
            }
        }
        let acc = |a: &str| self.accuracy.iter().find(|r| r.algorithm == a);
        let (sketch, gcra, pingora) = (acc(SKETCH), acc("gcra"), acc(PINGORA));
        t.push(sketch_vs_exact(sketch, gcra));
        let name = format!("{SKETCH}, realistic trace: wrongly denied vs {PINGORA} at the same memory");
        t.push(match (sketch, pingora) {
            (Some(s), Some(p)) => TargetResult {
                name,
                goal: "below".into(),
                measured: format!(
                    "{:.4}% vs {:.4}% ({} B each)",
                    s.wrongly_denied_pct,
                    p.wrongly_denied_pct,
                    s.fixed_bytes.unwrap_or(PINGORA_BYTES)
                ),
                status: Status::from_bool(
                    s.wrongly_denied_pct < p.wrongly_denied_pct && s.fixed_bytes == p.fixed_bytes,
                ),
                within_noise: false,
            },
            _ => not_measured(name, "below"),
        });
    }
}

/// Wrongly allowed no more than the exact GCRA table's, no over-grant on the trace, and the
/// bursts within GCRA's.
fn sketch_vs_exact(sketch: Option<&AccuracyRecord>, gcra: Option<&AccuracyRecord>) -> TargetResult {
    let name = format!(
        "{SKETCH}, realistic trace: wrongly allowed vs exact gcra, over-grants, bursts (sketch issue)"
    );
    let goal = "<= gcra's, 0, <= gcra's";
    let (Some(s), Some(g), Some(over)) = (sketch, gcra, sketch.and_then(|s| s.over_grants)) else {
        return not_measured(name, goal);
    };
    TargetResult {
        name,
        goal: goal.into(),
        measured: format!(
            "{:.4}% vs {:.4}%; {over} over-grants; boundary {} / flood {} vs {} / {}",
            s.wrongly_allowed_pct,
            g.wrongly_allowed_pct,
            s.boundary_max,
            s.flood_max,
            g.boundary_max,
            g.flood_max
        ),
        status: Status::from_bool(
            s.wrongly_allowed_pct <= g.wrongly_allowed_pct
                && over == 0
                && s.boundary_max <= g.boundary_max
                && s.flood_max <= g.flood_max,
        ),
        within_noise: false,
    }
}

#[cfg(test)]
mod tests {
    use crate::report::test_support::*;
    use crate::report::*;
    use crate::sketch_subject::SKETCH;

    fn accuracy(algorithm: &str, allowed: f64, denied: f64, over: Option<u64>) -> AccuracyRecord {
        AccuracyRecord {
            algorithm: algorithm.into(),
            limit: 60,
            boundary_max: 61,
            flood_max: 61,
            requests: 100,
            wrongly_allowed_pct: allowed,
            wrongly_denied_pct: denied,
            rate_gap_limited_pct: 1.0,
            rate_gap_all_pct: 1.0,
            cell_bytes: 0,
            fixed_bytes: Some(crate::pingora::PINGORA_BYTES),
            over_grants: over,
        }
    }

    #[test]
    fn sketch_targets_come_from_the_numbers() {
        let mut r = report(vec![
            record(SKETCH, SubjectKind::Kova, "keyed_churn", 1, 30e6),
            record(PINGORA, SubjectKind::Peer, "keyed_churn", 1, 20e6),
            record(SKETCH, SubjectKind::Kova, "keyed_churn", 2, 29e6),
            record(PINGORA, SubjectKind::Peer, "keyed_churn", 2, 20e6),
        ]);
        r.accuracy = vec![
            accuracy(SKETCH, 0.5, 2.0, Some(0)),
            accuracy("gcra", 0.5, 1.0, None),
            accuracy(PINGORA, 3.0, 8.0, None),
        ];
        r.evaluate_targets();
        let status = |name: &str| r.targets.iter().find(|t| t.name.starts_with(name)).unwrap().status;
        assert_eq!(status("keyed_churn, 1 thread, kova_sketch"), Status::Met);
        assert_eq!(status("keyed_churn, 2 threads, kova_sketch"), Status::NotMet);
        assert_eq!(status("keyed_flood, 1 thread, kova_sketch"), Status::NotMeasured);
        assert_eq!(status("kova_sketch, realistic trace: wrongly allowed"), Status::Met);
        assert_eq!(status("kova_sketch, realistic trace: wrongly denied"), Status::Met);
        // One over-grant, or more wrongly allowed than exact GCRA, fails it.
        r.accuracy[0] = accuracy(SKETCH, 0.5, 2.0, Some(1));
        r.evaluate_targets();
        let status = |name: &str| r.targets.iter().find(|t| t.name.starts_with(name)).unwrap().status;
        assert_eq!(status("kova_sketch, realistic trace: wrongly allowed"), Status::NotMet);
        r.accuracy[0] = accuracy(SKETCH, 0.6, 9.0, Some(0));
        r.evaluate_targets();
        let status = |name: &str| r.targets.iter().find(|t| t.name.starts_with(name)).unwrap().status;
        assert_eq!(status("kova_sketch, realistic trace: wrongly allowed"), Status::NotMet);
        assert_eq!(status("kova_sketch, realistic trace: wrongly denied"), Status::NotMet);
    }
}
