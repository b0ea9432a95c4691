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
