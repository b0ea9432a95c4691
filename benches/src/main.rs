//! The kova benchmark report: `cargo run --release -p kova-bench [-- --quick]`.
//!
//! See `kova_bench` (the library) for what is measured and `--help` for the options.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use kova_bench::accuracy::{run_accuracy, AccuracyConfig, TraceConfig};
use kova_bench::baseline::{compare_markdown, BASELINE_FILE};
use kova_bench::check::{deterministic_misses, readme_is_current};
use kova_bench::cli::{Options, USAGE};
use kova_bench::features::{self, run_features};
use kova_bench::machine::{cores, report_dir, Machine};
use kova_bench::memory::{counting_installed, CountingAlloc};
use kova_bench::rate::{run_count, run_rates, RateConfig};
use kova_bench::readme::replace_between_markers;
use kova_bench::report::{Report, ScenarioInfo, Settings};
use kova_bench::scenarios::{measurement_count, run_scenarios, Scenario, ThroughputConfig};
use kova_bench::throughput::{timer_overhead_ns, RunPlan, SAMPLE_EVERY};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Thread counts: 1, 2, 4, ... up to the cores (at most 16), and the core count itself.
fn thread_counts(cores: usize) -> Vec<usize> {
    let top = cores.clamp(1, 16);
    let mut counts: Vec<usize> =
        std::iter::successors(Some(1usize), |&n| Some(n * 2)).take_while(|&n| n <= top).collect();
    if counts.last() != Some(&top) {
        counts.push(top);
    }
    counts
}

struct Mode {
    name: &'static str,
    rounds: usize,
    measure: Duration,
    churn_ops: u64,
    rate_period: Duration,
    rate_periods: u64,
    trace_clients: usize,
    trace_minutes: u64,
}

const FULL: Mode = Mode {
    name: "full",
    // Five short rounds rather than one long one: the median round is kept at every thread
    // count, their spread says what the machine's noise did, and interleaving spreads
    // disturbances over every subject.
    rounds: 5,
    measure: Duration::from_millis(300),
    churn_ops: 4_000_000,
    rate_period: Duration::from_secs(1),
    rate_periods: 3,
    trace_clients: 4_000,
    trace_minutes: 30,
};

const QUICK: Mode = Mode {
    name: "quick",
    rounds: 1,
    measure: Duration::from_millis(60),
    churn_ops: 400_000,
    rate_period: Duration::from_millis(100),
    rate_periods: 2,
    trace_clients: 400,
    trace_minutes: 10,
};

