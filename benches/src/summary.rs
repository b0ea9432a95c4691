//! The summary both forms of the report open with: one row per subject and one column per
//! scenario, each cell the aggregate decisions per second on one thread and on the most threads,
//! and beside the latter how evenly the threads shared it and what the slowest thread's
//! requests waited. A tight loop is not a server: an aggregate can hide a thread that starved,
//! so the share and the slowest thread's p99 stand beside it. Below it, the rows flagged for
//! admitting less than an exact limiter would in their scenario, and the clock each subject
//! reads.

use std::fmt::Write as _;

use crate::comparison::FULL_ADMISSION;
use crate::report::{subject_rank, Record, Report, SubjectKind};
use crate::stats::{percent, si};
use crate::subject::LOAD_FLOOR;

/// The clock each subject reads, for both forms of the report.
pub const CLOCKS: &str = "Clocks: kova (every algorithm, its tables and sketch) reads its default coarse clock, one \
     atomic load of a time an upkeep thread refreshes every millisecond; `ratelimit` is given the same clock \
     (`ratelimit_std` keeps its default, `std::time::Instant`); `governor` keeps its default `QuantaClock`, \
     a TSC read per check, and `governor_tuned` reads its `QuantaUpkeepClock` (an atomic load, refreshed every \
     millisecond) and, keyed, hashes with ahash instead of SipHash; the Mutex bucket and pingora's `Rate` \
     read `std::time::Instant` on every check, `leaky_bucket` only when its balance is empty. The floors \
     read no clock, except `floor_load`, which reads kova's coarse clock as a denial does.";

impl Report {
    /// The compact table: one row per subject, one column per scenario.
    pub(crate) fn summary_table(&self, out: &mut String) {
        let max = self.max_threads();
        if max > 1 {
            let _ = writeln!(
                out,
                "Each cell: decisions/s on 1 thread / on {max} threads · at {max} threads, the slowest \
                 thread's operations over the fastest's · the slowest thread's p99; where a row admitted \
                 under {:.0}% of its checks, the admitted shares.\n",
                FULL_ADMISSION * 100.0
            );
        }
        let _ = write!(out, "| subject |");
        for s in &self.scenarios {
            let _ = write!(out, " `{}` |", s.name);
        }
        let _ = write!(out, "\n|---|");
        for _ in &self.scenarios {
            let _ = write!(out, "---:|");
        }
        let _ = writeln!(out);
        // Every scenario has exactly one floor of its own: they share one row, named by the CAS
        // floor's place in the order whichever floors ran.
        let own_floor = |s: &str| matches!(s, "floor_cas" | "floor_read" | LOAD_FLOOR);
        let mut subjects: Vec<String> = self
            .records
            .iter()
            .map(|r| if own_floor(&r.subject) { "floor_cas".to_owned() } else { r.subject.clone() })
            .collect();
        subjects.sort_by_key(|s| subject_rank(s));
        subjects.dedup();
        for subject in subjects {
            let floor = subject == "floor_cas";
            let label = if floor { "floor (CAS / random read / load)".to_owned() } else { subject.clone() };
            let _ = write!(out, "| {label} |");
            for s in &self.scenarios {
                let pick =
                    |t: usize| if floor { self.floor(&s.name, t) } else { self.find(&s.name, &subject, t) };
                let _ = write!(out, " {} |", summary_cell(pick(1), (max > 1).then(|| pick(max)).flatten()));
            }
            let _ = writeln!(out);
        }
    }

    /// Rows of scenarios where an exact limiter admits every check that admitted under
    /// [`FULL_ADMISSION`]: a denial writes nothing, so such a row did less work than the others
    /// of its scenario (its admitted share is bold in the full report's tables).
    pub(crate) fn admission_flags(&self, out: &mut String) {
        let all_admitted =
            |scenario: &str| self.scenarios.iter().any(|s| s.name == scenario && s.all_admitted);
        if !self.records.iter().any(|r| all_admitted(&r.scenario)) {
            return;
        }
        let flagged: Vec<String> = self
            .records
            .iter()
            .filter(|r| self.flagged(r))
            .map(|r| format!("`{}` {} x{} ({})", r.scenario, r.subject, r.threads, percent(r.allowed_share)))
            .collect();
        if flagged.is_empty() {
            let _ = writeln!(
                out,
                "Every row of a scenario where an exact limiter admits every check admitted at least {:.0}% \
                 of its checks.\n",
                FULL_ADMISSION * 100.0
            );
        } else {
            let _ = writeln!(
                out,
                "**Flagged**: in scenarios where an exact limiter admits every check, {} {} admitted under \
                 {:.0}% (a denial writes nothing, so they did less work than the rows beside them, and no \
                 ratio with a row whose share is more than a point away is called a win): {}.\n",
                flagged.len(),
                if flagged.len() == 1 { "row" } else { "rows" },
                FULL_ADMISSION * 100.0,
                flagged.join(", ")
            );
        }
    }

