//! A shard of the single-word algorithms: each key sits beside its state word in the probed
//! array itself (a "line"), so a check of a held key touches one cache line of the table.
//!
//! # Protocol
//! A line's word is the key's state, or a marker (`word.rs`): [`VACANT`] (never used: a probe
//! ends here), [`TOMB`] (its key was removed: a probe goes on, and must not read the key), or
//! [`FROZEN`] (the lock holder is looking at it). The lock holder keeps the authoritative state
//! of every position in its own `marks`, so a real state that happens to equal a marker only
//! sends checks of that key (or of keys probing past it) to the lock, where it is decided as is.
//!
//! Checks pin the thread, load the array, probe from the key's home, and compare keys only on
//! lines whose word is not `VACANT` or `TOMB` (such a word was published with Release after the
//! key was written). They then run the word algorithm's CAS loop on the line's word, which stops
//! at any marker (`word::decide` returns `None`, and the check is redone under the lock).
//!
//! The lock holder:
//! - **inserts** by writing the key (and quota id) into a vacant line, or a tombstone line
//!   whose grace period has ended, then storing the word with Release;
//! - **removes** by swapping `TOMB` into the word (an exchange, so that both sides of the race
//!   are read-modify-writes of the word, as with a freeze): a check's CAS came first (and is
//!   counted before the removal) or fails and then finds the marker. The key is dropped, and the
//!   line reused, only after a grace period, so a pinned check never sees a key change under it.
//!   (Loom, which models a plain store racing a CAS less strictly than C++ does, reported a check
//!   counted after a removal with a plain store: `loom-tests`' `check_during_remove`.)
//! - **unlinks after a look** (eviction, quota change) by freezing the word first (swapping in
//!   `FROZEN` and looking at the value it swapped out, as `shard.rs` does for word cells), then
//!   storing `TOMB` or putting the value back;
//! - **rehashes** (grows, or sheds tombstones) by freezing every held line's word, copying the
//!   key's bytes and the swapped-out value into a new array, and publishing that array
//!   (Release). Checks still on the old array find their key frozen and redo themselves under
//!   the lock, on the new array. The old array is freed after a grace period without dropping
//!   the keys it moved; the keys of its tombstones still waiting for theirs are dropped then.
//!
//! Every step of a change that runs user code (`Hash` of every key, for a rehash) runs before
//! the first freeze, so a panic never leaves a word frozen.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use super::epoch::Guard;
use super::lock::{Cold, MutexGuard};
use super::quotas::{QuotaId, DEFAULT_ID};
use super::reclaim::{Reclaimable, Retired};
use super::shard::{Freezer, ShardConfig};
use super::slot::{read, write, UnsafeCell};
use super::store::{ScanOrder, Store, StoreHit, StoreLocked};
use super::word::{FROZEN, TOMB, VACANT};
use crate::loom::atomic::{AtomicPtr, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use crate::Algorithm;

/// A key and its state word.
struct Line<K> {
    word: AtomicU64,
    key: UnsafeCell<MaybeUninit<K>>,
}

impl<K> Line<K> {
    fn vacant() -> Self {
        Line { word: AtomicU64::new(VACANT), key: UnsafeCell::new(MaybeUninit::uninit()) }
    }

    /// The key.
    ///
    /// # Safety
    /// The key is written and stays so while the reference lives: the caller loaded a word that
    /// is not `VACANT` or `TOMB` (Acquire) while pinned and stays pinned, or holds the lock and
    /// the line is held.
    #[inline(always)]
    unsafe fn key(&self) -> &K {
        // SAFETY: written (caller's contract); only shared references exist until a grace period
        // after the line's removal, which the caller's pin or lock rules out.
        unsafe { (*read(&self.key)).assume_init_ref() }
    }
}

/// Arrays are whole multiples of this many lines, and start on a multiple of
/// [`ARRAY_ALIGN`] bytes.
const GROUP_LINES: usize = 8;
/// 128 bytes: the two cache lines that the adjacent-line prefetcher pulls in together (eight
/// lines of a `u64` key). Lines of two arrays (two shards) never share them, so two hot keys in
/// two shards never slow each other down (false sharing); two in one array do only when their
/// lines are that close.
const ARRAY_ALIGN: usize = 128;

/// The probed array, with the quota ids of its keys that have their own.
pub(super) struct LineArray<K> {
    /// `len` lines, allocated with [`LineArray::layout`].
    lines: NonNull<Line<K>>,
    len: usize,
    /// Null, or one id per line (allocated when a key with its own quota first lands here).
    ids: AtomicPtr<AtomicU16>,
}

/// Where a probe for `hash` starts in an array of `len` lines: the hash's top bits scaled to
/// `len` (a multiply, so that any length works). The shard was chosen by the low bits.
#[inline(always)]
fn home(hash: u64, len: usize) -> usize {
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
    fn len(&self) -> usize {
        self.len
    }

    /// Line `pos`.
    #[inline(always)]
    fn line(&self, pos: usize) -> &Line<K> {
        assert!(pos < self.len, "line {pos} of {}", self.len);
        // SAFETY: checked just above.
        unsafe { self.line_unchecked(pos) }
    }

    /// Line `pos`, unchecked.
    ///
    /// # Safety
    /// `pos < self.len()`.
    #[inline(always)]
    unsafe fn line_unchecked(&self, pos: usize) -> &Line<K> {
        // SAFETY: `len` initialised lines from `lines`, alive with the array; `pos < len` by the
        // contract.
        unsafe { self.lines.add(pos).as_ref() }
    }

    fn bytes_for(len: usize, with_ids: bool) -> usize {
        let ids = if with_ids { len * std::mem::size_of::<AtomicU16>() } else { 0 };
        std::mem::size_of::<Self>() + Self::layout(len).size() + ids
    }

    fn bytes(&self) -> usize {
        // Relaxed: only the lock holder (or the owner of a retired array) sets it.
        Self::bytes_for(self.len(), !self.ids.load(Ordering::Relaxed).is_null())
    }

    #[inline(always)]
    fn next(&self, pos: usize) -> usize {
        if pos + 1 == self.len() {
            0
        } else {
            pos + 1
        }
    }

    /// The quota id of the held line `pos`.
    #[inline(always)]
    fn quota_at(&self, pos: usize) -> QuotaId {
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
    fn set_quota(&self, pos: usize, id: QuotaId) {
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
            line.word.with_mut(|_| ());
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
struct OwnedArray<K>(NonNull<LineArray<K>>);

impl<K> OwnedArray<K> {
    fn new(len: usize) -> Self {
        OwnedArray(NonNull::from(Box::leak(LineArray::new(len))))
    }

    /// The pointer checks load.
    fn as_ptr(&self) -> *mut LineArray<K> {
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

/// A replaced array waiting for its grace period, with the lines whose keys it still owns
/// (tombstones not yet reclaimed when it was replaced): those are dropped with it.
pub(super) struct RetiredLines<K> {
    array: OwnedArray<K>,
    doomed: Vec<u32>,
}

impl<K> Reclaimable for RetiredLines<K> {
    fn bytes(&self) -> usize {
        self.array.bytes() + self.doomed.capacity() * std::mem::size_of::<u32>()
    }
}

impl<K> Drop for RetiredLines<K> {
    fn drop(&mut self) {
        for &pos in &self.doomed {
            // SAFETY: its grace period has ended (it is dropped by `Retired::collect`, or with the
            // shard), so no check reads the key; it was written and not moved (a tombstone's).
            unsafe { ptr::drop_in_place((*write(&self.array.line(pos as usize).key)).as_mut_ptr()) };
        }
    }
}

/// What the lock holder knows of a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// Never used since the array was made: a probe ends here.
    Vacant,
    /// Holds a key.
    Held,
    /// Removed; the key waits for its grace period before it is dropped.
    Dead,
    /// Removed and dropped: reusable.
    Free,
}

/// The most held keys an array takes before it grows: 13/20 of its lines. A hit at that load
/// looks at 1.9 lines on average (linear probing: (1 + 1/(1 - load)) / 2), against 2.5 at 3/4:
/// a probe of small tables, which hit the cache, is bound by the lines it looks at.
const HELD_NUM: usize = 13;
const HELD_DEN: usize = 20;
/// The most lines in use, held and removed, before a rehash sheds the removed ones: 3/4, above
/// [`HELD_NUM`]/[`HELD_DEN`], so that a table at its key bound, where a flood of new keys evicts
/// and removes, sheds no more often than when both were 3/4.
const FULL_NUM: usize = 3;
const FULL_DEN: usize = 4;
/// How loaded an array is right after a rehash: 11/20. So a `u64` key takes at most 17 / 0.55
/// = 31 bytes (a 16-byte line and a 1-byte mark), and a probe is short (a hit at 11/20 looks at
/// 1.6 lines on average).
const FRESH_NUM: usize = 11;
const FRESH_DEN: usize = 20;
/// The least an array grows by, 6/5, so that growth is geometric; no more, so that an array
/// grown when its held keys fill it starts at a load of at least 13/20 / 6/5 = 0.54 (32 bytes a `u64` key at most,
/// whole groups included, from a thousand keys).
const GROWTH_NUM: usize = 6;
const GROWTH_DEN: usize = 5;
/// The smallest array.
const MIN_LINES: usize = GROUP_LINES;
/// The most lines a shard starts with (and shrinks to): a few groups, so that a few hot keys in
/// one shard seldom share one (1 KiB for `u64` keys). Fewer when half its key bound needs fewer
/// ([`start_lines`]).
const START_LINES: usize = 8 * GROUP_LINES;
/// Replaced arrays waiting for their grace period hold at most this many times the current
/// array (see `take_place`).
const RETIRED_ARRAYS: usize = 4;

/// Lines for `keys` held keys right after a rehash (whole groups).
fn lines_for(keys: usize) -> usize {
    (keys.saturating_mul(FRESH_DEN).div_ceil(FRESH_NUM)).max(MIN_LINES).next_multiple_of(GROUP_LINES)
}

/// The lines a shard of at most `max_keys` keys starts with.
fn start_lines(max_keys: usize) -> usize {
    lines_for(max_keys / 2).min(START_LINES)
}

/// The lines an array of `len` lines grows to when its held keys need `needed` (more than
/// `len`): by at least the least growth, at most what the shard's key bound needs.
fn grown_lines(len: usize, needed: usize, max_keys: usize) -> usize {
    needed.max(len.saturating_mul(GROWTH_NUM).div_ceil(GROWTH_DEN)).min(lines_for(max_keys + 1).max(needed))
}

/// How many keys a shard of `max_keys` keys holds before it grows its first array.
#[cfg(kova_loom)]
pub(super) fn keys_in_first_array(max_keys: usize) -> usize {
    let len = start_lines(max_keys);
    (0..=len).rev().find(|&keys| fits(keys, keys, len)).unwrap_or(0)
}

/// Whether `held` keys in `occupied` lines (held and removed) fit an array of `len` lines.
fn fits(held: usize, occupied: usize, len: usize) -> bool {
    held.saturating_mul(HELD_DEN) <= len * HELD_NUM && occupied.saturating_mul(FULL_DEN) <= len * FULL_NUM
}

/// What the lock protects.
struct LineWriter<K> {
    max_keys: usize,
    array: OwnedArray<K>,
    marks: Vec<Mark>,
    /// Held keys.
    held: usize,
    /// `Dead` and `Free` lines.
    removed: usize,
    /// Removed lines (`Dead`) and replaced arrays.
    retired: Retired<RetiredLines<K>>,
    cursor: usize,
    /// The reclamation scan's order over the current array.
    scan: ScanOrder,
}

/// The part every check reads.
struct Hot<K> {
    /// The current array (the writer's); set under the lock.
    view: AtomicPtr<LineArray<K>>,
    /// Its lines and their number, for [`Store::prefetch`] only: read unpinned, they may be
    /// stale or from two arrays, which only makes the hint wrong.
    hint_lines: AtomicPtr<Line<K>>,
    hint_len: AtomicUsize,
}

/// The fewest lines of an array whose checks prefetch their line (256 KiB of `u64` keys: a
/// table of a few such shards no longer fits a core's L2 cache).
const PREFETCH_LINES: usize = 1 << 14;

/// A check of a large array also prefetches the line this far past its home: for `u64` keys
/// (four lines a cache line) that fetches the next cache line whenever a probe of up to four
/// lines could run into it, at once rather than after the first miss (the probe's next load
/// depends on the first). Not further: a line two cache lines on is seldom reached.
const PROBE_AHEAD: usize = 3;

/// Asks the CPU to start loading the line at `line`; never faults, whatever the address.
#[inline(always)]
fn prefetch_line<T>(line: *const T) {
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

/// A shard of lines for algorithm `A`, whose cell is a word (see [`new`](Self::new)).
pub(super) struct LineShard<K, A> {
    hot: CachePadded<Hot<K>>,
    cold: CachePadded<Cold<LineWriter<K>>>,
    _algorithm: PhantomData<A>,
}

/// A key found without the lock.
pub(super) struct LineHit<'g, A> {
    word: &'g AtomicU64,
    quota: QuotaId,
    pos: u32,
    _algorithm: PhantomData<&'g A>,
}

/// The word as the table's cell. A `LineShard<K, A>` exists only for an `A` whose cell is a
/// word ([`LineShard::new`]), so the `None` arm is never taken.
#[inline(always)]
fn as_cell<A: Algorithm>(word: &AtomicU64) -> &A::Cell {
    match A::inline_cell(word) {
        Some(cell) => cell,
        None => unreachable!("lines are built only for cells that are words"),
    }
}

/// The table's cell as the word it is (see [`as_cell`]).
#[inline(always)]
fn as_word<A: Algorithm>(cell: &A::Cell) -> &AtomicU64 {
    match A::inline_word(cell) {
        Some(word) => word,
        None => unreachable!("lines are built only for cells that are words"),
    }
}

impl<A> Clone for LineHit<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for LineHit<'_, A> {}

impl<'g, A: Algorithm> StoreHit<'g, A::Cell> for LineHit<'g, A> {
    #[inline(always)]
    fn cell(&self) -> &'g A::Cell {
        as_cell::<A>(self.word)
    }

    #[inline(always)]
    fn quota(&self) -> QuotaId {
        self.quota
    }

    fn place(&self) -> u32 {
        self.pos
    }
}

impl<K, A: Algorithm> LineShard<K, A> {
    /// A shard of at most `config.max_keys` keys; `None` when `A`'s cell is not a word
    /// ([`Algorithm::inline_cell`]).
    pub(super) fn new(config: ShardConfig) -> Option<Self> {
        A::inline_cell(&AtomicU64::new(VACANT))?;
        let start = start_lines(config.max_keys);
        let array = OwnedArray::new(start);
        let view = AtomicPtr::new(array.as_ptr());
        let memory = array.bytes() + start;
        let hot =
            Hot { view, hint_lines: AtomicPtr::new(array.lines.as_ptr()), hint_len: AtomicUsize::new(start) };
        let writer = LineWriter {
            max_keys: config.max_keys,
            array,
            marks: vec![Mark::Vacant; start],
            held: 0,
            removed: 0,
            retired: Retired::default(),
            cursor: 0,
            scan: ScanOrder::new(start),
        };
        Some(LineShard {
            hot: CachePadded::new(hot),
            cold: CachePadded::new(Cold::new(writer, memory)),
            _algorithm: PhantomData,
        })
    }

    /// The most bytes a shard of `max_keys` keys can hold: its largest array, the arrays it
    /// replaced still in their grace period (at most [`RETIRED_ARRAYS`] times the largest, plus
    /// the last one retired, with the lines whose keys they still own), marks, and the retired
    /// queue.
    pub(super) fn bound_bytes(max_keys: usize) -> usize {
        let lines = lines_for(max_keys + 1);
        let ptr = std::mem::size_of::<usize>();
        // Per line of any array, current or replaced: the line and its quota id; a doomed
        // position (a replaced array's) or a mark (the current one's); a retired-queue entry
        // (`Retired`'s, 24 bytes, the queue at most doubled); and a batch token (a queue entry
        // and its `Arc` allocation, the queue at most doubled), since every batch retired at
        // least one line or one array.
        let per_line = std::mem::size_of::<Line<K>>()
            + std::mem::size_of::<AtomicU16>()
            + std::mem::size_of::<u32>()
            + 2 * 24
            + 2 * (8 + ptr)
            + 2 * ptr;
        (RETIRED_ARRAYS + 2) * (lines * per_line + std::mem::size_of::<LineArray<K>>())
    }
}

impl<K, A: Algorithm> Store<K, A::Cell> for LineShard<K, A> {
    type Hit<'g>
        = LineHit<'g, A>
    where
        Self: 'g;
    type Locked<'a>
        = LineLocked<'a, K, A>
    where
        Self: 'a;

    #[inline(always)]
    fn prefetch(&self, hash: u64) {
        // Relaxed: a hint (see `Hot`).
        let len = self.hot.hint_len.load(Ordering::Relaxed);
        // A small array stays in the cache: there the hint would cost more than it saves.
        if len >= PREFETCH_LINES {
            let lines = self.hot.hint_lines.load(Ordering::Relaxed);
            // Never dereferenced: the hints may be stale, the address out of bounds.
            let home = lines.wrapping_add(home(hash, len));
            prefetch_line(home);
            prefetch_line(home.wrapping_add(PROBE_AHEAD));
        }
    }

    /// Probes from the key's home, one line at a time: at the load factors kept here (at most
    /// 13/20 held, 3/4 with the removed) most hits end at the home line, which holds the key and its word.
    #[inline(always)]
    fn find<'g>(&'g self, hash: u64, key: &K, _guard: &'g Guard) -> Option<LineHit<'g, A>>
    where
        K: Eq,
    {
        // Acquire: pairs with the Release store that published this array, so its lines (keys,
        // words, ids) as made or moved before publication are visible.
        // SAFETY: never dangling: an array is freed only after a grace period that began after it
        // was replaced, and the caller is pinned from before this load until `'g` ends.
        let array = unsafe { &*self.hot.view.load(Ordering::Acquire) };
        let len = array.len();
        let mut pos = home(hash, len);
        for _ in 0..len {
            // SAFETY: `pos < len` (`home` and the wrap below keep it so).
            let line = unsafe { array.line_unchecked(pos) };
            // Acquire: pairs with the Release store of the word after the key was written.
            let word = line.word.load(Ordering::Acquire);
            if word == VACANT {
                return None;
            }
            // SAFETY: the word is neither `VACANT` nor `TOMB`, loaded with Acquire while pinned:
            // the key is written and is not dropped before our pin ends.
            if word != TOMB && unsafe { line.key() } == key {
                let quota = array.quota_at(pos);
                return Some(LineHit { word: &line.word, quota, pos: pos as u32, _algorithm: PhantomData });
            }
            pos += 1;
            if pos == len {
                pos = 0;
            }
        }
        None
    }

    /// Word cells are frozen before any look: a check's write always stands.
    fn still_linked(&self, _hit: &LineHit<'_, A>) -> bool {
        true
    }

    fn lock<'a>(&'a self, guard: &'a Guard) -> LineLocked<'a, K, A> {
        let mut locked = LineLocked { shard: self, writer: self.cold.lock(), guard };
        locked.collect();
        locked
    }

    fn len(&self) -> usize {
        self.cold.len()
    }

    fn memory(&self) -> usize {
        self.cold.memory()
    }
}

impl<K, A> Drop for LineShard<K, A> {
    fn drop(&mut self) {
        let writer = self.cold.writer_mut();
        for (pos, mark) in writer.marks.iter().enumerate() {
            if matches!(mark, Mark::Held | Mark::Dead) {
                // SAFETY: a held or dead line's key is written and owned by this array; `&mut self`
                // rules out readers.
                unsafe { ptr::drop_in_place((*write(&writer.array.line(pos).key)).as_mut_ptr()) };
            }
        }
        // Replaced arrays drop the keys they still own; retired positions were dropped above.
        writer.retired.drain_all().for_each(drop);
    }
}

/// The shard with its lock held, on a pinned thread.
pub(super) struct LineLocked<'a, K, A> {
    shard: &'a LineShard<K, A>,
    writer: MutexGuard<'a, LineWriter<K>>,
    guard: &'a Guard,
}

impl<K, A> LineLocked<'_, K, A> {
    fn line(&self, pos: usize) -> &Line<K> {
        self.writer.array.line(pos)
    }

    /// Drops the keys of removed lines whose grace period has ended, making them reusable, and
    /// frees replaced arrays.
    fn collect(&mut self) {
        let ready = self.writer.retired.collect(self.guard);
        for (pos, _) in ready.places {
            let pos = pos as usize;
            debug_assert_eq!(self.writer.marks[pos], Mark::Dead);
            // SAFETY: removed before a grace period that has ended: no check reads the key; we
            // hold the lock.
            unsafe { ptr::drop_in_place((*write(&self.line(pos).key)).as_mut_ptr()) };
            self.writer.marks[pos] = Mark::Free;
        }
    }

    /// The first line from `hash`'s home a new key can take: vacant, or free.
    fn open_line(&self, hash: u64) -> usize {
        let w = &*self.writer;
        let mut pos = home(hash, w.array.len());
        while !matches!(w.marks[pos], Mark::Vacant | Mark::Free) {
            pos = w.array.next(pos);
        }
        pos
    }

    /// Writes `key` with `value` and `quota` into the open line `pos`, and publishes it.
    fn fill(&mut self, pos: usize, key: K, value: u64, quota: QuotaId) {
        let w = &mut *self.writer;
        let line = w.array.line(pos);
        // SAFETY: the line is vacant or free (its key dropped after its grace period): no
        // reference to its key exists, and we hold the lock.
        unsafe { (*write(&line.key)).write(key) };
        w.array.set_quota(pos, quota);
        // Release: a check that loads this word (Acquire) sees the key and id written.
        line.word.store(value, Ordering::Release);
        if w.marks[pos] == Mark::Free {
            w.removed -= 1;
        }
        w.marks[pos] = Mark::Held;
        w.held += 1;
    }

    /// Marks the held line `pos`, whose word is frozen or removed, dead: `TOMB` over its word,
    /// and its key retired.
    fn bury(&mut self, pos: usize) {
        let w = &mut *self.writer;
        // An exchange, like a freeze, so that both sides of a race with a check's CAS are
        // read-modify-writes of the word: the CAS came before (and is counted before the
        // removal) or fails and finds the marker. AcqRel as in a freeze; a check that loads
        // `TOMB` reads no key, so nothing is published through it.
        w.array.line(pos).word.swap(TOMB, Ordering::AcqRel);
        w.marks[pos] = Mark::Dead;
        w.held -= 1;
        w.removed += 1;
        w.retired.place(pos as u32, 0);
    }

    /// Moves every held key into a new array of `len` lines and publishes it.
    fn rehash(&mut self, len: usize, hash_key: &impl Fn(&K) -> u64) {
        // User code first: nothing is frozen if a `Hash` panics.
        let held: Vec<(usize, u64)> = (0..self.writer.array.len())
            .filter(|&pos| self.writer.marks[pos] == Mark::Held)
            // SAFETY: a held line's key is written; we hold the lock.
            .map(|pos| (pos, hash_key(unsafe { self.line(pos).key() })))
            .collect();
        let w = &mut *self.writer;
        let fresh = OwnedArray::<K>::new(len);
        let mut marks = vec![Mark::Vacant; len];
        for (from, hash) in held {
            let old = w.array.line(from);
            // AcqRel: as a freeze (`word.rs`): a check's CAS came before (its write is in
            // `value`) or fails and finds the marker.
            let value = old.word.swap(FROZEN, Ordering::AcqRel);
            let mut to = home(hash, len);
            while marks[to] != Mark::Vacant {
                to = fresh.next(to);
            }
            // SAFETY: the old line's key is written, and from now on only read (by checks still
            // on the old array) until that array is freed, which does not drop it; the new line
            // is not visible to anyone yet.
            unsafe {
                ptr::copy_nonoverlapping(
                    (*read(&old.key)).as_ptr(),
                    (*write(&fresh.line(to).key)).as_mut_ptr(),
                    1,
                )
            };
            fresh.set_quota(to, w.array.quota_at(from));
            // Relaxed: published by the array's Release store below.
            fresh.line(to).word.store(value, Ordering::Relaxed);
            marks[to] = Mark::Held;
        }
        // Release: checks that load the new array (Acquire) see its lines.
        self.shard.hot.view.store(fresh.as_ptr(), Ordering::Release);
        // Relaxed: hints (see `Hot`).
        self.shard.hot.hint_lines.store(fresh.lines.as_ptr(), Ordering::Relaxed);
        self.shard.hot.hint_len.store(len, Ordering::Relaxed);
        let old = std::mem::replace(&mut w.array, fresh);
        w.scan = ScanOrder::new(len);
        // The dead lines' keys go with the old array; free lines' keys were dropped already.
        let doomed = w.retired.take_places().into_iter().map(|(pos, _)| pos).collect();
        w.retired.array(RetiredLines { array: old, doomed });
        w.marks = marks;
        w.removed = 0;
        w.cursor = 0;
    }

    fn memory(&self) -> usize {
        let w = &*self.writer;
        w.array.bytes() + w.marks.capacity() * std::mem::size_of::<Mark>() + w.retired.bytes()
    }
}

impl<K, A: Algorithm> LineLocked<'_, K, A> {
    /// Freezes the held line `pos`'s word: the word as the table's cell, and a copy of its state.
    fn freeze(&self, pos: usize, freezer: &impl Freezer<A::Cell>) -> (&A::Cell, A::Cell) {
        let cell = as_cell::<A>(&self.line(pos).word);
        let Some(copy) = freezer.freeze(cell) else {
            unreachable!("a line's cell is a word, which freezes");
        };
        (cell, copy)
    }
}

