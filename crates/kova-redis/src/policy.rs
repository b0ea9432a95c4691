//! [`StoreFailurePolicy`]: what a check answers when Redis cannot.

use std::num::NonZeroU32;

#[cfg(doc)]
use kova::Fallback;

/// What a call does when Redis cannot answer in time (down, restarting, slow, unreachable).
///
/// A decision made by the policy carries a [`Fallback`], so the caller can tell a fail-open
/// `allowed` from a real one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreFailurePolicy {
    /// Allow the request: `allowed`, `remaining` 0, marked [`Fallback::StoreUnavailableAllowed`].
    /// For limits that protect capacity, where an outage of the limiter must not become an
    /// outage of the service.
    FailOpen,
    /// Deny the request: `remaining` 0, `retry_after` the builder's
    /// [`unavailable_retry_after`](crate::Builder::unavailable_retry_after), marked
    /// [`Fallback::StoreUnavailableDenied`]. For limits that are a security control (login
    /// attempts, OTP checks).
    FailClosed,
    /// Return [`Error::Store`](crate::Error::Store) and let the caller decide.
    ReturnError,
    /// Decide with a local in-memory kova limiter at this server's share of the limit:
    /// [`RedisLimit::local_quota`](crate::RedisLimit::local_quota) when given, else the limit's quota divided by `servers` (rate and
    /// burst, or the window's limit; at least one unit). Allowed or denied, the decision is
    /// marked [`Fallback::StoreUnavailableLocal`]; a cost above the share is denied for
    /// [`unavailable_retry_after`](crate::Builder::unavailable_retry_after). So while Redis is down,
    /// `servers` servers together admit at most the limit (at least one unit each).
    ///
    /// **The way back.** Every check still tries Redis first. When Redis answers again, the
    /// first check of a key that was decided locally first charges Redis with the units the
    /// local limiter still counts as used (`capacity - remaining`, in one script run that admits
    /// them as far as the limit has room, like a lease), then forgets those units locally (a
    /// unit admitted locally meanwhile, by a call that timed out, stays owed) and decides in
    /// Redis. So returning does not hand out a second full quota on top of what was
    /// spent locally: what was admitted during the outage and is still within the algorithm's
    /// memory is counted in Redis. Two limits on that: a server that returns while another has
    /// not yet charged its own local units may be admitted against them (the total over the
    /// switch is then at most the limit plus the local units of the servers still to return),
    /// and Redis's own loss (a kill -9 without persistence loses what was admitted before the
    /// outage) is Redis's. Concurrent first checks of one key on one server may both charge it
    /// (stricter, never looser). A slow Redis that runs a script after its call timed out
    /// counts that request in both places (stricter too).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// # rt.block_on(async {
    /// use std::num::NonZeroU32;
    /// use kova::{Fallback, Quota};
    /// use kova_redis::{RedisLimit, RedisLimiter, StoreFailurePolicy};
    /// // Nothing listens on port 1: every check is decided locally, at a quarter of the limit.
    /// let limiter = RedisLimiter::builder()
    ///     .store_failure(StoreFailurePolicy::Degrade { servers: NonZeroU32::new(4).unwrap() })
    ///     .open("redis://127.0.0.1:1/")?;
    /// let limit = RedisLimit::gcra(Quota::per_minute(40)?)?;
    /// let d = limiter.check("user:42", &limit).await?;
    /// assert_eq!(d.fallback(), Some(Fallback::StoreUnavailableLocal));
    /// assert_eq!((d.limit(), d.remaining()), (10, 9));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })
    /// # }
    /// ```
    Degrade {
        /// The number of servers sharing the limits.
        servers: NonZeroU32,
    },
}
