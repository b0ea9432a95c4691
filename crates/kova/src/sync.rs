//! The one place the core takes its atomics from.
//!
//! Under `--cfg kova_loom` these are loom's model-checked types, so the loom crate checks this
//! same code; otherwise they are std's. Nothing else in the crate imports `std::sync::atomic`.

#[cfg(kova_loom)]
pub(crate) use loom::sync::{atomic, Arc};

#[cfg(not(kova_loom))]
pub(crate) use std::sync::{atomic, Arc};
