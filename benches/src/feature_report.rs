//! The features' rows in the report: one compact table, and their targets.

use std::fmt::Write as _;

use crate::features::{COST, FLOOR_CAS128, FLOOR_CAS128_CAS64, FLOOR_CAS128_X2, LIMITS, WAITING};
use crate::report::{FeatureRecord, Report, Status, TargetResult};
use crate::rounds::{noise_note, noise_note_ns, ratio_noise, Rounds as _};
use crate::stats::si;
use crate::target_ratio::not_measured;

/// The targets on the features: what a user switching to them would want, set against the check
/// each builds on (or the floor of its protocol) in the same run, on one thread and, where it ran,
/// on two.
/// `(section, subject, baseline, at most this many times the baseline's time, what it is)`.
const FEATURE_TARGETS: [(&str, &str, &str, f64, &str); 8] = [
    (LIMITS, "limits_2", FLOOR_CAS128, 1.2, "two limits (one 128-bit CAS), direct, against that CAS's floor"),
    (
        LIMITS,
        "limits_3",
        FLOOR_CAS128_CAS64,
        1.2,
        "three limits (check then refund over a 128-bit and a 64-bit CAS), direct, against those CASes' floor",
    ),
    (
        LIMITS,
        "limits_4",
        FLOOR_CAS128_X2,
        1.2,
        "four limits (check then refund over two 128-bit CASes), direct, against those CASes' floor",
    ),
    (LIMITS, "keyed_limits_2", "keyed_gcra", 1.5, "two limits, keyed (one key per thread)"),
    (LIMITS, "keyed_limits_3", "keyed_gcra", 2.0, "three limits, keyed (one key per thread)"),
    (WAITING, "until_ready", "check", 1.2, "`until_ready().await` that never waits"),
    (WAITING, "until_n_ready", "check_n", 1.2, "`until_n_ready(4).await` that never waits"),
    (WAITING, "reserve_n", "check_n", 1.2, "`reserve_n(4)` due at once"),
];

/// The waits' second target: what a wait that need not wait adds to its check, against what
/// governor's wait adds to governor's check in the same run.
/// `(kova's wait, its check, governor's wait, its check, what it is)`.
const WAIT_ADDS: [(&str, &str, &str, &str, &str); 3] = [
    ("until_ready", "check", "governor_until_ready", "governor_check", "`until_ready().await`"),
    ("until_n_ready", "check_n", "governor_until_ready", "governor_check", "`until_n_ready(4).await`"),
    (
        "until_key_n_ready",
        "keyed_check_n",
        "governor_until_key_ready",
        "governor_keyed_check",
        "`until_key_n_ready(key, 4).await` (one key per thread)",
    ),
];

impl Report {
    /// The feature record of `subject` at `threads`.
    pub fn feature(&self, subject: &str, threads: usize) -> Option<&FeatureRecord> {
        self.features.iter().find(|r| r.subject == subject && r.threads == threads)
    }

    /// How many times its baseline's time a feature's call takes at `threads`.
    pub fn feature_time_ratio(&self, subject: &str, threads: usize) -> Option<f64> {
        let r = self.feature(subject, threads)?;
        let base = self.feature(&r.baseline, threads)?;
        Some(base.ops_per_sec / r.ops_per_sec)
    }

    /// The features' targets (not measured when their section did not run), each marked within
    /// noise where its margin at either thread count is under the rounds' spread of the two rows.
    pub(crate) fn feature_targets(&self) -> Vec<TargetResult> {
        FEATURE_TARGETS
            .iter()
            .map(|&(section, subject, baseline, at_most, what)| {
                let name = format!("{section}: {what}, 1 and 2 threads, time per call vs `{baseline}`");
                let goal = format!("<= {at_most}x");
                if self.feature(subject, 1).is_none() || self.feature(baseline, 1).is_none() {
                    return not_measured(name, &goal);
                }
                let mut measured = String::new();
                let (mut met, mut within) = (true, false);
                for threads in [1, 2] {
                    let (Some(r), Some(base)) =
                        (self.feature(subject, threads), self.feature(baseline, threads))
                    else {
                        continue;
                    };
                    let ratio = base.ops_per_sec / r.ops_per_sec;
                    let _ = match threads {
                        1 => write!(
                            measured,
                            "{ratio:.2}x ({:.1} ns vs {:.1} ns)",
                            1e9 / r.ops_per_sec,
                            1e9 / base.ops_per_sec
                        ),
                        _ => write!(measured, "; {threads} threads {ratio:.2}x"),
                    };
                    met &= ratio <= at_most;
                    if let Some(note) = noise_note(ratio, at_most, ratio_noise(base, r)) {
                        let _ = write!(measured, "; {note}");
                        within = true;
                    }
                }
                TargetResult { name, goal, measured, status: Status::from_bool(met), within_noise: within }
            })
            .collect()
    }

