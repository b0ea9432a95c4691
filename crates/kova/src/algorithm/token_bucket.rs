//! The classic token bucket: a token count and a refill stamp packed into one word.

use super::{GiveBack, WordAlgorithm};
use crate::{Decision, Quota, QuotaError};

/// Token bucket: a bucket of `burst` tokens, refilled at `limit / period`; a request takes `cost`
/// tokens or is denied.
///
/// - **For**: bursty clients with a sustained average ("10/s, burst 50"), in the form everyone
///   knows. [`Gcra`](crate::Gcra) is the same limiter in a full-width word, with no rounding and
///   no wrap-around: prefer it where those matter.
/// - **Memory per key**: 8 bytes (one `AtomicU64`).
/// - **Exactness**: the refill interval is `T = period / limit` rounded up to whole nanoseconds,
///   then up to a multiple of the stamp unit `2^shift` ns. `shift` is the largest that divides
///   `T` exactly and is at most `T / 1024`, unless `burst * T` needs a coarser unit to fit in
///   [`TokenBucket::FILL_UNITS_MAX`] units; only then is `T` rounded
///   ([`rate_error`](Self::rate_error) reports the relative slow-down: 0 for most quotas, e.g.
///   per second / minute / hour of 1..=1000). Never above the quota's rate. Time is read in
///   whole stamp units (rounded down): the decisions are those of an exact bucket sampled at
///   that resolution, which can credit at most `2^shift` ns (under 1/1024 of a token) early.
///
/// # Layout (one `u64`)
/// ```text
///  63            42 41                                   0
/// +----------------+--------------------------------------+
/// | tokens (22 b)  | stamp (42 b): last refill, in units  |
/// +----------------+--------------------------------------+
/// ```
/// - `tokens`: whole tokens, `0..=burst`, `burst <= 2^22 - 1` ([`TokenBucket::MAX_BURST`]).
/// - `stamp`: the time of the last refill in units of `2^shift` ns, modulo 2^42. It advances
///   by exactly `k * T` when `k` tokens are refilled, so the fraction of the next token is kept
///   (no loss however often the bucket is read). A full bucket's stamp means nothing.
/// - **Wrap-around**: the stamp covers `W = 2^42` units (73 minutes at shift 0; days to years for
///   most quotas). A reading up to `W / 1024` units behind the stamp is recognised as a clock
///   running backwards and refills nothing. A bucket untouched for longer than `W` is read as if
///   `elapsed mod W` had passed: if that lands within the fill time, the
///   refill is under-counted (never over-counted), at worst by one fill time (at most `W / 256`); if it lands in the
///   last `W / 1024` it waits up to `W / 1024` units before refilling. Keyed tables drop full
///   buckets, so such keys are normally gone long before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    quota: Quota,
    burst: u64,
    /// Stamp unit is `2^shift` nanoseconds.
    shift: u32,
    /// Refill interval in stamp units.
    interval_units: u64,
}

/// Bits of the token count.
pub(crate) const TOKENS_BITS: u32 = 22;
/// Bits of the refill stamp.
pub(crate) const STAMP_BITS: u32 = 42;
const TOKENS_SHIFT: u32 = STAMP_BITS;
const STAMP_MASK: u64 = (1 << STAMP_BITS) - 1;
/// The largest burst the token field holds.
pub(crate) const MAX_BURST: u64 = (1 << TOKENS_BITS) - 1;
/// The most stamp units a full refill (`burst * interval`) may take: 1/256 of the wrap.
pub(crate) const FILL_UNITS_MAX: u64 = 1 << (STAMP_BITS - 8);
/// Readings at most this many units behind the stamp count as a clock running backwards.
const BACKWARD_TOLERANCE: u64 = 1 << (STAMP_BITS - 10);

fn pack(tokens: u64, stamp: u64) -> u64 {
    debug_assert!(tokens <= MAX_BURST);
    (tokens << TOKENS_SHIFT) | (stamp & STAMP_MASK)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> TOKENS_SHIFT, word & STAMP_MASK)
}

impl TokenBucket {
    /// Bits of the token count.
    pub const TOKENS_BITS: u32 = TOKENS_BITS;
    /// Bits of the refill stamp.
    pub const STAMP_BITS: u32 = STAMP_BITS;
    /// The largest burst the token field holds.
    pub const MAX_BURST: u64 = MAX_BURST;
    /// The most stamp units a full refill (`burst * interval`) may take: 1/256 of the wrap.
    pub const FILL_UNITS_MAX: u64 = FILL_UNITS_MAX;
}

impl TokenBucket {
    /// The stamp unit is `2^shift()` nanoseconds.
    pub fn shift(&self) -> u32 {
        self.shift
    }

    /// The refill interval actually used, in nanoseconds (`>=` the quota's).
    pub fn interval_nanos(&self) -> u64 {
        self.interval_units << self.shift
    }

