//! The report: what was measured (serialisable, one record per measurement), the ratios and
//! targets computed from it, and its markdown forms (the full report and the README summary).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::accuracy::TraceSummary;
use crate::machine::Machine;
use crate::stats::si;

/// Who a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectKind {
    /// One of kova's algorithms.
    Kova,
    /// A peer: governor or the Mutex token bucket.
    Peer,
    /// A floor: the bare CAS loop or the bare random read.
    Floor,
}

/// One throughput measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Algorithm (`gcra`, ...), peer (`governor`, `mutex_bucket`) or floor (`floor_cas`, `floor_read`).
    pub subject: String,
    /// kova, peer or floor.
    pub kind: SubjectKind,
    /// Scenario name.
    pub scenario: String,
    /// Threads.
    pub threads: usize,
    /// Decisions per second, all threads together.
    pub ops_per_sec: f64,
    /// Median latency of one decision (sampled), nanoseconds.
    pub ns_p50: Option<f64>,
    /// 99th percentile latency, nanoseconds.
    pub ns_p99: Option<f64>,
    /// Share of decisions that admitted.
    pub allowed_share: f64,
    /// Throughput / governor's in the same scenario and thread count.
    pub vs_governor: Option<f64>,
    /// Throughput / the floor's in the same scenario and thread count.
    pub vs_floor: Option<f64>,
}

/// One per-key rate measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RateRecord {
    /// Algorithm or peer.
    pub subject: String,
    /// kova or peer.
    pub kind: SubjectKind,
    /// Requests per second asked for.
    pub offered_target: f64,
    /// Requests per second issued in the counted window.
    pub offered_per_sec: f64,
    /// The quota, per second.
    pub quota_per_sec: f64,
    /// Admitted per second in the counted window.
    pub admitted_per_sec: f64,
    /// `admitted / quota - 1`, percent.
    pub error_pct: f64,
}

/// Accuracy of one algorithm.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccuracyRecord {
    /// Algorithm.
    pub algorithm: String,
    /// The limit of the burst tests (per minute).
    pub limit: u64,
    /// Boundary burst: most admitted in any sliding window of one period.
    pub boundary_max: u64,
    /// Flood at 10x: most admitted in any sliding window of one period.
    pub flood_max: u64,
    /// Requests in the realistic trace.
    pub requests: u64,
    /// Percent of requests admitted that the exact log denies.
    pub wrongly_allowed_pct: f64,
    /// Percent of requests denied that the exact log admits.
    pub wrongly_denied_pct: f64,
    /// Mean relative gap of the admitted count per client and period, over windows where
    /// either side denied, percent.
    pub rate_gap_limited_pct: f64,
    /// The same over every window with a request, percent.
    pub rate_gap_all_pct: f64,
    /// Bytes of one key's state at the trace's quota.
    pub cell_bytes: usize,
}

/// Cloudflare's comparison for the sliding window counter: at every request of the trace (all
/// requests counted, admitted or not), the estimate `prev * (1 - elapsed / period) + current`
/// against the exact number of requests in the last period.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CounterEstimate {
    /// Requests compared.
    pub requests: u64,
    /// Percent of requests where the estimate and the exact count disagree on "over the limit".
    pub wrong_pct: f64,
    /// Of those, percent where the estimate said "under" (wrongly allowed).
    pub wrongly_allowed_pct: f64,
    /// Mean `|estimate - exact| / exact`, percent.
    pub rate_gap_pct: f64,
}

/// Memory per key of one table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Algorithm or peer.
    pub subject: String,
    /// Keys the table held after filling.
    pub keys: usize,
    /// Heap growth while filling, per key held (requested bytes, measured by the allocator).
    pub heap_bytes_per_key: Option<f64>,
    /// What the table reports (`memory_bytes()`), per key.
    pub table_bytes_per_key: Option<f64>,
    /// The algorithm's state for one key (`cell_bytes()`).
    pub cell_bytes: Option<usize>,
}

/// Whether a target was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Met.
    Met,
    /// Not met.
    NotMet,
    /// Not measured in this run (filtered out, or the machine lacks the threads).
    NotMeasured,
}

impl Status {
    fn from_bool(met: bool) -> Status {
        if met {
            Status::Met
        } else {
            Status::NotMet
        }
    }

    /// "met", "NOT met", "not measured".
    pub fn text(self) -> &'static str {
        match self {
            Status::Met => "met",
            Status::NotMet => "NOT met",
            Status::NotMeasured => "not measured",
        }
    }
}

/// One target, evaluated from the measured numbers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetResult {
    /// What is measured.
    pub name: String,
    /// The goal.
    pub goal: String,
    /// The measured figure, in words.
    pub measured: String,
    /// Met or not.
    pub status: Status,
}

/// A scenario as the report describes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioInfo {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The quotas.
    pub quota: String,
}

