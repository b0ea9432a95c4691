//! How the table's operations pin their thread: crossbeam-epoch's default collector, through a
//! thread-local handle of kova's own, so that pinning is inlined into every check.
//!
//! `crossbeam_epoch::pin()` reaches the thread's handle through a function that the compiler may
//! keep out of line, and did in `kova-bench`, where the tables of five algorithms each call it.
//! The handle here belongs to the same default collector: guards from either kind of pin hold
//! back the same grace periods. Under loom, crossbeam's own pin (the model's thread-locals are
//! loom's).

use crossbeam_epoch::Guard;

#[cfg(not(kova_loom))]
std::thread_local! {
    /// This thread's participant in crossbeam-epoch's default collector, kova's own.
    static HANDLE: crossbeam_epoch::LocalHandle = crossbeam_epoch::default_collector().register();
}

/// Pins the current thread.
#[cfg(not(kova_loom))]
#[inline(always)]
pub(super) fn pin() -> Guard {
    // While the thread's locals are being destroyed, crossbeam's pin (a handle for the moment).
    HANDLE.try_with(crossbeam_epoch::LocalHandle::pin).unwrap_or_else(|_| crossbeam_epoch::pin())
}

/// Pins the current thread.
#[cfg(kova_loom)]
#[inline(always)]
pub(super) fn pin() -> Guard {
    crossbeam_epoch::pin()
}
