//! The carry-over of what a cell consumed when its quota changes: one rule, on the algorithm,
//! for a key's quota change in the keyed table (`keyed/table/entry.rs`) and a direct limiter's
//! (`quota_change.rs`), so that the direct limiter does not depend on the keyed table.

use crate::clock::At;
use crate::Algorithm;

/// A fresh cell of `new` that has consumed, at `now`, what `cell` of `old` counts as used, a
/// debt included (a key's quota change in the keyed table, a direct limiter's in
/// `quota_change.rs`): charged, so a debt carries over as far as the new quota's overdraft
/// holds it.
pub(crate) fn carry_over<A: Algorithm>(old: &A, new: &A, cell: &A::Cell, now: u64) -> A::Cell {
    let used = old.consumed_cell(cell, now);
    let fresh = new.new_cell();
    if used > 0 {
        new.charge_cell(&fresh, &At(now), used);
    }
    fresh
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlgorithmKind, AnyAlgorithm, Gcra, Quota};

    fn gcra(quota: Quota) -> Gcra {
        <Gcra as Algorithm>::from_quota(quota).unwrap()
    }

    fn remaining<A: Algorithm>(algorithm: &A, cell: &A::Cell, now: u64) -> u64 {
        algorithm.decide_cell(cell, &At(now), 0).remaining()
    }

    #[test]
    fn what_was_consumed_is_consumed_under_the_new_quota() {
        let (old, new) = (gcra(Quota::per_second(10).unwrap()), gcra(Quota::per_second(20).unwrap()));
        let cell = old.new_cell();
        assert!(old.decide_cell(&cell, &At(0), 8).is_allowed());
        assert_eq!(remaining(&new, &carry_over(&old, &new, &cell, 0), 0), 12);
    }

    #[test]
    fn a_fresh_cell_carries_nothing() {
        let (old, new) = (gcra(Quota::per_second(10).unwrap()), gcra(Quota::per_second(3).unwrap()));
        assert_eq!(remaining(&new, &carry_over(&old, &new, &old.new_cell(), 0), 0), 3);
    }

    #[test]
    fn more_than_the_new_capacity_is_capped_without_an_overdraft() {
        let (old, new) = (gcra(Quota::per_second(10).unwrap()), gcra(Quota::per_second(5).unwrap()));
        let cell = old.new_cell();
        assert!(old.decide_cell(&cell, &At(0), 8).is_allowed());
        let carried = carry_over(&old, &new, &cell, 0);
        assert_eq!(new.consumed_cell(&carried, 0), 5);
    }

    #[test]
    fn a_debt_carries_over_as_far_as_the_new_overdraft_holds_it() {
        let old = gcra(Quota::per_second(10).unwrap().with_overdraft(5));
        let cell = old.new_cell();
        assert_eq!(old.charge_cell(&cell, &At(0), 13), 13);
        assert_eq!(old.consumed_cell(&cell, 0), 13);
        let roomy = gcra(Quota::per_second(20).unwrap().with_overdraft(5));
        assert_eq!(roomy.consumed_cell(&carry_over(&old, &roomy, &cell, 0), 0), 13);
        let tight = gcra(Quota::per_second(10).unwrap().with_overdraft(1));
        assert_eq!(tight.consumed_cell(&carry_over(&old, &tight, &cell, 0), 0), 11);
    }

    #[test]
    fn a_boxed_cell_carries_over_too() {
        let log = |limit| {
            AnyAlgorithm::new(AlgorithmKind::SlidingWindowLog, Quota::per_second(limit).unwrap()).unwrap()
        };
        let (old, new) = (log(4), log(6));
        let cell = old.new_cell();
        assert!(old.decide_cell(&cell, &At(0), 3).is_allowed());
        assert_eq!(remaining(&new, &carry_over(&old, &new, &cell, 0), 0), 3);
    }
}
