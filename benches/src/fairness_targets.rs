//! The fair-contention targets: how a contended word is shared between threads, in the tight
//! loop and with a request handler's work between checks. Each compares with governor's better
//! row ([`crate::comparison`]): its faster row for throughput, its row with the lower slowest
//! thread's p99 for latency.

use crate::comparison::not_comparable;
use crate::report::{Record, Report, Status, TargetResult};
use crate::rounds::{noise_note, ratio_noise};
use crate::target_ratio::not_measured;

/// A target between two rows whose admitted shares differ.
fn incomparable(name: String, goal: &str, words: String) -> TargetResult {
    TargetResult {
        name,
        goal: goal.into(),
        measured: words,
        status: Status::NotComparable,
        within_noise: false,
    }
}

fn ns(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}

impl Report {
    /// The fair-contention targets: the exact word at 2 threads shared evenly in the tight loop,
    /// and with a request handler's work between checks no slower than governor, its slowest
    /// thread's p99 below governor's; the keyed hot key against governor's keyed.
    pub(crate) fn fairness_targets(&self, t: &mut Vec<TargetResult>) {
        let name = "one hot key (direct), 2 threads, gcra (exact): slowest thread's share of the fastest's, and aggregate vs governor";
        let goal = ">= 0.6, >= 1.5x";
        t.push(match (self.find("direct", "gcra", 2), self.governor_row("direct", 2)) {
            (Some(k), Some(g)) => match not_comparable(k, g) {
                Some(words) => incomparable(name.into(), goal, words),
                None => {
                    let share = k.thread_share.unwrap_or(0.0);
                    let ratio = k.ops_per_sec / g.ops_per_sec;
                    let within = noise_note(ratio, 1.5, ratio_noise(k, g));
                    TargetResult {
                        name: name.into(),
                        goal: goal.into(),
                        measured: format!(
                            "{share:.2} ({} {:.2}), {ratio:.2}x{}",
                            g.subject,
                            g.thread_share.unwrap_or(0.0),
                            within.as_ref().map_or(String::new(), |w| format!("; {w}"))
                        ),
                        status: Status::from_bool(share >= 0.6 && ratio >= 1.5),
                        within_noise: within.is_some(),
                    }
                }
            },
            _ => not_measured(name.into(), goal),
        });
        for scenario in ["direct_work", "keyed_hot_work"] {
            let name = format!(
                "{scenario}, 2 threads, gcra (exact): aggregate vs governor, and the slowest thread's p99 vs governor's"
            );
            t.push(self.work_target(name, scenario));
        }
        let name =
            "keyed_hot, 2 threads, gcra (exact): slowest thread's p99 vs governor's keyed, and aggregate";
        let goal = "p99 <= governor's, >= 2x";
        t.push(match (self.find("keyed_hot", "gcra", 2), self.governor_row("keyed_hot", 2)) {
            (Some(k), Some(g)) => match not_comparable(k, g) {
                Some(words) => incomparable(name.into(), goal, words),
                None => {
                    let ratio = k.ops_per_sec / g.ops_per_sec;
                    let kp = k.slowest_p99.unwrap_or(f64::INFINITY);
                    let (gp_row, gp) = self
                        .governor_p99_row("keyed_hot", 2, |r| r.slowest_p99)
                        .map_or((g, 0.0), |(r, p)| (r, p));
                    let within = noise_note(ratio, 2.0, ratio_noise(k, g));
                    TargetResult {
                        name: name.into(),
                        goal: goal.into(),
                        measured: format!(
                            "p99 {} vs {gp:.0} ns ({}), {ratio:.2}x ({}){}",
                            ns(k.slowest_p99),
                            gp_row.subject,
                            g.subject,
                            within.as_ref().map_or(String::new(), |w| format!("; {w}"))
                        ),
                        status: Status::from_bool(kp <= gp && ratio >= 2.0),
                        within_noise: within.is_some(),
                    }
                }
            },
            _ => not_measured(name.into(), goal),
        });
    }

