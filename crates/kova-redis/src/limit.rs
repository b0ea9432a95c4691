//! [`RedisLimit`]: an algorithm and a quota, checked against the ranges the Lua scripts compute exactly.

use std::fmt;

use kova::{AlgorithmKind, Quota, QuotaError};

/// The scripts' time unit: one microsecond, in nanoseconds.
///
/// Redis `TIME` gives seconds and microseconds, and a Lua number (a double) holds integers
/// exactly only below 2^53: nanoseconds since the Unix epoch (about 2^60.6) would not fit, while
/// microseconds (about 2^50.6) do, until the year 2112. So every time and duration in Redis is a
/// whole number of microseconds, and decisions come back as multiples of 1000 ns.
pub const MICROS: u64 = 1_000;

/// The largest time, in microseconds, the scripts accept: 2^52 µs after the clock's origin (the
/// year 2112 for Redis `TIME`). Keeping times below 2^52 keeps `time + span` below 2^53.
pub const MAX_TIME_MICROS: u64 = 1 << 52;

/// The largest span a limit may hold, in microseconds (142 years), and the largest value of any
/// product the scripts form (`burst * interval`, `limit * period`).
pub const MAX_SPAN_MICROS: u64 = 1 << 52;

/// The largest limit of the sliding window log: its sorted set holds one member per admitted unit
/// in the window (about 70 bytes each in Redis), so 2^16 units is a few MiB per key, and one
/// admission of the whole limit adds 2^16 members in one script run (a few tens of ms of Redis
/// time).
pub const MAX_LOG_LIMIT: u64 = 1 << 16;

/// A [`Quota`] the Redis scripts cannot compute exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisLimitError {
    /// The quota itself is invalid for this algorithm (for example a burst on a window
    /// algorithm, which admits `limit` per window).
    Quota(QuotaError),
    /// The time step the script would work with (the emission interval for the bucket
    /// algorithms, the window for the others) is below one microsecond, the scripts' time unit.
    TooFine {
        /// The algorithm.
        algorithm: &'static str,
        /// Which step: "interval" or "period".
        field: &'static str,
        /// Its length in nanoseconds.
        nanos: u64,
    },
    /// A value is outside the range the scripts hold exactly.
    OutOfRange {
        /// The algorithm.
        algorithm: &'static str,
        /// What overflowed, e.g. "burst * interval (µs)".
        field: &'static str,
        /// The value asked for (saturated at `u64::MAX`).
        value: u64,
        /// The largest value accepted.
        max: u64,
    },
}

impl fmt::Display for RedisLimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RedisLimitError::Quota(e) => e.fmt(f),
            RedisLimitError::TooFine { algorithm, field, nanos } => write!(
                f,
                "{algorithm} on Redis works in whole microseconds: its {field} of {nanos} ns is below 1 µs"
            ),
            RedisLimitError::OutOfRange { algorithm, field, value, max } => {
                write!(f, "{algorithm} on Redis cannot hold {field} = {value} exactly (at most {max})")
            }
        }
    }
}

impl std::error::Error for RedisLimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisLimitError::Quota(e) => Some(e),
            _ => None,
        }
    }
}

impl From<QuotaError> for RedisLimitError {
    fn from(e: QuotaError) -> Self {
        RedisLimitError::Quota(e)
    }
}

/// What a script is given: two integers, in microseconds where they are times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Params {
    /// Token bucket and GCRA: microseconds per unit, and the burst.
    Bucket { interval_us: u64, burst: u64 },
    /// The window algorithms: units per window, and the window in microseconds.
    Window { limit: u64, period_us: u64 },
}

