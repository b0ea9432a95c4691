//! Loom models of the keyed table (`crates/kova/src/keyed/`), on one shard with a still
//! `ManualClock` while the threads run. Each asserts, in every interleaving explored, that some
//! sequential order of the operations through `TableSpec` (a map of key -> GCRA word with the
//! table's documented table-full behaviour) reproduces every result, the final peeks and the final
//! `len()`. See `kova_loom_tests::keyed`.
//!
//! The table's epoch runs on loom's atomics here, so every model also interleaves the table's pins
//! and grace-period bookkeeping; the last two models make grace
//! periods end within the model (`KeyOp::AdvanceEpoch`) and check the reuse of lines and the
//! freeing of a replaced array, and assert that some executions really reclaimed them.
//!
//! GCRA at 3 units per 3 us (interval 1 us, burst 3).
#![cfg(kova_loom)]

use kova::keyed::TableFullPolicy;
use kova::Quota;
use kova_loom_tests::keyed::{
    array_free_plan, array_growth_plan, check_table, check_table_with_reuse, idle_sweep_plan, keyed,
    line_reuse_plan, quota_change_racing_a_check, KeyOp, TablePlan, TablePre,
};

fn quota() -> Quota {
    Quota::from_nanos(3, 3_000).unwrap()
}

/// Two threads check the same new key (costs 1 and 2): exactly one entry results and both
/// admissions land in it (remaining 0 at the end), whichever inserts first.
#[test]
fn same_new_key_inserted_once() {
    check_table(
        TablePlan {
            quota: quota(),
            max_keys: 4,
            policy: TableFullPolicy::default(),
            prelude: vec![],
            threads: vec![vec![KeyOp::Check(7, 1)], vec![KeyOp::Check(7, 2)]],
            final_keys: vec![7],
        },
        keyed,
    );
}

/// A check of a held key racing its removal: ordered before the removal (its admission forgotten
/// with the key) or after it (a fresh entry holding the admission); never an update to a line
/// that is gone.
#[test]
fn check_during_remove() {
    check_table(
        TablePlan {
            quota: quota(),
            max_keys: 4,
            policy: TableFullPolicy::default(),
            prelude: vec![TablePre::Op(KeyOp::Check(7, 2))],
            threads: vec![vec![KeyOp::Check(7, 1)], vec![KeyOp::Remove(7)]],
            final_keys: vec![7],
        },
        keyed,
    );
}

/// A check of an idle key racing `sweep_idle` (see `idle_sweep_plan`): the sweep freezes the
/// key's GCRA word before looking at it.
#[test]
fn check_during_idle_sweep() {
    check_table(idle_sweep_plan(), keyed);
}

/// The same with boxed cells (the boxed cell's own word frozen; `AnyAlgorithm`'s word tables).
#[test]
fn check_during_idle_sweep_boxed() {
    kova::loom_racy::boxed_cells(|| check_table(idle_sweep_plan(), keyed));
}

/// The same with the entry hidden instead (`BUSY`, and the check looks at it again after its
/// write): the sliding log's protocol, checked here on GCRA words.
#[test]
fn check_during_idle_sweep_hiding_entries() {
    kova::loom_racy::hiding_entries(|| check_table(idle_sweep_plan(), keyed));
}

/// A full table (one key) whose key is idle: a new key's insert reclaims it while another thread
/// checks it. Eviction closest to idle, so the new key always gets in; the old key's admission
/// is either evicted with it or redone on a new entry (which then evicts the newcomer).
///
/// FINDING (fixed in the table): before the fix loom found the new key DENIED with
/// `TableFullDenied` while the held key has 2 of 3 left (not actively limited, so evictable).
/// `make_room` sees key 7 idle, hides it (BUSY + fence; words are frozen now), re-reads it,
/// finds the racing check's update and keeps it (`unlink_if` returns false), then moves on without considering 7 as an
/// eviction victim; no victim, so the policy denies. Fix: when `unlink_if` keeps an entry, treat
/// it as the non-idle branch does (peek it, update `soonest` and `closest`). That fix is in.
#[test]
fn check_during_eviction_by_new_key() {
    check_table(eviction_by_new_key_plan(TableFullPolicy::EvictClosestToIdle), keyed);
}

/// The same with boxed cells.
#[test]
fn check_during_eviction_by_new_key_boxed() {
    kova::loom_racy::boxed_cells(|| {
        check_table(eviction_by_new_key_plan(TableFullPolicy::EvictClosestToIdle), keyed)
    });
}

/// The same with the entry hidden instead of the word frozen (the sliding log's protocol).
#[test]
fn check_during_eviction_by_new_key_hiding_entries() {
    kova::loom_racy::hiding_entries(|| {
        check_table(eviction_by_new_key_plan(TableFullPolicy::EvictClosestToIdle), keyed)
    });
}

/// `check_during_eviction_by_new_key` with `DenyNew`: the new key gets in only if it finds the
/// old key still idle, so the race decides between "7 admitted, 8 denied (TableFullDenied)" and
/// "8 in, 7 redone ...".
#[test]
fn check_during_idle_reclaim_deny_new() {
    check_table(eviction_by_new_key_plan(TableFullPolicy::DenyNew), keyed);
}