/// How the run was set up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// "full" or "quick".
    pub mode: String,
    /// `--filter`, if any.
    pub filter: Option<String>,
    /// Thread counts measured.
    pub threads: Vec<usize>,
    /// Rounds per throughput measurement (best kept).
    pub rounds: usize,
    /// Milliseconds per throughput measurement.
    pub measure_ms: u64,
    /// One operation in this many timed for latency.
    pub sample_every: u64,
    /// TSC read overhead subtracted from samples, ns.
    pub timer_overhead_ns: u64,
    /// The per-key rate quota's period, milliseconds.
    pub rate_period_ms: u64,
    /// Periods counted per per-key rate run (after one warm-up period).
    pub rate_periods: u64,
    /// Threads pacing the per-key rate runs.
    pub rate_threads: usize,
    /// Seconds the whole run took.
    pub elapsed_s: f64,
    /// Seconds per section: (name, seconds), in run order.
    #[serde(default)]
    pub section_s: Vec<(String, f64)>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Where and when.
    pub machine: Machine,
    /// How.
    pub settings: Settings,
    /// The throughput scenarios that ran.
    pub scenarios: Vec<ScenarioInfo>,
    /// Throughput, one record per (scenario, subject, threads).
    pub records: Vec<Record>,
    /// Per-key rate.
    pub rates: Vec<RateRecord>,
    /// Accuracy per algorithm.
    pub accuracy: Vec<AccuracyRecord>,
    /// The realistic trace.
    pub trace: Option<TraceSummary>,
    /// The sliding window counter's estimate against the exact count, Cloudflare's way.
    pub counter_estimate: Option<CounterEstimate>,
    /// Memory per key, 1M-key tables.
    pub memory: Vec<MemoryRecord>,
    /// Bytes of the random-read floor's array in the 1M-key scenarios.
    pub large_table_bytes: Option<usize>,
    /// Targets.
    pub targets: Vec<TargetResult>,
}

/// Cloudflare 2017, sliding window counter on their traffic: share of requests wrongly allowed or
/// denied, percent.
pub const CLOUDFLARE_WRONG_PCT: f64 = 0.003;
/// Cloudflare 2017: average difference between the real and the approximate rate, percent.
pub const CLOUDFLARE_RATE_GAP_PCT: f64 = 6.0;

/// The CAS floor behind kova's pin (the keyed table's epoch), measured in `keyed_per_thread` and the 1M-key
/// scenarios beside the scenario's own floor (which the `x floor` ratios use).
pub const PINNED_FLOOR: &str = "floor_pin_cas";

/// Order of subjects in tables.
pub const SUBJECT_ORDER: [&str; 10] = [
    "token_bucket",
    "gcra",
    "fixed_window",
    "sliding_window_counter",
    "sliding_window_log",
    "governor",
    "mutex_bucket",
    "floor_cas",
    "floor_read",
    PINNED_FLOOR,
];

fn subject_rank(s: &str) -> usize {
    SUBJECT_ORDER.iter().position(|&x| x == s).unwrap_or(SUBJECT_ORDER.len())
}

impl Report {
    /// The record of `subject` in `scenario` at `threads`.
    pub fn find(&self, scenario: &str, subject: &str, threads: usize) -> Option<&Record> {
        self.records.iter().find(|r| r.scenario == scenario && r.subject == subject && r.threads == threads)
    }

    /// The scenario's own floor (the CAS loop or the random read), which `x floor` compares with.
    fn floor(&self, scenario: &str, threads: usize) -> Option<&Record> {
        self.records.iter().find(|r| {
            r.scenario == scenario
                && r.kind == SubjectKind::Floor
                && r.subject != PINNED_FLOOR
                && r.threads == threads
        })
    }

    /// How `subject` went from 1 thread to `threads` in `scenario` (aggregate throughput).
    fn scaling(&self, scenario: &str, subject: &str, threads: usize) -> Option<f64> {
        let one = self.find(scenario, subject, 1)?;
        let many = self.find(scenario, subject, threads)?;
        Some(many.ops_per_sec / one.ops_per_sec)
    }

    /// Fills `vs_governor` and `vs_floor` of every non-floor record from the records of the same
    /// scenario and thread count.
    pub fn compute_ratios(&mut self) {
        let ratios: Vec<(Option<f64>, Option<f64>)> = self
            .records
            .iter()
            .map(|r| {
                if r.kind == SubjectKind::Floor {
                    return (None, None);
                }
                let gov = (r.subject != "governor")
                    .then(|| self.find(&r.scenario, "governor", r.threads))
                    .flatten()
                    .map(|g| r.ops_per_sec / g.ops_per_sec);
                let floor = self.floor(&r.scenario, r.threads).map(|f| r.ops_per_sec / f.ops_per_sec);
                (gov, floor)
            })
            .collect();
        for (r, (g, f)) in self.records.iter_mut().zip(ratios) {
            r.vs_governor = g;
            r.vs_floor = f;
        }
    }

