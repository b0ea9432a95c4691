//! The one async limiter trait the middleware drives, and its implementation for kova's in-memory
//! [`Keyed`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use kova::{Algorithm, CheckError, Clock, Decision, GiveBack, Keyed};

use crate::ready::ReadyOr;
use crate::{LimitKey, SettleError, SettleFuture, Settled};

/// Any keyed limiter: in-memory ([`Keyed`]), a shared store (Redis), or your own.
///
/// `check` counts `cost` units against `key` (0 is a peek). It is dyn-compatible, so one layer can
/// hold limiters of different kinds, and its future is a [`CheckFuture`]: already complete, with
/// no allocation, for in-memory limiters ([`CheckFuture::ready`]); a boxed future for those that
/// wait on I/O ([`CheckFuture::new`]).
///
/// A limiter with a failure policy (a store that fails open or closed) answers with a
/// [`Decision`] carrying a [`Fallback`](kova::Fallback); one without answers
/// [`LimiterError::Backend`], and the layer's
/// [`BackendFailurePolicy`](crate::BackendFailurePolicy) decides.
///
/// ```
/// use kova::{Decision, Gcra, Keyed, Quota};
/// use kova_tower::{KeyedLimiter, LimitKey};
/// let limiter = Keyed::<LimitKey, Gcra>::new(Quota::per_second(2)?)?;
/// let key = LimitKey::api_key("k1");
/// // `Keyed` has an inherent `check(&key)` too: call the trait's by its path.
/// let decision = KeyedLimiter::check(&limiter, &key, 1).into_ready().ok().expect("in-memory checks are ready")?;
/// assert_eq!(decision.remaining(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KeyedLimiter: Send + Sync + 'static {
    /// Counts `cost` units against `key`.
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture;

    /// Gives back `cost` units an allowed `check` took, because a later limit rejected the same
    /// request (a rejected request consumes no quota). Returns whether it could: the default,
    /// for limiters that cannot take units back, does nothing and returns `false`.
    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        let _ = (key, cost);
        false
    }

    /// Settles an allowed check of `estimated` units whose real cost, read from the response,
    /// is `actual` (see [`Limit::settle_from_header`](crate::Limit::settle_from_header)): gives
    /// back the difference when lower, charges it when higher (into the quota's overdraft where
    /// the limiter has one), and reports the key's state after it when known, for the
    /// `RateLimit` header.
    ///
    /// The default, for limiters with no settle of their own, gives back a lower cost through
    /// [`refund`](Self::refund) and answers [`SettleError::Unsupported`] for a higher one (or
    /// when the refund fails): the estimate then stands, and the layer reports the failure.
    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture {
        let result = if actual == estimated {
            Ok(Settled::default())
        } else if actual < estimated && self.refund(key, estimated - actual) {
            let settlement =
                kova::reservation::Settlement { refunded: estimated - actual, ..Default::default() };
            Ok(Settled { settlement, after: None })
        } else {
            Err(SettleError::Unsupported)
        };
        SettleFuture::ready(result)
    }

    /// Of `taken` units an allowed check of `key` took `elapsed_nanos` ago, whose decision said
    /// `reset_after_nanos`, how many still count: the most the layer gives back now (a refund
    /// after a later limit's denial, a lower settled cost, a dropped request's). Given back
    /// late, more would come off what later checks took: a window's units off the next
    /// window's count, a GCRA or token bucket's units that have refilled since.
    ///
    /// The default is [`kova::Algorithm::still_counted`]'s default, the window rule: all of
    /// `taken` until the reset, none after. A limiter whose state refills (GCRA, a token
    /// bucket) or whose window ends before its reset (a sliding window counter) overrides it
    /// with its algorithm's rule, as kova's [`Keyed`] does.
    fn still_counted(
        &self,
        key: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        let _ = (key, give_back);
        if elapsed_nanos < reset_after_nanos {
            taken
        } else {
            0
        }
    }

    /// The limiter's clock, in nanoseconds since its origin, if it has one the layer can read.
    /// The layer reads it when an allowed check may later be refunded or settled, to find
    /// what of it [still counts](Self::still_counted); without a clock (the default, `None`)
    /// it measures with [`Instant`](std::time::Instant).
    fn now_nanos(&self) -> Option<u64> {
        None
    }
}

impl<A: Algorithm, C: Clock + 'static> KeyedLimiter for Keyed<LimitKey, A, C> {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        CheckFuture::ready(self.check_n(key, cost).map_err(LimiterError::from))
    }

    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        Keyed::refund(self, key, cost)
    }

    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture {
        let settlement = Keyed::settle(self, key, estimated, actual);
        SettleFuture::ready(Ok(Settled { settlement, after: Some(self.peek(key)) }))
    }

    /// [`Keyed::still_counted`]: the rule of the key's algorithm, under its own quota (a first
    /// check the doorkeeper admitted without holding the key: the default quota's).
    fn still_counted(
        &self,
        key: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        Keyed::still_counted(self, key, taken, elapsed_nanos, reset_after_nanos, give_back)
    }

    fn now_nanos(&self) -> Option<u64> {
        Some(self.clock().now_nanos())
    }
}

