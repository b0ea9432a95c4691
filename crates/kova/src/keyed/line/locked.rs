//! A shard with its lock held: the lock holder's side of `line/shard.rs`'s protocol (inserts,
//! removals, looks before an unlink, rehashes) and the reclamation of what it retired.

use std::ptr;

use super::super::epoch::Guard;
use super::super::lock::MutexGuard;
use super::super::quotas::QuotaId;
use super::super::reclaim::RetiredPlace;
use super::super::scan_order::ScanOrder;
use super::super::word::{Freezer, FROZEN, TOMB, VACANT};
use super::array::{home, read, write, Line, LineArray, OwnedArray, RetiredLines, GROUP_LINES};
use super::cell::{self, boxed};
use super::prefetch::prefetch_line;
use super::shard::{LineShard, LineWriter, Mark};
use super::sizing::{fits, grown_lines, lines_for, start_lines, RETIRED_ARRAYS};
use crate::loom::atomic::{fence, Ordering};
use crate::loom::AddressWord;
use crate::Algorithm;

/// The shard with its lock held, on a pinned thread.
pub(in crate::keyed) struct LineLocked<'a, K, A: Algorithm> {
    shard: &'a LineShard<K, A>,
    writer: MutexGuard<'a, LineWriter<K, A>>,
    guard: &'a Guard,
    /// Whether this section announced an insert ([`announce_insert`](Self::announce_insert)).
    inserting: bool,
}

/// What a look at a held line's cell stopped (`LineLocked::look`), to be undone when the key
/// stays.
struct Look<C> {
    /// The word the line held: the inline state, or the boxed cell's address.
    value: AddressWord,
    /// The frozen state, when the cell is a word (inline, or a boxed cell's own word).
    frozen: Option<C>,
}

impl<K, A: Algorithm> LineShard<K, A> {
    /// Takes the lock, first handing back what finished its grace period.
    pub(in crate::keyed) fn lock<'a>(&'a self, guard: &'a Guard) -> LineLocked<'a, K, A> {
        let mut locked = LineLocked { shard: self, writer: self.cold.lock(), guard, inserting: false };
        locked.collect(false);
        locked
    }
}