    /// How much slower than the quota the bucket refills, as a fraction (0.0 when exact).
    pub fn rate_error(&self) -> f64 {
        let exact = self.quota.period_nanos() as f64 / self.quota.limit() as f64;
        1.0 - exact / self.interval_nanos() as f64
    }

    /// Packs a state (for tests, fuzzing and tools): `tokens <= burst`, `stamp` in units.
    pub fn pack_state(&self, tokens: u64, stamp_units: u64) -> u64 {
        pack(tokens.min(self.burst), stamp_units)
    }

    /// Unpacks a word into `(tokens, stamp_units)`.
    pub fn unpack_state(word: u64) -> (u64, u64) {
        unpack(word)
    }

    /// Brings the bucket up to `now_units`: `(tokens, stamp, progress)` where `progress` is the
    /// part of the next token already earned, in units (negative when the clock is behind the
    /// stamp). A full bucket has progress 0 and its stamp at `now_units`.
    #[inline]
    fn refill(&self, word: u64, now_units: u64) -> (u64, u64, i64) {
        let (tokens, stamp) = unpack(word);
        if tokens >= self.burst {
            return (self.burst, now_units, 0);
        }
        let behind = stamp.wrapping_sub(now_units) & STAMP_MASK;
        if behind != 0 && behind <= BACKWARD_TOLERANCE {
            return (tokens, stamp, -(behind as i64));
        }
        let elapsed = now_units.wrapping_sub(stamp) & STAMP_MASK;
        // Fast paths without a division: the hot key's common cases (no whole token earned yet,
        // or long enough to be full).
        if elapsed < self.interval_units {
            return (tokens, stamp, elapsed as i64);
        }
        if elapsed >= (self.burst - tokens) * self.interval_units {
            return (self.burst, now_units, 0);
        }
        let earned = elapsed / self.interval_units;
        let stamp = stamp.wrapping_add(earned * self.interval_units) & STAMP_MASK;
        (tokens + earned, stamp, (elapsed - earned * self.interval_units) as i64)
    }

    /// The word of a bucket `deficit` units from full at `now_units`: the tokens it lacks
    /// rounded up, and the stamp set back by the progress towards the next (or ahead, by what a
    /// deficit beyond an empty bucket's holds).
    fn until_full_at(&self, deficit: u64, now_units: u64) -> u64 {
        let empty = self.burst * self.interval_units;
        if deficit >= empty {
            return pack(0, now_units.wrapping_add(deficit - empty));
        }
        let lacking = deficit.div_ceil(self.interval_units);
        let progress = lacking * self.interval_units - deficit;
        pack(self.burst - lacking, now_units.wrapping_sub(progress))
    }

    /// Units until a bucket holding `tokens` with `progress` is full.
    fn until_full(&self, tokens: u64, progress: i64) -> u64 {
        if tokens >= self.burst {
            0
        } else {
            ((self.burst - tokens) * self.interval_units).saturating_add_signed(-progress)
        }
    }
}

impl WordAlgorithm for TokenBucket {
    const NAME: &'static str = "token_bucket";

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        super::check_no_overdraft(&quota, Self::NAME)?;
        let burst = quota.burst();
        if burst > MAX_BURST {
            return Err(QuotaError::Unrepresentable {
                algorithm: Self::NAME,
                field: "burst",
                value: burst,
                max: MAX_BURST,
            });
        }
        let interval = quota.emission_interval_nanos();
        // The stamp unit: the smallest one that keeps a full refill within FILL_UNITS_MAX units
        // (with burst <= 2^22 one always exists below 64)...
        let fits = |s: u32| {
            let units = interval.div_ceil(1u64 << s);
            units.checked_mul(burst).is_some_and(|fill| fill <= FILL_UNITS_MAX)
        };
        let smallest = (0..64u32).find(|&s| fits(s)).unwrap_or(63);
        // ...raised, while the interval stays an exact multiple of it and time is still sampled
        // at 1/1024 of the interval or finer, to push the wrap-around further away.
        let exact_up_to = interval.trailing_zeros().min((63 - interval.leading_zeros()).saturating_sub(10));
        let shift = smallest.max(exact_up_to);
        let interval_units = interval.div_ceil(1u64 << shift);
        Ok(TokenBucket { quota, burst, shift, interval_units })
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u64 {
        self.burst
    }

    fn fresh_word(&self) -> u64 {
        pack(self.burst, 0)
    }

