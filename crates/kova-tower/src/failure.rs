//! What the layer does when a limiter fails without a failure policy of its own.

use std::time::Duration;

use kova::{Decision, Fallback, Quota};

/// What the layer does when a limiter returns [`LimiterError::Backend`](crate::LimiterError::Backend)
/// (a store down, with no failure policy of its own). Every such failure is reported to the
/// metrics hook as [`EventKind::BackendFailure`](crate::EventKind::BackendFailure), and a decision
/// made here carries a [`Fallback`], so a fail-open pass is never mistaken for a measured one.
///
/// Limiters with their own policy (the Redis backend's fail-open / fail-closed) answer with a
/// decision marked [`Fallback::StoreUnavailableAllowed`] or [`Fallback::StoreUnavailableDenied`]
/// instead; the layer enforces that decision and reports the failure the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BackendFailurePolicy {
    /// Answer `503 Service Unavailable` with `Retry-After: 1` and a problem+json body. The
    /// default: neither silently unlimited nor blaming the client.
    #[default]
    Reject,
    /// Let the request through (fail open), marked [`Fallback::StoreUnavailableAllowed`]. No
    /// `RateLimit` member is published for the limit (nothing was measured).
    Allow,
    /// Deny it with 429 (fail closed), marked [`Fallback::StoreUnavailableDenied`], telling the
    /// client to retry after `retry_after` (rounded up to whole seconds, at least 1).
    Deny {
        /// How long the client is told to wait.
        retry_after: Duration,
    },
}

impl BackendFailurePolicy {
    /// The decision this policy makes for a limit with `quota`; `None` for [`Reject`](Self::Reject).
    pub(crate) fn decide(self, quota: &Quota) -> Option<Decision> {
        match self {
            BackendFailurePolicy::Reject => None,
            BackendFailurePolicy::Allow => {
                Some(Decision::allowed(quota.burst(), 0, 0).with_fallback(Fallback::StoreUnavailableAllowed))
            }
            BackendFailurePolicy::Deny { retry_after } => {
                let nanos = u64::try_from(retry_after.as_nanos()).unwrap_or(u64::MAX);
                Some(
                    Decision::denied(quota.burst(), 0, nanos, nanos)
                        .with_fallback(Fallback::StoreUnavailableDenied),
                )
            }
        }
    }
}