/// A [`Sketch`](kova::sketch::Sketch): every key in fixed memory, never granted more than its
/// quota ([`Limit::sketch`](crate::Limit::sketch)). Its decisions are marked
/// [`Fallback::Sketch`](kova::Fallback::Sketch); it cannot give units back (its cells are
/// shared), so `refund` and a lower settled cost do nothing.
impl<C: Clock + 'static> KeyedLimiter for kova::sketch::Sketch<C> {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        CheckFuture::ready(self.check_n(key, cost).map_err(LimiterError::from))
    }
}

impl<L: KeyedLimiter + ?Sized> KeyedLimiter for Arc<L> {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        (**self).check(key, cost)
    }

    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        (**self).refund(key, cost)
    }

    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture {
        (**self).settle(key, estimated, actual)
    }

    fn still_counted(
        &self,
        key: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        (**self).still_counted(key, taken, elapsed_nanos, reset_after_nanos, give_back)
    }

    fn now_nanos(&self) -> Option<u64> {
        (**self).now_nanos()
    }
}

impl<L: KeyedLimiter + ?Sized> KeyedLimiter for Box<L> {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        (**self).check(key, cost)
    }

    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        (**self).refund(key, cost)
    }

    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture {
        (**self).settle(key, estimated, actual)
    }

    fn still_counted(
        &self,
        key: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        (**self).still_counted(key, taken, elapsed_nanos, reset_after_nanos, give_back)
    }

    fn now_nanos(&self) -> Option<u64> {
        (**self).now_nanos()
    }
}

/// A check that could not be answered with a decision.
#[derive(Debug)]
#[non_exhaustive]
pub enum LimiterError {
    /// The cost is above what the limiter admits at once: waiting would not help. A
    /// configuration error (a route's cost above the quota's burst), answered with 500.
    CostExceedsCapacity {
        /// The cost asked for.
        cost: u64,
        /// The most the limiter admits at once.
        capacity: u64,
    },
    /// The backend failed (a store that could not be reached, a timeout) and has no failure
    /// policy of its own; the layer's [`BackendFailurePolicy`](crate::BackendFailurePolicy) decides.
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

impl LimiterError {
    /// A backend failure.
    pub fn backend(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        LimiterError::Backend(error.into())
    }
}

impl fmt::Display for LimiterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimiterError::CostExceedsCapacity { cost, capacity } => {
                write!(f, "cost {cost} exceeds the limiter's capacity of {capacity}")
            }
            LimiterError::Backend(e) => write!(f, "rate-limit backend failed: {e}"),
        }
    }
}

impl std::error::Error for LimiterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LimiterError::Backend(e) => Some(&**e),
            LimiterError::CostExceedsCapacity { .. } => None,
        }
    }
}

impl From<CheckError> for LimiterError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::CostExceedsCapacity { cost, capacity } => {
                LimiterError::CostExceedsCapacity { cost, capacity }
            }
            other => LimiterError::Backend(Box::new(other)),
        }
    }
}

/// The future of one [`KeyedLimiter::check`]: either already complete (in-memory limiters; no
/// allocation, and the middleware answers without an extra await) or a boxed future (limiters
/// that wait on I/O).
#[must_use = "a check does nothing unless awaited or inspected"]
pub struct CheckFuture(ReadyOr<Result<Decision, LimiterError>>);

impl CheckFuture {
    /// A check that is already complete.
    pub fn ready(result: Result<Decision, LimiterError>) -> Self {
        CheckFuture(ReadyOr::Ready(Some(result)))
    }

    /// A check that completes when `future` does.
    pub fn new<F>(future: F) -> Self
    where
        F: Future<Output = Result<Decision, LimiterError>> + Send + 'static,
    {
        CheckFuture(ReadyOr::boxed(future))
    }

    /// The result if the check is already complete, else the future back.
    pub fn into_ready(self) -> Result<Result<Decision, LimiterError>, CheckFuture> {
        self.0.into_ready().map_err(CheckFuture)
    }
}

impl fmt::Debug for CheckFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ReadyOr::Ready(result) => f.debug_tuple("CheckFuture::Ready").field(result).finish(),
            ReadyOr::Boxed(_) => f.write_str("CheckFuture::Pending"),
        }
    }
}

impl Future for CheckFuture {
    type Output = Result<Decision, LimiterError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut()
            .0
            .poll_with(cx, || Err(LimiterError::backend("rate-limit check polled after it completed")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kova::{Gcra, ManualClock, Quota};

    #[tokio::test]
    async fn keyed_checks_are_ready_and_costs_above_capacity_are_errors() {
        let limiter =
            Keyed::<LimitKey, Gcra, _>::with_clock(Quota::per_second(3).unwrap(), ManualClock::new())
                .unwrap();
        let key = LimitKey::Global;
        let d = KeyedLimiter::check(&limiter, &key, 2).await.unwrap();
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), 1);
        match KeyedLimiter::check(&limiter, &key, 4).into_ready() {
            Ok(Err(LimiterError::CostExceedsCapacity { cost: 4, capacity: 3 })) => {}
            other => panic!("expected a ready capacity error, got {other:?}"),
        }
        let boxed = CheckFuture::new(async { Err(LimiterError::backend("down")) });
        let boxed = boxed.into_ready().expect_err("a boxed check is not ready");
        assert_eq!(boxed.await.unwrap_err().to_string(), "rate-limit backend failed: down");
    }
}
