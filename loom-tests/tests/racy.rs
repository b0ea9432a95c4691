//! The models can fail: the same scenarios as `word_cas.rs`, run on the deliberately racy variants
//! in `kova::loom_racy`, must each make loom find a violating interleaving.
//!
//! - `check_cell_load_store` (a plain store instead of the CAS): two threads spend the same units;
//!   the admitted total goes over the bound, or the final word misses an admission.
//! - `check_cell_stale_retry` (a CAS whose failure is retried with the stale word): the
//!   leaky-bucket #39 class; a concurrent admission is overwritten.
//!
//! - `table_*_without_grace_periods`: the keyed table's reclamation models (`keyed.rs`) on the real
//!   table with its grace periods switched off (`kova::loom_racy::without_grace_periods`): a
//!   retired line is emptied and refilled with another key while a check still reads it.
//! - `table_line_reuse_pinning_without_fence`: the same model with the checks' pins a plain
//!   store and no fence (`kova::loom_racy::pinning_without_fence`): the epoch advances past a
//!   check that already reads the line.
//!
//! Each expects loom to fail with the harness's messages: "over the bound" or "not
//! linearizable", or, for the reclamation models, loom's own "Causality violation" (a line's key
//! or cell accessed by two threads with no happens-before between them), so that a panic for
//! another reason (a bad plan, a loom limit) does not count as the model working.
#![cfg(kova_loom)]

