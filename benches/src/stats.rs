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
}
