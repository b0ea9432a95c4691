//! The models can fail: the same scenarios as `word_cas.rs`, run on the deliberately racy variants
//! in `kova::loom_racy`, must each make loom find a violating interleaving.
//!
//! - `check_cell_load_store` (a plain store instead of the CAS): two threads spend the same units;
//!   the admitted total goes over the bound, or the final word misses an admission.
//! - `check_cell_stale_retry` (a CAS whose failure is retried with the stale word): the
//!   leaky-bucket #39 class; a concurrent admission is overwritten.
//!
//! `#[should_panic]` with the harness's messages: either "over the bound" or "not linearizable",
//! so a panic for another reason (a bad plan, a loom error) does not count as the model working.
#![cfg(kova_loom)]

use kova::loom_racy::{check_cell_load_store, check_cell_stale_retry};
use kova::{FixedWindow, Gcra, ManualClock, Quota, SlidingWindowCounter, TokenBucket};
use kova_loom_tests::harness::{check_plan, CheckFn, LoomAlgorithm, Plan, Pre};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn contention() -> Plan {
    Plan {
        quota: Quota::from_nanos(3, 3_000).unwrap(),
        prelude: vec![],
        threads: vec![vec![2, 1], vec![1]],
        advancer: vec![],
    }
}

/// Runs `plan` under loom through `check` and returns loom's failure message; panics if loom
/// found nothing.
fn loom_finds<A: LoomAlgorithm>(plan: Plan, check: CheckFn<A>) -> String {
    let outcome = catch_unwind(AssertUnwindSafe(|| check_plan::<A>(plan, check)));
    let payload = outcome.expect_err("loom explored every interleaving and found no violation");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        message.contains("over the bound") || message.contains("not linearizable"),
        "loom failed for another reason: {message}"
    );
    message
}

/// Contention (demand 4 > 3) through `check`, a racy variant for the concrete algorithm.
fn racy_contention_is_caught<A: LoomAlgorithm>(check: CheckFn<A>) -> String {
    loom_finds::<A>(contention(), check)
}

/// A plain store instead of the CAS: both threads spend the same units.
macro_rules! load_store_is_caught {
    ($ty:ty) => {
        racy_contention_is_caught::<$ty>(check_cell_load_store::<$ty, ManualClock>)
    };
}

/// A CAS retried with a stale word: an admission is overwritten.
macro_rules! stale_retry_is_caught {
    ($ty:ty) => {
        racy_contention_is_caught::<$ty>(check_cell_stale_retry::<$ty, ManualClock>)
    };
}

#[test]
fn token_bucket_load_store() {
    let message = load_store_is_caught!(TokenBucket);
    assert!(message.contains("token_bucket"), "{message}");
}

#[test]
fn token_bucket_stale_retry() {
    stale_retry_is_caught!(TokenBucket);
}

#[test]
fn gcra_load_store() {
    load_store_is_caught!(Gcra);
}

#[test]
fn gcra_stale_retry() {
    stale_retry_is_caught!(Gcra);
}

#[test]
fn fixed_window_load_store() {
    load_store_is_caught!(FixedWindow);
}

#[test]
fn sliding_window_counter_stale_retry() {
    stale_retry_is_caught!(SlidingWindowCounter);
}

/// The racy variant is caught even where the clock moves during the checks (there the only
/// specification is the algorithm's own, so this shows that check alone has teeth).
#[test]
fn token_bucket_load_store_with_clock_advancing() {
    let plan = Plan {
        quota: Quota::from_nanos(3, 3_000).unwrap(),
        prelude: vec![Pre::Check(3)],
        threads: vec![vec![1], vec![2]],
        advancer: vec![1_000, 1_000],
    };
    loom_finds::<TokenBucket>(plan, check_cell_load_store::<TokenBucket, ManualClock>);
}

/// Demand within the capacity (1 + 1 of 3): the bound cannot notice a lost update here, only the
/// linearizability check (decisions and the final word) can.
#[test]
fn lost_update_under_the_bound_is_caught_by_linearizability() {
    let plan = Plan {
        quota: Quota::from_nanos(3, 3_000).unwrap(),
        prelude: vec![],
        threads: vec![vec![1], vec![1]],
        advancer: vec![],
    };
    let message = loom_finds::<Gcra>(plan, check_cell_load_store::<Gcra, ManualClock>);
    assert!(message.contains("not linearizable"), "{message}");
}

/// The table model catches a check-then-insert: the same scenario as
/// `keyed.rs::same_new_key_inserted_once`, on `RacyTable` (lookup, then plain stores into a free
/// slot): loom finds the interleaving where both threads insert key 7 (two entries, or one
/// admission overwritten).
#[test]
fn table_racy_insert() {
    use kova::TableFullPolicy;
    use kova_loom_tests::keyed::{check_table, racy, KeyOp, TablePlan};
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        check_table(
            TablePlan {
                quota: Quota::from_nanos(3, 3_000).unwrap(),
                max_keys: 4,
                policy: TableFullPolicy::default(),
                prelude: vec![],
                threads: vec![vec![KeyOp::Check(7, 1)], vec![KeyOp::Check(7, 2)]],
                final_keys: vec![7],
            },
            racy,
        )
    }));
    let payload = outcome.expect_err("loom found no violation in the racy table");
    let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("not linearizable"), "{message}");
}
