//! A shard: its keys sit beside their words in the probed array itself (a "line",
//! `line_array.rs`), so a check of a held key reads one line of the table, and the line's word
//! is the key's cell, or the address of its boxed cell (`line_cell.rs`).
//!
//! # Protocol
//! A line's word is the key's cell (or its address), or a marker (`word.rs`): [`VACANT`] (never
//! used: a probe ends here), [`TOMB`] (its key was removed: a probe goes on, and must not read
//! the key), or [`FROZEN`] (the lock holder is looking at it). The lock holder keeps the
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
//!   (`line_cell.rs`) and freezing the cell's own word when it has one, then storing `TOMB` or
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

use super::epoch::Guard;
use super::line_array::{
    home, prefetch_line, read, write, Line, LineArray, OwnedArray, RetiredLines, GROUP_LINES, PREFETCH_LINES,
    PROBE_AHEAD,
};
use super::line_cell::{self, boxed};
use super::line_sizing::{fits, grown_lines, lines_for, start_lines, RETIRED_ARRAYS};
use super::lock::{Cold, MutexGuard};
use super::quotas::QuotaId;
use super::reclaim::{Retired, RetiredPlace};
use super::scan_order::ScanOrder;
use super::word::{Freezer, FROZEN, MARKERS, TOMB, VACANT};
use crate::loom::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use crate::Algorithm;

/// The most keys one shard holds, so that a rehash, which holds the shard's lock while it moves
/// every key, stays short: bigger tables get more shards (`KeyedBuilder::build`).
pub(super) const MAX_KEYS: usize = 1 << 24;

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

/// What the lock protects.
struct LineWriter<K, A: Algorithm> {
    max_keys: usize,
    array: OwnedArray<K>,
    marks: Vec<Mark>,
    /// Held keys.
    held: usize,
    /// `Dead` and `Free` lines.
    removed: usize,
    /// Removed lines (`Dead`) and replaced arrays.
    retired: Retired<RetiredLines<K, A>>,
    /// Bytes of boxed cells (`line_cell.rs`), held and retired, heap included.
    cell_bytes: usize,
    cursor: usize,
    /// The reclamation scan's order over the current array.
    scan: ScanOrder,
}

/// The part every check reads.
struct Hot<K> {
    /// The current array (the writer's); set under the lock.
    view: AtomicPtr<LineArray<K>>,
    /// Its lines and their number, for [`LineShard::prefetch`] only: read unpinned, they may be
    /// stale or from two arrays, which only makes the hint wrong.
    hint_lines: AtomicPtr<Line<K>>,
    hint_len: AtomicUsize,
}

/// A shard of lines for algorithm `A`.
pub(super) struct LineShard<K, A: Algorithm> {
    hot: CachePadded<Hot<K>>,
    cold: CachePadded<Cold<LineWriter<K, A>>>,
}

/// A key found without the lock.
pub(super) struct LineHit<'g, A: Algorithm> {
    word: &'g AtomicU64,
    /// The word as loaded: a boxed cell's address.
    value: u64,
    cell: &'g A::Cell,
    quota: QuotaId,
    pos: u32,
}

impl<A: Algorithm> Clone for LineHit<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: Algorithm> Copy for LineHit<'_, A> {}

impl<'g, A: Algorithm> LineHit<'g, A> {
    #[inline(always)]
    pub(super) fn cell(&self) -> &'g A::Cell {
        self.cell
    }

    #[inline(always)]
    pub(super) fn quota(&self) -> QuotaId {
        self.quota
    }

    /// A boxed cell's address: the cell stays the key's until it is unlinked, wherever its line
    /// moves. The position, for an inline word (whose writes always stand).
    pub(super) fn place(&self) -> u64 {
        if boxed::<A>() {
            self.value
        } else {
            u64::from(self.pos)
        }
    }
}