    /// Evaluates every target from the measured numbers.
    pub fn evaluate_targets(&mut self) {
        let mut t = Vec::new();
        for algo in ["token_bucket", "gcra"] {
            let kova = self.find("direct", algo, 1);
            let gov = self.find("direct", "governor", 1);
            let floor = self.find("direct", "floor_cas", 1);
            t.push(match (kova, gov) {
                (Some(k), Some(g)) => {
                    let ratio = g.ops_per_sec / k.ops_per_sec;
                    TargetResult {
                        name: format!("{algo} direct check, 1 thread, time per check vs governor"),
                        goal: "<= 0.6x".into(),
                        measured: format!(
                            "{:.2}x ({:.1} ns vs {:.1} ns)",
                            ratio,
                            1e9 / k.ops_per_sec,
                            1e9 / g.ops_per_sec
                        ),
                        status: Status::from_bool(ratio <= 0.6),
                    }
                }
                _ => not_measured(
                    format!("{algo} direct check, 1 thread, time per check vs governor"),
                    "<= 0.6x",
                ),
            });
            t.push(match (kova, floor) {
                (Some(k), Some(f)) => {
                    let ratio = f.ops_per_sec / k.ops_per_sec;
                    TargetResult {
                        name: format!("{algo} direct check, 1 thread, time per check vs the CAS floor"),
                        goal: "<= 2x".into(),
                        measured: format!(
                            "{:.2}x ({:.1} ns vs {:.1} ns)",
                            ratio,
                            1e9 / k.ops_per_sec,
                            1e9 / f.ops_per_sec
                        ),
                        status: Status::from_bool(ratio <= 2.0),
                    }
                }
                _ => not_measured(
                    format!("{algo} direct check, 1 thread, time per check vs the CAS floor"),
                    "<= 2x",
                ),
            });
        }
        for algo in ["token_bucket", "gcra"] {
            let name = format!("one hot key (direct), 2 threads, {algo}: aggregate decisions/s vs governor");
            t.push(self.ratio_target(name, ">= 1x", ("direct", algo, 2), ("direct", "governor", 2), 1.0));
        }
        let mut large = self.ratio_target(
            "keyed, 1,000,000 live keys, uniform, 1 thread, gcra: throughput vs governor keyed".into(),
            ">= 3x",
            ("keyed_1m_uniform", "gcra", 1),
            ("keyed_1m_uniform", "governor", 1),
            3.0,
        );
        if let (Status::Met | Status::NotMet, Some(pinned), Some(gov)) = (
            large.status,
            self.find("keyed_1m_uniform", PINNED_FLOOR, 1),
            self.find("keyed_1m_uniform", "governor", 1),
        ) {
            // How far the goal is from the least such a check costs, measured in the same run.
            large.measured += &format!(
                "; a pin and a CAS on a random word of an array as large: {:.2}x",
                pinned.ops_per_sec / gov.ops_per_sec
            );
        }
        t.push(large);
        t.push(self.ratio_target(
            "keyed, 1,000 keys, 1 thread, gcra: throughput vs governor keyed (keyed-table issue)".into(),
            ">= 1.5x",
            ("keyed_1k", "gcra", 1),
            ("keyed_1k", "governor", 1),
            1.5,
        ));
        let mut per_thread = self.ratio_target(
            "keyed, one key per thread, gcra: 2 threads vs 1 thread (keyed-table issue)".into(),
            ">= 1.8x",
            ("keyed_per_thread", "gcra", 2),
            ("keyed_per_thread", "gcra", 1),
            1.8,
        );
        if let (Status::Met | Status::NotMet, Some(pinned)) =
            (per_thread.status, self.scaling("keyed_per_thread", PINNED_FLOOR, 2))
        {
            // What bounds it: the pin every check takes, measured alone in the same run.
            per_thread.measured += &format!("; kova's pin before a CAS: {pinned:.2}x");
        }
        t.push(per_thread);
        let mut offered: Vec<f64> = self.rates.iter().map(|r| r.offered_target).collect();
        offered.sort_by(f64::total_cmp);
        offered.dedup();
        for o in offered {
            let rows: Vec<&RateRecord> =
                self.rates.iter().filter(|r| r.offered_target == o && r.kind == SubjectKind::Kova).collect();
            let worst = rows.iter().max_by(|a, b| a.error_pct.abs().total_cmp(&b.error_pct.abs()));
            let name = format!("per-key rate, {}/s offered: admitted vs quota, all five algorithms", si(o));
            t.push(match worst {
                Some(w) => TargetResult {
                    name,
                    goal: "within 1%".into(),
                    measured: format!("worst {:+.3}% ({})", w.error_pct, w.subject),
                    status: Status::from_bool(rows.len() == 5 && w.error_pct.abs() <= 1.0),
                },
                None => not_measured(name, "within 1%"),
            });
        }
        let acc = |a: &str| self.accuracy.iter().find(|r| r.algorithm == a);
        t.push(TargetResult {
            name: "accuracy table present for all five algorithms".into(),
            goal: "5 rows".into(),
            measured: format!("{} rows", self.accuracy.len()),
            status: if self.accuracy.is_empty() {
                Status::NotMeasured
            } else {
                Status::from_bool(self.accuracy.len() == 5)
            },
        });
        t.push(match acc("fixed_window") {
            Some(r) => TargetResult {
                name: "fixed window shows its boundary burst".into(),
                goal: "> limit in one period".into(),
                measured: format!("{} admitted in one period (limit {})", r.boundary_max, r.limit),
                status: Status::from_bool(r.boundary_max > r.limit),
            },
            None => not_measured("fixed window shows its boundary burst".into(), "> limit in one period"),
        });
        t.push(match acc("sliding_window_log") {
            Some(r) => TargetResult {
                name: "sliding log: zero excess, identical to the exact reference".into(),
                goal: "<= limit, 0 wrong".into(),
                measured: format!(
                    "boundary {}, flood {} (limit {}); {:.4}% wrongly allowed, {:.4}% wrongly denied",
                    r.boundary_max, r.flood_max, r.limit, r.wrongly_allowed_pct, r.wrongly_denied_pct
                ),
                status: Status::from_bool(
                    r.boundary_max <= r.limit
                        && r.flood_max <= r.limit
                        && r.wrongly_allowed_pct == 0.0
                        && r.wrongly_denied_pct == 0.0,
                ),
            },
            None => not_measured("sliding log: zero excess".into(), "<= limit, 0 wrong"),
        });
        // "The counter its small error": an error there is, and small beside the other
        // approximations: at most 10% over the limit in the burst tests (fixed window: 100%), and
        // a smaller admitted-rate gap than the fixed window's and the buckets'.
        let name = "sliding window counter: a small error (vs fixed window and buckets)".to_owned();
        let goal = "<= 1.1x limit in bursts, smallest gap of the approximations";
        t.push(match (acc("sliding_window_counter"), acc("fixed_window"), acc("gcra")) {
            (Some(r), Some(fw), Some(b)) => {
                let worst = r.boundary_max.max(r.flood_max);
                TargetResult {
                    name,
                    goal: goal.into(),
                    measured: format!(
                        "bursts {worst} (limit {}); rate gap {:.2}% vs fixed window {:.2}%, gcra {:.2}%; {}",
                        r.limit,
                        r.rate_gap_limited_pct,
                        fw.rate_gap_limited_pct,
                        b.rate_gap_limited_pct,
                        self.counter_estimate.map_or("-".to_owned(), |c| format!(
                            "Cloudflare's method: {:.3}% wrong, {:.2}% rate gap",
                            c.wrong_pct, c.rate_gap_pct
                        ))
                    ),
                    status: Status::from_bool(
                        worst * 10 <= r.limit * 11
                            && r.rate_gap_limited_pct < fw.rate_gap_limited_pct
                            && r.rate_gap_limited_pct < b.rate_gap_limited_pct,
                    ),
                }
            }
            _ => not_measured(name, goal),
        });
        let words: Vec<&MemoryRecord> = self
            .memory
            .iter()
            .filter(|m| {
                ["token_bucket", "gcra", "fixed_window", "sliding_window_counter"]
                    .contains(&m.subject.as_str())
            })
            .collect();
        let per_key = |m: &MemoryRecord| m.table_bytes_per_key.or(m.heap_bytes_per_key);
        let worst =
            words.iter().filter_map(|m| per_key(m).map(|b| (b, m))).max_by(|a, b| a.0.total_cmp(&b.0));
        let gov = self.memory.iter().find(|m| m.subject == "governor").and_then(per_key);
        let name = "memory per live u64 key, single-word algorithms (keyed-table issue)".to_owned();
        t.push(match worst {
            Some((b, m)) => TargetResult {
                name,
                goal: "<= 32 B".into(),
                measured: format!(
                    "worst {b:.1} B ({}){}",
                    m.subject,
                    gov.map_or(String::new(), |g| format!("; governor {g:.1} B"))
                ),
                status: Status::from_bool(b <= 32.0),
            },
            None => not_measured(name, "<= 32 B"),
        });
        self.targets = t;
    }