impl<K, A: Algorithm> LineLocked<'_, K, A> {
    fn line(&self, pos: usize) -> &Line<K> {
        self.writer.array.line(pos)
    }

    /// The pin the lock is held under (`table/hot.rs` stamps a demoted slot with it).
    pub(in crate::keyed) fn guard(&self) -> &Guard {
        self.guard
    }

    /// The cell of the held line `pos`.
    pub(in crate::keyed) fn cell(&self, pos: usize) -> &A::Cell {
        let word = &self.line(pos).word;
        // Relaxed: under the lock, a held line's word is only written by checks (an inline
        // state, which `cell` does not read) or by us.
        // SAFETY: a held line's word; we hold the lock, so its cell is not dropped.
        unsafe { cell::cell::<A>(word, word.load_word(Ordering::Relaxed)) }
    }

    /// Drops the keys (and boxed cells) of removed lines whose grace period has ended, making
    /// them reusable, and frees replaced arrays; `urgent` when the section needs the room now
    /// (`Retired::collect`).
    #[expect(
        clippy::indexing_slicing,
        reason = "a retired place is a line of the current array: a rehash hands the places retired so far to the old array"
    )]
    fn collect(&mut self, urgent: bool) {
        let ready = self.writer.retired.collect(self.guard, urgent);
        for place in ready.places {
            let pos = place.line as usize;
            debug_assert_eq!(self.writer.marks[pos], Mark::Dead);
            // Free before the drops: a user's key or cell whose drop panics is dropped (its
            // fields are, as it unwinds) and must never be dropped again, as the shard's own
            // drop would drop a dead line's key. The places after it then stay dead: their
            // keys are dropped with the shard, their cells leak, nothing is dropped twice.
            self.writer.marks[pos] = Mark::Free;
            self.writer.cell_bytes -= cell::held_bytes::<A>(place.heap);
            // SAFETY: removed before a grace period that has ended: no check reads the key or
            // the cell; we hold the lock.
            unsafe {
                ptr::drop_in_place((*write(&self.line(pos).key)).as_mut_ptr());
                cell::drop_cell::<A>(place.cell);
            }
            self.vacate_run_end(pos);
        }
    }

    /// Makes the free line `pos` vacant again when the line after it is vacant, and so on back
    /// through the free lines before it: no probe needs to pass them, since no key was ever
    /// placed by passing the vacant line after them, so `find` stops there as it would one line
    /// later. Fewer lines in use mean fewer rehashes to shed them.
    #[expect(
        clippy::indexing_slicing,
        reason = "marks has one entry per line of the writer's array, and every position comes from home/next/prev over that array"
    )]
    fn vacate_run_end(&mut self, mut pos: usize) {
        let w = &mut *self.writer;
        while w.marks[pos] == Mark::Free && w.marks[w.array.next(pos)] == Mark::Vacant {
            // Relaxed: a check that loads `VACANT` reads nothing else from the line.
            w.array.line(pos).word.store(VACANT, Ordering::Relaxed);
            w.marks[pos] = Mark::Vacant;
            w.removed -= 1;
            pos = w.array.prev(pos);
        }
    }

    /// The first line from `hash`'s home a new key can take: vacant, or free.
    #[expect(
        clippy::indexing_slicing,
        reason = "marks has one entry per line of the writer's array, and every position comes from home/next/prev over that array"
    )]
    fn open_line(&self, hash: u64) -> usize {
        let w = &*self.writer;
        let mut pos = home(hash, w.array.len());
        while !matches!(w.marks[pos], Mark::Vacant | Mark::Free) {
            pos = w.array.next(pos);
        }
        pos
    }

    /// Writes `key` with the word `value` (`cell::into_word`, a cell owning `heap` heap
    /// bytes) and `quota` into the open line `pos`, and publishes it.
    #[expect(
        clippy::indexing_slicing,
        reason = "marks has one entry per line of the writer's array, and every position comes from home/next/prev over that array"
    )]
    fn fill(&mut self, pos: usize, key: K, value: AddressWord, heap: usize, quota: QuotaId) {
        let w = &mut *self.writer;
        let line = w.array.line(pos);
        // SAFETY: the line is vacant or free (its key dropped after its grace period): no
        // reference to its key exists, and we hold the lock.
        unsafe { (*write(&line.key)).write(key) };
        w.array.set_quota(pos, quota);
        // Release: a check that loads this word (Acquire) sees the key and id written (and a
        // boxed cell's contents).
        line.word.store_word(value, Ordering::Release);
        if w.marks[pos] == Mark::Free {
            w.removed -= 1;
        }
        w.marks[pos] = Mark::Held;
        w.held += 1;
        w.cell_bytes += cell::held_bytes::<A>(heap);
    }

    /// Marks the held line `pos` dead: `TOMB` over its word, and its key (and its cell, whose
    /// word was `value` before any look, owning `heap` heap bytes) retired.
    #[expect(
        clippy::indexing_slicing,
        reason = "marks has one entry per line of the writer's array, and every position comes from home/next/prev over that array"
    )]
    fn bury(&mut self, pos: usize, value: AddressWord, heap: usize) {
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
    #[expect(
        clippy::indexing_slicing,
        reason = "positions come from 0..array.len() and home/next over the fresh array, as long as the new marks"
    )]
    fn rehash(&mut self, len: usize, hash_key: &impl Fn(&K) -> u64, keep: usize) -> usize {
        // User code first: nothing is frozen if a `Hash` panics.
        let held: Vec<(usize, u64)> = (0..self.writer.array.len())
            .filter(|&pos| self.writer.marks[pos] == Mark::Held)
            // SAFETY: a held line's key is written; we hold the lock.
            .map(|pos| (pos, hash_key(unsafe { self.line(pos).key() })))
            .collect();
        let w = &mut *self.writer;
        let fresh = OwnedArray::<K>::new(len);
        let mut marks = vec![Mark::Vacant; len];
        let mut kept = keep;
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
            fresh.line(to).word.store_word(value, Ordering::Relaxed);
            marks[to] = Mark::Held;
            if from == keep {
                kept = to;
            }
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
        w.cell_bytes -= doomed.iter().map(|place| cell::held_bytes::<A>(place.heap)).sum::<usize>();
        w.retired.array(RetiredLines::new(old, doomed));
        w.marks = marks;
        w.removed = 0;
        w.cursor = 0;
        kept
    }

    fn memory(&self) -> usize {
        let w = &*self.writer;
        w.array.bytes() + w.marks.capacity() * std::mem::size_of::<Mark>() + w.retired.bytes() + w.cell_bytes
    }

    /// Stops checks from writing the held line `pos`'s cell before the lock holder looks at it
    /// (module docs): an inline word is frozen; a boxed cell's line is hidden, then its own
    /// word frozen if it has one. `f` gets the state to look at: the frozen copy, or the hidden
    /// cell itself.
    #[expect(
        clippy::unreachable,
        reason = "an inline cell is one AtomicU64, and the word freezer freezes every word"
    )]
    fn look<R>(
        &self,
        pos: usize,
        freezer: &impl Freezer<A::Cell>,
        f: impl FnOnce(&A::Cell) -> R,
    ) -> (R, Look<A::Cell>) {
        let word = &self.line(pos).word;
        if !boxed::<A>() {
            // Relaxed: only to keep the shape of `Look`; the freeze below reads the state.
            let value = word.load_word(Ordering::Relaxed);
            let Some(copy) = freezer.freeze(self.cell(pos)) else {
                unreachable!("an inline cell is a word, which freezes");
            };
            let look = Look { value, frozen: Some(copy) };
            let restore = Restore { locked: self, pos, freezer, look: &look };
            let result = f(look.frozen.as_ref().unwrap_or(self.cell(pos)));
            restore.disarm();
            return (result, look);
        }
        // SeqCst, then the fence: in the total order with a check's fence after its write
        // (`still_linked`), so that either the read below sees the write or the check sees the
        // line hidden (`line/cell.rs`).
        let value = word.swap(FROZEN, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // SAFETY: the word a held line held; we hold the lock, so the cell is not dropped.
        let cell = unsafe { cell::cell::<A>(word, value) };
        let hidden = Look { value, frozen: None };
        let restore = Restore { locked: self, pos, freezer, look: &hidden };
        let frozen = freezer.freeze(cell);
        restore.disarm();
        let look = Look { value, frozen };
        let restore = Restore { locked: self, pos, freezer, look: &look };
        let result = f(look.frozen.as_ref().unwrap_or(cell));
        restore.disarm();
        (result, look)
    }

    /// Undoes [`look`](Self::look) for a key that stays: checks decide on the cell again.
    fn unlook(&self, pos: usize, look: &Look<A::Cell>, freezer: &impl Freezer<A::Cell>) {
        let word = &self.line(pos).word;
        if !boxed::<A>() {
            if let Some(copy) = &look.frozen {
                freezer.thaw(self.cell(pos), copy);
            }
            return;
        }
        // SAFETY: as in `look`.
        let cell = unsafe { cell::cell::<A>(word, look.value) };
        if let Some(copy) = &look.frozen {
            freezer.thaw(cell, copy);
        }
        // Release: a check that loads the address (Acquire) sees the cell as we left it.
        word.store_word(look.value, Ordering::Release);
    }
}

