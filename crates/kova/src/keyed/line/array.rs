//! The probed array of a shard (`line/shard.rs`): lines, each a key beside its word, in one
//! allocation aligned for the cache and, when large, for huge pages.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use super::super::quotas::{QuotaId, DEFAULT_ID};
use super::super::reclaim::{Reclaimable, RetiredPlace};
use super::super::word::VACANT;
use super::cell;
use crate::loom::atomic::{AtomicPtr, AtomicU16, Ordering};
use crate::loom::AtomicAddressWord;
use crate::loom::UnsafeCell;
use crate::Algorithm;

/// A pointer to read `cell`'s contents through. Under loom the access is recorded: loom fails
/// the model if a read and a write of the same key (a check reading it, the lock holder writing
/// or dropping it) are not ordered by happens-before, as when a line is reused before its grace
/// period ended.
#[inline(always)]
pub(in crate::keyed) fn read<T>(cell: &UnsafeCell<T>) -> *const T {
    cell.with(|ptr| ptr)
}

/// As [`read`], for a write.
#[inline(always)]
pub(in crate::keyed) fn write<T>(cell: &UnsafeCell<T>) -> *mut T {
    cell.with_mut(|ptr| ptr)
}

/// A key and its state word.
pub(in crate::keyed) struct Line<K> {
    pub(in crate::keyed) word: AtomicAddressWord,
    pub(in crate::keyed) key: UnsafeCell<MaybeUninit<K>>,
}

impl<K> Line<K> {
    fn vacant() -> Self {
        Line { word: AtomicAddressWord::new(VACANT), key: UnsafeCell::new(MaybeUninit::uninit()) }
    }

    /// The key.
    ///
    /// # Safety
    /// The key is written and stays so while the reference lives: the caller loaded a word that
    /// is not `VACANT` or `TOMB` (Acquire) while pinned and stays pinned, or holds the lock and
    /// the line is held.
    #[inline(always)]
    pub(in crate::keyed) unsafe fn key(&self) -> &K {
        // SAFETY: written (caller's contract); only shared references exist until a grace period
        // after the line's removal, which the caller's pin or lock rules out.
        unsafe { (*read(&self.key)).assume_init_ref() }
    }
}

/// Arrays are whole multiples of this many lines, and start on a multiple of
/// [`ARRAY_ALIGN`] bytes.
pub(in crate::keyed) const GROUP_LINES: usize = 8;
/// 128 bytes: the two cache lines that the adjacent-line prefetcher pulls in together (eight
/// lines of a `u64` key). Lines of two arrays (two shards) never share them, so two hot keys in
/// two shards never slow each other down (false sharing); two in one array do only when their
/// lines are that close.
const ARRAY_ALIGN: usize = 128;

/// The probed array, with the quota ids of its keys that have their own.
pub(in crate::keyed) struct LineArray<K> {
    /// `len` lines, allocated with [`LineArray::layout`].
    pub(in crate::keyed) lines: NonNull<Line<K>>,
    len: usize,
    /// Null, or one id per line (allocated when a key with its own quota first lands here).
    ids: AtomicPtr<AtomicU16>,
}

/// Where a probe for `hash` starts in an array of `len` lines: the hash's top bits scaled to
/// `len` (a multiply, so that any length works). The shard was chosen by the low bits.
#[inline(always)]
pub(in crate::keyed) fn home(hash: u64, len: usize) -> usize {
    ((u128::from(hash) * len as u128) >> 64) as usize
}

