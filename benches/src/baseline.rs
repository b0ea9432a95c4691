//! `--compare <report.json>`: each ratio of this run against the same ratio of an earlier one,
//! so that a change's effect is one command. Ratios compare subjects measured in one run, so
//! they carry from one run to the next better than absolute figures do; the absolute change is
//! shown too.
//!
//! `--write-readme` keeps the run it writes as `docs/bench/report.json` beside the chart: the
//! baseline the next `--compare docs/bench/report.json` reads.

use std::fmt::Write as _;

use crate::report::{subject_rank, Record, Report, SubjectKind};
use crate::stats::si;

/// The file name of the baseline kept beside the README's chart.
pub const BASELINE_FILE: &str = "report.json";

/// One ratio in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioChange {
    /// Scenario.
    pub scenario: String,
    /// Subject.
    pub subject: String,
    /// Threads.
    pub threads: usize,
    /// `x governor`, `x best peer` or `x floor`.
    pub ratio: &'static str,
    /// In the earlier run.
    pub before: f64,
    /// In this run.
    pub now: f64,
}

impl RatioChange {
    /// `now / before - 1`, percent.
    pub fn change_pct(&self) -> f64 {
        (self.now / self.before - 1.0) * 100.0
    }
}

fn ratios(r: &Record) -> [(&'static str, Option<f64>); 3] {
    [("x governor", r.vs_governor), ("x best peer", r.vs_best_peer), ("x floor", r.vs_floor)]
}

/// Every ratio that both runs have, in report order.
pub fn ratio_changes(before: &Report, now: &Report) -> Vec<RatioChange> {
    let scenario_rank = |name: &str| now.scenarios.iter().position(|s| s.name == name).unwrap_or(usize::MAX);
    let mut records: Vec<&Record> = now.records.iter().filter(|r| r.kind != SubjectKind::Floor).collect();
    records.sort_by_key(|r| (scenario_rank(&r.scenario), subject_rank(&r.subject), r.threads));
    let mut out = Vec::new();
    for r in records {
        let Some(old) = before.find(&r.scenario, &r.subject, r.threads) else { continue };
        for ((name, new), (_, was)) in ratios(r).into_iter().zip(ratios(old)) {
            if let (Some(now), Some(before)) = (new, was) {
                out.push(RatioChange {
                    scenario: r.scenario.clone(),
                    subject: r.subject.clone(),
                    threads: r.threads,
                    ratio: name,
                    before,
                    now,
                });
            }
        }
    }
    out
}

/// The comparison as markdown: what each run was, the ratios, the targets whose status moved.
pub fn compare_markdown(before: &Report, now: &Report) -> String {
    let mut out = String::from("# kova-bench: this run against an earlier one\n\n");
    let describe = |r: &Report| {
        format!(
            "{} on {} ({} cores), commit {}, `{}` mode",
            r.machine.date,
            r.machine.cpu,
            r.machine.cores,
            r.machine.git_commit.as_deref().map_or("unknown", |c| &c[..c.len().min(12)]),
            r.settings.mode
        )
    };
    let _ = writeln!(out, "Earlier: {}.\n\nNow: {}.\n", describe(before), describe(now));
    if before.machine.cpu != now.machine.cpu || before.machine.cores != now.machine.cores {
        out.push_str("> The machines differ: read the ratios, not the absolute figures.\n\n");
    }
    let changes = ratio_changes(before, now);
    if changes.is_empty() {
        out.push_str("No ratio is in both runs (different scenarios or subjects).\n");
    } else {
        out.push_str(
            "| scenario | subject | threads | ratio | earlier | now | change | decisions/s earlier / now |\n\
             |---|---|---:|---|---:|---:|---:|---:|\n",
        );
        for c in &changes {
            let speed = match (
                before.find(&c.scenario, &c.subject, c.threads),
                now.find(&c.scenario, &c.subject, c.threads),
            ) {
                (Some(a), Some(b)) => format!("{} / {}", si(a.ops_per_sec), si(b.ops_per_sec)),
                _ => "-".into(),
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {:.2}x | {:.2}x | {:+.1}% | {speed} |",
                c.scenario,
                c.subject,
                c.threads,
                c.ratio,
                c.before,
                c.now,
                c.change_pct()
            );
        }
    }
    let moved: Vec<String> = now
        .targets
        .iter()
        .filter_map(|t| {
            let old = before.targets.iter().find(|o| o.name == t.name)?;
            (old.status != t.status)
                .then(|| format!("- {}: {} -> {}", t.name, old.status.text(), t.status.text()))
        })
        .collect();
    if !moved.is_empty() {
        let _ = writeln!(out, "\nTargets whose status changed:\n\n{}", moved.join("\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::*;

    fn run(gcra_1t: f64) -> Report {
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 1, gcra_1t),
            record("governor", SubjectKind::Peer, "direct", 1, 50e6),
            record("floor_cas", SubjectKind::Floor, "direct", 1, 200e6),
        ]);
        r.compute_ratios();
        r.evaluate_targets();
        r
    }

    #[test]
    fn each_ratio_shows_its_change() {
        let (before, now) = (run(100e6), run(125e6));
        let changes = ratio_changes(&before, &now);
        // gcra's three ratios (governor, best peer, floor) and none for the floor itself;
        // governor has only its floor ratio.
        let gcra: Vec<_> = changes.iter().filter(|c| c.subject == "gcra").collect();
        assert_eq!(gcra.len(), 3);
        assert_eq!((gcra[0].ratio, gcra[0].before, gcra[0].now), ("x governor", 2.0, 2.5));
        assert!((gcra[0].change_pct() - 25.0).abs() < 1e-9);
        assert!(changes.iter().all(|c| c.subject != "floor_cas"));
        let md = compare_markdown(&before, &now);
        assert!(
            md.contains("| `direct` | gcra | 1 | x governor | 2.00x | 2.50x | +25.0% | 100.00M / 125.00M |"),
            "{md}"
        );
        // 0.5 of governor's time per check became 0.4: still met; nothing moved.
        assert!(!md.contains("Targets whose status changed"), "{md}");
        let slower = run(60e6);
        let md = compare_markdown(&before, &slower);
        assert!(md.contains("time per check vs the best peer: met -> NOT met"), "{md}");
    }

    #[test]
    fn an_earlier_report_without_the_new_fields_still_reads() {
        let mut old = serde_json::to_value(run(100e6)).unwrap();
        for record in old["records"].as_array_mut().unwrap() {
            let fields = record.as_object_mut().unwrap();
            fields.remove("vs_best_peer");
            fields.remove("overlap");
        }
        old["machine"].as_object_mut().unwrap().remove("topology");
        // A feature row from before the rounds were kept.
        old["features"] = serde_json::json!([{
            "section": "limits", "subject": "limits_2", "baseline": "gcra", "kova": true,
            "threads": 1, "ops_per_sec": 5e7, "ns_p50": null
        }]);
        let old: Report = serde_json::from_value(old).unwrap();
        assert!(old.features[0].round_ops_per_sec.is_empty() && old.features[0].median_ops_per_sec.is_none());
        assert_eq!(old.records[0].vs_best_peer, None);
        let changes = ratio_changes(&old, &run(100e6));
        assert!(changes.iter().all(|c| c.ratio != "x best peer"));
        assert!(changes.iter().any(|c| c.ratio == "x governor" && c.change_pct() == 0.0));
    }
}
