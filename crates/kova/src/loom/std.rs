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

/// `len` atomics, all 0, from memory the allocator hands over zeroed: large arrays come straight
/// from the system, whose pages are committed only as they are first written, so an array that
/// is mostly never touched costs little memory.
#[expect(
    clippy::expect_used,
    reason = "its one caller, the doorkeeper, is bounded by KeyedBuilder::MAX_DOOR_WORDS (128 MiB), far below isize::MAX bytes"
)]
pub(crate) fn zeroed_atomics(len: usize) -> Box<[atomic::AtomicU64]> {
    use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
    if len == 0 {
        return Box::new([]);
    }
    let layout = Layout::array::<atomic::AtomicU64>(len).expect("an array that fits in memory");
    // SAFETY: the layout is not zero-sized (len > 0).
    let ptr = unsafe { alloc_zeroed(layout) }.cast::<atomic::AtomicU64>();
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `ptr` is a live allocation of `layout`, an array of `len` `AtomicU64`s (the layout
    // `Box<[AtomicU64]>` frees with), and all zero bits are a valid `AtomicU64` (it has the bit
    // validity of `u64`); the box takes sole ownership of it.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) }
}
