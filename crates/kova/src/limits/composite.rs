//! A key's limits as one algorithm over one cell, for [`KeyedLimits`](super::KeyedLimits)'
//! table: the key's words kept together ([`Cells`]: one or two limits swapped by one
//! compare-and-swap, three or four checked then refunded), so that a check finds its key once.

use std::fmt;

use crossbeam_utils::CachePadded;

use super::cells::Cells;
use super::seen::Seen;
use super::{LimitsDecision, LimitsError, MAX_LIMITS};
use crate::cell::BoxedCell;
use crate::{Algorithm, Clock, Decision, Quota, QuotaError, WordAlgorithm};

/// The limits of every key of a [`KeyedLimits`](super::KeyedLimits), in order.
pub(crate) struct Composite<W> {
    algorithms: Vec<W>,
    capacity: u64,
}

impl<W: WordAlgorithm> fmt::Debug for Composite<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quotas: Vec<Quota> = self.algorithms.iter().map(WordAlgorithm::quota).collect();
        f.debug_struct("Composite").field("algorithm", &W::NAME).field("quotas", &quotas).finish()
    }
}

impl<W: WordAlgorithm> Composite<W> {
    /// The composite of `quotas`, in order: between 1 and [`MAX_LIMITS`] of them, each one the
    /// algorithm can represent.
    pub(super) fn new(quotas: impl IntoIterator<Item = Quota>) -> Result<Self, LimitsError> {
        let mut algorithms = Vec::new();
        for (index, quota) in quotas.into_iter().enumerate() {
            if index >= MAX_LIMITS {
                return Err(LimitsError::TooMany { count: index + 1, max: MAX_LIMITS });
            }
            algorithms.push(W::from_quota(quota).map_err(|error| LimitsError::Quota { index, error })?);
        }
        let capacity = algorithms.iter().map(WordAlgorithm::capacity).min().ok_or(LimitsError::Empty)?;
        Ok(Composite { algorithms, capacity })
    }

    /// The limits' algorithms, in order, and the least of their capacities (the direct
    /// [`Limits`](super::Limits) keeps them beside its own cells).
    pub(super) fn into_parts(self) -> (Vec<W>, u64) {
        (self.algorithms, self.capacity)
    }

    /// How many limits.
    pub(super) fn len(&self) -> usize {
        self.algorithms.len()
    }

    /// Checks `cost` units (0: a peek) against every limit of `cell`, all or nothing: what the
    /// check saw, which [`answer`](Self::answer) turns into the answer. The caller has checked
    /// `cost` against the [capacity](Algorithm::capacity).
    #[inline(always)]
    pub(super) fn check<C: Clock + ?Sized>(&self, cell: &Cells, clock: &C, cost: u64) -> Seen {
        cell.check(&self.algorithms, clock, cost)
    }

    /// The answer of a check of `cost` units of this composite's cell that saw `seen`.
    #[inline(always)]
    pub(super) fn answer(&self, seen: &Seen, cost: u64) -> LimitsDecision {
        seen.answer(&self.algorithms, cost)
    }
}

impl<W: WordAlgorithm> Composite<W> {
    /// Every limit's algorithm, in order.
    pub(super) fn algorithms(&self) -> &[W] {
        &self.algorithms
    }

    /// Charges up to `cost` units to every limit of `cell`, never denied: the units each took.
    pub(super) fn charge_each<C: Clock + ?Sized>(
        &self,
        cell: &Cells,
        clock: &C,
        cost: u64,
    ) -> [u64; MAX_LIMITS] {
        cell.charge(&self.algorithms, clock, cost)
    }
}

/// A key's words on cache lines of their own: the table boxes each key's cell, and two keys
/// whose boxes shared a line would contend there when different threads check them.
type Padded = CachePadded<Cells>;

impl<W: WordAlgorithm> Algorithm for Composite<W> {
    type Cell = Padded;
    type Storage = BoxedCell;

    fn name(&self) -> &'static str {
        W::NAME
    }

    /// A composite of one limit (a table asks only for the composite it was built with).
    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        let algorithm = W::from_quota(quota)?;
        let capacity = algorithm.capacity();
        Ok(Composite { algorithms: vec![algorithm], capacity })
    }

    /// The first limit's quota.
    #[expect(
        clippy::indexing_slicing,
        reason = "a composite has at least one limit: its constructors refuse an empty list"
    )]
    fn quota(&self) -> Quota {
        self.algorithms[0].quota()
    }

    /// The least of the limits' capacities.
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn new_cell(&self) -> Padded {
        CachePadded::new(Cells::new(&self.algorithms, false))
    }

    /// The deciding limit's decision ([`LimitsDecision::decision`]): admitted exactly when
    /// every limit admitted; its reset is the longest of the limits' resets. The table reads a
    /// key's reset as the time until its state is fresh again (eviction takes the keys closest
    /// to it; a full table's retry hint): the deciding limit's alone would make a key whose
    /// per-second limit refills soon look close to fresh while its daily limit is nearly spent.
    fn decide_cell<C: Clock + ?Sized>(&self, cell: &Padded, clock: &C, cost: u64) -> Decision {
        let answer = self.answer(&self.check(cell, clock, cost), cost);
        let decision = answer.decision();
        let reset = answer.limit_decisions().iter().map(Decision::reset_after_nanos).max().unwrap_or(0);
        if decision.is_allowed() {
            Decision::allowed(decision.limit(), decision.remaining(), reset)
        } else {
            Decision::denied(decision.limit(), decision.remaining(), decision.retry_after_nanos(), reset)
        }
    }

    fn reset_cell(&self, cell: &Padded) {
        cell.reset(&self.algorithms);
    }

    fn is_idle(&self, cell: &Padded, now: u64) -> bool {
        cell.is_idle(&self.algorithms, now)
    }

    fn cell_bytes(&self) -> usize {
        std::mem::size_of::<Padded>()
    }

    fn refund_cell<C: Clock + ?Sized>(&self, cell: &Padded, clock: &C, cost: u64) -> bool {
        cell.refund(&self.algorithms, clock, cost);
        true
    }
}
