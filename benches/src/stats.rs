//! Small statistics over measurements: percentiles, medians, number formatting.

/// The `p`-th percentile (`0.0..=100.0`) of `sorted` by the nearest-rank method: the smallest
/// value such that at least `p`% of the values are at or below it. `None` when empty.
///
/// ```
/// use kova_bench::stats::percentile;
/// let values = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
/// assert_eq!(percentile(&values, 50.0), Some(50));
/// assert_eq!(percentile(&values, 99.0), Some(100));
/// assert_eq!(percentile::<u32>(&[], 50.0), None);
/// ```
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values` (sorted in place); `None` when empty.
pub fn median_u64(values: &mut [u64]) -> Option<u64> {
    values.sort_unstable();
    percentile(values, 50.0)
}

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
    fn percentile_nearest_rank() {
        let values: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), Some(50));
        assert_eq!(percentile(&values, 99.0), Some(99));
        assert_eq!(percentile(&values, 99.5), Some(100));
        assert_eq!(percentile(&values, 100.0), Some(100));
        assert_eq!(percentile(&values, 0.0), Some(1));
        assert_eq!(percentile(&[7u32], 99.0), Some(7));
        // Out-of-range p is clamped rather than panicking.
        assert_eq!(percentile(&values, 250.0), Some(100));
        assert_eq!(percentile(&values, -3.0), Some(1));
    }

    #[test]
    fn percentile_of_skewed_samples() {
        // 98 fast samples and 2 slow ones: p50 is fast, p99 is slow.
        let mut values = vec![20u32; 98];
        values.extend([5_000, 9_000]);
        values.sort_unstable();
        assert_eq!(percentile(&values, 50.0), Some(20));
        assert_eq!(percentile(&values, 98.0), Some(20));
        assert_eq!(percentile(&values, 99.0), Some(5_000));
    }

    #[test]
    fn median_sorts() {
        let mut v = [5, 1, 4, 2, 3];
        assert_eq!(median_u64(&mut v), Some(3));
        assert_eq!(median_u64(&mut []), None);
    }

    #[test]
    fn si_suffixes() {
        assert_eq!(si(12_345_678.0), "12.35M");
        assert_eq!(si(450_000.0), "450.0k");
        assert_eq!(si(980.0), "980");
        assert_eq!(si(2.5e9), "2.50G");
    }
}