impl<K, A: Algorithm> LineShard<K, A> {
    /// A shard of at most `max_keys` keys (at most [`MAX_KEYS`]).
    pub(super) fn new(max_keys: usize) -> Self {
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
    pub(super) fn bound_bytes(max_keys: usize, cell_bytes: usize) -> usize {
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
    /// cache miss overlaps the pin). A hint: it reads nothing it relies on.
    #[inline(always)]
    pub(super) fn prefetch(&self, hash: u64) {
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
    /// `None` is not proof of absence: the key's line may be frozen, or in an array that has
    /// just been replaced.
    #[inline(always)]
    pub(super) fn find<'g>(&'g self, hash: u64, key: &K, _guard: &'g Guard) -> Option<LineHit<'g, A>>
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
                if boxed::<A>() && word >= MARKERS {
                    // Frozen: the lock holder is looking at it, and there is no cell to reach.
                    return None;
                }
                // SAFETY: a held line's word, loaded while pinned (and we stay so for `'g`).
                let cell = unsafe { line_cell::cell::<A>(&line.word, word) };
                let quota = array.quota_at(pos);
                return Some(LineHit { word: &line.word, value: word, cell, quota, pos: pos as u32 });
            }
            pos += 1;
            if pos == len {
                pos = 0;
            }
        }
        None
    }

    /// An inline word is frozen before any look: a check's write always stands. A boxed cell's
    /// line is hidden instead, so the check looks at it again after its write (`line_cell.rs`).
    pub(super) fn still_linked(&self, hit: &LineHit<'_, A>) -> bool {
        if !boxed::<A>() {
            return true;
        }
        // SeqCst: orders the check's write of the cell before this load in the total order
        // with the lock holder's fence after it hid the line (`line_cell.rs`).
        fence(Ordering::SeqCst);
        // Relaxed: the fences order it; nothing is read through it.
        hit.word.load(Ordering::Relaxed) == hit.value
    }

    /// Takes the lock, first handing back what finished its grace period.
    pub(super) fn lock<'a>(&'a self, guard: &'a Guard) -> LineLocked<'a, K, A> {
        let mut locked = LineLocked { shard: self, writer: self.cold.lock(), guard };
        locked.collect();
        locked
    }

    /// Keys held (a snapshot).
    pub(super) fn len(&self) -> usize {
        self.cold.len()
    }

    /// Bytes held (a snapshot), the shard struct itself not included.
    pub(super) fn memory(&self) -> usize {
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
                        line_cell::drop_cell::<A>(line.word.load(Ordering::Relaxed));
                    }
                    Mark::Dead => ptr::drop_in_place((*write(&line.key)).as_mut_ptr()),
                    Mark::Vacant | Mark::Free => {}
                }
            }
        }
        // Replaced arrays drop the keys and cells they still own; the dead lines' cells go here.
        for place in writer.retired.drain_all() {
            // SAFETY: a dead line's cell, dropped once (its line's key was dropped above).
            unsafe { line_cell::drop_cell::<A>(place.cell) };
        }
    }
}

/// The shard with its lock held, on a pinned thread.
pub(super) struct LineLocked<'a, K, A: Algorithm> {
    shard: &'a LineShard<K, A>,
    writer: MutexGuard<'a, LineWriter<K, A>>,
    guard: &'a Guard,
}

/// Bytes a boxed cell owning `heap` heap bytes takes (none for an inline cell: the line is it).
fn boxed_bytes<A: Algorithm>(heap: usize) -> usize {
    if boxed::<A>() {
        std::mem::size_of::<A::Cell>() + heap
    } else {
        0
    }
}

/// What a look at a held line's cell stopped (`LineLocked::look`), to be undone when the key
/// stays.
struct Look<C> {
    /// The word the line held: the inline state, or the boxed cell's address.
    value: u64,
    /// The frozen state, when the cell is a word (inline, or a boxed cell's own word).
    frozen: Option<C>,
}

