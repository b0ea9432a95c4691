//! Sliding window counter (Cloudflare's): two counts weighted by the window's progress.

use super::period::Period;
use super::{GiveBack, WordAlgorithm};
use crate::{Decision, Quota, QuotaError};

/// Sliding window counter: estimates the count in the last `period` as
/// `floor(prev * (1 - elapsed / period)) + current`, where `prev` and `current` are the counts of
/// the previous and current aligned windows and `elapsed` is how far into the current window
/// `now` is. A request of `cost` is admitted when `estimate + cost <= limit`.
///
/// - **For**: near-sliding accuracy at fixed-window cost; Cloudflare's choice.
/// - **Memory per key**: 8 bytes (one `AtomicU64`).
/// - **Rate**: the previous window's weighted count is rounded down (a part of a unit does not
///   deny a whole one; for one unit this is admitting while the unrounded estimate of the
///   requests before it is below the limit). So under steady overload every window admits its
///   full `limit`, the last units in its final `period / limit`, and the admitted rate is the
///   quota's at any burst. Rounded up, the previous window's last unit would weigh until the
///   window's very end and each window would admit `limit - 1`: a `1 / limit` loss (half the rate
///   at a limit of 1).
/// - **Exactness**: approximate. The estimate is computed in integers, no floating point, but it
///   assumes the previous window's requests were spread evenly. When they were not, a real
///   sliding window of length `period` can hold more than `limit`: at most `prev + current <=
///   2 * limit` in the adversarial case (all of the previous window's requests at its very end,
///   then the current window's in its last `period / limit`). A burst right after a window's edge
///   is still denied while the previous window counts fully. On realistic traffic Cloudflare
///   measured 0.003% of requests wrongly allowed or denied; the benchmark harness measures it on
///   kova's traces.
///
/// # Layout (one `u64`)
/// ```text
///  63              40 39              20 19               0
/// +------------------+------------------+------------------+
/// | window mod 2^24  | prev (20 b)      | current (20 b)   |
/// +------------------+------------------+------------------+
/// ```
/// - `prev`, `current`: counts, `0..=limit`, `limit <= 2^20 - 1` ([`SlidingWindowCounter::MAX_LIMIT`]).
/// - window index = `now / period` modulo 2^24. One window on, `current` becomes `prev`; two or
///   more on, both are zero. A reading up to 2^8 windows behind the stored window counts as the
///   stored window's start (the strictest point of it): a clock running backwards never grants.
///   A reading further behind is, modulo 2^24, a later window: it reads as fresh (no clock kova
///   provides runs backwards by that much; only [`ManualClock::set`](crate::ManualClock::set) can).
///   A key untouched for a multiple of 2^24 windows (194 days of 1 s windows) reads as if no time
///   had passed: stricter, never looser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowCounter {
    quota: Quota,
    limit: u64,
    period: Period,
}

/// Bits of the window index.
pub(crate) const WINDOW_BITS: u32 = 24;
/// Bits of each count.
pub(crate) const COUNT_BITS: u32 = 20;
const WINDOW_SHIFT: u32 = 2 * COUNT_BITS;
const PREV_SHIFT: u32 = COUNT_BITS;
const WINDOW_MASK: u64 = (1 << WINDOW_BITS) - 1;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// The largest limit a count field holds.
pub(crate) const MAX_LIMIT: u64 = COUNT_MASK;
const BACKWARD_TOLERANCE: u64 = 1 << 8;

fn pack(window: u64, prev: u64, current: u64) -> u64 {
    ((window & WINDOW_MASK) << WINDOW_SHIFT) | ((prev & COUNT_MASK) << PREV_SHIFT) | (current & COUNT_MASK)
}

fn unpack(word: u64) -> (u64, u64, u64) {
    (word >> WINDOW_SHIFT, (word >> PREV_SHIFT) & COUNT_MASK, word & COUNT_MASK)
}

/// The state as seen at one instant.
#[derive(Debug, Clone, Copy)]
struct View {
    window: u64,
    prev: u64,
    current: u64,
    /// Nanoseconds into the window (0 when the clock is behind the stored window).
    elapsed: u64,
    /// Nanoseconds from the real `now` to the instant the view describes (only when behind).
    lag: u64,
}