/// A look under way: if what runs during it unwinds (a user's `Algorithm` that panics while
/// the lock holder asks whether a key is idle, or carries its state to another quota), the
/// line is put back as the look found it ([`LineLocked::unlook`]), so that no check, and no
/// drop of the shard, ever meets a frozen word or a hidden line of a key that stays.
struct Restore<'l, 's, K, A: Algorithm, F: Freezer<A::Cell>> {
    locked: &'l LineLocked<'s, K, A>,
    pos: usize,
    freezer: &'l F,
    look: &'l Look<A::Cell>,
}

impl<K, A: Algorithm, F: Freezer<A::Cell>> Restore<'_, '_, K, A, F> {
    /// The look went on without unwinding: the line stays as it is for the caller.
    fn disarm(self) {
        // Nothing is owned here (every field is a reference): forgetting it only skips `drop`.
        std::mem::forget(self);
    }
}

impl<K, A: Algorithm, F: Freezer<A::Cell>> Drop for Restore<'_, '_, K, A, F> {
    fn drop(&mut self) {
        self.locked.unlook(self.pos, self.look, self.freezer);
    }
}

/// A key to put in a line: its hash, the key, its quota, and the heap bytes its cell owns.
pub(in crate::keyed) struct NewKey<K> {
    pub(in crate::keyed) hash: u64,
    pub(in crate::keyed) key: K,
    pub(in crate::keyed) quota: QuotaId,
    pub(in crate::keyed) heap: usize,
}