    /// With work between checks: gcra's aggregate at least governor's faster row's, and its
    /// slowest thread's p99 at most 0.8x the lower of governor's rows'.
    fn work_target(&self, name: String, scenario: &str) -> TargetResult {
        let goal = ">= 1x, <= 0.8x";
        let (Some(k), Some(g)) = (self.find(scenario, "gcra", 2), self.governor_row(scenario, 2)) else {
            return not_measured(name, goal);
        };
        if let Some(words) = not_comparable(k, g) {
            return incomparable(name, goal, words);
        }
        let ratio = k.ops_per_sec / g.ops_per_sec;
        let lowest: Option<(&Record, f64)> = self.governor_p99_row(scenario, 2, |r| r.slowest_p99);
        let p99 = match (k.slowest_p99, lowest) {
            (Some(a), Some((_, b))) if b > 0.0 => a / b,
            _ => f64::INFINITY,
        };
        let within = noise_note(ratio, 1.0, ratio_noise(k, g));
        TargetResult {
            name,
            goal: goal.into(),
            measured: format!(
                "{ratio:.2}x ({}), {p99:.2}x ({} vs {} ns{}){}",
                g.subject,
                ns(k.slowest_p99),
                ns(lowest.map(|(_, p)| p)),
                lowest.map_or(String::new(), |(r, _)| format!(", {}", r.subject)),
                within.as_ref().map_or(String::new(), |w| format!("; {w}"))
            ),
            status: Status::from_bool(ratio >= 1.0 && p99 <= 0.8),
            within_noise: within.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::governor_tuned::GOVERNOR_TUNED;
    use crate::report::test_support::*;
    use crate::report::*;

    #[test]
    fn the_keyed_hot_target_reads_the_slowest_threads_p99_against_governors_lower_one() {
        let mut gcra = record("gcra", SubjectKind::Kova, "keyed_hot", 2, 60e6);
        gcra.slowest_p99 = Some(90.0);
        gcra.ns_p99 = Some(40.0);
        let mut default = record("governor", SubjectKind::Peer, "keyed_hot", 2, 20e6);
        default.slowest_p99 = Some(80.0);
        let mut tuned = record(GOVERNOR_TUNED, SubjectKind::Peer, "keyed_hot", 2, 25e6);
        tuned.slowest_p99 = Some(120.0);
        let mut r = report(vec![gcra, default, tuned]);
        r.evaluate_targets();
        let t = r.targets.iter().find(|t| t.name.starts_with("keyed_hot, 2 threads")).unwrap();
        // The pooled p99 (40) would pass; the slowest thread's (90) is above governor's 80.
        assert_eq!(t.status, Status::NotMet);
        assert_eq!(t.measured, "p99 90 vs 80 ns (governor), 2.40x (governor_tuned)");
    }

    #[test]
    fn the_work_targets_take_governors_faster_row_and_its_lower_p99() {
        let mut gcra = record("gcra", SubjectKind::Kova, "direct_work", 2, 10e6);
        gcra.slowest_p99 = Some(50.0);
        let mut default = record("governor", SubjectKind::Peer, "direct_work", 2, 9e6);
        default.slowest_p99 = Some(100.0);
        let mut tuned = record(GOVERNOR_TUNED, SubjectKind::Peer, "direct_work", 2, 9.5e6);
        tuned.slowest_p99 = Some(70.0);
        let mut r = report(vec![gcra, default, tuned]);
        r.evaluate_targets();
        let t = r.targets.iter().find(|t| t.name.starts_with("direct_work, 2 threads")).unwrap();
        // 1.05x the faster row, and 50 ns against the lower p99 of the two rows: 0.71x.
        assert_eq!(t.status, Status::Met, "{t:?}");
        assert_eq!(t.measured, "1.05x (governor_tuned), 0.71x (50 vs 70 ns, governor_tuned)");
    }
}
