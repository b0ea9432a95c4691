//! Fixed window: a counter per aligned window.

use super::period::Period;
use super::WordAlgorithm;
use crate::{Decision, Quota, QuotaError};

/// Fixed window: at most `limit` units per aligned window `[k * period, (k + 1) * period)`.
///
/// - **For**: quotas users read as calendar-like ("1000 per hour"), the cheapest check there is.
/// - **Memory per key**: 8 bytes (one `AtomicU64`).
/// - **Exactness**: exact per aligned window, and by design loose across an edge: a client can
///   send `limit` just before an edge and `limit` again just after it, **up to `2 * limit` within
///   one period** (the boundary burst the sliding algorithms exist to fix).
///
/// # Layout (one `u64`)
/// ```text
///  63                        32 31                         0
/// +----------------------------+----------------------------+
/// | window index mod 2^32      | count in that window       |
/// +----------------------------+----------------------------+
/// ```
/// - `count`: `0..=limit`, `limit <= 2^32 - 1` ([`FixedWindow::MAX_LIMIT`]).
/// - window index = `now / period`, kept modulo 2^32. A reading up to 2^16 windows behind the
///   stored window is a clock running backwards: it is counted in the stored window (never a
///   fresh count). A key untouched for a multiple of 2^32 windows (136 years of 1 s windows,
///   4.3 s of 1 ns windows) reads as still in its old window: stricter, never looser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    quota: Quota,
    limit: u64,
    period: Period,
}

/// Bits of the window index.
pub(crate) const WINDOW_BITS: u32 = 32;
/// Bits of the count.
pub(crate) const COUNT_BITS: u32 = 32;
const WINDOW_SHIFT: u32 = COUNT_BITS;
const WINDOW_MASK: u64 = (1 << WINDOW_BITS) - 1;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// The largest limit the count field holds.
pub(crate) const MAX_LIMIT: u64 = COUNT_MASK;
const BACKWARD_TOLERANCE: u64 = 1 << 16;

fn pack(window: u64, count: u64) -> u64 {
    ((window & WINDOW_MASK) << WINDOW_SHIFT) | (count & COUNT_MASK)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> WINDOW_SHIFT, word & COUNT_MASK)
}

impl FixedWindow {
    /// Bits of the window index.
    pub const WINDOW_BITS: u32 = WINDOW_BITS;
    /// Bits of the count.
    pub const COUNT_BITS: u32 = COUNT_BITS;
    /// The largest limit the count field holds.
    pub const MAX_LIMIT: u64 = MAX_LIMIT;
}

impl FixedWindow {
    /// Packs `(window index, count)`; the index is kept modulo 2^32.
    pub fn pack_state(window: u64, count: u64) -> u64 {
        pack(window, count)
    }

    /// Unpacks a word into `(window index mod 2^32, count)`.
    pub fn unpack_state(word: u64) -> (u64, u64) {
        unpack(word)
    }

    /// The window `now` counts in, its count, and nanoseconds until that window ends.
    #[inline]
    fn current(&self, word: u64, now: u64) -> (u64, u64, u64) {
        let (stored, count) = unpack(word);
        // A count above the limit (a word stored under a larger quota) reads as a full window.
        let count = count.min(self.limit);
        let index = self.period.divide(now);
        let window = index & WINDOW_MASK;
        let behind = stored.wrapping_sub(window) & WINDOW_MASK;
        let (window, count, end_index) = if behind == 0 || count == 0 {
            // Same window, or an empty count (fresh or reset): nothing to carry over.
            (window, count, index as u128 + 1)
        } else if behind <= BACKWARD_TOLERANCE {
            (stored, count, index as u128 + behind as u128 + 1)
        } else {
            (window, 0, index as u128 + 1)
        };
        let end = end_index * self.period.nanos() as u128;
        let until_end = u64::try_from(end - now as u128).unwrap_or(u64::MAX);
        (window, count, until_end)
    }
}

impl WordAlgorithm for FixedWindow {
    const NAME: &'static str = "fixed_window";

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        super::check_window_quota(&quota, Self::NAME, MAX_LIMIT)?;
        Ok(FixedWindow { quota, limit: quota.limit(), period: Period::new(quota.period_nanos()) })
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn fresh_word(&self) -> u64 {
        pack(0, 0)
    }

    #[inline]
    fn decide(&self, word: u64, now: u64, cost: u64) -> (Decision, u64) {
        let (window, count, until_end) = self.current(word, now);
        let reset = if count > 0 { until_end } else { 0 };
        if cost == 0 {
            return (Decision::allowed(self.limit, self.limit - count, reset), word);
        }
        if count + cost <= self.limit {
            let count = count + cost;
            (Decision::allowed(self.limit, self.limit - count, until_end), pack(window, count))
        } else {
            // cost <= limit, so the next window admits it.
            (Decision::denied(self.limit, self.limit - count, until_end, reset), word)
        }
    }

    fn refund(&self, word: u64, now: u64, cost: u64) -> u64 {
        let (stored, count) = unpack(word);
        let (window, current, _) = self.current(word, now);
        if window != stored || current == 0 || cost == 0 {
            // The charge was in a window that has passed (or there is nothing to give back).
            return word;
        }
        pack(window, count - cost.min(count))
    }

    /// Takes the units from the window the check wrote while the state still counts that
    /// window, whatever `now` is; once the state has moved to a later window, the check's
    /// window has closed with them (the later window's count is other checks' alone).
    fn undo(&self, word: u64, _now: u64, cost: u64, written: u64) -> u64 {
        let (charged, _) = unpack(written);
        let (stored, count) = unpack(word);
        if stored != charged {
            return word;
        }
        pack(stored, count - cost.min(count))
    }

    fn is_idle_word(&self, word: u64, now: u64) -> bool {
        self.current(word, now).1 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_at_the_edges() {
        for window in [0, 1, WINDOW_MASK - 1, WINDOW_MASK] {
            for count in [0, 1, MAX_LIMIT - 1, MAX_LIMIT] {
                assert_eq!(unpack(pack(window, count)), (window, count));
            }
        }
        assert_eq!(unpack(pack(WINDOW_MASK + 2, 7)), (1, 7));
    }

    #[test]
    fn window_index_wraps_without_granting() {
        let fw = <FixedWindow as WordAlgorithm>::from_quota(Quota::from_nanos(2, 10).unwrap()).unwrap();
        let (_, word) = fw.decide(fw.fresh_word(), 5, 2);
        // 2^32 windows later the index matches again: read as the same (full) window.
        let later = 5 + (1u64 << WINDOW_BITS) * 10;
        assert!(!fw.decide(word, later, 1).0.is_allowed());
        // One window after that, a fresh window.
        assert!(fw.decide(word, later + 10, 1).0.is_allowed());
    }

    #[test]
    fn a_fresh_key_late_in_the_index_cycle_is_fresh() {
        // Window index 2^32 - 5 looks "behind" window 0 of the fresh word; an empty count must
        // still read as fresh, in the current window.
        let fw = <FixedWindow as WordAlgorithm>::from_quota(Quota::from_nanos(3, 1000).unwrap()).unwrap();
        let now = ((1u64 << WINDOW_BITS) - 5) * 1000 + 250;
        let (decision, word) = fw.decide(fw.fresh_word(), now, 1);
        assert!(decision.is_allowed());
        assert_eq!(decision.reset_after_nanos(), 750);
        assert_eq!(unpack(word), ((1u64 << WINDOW_BITS) - 5, 1));
    }
}
