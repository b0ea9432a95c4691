//! Hints to the CPU about the line a check is about to read: to load it early, and when to ask
//! for it in exclusive state.
//!
//! A check of a held key reads its line (to compare the key) and then writes the line's word
//! (the compare-and-swap of an admission). When another core wrote that line last, the read
//! brings a shared copy and the write must then take it from every other cache: two transfers
//! for one check, and between them the other core may read it back, so that both fail their
//! compare-and-swap in turn. Asking for the line in exclusive state before the check reads it
//! (`prefetchw`) makes it one transfer, and the check then reads, decides and writes the line
//! while its core holds it. A thread asks so for its next [`CONTENTION_ECHO`] checks after one
//! whose compare-and-swap another thread's write made fail; a table whose keys no two threads
//! write at once never pays for it.

use std::cell::Cell;

/// Asks the CPU to start loading the line at `line`; never faults, whatever the address.
#[inline(always)]
pub(in crate::keyed) fn prefetch_line<T>(line: *const T) {
    #[cfg(all(target_arch = "x86_64", not(kova_loom)))]
    // SAFETY: a prefetch is a hint: it reads no memory the program can observe and does not
    // fault on any address (SSE, part of the x86_64 baseline).
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(kova_loom))))]
    let _ = line;
}

/// Asks the CPU to start loading the line at `line` in exclusive state, as a write would;
/// never faults, whatever the address. A CPU without the instruction (`PRFCHW`) runs it as a
/// no-op: its encoding is a reserved no-op on every x86-64.
#[inline(always)]
pub(in crate::keyed) fn prefetch_line_for_write<T>(line: *const T) {
    // Not under Miri, which runs no inline assembly.
    #[cfg(all(target_arch = "x86_64", not(kova_loom), not(miri)))]
    // SAFETY: a prefetch is a hint: it reads and writes no memory the program can observe, does
    // not fault on any address, and leaves the flags and the stack alone (as declared).
    // `_mm_prefetch`'s exclusive hint compiles to a plain prefetch unless the whole crate is
    // built for `prfchw`, hence the instruction itself.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) line, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(all(target_arch = "x86_64", not(kova_loom), not(miri))))]
    let _ = line;
}

std::thread_local! {
    /// How many of this thread's next checks ask for their line in exclusive state: a hint, so
    /// a thread's own count, never shared, for every table it checks.
    static RECENT_CONTENTION: Cell<u8> = const { Cell::new(0) };
}

/// How many checks after a contended one ask for their line exclusively: enough that two
/// threads on one key keep asking (a compare-and-swap fails every few checks there), few
/// enough that a thread that met contention once soon stops.
pub(in crate::keyed) const CONTENTION_ECHO: u8 = 64;

/// Notes that another thread's write made this thread's compare-and-swap fail.
#[inline]
pub(in crate::keyed) fn note_contention() {
    RECENT_CONTENTION.set(CONTENTION_ECHO);
}

/// Whether this check should ask for its line exclusively (counting it down).
#[inline(always)]
pub(in crate::keyed) fn contended_recently() -> bool {
    // Never under loom: the count is the OS thread's, kept across loom's runs of a model, and the
    // hint loads it gates are loom atomics, so a model would not run the same way twice.
    if cfg!(kova_loom) {
        return false;
    }
    let recent = RECENT_CONTENTION.get();
    if recent == 0 {
        return false;
    }
    RECENT_CONTENTION.set(recent - 1);
    true
}

#[cfg(all(test, not(kova_loom)))]
mod tests {
    use super::*;

    #[test]
    fn contention_makes_the_next_checks_ask_for_their_line_and_then_stops() {
        RECENT_CONTENTION.set(0);
        assert!(!contended_recently(), "no contention noted");
        note_contention();
        for _ in 0..CONTENTION_ECHO {
            assert!(contended_recently());
        }
        assert!(!contended_recently(), "the echo has run out");
        // Another thread's count is its own.
        note_contention();
        std::thread::spawn(|| assert!(!contended_recently())).join().unwrap();
    }

    #[test]
    fn prefetches_take_any_address() {
        let word = 7u64;
        prefetch_line(&word);
        prefetch_line_for_write(&word);
        // Never dereferenced: a hint on a dangling or null address does not fault.
        prefetch_line(std::ptr::null::<u64>());
        prefetch_line_for_write(std::ptr::null::<u64>().wrapping_add(1 << 40));
        assert_eq!(word, 7);
    }
}
