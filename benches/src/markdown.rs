//! The report's markdown forms: the full report and the README summary.

use std::fmt::Write as _;

use crate::comparison::{counting_words, is_governor, not_comparable};
use crate::cores::ThreadPlacement;
use crate::peer_tables::PEERS_LEFT_OUT;
use crate::report::{
    subject_rank, Record, Report, SubjectKind, CLOUDFLARE_RATE_GAP_PCT, CLOUDFLARE_WRONG_PCT, PINGORA,
    PINNED_FLOOR,
};
use crate::rounds::Rounds as _;
use crate::stats::{percent, si};
use crate::summary::CLOCKS;

/// A multi-thread measurement whose threads measured together for less than this share of
/// their spans is flagged.
pub const OVERLAP_FLAG: f64 = 0.9;

/// How the targets are read, above their table in both forms.
const TARGETS_READING: &str =
    "A denial writes nothing, so it costs less than an admission: a target between two \
     rows whose admitted shares differ by more than one percentage point is \"not comparable\" (both shares \
     given), whichever side admitted less, and the shares are given wherever either row admitted under 99%. \
     Every target against governor takes the faster of its two rows in this run (`governor`, its defaults; \
     `governor_tuned`, its upkeep clock and, keyed, ahash), a latency goal the lower of their p99s. A target \
     is \"within noise\" where the rounds it was computed from reach the other side of its goal (the \
     ratio of one row's fastest round to the other's slowest, or the reverse): another run may land \
     there.";

impl Report {
    pub(crate) fn max_threads(&self) -> usize {
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
        let max = self.max_threads();
        if max > 1 && !self.records.is_empty() {
            let (placement, shared) = self.placement();
            let _ = writeln!(
                out,
                "\n{} Rounds: the median of {} kept at every thread count (every figure and ratio is a \
                 median round's; the best round is in `rounds`).",
                placement.sentence(self.machine.topology.as_ref(), max, shared),
                self.settings.rounds
            );
        }
        if m.cores <= 4 {
            let _ = writeln!(
                out,
                "\n> A small shared virtual machine: absolute figures are noisy. Every ratio compares \
                 subjects measured in the same run, interleaved round by round."
            );
        }
    }

    /// Where the threads ran, judged from the topology and the CAS floors at the most threads:
    /// one word per thread (`keyed_per_thread`) and one shared word (`direct`, else `keyed_hot`).
    /// Also returns the shared word's ratio.
    pub fn placement(&self) -> (ThreadPlacement, Option<f64>) {
        let max = self.max_threads();
        let parallel = self.scaling("keyed_per_thread", "floor_cas", max);
        let shared =
            self.scaling("direct", "floor_cas", max).or_else(|| self.scaling("keyed_hot", "floor_cas", max));
        (ThreadPlacement::judge(self.machine.topology.as_ref(), max, parallel, shared), shared)
    }

    /// Multi-thread records whose threads measured together less than 90% of their span.
    fn overlap_note(&self, out: &mut String) {
        let short: Vec<String> = self
            .records
            .iter()
            .filter(|r| r.overlap.is_some_and(|o| o < OVERLAP_FLAG))
            .map(|r| {
                format!(
                    "`{}` {} x{} ({:.0}%)",
                    r.scenario,
                    r.subject,
                    r.threads,
                    r.overlap.unwrap_or(0.0) * 100.0
                )
            })
            .collect();
        let threads = self.records.iter().filter(|r| r.overlap.is_some()).count();
        if threads == 0 {
            return;
        }
        if short.is_empty() {
            let _ = writeln!(
                out,
                "Every multi-thread measurement's threads were measuring together for at least {:.0}% of \
                 their spans (first start to last stop).\n",
                OVERLAP_FLAG * 100.0
            );
        } else {
            let _ = writeln!(
                out,
                "**Flagged**: in {} of {threads} multi-thread measurements the threads were measuring \
                 together for under {:.0}% of their spans (a thread started late or stopped early; the \
                 aggregate then counts time a thread ran alone): {}.\n",
                short.len(),
                OVERLAP_FLAG * 100.0,
                short.join(", ")
            );
        }
    }