/// Arrays of at least this many bytes start on a multiple of it and ask the kernel for huge
/// pages over their whole 2 MiB pages ([`advise_huge_pages`]): a check of a large table misses
/// the cache and, with 4 KiB pages, the TLB too, whose page walk (two-dimensional in a virtual
/// machine) adds to the miss; a huge page takes the TLB miss away. Only whole 2 MiB pages are
/// advised, so a shard's array gains in proportion to its size.
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel (Linux, where transparent huge pages are `madvise` or `always`) to back the
/// whole 2 MiB pages of the `bytes` bytes at `start` (aligned to [`HUGE_PAGE`]) with huge pages.
/// A hint: refused or unsupported, the array keeps its 4 KiB pages. The tail beyond the last
/// whole huge page is left out, so that the pages resident stay the array's own bytes (what
/// `memory_bytes` counts).
#[cfg(all(target_os = "linux", not(kova_loom), not(miri)))]
fn advise_huge_pages(start: *mut u8, bytes: usize) {
    let whole = bytes / HUGE_PAGE * HUGE_PAGE;
    if whole > 0 {
        // SAFETY: `[start, start + whole)` lies inside one allocation that this array owns and
        // has not used yet; `start` is page-aligned (a multiple of `HUGE_PAGE`). `madvise` with
        // `MADV_HUGEPAGE` changes no contents, only how the kernel backs them; its result is
        // ignored (a hint).
        let _ = unsafe { libc::madvise(start.cast(), whole, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(all(target_os = "linux", not(kova_loom), not(miri))))]
fn advise_huge_pages(_start: *mut u8, _bytes: usize) {}

impl<K> LineArray<K> {
    /// The allocation of `len` lines.
    #[expect(
        clippy::expect_used,
        reason = "len is at most a shard's lines for KeyedBuilder::MAX_KEYS, far below isize::MAX bytes"
    )]
    fn layout(len: usize) -> Layout {
        let bytes = std::mem::size_of::<Line<K>>().saturating_mul(len);
        let align = if bytes >= HUGE_PAGE { HUGE_PAGE } else { ARRAY_ALIGN };
        Layout::array::<Line<K>>(len)
            .and_then(|layout| layout.align_to(align))
            .expect("a line array fits memory")
    }

    fn new(len: usize) -> Box<Self> {
        debug_assert!(len > 0 && len % GROUP_LINES == 0, "{len} lines");
        let layout = Self::layout(len);
        // SAFETY: `layout` has a non-zero size (`len > 0`, a line is not zero-sized: it holds a
        // word).
        let Some(lines) = NonNull::new(unsafe { alloc(layout) }.cast::<Line<K>>()) else {
            handle_alloc_error(layout)
        };
        if layout.align() == HUGE_PAGE {
            advise_huge_pages(lines.as_ptr().cast(), layout.size());
        }
        for pos in 0..len {
            // SAFETY: `pos < len`, inside the allocation, written once before any read.
            unsafe { lines.add(pos).write(Line::vacant()) };
        }
        Box::new(LineArray { lines, len, ids: AtomicPtr::new(ptr::null_mut()) })
    }

    /// Lines (a multiple of [`GROUP_LINES`]).
    #[inline(always)]
    pub(in crate::keyed) fn len(&self) -> usize {
        self.len
    }

    /// Line `pos`.
    #[inline(always)]
    pub(in crate::keyed) fn line(&self, pos: usize) -> &Line<K> {
        assert!(pos < self.len, "line {pos} of {}", self.len);
        // SAFETY: checked just above.
        unsafe { self.line_unchecked(pos) }
    }

    /// Line `pos`, unchecked.
    ///
    /// # Safety
    /// `pos < self.len()`.
    #[inline(always)]
    pub(in crate::keyed) unsafe fn line_unchecked(&self, pos: usize) -> &Line<K> {
        // SAFETY: `len` initialised lines from `lines`, alive with the array; `pos < len` by the
        // contract.
        unsafe { self.lines.add(pos).as_ref() }
    }

    pub(in crate::keyed) fn bytes_for(len: usize, with_ids: bool) -> usize {
        let ids = if with_ids { len * std::mem::size_of::<AtomicU16>() } else { 0 };
        std::mem::size_of::<Self>() + Self::layout(len).size() + ids
    }

    pub(in crate::keyed) fn bytes(&self) -> usize {
        // Relaxed: only the lock holder (or the owner of a retired array) sets it.
        Self::bytes_for(self.len(), !self.ids.load(Ordering::Relaxed).is_null())
    }

    #[inline(always)]
    pub(in crate::keyed) fn next(&self, pos: usize) -> usize {
        if pos + 1 == self.len() {
            0
        } else {
            pos + 1
        }
    }

    pub(in crate::keyed) fn prev(&self, pos: usize) -> usize {
        if pos == 0 {
            self.len() - 1
        } else {
            pos - 1
        }
    }

    /// The quota id of the held line `pos`.
    #[inline(always)]
    pub(in crate::keyed) fn quota_at(&self, pos: usize) -> QuotaId {
        // Acquire: pairs with the Release store of the pointer, after its ids were initialised.
        let ids = self.ids.load(Ordering::Acquire);
        if ids.is_null() {
            return DEFAULT_ID;
        }
        // SAFETY: one id per line, freed only with the array. Relaxed: the id was stored before
        // the word the caller loaded with Acquire (or under the lock the caller holds).
        unsafe { &*ids.add(pos) }.load(Ordering::Relaxed)
    }

    /// Sets the id of line `pos` (lock held, before the line's word is published).
    pub(in crate::keyed) fn set_quota(&self, pos: usize, id: QuotaId) {
        let mut ids = self.ids.load(Ordering::Relaxed);
        if ids.is_null() {
            if id == DEFAULT_ID {
                return;
            }
            let fresh: Box<[AtomicU16]> = (0..self.len()).map(|_| AtomicU16::new(DEFAULT_ID)).collect();
            ids = Box::into_raw(fresh).cast::<AtomicU16>();
            // Release: a check that loads the pointer (Acquire) sees the ids initialised.
            self.ids.store(ids, Ordering::Release);
        }
        // SAFETY: one id per line, alive with the array. Relaxed: published by the word's
        // Release store that follows.
        unsafe { &*ids.add(pos) }.store(id, Ordering::Relaxed);
    }
}

