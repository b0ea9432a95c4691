//! Loom models of the keyed table's doorkeeper (`kova_loom_tests::door`); their should-fail
//! twins, the door taking its word by load and store, an admission without the lock that
//! ignores the shard's insert count, and inserts that read a door entry without taking it, are
//! `racy.rs`'s `door_claim_by_load_and_store`, `door_admission_without_checking_inserts`,
//! `door_entry_read_without_taking_it` and `door_taken_mark_replaced_at_once`. Beside them, a
//! reset racing a check with no door, and a canary of the loom bug it met.
#![cfg(kova_loom)]

use kova_loom_tests::door::{
    a_reset_on_another_thread_after_a_check, door_admission_races_an_insert,
    door_admission_races_an_insert_and_a_reset, door_admission_races_an_insert_then_another_key,
    first_checks_share_a_door_word, store_slips_into_a_racing_cas,
};

/// Keys 1..=4 beside key 0: with two shards, at least one lands in the other shard.
#[test]
fn first_checks_of_two_keys_share_a_door_word() {
    for other in 1..=4 {
        first_checks_share_a_door_word(other);
    }
}

/// A first check admitted at the door without the lock, racing an insert of its key.
#[test]
fn a_door_admission_races_an_insert_of_its_key() {
    door_admission_races_an_insert();
}

/// A first check admitted at the door without the lock, racing an insert of its key and then a
/// first check of another key sharing the door's word.
#[test]
fn a_door_admission_races_an_insert_then_another_keys_first_check() {
    door_admission_races_an_insert_then_another_key(1);
}

/// A first check admitted at the door without the lock, racing an insert of its key and then
/// the key's reset (which forgets the door's entry): the regression model of `Claim::undo`
/// (with an undo that lets the admission stand whenever the entry is gone, loom finds the
/// lincheck finding's history here: the first check's unit charged nowhere).
#[test]
fn a_door_admission_races_an_insert_and_a_reset_of_its_key() {
    door_admission_races_an_insert_and_a_reset();
}

/// A reset racing a check of its key on another thread, then a check of the whole burst. With
/// the reset a plain store, loom 0.7 finds the reset lost (the last check denied), an outcome
/// the memory model forbids (tokio-rs/loom#254; see `reset_cell` in `kova::algorithm::word`
/// and the next test).
#[test]
fn a_reset_on_another_thread_after_a_check_of_its_key() {
    a_reset_on_another_thread_after_a_check();
}

/// Not a model of kova: a canary for the loom bug that `reset_cell`'s swap works around. A store
/// racing a successful compare-and-swap must land after it in the modification order (the CAS
/// read the value before the store's), so a load after both threads joined cannot read the
/// CAS's value; loom 0.7 lets it (tokio-rs/loom#254). When this fails, loom has fixed it, and a
/// reset may go back to a plain store.
#[test]
fn loom_still_lets_a_store_slip_into_a_racing_compare_and_swap() {
    assert!(
        store_slips_into_a_racing_cas(),
        "loom no longer lets a store slip into a racing compare-and-swap: reset_cell may store"
    );
}