    fn targets_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "{TARGETS_READING} Every target against the best peer takes the fastest peer that counts as \
             kova's row does: {}.\n",
            counting_words()
        );
        let _ = writeln!(out, "| target | goal | measured | |\n|---|---|---|---|");
        for t in &self.targets {
            let noise = if t.within_noise { " (within noise)" } else { "" };
            let _ =
                writeln!(out, "| {} | {} | {} | {}{noise} |", t.name, t.goal, t.measured, t.status.text());
        }
    }

    /// A ratio column's cell: the ratio, "n/c" where the row it would compare with admitted a
    /// share more than a point away ([`crate::comparison`]), "-" where there is none.
    fn ratio_cell(r: &Record, value: Option<f64>, other: Option<&Record>) -> String {
        match (value, other) {
            (Some(x), _) => format!("{x:.2}x"),
            (None, Some(o)) if not_comparable(r, o).is_some() => "n/c".into(),
            _ => "-".into(),
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
                "| subject | threads | decisions/s | rounds (min-max) | ns/check (per thread) | p50 ns | p99 ns | admitted | x governor | x best peer | x floor | threads overlapped | slowest / fastest thread | slowest thread's p99 ns |\n\
                 |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for subject in self.sorted_subjects(&s.name) {
                for &threads in &self.settings.threads {
                    let Some(r) = self.find(&s.name, &subject, threads) else { continue };
                    let admitted = if self.flagged(r) {
                        format!("**{}**", percent(r.allowed_share))
                    } else {
                        percent(r.allowed_share)
                    };
                    let governor =
                        (!is_governor(&subject)).then(|| self.governor_row(&s.name, threads)).flatten();
                    let peer = (r.kind == SubjectKind::Kova).then(|| self.best_peer(r)).flatten();
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                        subject,
                        threads,
                        si(r.ops_per_sec),
                        r.range_text(),
                        threads as f64 * 1e9 / r.ops_per_sec,
                        opt(r.ns_p50, 0),
                        opt(r.ns_p99, 0),
                        admitted,
                        Self::ratio_cell(r, r.vs_governor, governor),
                        Self::ratio_cell(r, r.vs_best_peer, peer),
                        ratio(r.vs_floor),
                        r.overlap.map_or("-".into(), |o| format!("{:.0}%", o * 100.0)),
                        r.thread_share.map_or("-".into(), |share| format!("{share:.2}")),
                        opt(r.slowest_p99, 0),
                    );
                }
            }
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
        self.overlap_note(out);
        let (Some(parallel), Some(shared)) = (ratio("keyed_per_thread"), ratio("direct")) else { return };
        let verdict = match self.placement().0 {
            ThreadPlacement::TookTurns => {
                "the threads mostly took turns on the CPUs (other load on the machine), so the multi-thread \
                 rows below say little about scaling or contention"
            }
            ThreadPlacement::SharedCore => {
                "one shared word cost the threads nothing extra, or the topology has fewer cores than \
                 threads: the cache line never crossed between cores, so this run cannot show what a hot \
                 key costs across cores"
            }
            ThreadPlacement::Disturbed => {
                "one shared word ran faster on more threads than on one: the one-thread round was \
                 disturbed by other load, so these two floors cannot tell where the threads ran"
            }
            _ => "the threads ran at once, and one shared word slows them down as cross-core contention does",
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
            "| offered | subject | offered, measured | quota | burst | admitted | error | vs an exact window |\n\
             |---:|---|---:|---:|---:|---:|---:|---:|"
        );
        for r in &self.rates {
            let exact = r.exact_window_per_sec.map_or(String::new(), |e| {
                format!("{:+.3}% of {}/s", (r.admitted_per_sec / e - 1.0) * 100.0, si(e))
            });
            let _ = writeln!(
                out,
                "| {}/s | {} | {}/s | {}/s | {} | {}/s | {:+.3}% | {exact} |",
                si(r.offered_target),
                r.subject,
                si(r.offered_per_sec),
                si(r.quota_per_sec),
                r.burst.map_or("period's limit".into(), |b| b.to_string()),
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
                "| {} | {} | {} | {:.4}% | {:.4}% | {:.2}% | {:.2}% | {} |",
                r.algorithm,
                r.boundary_max,
                r.flood_max,
                r.wrongly_allowed_pct,
                r.wrongly_denied_pct,
                r.rate_gap_limited_pct,
                r.rate_gap_all_pct,
                r.fixed_bytes
                    .map_or(format!("{} B", r.cell_bytes), |b| format!("{} KiB for all keys", b / 1024))
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
                 `|admitted - exact| / exact` per client and per period, averaged. `{PINGORA}` is \
                 pingora-limits' `Rate` as Pingora's example uses it (deny when `observe(&key, 1)` \
                 exceeds the limit: a fixed window whose count includes denied requests) with its default \
                 sketches (4 x 1,024 counters, 64 KiB for every key), replayed on the simulated clock with \
                 every client in the one sketch, in time order.",
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
            out.push_str("\n## kova against the fastest peer of each scenario\n\n");
            self.best_peer_table(&mut out);
            let _ = writeln!(out, "\n{PEERS_LEFT_OUT}");
        }
        if !self.records.is_empty() {
            let _ = writeln!(
                out,
                "\n## Throughput\n\nDecisions per second, all threads together; of {} round(s) of {} ms, the median round at every thread count \
                 (every round's rate is kept in report.json; `rounds` gives their range). \
                 Latency: one check in {} timed alone with the TSC; two back-to-back TSC reads are {} ns apart on \
                 this machine (their cost and, on this VM, the resolution), which is subtracted, so a check faster \
                 than that reads as 0. {CLOCKS} `x governor`, `x best peer` and `x floor` are throughput ratios \
                 (above 1: faster); `x governor` is against the faster of governor's two rows; `x best peer` \
                 against the fastest peer that counts as the row does ({}); `n/c` where the \
                 row compared with admitted a share more than a point away (not comparable).\n",
                self.settings.rounds,
                self.settings.measure_ms,
                self.settings.sample_every,
                self.settings.timer_overhead_ns,
                counting_words()
            );
            self.contention_note(&mut out);
            self.summary_table(&mut out);
            out.push('\n');
            self.admission_flags(&mut out);
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
        self.detail_sections(&mut out, Form::Full);
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
            let _ = writeln!(out, "![decisions per second, per scenario and thread count]({svg_link})\n");
            self.summary_table(&mut out);
            let _ = writeln!(out, "\n{CLOCKS}\n");
            self.admission_flags(&mut out);
            self.overlap_note(&mut out);
        }
        if !self.targets.is_empty() {
            out.push_str("\n**Targets**\n\n");
            self.targets_table(&mut out);
        }
        if !self.records.is_empty() {
            out.push_str("\n**kova against the fastest peer of each scenario**\n\n");
            self.best_peer_table(&mut out);
            let _ = writeln!(out, "\n{PEERS_LEFT_OUT}");
        }
        self.detail_sections(&mut out, Form::Readme);
        out
    }

    /// The sections both forms end with: the features, accuracy, speed beside accuracy and
    /// memory, the per-key rate, memory per key (the full report adds its words to the features
    /// and the per-key rate).
    fn detail_sections(&self, out: &mut String, form: Form) {
        if !self.features.is_empty() {
            form.heading(
                out,
                "Features beside the check they build on",
                "(same run, quotas that admit every call)",
            );
            if form == Form::Full {
                self.features_intro(out);
            }
            self.features_table(out, form == Form::Full);
        }
        if !self.accuracy.is_empty() {
            form.heading(out, "Accuracy", "");
            self.trace_text(out);
            out.push('\n');
            self.accuracy_table(out);
        }
        if !self.accuracy.is_empty() || !self.memory.is_empty() {
            form.heading(out, "Speed beside accuracy and memory", "");
            self.joined_table(out);
        }
        if !self.rates.is_empty() {
            form.heading(out, "Per-key rate", "(quota = half the offered rate)");
            if form == Form::Full {
                let _ = writeln!(
                    out,
                    "One key of a keyed limiter offered a paced stream ({} threads) against a quota of \
                     half the offered rate per {} ms, kova's tables on its default coarse clock (1 ms ticks), governor's \
                     on its two clocks (`governor` a TSC read per check, `governor_tuned` its upkeep clock, 1 ms \
                     ticks). The stream starts on a \
                     window edge; after {} warm-up periods, admissions are counted over {} whole period(s). \
                     `vs an exact window` (the sliding window log's rows): the log's admissions against the most an \
                     exact sliding window of the quota admits of the same requests at the times they were issued \
                     (the independent model `kova::model::SlidingLogModel` replayed on those times). \
                     Where the requests are not evenly spaced, each admission waits for the first request after a \
                     unit leaves the window, so no exact limiter reaches the quota's rate on them.\n",
                    self.settings.rate_threads,
                    self.settings.rate_period_ms,
                    crate::rate::WARMUP_PERIODS,
                    self.settings.rate_periods
                );
            }
            self.rate_table(out);
        }
        if !self.memory.is_empty() {
            form.heading(out, "Memory per key", "(1,000,000 u64 keys)");
            self.memory_table(out);
        }
    }
}

