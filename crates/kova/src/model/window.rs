//! How many timestamps fit in a sliding window: the measure of a limit's worst burst, used by
//! the boundary-burst tests and the benchmark harness's accuracy section.

/// The most timestamps of `sorted` (non-decreasing nanoseconds) inside any half-open window
/// `[t, t + width)`: "the most admitted in any sliding window of one period".
///
/// ```
/// use kova::model::max_in_sliding_window;
/// // Two bursts 10 apart: a window of width 11 holds both, one of width 10 only one.
/// let times = [0, 1, 2, 10, 11, 12];
/// assert_eq!(max_in_sliding_window(&times, 11), 4);
/// assert_eq!(max_in_sliding_window(&times, 10), 3);
/// ```
pub fn max_in_sliding_window(sorted: &[u64], width: u64) -> usize {
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..sorted.len() {
        // The window starting at sorted[lo] must reach sorted[hi].
        while sorted[hi] - sorted[lo] >= width {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_window_edges() {
        assert_eq!(max_in_sliding_window(&[], 10), 0);
        assert_eq!(max_in_sliding_window(&[5], 1), 1);
        // Equal timestamps all fall in one window.
        assert_eq!(max_in_sliding_window(&[3, 3, 3], 1), 3);
        // Half-open: t and t + width are never in one window.
        assert_eq!(max_in_sliding_window(&[0, 60], 60), 1);
        assert_eq!(max_in_sliding_window(&[0, 59], 60), 2);
    }
}