/// One limit to check keys against: an algorithm and a quota, validated once and passed to every
/// call (per-key quotas are just different `RedisLimit`s).
///
/// Times in Redis are whole microseconds ([`MICROS`]), so the quota is used as if its step were
/// rounded **up** to a whole microsecond: the emission interval `period / limit` for the bucket
/// algorithms, the window `period` for the others. The rate is never above the quota's;
/// [`rate_error`](Self::rate_error) says by how much it is below (0 for steps that are already
/// whole microseconds, e.g. any per-second quota of up to 1,000,000 that divides it evenly).
///
/// # Ranges (all checked here, with a typed [`RedisLimitError`])
/// | algorithm | accepted |
/// |---|---|
/// | GCRA, token bucket | interval >= 1 µs, `burst * interval <= 2^52 µs` |
/// | GCRA's overdraft ([`Quota::with_overdraft`]) | `(burst + overdraft) * interval <= 2^52 µs`; other algorithms reject one |
/// | fixed window | period >= 1 µs, `period <= 2^52 µs`, `limit <= 2^52` |
/// | sliding window counter | period >= 1 µs, `limit * period <= 2^52` (µs) |
/// | sliding window log | period >= 1 µs, `period <= 2^52 µs`, `limit <= 2^16` ([`MAX_LOG_LIMIT`]) |
///
/// ```
/// use kova::{AlgorithmKind, Quota};
/// use kova_redis::{RedisLimit, RedisLimitError};
/// let limit = RedisLimit::new(AlgorithmKind::Gcra, Quota::per_second(10)?.with_burst(50)?)?;
/// assert_eq!(limit.capacity(), 50);
/// assert_eq!(limit.rate_error(), 0.0);
/// // 3 per second: 333,333.33 µs between units, rounded up to 333,334 µs.
/// let third = RedisLimit::new(AlgorithmKind::Gcra, Quota::per_second(3)?)?;
/// assert!(third.rate_error() > 0.0 && third.rate_error() < 1e-5);
/// // A window of 1 ns cannot be expressed in microseconds.
/// let too_fine = RedisLimit::new(AlgorithmKind::FixedWindow, Quota::from_nanos(1, 1)?);
/// assert!(matches!(too_fine, Err(RedisLimitError::TooFine { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RedisLimit {
    kind: AlgorithmKind,
    quota: Quota,
    params: Params,
    /// This server's own quota under [`StoreFailurePolicy::Degrade`](crate::StoreFailurePolicy::Degrade).
    local: Option<Quota>,
}

impl RedisLimit {
    /// `kind` limited by `quota`, or what the scripts cannot hold.
    pub fn new(kind: AlgorithmKind, quota: Quota) -> Result<Self, RedisLimitError> {
        let algorithm = kind.as_str();
        let out_of_range = |field, value, max| RedisLimitError::OutOfRange { algorithm, field, value, max };
        let params = match kind {
            AlgorithmKind::Gcra | AlgorithmKind::TokenBucket => {
                let interval = quota.emission_interval_nanos();
                if interval < MICROS {
                    return Err(RedisLimitError::TooFine { algorithm, field: "interval", nanos: interval });
                }
                let interval_us = interval.div_ceil(MICROS);
                let burst = quota.burst();
                let span = burst.saturating_mul(interval_us);
                if span > MAX_SPAN_MICROS {
                    return Err(out_of_range("burst * interval (µs)", span, MAX_SPAN_MICROS));
                }
                let overdraft = quota.overdraft();
                if overdraft > 0 && kind != AlgorithmKind::Gcra {
                    return Err(QuotaError::OverdraftUnsupported { algorithm }.into());
                }
                // A settled charge may take the deficit to (burst + overdraft) intervals.
                let debt = burst.saturating_add(overdraft).saturating_mul(interval_us);
                if debt > MAX_SPAN_MICROS {
                    return Err(out_of_range("(burst + overdraft) * interval (µs)", debt, MAX_SPAN_MICROS));
                }
                Params::Bucket { interval_us, burst }
            }
            AlgorithmKind::FixedWindow
            | AlgorithmKind::SlidingWindowCounter
            | AlgorithmKind::SlidingWindowLog => {
                if quota.overdraft() > 0 {
                    return Err(QuotaError::OverdraftUnsupported { algorithm }.into());
                }
                if quota.burst() != quota.limit() {
                    return Err(QuotaError::BurstUnsupported { algorithm }.into());
                }
                let period = quota.period_nanos();
                if period < MICROS {
                    return Err(RedisLimitError::TooFine { algorithm, field: "period", nanos: period });
                }
                let period_us = period.div_ceil(MICROS);
                let limit = quota.limit();
                if period_us > MAX_SPAN_MICROS {
                    return Err(out_of_range("period (µs)", period_us, MAX_SPAN_MICROS));
                }
                match kind {
                    AlgorithmKind::SlidingWindowCounter => {
                        let scaled = limit.saturating_mul(period_us);
                        if scaled > MAX_SPAN_MICROS {
                            return Err(out_of_range("limit * period (µs)", scaled, MAX_SPAN_MICROS));
                        }
                    }
                    AlgorithmKind::SlidingWindowLog if limit > MAX_LOG_LIMIT => {
                        return Err(out_of_range("limit", limit, MAX_LOG_LIMIT));
                    }
                    _ if limit > MAX_SPAN_MICROS => {
                        return Err(out_of_range("limit", limit, MAX_SPAN_MICROS))
                    }
                    _ => {}
                }
                Params::Window { limit, period_us }
            }
        };
        Ok(RedisLimit { kind, quota, params, local: None })
    }