    /// [`WAIT_ADDS`]' targets: at 1 and at 2 threads, the nanoseconds kova's wait adds to its
    /// check at most those governor's wait adds to governor's check, within noise where the
    /// margin is under the four rows' spreads in nanoseconds.
    pub(crate) fn wait_adds_targets(&self) -> Vec<TargetResult> {
        let rows = |subjects: [&str; 4], threads| -> Option<[&FeatureRecord; 4]> {
            let [a, b, c, d] = subjects.map(|s| self.feature(s, threads));
            Some([a?, b?, c?, d?])
        };
        let added =
            |wait: &FeatureRecord, check: &FeatureRecord| 1e9 / wait.ops_per_sec - 1e9 / check.ops_per_sec;
        WAIT_ADDS
            .iter()
            .map(|&(wait, check, governor_wait, governor_check, what)| {
                let name = format!(
                    "{WAITING}: {what} that never waits adds to `{check}` at most what governor's wait adds to its check, 1 and 2 threads"
                );
                let goal = "<= governor's";
                let mut measured = Vec::new();
                let (mut met, mut within) = (true, false);
                for threads in [1, 2] {
                    let Some(four) = rows([wait, check, governor_wait, governor_check], threads) else { continue };
                    let (kova, governor) = (added(four[0], four[1]), added(four[2], four[3]));
                    measured.push(format!("{threads}T {kova:+.1} ns vs {governor:+.1} ns"));
                    met &= kova <= governor;
                    if let Some(note) = noise_note_ns(kova, governor, &four) {
                        measured.push(note);
                        within = true;
                    }
                }
                if measured.is_empty() {
                    return not_measured(name, goal);
                }
                TargetResult {
                    name,
                    goal: goal.into(),
                    measured: measured.join("; "),
                    status: Status::from_bool(met),
                    within_noise: within,
                }
            })
            .collect()
    }

    /// One row per call: its throughput on 1 and 2 threads and its time against the check it
    /// builds on, in the same run; with `rounds`, every round's range beside the throughput.
    pub(crate) fn features_table(&self, out: &mut String, rounds: bool) {
        let (rounds_head, rounds_rule) =
            if rounds { (" rounds, min-max (1 / 2 threads) |", "---:|") } else { ("", "") };
        let _ = writeln!(
            out,
            "| section | call | beside | calls/s (1 / 2 threads) |{rounds_head} time vs beside (1 / 2 threads) |\n\
             |---|---|---|---:|{rounds_rule}---:|"
        );
        let mut seen: Vec<&str> = Vec::new();
        for r in &self.features {
            if seen.contains(&r.subject.as_str()) {
                continue;
            }
            seen.push(&r.subject);
            let pair = |f: &dyn Fn(usize) -> Option<String>| match (f(1), f(2)) {
                (Some(a), Some(b)) => format!("{a} / {b}"),
                (Some(a), None) => a,
                _ => "-".into(),
            };
            let speed = pair(&|t| self.feature(&r.subject, t).map(|x| si(x.ops_per_sec)));
            let range = if rounds {
                format!(" {} |", pair(&|t| self.feature(&r.subject, t).map(|x| x.range_text())))
            } else {
                String::new()
            };
            let ratio = if r.is_baseline() {
                "-".into()
            } else {
                pair(&|t| self.feature_time_ratio(&r.subject, t).map(|x| format!("{x:.2}x")))
            };
            let beside = if r.is_baseline() { "-".to_owned() } else { format!("`{}`", r.baseline) };
            let _ =
                writeln!(out, "| {} | `{}` | {beside} | {speed} |{range} {ratio} |", r.section, r.subject);
        }
    }