    #[inline]
    fn decide(&self, word: u64, now: u64, cost: u64) -> (Decision, u64) {
        let now_units = now >> self.shift;
        // Nanoseconds by which `now` is past the start of its unit: durations below are measured
        // from the unit's start, so they shrink by this much.
        let offset = now - (now_units << self.shift);
        let to_nanos = |units: u64| {
            // In u128, then saturating: a duration past u64 nanoseconds reads as u64::MAX, never
            // wraps.
            let nanos = (u128::from(units) << self.shift).saturating_sub(u128::from(offset));
            u64::try_from(nanos).unwrap_or(u64::MAX)
        };
        let now_units = now_units & STAMP_MASK;
        let (tokens, stamp, progress) = self.refill(word, now_units);
        let deficit = self.until_full(tokens, progress);
        if cost == 0 {
            return (Decision::allowed(self.burst, tokens, to_nanos(deficit)), word);
        }
        if cost <= tokens {
            let left = tokens - cost;
            let new_deficit = self.until_full(left, progress);
            (Decision::allowed(self.burst, left, to_nanos(new_deficit)), pack(left, stamp))
        } else {
            let wait = ((cost - tokens) * self.interval_units).saturating_add_signed(-progress);
            (Decision::denied(self.burst, tokens, to_nanos(wait), to_nanos(deficit)), word)
        }
    }

    /// What the admission took still keeps the bucket from full as long as the time it said
    /// the bucket needed to be full has not passed: one token per interval of what is left of
    /// that time (tokens that refilled since would have been wasted on a full bucket).
    fn still_counted(
        &self,
        cost: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        cost.min(give_back.units(reset_after_nanos.saturating_sub(elapsed_nanos), self.interval_nanos()))
    }

    fn refund(&self, word: u64, now: u64, cost: u64) -> u64 {
        let now_units = (now >> self.shift) & STAMP_MASK;
        let (tokens, stamp, _) = self.refill(word, now_units);
        let tokens = tokens.saturating_add(cost).min(self.burst);
        let stamp = if tokens >= self.burst { now_units } else { stamp };
        let refunded = pack(tokens, stamp);
        // Unchanged when nothing was given back (already full, or cost 0).
        if self.refill(word, now_units).0 == tokens {
            word
        } else {
            refunded
        }
    }

    /// The bucket read as GCRA reads its TAT, by its time until full: that time is shortened
    /// by what the check's own state (`written`) still lacks of full at `now`, at most `cost`
    /// intervals. The part of the charge already refilled is not given back again, and a part
    /// of a token comes back as the progress towards the next one.
    fn undo(&self, word: u64, now: u64, cost: u64, written: u64) -> u64 {
        let now_units = (now >> self.shift) & STAMP_MASK;
        let (tokens, _, progress) = self.refill(written, now_units);
        let back = cost.saturating_mul(self.interval_units).min(self.until_full(tokens, progress));
        if back == 0 {
            return word;
        }
        let (tokens, _, progress) = self.refill(word, now_units);
        self.until_full_at(self.until_full(tokens, progress).saturating_sub(back), now_units)
    }

    fn is_idle_word(&self, word: u64, now: u64) -> bool {
        let (tokens, _, _) = self.refill(word, (now >> self.shift) & STAMP_MASK);
        tokens >= self.burst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_at_the_edges() {
        for tokens in [0, 1, MAX_BURST - 1, MAX_BURST] {
            for stamp in [0, 1, STAMP_MASK - 1, STAMP_MASK] {
                assert_eq!(unpack(pack(tokens, stamp)), (tokens, stamp));
            }
        }
        // Bits above the stamp width are cut, never spilled into the token field.
        assert_eq!(unpack(pack(5, STAMP_MASK + 3)), (5, 2));
    }

    #[test]
    fn common_quotas_are_exact() {
        for quota in [
            Quota::per_second(1),
            Quota::per_second(10),
            Quota::per_second(1000),
            Quota::per_minute(100),
            Quota::per_hour(1),
            Quota::per_hour(1000),
        ] {
            let bucket = <TokenBucket as WordAlgorithm>::from_quota(quota.unwrap()).unwrap();
            assert_eq!(bucket.rate_error(), 0.0, "{bucket:?}");
        }
    }

    #[test]
    fn rounding_never_exceeds_the_rate_and_stays_small() {
        let quota = Quota::per_hour(7).unwrap().with_burst(MAX_BURST).unwrap();
        let bucket = <TokenBucket as WordAlgorithm>::from_quota(quota).unwrap();
        assert!(bucket.interval_nanos() >= quota.emission_interval_nanos());
        assert!(bucket.rate_error() >= 0.0 && bucket.rate_error() < 1e-3, "{}", bucket.rate_error());
    }

    #[test]
    fn a_long_idle_wrap_never_over_grants() {
        let quota = Quota::per_second(10).unwrap();
        let bucket = <TokenBucket as WordAlgorithm>::from_quota(quota).unwrap();
        let (_, drained) = bucket.decide(bucket.fresh_word(), 0, 10);
        // Exactly one wrap later the bucket reads as just drained: an under-grant, documented.
        let wrap_nanos = 1u64 << (STAMP_BITS + bucket.shift());
        let (decision, _) = bucket.decide(drained, wrap_nanos, 1);
        assert!(!decision.is_allowed());
    }
}