impl SlidingWindowCounter {
    /// Bits of the window index.
    pub const WINDOW_BITS: u32 = WINDOW_BITS;
    /// Bits of each count.
    pub const COUNT_BITS: u32 = COUNT_BITS;
    /// The largest limit a count field holds.
    pub const MAX_LIMIT: u64 = MAX_LIMIT;
}

impl SlidingWindowCounter {
    /// Packs `(window index, prev, current)`; the index is kept modulo 2^24.
    pub fn pack_state(window: u64, prev: u64, current: u64) -> u64 {
        pack(window, prev, current)
    }

    /// Unpacks a word into `(window index mod 2^24, prev, current)`.
    pub fn unpack_state(word: u64) -> (u64, u64, u64) {
        unpack(word)
    }

    #[inline]
    fn view(&self, word: u64, now: u64) -> View {
        let (stored, prev, current) = unpack(word);
        let (index, elapsed) = self.period.window_and_elapsed(now);
        let window = index & WINDOW_MASK;
        let ahead = window.wrapping_sub(stored) & WINDOW_MASK;
        let behind = stored.wrapping_sub(window) & WINDOW_MASK;
        if prev == 0 && current == 0 {
            // Empty (fresh or reset): whatever its window index, it counts nothing.
            return View { window, prev: 0, current: 0, elapsed, lag: 0 };
        }
        match ahead {
            0 => View { window, prev, current, elapsed, lag: 0 },
            1 => View { window, prev: current, current: 0, elapsed, lag: 0 },
            _ if behind <= BACKWARD_TOLERANCE => {
                let lag = (behind as u128 * self.period.nanos() as u128 - elapsed as u128)
                    .min(u64::MAX as u128) as u64;
                View { window: stored, prev, current, elapsed: 0, lag }
            }
            _ => View { window, prev: 0, current: 0, elapsed, lag: 0 },
        }
    }

    /// `floor(prev * (period - elapsed) / period)`: the previous window's count, weighted by
    /// the share of it still in the sliding window and rounded down (a part of a unit does not
    /// count as a whole one). In u64 when the product fits (periods up to 2^44 ns, 4.9 hours, at
    /// the largest limit): a 64-bit division on the hot path instead of a 128-bit one.
    #[inline]
    fn weighted(&self, prev: u64, elapsed: u64) -> u64 {
        if prev == 0 {
            return 0;
        }
        match prev.checked_mul(self.period.nanos() - elapsed) {
            Some(product) => self.period.divide(product),
            None => {
                (prev as u128 * (self.period.nanos() - elapsed) as u128 / self.period.nanos() as u128) as u64
            }
        }
    }

    /// Whether `current` (the current window's count with the cost) and `prev` weighted at
    /// `elapsed` fit the limit together: `current + weighted(prev, elapsed) <= limit`, decided
    /// without the weighting's division. An admission's word depends on this test alone, so it
    /// runs between the load and the compare-and-swap, where every cycle widens the span in
    /// which another core's write makes the compare-and-swap fail.
    #[inline(always)]
    fn fits(&self, prev: u64, elapsed: u64, current: u64) -> bool {
        let Some(room) = self.limit.checked_sub(current) else { return false };
        // The weighted count is at most `prev`.
        if prev <= room {
            return true;
        }
        // `floor(prev * (p - e) / p) <= room` holds exactly when `prev * (p - e) < (room + 1) * p`.
        u128::from(prev) * u128::from(self.period.nanos() - elapsed)
            < u128::from(room + 1) * u128::from(self.period.nanos())
    }

    /// `limit - current - weighted`, or 0 when over.
    fn remaining(&self, weighted: u64, current: u64) -> u64 {
        self.limit.saturating_sub(current).saturating_sub(weighted)
    }

    /// The elapsed time (from a window's start) from which `prev`, weighted, is at most `room`:
    /// `floor(prev * (p - e) / p) <= room` holds once `prev * (p - e) < (room + 1) * p`, that is
    /// once `e >= p - floor(((room + 1) * p - 1) / prev)`.
    #[inline(always)]
    fn weighted_at_most(&self, prev: u64, room: u64) -> u64 {
        if prev <= room {
            // Even a whole window's weight fits.
            return 0;
        }
        // `room + 1 <= prev`, so the quotient is below the period: no cap needed. In u64 when
        // the product fits, as in `weighted`.
        let spared = match (room + 1).checked_mul(self.period.nanos()) {
            Some(product) => (product - 1) / prev,
            None => (((room as u128 + 1) * self.period.nanos() as u128 - 1) / prev as u128) as u64,
        };
        self.period.nanos() - spared
    }

