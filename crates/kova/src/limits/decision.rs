//! What a composite answered: every limit's decision, and which one decided.

use crate::Decision;

use super::cells::NONE;
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
    decided_by: usize,
}

/// The deciding limit of `each` by [`LimitsDecision`]'s rule (the first of equals): admitted,
/// the one with the fewest units remaining; denied, the denying one to be waited for longest.
#[inline(always)]
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
    /// Builds the answer from each limit's decision (`allowed` says whether the whole check
    /// was admitted).
    #[inline(always)]
    pub(crate) fn new(decisions: [Decision; MAX_LIMITS], len: usize, allowed: bool) -> Self {
        let mut answer = LimitsDecision { decisions, len, decided_by: 0 };
        answer.decide(allowed);
        answer
    }

    /// An answer for `len` limits whose decisions are yet to be written
    /// ([`all_slots`](Self::all_slots)) and chosen from ([`decide`](Self::decide)).
    #[inline(always)]
    pub(crate) fn undecided(len: usize) -> Self {
        LimitsDecision { decisions: [NONE; MAX_LIMITS], len, decided_by: 0 }
    }

    /// Every place, to be written.
    #[inline(always)]
    pub(crate) fn all_slots(&mut self) -> &mut [Decision; MAX_LIMITS] {
        &mut self.decisions
    }

    /// The answer of exactly `N` limits, built where it is returned: with `N` known, every
    /// place is written by a fixed index.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "N is a composite's count of one-word limits, at most 2 <= MAX_LIMITS"
    )]
    pub(crate) fn of<const N: usize>(each: [Decision; N], allowed: bool) -> Self {
        // Chosen on the fixed-size array, before the answer is built: the answer is then only
        // written, by fixed indices, and need not be read back from memory.
        let decided_by = deciding(&each, allowed);
        let mut decisions = [NONE; MAX_LIMITS];
        decisions[..N].copy_from_slice(&each);
        LimitsDecision { decisions, len: N, decided_by }
    }

    /// Writes the decisions of exactly `N` limits, the answer's count, in place.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "N is a composite's count of one-word limits, at most 2 <= MAX_LIMITS"
    )]
    pub(crate) fn set<const N: usize>(&mut self, each: [Decision; N], allowed: bool) {
        debug_assert_eq!(self.len, N);
        self.decisions[..N].copy_from_slice(&each);
        self.decide(allowed);
    }

    /// Chooses the deciding limit by the rule above, once every limit's decision is in.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "len is 1..=MAX_LIMITS and decided_by < len: set only by this type's constructors from a composite's limits"
    )]
    pub(crate) fn decide(&mut self, allowed: bool) {
        self.decided_by = deciding(&self.decisions[..self.len], allowed);
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
        Some(Self::new(all, decisions.len(), allowed))
    }

    /// Whether the request may proceed (every limit admitted it).
    #[inline]
    pub fn is_allowed(&self) -> bool {
        self.decision().is_allowed()
    }

    /// The deciding limit's decision (what a single `RateLimit-*` / `Retry-After` header shows).
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        reason = "len is 1..=MAX_LIMITS and decided_by < len: set only by this type's constructors from a composite's limits"
    )]
    pub fn decision(&self) -> Decision {
        self.decisions[self.decided_by]
    }

    /// The position of the deciding limit in the list the composite was built from.
    #[inline]
    pub fn decided_by(&self) -> usize {
        self.decided_by
    }

    /// Every limit's decision, in the composite's order.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        reason = "len is 1..=MAX_LIMITS and decided_by < len: set only by this type's constructors from a composite's limits"
    )]
    pub fn limit_decisions(&self) -> &[Decision] {
        &self.decisions[..self.len]
    }
}