impl<K> Drop for LineArray<K> {
    /// Frees the lines (their keys are dropped, or moved, by the shard) and the ids.
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other thread.
        let ids = self.ids.load(Ordering::Relaxed);
        if !ids.is_null() {
            // SAFETY: made by `Box::into_raw` of a boxed slice of one id per line.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(ids, self.len())) });
        }
        // Under loom, freeing is a tracked write to every line: a check still probing an array
        // freed too early is then a causality violation loom reports.
        #[cfg(kova_loom)]
        for pos in 0..self.len {
            // SAFETY: `pos < len`; `&mut self`: no other reference to the lines.
            let line = unsafe { self.lines.add(pos).as_mut() };
            line.word.with_mut();
            line.key.with_mut(|_| ());
        }
        // SAFETY: the lines were allocated with this layout and initialised in `new`; `&mut
        // self`: nothing else uses them. Dropping a line drops its word, never its key (the
        // shard drops or moves keys itself).
        unsafe {
            ptr::drop_in_place(ptr::slice_from_raw_parts_mut(self.lines.as_ptr(), self.len));
            dealloc(self.lines.as_ptr().cast(), Self::layout(self.len));
        }
    }
}

/// An array owned through the raw pointer `Box::into_raw` gave, so that the owner's accesses
/// and the checks' (through the shard's view, a copy of that pointer) share one provenance: a
/// `Box` would assert unique access each time it is moved, while checks may still be reading.
pub(in crate::keyed) struct OwnedArray<K>(NonNull<LineArray<K>>);

impl<K> OwnedArray<K> {
    pub(in crate::keyed) fn new(len: usize) -> Self {
        OwnedArray(NonNull::from(Box::leak(LineArray::new(len))))
    }

    /// The pointer checks load.
    pub(in crate::keyed) fn as_ptr(&self) -> *mut LineArray<K> {
        self.0.as_ptr()
    }
}

impl<K> std::ops::Deref for OwnedArray<K> {
    type Target = LineArray<K>;

    fn deref(&self) -> &LineArray<K> {
        // SAFETY: allocated by `new`, freed only by `drop`; only shared references are made.
        unsafe { self.0.as_ref() }
    }
}

