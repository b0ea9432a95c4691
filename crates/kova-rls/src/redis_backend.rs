//! The Redis backend: every decision made by kova-redis (one script per decision, batched on
//! one node, optionally leased), so every kova-rls on one Redis shares each limit. When Redis
//! cannot answer, kova-redis's [`StoreFailurePolicy`](kova_redis::StoreFailurePolicy) decides; those
//! decisions are counted in `kova_rls_fallbacks_total`, `kova_rls_backend_available` goes to
//! 0, and the switch each way is logged once.

use std::sync::atomic::{AtomicBool, Ordering};

use kova::{Decision, Fallback};
use kova_redis::{Error, RedisLimiter};

use crate::backend::{Backend, BackendError};
use crate::{telemetry, Limited};

/// Limits' state in Redis through a [`RedisLimiter`] (built with the policy, prefix, timeout
/// and leasing the binary's flags chose).
#[derive(Debug)]
pub struct RedisBackend {
    limiter: RedisLimiter,
    /// Whether the last answer came from Redis (false while the failure policy decides): only
    /// the switch is logged, not every decision of an outage.
    available: AtomicBool,
}

impl RedisBackend {
    /// Decides with `limiter`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // `open` connects on first use: the service starts even while Redis is down.
    /// let limiter = kova_redis::RedisLimiter::builder().open("redis://127.0.0.1:6379/")?;
    /// let backend = kova_rls::RedisBackend::new(limiter);
    /// # let _ = backend;
    /// # Ok(()) }
    /// ```
    pub fn new(limiter: RedisLimiter) -> Self {
        telemetry::backend_available(true);
        RedisBackend { limiter, available: AtomicBool::new(true) }
    }

    /// The limiter (its [`stats`](RedisLimiter::stats) and batching counters).
    pub fn limiter(&self) -> &RedisLimiter {
        &self.limiter
    }

    /// Notes whether Redis answered, logging and publishing a change.
    fn note(&self, answered: bool, fallback: Option<Fallback>) {
        // Relaxed: a flag for logging only; no other memory is published through it.
        if self.available.swap(answered, Ordering::Relaxed) == answered {
            return;
        }
        telemetry::backend_available(answered);
        if answered {
            tracing::info!("Redis answers again: decisions are Redis's");
        } else {
            tracing::warn!(?fallback, "Redis unavailable: the failure policy decides");
        }
    }
}

/// Whether the failure policy (not Redis, not a lease) made `decision`.
fn by_policy(decision: &Decision) -> bool {
    matches!(
        decision.fallback(),
        Some(
            Fallback::StoreUnavailableAllowed
                | Fallback::StoreUnavailableDenied
                | Fallback::StoreUnavailableLocal
        )
    )
}

impl Backend for RedisBackend {
    fn accepts(&self, limited: &Limited) -> Result<(), String> {
        match kova_redis::RedisLimit::new(limited.algorithm(), limited.quota()) {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("Redis's scripts cannot hold this limit: {e}")),
        }
    }

    async fn check(&self, limited: &Limited, key: &Vec<u8>, cost: u64) -> Result<Decision, BackendError> {
        let limit = kova_redis::RedisLimit::new(limited.algorithm(), limited.quota())
            .map_err(|e| BackendError::Unavailable(format!("Redis's scripts cannot hold this limit: {e}")))?;
        match self.limiter.check_n(key, &limit, cost).await {
            Ok(decision) => {
                self.note(!by_policy(&decision), decision.fallback());
                Ok(decision)
            }
            Err(Error::Cost(_)) => Err(BackendError::TooCostly),
            Err(error @ Error::Store(_)) => {
                // `--redis-failure error`: the call gets UNAVAILABLE (Envoy's
                // failure_mode_deny decides), counted as a request error.
                self.note(false, None);
                Err(BackendError::Unavailable(error.to_string()))
            }
            Err(error) => Err(BackendError::Unavailable(error.to_string())),
        }
    }

    async fn refund_local(&self, limited: &Limited, key: &Vec<u8>, cost: u64) -> bool {
        let Ok(limit) = kova_redis::RedisLimit::new(limited.algorithm(), limited.quota()) else {
            return false;
        };
        // Not in the local share: Redis answered again meanwhile and was charged the key's
        // local state, these units among them, so they are Redis's to give back now.
        self.limiter.refund_local(key, &limit, cost) || self.refund(limited, key, cost).await
    }

    async fn refund(&self, limited: &Limited, key: &Vec<u8>, cost: u64) -> bool {
        let Ok(limit) = kova_redis::RedisLimit::new(limited.algorithm(), limited.quota()) else {
            return false;
        };
        match self.limiter.refund(key, &limit, cost).await {
            Ok(()) => true,
            // The sliding window log takes no refunds (neither does kova's in-memory one).
            Err(Error::Unsupported { .. }) => false,
            Err(error) => {
                telemetry::refund_failed();
                tracing::warn!(%error, "a refund did not reach Redis: those units stay consumed");
                false
            }
        }
    }
}