impl<K, A: Algorithm> StoreLocked<K, A::Cell> for LineLocked<'_, K, A> {
    type Entry = u32;

    fn find(&self, hash: u64, key: &K) -> Option<(usize, u32)>
    where
        K: Eq,
    {
        let w = &*self.writer;
        let mut pos = home(hash, w.array.len());
        for _ in 0..w.array.len() {
            match w.marks[pos] {
                Mark::Vacant => return None,
                // SAFETY: a held line's key is written; we hold the lock.
                Mark::Held if unsafe { self.line(pos).key() } == key => return Some((pos, pos as u32)),
                _ => {}
            }
            pos = w.array.next(pos);
        }
        None
    }

    fn key(&self, entry: u32) -> &K {
        debug_assert_eq!(self.writer.marks[entry as usize], Mark::Held);
        // SAFETY: an entry names a held line (written key); we hold the lock.
        unsafe { self.line(entry as usize).key() }
    }

    fn cell(&self, entry: u32) -> &A::Cell {
        as_cell::<A>(&self.line(entry as usize).word)
    }

    fn quota(&self, entry: u32) -> QuotaId {
        self.writer.array.quota_at(entry as usize)
    }

    fn place_of(&self, entry: u32) -> u32 {
        entry
    }

    fn is_full(&self) -> bool {
        self.writer.held >= self.writer.max_keys
    }

    /// Room for one more line, rehashing when the array is full (of held keys, or of held and
    /// removed lines): into a bigger array when the held keys need it (by at least
    /// [`GROWTH_NUM`]/[`GROWTH_DEN`], so that growth is geometric), else into one of the same
    /// size (shedding tombstones), or a smaller one when it is four times what the held keys
    /// need. Replaced arrays wait for their grace period; a rehash waits (`None` when it must)
    /// while they hold more than [`RETIRED_ARRAYS`] times the new array, or than the shard's
    /// largest array (for small arrays, shedding often), so that they stay bounded. Meanwhile
    /// the array is used past its load bound, up to its last open line.
    fn take_place(&mut self, hash_key: &impl Fn(&K) -> u64) -> Option<u32> {
        for attempt in 0..3 {
            let w = &*self.writer;
            let len = w.array.len();
            if fits(w.held + 1, w.held + w.removed + 1, len) {
                return Some(0);
            }
            let needed = lines_for(w.held + 1);
            let target = if needed > len {
                grown_lines(len, needed, w.max_keys)
            } else if len > 4 * needed {
                (2 * needed).max(start_lines(w.max_keys))
            } else {
                len
            }
            .next_multiple_of(GROUP_LINES);
            let floor = LineArray::<K>::bytes_for(lines_for(w.max_keys), true);
            let budget = (RETIRED_ARRAYS * LineArray::<K>::bytes_for(target, true)).max(floor);
            if w.retired.array_bytes() <= budget {
                self.rehash(target, hash_key);
                return Some(0);
            }
            if attempt < 2 {
                // Seal what this section retired so far, collect what earlier sections sealed
                // (advancing the epoch if they wait for it), and look again.
                self.writer.retired.seal(self.guard);
                self.collect();
            }
        }
        // A line is still open (the load bound is below 1): use it rather than wait.
        let w = &*self.writer;
        (w.held + w.removed + 1 < w.array.len()).then_some(0)
    }

    fn put_back(&mut self, _place: u32) {}

    fn insert(
        &mut self,
        _place: u32,
        hash: u64,
        key: K,
        cell: A::Cell,
        quota: QuotaId,
        _heap: usize,
        _hash_key: &impl Fn(&K) -> u64,
    ) -> u32 {
        let pos = self.open_line(hash);
        self.fill(pos, key, as_word::<A>(&cell).load(Ordering::Relaxed), quota);
        pos as u32
    }

    fn remove_at(&mut self, pos: usize, _entry: u32, _heap: usize, _hash_key: &impl Fn(&K) -> u64) {
        self.bury(pos);
    }

    fn unlink_if(
        &mut self,
        pos: usize,
        _entry: u32,
        _heap: usize,
        keep: impl FnOnce(&A::Cell) -> bool,
        freezer: &impl Freezer<A::Cell>,
        _hash_key: &impl Fn(&K) -> u64,
    ) -> bool {
        let (cell, copy) = self.freeze(pos, freezer);
        if keep(&copy) {
            freezer.thaw(cell, &copy);
            return false;
        }
        self.bury(pos);
        true
    }

    /// Buries the old line and inserts the key again, in another line: a line's quota id never
    /// changes while it is held, so a check never pairs a word with another quota's id.
    fn replace(
        &mut self,
        pos: usize,
        _old: u32,
        _old_heap: usize,
        hash: u64,
        key: K,
        quota: QuotaId,
        _new_heap: usize,
        build: impl FnOnce(&A::Cell) -> A::Cell,
        freezer: &impl Freezer<A::Cell>,
        hash_key: &impl Fn(&K) -> u64,
    ) -> Result<u32, K>
    where
        K: Eq,
    {
        if self.take_place(hash_key).is_none() {
            return Err(key);
        }
        // A rehash may have moved the key.
        let pos = if self.writer.marks[pos] == Mark::Held && self.key(pos as u32) == &key {
            pos
        } else {
            match StoreLocked::find(self, hash, &key) {
                Some((pos, _)) => pos,
                None => return Err(key),
            }
        };
        let (_, copy) = self.freeze(pos, freezer);
        let value = as_word::<A>(&build(&copy)).load(Ordering::Relaxed);
        self.bury(pos);
        let to = self.open_line(hash);
        self.fill(to, key, value, quota);
        Ok(to as u32)
    }

    fn entry_at(&self, pos: usize) -> Option<u32> {
        (self.writer.marks[pos] == Mark::Held).then_some(pos as u32)
    }

    fn positions(&self) -> usize {
        self.writer.array.len()
    }

    #[cfg(test)]
    fn longest_run(&self) -> usize {
        let runs = self.writer.marks.split(|&mark| mark == Mark::Vacant);
        runs.map(<[Mark]>::len).max().unwrap_or(0)
    }

    fn scan_order(&self) -> ScanOrder {
        debug_assert_eq!(self.writer.scan, ScanOrder::new(self.positions()));
        self.writer.scan
    }

    fn cursor(&self) -> usize {
        self.writer.cursor % self.positions()
    }

    fn set_cursor(&mut self, cursor: usize) {
        self.writer.cursor = cursor;
    }
}

