//! A shard: its keys sit beside their words in the probed array itself (a "line",
//! `line/array.rs`), so a check of a held key reads one line of the table, and the line's word
//! is the key's cell, or the address of its boxed cell (`line/cell.rs`).
//!
//! # Protocol
//! A line's word is the key's cell (or its address), or a marker (`word.rs`): [`VACANT`] (never
//! used: a probe ends here), [`TOMB`] (its key was removed: a probe goes on, and must not read
//! the key), or [`FROZEN`](super::super::word::FROZEN) (the lock holder is looking at it). The lock holder keeps the
//! authoritative state of every position in its own `marks`, so an inline state that happens to
//! equal a marker only sends checks of that key (or of keys probing past it) to the lock, where
//! it is decided as is.
//!
//! Checks pin the thread, load the array, probe from the key's home, and compare keys only on
//! lines whose word is not `VACANT` or `TOMB` (such a word was published with Release after the
//! key was written). They then decide on the key's cell: an inline word by the CAS loop, which
//! stops at any marker (`word::decide` returns `None`, and the check is redone under the lock);
//! a boxed cell through its address (a frozen line sends the check to the lock at once).
//!
//! The lock holder:
//! - **inserts** by writing the key (and quota id) into a vacant line, or a tombstone line
//!   whose grace period has ended, then storing the word with Release;
//! - **removes** by swapping `TOMB` into the word (an exchange, so that both sides of the race
//!   are read-modify-writes of the word, as with a freeze): a check's CAS came first (and is
//!   counted before the removal) or fails and then finds the marker. The key (and a boxed cell)
//!   is dropped, and the line reused, only after a grace period, so a pinned check never sees a
//!   key or cell change under it. (Loom, which models a plain store racing a CAS less strictly
//!   than C++ does, reported a check counted after a removal with a plain store: `loom-tests`'
//!   `check_during_remove`.)
//! - **unlinks after a look** (eviction, quota change) by freezing the word first (swapping in
//!   `FROZEN` and looking at the value it swapped out), or for a boxed cell hiding the line
//!   (`line/cell.rs`) and freezing the cell's own word when it has one, then storing `TOMB` or
//!   putting the value back;
//! - **rehashes** (grows, or sheds tombstones) by freezing every held line's word, copying the
//!   key's bytes and the swapped-out value into a new array, and publishing that array
//!   (Release). Checks still on the old array find their key frozen and redo themselves under
//!   the lock, on the new array (a boxed cell did not move: a write to it stands). The old array
//!   is freed after a grace period without dropping the keys it moved; the keys (and cells) of
//!   its tombstones still waiting for theirs are dropped then.
//!
//! Every step of a change that runs user code (`Hash` of every key, for a rehash) runs before
//! the first freeze, so a panic never leaves a word frozen.

use std::ptr;

use crossbeam_utils::CachePadded;

use super::super::epoch::Guard;
use super::super::lock::Cold;
use super::super::quotas::QuotaId;
use super::super::reclaim::Retired;
use super::super::scan_order::ScanOrder;
use super::super::word::{MARKERS, TOMB, VACANT};
use super::array::{home, write, Line, LineArray, OwnedArray, RetiredLines, PREFETCH_LINES, PROBE_AHEAD};
use super::cell::{self, boxed};
use super::prefetch::{contended_recently, prefetch_line, prefetch_line_for_write};
use super::sizing::{lines_for, start_lines, RETIRED_ARRAYS};
use crate::loom::atomic::{fence, AtomicPtr, AtomicUsize, Ordering};
use crate::loom::AtomicAddressWord;
use crate::Algorithm;

/// The most keys one shard holds, so that a rehash, which holds the shard's lock while it moves
/// every key, stays short: bigger tables get more shards (`KeyedBuilder::build`).
pub(in crate::keyed) const MAX_KEYS: usize = 1 << 24;

/// What the lock holder knows of a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::keyed) enum Mark {
    /// Never used since the array was made: a probe ends here.
    Vacant,
    /// Holds a key.
    Held,
    /// Removed; the key waits for its grace period before it is dropped.
    Dead,
    /// Removed and dropped: reusable.
    Free,
}

