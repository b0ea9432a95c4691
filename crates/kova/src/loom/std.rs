//! std's types, in the shapes loom's take.

pub(crate) use std::sync::{atomic, Arc, Mutex, MutexGuard};
pub(crate) use std::thread_local;

/// `std::cell::UnsafeCell` with loom's access API: `with` for a read, `with_mut` for a write,
/// which loom records (a read racing a write fails the model) and std only hands through.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

impl<T> UnsafeCell<T> {
    pub(crate) const fn new(data: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(data))
    }

    /// Runs `f` with a pointer to read the contents through.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer to write the contents through.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// A 128-bit atomic for two limits of a composite checked in one compare-and-swap:
/// portable-atomic's (`cmpxchg16b` where the CPU has it, detected at run time; a lock elsewhere).
pub(crate) use portable_atomic::AtomicU128;
