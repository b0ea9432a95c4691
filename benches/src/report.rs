//! The report: what was measured (serialisable, one record per measurement), the ratios and
//! targets computed from it, and its markdown forms (the full report and the README summary).

use serde::{Deserialize, Serialize};

use crate::comparison::{is_governor, not_comparable};
use crate::machine::Machine;

/// Who a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectKind {
    /// One of kova's algorithms.
    Kova,
    /// A peer: governor, the Mutex token bucket, ratelimit, leaky-bucket, pingora's `Rate`.
    Peer,
    /// A floor: the bare CAS loop, the bare random read or the bare load (`floor_load`).
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
    /// Decisions per second, all threads together: the median round's ([`crate::rounds`]), at
    /// every thread count; the best round is among `round_ops_per_sec`.
    pub ops_per_sec: f64,
    /// Median latency of one decision (sampled), nanoseconds.
    pub ns_p50: Option<f64>,
    /// 99th percentile latency, nanoseconds.
    pub ns_p99: Option<f64>,
    /// Share of decisions that admitted.
    pub allowed_share: f64,
    /// Throughput / governor's faster row's (of its default and tuned configurations) in the
    /// same scenario and thread count; `None` where their admitted shares are not comparable
    /// ([`crate::comparison`]).
    pub vs_governor: Option<f64>,
    /// Throughput / the fastest peer's in the same scenario and thread count that counts as this
    /// row counts, exact or approximate (kova's rows; [`Report::best_peer`]); `None` where their
    /// admitted shares are not comparable.
    #[serde(default)]
    pub vs_best_peer: Option<f64>,
    /// With several threads: the share of the measuring spans' union during which every thread
    /// was measuring (1: they started and stopped together); `None` for one thread.
    #[serde(default)]
    pub overlap: Option<f64>,
    /// Throughput / the floor's in the same scenario and thread count.
    pub vs_floor: Option<f64>,
    /// With several threads: the slowest thread's operations over the fastest's (1: even);
    /// `None` for one thread, and in reports written before it was kept.
    #[serde(default)]
    pub thread_share: Option<f64>,
    /// With several threads: the 99th percentile latency of the slowest thread's own samples.
    #[serde(default)]
    pub slowest_p99: Option<f64>,
    /// Read from reports written when one thread kept its best round as `ops_per_sec` and the
    /// median beside it; [`Report::upgrade_rounds`] makes the median the record's rate and
    /// clears this. Never written.
    #[serde(default, skip_serializing)]
    pub median_ops_per_sec: Option<f64>,
    /// Every round's decisions per second, in run order (the kept round is one of them): their
    /// spread is the noise a target's margin is read against ([`crate::rounds`]). Empty in
    /// reports written before they were kept.
    #[serde(default)]
    pub round_ops_per_sec: Vec<f64>,
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
    /// A small-burst row's burst (per window, for the windows); `None` for the default rows,
    /// whose burst is their period's limit, and in reports written before such rows existed.
    #[serde(default)]
    pub burst: Option<u64>,
    /// The sliding window log's rows: the most an exact sliding window of the quota admits of
    /// the same requests at the times they were issued, per second in the counted window (the
    /// log is exact, so no exact limiter admits more of that stream). `None` for the others.
    #[serde(default)]
    pub exact_window_per_sec: Option<f64>,
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
    /// For a peer whose state is one fixed structure for all keys (pingora's sketches): its
    /// bytes, whatever the number of keys (`cell_bytes` is then 0).
    #[serde(default)]
    pub fixed_bytes: Option<usize>,
    /// For kova's sketch: its admissions on the realistic trace that an exact bucket of the
    /// quota (`kova::model::BucketModel`, GCRA's burst and interval), run on the same client's
    /// admitted requests alone, would deny (its bound says none); `None` for the rows that do
    /// not count them.
    #[serde(default)]
    pub over_grants: Option<u64>,
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
    /// The two rows admitted shares more than [`ADMITTED_GAP`](crate::comparison::ADMITTED_GAP)
    /// apart: they did different work, so neither wins.
    NotComparable,
}