/// What the lock protects.
pub(in crate::keyed) struct LineWriter<K, A: Algorithm> {
    pub(in crate::keyed) max_keys: usize,
    pub(in crate::keyed) array: OwnedArray<K>,
    pub(in crate::keyed) marks: Vec<Mark>,
    /// Held keys.
    pub(in crate::keyed) held: usize,
    /// `Dead` and `Free` lines.
    pub(in crate::keyed) removed: usize,
    /// Removed lines (`Dead`) and replaced arrays.
    pub(in crate::keyed) retired: Retired<RetiredLines<K, A>>,
    /// Bytes of boxed cells (`line/cell.rs`), held and retired, heap included.
    pub(in crate::keyed) cell_bytes: usize,
    pub(in crate::keyed) cursor: usize,
    /// The reclamation scan's order over the current array.
    pub(in crate::keyed) scan: ScanOrder,
}

/// The part every check reads.
pub(in crate::keyed) struct Hot<K> {
    /// The current array (the writer's); set under the lock.
    pub(in crate::keyed) view: AtomicPtr<LineArray<K>>,
    /// Its lines and their number, for [`LineShard::prefetch`] only: read unpinned, they may be
    /// stale or from two arrays, which only makes the hint wrong.
    pub(in crate::keyed) hint_lines: AtomicPtr<Line<K>>,
    pub(in crate::keyed) hint_len: AtomicUsize,
}

/// A shard of lines for algorithm `A`.
pub(in crate::keyed) struct LineShard<K, A: Algorithm> {
    pub(in crate::keyed) hot: CachePadded<Hot<K>>,
    pub(in crate::keyed) cold: CachePadded<Cold<LineWriter<K, A>>>,
}

/// A key found without the lock.
pub(in crate::keyed) struct LineHit<'g, A: Algorithm> {
    word: &'g AtomicAddressWord,
    /// The word as loaded: a boxed cell's address.
    value: u64,
    cell: &'g A::Cell,
    quota: QuotaId,
    pos: u32,
}

/// What a probe for a key found.
enum Probe<'g, A: Algorithm> {
    /// Not in this array.
    Absent,
    /// In a boxed line the lock holder has hidden: held, with no cell to reach now.
    Hidden,
    /// Held, with its cell.
    Hit(LineHit<'g, A>),
}

impl<A: Algorithm> Clone for LineHit<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: Algorithm> Copy for LineHit<'_, A> {}

impl<'g, A: Algorithm> LineHit<'g, A> {
    #[inline(always)]
    pub(in crate::keyed) fn cell(&self) -> &'g A::Cell {
        self.cell
    }

    #[inline(always)]
    pub(in crate::keyed) fn quota(&self) -> QuotaId {
        self.quota
    }

    /// A boxed cell's address: the cell stays the key's until it is unlinked, wherever its line
    /// moves. The position, for an inline word (whose writes always stand).
    pub(in crate::keyed) fn place(&self) -> u64 {
        if boxed::<A>() {
            self.value
        } else {
            u64::from(self.pos)
        }
    }
}

impl<K, A: Algorithm> LineShard<K, A> {
    /// A shard of at most `max_keys` keys (at most [`MAX_KEYS`]).
    pub(in crate::keyed) fn new(max_keys: usize) -> Self {
        debug_assert!(max_keys <= MAX_KEYS);
        let start = start_lines(max_keys);
        let array = OwnedArray::new(start);
        let view = AtomicPtr::new(array.as_ptr());
        let memory = array.bytes() + start;
        let hot =
            Hot { view, hint_lines: AtomicPtr::new(array.lines.as_ptr()), hint_len: AtomicUsize::new(start) };
        let writer = LineWriter {
            max_keys,
            array,
            marks: vec![Mark::Vacant; start],
            held: 0,
            removed: 0,
            retired: Retired::default(),
            cell_bytes: 0,
            cursor: 0,
            scan: ScanOrder::new(start),
        };
        LineShard { hot: CachePadded::new(hot), cold: CachePadded::new(Cold::new(writer, memory)) }
    }