    /// The words before the features' table.
    pub(crate) fn features_intro(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "Each call beside the check it builds on, interleaved in the same {} rounds of {} ms (the median \
             kept at every thread count; every round's rate is kept, `rounds` gives their range, \
             and a target whose margin to its goal is under the spread of its rows' rounds is within noise), on quotas that admit every call ({}), so that nothing \
             waits: every row reads `is_allowed` alone, but `limits_2_read`, which also reads the \
             deciding limit's remaining units and retry time (what a `RateLimit` header shows); \
             `limits_N` is `Limits::check` over N limits (two in \
             one 128-bit CAS; three or four by check then refund over two words, limits 0 and 1 in a \
             128-bit one and the rest in a second), beside the least those protocols could cost \
             (`floor_cas128`: a bare loop of portable-atomic's 128-bit CAS; `floor_cas128_cas64`: one \
             then a bare 64-bit CAS loop; `floor_cas128_x2`: two 128-bit loops one after the other), \
             `keyed_*` the same per key (one key per thread, \
             `KeyedLimits`: one table, a key's limits in one cell); `until_ready` / `until_n_ready({COST})` are the futures \
             polled once, `reserve_n({COST})` a reservation due at once, `until_key_n_ready({COST})` the \
             keyed wait beside the keyed `check_n` (one key per thread). No peer here checks several \
             bandwidths at once (bucket4j, which does, is Java); governor's `until_ready` and \
             `until_key_ready` are beside its own `check` and `check_key`; its two keyed rows are two \
             instances, which this harness gives one fixed SipHash key (a run made before it gave each \
             instance its own random seed, so the threads' keys could share a `DashMap` shard, and its \
             lock, in one instance and not in the other: there the two-thread gap between \
             `governor_keyed_check` and `governor_until_key_ready` measures that placement, not the \
             wait).\n",
            self.settings.rounds * crate::features::ROUND_SPLIT as usize,
            self.settings.measure_ms / u64::from(crate::features::ROUND_SPLIT),
            crate::features::quota_text()
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::report::test_support::*;
    use crate::report::FeatureRecord;
    use crate::report::Status;

    fn feature(section: &str, subject: &str, baseline: &str, threads: usize, ops: f64) -> FeatureRecord {
        FeatureRecord {
            section: section.into(),
            subject: subject.into(),
            baseline: baseline.into(),
            kova: true,
            threads,
            ops_per_sec: ops,
            ns_p50: None,
            median_ops_per_sec: None,
            round_ops_per_sec: Vec::new(),
        }
    }

    #[test]
    fn feature_targets_and_rows_come_from_the_same_run() {
        let mut r = report(vec![]);
        r.features = vec![
            feature("limits", "gcra", "gcra", 1, 100e6),
            feature("limits", "limits_2", "gcra", 1, 50e6),
            feature("limits", "floor_cas128", "floor_cas128", 1, 100e6),
            feature("limits", "gcra", "gcra", 2, 60e6),
            feature("limits", "limits_2", "gcra", 2, 40e6),
            feature("limits", "floor_cas128", "floor_cas128", 2, 60e6),
            feature("waiting", "check", "check", 1, 100e6),
            feature("waiting", "until_ready", "check", 1, 90e6),
            feature("waiting", "check_n", "check_n", 1, 100e6),
            feature("waiting", "reserve_n", "check_n", 1, 90e6),
            feature("waiting", "check_n", "check_n", 2, 100e6),
            feature("waiting", "reserve_n", "check_n", 2, 50e6),
        ];
        let targets = r.feature_targets();
        let get = |s: &str| targets.iter().find(|t| t.name.contains(s)).unwrap();
        let two = get("two limits (one 128-bit CAS)");
        assert_eq!(two.status, Status::NotMet);
        assert_eq!(two.measured, "2.00x (20.0 ns vs 10.0 ns); 2 threads 1.50x");
        assert!(two.name.ends_with("vs `floor_cas128`"), "{}", two.name);
        let wait = get("`until_ready().await`");
        assert_eq!(wait.status, Status::Met);
        // Met on one thread, not on two: not met.
        let reserve = get("`reserve_n(4)`");
        assert_eq!(reserve.measured, "1.11x (11.1 ns vs 10.0 ns); 2 threads 2.00x");
        assert_eq!(reserve.status, Status::NotMet);
        let three = get("three limits (check then refund over a 128-bit and a 64-bit CAS), direct");
        assert_eq!(three.status, Status::NotMeasured);
        assert!(three.name.ends_with("vs `floor_cas128_cas64`"), "{}", three.name);
        let mut table = String::new();
        r.features_table(&mut table, false);
        assert!(table.contains("| limits | `gcra` | - | 100.00M / 60.00M | - |"), "{table}");
        assert!(
            table.contains("| limits | `limits_2` | `gcra` | 50.00M / 40.00M | 2.00x / 1.50x |"),
            "{table}"
        );
        assert!(table.contains("| waiting | `until_ready` | `check` | 90.00M | 1.11x |"), "{table}");
    }

    /// A feature target reads each thread count's margin against the spread of its two rows'
    /// rounds, as the throughput targets do.
    #[test]
    fn feature_targets_say_when_their_margin_is_within_noise() {
        let with_rounds = |subject: &str, baseline: &str, threads, rounds: &[f64]| {
            let mut f = feature("limits", subject, baseline, threads, rounds[0]);
            f.round_ops_per_sec = rounds.to_vec();
            f
        };
        let mut r = report(vec![]);
        r.features = vec![
            // 1.15x at 1 thread against a goal of 1.2x: the floor's fastest round over the
            // composite's slowest reaches 1.22x, past it.
            with_rounds("limits_2", "gcra", 1, &[87e6, 85e6, 89e6]),
            with_rounds("floor_cas128", "floor_cas128", 1, &[100e6, 97e6, 104e6]),
            // 1.50x at 2 threads: far from the goal, whatever the spread.
            with_rounds("limits_2", "gcra", 2, &[40e6, 38e6, 42e6]),
            with_rounds("floor_cas128", "floor_cas128", 2, &[60e6, 57e6, 62e6]),
        ];
        let targets = r.feature_targets();
        let two = targets.iter().find(|t| t.name.contains("two limits (one 128-bit CAS)")).unwrap();
        assert_eq!(two.status, Status::NotMet);
        assert!(two.within_noise, "{two:?}");
        assert_eq!(
            two.measured,
            "1.15x (11.5 ns vs 10.0 ns); within noise: margin 4.4% under the rounds' spread 6.4%; 2 threads 1.50x"
        );
        // One round each: no spread, so no verdict.
        for f in &mut r.features {
            f.round_ops_per_sec.truncate(1);
        }
        let targets = r.feature_targets();
        let two = targets.iter().find(|t| t.name.contains("two limits (one 128-bit CAS)")).unwrap();
        assert!(!two.within_noise, "{two:?}");
        // The full report's table gives the rounds' range.
        r.features[0].round_ops_per_sec = vec![87e6, 85e6, 89e6];
        let mut table = String::new();
        r.features_table(&mut table, true);
        assert!(
            table.contains("| limits | `limits_2` | `gcra` | 87.00M / 40.00M | 85.00M-89.00M / - | - |"),
            "{table}"
        );
    }

    #[test]
    fn a_wait_is_held_to_what_governors_wait_adds() {
        let mut r = report(vec![]);
        let f =
            |subject: &str, baseline: &str, threads, ops| feature("waiting", subject, baseline, threads, ops);
        r.features = vec![
            // kova's wait adds 1 ns to a 10 ns check at 1 thread, 3 ns at 2; governor's 2 ns.
            f("check", "check", 1, 100e6),
            f("until_ready", "check", 1, 1e9 / 11.0),
            f("check", "check", 2, 100e6),
            f("until_ready", "check", 2, 1e9 / 13.0),
            f("governor_check", "governor_check", 1, 50e6),
            f("governor_until_ready", "governor_check", 1, 1e9 / 22.0),
            f("governor_check", "governor_check", 2, 50e6),
            f("governor_until_ready", "governor_check", 2, 1e9 / 22.0),
        ];
        let targets = r.wait_adds_targets();
        let direct = targets.iter().find(|t| t.name.contains("`until_ready().await`")).unwrap();
        assert_eq!(direct.measured, "1T +1.0 ns vs +2.0 ns; 2T +3.0 ns vs +2.0 ns");
        assert_eq!(direct.status, Status::NotMet, "met on one thread, not on two");
        let keyed = targets.iter().find(|t| t.name.contains("until_key_n_ready")).unwrap();
        assert_eq!(keyed.status, Status::NotMeasured);
        // governor's wait measured over rounds 2.5 ns apart: the 1 ns by which kova's wait adds
        // more at 2 threads is within their noise.
        for f in &mut r.features {
            f.round_ops_per_sec = vec![f.ops_per_sec; 2];
        }
        r.features[7].round_ops_per_sec = vec![1e9 / 22.0, 1e9 / 24.5];
        let targets = r.wait_adds_targets();
        let direct = targets.iter().find(|t| t.name.contains("`until_ready().await`")).unwrap();
        assert_eq!(
            direct.measured,
            "1T +1.0 ns vs +2.0 ns; 2T +3.0 ns vs +2.0 ns; within noise: margin 1.0 ns under the rounds' spread 2.5 ns"
        );
        assert!(direct.within_noise && direct.status == Status::NotMet, "{direct:?}");
    }
}