    fn ratio_target(
        &self,
        name: String,
        goal: &str,
        a: (&str, &str, usize),
        b: (&str, &str, usize),
        at_least: f64,
    ) -> TargetResult {
        match (self.find(a.0, a.1, a.2), self.find(b.0, b.1, b.2)) {
            (Some(x), Some(y)) => {
                let ratio = x.ops_per_sec / y.ops_per_sec;
                TargetResult {
                    name,
                    goal: goal.into(),
                    measured: format!("{ratio:.2}x ({}/s vs {}/s)", si(x.ops_per_sec), si(y.ops_per_sec)),
                    status: Status::from_bool(ratio >= at_least),
                }
            }
            _ => not_measured(name, goal),
        }
    }

    fn max_threads(&self) -> usize {
        self.settings.threads.iter().copied().max().unwrap_or(1)
    }

    fn header(&self, out: &mut String) {
        let m = &self.machine;
        let _ = writeln!(
            out,
            "Measured {} on {} ({} cores, clocksource {}, {}), commit {}, `{}` mode{}; the whole run took {:.0} s{}.",
            m.date,
            m.cpu,
            m.cores,
            m.clocksource,
            m.os,
            m.git_commit.as_deref().map_or("unknown".to_owned(), |c| {
                let dirty = if m.git_dirty { " with uncommitted changes" } else { "" };
                format!("`{}`{dirty}", &c[..c.len().min(12)])
            }),
            self.settings.mode,
            self.settings.filter.as_deref().map_or(String::new(), |f| format!(", filter `{f}`")),
            self.settings.elapsed_s,
            if self.settings.section_s.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    self.settings.section_s.iter().map(|(n, s)| format!("{n} {s:.0} s")).collect::<Vec<_>>().join(", ")
                )
            },
        );
        if m.cores <= 4 {
            let _ = writeln!(
                out,
                "\n> A small shared virtual machine: absolute figures are noisy and multi-thread figures \
                 say little about scaling. Every ratio compares subjects measured in the same run, \
                 interleaved round by round, best round kept."
            );
        }
    }

    fn targets_table(&self, out: &mut String) {
        let _ = writeln!(out, "| target | goal | measured | |\n|---|---|---|---|");
        for t in &self.targets {
            let _ = writeln!(out, "| {} | {} | {} | {} |", t.name, t.goal, t.measured, t.status.text());
        }
    }

    fn sorted_subjects(&self, scenario: &str) -> Vec<String> {
        let mut subjects: Vec<String> =
            self.records.iter().filter(|r| r.scenario == scenario).map(|r| r.subject.clone()).collect();
        subjects.sort_by_key(|s| subject_rank(s));
        subjects.dedup();
        subjects
    }

    fn throughput_tables(&self, out: &mut String) {
        for s in &self.scenarios {
            let _ = writeln!(out, "\n### `{}`\n\n{}. Quota: {}.\n", s.name, s.description, s.quota);
            let _ = writeln!(
                out,
                "| subject | threads | decisions/s | ns/check (per thread) | p50 ns | p99 ns | admitted | x governor | x floor |\n\
                 |---|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for subject in self.sorted_subjects(&s.name) {
                for &threads in &self.settings.threads {
                    let Some(r) = self.find(&s.name, &subject, threads) else { continue };
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {} |",
                        subject,
                        threads,
                        si(r.ops_per_sec),
                        threads as f64 * 1e9 / r.ops_per_sec,
                        opt(r.ns_p50, 0),
                        opt(r.ns_p99, 0),
                        percent(r.allowed_share),
                        ratio(r.vs_governor),
                        ratio(r.vs_floor),
                    );
                }
            }
        }
    }

    /// A compact table: one row per subject, one column per scenario, "1 thread / max threads".
    fn summary_table(&self, out: &mut String) {
        let max = self.max_threads();
        let _ = write!(out, "| decisions/s (1 thread / {max} threads) |");
        for s in &self.scenarios {
            let _ = write!(out, " `{}` |", s.name);
        }
        let _ = write!(out, "\n|---|");
        for _ in &self.scenarios {
            let _ = write!(out, "---:|");
        }
        let _ = writeln!(out);
        let mut subjects: Vec<String> = self.records.iter().map(|r| r.subject.clone()).collect();
        subjects.sort_by_key(|s| subject_rank(s));
        subjects.dedup();
        // Both floors on one row: each scenario has exactly one.
        subjects.retain(|s| s != "floor_read");
        for subject in subjects {
            let label =
                if subject == "floor_cas" { "floor (CAS / random read)".to_owned() } else { subject.clone() };
            let _ = write!(out, "| {label} |");
            for s in &self.scenarios {
                let pick = |t: usize| {
                    if subject == "floor_cas" {
                        self.floor(&s.name, t)
                    } else {
                        self.find(&s.name, &subject, t)
                    }
                };
                let cell = match (pick(1), pick(max)) {
                    (Some(a), Some(b)) if max > 1 => format!("{} / {}", si(a.ops_per_sec), si(b.ops_per_sec)),
                    (Some(a), _) => si(a.ops_per_sec),
                    _ => "-".into(),
                };
                let _ = write!(out, " {cell} |");
            }
            let _ = writeln!(out);
        }
    }

    /// What the floors say about the threads: the CAS loop on one word per thread shows whether
    /// they ran at once (it scales with the threads when they do); the CAS loop on one shared
    /// word shows what contention on one cache line costs (cross-core traffic makes it slower
    /// than one thread on separate cores).
    fn contention_note(&self, out: &mut String) {
        let max = self.max_threads();
        if max < 2 {
            return;
        }
        let ratio = |scenario: &str| {
            let one = self.find(scenario, "floor_cas", 1)?;
            let many = self.find(scenario, "floor_cas", max)?;
            Some(many.ops_per_sec / one.ops_per_sec)
        };
        let (Some(parallel), Some(shared)) = (ratio("keyed_per_thread"), ratio("direct")) else { return };
        let verdict = if parallel < 0.6 * max as f64 {
            "the threads mostly took turns on the CPUs (other load on the machine), so the multi-thread rows \
             below say little about scaling or contention"
        } else if shared >= 0.8 {
            "the threads ran at once, yet one shared word cost them nothing extra: the cache line never \
             crossed between cores (the virtual CPUs likely share one core's caches), so this machine cannot \
             show what a hot key costs across cores"
        } else {
            "the threads ran at once, and one shared word slows them down as cross-core contention does"
        };
        let pinned = match self.scaling("keyed_per_thread", PINNED_FLOOR, max) {
            Some(pinned) => format!(
                " The same per-thread CAS loop behind kova's pin (`{PINNED_FLOOR}`, as every keyed check \
                 pins) went {pinned:.2}x: what the epoch's shared state costs the threads bounds the keyed \
                 table's scaling."
            ),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "Threads check (the floors): a CAS loop on one word per thread went {parallel:.2}x from 1 to {max} \
             threads, on one shared word {shared:.2}x: {verdict}.{pinned}\n"
        );
    }

    fn rate_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "| offered | subject | offered, measured | quota | admitted | error |\n|---:|---|---:|---:|---:|---:|"
        );
        for r in &self.rates {
            let _ = writeln!(
                out,
                "| {}/s | {} | {}/s | {}/s | {}/s | {:+.3}% |",
                si(r.offered_target),
                r.subject,
                si(r.offered_per_sec),
                si(r.quota_per_sec),
                si(r.admitted_per_sec),
                r.error_pct
            );
        }
    }

    fn accuracy_table(&self, out: &mut String) {
        let limit = self.accuracy.first().map_or(60, |r| r.limit);
        let _ = writeln!(
            out,
            "| algorithm | boundary burst: most in any 60 s (limit {limit}) | flood 10x: most in any 60 s | \
             wrongly allowed | wrongly denied | admitted-rate gap (limited windows) | gap (all windows) | state per key |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for r in &self.accuracy {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.4}% | {:.4}% | {:.2}% | {:.2}% | {} B |",
                r.algorithm,
                r.boundary_max,
                r.flood_max,
                r.wrongly_allowed_pct,
                r.wrongly_denied_pct,
                r.rate_gap_limited_pct,
                r.rate_gap_all_pct,
                r.cell_bytes
            );
        }
        if let Some(c) = &self.counter_estimate {
            let _ = writeln!(
                out,
                "| sliding_window_counter, Cloudflare's method: estimate vs exact count of all requests | | | \
                 {:.4}% wrong ({:.4}% wrongly allowed) | | {:.2}% mean rate gap | | |",
                c.wrong_pct, c.wrongly_allowed_pct, c.rate_gap_pct
            );
        }
        let _ = writeln!(
            out,
            "| *Cloudflare 2017, sliding window counter, their traffic (published)* | | | \
             *{CLOUDFLARE_WRONG_PCT}% wrongly allowed or denied* | | *{CLOUDFLARE_RATE_GAP_PCT}% mean rate gap* | | |"
        );
    }

    fn trace_text(&self, out: &mut String) {
        if let Some(t) = &self.trace {
            let _ = writeln!(
                out,
                "Realistic trace: {} clients ({} normal, {} heavy, {} abusive) over {:.0} simulated minutes, \
                 {} requests, quota {} per client; the exact log denies {:.2}% of them. Each algorithm and \
                 the exact sliding log (`kova::model::SlidingLogModel`) see the same requests; the gap is \
                 `|admitted - exact| / exact` per client and per period, averaged.",
                t.clients,
                t.classes.0,
                t.classes.1,
                t.classes.2,
                t.duration_s / 60.0,
                t.requests,
                t.quota,
                t.reference_denied_pct
            );
        }
    }

    fn memory_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "| table | keys held | state per key | table's `memory_bytes()` per key | heap per key (measured) |\n|---|---:|---:|---:|---:|"
        );
        for m in &self.memory {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                m.subject,
                m.keys,
                m.cell_bytes.map_or("-".into(), |b| format!("{b} B")),
                m.table_bytes_per_key.map_or("-".into(), |b| format!("{b:.1} B")),
                m.heap_bytes_per_key.map_or("-".into(), |b| format!("{b:.1} B")),
            );
        }
    }

    /// The full markdown report.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from("# kova benchmark report\n\n");
        self.header(&mut out);
        if !self.targets.is_empty() {
            out.push_str("\n## Targets\n\nComputed from the figures below (all ratios from this run).\n\n");
            self.targets_table(&mut out);
        }
        if !self.records.is_empty() {
            let _ = writeln!(
                out,
                "\n## Throughput\n\nDecisions per second, all threads together; best of {} round(s) of {} ms. \
                 Latency: one check in {} timed alone with the TSC; two back-to-back TSC reads are {} ns apart on \
                 this machine (their cost and, on this VM, the resolution), which is subtracted, so a check faster \
                 than that reads as 0. kova uses its default coarse clock, governor its default (quanta) clock, \
                 the Mutex bucket `std::time::Instant`. `x governor` and `x floor` are throughput ratios (above 1: \
                 faster).\n",
                self.settings.rounds, self.settings.measure_ms, self.settings.sample_every, self.settings.timer_overhead_ns
            );
            self.contention_note(&mut out);
            self.summary_table(&mut out);
            self.throughput_tables(&mut out);
            if let Some(b) = self.large_table_bytes {
                let _ = writeln!(
                    out,
                    "\nThe random-read floor of the 1M-key scenarios reads an array of {:.1} MiB; their \
                     `{PINNED_FLOOR}` pins and CASes a random word of one as large.",
                    b as f64 / 1048576.0
                );
            }
        }
        if !self.rates.is_empty() {
            let _ = writeln!(
                out,
                "\n## Per-key rate\n\nOne key of a keyed limiter offered a paced stream ({} threads) against a quota of \
                 half the offered rate per {} ms, on kova's default coarse clock (1 ms ticks). The stream starts on a \
                 window edge; after {} warm-up periods, admissions are counted over {} whole period(s).\n",
                self.settings.rate_threads,
                self.settings.rate_period_ms,
                crate::rate::WARMUP_PERIODS,
                self.settings.rate_periods
            );
            self.rate_table(&mut out);
        }
        if !self.accuracy.is_empty() {
            out.push_str("\n## Accuracy\n\n");
            self.trace_text(&mut out);
            out.push('\n');
            self.accuracy_table(&mut out);
        }
        if !self.memory.is_empty() {
            out.push_str("\n## Memory per key (1,000,000 u64 keys)\n\n");
            self.memory_table(&mut out);
        }
        out
    }

    /// The README section: summary tables and a link to the chart.
    pub fn readme_summary(&self, svg_link: &str) -> String {
        let mut out = String::new();
        self.header(&mut out);
        let _ = writeln!(
            out,
            "\nGenerated by `cargo run --release -p kova-bench -- --write-readme README.md`; the full report \
             (latency percentiles, ratios per scenario) is written to `target/kova-bench/report.md`.\n"
        );
        if !self.records.is_empty() {
            let _ = writeln!(out, "![throughput against threads]({svg_link})\n");
            self.summary_table(&mut out);
        }
        if !self.targets.is_empty() {
            out.push_str("\n**Targets**\n\n");
            self.targets_table(&mut out);
        }
        if !self.accuracy.is_empty() {
            out.push_str("\n**Accuracy**\n\n");
            self.trace_text(&mut out);
            out.push('\n');
            self.accuracy_table(&mut out);
        }
        if !self.rates.is_empty() {
            out.push_str("\n**Per-key rate** (quota = half the offered rate)\n\n");
            self.rate_table(&mut out);
        }
        if !self.memory.is_empty() {
            out.push_str("\n**Memory per key** (1,000,000 u64 keys)\n\n");
            self.memory_table(&mut out);
        }
        out
    }
}

