//! A removed key's memory is freed or reused: no growth across a million insert/remove cycles,
//! measured by the table (`memory_bytes`) and by a counting allocator (keys are `String`s, and
//! the sliding log's cells own rings, so a leaked key or cell shows up in the live heap).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use kova::{Algorithm, Gcra, Keyed, ManualClock, Quota, SlidingWindowLog};

static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: forwards every call to `System` unchanged; the counter is a plain atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a statistic.
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as for `dealloc`, with a valid new size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Slack for crossbeam-epoch's bags of deferred tokens and the grace-period reserve.
const SLACK: isize = 1 << 20;

fn cycles<A: Algorithm>(quota: Quota, cycles: u64) {
    let before = live();
    let keyed = Keyed::<String, A, _>::builder_with_clock(quota, ManualClock::new())
        .shards(4)
        .max_keys(10_000)
        .build()
        .unwrap();
    for i in 0..1_000 {
        keyed.check(&format!("resident-{i}"));
    }
    let baseline_reported = keyed.memory_bytes() as isize;
    let baseline_live = live();
    for i in 0..cycles {
        let key = format!("client-{i}");
        assert!(keyed.check(&key).is_allowed());
        assert!(keyed.remove(&key));
    }
    assert_eq!(keyed.len(), 1_000);
    let reported = keyed.memory_bytes() as isize - baseline_reported;
    let grown = live() - baseline_live;
    // A million leaked keys would be tens of megabytes (and the log's rings more).
    assert!(reported <= SLACK, "{} reports {reported} bytes more", A::name_of());
    assert!(grown <= SLACK, "{}: the heap grew by {grown} bytes", A::name_of());
    drop(keyed);
    let left = live() - before;
    assert!(left <= SLACK, "{}: {left} bytes left after dropping the table", A::name_of());
    println!(
        "{}: {cycles} cycles, reported +{reported} B, heap +{grown} B, after drop +{left} B",
        A::name_of()
    );
}

/// The algorithm's name without an instance.
trait NameOf {
    fn name_of() -> &'static str;
}

impl<A: Algorithm> NameOf for A {
    fn name_of() -> &'static str {
        std::any::type_name::<A>().rsplit("::").next().unwrap_or("?")
    }
}

/// One test (the allocator counts the whole process).
#[test]
fn a_million_insert_remove_cycles_leak_nothing() {
    cycles::<Gcra>(Quota::per_second(10).unwrap(), 1_000_000);
    // Each log cell owns a ring of 16 bytes per unit: 1.6 KB per key here.
    cycles::<SlidingWindowLog>(Quota::per_second(100).unwrap(), 200_000);
}