impl<K, A: Algorithm> LineLocked<'_, K, A> {
    fn line(&self, pos: usize) -> &Line<K> {
        self.writer.array.line(pos)
    }

    /// The cell of the held line `pos`.
    pub(super) fn cell(&self, pos: usize) -> &A::Cell {
        let word = &self.line(pos).word;
        // Relaxed: under the lock, a held line's word is only written by checks (an inline
        // state, which `cell` does not read) or by us.
        // SAFETY: a held line's word; we hold the lock, so its cell is not dropped.
        unsafe { line_cell::cell::<A>(word, word.load(Ordering::Relaxed)) }
    }

    /// Drops the keys (and boxed cells) of removed lines whose grace period has ended, making
    /// them reusable, and frees replaced arrays.
    fn collect(&mut self) {
        let ready = self.writer.retired.collect(self.guard);
        for place in ready.places {
            let pos = place.line as usize;
            debug_assert_eq!(self.writer.marks[pos], Mark::Dead);
            // SAFETY: removed before a grace period that has ended: no check reads the key or
            // the cell; we hold the lock.
            unsafe {
                ptr::drop_in_place((*write(&self.line(pos).key)).as_mut_ptr());
                line_cell::drop_cell::<A>(place.cell);
            }
            self.writer.cell_bytes -= boxed_bytes::<A>(place.heap);
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

    /// Writes `key` with the word `value` (`line_cell::into_word`, a cell owning `heap` heap
    /// bytes) and `quota` into the open line `pos`, and publishes it.
    fn fill(&mut self, pos: usize, key: K, value: u64, heap: usize, quota: QuotaId) {
        let w = &mut *self.writer;
        let line = w.array.line(pos);
        // SAFETY: the line is vacant or free (its key dropped after its grace period): no
        // reference to its key exists, and we hold the lock.
        unsafe { (*write(&line.key)).write(key) };
        w.array.set_quota(pos, quota);
        // Release: a check that loads this word (Acquire) sees the key and id written (and a
        // boxed cell's contents).
        line.word.store(value, Ordering::Release);
        if w.marks[pos] == Mark::Free {
            w.removed -= 1;
        }
        w.marks[pos] = Mark::Held;
        w.held += 1;
        w.cell_bytes += boxed_bytes::<A>(heap);
    }

    /// Marks the held line `pos` dead: `TOMB` over its word, and its key (and its cell, whose
    /// word was `value` before any look, owning `heap` heap bytes) retired.
    fn bury(&mut self, pos: usize, value: u64, heap: usize) {
        let w = &mut *self.writer;
        // An exchange, like a freeze, so that both sides of a race with a check's CAS are
        // read-modify-writes of the word: the CAS came before (and is counted before the
        // removal) or fails and finds the marker. AcqRel as in a freeze; a check that loads
        // `TOMB` reads no key, so nothing is published through it.
        w.array.line(pos).word.swap(TOMB, Ordering::AcqRel);
        w.marks[pos] = Mark::Dead;
        w.held -= 1;
        w.removed += 1;
        w.retired.place(RetiredPlace { line: pos as u32, heap, cell: value });
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
        // The dead lines' keys and cells go with the old array, which counts their bytes from
        // now on; free lines' were dropped already.
        let doomed: Vec<RetiredPlace> = w.retired.take_places();
        w.cell_bytes -= doomed.iter().map(|place| boxed_bytes::<A>(place.heap)).sum::<usize>();
        w.retired.array(RetiredLines::new(old, doomed));
        w.marks = marks;
        w.removed = 0;
        w.cursor = 0;
    }

    fn memory(&self) -> usize {
        let w = &*self.writer;
        w.array.bytes() + w.marks.capacity() * std::mem::size_of::<Mark>() + w.retired.bytes() + w.cell_bytes
    }

    /// Stops checks from writing the held line `pos`'s cell before the lock holder looks at it
    /// (module docs): an inline word is frozen; a boxed cell's line is hidden, then its own
    /// word frozen if it has one. `f` gets the state to look at: the frozen copy, or the hidden
    /// cell itself.
    fn look<R>(
        &self,
        pos: usize,
        freezer: &impl Freezer<A::Cell>,
        f: impl FnOnce(&A::Cell) -> R,
    ) -> (R, Look<A::Cell>) {
        let word = &self.line(pos).word;
        if !boxed::<A>() {
            // Relaxed: only to keep the shape of `Look`; the freeze below reads the state.
            let value = word.load(Ordering::Relaxed);
            let Some(copy) = freezer.freeze(self.cell(pos)) else {
                unreachable!("an inline cell is a word, which freezes");
            };
            return (f(&copy), Look { value, frozen: Some(copy) });
        }
        // SeqCst, then the fence: in the total order with a check's fence after its write
        // (`still_linked`), so that either the read below sees the write or the check sees the
        // line hidden (`line_cell.rs`).
        let value = word.swap(FROZEN, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // SAFETY: the word a held line held; we hold the lock, so the cell is not dropped.
        let cell = unsafe { line_cell::cell::<A>(word, value) };
        let frozen = freezer.freeze(cell);
        let result = f(frozen.as_ref().unwrap_or(cell));
        (result, Look { value, frozen })
    }

    /// Undoes [`look`](Self::look) for a key that stays: checks decide on the cell again.
    fn unlook(&self, pos: usize, look: Look<A::Cell>, freezer: &impl Freezer<A::Cell>) {
        let word = &self.line(pos).word;
        if !boxed::<A>() {
            if let Some(copy) = &look.frozen {
                freezer.thaw(self.cell(pos), copy);
            }
            return;
        }
        // SAFETY: as in `look`.
        let cell = unsafe { line_cell::cell::<A>(word, look.value) };
        if let Some(copy) = &look.frozen {
            freezer.thaw(cell, copy);
        }
        // Release: a check that loads the address (Acquire) sees the cell as we left it.
        word.store(look.value, Ordering::Release);
    }
}

/// A key to put in a line: its hash, the key, its quota, and the heap bytes its cell owns.
pub(super) struct NewKey<K> {
    pub(super) hash: u64,
    pub(super) key: K,
    pub(super) quota: QuotaId,
    pub(super) heap: usize,
}

/// The lock holder's operations. A key is named by its position in the current array, valid
/// until the lock is released or a change through it moves the key (a rehash).
impl<K, A: Algorithm> LineLocked<'_, K, A> {
    /// Finds `key` (authoritative): its position.
    pub(super) fn find(&self, hash: u64, key: &K) -> Option<usize>
    where
        K: Eq,
    {
        let w = &*self.writer;
        let mut pos = home(hash, w.array.len());
        for _ in 0..w.array.len() {
            match w.marks[pos] {
                Mark::Vacant => return None,
                // SAFETY: a held line's key is written; we hold the lock.
                Mark::Held if unsafe { self.line(pos).key() } == key => return Some(pos),
                _ => {}
            }
            pos = w.array.next(pos);
        }
        None
    }

    /// Whether position `pos` holds a key.
    pub(super) fn is_held(&self, pos: usize) -> bool {
        self.writer.marks[pos] == Mark::Held
    }

    /// The key of the held line `pos`.
    pub(super) fn key(&self, pos: usize) -> &K {
        debug_assert!(self.is_held(pos));
        // SAFETY: a held line's key is written; we hold the lock.
        unsafe { self.line(pos).key() }
    }

    /// The quota of the held line `pos`.
    pub(super) fn quota(&self, pos: usize) -> QuotaId {
        self.writer.array.quota_at(pos)
    }

    /// What [`LineHit::place`] says for the key of the held line `pos` found without the lock.
    pub(super) fn place_of(&self, pos: usize) -> u64 {
        if boxed::<A>() {
            // Relaxed: under the lock, only we write a boxed cell's line word.
            self.line(pos).word.load(Ordering::Relaxed)
        } else {
            pos as u64
        }
    }

    /// Whether the shard holds its most keys.
    pub(super) fn is_full(&self) -> bool {
        self.writer.held >= self.writer.max_keys
    }

    /// Room for one more line, rehashing when the array is full (of held keys, or of held and
    /// removed lines): into a bigger array when the held keys need it (by at least
    /// [`GROWTH_NUM`]/[`GROWTH_DEN`], so that growth is geometric), else into one of the same
    /// size (shedding tombstones), or a smaller one when it is four times what the held keys
    /// need. Replaced arrays wait for their grace period; a rehash waits (`false` when it must)
    /// while they hold more than [`RETIRED_ARRAYS`] times the new array, or than the shard's
    /// largest array (for small arrays, shedding often), so that they stay bounded. Meanwhile
    /// the array is used past its load bound, up to its last open line.
    pub(super) fn make_space(&mut self, hash_key: &impl Fn(&K) -> u64) -> bool {
        for attempt in 0..3 {
            let w = &*self.writer;
            let len = w.array.len();
            if fits(w.held + 1, w.held + w.removed + 1, len) {
                return true;
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
                return true;
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
        w.held + w.removed + 1 < w.array.len()
    }

    /// Inserts `new.key` (absent, checked by the caller, with room made by
    /// [`make_space`](Self::make_space)) with `cell`; returns its position.
    pub(super) fn insert(&mut self, new: NewKey<K>, cell: A::Cell) -> usize {
        let pos = self.open_line(new.hash);
        self.fill(pos, new.key, line_cell::into_word::<A>(cell), new.heap, new.quota);
        pos
    }

    /// Removes the key of the held line `pos`, whose cell owns `heap` heap bytes.
    pub(super) fn remove(&mut self, pos: usize, heap: usize) {
        // Relaxed: under the lock, only we write a boxed cell's line word (an inline one's
        // value is not kept).
        let value = self.line(pos).word.load(Ordering::Relaxed);
        self.bury(pos, value, heap);
    }

    /// Removes the key of the held line `pos` (its cell owning `heap` heap bytes) unless `keep`
    /// says otherwise after looking at its cell, with racing checks either seen or redone;
    /// returns whether it was removed.
    pub(super) fn unlink_if(
        &mut self,
        pos: usize,
        heap: usize,
        keep: impl FnOnce(&A::Cell) -> bool,
        freezer: &impl Freezer<A::Cell>,
    ) -> bool {
        let (kept, look) = self.look(pos, freezer, keep);
        if kept {
            self.unlook(pos, look, freezer);
            return false;
        }
        self.bury(pos, look.value, heap);
        true
    }

    /// Moves the key of the held line `pos` (its cell owning `old_heap` heap bytes) to
    /// `new.quota`, with the cell `build` makes from its cell: the old line is buried and the key
    /// inserted again, in another line, so that a line's quota id never changes while it is held
    /// and a check never pairs a word with another quota's id. Gives the key back when there is
    /// no room free of its grace period.
    pub(super) fn replace(
        &mut self,
        pos: usize,
        old_heap: usize,
        new: NewKey<K>,
        build: impl FnOnce(&A::Cell) -> A::Cell,
        freezer: &impl Freezer<A::Cell>,
        hash_key: &impl Fn(&K) -> u64,
    ) -> Result<usize, K>
    where
        K: Eq,
    {
        if !self.make_space(hash_key) {
            return Err(new.key);
        }
        // A rehash may have moved the key.
        let pos = if self.is_held(pos) && self.key(pos) == &new.key {
            pos
        } else {
            match self.find(new.hash, &new.key) {
                Some(pos) => pos,
                None => return Err(new.key),
            }
        };
        let (cell, look) = self.look(pos, freezer, build);
        self.bury(pos, look.value, old_heap);
        Ok(self.insert(new, cell))
    }

    /// Positions [`is_held`](Self::is_held) can look at.
    pub(super) fn positions(&self) -> usize {
        self.writer.array.len()
    }

    /// The longest run of positions in use (held or removed) that a probe may pass.
    #[cfg(test)]
    pub(super) fn longest_run(&self) -> usize {
        let runs = self.writer.marks.split(|&mark| mark == Mark::Vacant);
        runs.map(<[Mark]>::len).max().unwrap_or(0)
    }

    /// The order the reclamation scan visits positions in.
    pub(super) fn scan_order(&self) -> ScanOrder {
        debug_assert_eq!(self.writer.scan, ScanOrder::new(self.positions()));
        self.writer.scan
    }

    /// Where the reclamation scan resumes.
    pub(super) fn cursor(&self) -> usize {
        self.writer.cursor % self.positions()
    }

    pub(super) fn set_cursor(&mut self, cursor: usize) {
        self.writer.cursor = cursor;
    }
}

impl<K, A: Algorithm> Drop for LineLocked<'_, K, A> {
    /// Seals what this section retired and publishes the figures.
    fn drop(&mut self) {
        self.writer.retired.seal(self.guard);
        let memory = self.memory();
        self.shard.cold.publish(self.writer.held, memory);
    }
}