    /// Nanoseconds (from the view's instant) until the limiter is back to full: `current` and
    /// the previous window's weighted count both zero.
    #[inline(always)]
    fn until_fresh(&self, v: &View, current: u64) -> u64 {
        let to_end = self.period.nanos() - v.elapsed;
        if current > 0 {
            // Next window: `current` becomes the previous count.
            to_end.saturating_add(self.weighted_at_most(current, 0))
        } else {
            self.weighted_at_most(v.prev, 0).saturating_sub(v.elapsed)
        }
    }

    /// Nanoseconds (from the view's instant) until `cost` fits, with no other traffic.
    #[inline(always)]
    fn until_fits(&self, v: &View, cost: u64) -> u64 {
        match self.limit.checked_sub(v.current.saturating_add(cost)) {
            // Fits this window once the previous count, weighted, leaves room for it.
            Some(room) => self.weighted_at_most(v.prev, room).saturating_sub(v.elapsed),
            // Next window: the previous count is then `current`, the current one empty.
            None => (self.period.nanos() - v.elapsed)
                .saturating_add(self.weighted_at_most(v.current, self.limit.saturating_sub(cost))),
        }
    }
}

impl WordAlgorithm for SlidingWindowCounter {
    const NAME: &'static str = "sliding_window_counter";
    // An admission's reset costs a division by the count that the word does not need.
    const DECIDE_AFTER_WRITE: bool = true;

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        super::check_window_quota(&quota, Self::NAME, MAX_LIMIT)?;
        Ok(SlidingWindowCounter { quota, limit: quota.limit(), period: Period::new(quota.period_nanos()) })
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn fresh_word(&self) -> u64 {
        pack(0, 0, 0)
    }

    // Always inlined, with the helpers it calls: the CAS loop runs it once for the word before
    // the compare-and-swap and once for the decision after it (`DECIDE_AFTER_WRITE`), and keeps
    // of each run only what that run's caller uses, which it cannot see through a call.
    #[inline(always)]
    fn decide(&self, word: u64, now: u64, cost: u64) -> (Decision, u64) {
        let v = self.view(word, now);
        let weighted = self.weighted(v.prev, v.elapsed);
        // The reset of the state as it stands, for a peek or a denial only: an admission
        // computes its own, and need not pay this one's division.
        let standing_reset = || self.until_fresh(&v, v.current).saturating_add(v.lag);
        if cost == 0 {
            let decision =
                Decision::allowed(self.limit, self.remaining(weighted, v.current), standing_reset());
            return (decision, word);
        }
        let current = v.current.saturating_add(cost);
        if self.fits(v.prev, v.elapsed, current) {
            let reset = self.until_fresh(&v, current).saturating_add(v.lag);
            let decision = Decision::allowed(self.limit, self.remaining(weighted, current), reset);
            (decision, pack(v.window, v.prev, current))
        } else {
            let retry = self.until_fits(&v, cost).saturating_add(v.lag);
            let remaining = self.remaining(weighted, v.current);
            (Decision::denied(self.limit, remaining, retry, standing_reset()), word)
        }
    }

    /// An admission's window ends at least a period before its decision's reset (the count it
    /// left decays over the next window): until then its units count whole; after, a refund
    /// could come off a later window's count, so none do.
    fn still_counted(&self, cost: u64, elapsed_nanos: u64, reset_after_nanos: u64, _: GiveBack) -> u64 {
        if elapsed_nanos < reset_after_nanos.saturating_sub(self.period.nanos()) {
            cost
        } else {
            0
        }
    }

    fn refund(&self, word: u64, now: u64, cost: u64) -> u64 {
        let (stored, stored_prev, stored_current) = unpack(word);
        let v = self.view(word, now);
        if cost == 0 || (v.prev == 0 && v.current == 0) {
            return word;
        }
        if v.window == stored {
            // Still the window the charge went into.
            pack(stored, stored_prev, stored_current - cost.min(stored_current))
        } else if v.prev == stored_current && v.current == 0 {
            // One window on: the charge now weighs in as part of `prev`.
            pack(v.window, v.prev - cost.min(v.prev), 0)
        } else {
            word
        }
    }

