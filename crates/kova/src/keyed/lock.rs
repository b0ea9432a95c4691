//! The shards' insert lock: std's mutex, or loom's under `cfg(kova_loom)` (a std mutex held across
//! a loom switch point would block loom's single OS thread).
//!
//! This belongs in `crate::sync` beside the atomics; it lives here until that file gains a
//! `Mutex` re-export.

#[cfg(kova_loom)]
pub(super) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(kova_loom))]
pub(super) use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, ignoring poisoning: the table's invariants hold between any two statements of
/// a locked section that can panic (a user's `Hash`/`Eq`/`Clone`), so a poisoned lock is usable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