fn measure(options: &Options) -> Report {
    let started = Instant::now();
    let mode = if options.quick { &QUICK } else { &FULL };
    let machine = Machine::detect();
    let threads = thread_counts(machine.cores);
    let overhead = timer_overhead_ns();
    let scenarios: Vec<Scenario> = Scenario::ALL.into_iter().filter(|s| options.selects(s.name())).collect();
    let throughput = ThroughputConfig {
        threads: threads.clone(),
        rounds: mode.rounds,
        plan: RunPlan { duration: mode.measure, max_ops: None, timer_overhead_ns: overhead, work_rounds: 0 },
        churn_ops: mode.churn_ops,
    };
    let rate = RateConfig {
        offered: vec![10_000.0, 100_000.0, 1_000_000.0],
        threads: 2,
        period: mode.rate_period,
        periods: mode.rate_periods,
        small_bursts: kova_bench::rate::SMALL_BURSTS.to_vec(),
    };
    let sections: Vec<&str> = features::SECTIONS.into_iter().filter(|s| options.selects(s)).collect();
    let run_rate = options.selects("rate");
    let run_acc = options.selects("accuracy");

    let total = measurement_count(&scenarios, &throughput)
        + features::measurement_count(&sections, &throughput)
        + if run_rate { run_count(&rate) } else { 0 }
        + u64::from(run_acc);
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:32}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message("building tables");

    let mut laps = Vec::new();
    let mut section = Instant::now();
    let mut lap = |name: &str, sections: &mut Vec<(String, f64)>| {
        sections.push((name.to_owned(), section.elapsed().as_secs_f64()));
        section = Instant::now();
    };
    let out = run_scenarios(&scenarios, &throughput, |what| {
        bar.inc(1);
        bar.set_message(what.to_owned());
    });
    if !scenarios.is_empty() {
        lap("throughput", &mut laps);
    }
    let feature_records = run_features(&sections, &throughput, |what| {
        bar.inc(1);
        bar.set_message(what.to_owned());
    });
    if !sections.is_empty() {
        lap("features", &mut laps);
    }
    let rates = if run_rate {
        run_rates(&rate, |what| {
            bar.inc(1);
            bar.set_message(what.to_owned());
        })
    } else {
        Vec::new()
    };
    if run_rate {
        lap("per-key rate", &mut laps);
    }
    let (accuracy, trace, counter_estimate) = if run_acc {
        bar.set_message("accuracy: generating and replaying traces");
        let period_ns = 60_000_000_000;
        let config = AccuracyConfig {
            trace: TraceConfig {
                clients: mode.trace_clients,
                duration_ns: mode.trace_minutes * period_ns,
                limit: 100,
                period_ns,
                seed: 0x6b6f_7661,
            },
        };
        let (records, summary, estimate) = run_accuracy(&config);
        bar.inc(1);
        (records, Some(summary), Some(estimate))
    } else {
        (Vec::new(), None, None)
    };
    if run_acc {
        lap("accuracy", &mut laps);
    }
    bar.finish_and_clear();

    let mut report = Report {
        machine,
        settings: Settings {
            mode: mode.name.to_owned(),
            filter: options.filter.clone(),
            threads,
            rounds: mode.rounds,
            measure_ms: mode.measure.as_millis() as u64,
            sample_every: SAMPLE_EVERY,
            timer_overhead_ns: overhead,
            rate_period_ms: mode.rate_period.as_millis() as u64,
            rate_periods: mode.rate_periods,
            rate_threads: rate.threads,
            elapsed_s: 0.0,
            section_s: laps,
        },
        scenarios: scenarios
            .iter()
            .map(|s| ScenarioInfo {
                name: s.name().into(),
                description: match s.work_rounds() {
                    0 => s.description().into(),
                    rounds => format!(
                        "{} Between two checks each thread works {rounds} rounds: {} ns on this machine",
                        s.description(),
                        kova_bench::throughput::work_nanos(rounds)
                    ),
                },
                quota: s.quota_text(),
                all_admitted: s.all_admitted(),
            })
            .collect(),
        records: out.records,
        rates,
        accuracy,
        trace,
        counter_estimate,
        memory: out.memory,
        large_table_bytes: out.large_table_bytes,
        features: feature_records,
        targets: Vec::new(),
    };
    report.compute_ratios();
    report.evaluate_targets();
    report.settings.elapsed_s = started.elapsed().as_secs_f64();
    report
}

