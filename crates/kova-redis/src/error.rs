//! Errors: what a call could not answer with a decision.

use std::fmt;
use std::time::Duration;

use kova::limits::LimitsError;
use kova::reservation::ReserveError;
use kova::CheckError;

use crate::key::PrefixError;

/// Why a call returned no [`Decision`](kova::Decision).
///
/// Store failures (Redis down, slow, or answering nonsense) are turned into decisions by the
/// limiter's [`StoreFailurePolicy`](crate::StoreFailurePolicy) unless it is
/// [`ReturnError`](crate::StoreFailurePolicy::ReturnError); [`reset`](crate::RedisLimiter::reset)
/// always returns them.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The cost is above the limit's capacity: it can never be admitted (an error, not a
    /// denial, as in the in-memory limiters).
    Cost(CheckError),
    /// The client clock reads a time the scripts cannot hold exactly (at or past 2^52 µs).
    TimeOutOfRange {
        /// The reading, in microseconds.
        micros: u64,
        /// The largest accepted.
        max: u64,
    },
    /// The key prefix given to the builder is unusable.
    Prefix(PrefixError),
    /// Redis could not be reached in time, or failed.
    Store(StoreError),
    /// A reservation was refused (nothing was taken): its cost can never fit, its delay is
    /// longer than the caller accepts, or the algorithm cannot reserve ahead and the units are
    /// not available now.
    Reserve(ReserveError),
    /// The operation is not defined for the limit's algorithm (the sliding window log takes
    /// no refunds, so it cannot settle or reserve, as in kova's in-memory limiters).
    Unsupported {
        /// What was asked: "settle", "charge", "refund" or "reserve".
        operation: &'static str,
        /// The limit's algorithm.
        algorithm: &'static str,
    },
    /// A composite of no limits, or of more than [`MAX_LIMITS`](kova::limits::MAX_LIMITS).
    Limits(LimitsError),
    /// [`Builder::local_max_keys`](crate::Builder::local_max_keys) outside 1 to
    /// [`MAX_LOCAL_KEYS`](crate::MAX_LOCAL_KEYS): refused when the limiter is built.
    LocalMaxKeys {
        /// The count asked for.
        max_keys: usize,
        /// The most the local layer holds.
        max: usize,
    },
}

/// A failure of the store itself.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// No answer within the per-call timeout.
    Timeout(Duration),
    /// The connection or Redis reported an error.
    Redis(redis::RedisError),
    /// Redis answered something the scripts never return.
    Reply(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cost(e) => e.fmt(f),
            Error::TimeOutOfRange { micros, max } => {
                write!(f, "client clock reads {micros} µs, past the largest time the scripts hold ({max} µs)")
            }
            Error::Prefix(e) => e.fmt(f),
            Error::Store(e) => e.fmt(f),
            Error::Reserve(e) => e.fmt(f),
            Error::Unsupported { operation, algorithm } => {
                write!(f, "{operation} is not supported for {algorithm} (it takes no refunds)")
            }
            Error::Limits(e) => e.fmt(f),
            Error::LocalMaxKeys { max_keys, max } => {
                write!(f, "the local layer holds from 1 to {max} keys, not {max_keys}")
            }
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Timeout(t) => write!(f, "redis did not answer within {t:?}"),
            StoreError::Redis(e) => write!(f, "redis error: {e}"),
            StoreError::Reply(r) => write!(f, "unexpected reply from a kova script: {r}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Cost(e) => Some(e),
            Error::Prefix(e) => Some(e),
            Error::Store(e) => Some(e),
            Error::Reserve(e) => Some(e),
            Error::Limits(e) => Some(e),
            Error::TimeOutOfRange { .. } | Error::Unsupported { .. } | Error::LocalMaxKeys { .. } => None,
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CheckError> for Error {
    fn from(e: CheckError) -> Self {
        Error::Cost(e)
    }
}

impl From<PrefixError> for Error {
    fn from(e: PrefixError) -> Self {
        Error::Prefix(e)
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Store(StoreError::Redis(e))
    }
}

impl From<ReserveError> for Error {
    fn from(e: ReserveError) -> Self {
        Error::Reserve(e)
    }
}

impl From<LimitsError> for Error {
    fn from(e: LimitsError) -> Self {
        Error::Limits(e)
    }
}