impl<K> Drop for OwnedArray<K> {
    fn drop(&mut self) {
        // SAFETY: made from a `Box` in `new`; dropped once, when no check can reach it (the
        // shard's own drop, or a replaced array after its grace period).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A replaced array waiting for its grace period, with the lines whose keys (and boxed cells)
/// it still owns: tombstones not yet reclaimed when it was replaced, dropped with it.
pub(in crate::keyed) struct RetiredLines<K, A: Algorithm> {
    array: OwnedArray<K>,
    doomed: Vec<RetiredPlace>,
    /// Bytes of the doomed lines' boxed cells.
    cell_bytes: usize,
    _algorithm: PhantomData<A>,
}

impl<K, A: Algorithm> RetiredLines<K, A> {
    pub(in crate::keyed) fn new(array: OwnedArray<K>, doomed: Vec<RetiredPlace>) -> Self {
        let cell_bytes = doomed.iter().map(|place| cell::held_bytes::<A>(place.heap)).sum();
        RetiredLines { array, doomed, cell_bytes, _algorithm: PhantomData }
    }
}

impl<K, A: Algorithm> Reclaimable for RetiredLines<K, A> {
    fn bytes(&self) -> usize {
        self.array.bytes() + self.doomed.capacity() * std::mem::size_of::<RetiredPlace>() + self.cell_bytes
    }
}

impl<K, A: Algorithm> Drop for RetiredLines<K, A> {
    fn drop(&mut self) {
        for place in &self.doomed {
            // SAFETY: its grace period has ended (it is dropped by `Retired::collect`, or with the
            // shard), so no check reads the key or the cell; the key was written and not moved (a
            // tombstone's), and the cell is the one its word held.
            unsafe {
                ptr::drop_in_place((*write(&self.array.line(place.line as usize).key)).as_mut_ptr());
                cell::drop_cell::<A>(place.cell);
            }
        }
    }
}

/// The fewest lines of an array whose checks prefetch their line (256 KiB of `u64` keys: a
/// table of a few such shards no longer fits a core's L2 cache).
pub(in crate::keyed) const PREFETCH_LINES: usize = 1 << 14;

/// A check of a large array also prefetches the line this far past its home: for `u64` keys
/// (four lines a cache line) that fetches the next cache line whenever a probe of up to four
/// lines could run into it, at once rather than after the first miss (the probe's next load
/// depends on the first). Not further: a line two cache lines on is seldom reached.
pub(in crate::keyed) const PROBE_AHEAD: usize = 3;

#[cfg(test)]
mod tests {
    use super::super::sizing::lines_for;
    use super::*;

    #[test]
    fn arrays_are_whole_groups_on_128_byte_boundaries() {
        for keys in [0, 1, 7, 100, 1_000, 12_345] {
            let len = lines_for(keys);
            assert_eq!(len % GROUP_LINES, 0, "{keys} keys");
            let array = OwnedArray::<u64>::new(len);
            assert_eq!(array.len(), len);
            assert_eq!(array.lines.as_ptr().addr() % ARRAY_ALIGN, 0, "{len} lines");
            assert!((0..len).all(|pos| array.line(pos).word.load(Ordering::Relaxed) == VACANT));
        }
        assert_eq!(std::mem::size_of::<Line<u64>>() * GROUP_LINES, ARRAY_ALIGN);
        // From 2 MiB up an array starts on a huge page (its whole huge pages are advised).
        let huge = HUGE_PAGE / std::mem::size_of::<Line<u64>>();
        let lens: &[usize] = if cfg!(miri) { &[huge] } else { &[huge - GROUP_LINES, huge, huge + huge / 2] };
        for &len in lens {
            let array = OwnedArray::<u64>::new(len);
            let align = if len >= huge { HUGE_PAGE } else { ARRAY_ALIGN };
            assert_eq!(array.lines.as_ptr().addr() % align, 0, "{len} lines");
            assert_eq!(LineArray::<u64>::layout(len).size(), len * std::mem::size_of::<Line<u64>>());
        }
    }
}
