//! [`Backend`]: where the counts live. The [`Decider`](crate::Decider) asks it for one decision
//! per descriptor and gives units back when the request as a whole is denied.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Instant;

use kova::keyed::KeyedError;
use kova::{Clock, Decision, Fallback};

use crate::{Limited, MemoryBackend};

/// Why a backend gave no decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendError {
    /// The cost is more than the limit can ever admit at once: the descriptor is over the
    /// limit, and nothing was taken.
    TooCostly,
    /// No decision could be made (a table holding too many distinct quotas, Redis down under
    /// `--redis-failure error`, a limit Redis's scripts cannot hold); the call gets
    /// `UNAVAILABLE` and nothing it consumed is kept. A shadow rule's never fails the call: its
    /// descriptor answers `OK` (a shadow rule never changes what is enforced).
    Unavailable(String),
}

/// A store of limits' state: kova's in-memory tables ([`MemoryBackend`]) or Redis
/// ([`RedisBackend`](crate::RedisBackend)).
///
/// Keys are passed as `&Vec<u8>` because the in-memory tables are keyed by `Vec<u8>` and look
/// up by `&K`: a slice would cost a copy per check.
#[allow(clippy::ptr_arg)]
pub trait Backend: Send + Sync + 'static {
    /// Checks `cost` units of `key` under `limit`.
    fn check(
        &self,
        limit: &Limited,
        key: &Vec<u8>,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, BackendError>> + Send;

    /// Whether this backend can serve `limit` at all; `Err` says why not. A configuration is
    /// checked with it where it is loaded ([`Config::check_limits`](crate::Config::check_limits)).
    /// The in-memory tables serve every limit a configuration can hold: by default `Ok`.
    fn accepts(&self, limit: &Limited) -> Result<(), String> {
        let _ = limit;
        Ok(())
    }

    /// Gives back `cost` units an allowed check of `key` took; whether they went back (the
    /// response then reports what the refund left). Best effort: a refund that cannot be made
    /// leaves the units consumed (stricter, never looser), and the backend says so in its logs
    /// and metrics.
    fn refund(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> impl Future<Output = bool> + Send;

    /// Gives back `cost` units an allowed check of `key` took from a local share while the
    /// store was down (a decision marked [`Fallback::StoreUnavailableLocal`]), for a request
    /// denied as a whole; whether they went back. The in-memory tables never make such
    /// decisions: by default nothing, and `false`.
    fn refund_local(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> impl Future<Output = bool> + Send {
        let _ = (limit, key, cost);
        std::future::ready(false)
    }

    /// Nanoseconds on a clock that runs with the one this backend decides by, from an origin
    /// of its own. The [`Decider`](crate::Decider) reads it before a check and before that
    /// check's refund: once the check's `reset_after` has passed between the two, the window
    /// its units went into has ended, and a refund would come off the next one's count (nothing
    /// is owed back then). By default a monotonic clock of this process.
    fn now_nanos(&self) -> u64 {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        u64::try_from(ORIGIN.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Whether an allowed `decision` took units that a refund should give back to the store. A
/// failure policy's untracked allowance took none; a local share decided while Redis was down
/// took its units there ([`took_local_units`], [`Backend::refund_local`]).
pub(crate) fn took_units(decision: &Decision) -> bool {
    decision.is_allowed()
        && !matches!(
            decision.fallback(),
            Some(
                Fallback::TableFullUntracked
                    | Fallback::StoreUnavailableAllowed
                    | Fallback::StoreUnavailableLocal
            )
        )
}

/// Whether an allowed `decision` took its units from a local share while the store was down.
pub(crate) fn took_local_units(decision: &Decision) -> bool {
    decision.is_allowed() && decision.fallback() == Some(Fallback::StoreUnavailableLocal)
}

/// The allowed `decision` of `cost` units as its limit stands once a refund gave them back, so
/// that a request denied as a whole reports what its other descriptors really have left:
/// `remaining` gains `cost` (at most the limit), and a limit whole again has nothing to wait
/// for. Otherwise `reset_after` stays the check's: a refund only brings the reset nearer, and
/// how much is each algorithm's own arithmetic, so the check's is a bound, never too soon.
pub(crate) fn refunded(decision: &Decision, cost: u64) -> Decision {
    let limit = decision.limit();
    let remaining = decision.remaining().saturating_add(cost).min(limit);
    let reset_after = if remaining == limit { 0 } else { decision.reset_after_nanos() };
    let after = Decision::allowed(limit, remaining, reset_after);
    match decision.fallback() {
        Some(fallback) => after.with_fallback(fallback),
        None => after,
    }
}

impl<C: Clock + Send + Sync + 'static> Backend for MemoryBackend<C> {
    async fn check(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> Result<Decision, BackendError> {
        match self.check_now(limit, key, cost) {
            Ok(decision) => Ok(decision),
            Err(KeyedError::Check(_)) => Err(BackendError::TooCostly),
            Err(e) => Err(BackendError::Unavailable(e.to_string())),
        }
    }

    async fn refund(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> bool {
        self.refund_now(limit, key, cost)
    }

    /// The tables' own clock: their windows are counted on it.
    fn now_nanos(&self) -> u64 {
        self.clock.now_nanos()
    }
}
