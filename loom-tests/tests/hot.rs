//! Loom model of the keyed table's hot keys (`kova_loom_tests::hot`); its should-fail twin, a
//! demotion that does not close the slot, is `racy.rs`'s `hot_demotion_without_closing_the_slot`.
#![cfg(kova_loom)]

#[test]
fn check_of_a_striped_key_racing_its_demotion() {
    kova_loom_tests::hot::check_racing_demotion();
}