    /// Whether `r` is a row [`admission_flags`](Self::admission_flags) lists.
    pub(crate) fn flagged(&self, r: &Record) -> bool {
        r.kind != SubjectKind::Floor
            && r.allowed_share < FULL_ADMISSION
            && self.scenarios.iter().any(|s| s.name == r.scenario && s.all_admitted)
    }
}

/// "25.75M / 48.92M · 0.93 · 60 ns", with " · admitted 100.0% / 85.1%" where either row
/// admitted under [`FULL_ADMISSION`]; one thread's figure alone when only one thread count ran.
fn summary_cell(one: Option<&Record>, many: Option<&Record>) -> String {
    let admitted = |rows: &[&Record]| {
        if rows.iter().all(|r| r.allowed_share >= FULL_ADMISSION) {
            return String::new();
        }
        let shares: Vec<String> = rows.iter().map(|r| percent(r.allowed_share)).collect();
        format!(" · admitted {}", shares.join(" / "))
    };
    match (one, many) {
        (Some(a), Some(b)) => format!(
            "{} / {} · {} · {}{}",
            si(a.ops_per_sec),
            si(b.ops_per_sec),
            b.thread_share.map_or("-".into(), |s| format!("{s:.2}")),
            b.slowest_p99.map_or("-".into(), |p| format!("{p:.0} ns")),
            admitted(&[a, b])
        ),
        (Some(a), None) => format!("{}{}", si(a.ops_per_sec), admitted(&[a])),
        (None, Some(b)) => format!("- / {}{}", si(b.ops_per_sec), admitted(&[b])),
        (None, None) => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use crate::report::test_support::*;
    use crate::report::*;

    #[test]
    fn cells_give_the_share_and_the_slowest_threads_p99_at_the_most_threads() {
        let mut two = record("gcra", SubjectKind::Kova, "direct", 2, 40e6);
        two.thread_share = Some(0.93);
        two.slowest_p99 = Some(61.0);
        let mut denying = record("governor", SubjectKind::Peer, "direct", 2, 30e6);
        denying.allowed_share = 0.851;
        let r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 1, 50e6),
            two,
            record("governor", SubjectKind::Peer, "direct", 1, 20e6),
            denying,
        ]);
        let mut out = String::new();
        r.summary_table(&mut out);
        assert!(out.contains("| gcra | 50.00M / 40.00M · 0.93 · 61 ns |"), "{out}");
        assert!(out.contains("| governor | 20.00M / 30.00M · - · - · admitted 100.0% / 85.1% |"), "{out}");
        let mut flags = String::new();
        r.admission_flags(&mut flags);
        assert!(flags
            .contains("**Flagged**: in scenarios where an exact limiter admits every check, 1 row admitted"));
        assert!(flags.contains("`direct` governor x2 (85.1%)"), "{flags}");
    }

    #[test]
    fn every_scenario_floor_shares_one_row() {
        let mut r = report(vec![
            record("floor_read", SubjectKind::Floor, "keyed_1k", 1, 90e6),
            record(crate::subject::LOAD_FLOOR, SubjectKind::Floor, "direct_deny", 1, 900e6),
        ]);
        r.settings.threads = vec![1];
        for name in ["keyed_1k", "direct_deny"] {
            r.scenarios.push(ScenarioInfo {
                name: name.into(),
                description: "d".into(),
                quota: "q".into(),
                all_admitted: true,
            });
        }
        let mut out = String::new();
        r.summary_table(&mut out);
        assert!(out.contains("| floor (CAS / random read / load) | - | 90.00M | 900.00M |"), "{out}");
    }

    #[test]
    fn a_deny_scenario_flags_nothing() {
        let mut deny = record("gcra", SubjectKind::Kova, "direct_deny", 1, 90e6);
        deny.allowed_share = 0.0;
        let mut r = report(vec![deny]);
        r.scenarios[0] = ScenarioInfo {
            name: "direct_deny".into(),
            description: "d".into(),
            quota: "q".into(),
            all_admitted: false,
        };
        let mut flags = String::new();
        r.admission_flags(&mut flags);
        assert!(flags.is_empty(), "{flags}");
        assert!(!r.flagged(&r.records[0]));
    }
}