/// The lock holder's operations. A key is named by its position in the current array, valid
/// until the lock is released or a change through it moves the key (a rehash).
impl<K, A: Algorithm> LineLocked<'_, K, A> {
    /// Finds `key` (authoritative): its position.
    #[expect(
        clippy::indexing_slicing,
        reason = "marks has one entry per line of the writer's array, and every position comes from home/next/prev over that array"
    )]
    pub(in crate::keyed) fn find(&self, hash: u64, key: &K) -> Option<usize>
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
    #[expect(
        clippy::indexing_slicing,
        reason = "callers pass positions of this array: from find, or a sweep over 0..array.len()"
    )]
    pub(in crate::keyed) fn is_held(&self, pos: usize) -> bool {
        self.writer.marks[pos] == Mark::Held
    }

    /// The key of the held line `pos`.
    pub(in crate::keyed) fn key(&self, pos: usize) -> &K {
        debug_assert!(self.is_held(pos));
        // SAFETY: a held line's key is written; we hold the lock.
        unsafe { self.line(pos).key() }
    }

    /// The quota of the held line `pos`.
    pub(in crate::keyed) fn quota(&self, pos: usize) -> QuotaId {
        self.writer.array.quota_at(pos)
    }

    /// What [`LineHit::place`](super::shard::LineHit::place) says for the key of the held line `pos` found without the lock.
    pub(in crate::keyed) fn place_of(&self, pos: usize) -> u64 {
        if boxed::<A>() {
            // Relaxed: under the lock, only we write a boxed cell's line word.
            self.line(pos).word.load(Ordering::Relaxed)
        } else {
            pos as u64
        }
    }

    /// Whether the shard holds its most keys.
    pub(in crate::keyed) fn is_full(&self) -> bool {
        self.writer.held >= self.writer.max_keys
    }

    /// Room for one more line, rehashing when the array is full (of held keys, or of held and
    /// removed lines): into a bigger array when the held keys need it (by at least
    /// `GROWTH_NUM`/`GROWTH_DEN`, so that growth is geometric), else into one of the same
    /// size (shedding tombstones), or a smaller one when it is four times what the held keys
    /// need. Replaced arrays wait for their grace period; a rehash waits (`false` when it must)
    /// while they hold more than [`RETIRED_ARRAYS`] times the new array, or than the shard's
    /// largest array (for small arrays, shedding often), so that they stay bounded. Meanwhile
    /// the array is used past its load bound, up to its last open line.
    pub(in crate::keyed) fn make_space(&mut self, hash_key: &impl Fn(&K) -> u64) -> bool {
        self.make_space_keeping(usize::MAX, hash_key).is_some()
    }

    /// [`make_space`](Self::make_space), saying where the held line `keep` is afterwards (a
    /// rehash moves it): known from the move itself, never found again through the key's
    /// `Eq` and `Hash`, which a user's key type may make disagree.
    fn make_space_keeping(&mut self, keep: usize, hash_key: &impl Fn(&K) -> u64) -> Option<usize> {
        for attempt in 0..3 {
            let w = &*self.writer;
            let len = w.array.len();
            if fits(w.held + 1, w.held + w.removed + 1, len) {
                return Some(keep);
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
                return Some(self.rehash(target, hash_key, keep));
            }
            if attempt < 2 {
                // Seal what this section retired so far, collect what earlier sections sealed
                // (advancing the epoch if they wait for it), and look again.
                self.writer.retired.seal(self.guard);
                self.collect(true);
            }
        }
        // A line is still open (the load bound is below 1): use it rather than wait.
        let w = &*self.writer;
        (w.held + w.removed + 1 < w.array.len()).then_some(keep)
    }

    /// Inserts `new.key` (absent, checked by the caller, with room made by
    /// [`make_space`](Self::make_space)) with `cell`; returns its position.
    pub(in crate::keyed) fn insert(&mut self, new: NewKey<K>, cell: A::Cell) -> usize {
        let pos = self.open_line(new.hash);
        self.fill(pos, new.key, cell::into_word::<A>(cell), new.heap, new.quota);
        pos
    }

    /// Announces that this section may make a key present (an insert, or a quota move's
    /// re-insert) before it reads the doorkeeper for it, so that a door admission of that key
    /// without the lock either is seen here or sees the announcement (`lock.rs`). Once per
    /// section; ended when the section ends.
    pub(in crate::keyed) fn announce_insert(&mut self) {
        if !self.inserting {
            self.inserting = true;
            self.shard.cold.begin_insert();
        }
    }

    /// Removes the key of the held line `pos`, whose cell owns `heap` heap bytes.
    pub(in crate::keyed) fn remove(&mut self, pos: usize, heap: usize) {
        // Relaxed: under the lock, only we write a boxed cell's line word (an inline one's
        // value is not kept).
        let value = self.line(pos).word.load_word(Ordering::Relaxed);
        self.bury(pos, value, heap);
    }

    /// Removes the key of the held line `pos` (its cell owning `heap` heap bytes) unless `keep`
    /// says otherwise after looking at its cell, with racing checks either seen or redone;
    /// returns whether it was removed.
    pub(in crate::keyed) fn unlink_if(
        &mut self,
        pos: usize,
        heap: usize,
        keep: impl FnOnce(&A::Cell) -> bool,
        freezer: &impl Freezer<A::Cell>,
    ) -> bool {
        let (kept, look) = self.look(pos, freezer, keep);
        if kept {
            self.unlook(pos, &look, freezer);
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
    pub(in crate::keyed) fn replace(
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
        // A rehash may move the key: to where it says.
        let Some(pos) = self.make_space_keeping(pos, hash_key) else {
            return Err(new.key);
        };
        let (cell, look) = self.look(pos, freezer, build);
        self.bury(pos, look.value, old_heap);
        Ok(self.insert(new, cell))
    }

    /// Positions [`is_held`](Self::is_held) can look at.
    pub(in crate::keyed) fn positions(&self) -> usize {
        self.writer.array.len()
    }

    /// Whether the line `pos` is in use: held, or removed and not vacant again.
    #[cfg(test)]
    pub(in crate::keyed) fn is_in_use(&self, pos: usize) -> bool {
        self.writer.marks[pos] != Mark::Vacant
    }

    /// The length of each run of positions in use (held or removed) that a probe may pass; a
    /// run across the end of the array, where probes wrap, counts once.
    #[cfg(test)]
    pub(in crate::keyed) fn run_lengths(&self) -> Vec<usize> {
        let mut runs: Vec<usize> =
            self.writer.marks.split(|&mark| mark == Mark::Vacant).map(<[Mark]>::len).collect();
        if runs.len() > 1 {
            let last = runs.pop().unwrap_or(0);
            runs[0] += last;
        }
        runs.retain(|&len| len > 0);
        runs
    }

    /// The order the reclamation scan visits positions in.
    pub(in crate::keyed) fn scan_order(&self) -> ScanOrder {
        debug_assert_eq!(self.writer.scan, ScanOrder::new(self.positions()));
        self.writer.scan
    }

    /// Asks the cache for the lines and marks of the next `positions` positions of the
    /// reclamation scan from `from`: the next scan of a full shard comes a few inserts later,
    /// and in a large table each of its lines is otherwise a miss taken under the lock. A hint
    /// only: nothing is read.
    #[expect(
        clippy::indexing_slicing,
        reason = "marks has one entry per line of the writer's array, and the scan order stays within it"
    )]
    pub(in crate::keyed) fn prefetch_scan(&self, from: usize, positions: usize) {
        let order = self.scan_order();
        let mut pos = from;
        for step in 0..positions {
            // Two lines share a cache line, and a cache line of marks holds a whole run.
            if step % 2 == 0 {
                prefetch_line(ptr::from_ref(self.line(pos)));
            }
            if step % 8 == 0 {
                prefetch_line(ptr::from_ref(&self.writer.marks[pos]));
            }
            pos = order.next(pos);
        }
    }

    /// The most keys the shard holds.
    pub(in crate::keyed) fn max_keys(&self) -> usize {
        self.writer.max_keys
    }

    /// Where the reclamation scan resumes.
    pub(in crate::keyed) fn cursor(&self) -> usize {
        self.writer.cursor % self.positions()
    }

    pub(in crate::keyed) fn set_cursor(&mut self, cursor: usize) {
        self.writer.cursor = cursor;
    }
}

impl<K, A: Algorithm> Drop for LineLocked<'_, K, A> {
    /// Seals what this section retired, publishes the figures and ends an announced insert.
    fn drop(&mut self) {
        self.writer.retired.seal(self.guard);
        let memory = self.memory();
        self.shard.cold.publish(self.writer.held, memory);
        if self.inserting {
            self.shard.cold.end_insert();
        }
    }
}
