//! Quota: how many requests per period, and how many at once.

use std::fmt;
use std::time::Duration;

/// A rate limit: `limit` units per `period`, with bursts of up to `burst` units at once.
///
/// For the bucket algorithms ([`TokenBucket`](crate::TokenBucket), [`Gcra`](crate::Gcra)) the
/// burst is the bucket's capacity and the refill is `limit / period`: "10/s, burst 50" is
/// `Quota::per_second(10)?.with_burst(50)?`. The window algorithms admit `limit` per window of
/// length `period` and take no separate burst.
///
/// ```
/// use std::time::Duration;
/// use kova::Quota;
/// let quota = Quota::per_second(10)?.with_burst(50)?;
/// assert_eq!(quota.limit(), 10);
/// assert_eq!(quota.burst(), 50);
/// assert_eq!(quota.period(), Duration::from_secs(1));
/// assert!(Quota::per_second(0).is_err());
/// # Ok::<(), kova::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u64,
    period_nanos: u64,
    burst: u64,
    /// Units a settled charge may take beyond empty ([`with_overdraft`](Quota::with_overdraft)).
    overdraft: u64,
}

/// Why a [`Quota`] (or an algorithm built from one) was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The limit was zero: nothing could ever be admitted.
    ZeroLimit,
    /// The period was zero (or under one nanosecond).
    ZeroPeriod,
    /// The burst was zero: nothing could ever be admitted.
    ZeroBurst,
    /// The period does not fit in `u64` nanoseconds (about 584 years).
    PeriodTooLong,
    /// More than one unit per nanosecond: the time between two units would round to zero.
    RateTooHigh {
        /// The requested limit.
        limit: u64,
        /// The requested period in nanoseconds.
        period_nanos: u64,
    },
    /// The algorithm's packed state cannot hold this value.
    Unrepresentable {
        /// Which algorithm.
        algorithm: &'static str,
        /// Which field did not fit.
        field: &'static str,
        /// The value asked for.
        value: u64,
        /// The largest value the encoding holds.
        max: u64,
    },
    /// A window algorithm was given a burst different from its limit; windows admit `limit` per
    /// window and have no separate burst.
    BurstUnsupported {
        /// Which algorithm.
        algorithm: &'static str,
    },
    /// An overdraft was asked of an algorithm whose state cannot hold a debt (only [`Gcra`](crate::Gcra)
    /// can: a debt is a theoretical arrival time further in the future).
    OverdraftUnsupported {
        /// Which algorithm.
        algorithm: &'static str,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QuotaError::ZeroLimit => f.write_str("quota limit must be at least 1"),
            QuotaError::ZeroPeriod => f.write_str("quota period must be at least 1 ns"),
            QuotaError::ZeroBurst => f.write_str("quota burst must be at least 1"),
            QuotaError::PeriodTooLong => f.write_str("quota period exceeds u64 nanoseconds (~584 years)"),
            QuotaError::RateTooHigh { limit, period_nanos } => {
                write!(f, "quota of {limit} per {period_nanos} ns is more than one per nanosecond")
            }
            QuotaError::Unrepresentable { algorithm, field, value, max } => {
                write!(f, "{algorithm} cannot represent {field} = {value} (at most {max})")
            }
            QuotaError::BurstUnsupported { algorithm } => {
                write!(f, "{algorithm} admits `limit` per window and takes no separate burst")
            }
            QuotaError::OverdraftUnsupported { algorithm } => {
                write!(f, "{algorithm} cannot hold a debt: only gcra takes an overdraft")
            }
        }
    }
}

impl std::error::Error for QuotaError {}