fn not_measured(name: String, goal: &str) -> TargetResult {
    TargetResult { name, goal: goal.into(), measured: "-".into(), status: Status::NotMeasured }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}x"))
}

/// A share as a percentage to one decimal, with more decimals where one would round a share
/// under 1 up to "100.0%" (a flood's few table-full denials among millions of decisions).
fn percent(share: f64) -> String {
    let pct = share * 100.0;
    if share >= 1.0 {
        return format!("{pct:.1}%");
    }
    (1..=6)
        .map(|digits| format!("{pct:.digits$}%"))
        .find(|text| !text.starts_with("100."))
        .unwrap_or_else(|| "99.999999%".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_under_one_never_reads_as_a_hundred_percent() {
        assert_eq!(percent(1.0), "100.0%");
        assert_eq!(percent(0.5), "50.0%");
        assert_eq!(percent(0.999), "99.9%");
        assert_eq!(percent(1.0 - 137.0 / 9e6), "99.998%");
        assert_eq!(percent(1.0 - 1e-12), "99.999999%");
    }

    fn record(subject: &str, kind: SubjectKind, scenario: &str, threads: usize, ops: f64) -> Record {
        Record {
            subject: subject.into(),
            kind,
            scenario: scenario.into(),
            threads,
            ops_per_sec: ops,
            ns_p50: Some(10.0),
            ns_p99: Some(20.0),
            allowed_share: 1.0,
            vs_governor: None,
            vs_floor: None,
        }
    }

    fn report(records: Vec<Record>) -> Report {
        Report {
            machine: Machine {
                cpu: "test".into(),
                cores: 2,
                date: "2025-01-01 00:00 UTC".into(),
                git_commit: None,
                git_dirty: false,
                os: "linux".into(),
                clocksource: "tsc".into(),
            },
            settings: Settings {
                mode: "quick".into(),
                filter: None,
                threads: vec![1, 2],
                rounds: 1,
                measure_ms: 10,
                sample_every: 64,
                timer_overhead_ns: 5,
                rate_period_ms: 10,
                rate_periods: 1,
                rate_threads: 2,
                elapsed_s: 1.0,
                section_s: vec![],
            },
            scenarios: vec![ScenarioInfo {
                name: "direct".into(),
                description: "d".into(),
                quota: "q".into(),
            }],
            records,
            rates: vec![],
            accuracy: vec![],
            trace: None,
            counter_estimate: None,
            memory: vec![],
            large_table_bytes: None,
            targets: vec![],
        }
    }

    #[test]
    fn ratios_and_targets_come_from_the_numbers() {
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 1, 100e6),
            record("token_bucket", SubjectKind::Kova, "direct", 1, 50e6),
            record("governor", SubjectKind::Peer, "direct", 1, 50e6),
            record("floor_cas", SubjectKind::Floor, "direct", 1, 150e6),
            record("gcra", SubjectKind::Kova, "direct", 2, 40e6),
            record("governor", SubjectKind::Peer, "direct", 2, 50e6),
        ]);
        r.compute_ratios();
        let gcra = r.find("direct", "gcra", 1).unwrap();
        assert_eq!(gcra.vs_governor, Some(2.0));
        assert_eq!(gcra.vs_floor, Some(100.0 / 150.0));
        assert_eq!(r.find("direct", "governor", 1).unwrap().vs_governor, None);
        r.evaluate_targets();
        let status = |name: &str| r.targets.iter().find(|t| t.name.starts_with(name)).unwrap().status;
        // gcra: 0.5x governor's time (met), 1.5x the floor's time (met).
        assert_eq!(status("gcra direct check, 1 thread, time per check vs governor"), Status::Met);
        assert_eq!(status("gcra direct check, 1 thread, time per check vs the CAS floor"), Status::Met);
        // token bucket: same time as governor (not met), 3x the floor (not met).
        assert_eq!(status("token_bucket direct check, 1 thread, time per check vs governor"), Status::NotMet);
        assert_eq!(
            status("token_bucket direct check, 1 thread, time per check vs the CAS floor"),
            Status::NotMet
        );
        // Two threads: 0.8x governor.
        assert_eq!(status("one hot key (direct), 2 threads, gcra"), Status::NotMet);
        assert_eq!(status("one hot key (direct), 2 threads, token_bucket"), Status::NotMeasured);
        assert_eq!(status("keyed, 1,000,000 live keys"), Status::NotMeasured);
        let md = r.to_markdown();
        assert!(md.contains("| gcra | 1 | 100.00M | 10.0 | 10 | 20 | 100.0% | 2.00x | 0.67x |"), "{md}");
        let summary = r.readme_summary("docs/bench/throughput.svg");
        assert!(summary.contains("![throughput against threads](docs/bench/throughput.svg)"));
        assert!(summary.contains("| gcra | 100.00M / 40.00M |"), "{summary}");
    }

    #[test]
    fn the_1m_target_names_its_pinned_floor_and_stays_unmet_below_3x() {
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "keyed_1m_uniform", 1, 11e6),
            record("governor", SubjectKind::Peer, "keyed_1m_uniform", 1, 4e6),
            record("floor_read", SubjectKind::Floor, "keyed_1m_uniform", 1, 50e6),
            record(PINNED_FLOOR, SubjectKind::Floor, "keyed_1m_uniform", 1, 24e6),
        ]);
        r.compute_ratios();
        // The scenario's own floor stays the random read.
        assert_eq!(r.find("keyed_1m_uniform", "gcra", 1).unwrap().vs_floor, Some(11.0 / 50.0));
        r.evaluate_targets();
        let large = r.targets.iter().find(|t| t.name.starts_with("keyed, 1,000,000 live keys")).unwrap();
        assert_eq!(large.status, Status::NotMet);
        assert_eq!(
            large.measured,
            "2.75x (11.00M/s vs 4.00M/s); a pin and a CAS on a random word of an array as large: 6.00x"
        );
    }

    #[test]
    fn json_round_trip() {
        let mut r = report(vec![record("gcra", SubjectKind::Kova, "direct", 1, 1e6)]);
        r.records[0].ns_p99 = None;
        let json = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back.records[0].ns_p99, None);
        assert_eq!(back.records[0].ops_per_sec, 1e6);
        assert!(json.contains("\"ops_per_sec\":1000000.0"));
    }
}