    /// The most bytes a shard of `max_keys` keys can hold: its largest array, the arrays it
    /// replaced still in their grace period (at most [`RETIRED_ARRAYS`] times the largest, plus
    /// the last one retired, with the lines whose keys they still own), marks, the retired
    /// queue, and a boxed cell of `cell_bytes` bytes for every line of them.
    pub(in crate::keyed) fn bound_bytes(max_keys: usize, cell_bytes: usize) -> usize {
        let lines = lines_for(max_keys + 1);
        let ptr = std::mem::size_of::<usize>();
        // Per line of any array, current or replaced: the line and its quota id; a doomed
        // line (a replaced array's) or a mark (the current one's); a retired-queue entry (the
        // queue at most doubled); a batch token (a queue entry and its `Arc` allocation, the
        // queue at most doubled), since every batch retired at least one line or one array;
        // and its boxed cell, if cells are boxed.
        let per_line = std::mem::size_of::<Line<K>>()
            + std::mem::size_of::<u16>()
            + std::mem::size_of::<(u32, u64)>()
            + 2 * Retired::<RetiredLines<K, A>>::PLACE_BYTES
            + 2 * (8 + ptr)
            + 2 * ptr
            + if boxed::<A>() { cell_bytes } else { 0 };
        (RETIRED_ARRAYS + 2) * (lines * per_line + std::mem::size_of::<LineArray<K>>())
    }
}

impl<K, A: Algorithm> LineShard<K, A> {
    /// Starts loading where `hash`'s key would be, before the thread is pinned (so that the
    /// cache miss overlaps the pin); in exclusive state while this thread's checks meet other
    /// threads' writes (`line/prefetch.rs`). A hint: it reads nothing it relies on.
    #[inline(always)]
    pub(in crate::keyed) fn prefetch(&self, hash: u64) {
        // Relaxed: a hint (see `Hot`).
        let len = self.hot.hint_len.load(Ordering::Relaxed);
        let large = len >= PREFETCH_LINES;
        let for_write = contended_recently();
        // A small array stays in the cache: there a plain hint would cost more than it saves.
        if large || for_write {
            let lines = self.hot.hint_lines.load(Ordering::Relaxed);
            // Never dereferenced: the hints may be stale, the address out of bounds.
            let home = lines.wrapping_add(home(hash, len));
            if for_write {
                prefetch_line_for_write(home);
            } else {
                prefetch_line(home);
            }
            if large {
                prefetch_line(home.wrapping_add(PROBE_AHEAD));
            }
        }
    }

    /// Probes from the key's home, one line at a time: at the load factors kept here (at most
    /// 13/20 held, 3/4 with the removed) most hits end at the home line, which holds the key and its word.
    /// `None` is not proof of absence: the key's line may be frozen, or in an array that has
    /// just been replaced.
    #[inline(always)]
    pub(in crate::keyed) fn find<'g>(&'g self, hash: u64, key: &K, guard: &'g Guard) -> Option<LineHit<'g, A>>
    where
        K: Eq,
    {
        match self.probe(hash, key, guard) {
            Probe::Hit(hit) => Some(hit),
            Probe::Hidden | Probe::Absent => None,
        }
    }

    /// Whether the array holds `key` in any state, a hidden line included: where "not found"
    /// must mean absent (the doorkeeper admits only a key the table does not hold). Like
    /// [`find`](Self::find), not proof of absence while an insert or a rehash is under way.
    pub(in crate::keyed) fn holds(&self, hash: u64, key: &K, guard: &Guard) -> bool
    where
        K: Eq,
    {
        !matches!(self.probe(hash, key, guard), Probe::Absent)
    }

