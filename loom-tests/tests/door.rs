//! Loom model of the keyed table's doorkeeper (`kova_loom_tests::door`); its should-fail twin,
//! the door taking its word by load and store, is `racy.rs`'s `door_claim_by_load_and_store`.
#![cfg(kova_loom)]

use kova_loom_tests::door::first_checks_share_a_door_word;

/// Keys 1..=4 beside key 0: with two shards, at least one lands in the other shard.
#[test]
fn first_checks_of_two_keys_share_a_door_word() {
    for other in 1..=4 {
        first_checks_share_a_door_word(other);
    }
}
