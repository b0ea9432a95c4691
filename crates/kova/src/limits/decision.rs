//! What a composite answered: every limit's decision, and which one decided.

use crate::Decision;

use super::link::NONE;
use super::MAX_LIMITS;

/// The answer of a [`Limits`](crate::limits::Limits) check: the decision of the limit that decided it
/// ([`decision`](Self::decision), [`decided_by`](Self::decided_by)) and every limit's own
/// ([`limit_decisions`](Self::limit_decisions)), for headers per limit.
///
/// - Admitted: every limit admitted and took the cost; the deciding limit is the one with the
///   fewest units remaining (the first of equals).
/// - Denied: nothing was taken. Limits that denied carry their denial; the others a peek (what
///   they hold, unchanged). The deciding limit is the denying one that must be waited for
///   longest (the first of equals), so its `retry_after` is when the whole check could pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsDecision {
    decisions: [Decision; MAX_LIMITS],
    len: usize,
    /// Whether every limit admitted. Kept beside the decisions, and the deciding limit found
    /// only when asked for, so that a caller who reads only [`is_allowed`](Self::is_allowed)
    /// leaves the rest of the answer unread: inlined, the compiler then never builds it.
    allowed: bool,
}

/// The deciding limit of `each` by [`LimitsDecision`]'s rule (the first of equals): admitted,
/// the one with the fewest units remaining; denied, the denying one to be waited for longest.
#[inline]
#[expect(clippy::indexing_slicing, reason = "decided_by is always an index of `each`, which is never empty")]
fn deciding(each: &[Decision], allowed: bool) -> usize {
    let mut decided_by = 0;
    for (i, d) in each.iter().enumerate() {
        let best = &each[decided_by];
        let better = if allowed {
            d.remaining() < best.remaining()
        } else {
            !d.is_allowed() && (best.is_allowed() || d.retry_after_nanos() > best.retry_after_nanos())
        };
        if better {
            decided_by = i;
        }
    }
    decided_by
}

impl LimitsDecision {
    /// Builds the answer from the first `len` of `decisions` (`allowed` says whether the whole
    /// check was admitted).
    #[inline(always)]
    pub(crate) fn new(decisions: [Decision; MAX_LIMITS], len: usize, allowed: bool) -> Self {
        LimitsDecision { decisions, len, allowed }
    }

    /// The answer of exactly `N` limits, built by value where it is returned: with `N` known,
    /// every place is written by a fixed index, and a place no caller reads is never written.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "N is a composite's count of limits, at most MAX_LIMITS (checked at compile time)"
    )]
    pub(crate) fn of<const N: usize>(each: [Decision; N], allowed: bool) -> Self {
        const { assert!(N >= 1 && N <= MAX_LIMITS) };
        let mut decisions = [NONE; MAX_LIMITS];
        for (i, decision) in each.into_iter().enumerate() {
            decisions[i] = decision;
        }
        LimitsDecision { decisions, len: N, allowed }
    }

    /// The answer for limits decided elsewhere (kova-redis's composite script decides the same
    /// limits in Redis): each limit's decision in the composite's order, and whether the whole
    /// check was admitted. The deciding limit is chosen by the rule above. `None` for no
    /// decisions or more than [`MAX_LIMITS`].
    ///
    /// ```
    /// use kova::limits::LimitsDecision;
    /// use kova::Decision;
    /// let each = [Decision::allowed(10, 4, 600), Decision::denied(100, 0, 9_000, 9_000)];
    /// let answer = LimitsDecision::from_decisions(&each, false).unwrap();
    /// assert_eq!((answer.is_allowed(), answer.decided_by()), (false, 1));
    /// assert!(LimitsDecision::from_decisions(&[], true).is_none());
    /// ```
    pub fn from_decisions(decisions: &[Decision], allowed: bool) -> Option<Self> {
        if decisions.is_empty() || decisions.len() > MAX_LIMITS {
            return None;
        }
        let mut all = [NONE; MAX_LIMITS];
        for (place, &decision) in all.iter_mut().zip(decisions) {
            *place = decision;
        }
        // A check some limit denied is not admitted, whatever the caller says; one that says
        // denied when every limit admitted has no limit to wait for (its answer would be a
        // denial to retry at once): refused.
        let all_admitted = decisions.iter().all(Decision::is_allowed);
        if !allowed && all_admitted {
            return None;
        }
        Some(Self::new(all, decisions.len(), allowed && all_admitted))
    }

    /// Whether the request may proceed (every limit admitted it).
    #[inline]
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// The deciding limit's decision (what a single `RateLimit-*` / `Retry-After` header shows).
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        reason = "decided_by() is an index of limit_decisions(), which is never empty"
    )]
    pub fn decision(&self) -> Decision {
        self.decisions[self.decided_by()]
    }

    /// The position of the deciding limit in the list the composite was built from.
    #[inline]
    pub fn decided_by(&self) -> usize {
        deciding(self.limit_decisions(), self.allowed)
    }

    /// Every limit's decision, in the composite's order.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        reason = "len is 1..=MAX_LIMITS: set only by this type's constructors from a composite's limits"
    )]
    pub fn limit_decisions(&self) -> &[Decision] {
        &self.decisions[..self.len]
    }
}