    /// A [`Gcra`](kova::Gcra) limit: the default choice.
    ///
    /// ```
    /// let limit = kova_redis::RedisLimit::gcra(kova::Quota::per_minute(60)?)?;
    /// assert_eq!(limit.kind(), kova::AlgorithmKind::Gcra);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gcra(quota: Quota) -> Result<Self, RedisLimitError> {
        Self::new(AlgorithmKind::Gcra, quota)
    }

    /// A [`TokenBucket`](kova::TokenBucket) limit.
    pub fn token_bucket(quota: Quota) -> Result<Self, RedisLimitError> {
        Self::new(AlgorithmKind::TokenBucket, quota)
    }

    /// A [`FixedWindow`](kova::FixedWindow) limit.
    pub fn fixed_window(quota: Quota) -> Result<Self, RedisLimitError> {
        Self::new(AlgorithmKind::FixedWindow, quota)
    }

    /// A [`SlidingWindowCounter`](kova::SlidingWindowCounter) limit.
    pub fn sliding_window_counter(quota: Quota) -> Result<Self, RedisLimitError> {
        Self::new(AlgorithmKind::SlidingWindowCounter, quota)
    }

    /// A [`SlidingWindowLog`](kova::SlidingWindowLog) limit (a sorted set per key).
    pub fn sliding_window_log(quota: Quota) -> Result<Self, RedisLimitError> {
        Self::new(AlgorithmKind::SlidingWindowLog, quota)
    }

    /// The same limit, with `quota` as this server's local quota while Redis cannot answer under
    /// [`StoreFailurePolicy::Degrade`](crate::StoreFailurePolicy::Degrade) (instead of the limit's quota
    /// divided by the policy's server count). It must be valid for kova's in-memory algorithm
    /// of this kind; it is at most the limit's own capacity in burst.
    ///
    /// ```
    /// use kova::Quota;
    /// let limit = kova_redis::RedisLimit::gcra(Quota::per_second(100)?)?;
    /// let with_share = limit.with_local_quota(Quota::per_second(30)?)?;
    /// assert_eq!(with_share.local_quota(), Some(Quota::per_second(30)?));
    /// assert!(limit.with_local_quota(Quota::per_second(1000)?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_local_quota(self, quota: Quota) -> Result<Self, RedisLimitError> {
        let algorithm = self.kind.as_str();
        let window = !matches!(self.kind, AlgorithmKind::Gcra | AlgorithmKind::TokenBucket);
        if window && quota.burst() != quota.limit() {
            return Err(QuotaError::BurstUnsupported { algorithm }.into());
        }
        if quota.burst() > self.capacity() {
            return Err(RedisLimitError::OutOfRange {
                algorithm,
                field: "local quota burst",
                value: quota.burst(),
                max: self.capacity(),
            });
        }
        Ok(RedisLimit { local: Some(quota), ..self })
    }

    /// The local quota given with [`with_local_quota`](Self::with_local_quota).
    pub fn local_quota(&self) -> Option<Quota> {
        self.local
    }

    /// The algorithm.
    pub fn kind(&self) -> AlgorithmKind {
        self.kind
    }

    /// The quota as given.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The most units one check can be admitted for: the burst for the bucket algorithms, the
    /// limit for the window algorithms. A larger cost is an error, not a denial.
    pub fn capacity(&self) -> u64 {
        match self.params {
            Params::Bucket { burst, .. } => burst,
            Params::Window { limit, .. } => limit,
        }
    }

    /// The step the script works with, in nanoseconds (a whole number of microseconds): the
    /// emission interval for the bucket algorithms, the window for the others.
    pub fn step_nanos(&self) -> u64 {
        match self.params {
            Params::Bucket { interval_us, .. } => interval_us * MICROS,
            Params::Window { period_us, .. } => period_us * MICROS,
        }
    }

    /// How much slower than the quota the script's rate is, as a fraction (0.0 when exact).
    pub fn rate_error(&self) -> f64 {
        let exact = match self.params {
            Params::Bucket { .. } => self.quota.period_nanos() as f64 / self.quota.limit() as f64,
            Params::Window { .. } => self.quota.period_nanos() as f64,
        };
        1.0 - exact / self.step_nanos() as f64
    }

    /// The quota that kova's in-memory algorithm of the same kind decides identically to this
    /// limit's script, when both read the same time in whole microseconds: the quota itself when
    /// its step is already whole microseconds, else the same burst with the step rounded up.
    /// The conformance tests compare the two with it.
    ///
    /// ```
    /// use kova::Quota;
    /// let limit = kova_redis::RedisLimit::gcra(Quota::per_second(3)?)?;
    /// assert_eq!(limit.effective_quota().emission_interval_nanos(), 333_334_000);
    /// let exact = kova_redis::RedisLimit::gcra(Quota::per_second(10)?)?;
    /// assert_eq!(exact.effective_quota(), Quota::per_second(10)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn effective_quota(&self) -> Quota {
        if self.exact_step() {
            return self.quota;
        }
        let rebuilt = match self.params {
            Params::Bucket { interval_us, burst } => Quota::from_nanos(1, interval_us * MICROS)
                .and_then(|q| q.with_burst(burst))
                .map(|q| q.with_overdraft(self.quota.overdraft())),
            Params::Window { limit, period_us } => Quota::from_nanos(limit, period_us * MICROS),
        };
        // Every step accepted by `new` is at least 1 µs = 1000 ns and at most 2^52 µs, so the
        // rebuilt quota is valid; keep the original if that ever changes.
        rebuilt.unwrap_or(self.quota)
    }

    fn exact_step(&self) -> bool {
        match self.params {
            Params::Bucket { .. } => self.quota.emission_interval_nanos() % MICROS == 0,
            Params::Window { .. } => self.quota.period_nanos() % MICROS == 0,
        }
    }

    /// The units a settled charge may take beyond empty ([`Quota::with_overdraft`]; GCRA only,
    /// 0 for the others).
    pub fn overdraft(&self) -> u64 {
        self.quota.overdraft()
    }

    /// The two integers the script takes as `ARGV[5]` and `ARGV[6]`.
    pub(crate) fn script_args(&self) -> [u64; 2] {
        match self.params {
            Params::Bucket { interval_us, burst } => [interval_us, burst],
            Params::Window { limit, period_us } => [limit, period_us],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_span_is_checked_at_the_edge() {
        let at_edge = Quota::from_nanos(1, MICROS).unwrap().with_burst(MAX_SPAN_MICROS).unwrap();
        for kind in [AlgorithmKind::Gcra, AlgorithmKind::TokenBucket] {
            assert_eq!(RedisLimit::new(kind, at_edge).unwrap().capacity(), MAX_SPAN_MICROS);
            let over = at_edge.with_burst(MAX_SPAN_MICROS + 1).unwrap();
            assert_eq!(
                RedisLimit::new(kind, over),
                Err(RedisLimitError::OutOfRange {
                    algorithm: kind.as_str(),
                    field: "burst * interval (µs)",
                    value: MAX_SPAN_MICROS + 1,
                    max: MAX_SPAN_MICROS
                })
            );
        }
        // u64::MAX burst saturates instead of overflowing.
        let huge = Quota::per_second(1).unwrap().with_burst(u64::MAX).unwrap();
        assert!(matches!(RedisLimit::gcra(huge), Err(RedisLimitError::OutOfRange { value: u64::MAX, .. })));
    }

    #[test]
    fn steps_below_a_microsecond_are_rejected() {
        let q = Quota::from_nanos(1, 999).unwrap();
        assert_eq!(
            RedisLimit::gcra(q),
            Err(RedisLimitError::TooFine { algorithm: "gcra", field: "interval", nanos: 999 })
        );
        assert!(matches!(RedisLimit::fixed_window(q), Err(RedisLimitError::TooFine { field: "period", .. })));
        // 1000 per ms: exactly 1 µs per unit, accepted and exact.
        let q = Quota::new(1000, Duration::from_millis(1)).unwrap();
        let limit = RedisLimit::token_bucket(q).unwrap();
        assert_eq!(limit.step_nanos(), 1000);
        assert_eq!(limit.rate_error(), 0.0);
        assert_eq!(limit.effective_quota(), q);
    }

    #[test]
    fn window_ranges() {
        let q = Quota::from_nanos(MAX_SPAN_MICROS, MAX_SPAN_MICROS * MICROS).unwrap();
        assert!(RedisLimit::fixed_window(q).is_ok());
        // limit * period = 2^52 * 2^52 µs for the counter: out of range.
        assert!(matches!(RedisLimit::sliding_window_counter(q), Err(RedisLimitError::OutOfRange { .. })));
        let q = Quota::from_nanos(1 << 26, (1 << 26) * MICROS).unwrap();
        assert!(RedisLimit::sliding_window_counter(q).is_ok());
        let q = Quota::from_nanos((1 << 26) + 1, (1 << 26) * MICROS).unwrap();
        assert!(matches!(RedisLimit::sliding_window_counter(q), Err(RedisLimitError::OutOfRange { .. })));
        let q = Quota::per_hour(MAX_LOG_LIMIT).unwrap();
        assert!(RedisLimit::sliding_window_log(q).is_ok());
        let q = Quota::per_hour(MAX_LOG_LIMIT + 1).unwrap();
        assert!(matches!(
            RedisLimit::sliding_window_log(q),
            Err(RedisLimitError::OutOfRange { field: "limit", .. })
        ));
        let q = Quota::per_second(10).unwrap().with_burst(20).unwrap();
        assert_eq!(
            RedisLimit::fixed_window(q),
            Err(RedisLimitError::Quota(QuotaError::BurstUnsupported { algorithm: "fixed_window" }))
        );
        let long = Quota::from_nanos(1, u64::MAX).unwrap();
        assert!(matches!(
            RedisLimit::fixed_window(long),
            Err(RedisLimitError::OutOfRange { field: "period (µs)", .. })
        ));
    }

    #[test]
    fn overdraft_is_gcra_only_and_bounded() {
        let q = Quota::per_second(10).unwrap().with_overdraft(5);
        let gcra = RedisLimit::gcra(q).unwrap();
        assert_eq!((gcra.overdraft(), gcra.effective_quota().overdraft()), (5, 5));
        let third = RedisLimit::gcra(Quota::per_second(3).unwrap().with_overdraft(2)).unwrap();
        assert_eq!(third.effective_quota().overdraft(), 2);
        for kind in [AlgorithmKind::TokenBucket, AlgorithmKind::FixedWindow, AlgorithmKind::SlidingWindowLog]
        {
            assert_eq!(
                RedisLimit::new(kind, q),
                Err(RedisLimitError::Quota(QuotaError::OverdraftUnsupported { algorithm: kind.as_str() }))
            );
        }
        // (burst + overdraft) * interval = 2^52 µs is the edge.
        let edge = Quota::from_nanos(1, MICROS).unwrap().with_burst(1 << 51).unwrap();
        assert!(RedisLimit::gcra(edge.with_overdraft(1 << 51)).is_ok());
        assert!(matches!(
            RedisLimit::gcra(edge.with_overdraft((1 << 51) + 1)),
            Err(RedisLimitError::OutOfRange { field: "(burst + overdraft) * interval (µs)", .. })
        ));
        assert!(matches!(
            RedisLimit::gcra(edge.with_overdraft(u64::MAX)),
            Err(RedisLimitError::OutOfRange { .. })
        ));
    }

    #[test]
    fn inexact_steps_round_up() {
        let q = Quota::new(1, Duration::from_nanos(1_500)).unwrap();
        let limit = RedisLimit::fixed_window(q).unwrap();
        assert_eq!(limit.step_nanos(), 2_000);
        assert!((limit.rate_error() - 0.25).abs() < 1e-12);
        assert_eq!(limit.effective_quota().period_nanos(), 2_000);
    }
}
