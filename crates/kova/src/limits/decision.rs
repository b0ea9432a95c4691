//! What a composite answered: every limit's decision, and which one decided.

use crate::Decision;

use super::MAX_LIMITS;

/// The answer of a [`Limits`](crate::Limits) check: the decision of the limit that decided it
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

impl LimitsDecision {
    /// Builds the answer from each limit's decision (`allowed` says whether the whole check
    /// was admitted).
    pub(crate) fn new(decisions: [Decision; MAX_LIMITS], len: usize, allowed: bool) -> Self {
        let each = &decisions[..len];
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
        LimitsDecision { decisions, len, decided_by }
    }

    /// Whether the request may proceed (every limit admitted it).
    pub fn is_allowed(&self) -> bool {
        self.decision().is_allowed()
    }

    /// The deciding limit's decision (what a single `RateLimit-*` / `Retry-After` header shows).
    pub fn decision(&self) -> Decision {
        self.decisions[self.decided_by]
    }

    /// The position of the deciding limit in the list the composite was built from.
    pub fn decided_by(&self) -> usize {
        self.decided_by
    }

    /// Every limit's decision, in the composite's order.
    pub fn limit_decisions(&self) -> &[Decision] {
        &self.decisions[..self.len]
    }
}