    /// The probe of [`find`](Self::find) and [`holds`](Self::holds).
    #[inline(always)]
    fn probe<'g>(&'g self, hash: u64, key: &K, _guard: &'g Guard) -> Probe<'g, A>
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
            let loaded = line.word.load_word(Ordering::Acquire);
            let word = loaded.bits();
            if word == VACANT {
                return Probe::Absent;
            }
            // SAFETY: the word is neither `VACANT` nor `TOMB`, loaded with Acquire while pinned:
            // the key is written and is not dropped before our pin ends.
            if word != TOMB && unsafe { line.key() } == key {
                if boxed::<A>() && word >= MARKERS {
                    // Frozen: the lock holder is looking at it, and there is no cell to reach.
                    return Probe::Hidden;
                }
                // SAFETY: a held line's word, loaded while pinned (and we stay so for `'g`).
                let cell = unsafe { cell::cell::<A>(&line.word, loaded) };
                let quota = array.quota_at(pos);
                return Probe::Hit(LineHit { word: &line.word, value: word, cell, quota, pos: pos as u32 });
            }
            pos += 1;
            if pos == len {
                pos = 0;
            }
        }
        Probe::Absent
    }

    /// An inline word is frozen before any look: a check's write always stands. A boxed cell's
    /// line is hidden instead, so the check looks at it again after its write (`line/cell.rs`).
    pub(in crate::keyed) fn still_linked(&self, hit: &LineHit<'_, A>) -> bool {
        if !boxed::<A>() {
            return true;
        }
        // SeqCst: orders the check's write of the cell before this load in the total order
        // with the lock holder's fence after it hid the line (`line/cell.rs`).
        fence(Ordering::SeqCst);
        // Relaxed: the fences order it; nothing is read through it.
        hit.word.load(Ordering::Relaxed) == hit.value
    }

    /// [`still_linked`](Self::still_linked) after a write whose last access to the cell was a
    /// locked read-modify-write (every write of a composite's cell ends in its compare-and-swap,
    /// `table/visit.rs`).
    #[inline(always)]
    pub(in crate::keyed) fn still_linked_after_rmw(&self, hit: &LineHit<'_, A>) -> bool {
        if !boxed::<A>() {
            return true;
        }
        after_rmw_fence();
        // Relaxed: ordered as `still_linked`'s load is.
        hit.word.load(Ordering::Relaxed) == hit.value
    }

    /// The shard's count of inserts (`lock.rs`'s `Cold::inserts`).
    pub(in crate::keyed) fn inserts(&self, order: Ordering) -> u64 {
        self.cold.inserts(order)
    }

    /// Keys held (a snapshot).
    pub(in crate::keyed) fn len(&self) -> usize {
        self.cold.len()
    }

    /// Bytes held (a snapshot), the shard struct itself not included.
    pub(in crate::keyed) fn memory(&self) -> usize {
        self.cold.memory()
    }
}

impl<K, A: Algorithm> Drop for LineShard<K, A> {
    fn drop(&mut self) {
        let writer = self.cold.writer_mut();
        for (pos, mark) in writer.marks.iter().enumerate() {
            let line = writer.array.line(pos);
            // SAFETY: a held or dead line's key is written and owned by this array, a held
            // line's word is its cell (nothing is frozen between locked sections); `&mut self`
            // rules out readers.
            unsafe {
                match mark {
                    Mark::Held => {
                        ptr::drop_in_place((*write(&line.key)).as_mut_ptr());
                        cell::drop_cell::<A>(line.word.load_word(Ordering::Relaxed));
                    }
                    Mark::Dead => ptr::drop_in_place((*write(&line.key)).as_mut_ptr()),
                    Mark::Vacant | Mark::Free => {}
                }
            }
        }
        // Replaced arrays drop the keys and cells they still own; the dead lines' cells go here.
        for place in writer.retired.drain_all() {
            // SAFETY: a dead line's cell, dropped once (its line's key was dropped above).
            unsafe { cell::drop_cell::<A>(place.cell) };
        }
    }
}

/// The fence of [`LineShard::still_linked_after_rmw`] on x86: none but the compiler's. There a
/// locked instruction is a full barrier: the cell's compare-and-swap that ended the write has
/// drained the store buffer, so the load after it cannot be satisfied before it, which is what
/// `still_linked`'s SeqCst fence provides against the lock holder's fence (a `lock or`, as dear
/// as the compare-and-swap itself). The compiler fence keeps the compiler from moving the load
/// above the write. Only while the 128-bit compare-and-swap is `cmpxchg16b`: on a CPU without it
/// (or a virtual machine that hides it) portable-atomic takes a lock, whose release is a plain
/// store, and the full fence is needed.
#[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri), not(kova_loom)))]
#[inline(always)]
fn after_rmw_fence() {
    use crate::loom::AtomicU128;
    if AtomicU128::is_always_lock_free() || AtomicU128::is_lock_free() {
        crate::loom::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        // SeqCst: as in `still_linked`.
        fence(Ordering::SeqCst);
    }
}

/// The portable form, and loom's and Miri's: the SeqCst fence of `still_linked`.
#[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri), not(kova_loom))))]
#[inline(always)]
fn after_rmw_fence() {
    // SeqCst: as in `still_linked`.
    fence(Ordering::SeqCst);
}