impl Status {
    pub(crate) fn from_bool(met: bool) -> Status {
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
            Status::NotComparable => "not comparable",
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
    /// Whether the margin between the figure and the goal is smaller than the spread of the
    /// rounds it was computed from ([`crate::rounds`]): another run may land on the other side.
    #[serde(default)]
    pub within_noise: bool,
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
    /// Whether an exact limiter admits every check of the scenario: its rows that admitted
    /// under [`FULL_ADMISSION`](crate::comparison::FULL_ADMISSION) are flagged. False in reports
    /// written before it was kept.
    #[serde(default)]
    pub all_admitted: bool,
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
    /// Rounds per throughput measurement (the median kept at every thread count).
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
    /// The features beside the checks they build on (`features.rs`).
    #[serde(default)]
    pub features: Vec<FeatureRecord>,
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

/// Cloudflare's `pingora-limits` `Rate` (the keyed scenarios' approximate peer).
pub const PINGORA: &str = "pingora_rate";

/// Order of subjects in tables.
pub const SUBJECT_ORDER: [&str; 21] = [
    "token_bucket",
    "gcra",
    "fixed_window",
    "sliding_window_counter",
    "sliding_window_log",
    "token_bucket_striped",
    "gcra_striped",
    "gcra_hot_keys",
    crate::kova_tables::GCRA_NO_DOOR,
    crate::sketch_subject::SKETCH,
    "governor",
    crate::governor_tuned::GOVERNOR_TUNED,
    "mutex_bucket",
    "ratelimit",
    "ratelimit_std",
    "leaky_bucket",
    PINGORA,
    "floor_cas",
    "floor_read",
    crate::subject::LOAD_FLOOR,
    PINNED_FLOOR,
];

pub(crate) fn subject_rank(s: &str) -> usize {
    SUBJECT_ORDER.iter().position(|&x| x == s).unwrap_or(SUBJECT_ORDER.len())
}

impl Record {
    /// The p99 a latency comparison quotes: the slowest thread's own with several threads (the
    /// samples of all threads pooled hide a slow thread behind the fast ones), the one thread's
    /// otherwise; `None` where it was not kept.
    pub fn tail_p99(&self) -> Option<f64> {
        if self.threads > 1 {
            self.slowest_p99
        } else {
            self.ns_p99
        }
    }
}

impl Report {
    /// The record of `subject` in `scenario` at `threads`.
    pub fn find(&self, scenario: &str, subject: &str, threads: usize) -> Option<&Record> {
        self.records.iter().find(|r| r.scenario == scenario && r.subject == subject && r.threads == threads)
    }

    /// The scenario's own floor (the CAS loop, the random read or the load), which `x floor`
    /// compares with.
    pub(crate) fn floor(&self, scenario: &str, threads: usize) -> Option<&Record> {
        self.records.iter().find(|r| {
            r.scenario == scenario
                && r.kind == SubjectKind::Floor
                && r.subject != PINNED_FLOOR
                && r.threads == threads
        })
    }

    /// How `subject` went from 1 thread to `threads` in `scenario` (aggregate throughput, median
    /// rounds).
    pub(crate) fn scaling(&self, scenario: &str, subject: &str, threads: usize) -> Option<f64> {
        let one = self.find(scenario, subject, 1)?;
        let many = self.find(scenario, subject, threads)?;
        Some(many.ops_per_sec / one.ops_per_sec)
    }

    /// Brings a report written when one thread kept its best round up to the median rule: a
    /// record with a median beside its rate takes the median as its rate (the best stays among
    /// its rounds), and a record with rounds but no median (a feature row, or an older report)
    /// takes the median of its rounds. Latency and admitted share stay those of the round the
    /// older report kept (their medians were not kept). Recomputes the ratios; the targets are
    /// left to [`Report::rerender`].
    pub fn upgrade_rounds(&mut self) {
        let median = |legacy: &mut Option<f64>, rounds: &[f64], ops: &mut f64| {
            if let Some(m) = legacy.take().or_else(|| crate::rounds::median(rounds)) {
                *ops = m;
            }
        };
        for r in &mut self.records {
            median(&mut r.median_ops_per_sec, &r.round_ops_per_sec, &mut r.ops_per_sec);
        }
        for f in &mut self.features {
            median(&mut f.median_ops_per_sec, &f.round_ops_per_sec, &mut f.ops_per_sec);
        }
        self.compute_ratios();
    }

    /// A saved report as the current harness renders it: [`Report::upgrade_rounds`], then every
    /// target evaluated again by the current rules (what `--from-json` and the README check
    /// render).
    pub fn rerender(&mut self) {
        self.upgrade_rounds();
        self.evaluate_targets();
    }

    /// Fills `vs_governor` (against governor's faster row), `vs_best_peer` (kova's rows, against
    /// the fastest peer that counts as they count: [`Report::best_peer`]) and
    /// `vs_floor` of every non-floor record from the records of the same scenario and thread
    /// count; a ratio to a row whose admitted share is not comparable is left out
    /// ([`crate::comparison`]).
    pub fn compute_ratios(&mut self) {
        let ratios: Vec<(Option<f64>, Option<f64>, Option<f64>)> = self
            .records
            .iter()
            .map(|r| {
                if r.kind == SubjectKind::Floor {
                    return (None, None, None);
                }
                let versus = |other: Option<&Record>| {
                    other.filter(|o| not_comparable(r, o).is_none()).map(|o| r.ops_per_sec / o.ops_per_sec)
                };
                let best = versus((r.kind == SubjectKind::Kova).then(|| self.best_peer(r)).flatten());
                let gov = versus(
                    (!is_governor(&r.subject)).then(|| self.governor_row(&r.scenario, r.threads)).flatten(),
                );
                let floor = self.floor(&r.scenario, r.threads).map(|f| r.ops_per_sec / f.ops_per_sec);
                (gov, best, floor)
            })
            .collect();
        for (r, (g, b, f)) in self.records.iter_mut().zip(ratios) {
            r.vs_governor = g;
            r.vs_best_peer = b;
            r.vs_floor = f;
        }
    }
}

/// A summary of the generated trace, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Clients in the trace.
    pub clients: usize,
    /// Requests in the trace.
    pub requests: u64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// The quota, in words.
    pub quota: String,
    /// Share of requests the reference denied, percent.
    pub reference_denied_pct: f64,
    /// (normal, heavy, abusive) client counts.
    pub classes: (usize, usize, usize),
}

/// One feature measurement, beside the check it builds on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FeatureRecord {
    /// [`LIMITS`](crate::features::LIMITS) or [`WAITING`](crate::features::WAITING).
    pub section: String,
    /// What was called (`limits_2`, `until_ready`, ...).
    pub subject: String,
    /// The subject it is compared with (itself for a baseline).
    pub baseline: String,
    /// Whether it is kova's (else a peer's).
    pub kova: bool,
    /// Threads.
    pub threads: usize,
    /// Calls per second, all threads together: the median round's ([`crate::rounds::keep`]), at
    /// every thread count.
    pub ops_per_sec: f64,
    /// Median latency of one sampled call, nanoseconds.
    pub ns_p50: Option<f64>,
    /// Read from reports written when one thread kept its best round; see
    /// [`Record::median_ops_per_sec`]. Never written.
    #[serde(default, skip_serializing)]
    pub median_ops_per_sec: Option<f64>,
    /// Every round's calls per second, in run order: their spread is the noise a feature
    /// target's margin is read against. Empty in reports written before they were kept.
    #[serde(default)]
    pub round_ops_per_sec: Vec<f64>,
}

impl FeatureRecord {
    /// Whether this is a baseline row.
    pub fn is_baseline(&self) -> bool {
        self.subject == self.baseline
    }
}

/// Records and reports for the tests of the modules that read reports.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    pub(crate) fn record(
        subject: &str,
        kind: SubjectKind,
        scenario: &str,
        threads: usize,
        ops: f64,
    ) -> Record {
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
            vs_best_peer: None,
            vs_floor: None,
            overlap: None,
            thread_share: None,
            slowest_p99: None,
            median_ops_per_sec: None,
            round_ops_per_sec: Vec::new(),
        }
    }

    pub(crate) fn report(records: Vec<Record>) -> Report {
        Report {
            machine: Machine {
                cpu: "test".into(),
                cores: 2,
                date: "2025-01-01 00:00 UTC".into(),
                git_commit: None,
                git_dirty: false,
                os: "linux".into(),
                clocksource: "tsc".into(),
                topology: None,
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
                all_admitted: true,
            }],
            records,
            rates: vec![],
            accuracy: vec![],
            trace: None,
            counter_estimate: None,
            memory: vec![],
            large_table_bytes: None,
            features: vec![],
            targets: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

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
