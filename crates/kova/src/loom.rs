//! The one place the core takes its atomics, cells, mutex and thread-locals from: std's, or
//! loom's model-checked ones under `--cfg kova_loom` (tokio's `src/loom` shape), so the loom
//! models check this same code. Nothing else in the crate imports `std::sync::atomic`, names
//! `std::cell::UnsafeCell` for shared state, or reads `cfg(kova_loom)` in a hot function.
//!
//! - `address_word`: a word that holds plain bits or an address with its provenance (a keyed
//!   table's line word).
//! - [`faults`]: the switches the should-fail models turn on (`kova::loom_racy`), as functions
//!   that are constants outside loom.

mod address_word;
pub(crate) mod faults;
#[cfg(kova_loom)]
mod mocked;
#[cfg(not(kova_loom))]
mod std;

pub(crate) use self::address_word::{AddressWord, AtomicAddressWord};
#[cfg(kova_loom)]
pub(crate) use self::mocked::*;
#[cfg(not(kova_loom))]
pub(crate) use self::std::*;

/// std's atomics even under loom, for process-wide statics (loom's atomics cannot be statics)
/// that no model reads: the coarse clock's time, kept by its upkeep thread.
pub(crate) use ::std::sync::atomic::{AtomicBool as StaticAtomicBool, AtomicU64 as StaticAtomicU64};

/// A randomly seeded hasher, so that no one can choose keys that collide (a keyed table's
/// shards and lines, a sketch's cells); fixed seeds under loom, whose models must be
/// deterministic.
pub(crate) fn new_hasher() -> ahash::RandomState {
    if cfg!(kova_loom) {
        ahash::RandomState::with_seeds(0x243F_6A88, 0x85A3_08D3, 0x1319_8A2E, 0x0370_7344)
    } else {
        ahash::RandomState::new()
    }
}