/// Reclamation, as loom can see it here: a check of key 7 through the line it found races the
/// removal of 7 and the re-insertion of 7 into a new line (the old one retired, not reused while
/// any check may hold it). The stale check's update lands in the retired line, ordered before the
/// removal; it never reaches the new entry, which starts fresh and takes cost 3 whole.
#[test]
fn check_racing_remove_and_reinsert() {
    check_table(
        TablePlan {
            quota: quota(),
            max_keys: 2,
            policy: TableFullPolicy::DenyNew,
            prelude: vec![TablePre::Op(KeyOp::Check(7, 2))],
            threads: vec![vec![KeyOp::Check(7, 1)], vec![KeyOp::Remove(7), KeyOp::Check(7, 3)]],
            final_keys: vec![7],
        },
        keyed,
    );
}

/// Slot reuse (reclamation model-checked): a check of key 7 races the removal of 7, the end of
/// its grace period (`advance_epoch`: two tries to advance the epoch) and the insert of a new key 8, which takes 7's
/// old line when the grace period ended before its lock (`Retired::collect` hands the line back;
/// the insert prefers a freed line), or a fresh one while the check still holds it back. In every
/// interleaving the check of 7 reads 7's key and cell only before the line is emptied (loom tracks
/// the line's cells: anything else is a causality violation), its decision is 7's (2 used of 3:
/// allowed with 0 left, or a fresh 7 after the removal), and key 8's state holds only its own unit.
/// The model asserts that some executions did reuse the line. `racy.rs` runs it without grace
/// periods.
#[test]
fn check_racing_remove_and_line_reuse_by_new_key() {
    let (plan, reclaim) = line_reuse_plan();
    check_table_with_reuse(plan, keyed, reclaim);
}

/// The same with boxed cells, where key 8 takes 7's very line in some executions.
#[test]
fn check_racing_remove_and_line_reuse_by_new_key_boxed() {
    let (plan, reclaim) = line_reuse_plan();
    kova::loom_racy::boxed_cells(|| check_table_with_reuse(plan, keyed, reclaim));
}

/// Array growth (reclamation of the old array): a check of key 1 probing the smallest array races
/// the insert that grows it, the removal of key 1, the end of the grace period and an insert
/// that frees the old array and may reuse key 1's place (see `array_growth_plan`). For inline cells (GCRA's)
/// growth is a rehash: it freezes each word it moves, so a check still on the old array
/// finds its key frozen and is redone on the new one; its words and keys are freed (the keys are
/// not dropped: they moved) after the grace period. The check is ordered before the removal or
/// redone on a fresh key 1, and the key that takes its place starts fresh.
#[test]
fn check_probing_old_array_during_growth_and_reuse() {
    let (plan, reclaim) = array_growth_plan();
    check_table_with_reuse(plan, keyed, reclaim);
}

/// The same with boxed cells: a boxed cell never moves, so a check through the old array updates the
/// same cell the new one names.
#[test]
fn check_probing_old_array_during_growth_and_reuse_boxed() {
    kova::loom_racy::boxed_cells(|| {
        let (plan, reclaim) = array_growth_plan();
        check_table_with_reuse(plan, keyed, reclaim)
    });
}

/// The old array freed while a check of key 1 may still
/// probe it (see `array_free_plan`): the free waits for the check's grace period.
#[test]
fn check_probing_old_array_while_it_is_freed() {
    let (plan, reclaim) = array_free_plan();
    check_table_with_reuse(plan, keyed, reclaim);
}

/// The same with boxed cells.
#[test]
fn check_probing_old_array_while_it_is_freed_boxed() {
    kova::loom_racy::boxed_cells(|| {
        let (plan, reclaim) = array_free_plan();
        check_table_with_reuse(plan, keyed, reclaim)
    });
}

/// A table of one idle key 7, checked by one thread while the other checks a new key 8.
fn eviction_by_new_key_plan(policy: TableFullPolicy) -> TablePlan {
    TablePlan {
        quota: quota(),
        max_keys: 1,
        policy,
        prelude: vec![TablePre::Op(KeyOp::Check(7, 1)), TablePre::Advance(3_000)],
        threads: vec![vec![KeyOp::Check(7, 1)], vec![KeyOp::Check(8, 1)]],
        final_keys: vec![7, 8],
    }
}

/// `set_quota` racing a check (see `quota_change_racing_a_check`): the old GCRA word is frozen
/// before its state is carried over, so the check counts exactly once, and both orders occur.
#[test]
fn check_during_quota_change() {
    let seen = quota_change_racing_a_check(false);
    assert!(seen.contains(&(1, 4)) && seen.contains(&(4, 4)), "{seen:?}");
}

/// The same with boxed cells: exactly once too.
#[test]
fn check_during_quota_change_boxed() {
    let seen = kova::loom_racy::boxed_cells(|| quota_change_racing_a_check(false));
    assert!(seen.contains(&(1, 4)) && seen.contains(&(4, 4)), "{seen:?}");
}

/// The same with the entry hidden instead (the sliding log's protocol): the check may count
/// twice, as `set_quota`'s docs say for the log, but is never lost.
#[test]
fn check_during_quota_change_hiding_entries() {
    let seen = kova::loom_racy::hiding_entries(|| quota_change_racing_a_check(true));
    assert!(seen.contains(&(1, 4)) && seen.contains(&(4, 4)), "{seen:?}");
}
