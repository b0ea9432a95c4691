//! The machine a report was measured on, and where the report goes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::cores::Topology;

/// What the report says about where and when it was measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model from `/proc/cpuinfo` ("unknown" elsewhere).
    pub cpu: String,
    /// Logical cores available to this process.
    pub cores: usize,
    /// UTC date and time of the run, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    /// `git rev-parse HEAD` of the workspace, when git and a repository are there.
    pub git_commit: Option<String>,
    /// Whether tracked files differed from that commit (the README and chart a run rewrites
    /// aside): the measured code is then the commit plus those changes.
    #[serde(default)]
    pub git_dirty: bool,
    /// Operating system and architecture.
    pub os: String,
    /// Whether the quanta TSC clock is in use (governor's default clock and kova's precise clock
    /// read the TSC; otherwise they fall back to the OS monotonic clock).
    pub clocksource: String,
    /// The CPUs this process may run on: logical and physical cores ([`Topology`]).
    #[serde(default)]
    pub topology: Option<Topology>,
}

impl Machine {
    /// Reads the current machine.
    pub fn detect() -> Machine {
        Machine {
            cpu: cpu_model().unwrap_or_else(|| "unknown".to_owned()),
            cores: cores(),
            date: utc_now(),
            git_commit: git_commit(),
            git_dirty: git_dirty(),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            clocksource: std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned()),
            topology: Topology::detect(),
        }
    }
}

/// Logical cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    parse_cpu_model(&text)
}

/// The first `model name` line of a `/proc/cpuinfo` text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn git_commit() -> Option<String> {
    let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(workspace_root()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!commit.is_empty()).then_some(commit)
}

/// Whether tracked files other than the README and chart (which `--write-readme` rewrites)
/// differ from `HEAD`; false where git cannot tell.
fn git_dirty() -> bool {
    let out = Command::new("git")
        .args([
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)README.md",
            ":(exclude)docs/bench",
        ])
        .current_dir(workspace_root())
        .output();
    matches!(out, Ok(out) if out.status.success() && !out.stdout.is_empty())
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// Formats Unix seconds as `YYYY-MM-DD HH:MM UTC`.
///
/// ```
/// assert_eq!(kova_bench::machine::format_utc(0), "1970-01-01 00:00 UTC");
/// assert_eq!(kova_bench::machine::format_utc(951_782_400), "2000-02-29 00:00 UTC");
/// ```
pub fn format_utc(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, (rem % 3600) / 60)
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The workspace root (the directory above this crate).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set, else `target/` in the workspace root.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join("target"),
    }
}

/// Where the report files go: `<target-dir>/kova-bench`.
pub fn report_dir() -> PathBuf {
    target_dir().join("kova-bench")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
        // 2024-12-31 23:59 and the day after.
        assert_eq!(format_utc(1_735_689_540), "2024-12-31 23:59 UTC");
        assert_eq!(format_utc(1_735_689_600), "2025-01-01 00:00 UTC");
        // Leap day 2024.
        assert_eq!(format_utc(1_709_164_800), "2024-02-29 00:00 UTC");
    }

    #[test]
    fn cpu_model_line() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n";
        assert_eq!(parse_cpu_model(text), Some("AMD EPYC 7B13".to_owned()));
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
    }
}
