//! Number formatting for the report (percentiles come from `hdrhistogram`, see
//! [`crate::throughput`]).

/// Formats a rate (per second) with an SI suffix: `12.3M`, `450k`, `980`.
pub fn si(value: f64) -> String {
    let abs = value.abs();
    if abs >= 1e9 {
        format!("{:.2}G", value / 1e9)
    } else if abs >= 1e6 {
        format!("{:.2}M", value / 1e6)
    } else if abs >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

/// A share as a percentage to one decimal, with more decimals where one would round a share
/// under 1 up to "100.0%" (a flood's few table-full denials among millions of decisions).
pub fn percent(share: f64) -> String {
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
    fn si_suffixes() {
        assert_eq!(si(12_345_678.0), "12.35M");
        assert_eq!(si(450_000.0), "450.0k");
        assert_eq!(si(980.0), "980");
        assert_eq!(si(2.5e9), "2.50G");
    }

    #[test]
    fn a_share_under_one_never_reads_as_a_hundred_percent() {
        assert_eq!(percent(1.0), "100.0%");
        assert_eq!(percent(0.5), "50.0%");
        assert_eq!(percent(0.999), "99.9%");
        assert_eq!(percent(1.0 - 137.0 / 9e6), "99.998%");
        assert_eq!(percent(1.0 - 1e-12), "99.999999%");
    }
}