impl<K, A> Drop for LineLocked<'_, K, A> {
    /// Seals what this section retired and publishes the figures.
    fn drop(&mut self) {
        self.writer.retired.seal(self.guard);
        let memory = self.memory();
        self.shard.cold.publish(self.writer.held, memory);
    }
}

#[cfg(test)]
mod tests {
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

    /// Right after a rehash an array holds its keys at a load of at most 11/20, so they fit
    /// (at most 13/20 held) with room to grow; and a `u64` key then costs at most 32 bytes, also in
    /// an array grown by the least growth from a full one.
    #[test]
    fn sizing_keeps_the_loads() {
        for keys in (1..5_000).chain([123_456, 1 << 20]) {
            let len = lines_for(keys);
            assert!(keys * FRESH_DEN <= len * FRESH_NUM, "{keys} keys in {len} lines");
            assert!(fits(keys, keys, len));
            let bytes_per_key = (len * (std::mem::size_of::<Line<u64>>() + 1)) as f64 / keys as f64;
            // Whole groups add up to 7 lines, which matters only below a thousand keys.
            assert!(keys < 1_000 || bytes_per_key <= 32.0, "{keys} keys: {bytes_per_key} bytes each");
        }
        // A full array of held keys takes one more: the grown array holds them at 32 bytes
        // each at most.
        let groups = if cfg!(miri) { 2_000 } else { 20_000 };
        for len in (1..groups).map(|groups| groups * GROUP_LINES) {
            let held = len * HELD_NUM / HELD_DEN;
            assert!(fits(held, held, len) && !fits(held + 1, held + 1, len));
            let needed = lines_for(held + 1);
            if held + 1 < 1_000 || needed <= len {
                continue;
            }
            let grown = grown_lines(len, needed, usize::MAX / 2).next_multiple_of(GROUP_LINES);
            assert!(grown * GROWTH_DEN >= len * GROWTH_NUM, "{len} lines grew to {grown}");
            let bytes_per_key = (grown * (std::mem::size_of::<Line<u64>>() + 1)) as f64 / (held + 1) as f64;
            assert!(bytes_per_key <= 32.0, "{len} lines grew to {grown}: {bytes_per_key} bytes each");
        }
    }
}