    /// Takes the units from the count of the window the check wrote: `current` while the state
    /// is still in that window, `prev` once it has moved one window on (the check's units weigh
    /// in there), nothing later (they no longer count). Never from the count of a window the
    /// check was not in.
    fn undo(&self, word: u64, _now: u64, cost: u64, written: u64) -> u64 {
        let (charged, _, _) = unpack(written);
        let (stored, prev, current) = unpack(word);
        if stored == charged {
            pack(stored, prev, current - cost.min(current))
        } else if stored == (charged + 1) & WINDOW_MASK {
            pack(stored, prev - cost.min(prev), current)
        } else {
            word
        }
    }

    fn is_idle_word(&self, word: u64, now: u64) -> bool {
        let v = self.view(word, now);
        v.prev == 0 && v.current == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_at_the_edges() {
        for window in [0, 1, WINDOW_MASK] {
            for prev in [0, 1, MAX_LIMIT] {
                for current in [0, 1, MAX_LIMIT - 1, MAX_LIMIT] {
                    assert_eq!(unpack(pack(window, prev, current)), (window, prev, current));
                }
            }
        }
    }

    /// Offered faster than its rate, at any limit and any overload, every window admits its
    /// full limit: the admitted rate is the quota's, never more.
    #[test]
    fn steady_overload_admits_the_full_limit_every_window() {
        const WINDOWS: u64 = 200;
        for limit in [1, 2, 3, 7, 10, 64, 100, 999] {
            let period = 1_000_000 * limit;
            let swc = <SlidingWindowCounter as WordAlgorithm>::from_quota(
                Quota::from_nanos(limit, period).unwrap(),
            )
            .unwrap();
            // Offered 1.01x to 5x the rate, at gaps that do not divide the period.
            for gap in [990_001, 500_003, 200_009] {
                let mut word = swc.fresh_word();
                let mut per_window = vec![0u64; WINDOWS as usize];
                let mut now = 0;
                while now < WINDOWS * period {
                    let (decision, new) = swc.decide(word, now, 1);
                    word = new;
                    per_window[(now / period) as usize] += u64::from(decision.is_allowed());
                    now += gap;
                }
                // The first window admits its limit from a fresh state; every later one too.
                assert!(
                    per_window.iter().all(|&n| n == limit),
                    "limit {limit}, gap {gap}: {:?}",
                    &per_window[..8.min(per_window.len())]
                );
            }
        }
    }

    #[test]
    fn a_fresh_key_late_in_the_index_cycle_is_fresh() {
        let swc =
            <SlidingWindowCounter as WordAlgorithm>::from_quota(Quota::from_nanos(3, 1000).unwrap()).unwrap();
        let now = ((1u64 << WINDOW_BITS) - 5) * 1000 + 250;
        let (decision, word) = swc.decide(swc.fresh_word(), now, 1);
        assert!(decision.is_allowed());
        assert_eq!(decision.remaining(), 2);
        // Back to full 1 ns into the next window, where the unit weighs 999/1000, rounded down.
        assert_eq!(decision.reset_after_nanos(), 750 + 1);
        assert_eq!(unpack(word), ((1u64 << WINDOW_BITS) - 5, 0, 1));
    }

    /// The admission test without the division agrees with the weighted count it stands for,
    /// at the edges of every field and at random points between them.
    #[test]
    fn fits_agrees_with_the_weighted_count() {
        let mut rng = fastrand::Rng::with_seed(7);
        for (limit, period) in [(1, 1), (3, 1000), (10, 999_983), (MAX_LIMIT, 1 << 44), (MAX_LIMIT, u64::MAX)]
        {
            let swc = <SlidingWindowCounter as WordAlgorithm>::from_quota(
                Quota::from_nanos(limit, period).unwrap(),
            )
            .unwrap();
            let counts = [0, 1, limit / 2, limit.saturating_sub(1), limit, limit + 1];
            let elapsed = [0, 1, period / 2, period - 1];
            let mut cases = Vec::new();
            for prev in counts {
                for e in elapsed {
                    for current in counts {
                        cases.push((prev, e, current));
                    }
                }
            }
            for _ in 0..20_000 {
                cases.push((rng.u64(0..=limit), rng.u64(0..period), rng.u64(0..=limit + 1)));
            }
            for (prev, e, current) in cases {
                let expected = current.saturating_add(swc.weighted(prev, e)) <= limit;
                assert_eq!(
                    swc.fits(prev, e, current),
                    expected,
                    "limit {limit}, period {period}: {prev} {e} {current}"
                );
            }
        }
    }
}
