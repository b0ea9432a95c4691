//! Decision: what a limiter answered, with everything an HTTP response needs.

use std::time::Duration;

/// The answer to one check.
///
/// All durations are exact for the algorithm that made the decision (tested at the edges with a
/// [`ManualClock`](crate::ManualClock)): `retry_after` is how long until this same request would be
/// allowed if nothing else happened, and `reset_after` how long until the limiter is back to full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    allowed: bool,
    limit: u64,
    remaining: u64,
    retry_after_nanos: u64,
    reset_after_nanos: u64,
    fallback: Option<Fallback>,
}

/// Why a decision was made by a failure policy instead of the algorithm.
///
/// A decision with a fallback is not a real measurement of the client's usage: the caller can tell a
/// real `allowed` from a fail-open one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fallback {
    /// A keyed table was full of active keys; the new key was denied (fail closed).
    TableFullDenied,
    /// A keyed table was full of active keys; the new key was allowed without being tracked
    /// (fail open).
    TableFullUntracked,
    /// A shared store (for example Redis) could not be reached in time; the request was allowed
    /// (fail open).
    StoreUnavailableAllowed,
    /// A shared store could not be reached in time; the request was denied (fail closed).
    StoreUnavailableDenied,
    /// A locally cached answer (a denial remembered until its retry time, or a leased token) was
    /// used instead of asking the shared store.
    LocalCache,
}

impl Decision {
    /// An allowed decision.
    pub fn allowed(limit: u64, remaining: u64, reset_after_nanos: u64) -> Self {
        Decision { allowed: true, limit, remaining, retry_after_nanos: 0, reset_after_nanos, fallback: None }
    }

    /// A denied decision. `retry_after_nanos` is raised to at least 1 ns: a denial always tells
    /// the client to wait.
    pub fn denied(limit: u64, remaining: u64, retry_after_nanos: u64, reset_after_nanos: u64) -> Self {
        Decision {
            allowed: false,
            limit,
            remaining,
            retry_after_nanos: retry_after_nanos.max(1),
            reset_after_nanos,
            fallback: None,
        }
    }

    /// The same decision marked as made by `fallback`.
    pub fn with_fallback(self, fallback: Fallback) -> Self {
        Decision { fallback: Some(fallback), ..self }
    }

    /// Whether the request may proceed.
    #[inline]
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// The most units the limiter admits at once (the burst for the bucket algorithms, the limit
    /// per window for the window algorithms).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Units that could still be admitted right now, after this decision.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How long until this same request would be allowed; zero when allowed.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos)
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub fn retry_after_nanos(&self) -> u64 {
        self.retry_after_nanos
    }

    /// How long until the limiter is back to full (all of `limit` available).
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after_nanos)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub fn reset_after_nanos(&self) -> u64 {
        self.reset_after_nanos
    }

    /// `Some` when a failure policy, not the algorithm, made this decision.
    pub fn fallback(&self) -> Option<Fallback> {
        self.fallback
    }
}
