//! Heap accounting: a global allocator wrapper that counts live bytes while switched on.
//!
//! The report binary installs [`CountingAlloc`] as its global allocator and switches counting on
//! only while it fills a table, so the measured phases pay one relaxed load per allocation and
//! nothing else does. Bytes are those requested (`Layout::size`), not the allocator's own
//! per-block overhead.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The system allocator, counting live bytes while [`measure_heap`] runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

fn track(delta: isize) {
    // Relaxed throughout: the counter is a statistic read after the measured phase has joined,
    // nothing is published through it.
    if ENABLED.load(Ordering::Relaxed) {
        LIVE.fetch_add(delta, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s
// guarantees are ours; the counting touches only two atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract (non-zero size), which we pass on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            track(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            track(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator (hence `System`) with
        // `layout`.
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`/`layout` came from us and `new_size` is valid.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        new
    }
}

/// Runs `f` with counting on and returns its result and the net heap growth in bytes. Only
/// meaningful when [`CountingAlloc`] is the global allocator (the report binary); elsewhere the
/// growth reads 0. Other threads allocating meanwhile are counted too, so call it when nothing
/// else runs.
pub fn measure_heap<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let before = LIVE.load(Ordering::Relaxed);
    ENABLED.store(true, Ordering::Relaxed);
    let value = f();
    ENABLED.store(false, Ordering::Relaxed);
    (value, LIVE.load(Ordering::Relaxed) - before)
}

/// Whether the counting allocator is installed: allocates a probe and looks for it.
pub fn counting_installed() -> bool {
    let (probe, grown) = measure_heap(|| std::hint::black_box(vec![0u8; 4096]));
    drop(probe);
    grown >= 4096
}