/// Which markdown form a section is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The full report: `##` headings.
    Full,
    /// The README summary: bold headings inside the README's own section.
    Readme,
}

impl Form {
    /// A section's heading, with `note` after the title when there is one.
    fn heading(self, out: &mut String, title: &str, note: &str) {
        let title = match self {
            Form::Full => format!("## {title}"),
            Form::Readme => format!("**{title}**"),
        };
        let _ = match note {
            "" => write!(out, "\n{title}\n\n"),
            note => write!(out, "\n{title} {note}\n\n"),
        };
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}x"))
}

#[cfg(test)]
mod tests {
    use crate::report::test_support::*;
    use crate::report::SubjectKind;

    #[test]
    fn threads_that_did_not_measure_together_are_flagged() {
        let mut late = record("gcra", SubjectKind::Kova, "direct", 2, 40e6);
        late.overlap = Some(0.55);
        let mut together = record("governor", SubjectKind::Peer, "direct", 2, 30e6);
        together.overlap = Some(0.97);
        let r = report(vec![record("gcra", SubjectKind::Kova, "direct", 1, 50e6), late, together.clone()]);
        let summary = r.readme_summary("x.svg");
        assert!(summary.contains("**Flagged**: in 1 of 2 multi-thread measurements"), "{summary}");
        assert!(summary.contains("`direct` gcra x2 (55%)"), "{summary}");
        let r = report(vec![together]);
        let mut out = String::new();
        r.overlap_note(&mut out);
        assert!(out.starts_with("Every multi-thread measurement's threads were measuring together"), "{out}");
    }
}
