//! CompositeLimiter: the hook a limiter implements to decide several quotas of one key all or
//! nothing (kova's [`KeyedLimits`] in memory, a store's composite script), and its future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use kova::limits::{KeyedLimits, LimitsDecision};
use kova::{Clock, GiveBack, Quota, WordAlgorithm};

use crate::ready::ReadyOr;
use crate::{LimitKey, LimiterError, SettleError, SettleFuture, Settled};

/// A limiter that decides several quotas of one key together: a check is admitted only if every
/// quota admits it, and a denial takes nothing from any (kova's [`KeyedLimits`], or a shared
/// store's composite script). The hook a backend implements to be used by
/// [`CompositeLimit`](crate::CompositeLimit); a backend without one is given its limits one by
/// one ([`Limit`](crate::Limit)s sharing a key), which the layer checks in order and refunds on a
/// later denial.
pub trait CompositeLimiter: Send + Sync + 'static {
    /// Checks `cost` units of `key` against every quota, all or nothing (0 is a peek). The
    /// answer carries every quota's decision, in the order the composite was built with.
    fn check(&self, key: &LimitKey, cost: u64) -> CompositeCheckFuture;

    /// Gives back `cost` units an admitted check took from every quota (a later limit of the
    /// layer denied the request). Returns whether it could; the default cannot.
    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        let _ = (key, cost);
        false
    }

    /// Of `taken` units an admitted check of `key` took `elapsed_nanos` ago from every quota,
    /// how many still count in every one of them: the most the layer gives back to them all
    /// together now (see [`KeyedLimiter::still_counted`](crate::KeyedLimiter::still_counted)).
    /// `members` holds each quota (as the [`CompositeLimit`](crate::CompositeLimit) names it)
    /// and the reset its decision said, in order. A refund moves every quota by the same
    /// amount, so it is the least any one of them still counts.
    ///
    /// The default is the window rule for every quota: all of `taken` until the soonest reset,
    /// none after. kova's [`KeyedLimits`] applies its algorithm's own rule to each quota.
    fn still_counted(
        &self,
        key: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        members: &[(Quota, u64)],
        give_back: GiveBack,
    ) -> u64 {
        let _ = (key, give_back);
        match members.iter().map(|&(_, reset_after)| reset_after).min() {
            Some(reset_after) if elapsed_nanos < reset_after => taken,
            _ => 0,
        }
    }

    /// Settles an admitted check of `estimated` units whose real cost was `actual`, for every
    /// quota (see [`KeyedLimiter::settle`](crate::KeyedLimiter::settle)): one [`Settled`] per
    /// quota, in order. The default cannot: [`SettleError::Unsupported`], and the estimate
    /// stands.
    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture<Vec<Settled>> {
        let _ = (key, estimated, actual);
        SettleFuture::ready(Err(SettleError::Unsupported))
    }
}

impl<W: WordAlgorithm, C: Clock + 'static> CompositeLimiter for KeyedLimits<LimitKey, W, C> {
    fn check(&self, key: &LimitKey, cost: u64) -> CompositeCheckFuture {
        CompositeCheckFuture::ready(self.check_n(key, cost).map_err(LimiterError::from))
    }

    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        KeyedLimits::refund(self, key, cost);
        true
    }

    /// The least of what each quota still counts under `W`'s rule
    /// ([`kova::Algorithm::still_counted`]); nothing for a quota `W` cannot take.
    fn still_counted(
        &self,
        key: &LimitKey,
        taken: u64,
        elapsed_nanos: u64,
        members: &[(Quota, u64)],
        give_back: GiveBack,
    ) -> u64 {
        let _ = key;
        let each = members.iter().map(|&(quota, reset_after)| {
            <W as WordAlgorithm>::from_quota(quota).map_or(0, |algorithm| {
                WordAlgorithm::still_counted(&algorithm, taken, elapsed_nanos, reset_after, give_back)
            })
        });
        each.min().unwrap_or(0)
    }

    /// Every quota settles on its own (a settle is never denied, so there is nothing to decide
    /// all or nothing), into its own overdraft ([`KeyedLimits::settle`]).
    fn settle(&self, key: &LimitKey, estimated: u64, actual: u64) -> SettleFuture<Vec<Settled>> {
        let settlements = KeyedLimits::settle(self, key, estimated, actual);
        let after = self.peek(key);
        let each =
            settlements.into_iter().zip(after.limit_decisions()).map(|(s, &d)| Settled::new(s, Some(d)));
        SettleFuture::ready(Ok(each.collect()))
    }
}

/// The future of one [`CompositeLimiter::check`]: already complete for in-memory composites,
/// boxed for those that wait on I/O.
#[must_use = "a check does nothing unless awaited or inspected"]
pub struct CompositeCheckFuture(ReadyOr<Result<LimitsDecision, LimiterError>>);

impl CompositeCheckFuture {
    /// A check that is already complete.
    pub fn ready(result: Result<LimitsDecision, LimiterError>) -> Self {
        CompositeCheckFuture(ReadyOr::Ready(Some(result)))
    }

    /// A check that completes when `future` does.
    pub fn new<F>(future: F) -> Self
    where
        F: Future<Output = Result<LimitsDecision, LimiterError>> + Send + 'static,
    {
        CompositeCheckFuture(ReadyOr::boxed(future))
    }

    /// The result if the check is already complete, else the future back.
    // The Err is this future handed back (moved once, on the path that then awaits a store).
    #[allow(clippy::result_large_err)]
    pub fn into_ready(self) -> Result<Result<LimitsDecision, LimiterError>, Self> {
        self.0.into_ready().map_err(CompositeCheckFuture)
    }
}

impl fmt::Debug for CompositeCheckFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state =
            if self.0.is_ready() { "CompositeCheckFuture::Ready" } else { "CompositeCheckFuture::Pending" };
        f.write_str(state)
    }
}

impl Future for CompositeCheckFuture {
    type Output = Result<LimitsDecision, LimiterError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut()
            .0
            .poll_with(cx, || Err(LimiterError::backend("rate-limit check polled after it completed")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kova::{Gcra, ManualClock};

    /// Each quota's own rule, the least of them: GCRA 10 a second has 5 of 10 units left
    /// counting half a second on, 1,000 an hour all of them.
    #[test]
    fn a_composite_still_counts_the_least_of_its_quotas() {
        const SECOND: u64 = 1_000_000_000;
        let (second, hour) = (Quota::per_second(10).unwrap(), Quota::per_hour(1_000).unwrap());
        let limits =
            KeyedLimits::<LimitKey, Gcra, _>::with_clock([second, hour], ManualClock::new()).unwrap();
        let key = LimitKey::Global;
        let members = [(second, SECOND), (hour, 36 * SECOND)];
        assert_eq!(CompositeLimiter::still_counted(&limits, &key, 10, 0, &members, GiveBack::Settle), 10);
        assert_eq!(
            CompositeLimiter::still_counted(&limits, &key, 10, SECOND / 2, &members, GiveBack::Settle),
            5
        );
        assert_eq!(CompositeLimiter::still_counted(&limits, &key, 10, SECOND, &members, GiveBack::Settle), 0);
        assert_eq!(CompositeLimiter::still_counted(&limits, &key, 10, 0, &[], GiveBack::Settle), 0);
    }
}