fn write(path: &Path, contents: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A path relative to `base`'s directory, with `/` separators, for a markdown link.
fn relative_link(readme: &Path, target: &Path) -> String {
    let base = readme.parent().unwrap_or(Path::new(""));
    let rel = target.strip_prefix(base).unwrap_or(target);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// A saved report, rendered by the current rules ([`Report::rerender`]).
fn read_report(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut report: Report = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a kova-bench report: {e}", path.display()))?;
    report.rerender();
    Ok(report)
}

/// Where `--write-readme` and `--check-readme` put the chart: `--svg`, else
/// `docs/bench/throughput.svg` beside the README; the run's JSON lies beside the chart.
fn svg_path(options: &Options, readme: &Path) -> PathBuf {
    options.svg.clone().unwrap_or_else(|| {
        readme.parent().map_or_else(PathBuf::new, Path::to_path_buf).join("docs/bench/throughput.svg")
    })
}

/// What is stale in `readme`'s generated section and its chart against the saved run beside
/// the chart; empty when both are what the harness renders.
fn stale_readme(options: &Options, readme: &Path) -> Result<Vec<String>, String> {
    let svg_path = svg_path(options, readme);
    let json_path = svg_path.with_file_name(BASELINE_FILE);
    let saved = read_report(&json_path)?;
    let text =
        std::fs::read_to_string(readme).map_err(|e| format!("cannot read {}: {e}", readme.display()))?;
    let mut stale = Vec::new();
    let rerender = format!(
        "re-render with `cargo run --release -p kova-bench -- --from-json {} --write-readme {}`",
        json_path.display(),
        readme.display()
    );
    if !readme_is_current(&text, &saved, &relative_link(readme, &svg_path))
        .map_err(|e| format!("{}: {e}", readme.display()))?
    {
        stale.push(format!(
            "{}'s generated section is not what the harness renders from {}: {rerender}",
            readme.display(),
            json_path.display()
        ));
    }
    let svg = kova_bench::chart::render_svg(&saved).map_err(|e| format!("chart: {e}"))?;
    if std::fs::read_to_string(&svg_path).ok().as_deref() != Some(svg.as_str()) {
        stale.push(format!(
            "{} is not what the harness renders from {}: {rerender}",
            svg_path.display(),
            json_path.display()
        ));
    }
    Ok(stale)
}

fn run(options: &Options) -> Result<(), String> {
    // Read before measuring: a bad path fails at once, and --write-readme may replace the file.
    let baseline = options.compare.as_deref().map(read_report).transpose()?;
    // The README check first: it costs nothing, and its answer does not wait for a measurement.
    let mut failures = match &options.check_readme {
        Some(readme) => stale_readme(options, readme)?,
        None => Vec::new(),
    };
    let report = match &options.from_json {
        Some(path) => read_report(path)?,
        None => {
            if !counting_installed() {
                eprintln!("warning: the counting allocator is not active; heap per key will be missing");
            }
            measure(options)
        }
    };
    let dir = options.out.clone().unwrap_or_else(report_dir);
    let markdown = report.to_markdown();
    let svg = kova_bench::chart::render_svg(&report).map_err(|e| format!("chart: {e}"))?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| format!("json: {e}"))?;
    if options.from_json.is_none() {
        write(&dir.join("report.json"), &json)?;
    }
    write(&dir.join("report.md"), &markdown)?;
    write(&dir.join("throughput.svg"), &svg)?;
    println!("{markdown}");
    eprintln!("wrote {}/report.{{json,md}} and throughput.svg", dir.display());
    if let Some(before) = &baseline {
        let comparison = compare_markdown(before, &report);
        write(&dir.join("compare.md"), &comparison)?;
        println!("\n{comparison}");
        eprintln!("wrote {}/compare.md", dir.display());
    }

    if let Some(readme) = &options.write_readme {
        let svg_path = svg_path(options, readme);
        let text =
            std::fs::read_to_string(readme).map_err(|e| format!("cannot read {}: {e}", readme.display()))?;
        let summary = report.readme_summary(&relative_link(readme, &svg_path));
        let updated =
            replace_between_markers(&text, &summary).map_err(|e| format!("{}: {e}", readme.display()))?;
        // The run's JSON beside the chart: the baseline of the next `--compare`.
        let json_path = svg_path.with_file_name(BASELINE_FILE);
        write(&svg_path, &svg)?;
        write(&json_path, &json)?;
        write(readme, &updated)?;
        eprintln!(
            "updated {}, wrote the chart to {} and the run to {} (commit all three)",
            readme.display(),
            svg_path.display(),
            json_path.display()
        );
    }
    if options.check {
        failures.extend(
            deterministic_misses(&report).into_iter().map(|m| format!("deterministic target missed: {m}")),
        );
    }
    if !failures.is_empty() {
        return Err(format!("check failed:\n  - {}", failures.join("\n  - ")));
    }
    if options.check {
        eprintln!("check passed: every deterministic target met");
    }
    if options.check_readme.is_some() {
        eprintln!("check passed: the README's generated section and chart match their saved run");
    }
    Ok(())
}

fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if options.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    // Reports go under the workspace's target dir unless --out says otherwise; make sure the
    // machine's core count is what the thread counts are based on.
    debug_assert!(cores() >= 1);
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_cover_the_cores() {
        assert_eq!(thread_counts(1), [1]);
        assert_eq!(thread_counts(2), [1, 2]);
        assert_eq!(thread_counts(6), [1, 2, 4, 6]);
        assert_eq!(thread_counts(64), [1, 2, 4, 8, 16]);
    }

    #[test]
    fn links_are_relative_to_the_readme() {
        assert_eq!(
            relative_link(Path::new("README.md"), Path::new("docs/bench/throughput.svg")),
            "docs/bench/throughput.svg"
        );
        assert_eq!(
            relative_link(Path::new("/repo/README.md"), Path::new("/repo/docs/bench/throughput.svg")),
            "docs/bench/throughput.svg"
        );
    }
}
