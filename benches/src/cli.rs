//! Command-line options of the report binary.

use std::path::PathBuf;

/// What the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--quick`: a full pass in well under a minute (CI).
    pub quick: bool,
    /// `--filter <substr>[,<substr>...]`: run only the sections whose name contains one of them
    /// (scenario names, `limits`, `waiting`, `rate`, `accuracy`).
    pub filter: Option<String>,
    /// `--write-readme <path>`: replace the README's generated section.
    pub write_readme: Option<PathBuf>,
    /// `--svg <path>`: where `--write-readme` puts the chart (default `docs/bench/throughput.svg`
    /// next to the README).
    pub svg: Option<PathBuf>,
    /// `--from-json <path>`: render an existing report.json instead of measuring.
    pub from_json: Option<PathBuf>,
    /// `--out <dir>`: where report.json/.md/.svg go (default `<target-dir>/kova-bench`).
    pub out: Option<PathBuf>,
    /// `--compare <report.json>`: print each ratio's change against that earlier run.
    pub compare: Option<PathBuf>,
    /// `--check`: exit non-zero when a deterministic target was missed
    /// ([`crate::check::deterministic_misses`]); never on a throughput figure.
    pub check: bool,
    /// `--check-readme <path>`: exit non-zero when that README's generated section (or the chart
    /// beside it) is not what the harness renders from the saved `docs/bench/report.json`.
    pub check_readme: Option<PathBuf>,
    /// `--help`.
    pub help: bool,
}

/// The usage text.
pub const USAGE: &str = "\
kova-bench: throughput, per-key rate, accuracy and memory of kova's algorithms beside its peers

USAGE: cargo run --release -p kova-bench -- [OPTIONS]

OPTIONS:
  --quick                 a full pass in under a minute (CI)
  --filter <names>        only sections whose name contains one of these comma-separated
                          substrings: direct, direct_deny, keyed_hot, keyed_per_thread, keyed_1k,
                          keyed_1k_own, keyed_1m_uniform, keyed_1m_zipf, keyed_churn, keyed_flood,
                          keyed_churn_100pm, keyed_flood_100pm, limits, waiting, rate, accuracy
  --write-readme <path>   replace the text between <!-- kova-bench:start --> and
                          <!-- kova-bench:end --> in <path> with the summary, and write the chart
                          to docs/bench/throughput.svg beside it (or --svg)
  --svg <path>            where --write-readme writes the chart
  --from-json <path>      render a saved report.json by the current rules (medians, ratios and
                          targets recomputed; with --write-readme: no new measurement)
  --check                 exit 1 when a deterministic target was missed (the sliding log's wrong
                          decisions, the sketch's over-grants, memory per key); never on speed
  --check-readme <path>   exit 1 when the generated section of <path> (and the chart beside it)
                          is not what the harness renders from docs/bench/report.json beside it
  --out <dir>             output directory (default: <target-dir>/kova-bench)
  --compare <report.json> after the report, each ratio's change against that earlier run
                          (written to compare.md too); --write-readme keeps its run as
                          docs/bench/report.json, the baseline for the next comparison
  -h, --help              this text

Writes report.json, report.md and throughput.svg to the output directory and prints the
markdown report on stdout; progress goes to stderr.";

impl Options {
    /// Parses the arguments (without the program name).
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Options, String> {
        let mut o = Options::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
                _ => (arg.clone(), None),
            };
            let mut value =
                |n: &str| inline.clone().or_else(|| args.next()).ok_or_else(|| format!("{n} needs a value"));
            match name.as_str() {
                "--quick" => o.quick = true,
                "--filter" => o.filter = Some(value("--filter")?),
                "--write-readme" => o.write_readme = Some(value("--write-readme")?.into()),
                "--svg" => o.svg = Some(value("--svg")?.into()),
                "--from-json" => o.from_json = Some(value("--from-json")?.into()),
                "--out" => o.out = Some(value("--out")?.into()),
                "--compare" => o.compare = Some(value("--compare")?.into()),
                "--check" => o.check = true,
                "--check-readme" => o.check_readme = Some(value("--check-readme")?.into()),
                "-h" | "--help" => o.help = true,
                // `cargo bench` passes --bench to every target; harmless here.
                "--bench" => {}
                other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
            }
        }
        Ok(o)
    }

    /// Whether the section `name` is selected by `--filter`.
    pub fn selects(&self, name: &str) -> bool {
        match &self.filter {
            None => true,
            Some(f) => f.split(',').map(str::trim).filter(|s| !s.is_empty()).any(|s| name.contains(s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_flags_and_values() {
        let o =
            parse(&["--quick", "--filter", "keyed_1m", "--write-readme=README.md", "--compare", "a.json"])
                .unwrap();
        assert!(o.quick);
        assert_eq!(o.compare, Some(PathBuf::from("a.json")));
        assert_eq!(o.filter.as_deref(), Some("keyed_1m"));
        assert_eq!(o.write_readme, Some(PathBuf::from("README.md")));
        let c = parse(&["--quick", "--check", "--check-readme", "README.md"]).unwrap();
        assert!(c.check && c.quick);
        assert_eq!(c.check_readme, Some(PathBuf::from("README.md")));
        assert!(parse(&["--filter"]).is_err());
        assert!(parse(&["--frobnicate"]).is_err());
        assert_eq!(parse(&[]).unwrap(), Options::default());
    }

    #[test]
    fn filter_matches_substrings() {
        let o = parse(&["--filter", "keyed_1m, rate"]).unwrap();
        assert!(o.selects("keyed_1m_zipf") && o.selects("keyed_1m_uniform") && o.selects("rate"));
        assert!(!o.selects("direct") && !o.selects("accuracy"));
        assert!(Options::default().selects("anything"));
    }
}