use kova::loom_racy::{check_cell_load_store, check_cell_stale_retry, without_grace_periods};
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
/// line): loom finds the interleaving where both threads insert key 7 (two entries, or one
/// admission overwritten).
#[test]
fn table_racy_insert() {
    use kova::keyed::TableFullPolicy;
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

/// Set in the child process that runs a reclamation should-fail model.
const CHILD: &str = "KOVA_LOOM_RACY_CHILD";

/// Runs `model` (a table model expected to fail) in a child process (this test binary, running
/// only the test `name`), and returns the message of the child's first panic; fails the test if
/// the child passed, or panicked for a reason other than a causality violation or a
/// non-linearizable history.
///
/// A child process because such a failure cannot be caught in-process: the panic unwinds out of
/// loom with model threads still holding their epoch participants (thread-locals), whose
/// destructors then touch loom atomics outside the model, a panic during unwinding: the process
/// aborts (after printing loom's message).
fn table_model_fails_in_child(name: &str, model: impl FnOnce()) -> String {
    if std::env::var_os(CHILD).is_some() {
        // The child: a panic (and abort) here is the expected outcome; returning means loom found
        // nothing, which the parent reports.
        model();
        return String::new();
    }
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the child test process runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "loom explored every interleaving and found no violation:\n{}{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    let first_panic = stderr
        .split_once("panicked at ")
        .and_then(|(_, rest)| rest.lines().nth(1))
        .unwrap_or_default()
        .to_string();
    assert!(
        first_panic.contains("Causality violation") || first_panic.contains("not linearizable"),
        "loom failed for another reason ({}): {stderr}",
        output.status
    );
    eprintln!("loom caught it (child {}): {first_panic}", output.status);
    first_panic
}

/// Premature line reuse: `keyed.rs::check_racing_remove_and_line_reuse_by_new_key` on the real
/// table, but whatever a shard retired is handed back at its next lock, grace period or not. Key 8
/// then takes 7's line while the check of 7 may still read it: loom reports the key or cell
/// emptied and refilled under that read (and the check would land in 8's state).
#[test]
fn table_line_reuse_without_grace_periods() {
    use kova_loom_tests::keyed::{check_table_capped, keyed, line_reuse_plan};
    table_model_fails_in_child("table_line_reuse_without_grace_periods", || {
        let (plan, reclaim) = line_reuse_plan();
        without_grace_periods(|| check_table_capped(plan, keyed, reclaim.max_preemptions));
    });
}

/// The same with boxed cells, where key 8 takes 7's very line.
#[test]
fn table_line_reuse_without_grace_periods_boxed() {
    use kova_loom_tests::keyed::{check_table_capped, keyed, line_reuse_plan};
    table_model_fails_in_child("table_line_reuse_without_grace_periods_boxed", || {
        let (plan, reclaim) = line_reuse_plan();
        kova::loom_racy::boxed_cells(|| {
            without_grace_periods(|| check_table_capped(plan, keyed, reclaim.max_preemptions))
        });
    });
}

/// The same for `keyed.rs::check_probing_old_array_during_growth_and_reuse`: key 1's place reused
/// by a new key (and the old array freed) while the check of key 1 still probes the old array.
#[test]
fn table_index_growth_without_grace_periods() {
    use kova_loom_tests::keyed::{array_growth_plan, check_table_capped, keyed};
    table_model_fails_in_child("table_index_growth_without_grace_periods", || {
        let (plan, reclaim) = array_growth_plan();
        without_grace_periods(|| check_table_capped(plan, keyed, reclaim.max_preemptions));
    });
}

/// Premature array free: `keyed.rs::check_probing_old_array_while_it_is_freed` without grace
/// periods. The old array is freed at the next lock while the check of key 1 may still probe it:
/// loom reports the free (a tracked write to every entry under loom) racing the probe's load.
#[test]
fn table_index_free_without_grace_periods() {
    use kova_loom_tests::keyed::{array_free_plan, check_table_capped, keyed};
    table_model_fails_in_child("table_index_free_without_grace_periods", || {
        let (plan, reclaim) = array_free_plan();
        without_grace_periods(|| check_table_capped(plan, keyed, reclaim.max_preemptions));
    });
}

/// A lost update: `keyed.rs::check_during_idle_sweep`, but the sweep looks at key 7's word with a
/// plain load (no freeze) and the check does not look again after its CAS. Loom finds the check
/// admitted between the look and the unlink, its admission gone with the line.
#[test]
fn table_eviction_looking_without_freezing() {
    use kova_loom_tests::keyed::{check_table, idle_sweep_plan, keyed};
    let message = table_model_fails_in_child("table_eviction_looking_without_freezing", || {
        kova::loom_racy::looking_without_freezing(|| check_table(idle_sweep_plan(), keyed));
    });
    assert!(message.contains("not linearizable"), "{message}");
}

/// The same with boxed cells.
#[test]
fn table_eviction_looking_without_freezing_boxed() {
    use kova_loom_tests::keyed::{check_table, idle_sweep_plan, keyed};
    let message = table_model_fails_in_child("table_eviction_looking_without_freezing_boxed", || {
        kova::loom_racy::boxed_cells(|| {
            kova::loom_racy::looking_without_freezing(|| check_table(idle_sweep_plan(), keyed))
        });
    });
    assert!(message.contains("not linearizable"), "{message}");
}

/// A lost update in a quota change: `keyed.rs::check_during_quota_change`, but the change reads
/// the old word with a plain load (no freeze) and the check does not look again. Loom finds the
/// check admitted on the old line after the state was carried over, its admission lost.
#[test]
fn table_quota_change_looking_without_freezing() {
    use kova_loom_tests::keyed::quota_change_racing_a_check;
    let message = table_model_fails_in_child("table_quota_change_looking_without_freezing", || {
        kova::loom_racy::looking_without_freezing(|| quota_change_racing_a_check(false));
    });
    assert!(message.contains("ended with 5"), "{message}");
}

/// A pin without its fence: `keyed.rs::check_racing_remove_and_line_reuse_by_new_key`, but the
/// check pins its thread with a plain store and no `SeqCst` fence
/// (`kova::loom_racy::pinning_without_fence`). The lock holder's stamp and advance can then miss
/// the pin of the check of key 7, which already reads 7's line, and key 8 takes the line under
/// that read: loom reports the key or word refilled racing it.
#[test]
fn table_line_reuse_pinning_without_fence() {
    use kova_loom_tests::keyed::{check_table_capped, keyed, line_reuse_plan};
    let message = table_model_fails_in_child("table_line_reuse_pinning_without_fence", || {
        let (plan, reclaim) = line_reuse_plan();
        kova::loom_racy::pinning_without_fence(|| check_table_capped(plan, keyed, reclaim.max_preemptions));
    });
    assert!(message.contains("Causality violation"), "{message}");
}

/// A door word taken by load and store (`kova::loom_racy::door_without_cas`): in
/// `kova_loom_tests::door`'s model, key 0 and a key of the other shard both find the word empty,
/// and the later store erases key 0's entry, so its second check is admitted as a first one.
#[test]
fn door_claim_by_load_and_store() {
    use kova_loom_tests::door::first_checks_share_a_door_word;
    let message = table_model_fails_in_child("door_claim_by_load_and_store", || {
        kova::loom_racy::door_without_cas(|| {
            for other in 1..=4 {
                first_checks_share_a_door_word(other);
            }
        });
    });
    assert!(message.contains("not linearizable against door: key"), "{message}");
}

/// A door admission without the lock that stands whatever inserts ran meanwhile
/// (`kova::loom_racy::door_admission_unchecked`): in `kova_loom_tests::door`'s race of a first
/// check with an insert of its key, the insert reads the door before the claim and publishes a
/// fresh state, so key 0 is admitted four units of three.
#[test]
fn door_admission_without_checking_inserts() {
    use kova_loom_tests::door::door_admission_races_an_insert;
    let message = table_model_fails_in_child("door_admission_without_checking_inserts", || {
        kova::loom_racy::door_admission_unchecked(door_admission_races_an_insert);
    });
    assert!(message.contains("not linearizable against door: key"), "{message}");
}

/// Inserts that read a key's door entry without taking it (`kova::loom_racy::door_entry_kept`):
/// in `kova_loom_tests::door`'s race of a first check with an insert of its key, the insert
/// charges the admitted unit, the admission sees the insert's announcement, undoes its claim
/// and is charged again at the lock, so key 0 admits two units of three.
#[test]
fn door_entry_read_without_taking_it() {
    use kova_loom_tests::door::door_admission_races_an_insert;
    let message = table_model_fails_in_child("door_entry_read_without_taking_it", || {
        kova::loom_racy::door_entry_kept(door_admission_races_an_insert);
    });
    assert!(message.contains("not linearizable against door: key"), "{message}");
}

/// A door word's taken mark free for any key's claim at once (`kova::loom_racy::door_mark_free`):
/// another key's first check replaces it before the admission whose entry was taken undoes its
/// claim, and that admission is charged a second time at the lock.
#[test]
fn door_taken_mark_replaced_at_once() {
    use kova_loom_tests::door::door_admission_races_an_insert_then_another_key;
    let message = table_model_fails_in_child("door_taken_mark_replaced_at_once", || {
        kova::loom_racy::door_mark_free(|| door_admission_races_an_insert_then_another_key(1));
    });
    assert!(message.contains("not linearizable against door: key"), "{message}");
}

/// A demotion that reads the slot's central word without closing it
/// (`kova::loom_racy::hot_demote_without_close`): a check that leases a batch from the slot
/// after that read spends units the state written back into the line never counted.
#[test]
fn hot_demotion_without_closing_the_slot() {
    let message = table_model_fails_in_child("hot_demotion_without_closing_the_slot", || {
        kova::loom_racy::hot_demote_without_close(kova_loom_tests::hot::check_racing_demotion);
    });
    assert!(message.contains("hot: not linearizable"), "{message}");
}

/// A lost composite write: `limits.rs::a_keyed_composite_check_racing_a_sweep_is_never_lost`, but
/// a check's write on its key's boxed cell stands without looking at the key's line again. Loom
/// finds the sweep unlinking the key between the check's find and its write, the admitted unit
/// gone with the line.
#[test]
fn keyed_composite_write_taken_to_stand_unlooked() {
    let message = table_model_fails_in_child("keyed_composite_write_taken_to_stand_unlooked", || {
        kova::loom_racy::visit_without_relook(|| {
            kova_loom_tests::harness::model(kova_loom_tests::keyed_limits::check_racing_a_sweep)
        });
    });
    assert!(message.contains("the check's admitted unit was lost"), "{message}");
}