impl Quota {
    /// `limit` per `period`, burst equal to the limit.
    ///
    /// ```
    /// use std::time::Duration;
    /// let quota = kova::Quota::new(100, Duration::from_millis(250))?;
    /// assert_eq!(quota.emission_interval_nanos(), 2_500_000);
    /// # Ok::<(), kova::QuotaError>(())
    /// ```
    pub fn new(limit: u64, period: Duration) -> Result<Self, QuotaError> {
        let period_nanos = u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLong)?;
        Self::from_nanos(limit, period_nanos)
    }

    /// `limit` per `period_nanos` nanoseconds, burst equal to the limit.
    pub fn from_nanos(limit: u64, period_nanos: u64) -> Result<Self, QuotaError> {
        if limit == 0 {
            return Err(QuotaError::ZeroLimit);
        }
        if period_nanos == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        if limit > period_nanos {
            return Err(QuotaError::RateTooHigh { limit, period_nanos });
        }
        Ok(Quota { limit, period_nanos, burst: limit, overdraft: 0 })
    }

    /// `limit` per second.
    ///
    /// ```
    /// assert_eq!(kova::Quota::per_second(5)?.limit(), 5);
    /// # Ok::<(), kova::QuotaError>(())
    /// ```
    pub fn per_second(limit: u64) -> Result<Self, QuotaError> {
        Self::new(limit, Duration::from_secs(1))
    }

    /// `limit` per minute.
    ///
    /// ```
    /// assert_eq!(kova::Quota::per_minute(60)?.emission_interval_nanos(), 1_000_000_000);
    /// # Ok::<(), kova::QuotaError>(())
    /// ```
    pub fn per_minute(limit: u64) -> Result<Self, QuotaError> {
        Self::new(limit, Duration::from_secs(60))
    }

    /// `limit` per hour.
    ///
    /// ```
    /// assert_eq!(kova::Quota::per_hour(1)?.period().as_secs(), 3600);
    /// # Ok::<(), kova::QuotaError>(())
    /// ```
    pub fn per_hour(limit: u64) -> Result<Self, QuotaError> {
        Self::new(limit, Duration::from_secs(3600))
    }

    /// `limit` per day (24 hours).
    ///
    /// ```
    /// assert_eq!(kova::Quota::per_day(10_000)?.period().as_secs(), 86_400);
    /// # Ok::<(), kova::QuotaError>(())
    /// ```
    pub fn per_day(limit: u64) -> Result<Self, QuotaError> {
        Self::new(limit, Duration::from_secs(86_400))
    }

    /// The same rate with a different burst (bucket capacity).
    ///
    /// ```
    /// let quota = kova::Quota::per_second(10)?.with_burst(50)?;
    /// assert_eq!(quota.burst(), 50);
    /// assert!(kova::Quota::per_second(10)?.with_burst(0).is_err());
    /// # Ok::<(), kova::QuotaError>(())
    /// ```
    pub fn with_burst(self, burst: u64) -> Result<Self, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        Ok(Quota { burst, ..self })
    }

    /// The same quota, allowing a settled charge ([`RateLimiter::settle`](crate::RateLimiter::settle))
    /// to run the limiter up to `overdraft` units beyond empty: a debt that later checks pay off
    /// (they are denied until the debt has refilled). Checks themselves never go into debt.
    /// Only [`Gcra`](crate::Gcra) can hold a debt; the other algorithms reject a quota with one
    /// ([`QuotaError::OverdraftUnsupported`]).
    ///
    /// ```
    /// let quota = kova::Quota::per_minute(100)?.with_overdraft(50);
    /// assert_eq!(quota.overdraft(), 50);
    /// assert_eq!(quota.burst(), 100);
    /// # Ok::<(), kova::QuotaError>(())
    /// ```
    pub fn with_overdraft(self, overdraft: u64) -> Self {
        Quota { overdraft, ..self }
    }

    /// Units a settled charge may take beyond empty (0 unless set by
    /// [`with_overdraft`](Self::with_overdraft)).
    pub fn overdraft(&self) -> u64 {
        self.overdraft
    }

    /// Units admitted per period.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The period.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_nanos)
    }

    /// The period in nanoseconds.
    pub fn period_nanos(&self) -> u64 {
        self.period_nanos
    }

    /// The most units admitted at once (bucket capacity).
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Nanoseconds between two units at the sustained rate: `period / limit`, rounded UP to
    /// whole nanoseconds so that the rate is never exceeded (for 3 per second: 333,333,334 ns,
    /// a rate 2e-9 below the quota).
    pub fn emission_interval_nanos(&self) -> u64 {
        self.period_nanos.div_ceil(self.limit)
    }
}
