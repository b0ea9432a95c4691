//! The one place the core takes its atomics (and the keyed table's slot cells) from.
//!
//! Under `--cfg kova_loom` these are loom's model-checked types, so the loom crate checks this
//! same code; otherwise they are std's. Nothing else in the crate imports `std::sync::atomic`.
//! The keyed table's epoch (`keyed/epoch.rs`) takes its atomics from here too, so loom sees its
//! grace periods.

#[cfg(kova_loom)]
pub(crate) use loom::sync::{atomic, Arc};

#[cfg(not(kova_loom))]
pub(crate) use std::sync::{atomic, Arc};

/// std's atomic even under loom, for process-wide statics (loom's atomics cannot be statics)
/// that no model reads: the coarse clock's time, kept by its upkeep thread.
pub(crate) use std::sync::atomic::AtomicU64 as StaticAtomicU64;

/// Loom's `UnsafeCell`, whose accesses loom tracks: a read racing a write (a slot reused while a
/// check still reads it) fails the model. The keyed table's slots use it under loom only; normal
/// builds keep std's.
#[cfg(kova_loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A 128-bit atomic for two limits of a composite checked in one compare-and-swap: portable-atomic's
/// (`cmpxchg16b` where the CPU has it, detected at run time; a lock elsewhere).
#[cfg(not(kova_loom))]
pub(crate) use portable_atomic::AtomicU128;

/// Loom has no 128-bit atomic: this stand-in makes each operation one step under loom's mutex,
/// so models explore every interleaving of whole operations (their atomicity, not the orderings
/// of a real 128-bit CAS, which is sequentially consistent on x86-64 anyway).
#[cfg(kova_loom)]
#[derive(Debug)]
pub(crate) struct AtomicU128(loom::sync::Mutex<u128>);

#[cfg(kova_loom)]
impl AtomicU128 {
    pub(crate) fn new(value: u128) -> Self {
        AtomicU128(loom::sync::Mutex::new(value))
    }

    pub(crate) fn load(&self, _: atomic::Ordering) -> u128 {
        *self.0.lock().unwrap()
    }

    pub(crate) fn compare_exchange_weak(
        &self,
        current: u128,
        new: u128,
        _: atomic::Ordering,
        _: atomic::Ordering,
    ) -> Result<u128, u128> {
        let mut value = self.0.lock().unwrap();
        if *value == current {
            *value = new;
            Ok(current)
        } else {
            Err(*value)
        }
    }
}
