//! One shard of the slot layout: an index, the slots it names, and the lock that serialises
//! changes to them. The sliding log's tables (and [`AnyAlgorithm`](crate::AnyAlgorithm)'s) use
//! it; the four word algorithms' use lines (`line_shard.rs`).
//!
//! # Protocol
//! Readers (checks of a key the shard holds) pin the thread (`epoch.rs`), load the index
//! pointer and probe it, read the slot's key, and run the algorithm on the slot's cell. They take
//! no lock and write nothing else.
//!
//! The lock holder changes the index. Three kinds of change matter to a reader that is using a
//! slot at that moment:
//! - **Growing** the index: entries are copied to a bigger index and the old one retired. The
//!   slots do not move, so a reader still probing the old index updates the same cell.
//! - **Removing** a key: its entry is deleted (backward shift); the slot is retired. A reader
//!   that updated it concurrently is ordered before the removal.
//! - **Unlinking after a look** (evicting an idle key, replacing a key's slot when its quota
//!   changes): the decision depends on the cell's state, so an update racing with the look must
//!   not be lost. Two ways, chosen by the cell ([`Freezer`]):
//!   - A single-word cell is **frozen**: the lock holder swaps a marker into the word and looks
//!     at the value it swapped out (see `word.rs`). A check's CAS either came first (its write is
//!     in that value) or fails and finds the marker, and the check then redoes itself under the
//!     lock. Keeping the key puts the value back. Nothing is needed on the check's side after its
//!     CAS: this is the hit path of kova's four word algorithms.
//!   - Any other cell: its **entry is hidden**. The lock holder stores `BUSY` over the entry
//!     (`SeqCst`), issues a `SeqCst` fence, then reads the cell. A check that wrote the cell
//!     issues a `SeqCst` fence and re-reads the index pointer and its entry
//!     ([`Shard::still_linked`]). By the single total order (C++20 [atomics.order] p4.4), either
//!     the lock holder's read sees the check's write (so an eviction finds the key active and
//!     restores it, and a quota change carries the update over), or the check's re-read sees
//!     `BUSY` or a later value, and the check redoes itself under the lock on the key's current
//!     slot. The same holds when the index was replaced in between (the re-read pointer
//!     differs): the replacement happened before the lock holder's fence.
//!
//! Unlinked slots and replaced indexes go to [`Retired`] and are dropped or reused only after a
//! grace period, so a reader never sees a slot's key or cell change under it.

use std::ops::ControlFlow;

use crossbeam_utils::CachePadded;

use super::epoch::Guard;
use super::index::{Entry, Group, Index, View, BUSY, EMPTY, MAX_SLOTS};
use super::lock::{Cold, MutexGuard};
use super::quotas::{QuotaId, DEFAULT_ID};
use super::reclaim::Retired;
use super::slot::{Slot, Storage};
use super::store::{ScanOrder, Store, StoreHit, StoreLocked};
use crate::loom::atomic::{fence, AtomicPtr, AtomicU32, Ordering};

/// How a shard is sized.
#[derive(Debug, Clone, Copy)]
pub(super) struct ShardConfig {
    /// Most keys held.
    pub(super) max_keys: usize,
    /// Extra slots for keys retired but still in their grace period.
    pub(super) reserve: u32,
    /// Slots per chunk: `2^chunk_bits`.
    pub(super) chunk_bits: u32,
}

impl ShardConfig {
    /// Sizes a shard of `max_keys` keys; at most [`MAX_KEYS`](Self::MAX_KEYS) are kept.
    pub(super) fn new(max_keys: usize) -> Self {
        let reserve = (max_keys / 8).clamp(64, Self::MAX_RESERVE as usize);
        let max_keys = max_keys.clamp(1, Self::MAX_KEYS);
        let slots = max_keys + reserve;
        // Chunks of at most 64 slots for small shards, and at most 512 chunks per shard.
        let min_chunk = slots.next_power_of_two().min(64);
        let chunk = slots.div_ceil(512).next_power_of_two().max(min_chunk);
        ShardConfig { max_keys, reserve: reserve as u32, chunk_bits: chunk.trailing_zeros() }
    }

    const MAX_RESERVE: u32 = 1 << 16;
    /// The largest chunk: 512 chunks of it hold the most slots.
    const MAX_CHUNK: u32 = 1 << 15;
    /// The most keys one shard holds: every slot number of its chunks, reserve included, must
    /// fit an index entry (slots are numbered by their place in whole chunks).
    pub(super) const MAX_KEYS: usize =
        ((MAX_SLOTS + 1) / Self::MAX_CHUNK * Self::MAX_CHUNK - Self::MAX_RESERVE) as usize;

    fn slots(&self) -> u32 {
        (self.max_keys + self.reserve as usize) as u32
    }

    fn chunks(&self) -> usize {
        (self.slots() as usize).div_ceil(1 << self.chunk_bits)
    }

    /// The most bytes a shard of this size can hold, given `slot_bytes` per slot and
    /// `heap_per_cell` heap bytes per cell; see `Keyed::memory_bound_bytes`.
    pub(super) fn bound_bytes(&self, slot_bytes: usize, heap_per_cell: usize) -> usize {
        let slots = self.slots() as usize;
        let chunked = self.chunks() << self.chunk_bits;
        let ptr = std::mem::size_of::<usize>();
        let max_bits = Index::bits_for(self.max_keys);
        // Chunks with quota ids, and both directories.
        let storage = chunked * (slot_bytes + 2) + self.chunks() * 2 * ptr;
        // The current index and the smaller ones it replaced, still in their grace period.
        let indexes = 2 * Index::bytes_for(max_bits) + 32 * std::mem::size_of::<Index>();
        // Free list, retired queue (slot, batch, heap) and tokens (queue entry + allocation):
        // queues at most double what they hold.
        let bookkeeping = 2 * slots * (4 + 3 * 8 + 2 * ptr) + slots * 2 * ptr;
        storage + indexes + bookkeeping + slots * heap_per_cell
    }
}

/// How the lock holder stops checks from writing a cell before it looks at the cell to decide on
/// its key (module docs): by freezing the cell, when the cell can be frozen.
pub(super) trait Freezer<C> {
    /// Freezes `cell` and returns a copy of the state it held, or `None` when `cell` cannot be
    /// frozen (its entry is hidden instead).
    fn freeze(&self, cell: &C) -> Option<C>;

    /// Puts back the state of `copy` (from [`freeze`](Self::freeze)) into the frozen `cell`.
    fn thaw(&self, cell: &C, copy: &C);
}

/// The part of a shard every check reads.
struct Hot<K, C> {
    /// The current index (the writer's), as checks reach it ([`View`]); set under the lock.
    view: AtomicPtr<Group>,
    storage: Storage<K, C>,
}

/// What the lock protects.
#[derive(Debug)]
struct Writer {
    config: ShardConfig,
    /// The current index; checks reach it through the shard's view.
    index: Box<Index>,
    /// Keys held (live entries).
    len: usize,
    /// Slots handed out so far, in the order of `Storage::numbered`; all are in allocated chunks.
    bump: u32,
    /// Vacant slots below `bump`.
    free: Vec<u32>,
    retired: Retired<Box<Index>>,
    /// Where the next reclamation scan starts in the index.
    cursor: usize,
    /// The reclamation scan's order over the current index.
    scan: ScanOrder,
    /// Heap bytes owned by cells (live and retired).
    heap: usize,
    /// Bytes of allocated chunks and quota-id arrays.
    chunk_bytes: usize,
}

/// A shard. Its two halves sit on separate cache lines.
pub(super) struct Shard<K, C> {
    hot: CachePadded<Hot<K, C>>,
    cold: CachePadded<Cold<Writer>>,
}

/// A reader's view of a slot it found: enough to use the cell and to check afterwards that the
/// slot was still linked.
pub(super) struct Hit<'g, K, C> {
    view: View,
    /// The index position the entry was read from, for [`Shard::still_linked`] to read again
    /// without going through the index.
    position: &'g AtomicU32,
    entry: Entry,
    slot: &'g Slot<K, C>,
    quota: QuotaId,
}

impl<K, C> Clone for Hit<'_, K, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, C> Copy for Hit<'_, K, C> {}

impl<K, C> Shard<K, C> {
    pub(super) fn new(config: ShardConfig) -> Self {
        let index = Box::new(Index::new(Index::MIN_BITS));
        let view = AtomicPtr::new(index.view().raw());
        let storage = Storage::new(config.slots(), config.chunk_bits);
        let writer = Writer {
            config,
            index,
            len: 0,
            bump: 0,
            free: Vec::new(),
            retired: Retired::default(),
            cursor: 0,
            scan: ScanOrder::new(1 << Index::MIN_BITS),
            heap: 0,
            chunk_bytes: 0,
        };
        let memory = storage.directory_bytes() + Index::bytes_for(Index::MIN_BITS);
        Shard {
            hot: CachePadded::new(Hot { view, storage }),
            cold: CachePadded::new(Cold::new(writer, memory)),
        }
    }

    /// Looks for `key` at `pos` and the position after it, loading both before looking at
    /// either: `Break` with the hit, or with `None` when either position is empty (the probe
    /// ends); `Continue` when the probe goes on.
    #[inline(always)]
    fn probe_pair<'g>(
        &'g self,
        view: View,
        pos: usize,
        tag: u32,
        key: &K,
    ) -> ControlFlow<Option<Hit<'g, K, C>>>
    where
        K: Eq,
    {
        let next = (pos + 1) & view.mask();
        // SAFETY (both): never a dangling view; an index is freed only after a grace period that
        // began after it was replaced, and the caller (`find`) is pinned from before it loaded
        // the view until `'g` ends. Positions are masked.
        let (first_entry, second_entry) = unsafe { (view.entry(pos), view.entry(next)) };
        // Acquire (both): pairs with the Release store of the entry, after its slot was filled.
        // Each candidate is used as loaded (no second load on the way to its slot).
        let (first, second) = (first_entry.load(Ordering::Acquire), second_entry.load(Ordering::Acquire));
        // `EMPTY` and `BUSY` carry tag 0, so they pass when the key's tag is 0 too; `hit_if_key`
        // drops them.
        if super::index::raw_tag(first) == tag {
            if let Some(hit) = self.hit_if_key(view, first_entry, first, key) {
                return ControlFlow::Break(Some(hit));
            }
        }
        if super::index::raw_tag(second) == tag {
            if let Some(hit) = self.hit_if_key(view, second_entry, second, key) {
                return ControlFlow::Break(Some(hit));
            }
        }
        if first == EMPTY || second == EMPTY {
            return ControlFlow::Break(None);
        }
        ControlFlow::Continue(())
    }

    /// The hit for the live entry `raw` read from `position` of the pinned index `view`, if its
    /// slot holds `key`.
    #[inline(always)]
    fn hit_if_key<'g>(
        &'g self,
        view: View,
        position: &'g AtomicU32,
        raw: u32,
        key: &K,
    ) -> Option<Hit<'g, K, C>>
    where
        K: Eq,
    {
        let entry = Entry::from_raw(raw)?;
        // SAFETY: the entry (loaded with Acquire while pinned, by `find`) names an allocated
        // chunk's slot that was filled before the entry was published and is not emptied before
        // a grace period that includes the caller's pin.
        let slot = unsafe { self.hot.storage.slot(entry.slot()) };
        // SAFETY: as above: filled, and stays filled while the caller is pinned.
        if unsafe { slot.key() } != key {
            return None;
        }
        let quota = if entry.is_custom() {
            // SAFETY: the custom entry was published (Release) after its quota id.
            unsafe { self.hot.storage.quota_id(entry.slot()) }
        } else {
            DEFAULT_ID
        };
        Some(Hit { view, position, entry, slot, quota })
    }
}

impl<K, C> Drop for Shard<K, C> {
    fn drop(&mut self) {
        let writer = self.cold.writer_mut();
        let index = &writer.index;
        for pos in 0..index.capacity() {
            if let Some(entry) = Entry::from_raw(index.load(pos, Ordering::Relaxed)) {
                // SAFETY: a live entry names a filled slot; `&mut self` rules out readers.
                unsafe { self.hot.storage.slot(entry.slot()).empty() };
            }
        }
        for slot in writer.retired.drain_all() {
            // SAFETY: retired slots are still filled (they are emptied when collected, and
            // collected ones are no longer in the queue); no reader remains.
            unsafe { self.hot.storage.slot(slot).empty() };
        }
        // The storage's own Drop frees the chunks.
    }
}

/// The shard with its lock held, on a pinned thread.
pub(super) struct Locked<'a, K, C> {
    shard: &'a Shard<K, C>,
    writer: MutexGuard<'a, Writer>,
    guard: &'a Guard,
}

impl<K, C> Locked<'_, K, C> {
    fn index(&self) -> &Index {
        &self.writer.index
    }

    /// The slot a live entry names.
    fn slot(&self, entry: Entry) -> &Slot<K, C> {
        // SAFETY: a live entry's chunk is allocated (before the entry was stored, under the lock).
        unsafe { self.shard.hot.storage.slot(entry.slot()) }
    }

    /// Hands back slots and indexes whose grace period has ended.
    fn collect(&mut self) {
        let ready = self.writer.retired.collect(self.guard);
        for (slot, heap) in ready.places {
            // SAFETY: retired after unlinking, and its grace period has ended: no reader can
            // reach it, and we hold the lock.
            unsafe { self.shard.hot.storage.slot(slot).empty() };
            // After a successful drop only: a key whose `Drop` panicked leaks its slot.
            self.writer.heap -= heap;
            self.writer.free.push(slot);
        }
    }

    /// Makes room in the index for one more entry, growing it if needed.
    fn reserve_entry(&mut self, hash_key: &impl Fn(&K) -> u64) {
        if self.index().has_room_for(self.writer.len + 1) {
            return;
        }
        let old = self.index();
        let bigger = Box::new(Index::new(old.bits() + 1));
        for pos in 0..old.capacity() {
            if let Some(entry) = Entry::from_raw(old.load(pos, Ordering::Relaxed)) {
                let hash = hash_key(self.key(entry));
                // Relaxed inside: the new index is not visible to anyone yet.
                let mut to = bigger.home(hash);
                while bigger.load(to, Ordering::Relaxed) != EMPTY {
                    to = bigger.next(to);
                }
                bigger.store(to, entry.raw(), Ordering::Relaxed);
            }
        }
        // Release: readers that load the new view (Acquire) see its entries. A check that
        // re-reads the view in `still_linked` is ordered against a later eviction in the new
        // index by the two SeqCst fences (module docs), which this store precedes.
        self.shard.hot.view.store(bigger.view().raw(), Ordering::Release);
        // From here on only readers pinned before the store can hold the old index, and it is
        // freed only after their grace period.
        let old = std::mem::replace(&mut self.writer.index, bigger);
        self.writer.scan = ScanOrder::new(self.writer.index.capacity());
        self.writer.retired.array(old);
    }

    fn retire(&mut self, entry: Entry, heap: usize) {
        self.writer.retired.place(entry.slot(), heap);
        self.writer.len -= 1;
    }

    /// The entries after `hole` up to the next empty position, with each one's home. Runs the
    /// user's `Hash`.
    fn cluster_after(&self, hole: usize, hash_key: &impl Fn(&K) -> u64) -> Vec<(usize, u32, usize)> {
        let index = self.index();
        let mut cluster = Vec::new();
        let mut pos = index.next(hole);
        while pos != hole {
            // Relaxed: we hold the lock.
            let raw = index.load(pos, Ordering::Relaxed);
            if raw == EMPTY {
                break;
            }
            // A BUSY left by a panic elsewhere never moves: its home is where it is.
            let home = Entry::from_raw(raw).map_or(pos, |e| index.home(hash_key(self.key(e))));
            cluster.push((pos, raw, home));
            pos = index.next(pos);
        }
        cluster
    }

    /// Backward-shift deletion of the entry at `hole`.
    fn delete_at(&mut self, hole: usize, hash_key: &impl Fn(&K) -> u64) {
        let moves = self.cluster_after(hole, hash_key);
        self.shift_into(hole, &moves);
    }

    /// Fills `hole` by moving back each entry of `cluster` that may live there, then empties the
    /// last hole. A reader probing meanwhile may miss a moving entry (it then looks again under
    /// the lock) but never finds a wrong one.
    fn shift_into(&mut self, mut hole: usize, cluster: &[(usize, u32, usize)]) {
        let index = self.index();
        for &(pos, raw, home) in cluster {
            if index.distance(home, pos) >= index.distance(hole, pos) {
                // Release: a reader that finds the entry here (Acquire) sees its slot filled.
                index.store(hole, raw, Ordering::Release);
                hole = pos;
            }
        }
        // Relaxed: an empty position publishes nothing.
        index.store(hole, EMPTY, Ordering::Relaxed);
    }

    /// Bytes the shard holds now.
    fn memory(&self) -> usize {
        let w = &*self.writer;
        let storage = &self.shard.hot.storage;
        storage.directory_bytes()
            + w.chunk_bytes
            + self.index().bytes()
            + w.retired.bytes()
            + w.free.capacity() * std::mem::size_of::<u32>()
            + w.heap
    }
}

impl<K, C> Drop for Locked<'_, K, C> {
    /// Seals what this section retired and publishes the figures.
    fn drop(&mut self) {
        self.writer.retired.seal(self.guard);
        let memory = self.memory();
        // Relaxed: statistics.
        self.shard.cold.publish(self.writer.len, memory);
    }
}

impl<K, C> Storage<K, C> {
    /// A slot about to be filled by the lock holder (its chunk was allocated by `take_place`).
    fn slot_for_fill(&self, slot: u32) -> &Slot<K, C> {
        // SAFETY: `take_place` returned it, so its chunk is allocated.
        unsafe { self.slot(slot) }
    }
}

impl<'g, K, C> StoreHit<'g, C> for Hit<'g, K, C> {
    fn cell(&self) -> &'g C {
        // SAFETY: `find` returned this hit for an entry read while pinned; the `'g` borrow of the
        // guard keeps the thread pinned, so the slot stays initialised.
        unsafe { self.slot.cell() }
    }

    fn quota(&self) -> QuotaId {
        self.quota
    }

    fn place(&self) -> u32 {
        self.entry.slot()
    }
}

impl<K, C> Store<K, C> for Shard<K, C> {
    type Hit<'g>
        = Hit<'g, K, C>
    where
        Self: 'g;
    type Locked<'a>
        = Locked<'a, K, C>
    where
        Self: 'a;

    /// Finds `key` without a lock. `None` is not proof of absence: a concurrent change may have
    /// moved its entry past the probe; callers that act on absence look again under the lock.
    ///
    /// Positions are read two at a time, both loads issued before either is looked at: the key
    /// is in the first two for most hits.
    ///
    /// Always inlined: left to the compiler, a program using several algorithms (each a caller
    /// of one `find` of the same cell type) got it as a call, as `kova-bench` did.
    #[inline(always)]
    fn find<'g>(&'g self, hash: u64, key: &K, _guard: &'g Guard) -> Option<Hit<'g, K, C>>
    where
        K: Eq,
    {
        // Acquire: pairs with the Release store that published this index, so its entries'
        // initial values are visible.
        let view = View::from_raw(self.hot.view.load(Ordering::Acquire));
        let tag = super::index::tag_of(hash);
        let mask = view.mask();
        let home = view.home(hash);
        // The first two positions, then two per round: a probe ends at an empty position, or
        // after the whole index (which is never full). The first round is written out (most
        // hits end in it); as the first turn of the loop it measured about 1 ns slower.
        if let ControlFlow::Break(found) = self.probe_pair(view, home, tag, key) {
            return found;
        }
        let mut pos = home;
        for _ in 0..mask / 2 {
            pos = (pos + 2) & mask;
            if let ControlFlow::Break(found) = self.probe_pair(view, pos, tag, key) {
                return found;
            }
        }
        None
    }

    /// After a check that wrote `hit`'s cell, a cell that cannot be frozen: whether the slot was
    /// still linked at a point after the write, so that no eviction or quota change can have
    /// missed it (see the module docs).
    #[inline]
    fn still_linked(&self, hit: &Hit<'_, K, C>) -> bool {
        // SeqCst fence: orders our write before the re-reads below against the lock holder's
        // `BUSY` store + SeqCst fence + cell read (C++20 [atomics.order] p4.4); the loads
        // themselves can then be Relaxed.
        fence(Ordering::SeqCst);
        if self.hot.view.load(Ordering::Relaxed) != hit.view.raw() {
            return false;
        }
        // The entry's position was borrowed from that same index while pinned, so it is still
        // allocated.
        hit.position.load(Ordering::Relaxed) == hit.entry.raw()
    }

    /// Takes the shard's lock, first handing back what finished its grace period.
    fn lock<'a>(&'a self, guard: &'a Guard) -> Locked<'a, K, C> {
        let mut locked = Locked { shard: self, writer: self.cold.lock(), guard };
        locked.collect();
        locked
    }

    /// Keys held (a snapshot).
    fn len(&self) -> usize {
        self.cold.len()
    }

    /// Bytes held (a snapshot), the shard struct itself not included.
    fn memory(&self) -> usize {
        self.cold.memory()
    }
}

impl<K, C> StoreLocked<K, C> for Locked<'_, K, C> {
    type Entry = Entry;

    /// Finds `key` (authoritative: nothing moves while we hold the lock).
    fn find(&self, hash: u64, key: &K) -> Option<(usize, Entry)>
    where
        K: Eq,
    {
        let index = self.index();
        let tag = super::index::tag_of(hash);
        let mut pos = index.home(hash);
        for _ in 0..index.capacity() {
            // Relaxed: every store to the index happened under the lock we hold.
            let raw = index.load(pos, Ordering::Relaxed);
            if raw == EMPTY {
                return None;
            }
            if let Some(entry) = Entry::from_raw(raw).filter(|e| e.tag() == tag) {
                if self.key(entry) == key {
                    return Some((pos, entry));
                }
            }
            pos = index.next(pos);
        }
        None
    }

    /// The key of a live entry.
    fn key(&self, entry: Entry) -> &K {
        // SAFETY: a live entry's slot is filled, and only the lock holder (us) empties slots.
        unsafe { self.slot(entry).key() }
    }

    /// The cell of a live entry.
    fn cell(&self, entry: Entry) -> &C {
        // SAFETY: as in `key`.
        unsafe { self.slot(entry).cell() }
    }

    /// The quota id of a live entry.
    fn quota(&self, entry: Entry) -> QuotaId {
        if entry.is_custom() {
            // SAFETY: we hold the lock under which it was written.
            unsafe { self.shard.hot.storage.quota_id(entry.slot()) }
        } else {
            DEFAULT_ID
        }
    }

    fn place_of(&self, entry: Entry) -> u32 {
        entry.slot()
    }

    fn is_full(&self) -> bool {
        self.writer.len >= self.writer.config.max_keys
    }

    /// A vacant slot in an allocated chunk, or `None` when all are held or retired.
    fn take_place(&mut self, _hash_key: &impl Fn(&K) -> u64) -> Option<u32> {
        for attempt in 0..3 {
            if let Some(slot) = self.writer.free.pop() {
                return Some(slot);
            }
            if self.writer.bump < self.writer.config.slots() {
                let slot = self.shard.hot.storage.numbered(self.writer.bump);
                self.writer.chunk_bytes += self.shard.hot.storage.ensure(slot);
                self.writer.bump += 1;
                return Some(slot);
            }
            if attempt < 2 {
                // Everything is held or retired: seal what this section retired so far, collect
                // what earlier sections sealed (advancing the epoch if they wait for it), then
                // look again.
                self.writer.retired.seal(self.guard);
                self.collect();
            }
        }
        None
    }

    /// Gives back a slot from [`take_place`](Self::take_place) that was not used.
    fn put_back(&mut self, slot: u32) {
        self.writer.free.push(slot);
    }

    /// Inserts `key` with `cell` and quota `quota` into `slot` (from [`take_place`](Self::take_place)),
    /// whose cell owns `heap` heap bytes. The caller checked that the key is absent and that the
    /// shard is not full.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        slot: u32,
        hash: u64,
        key: K,
        cell: C,
        quota: QuotaId,
        heap: usize,
        hash_key: &impl Fn(&K) -> u64,
    ) -> Entry {
        // Grow first: it runs the user's `Hash`, which may panic; only `slot` leaks then.
        self.reserve_entry(hash_key);
        let slot_ref = self.shard.hot.storage.slot_for_fill(slot);
        // SAFETY: the slot is vacant (fresh from the bump, or emptied after its grace period),
        // and we hold the lock.
        unsafe { slot_ref.fill(key, cell) };
        self.writer.chunk_bytes += self.shard.hot.storage.set_quota_id(slot, quota);
        let entry = Entry::new(slot, hash, quota != DEFAULT_ID);
        self.index().insert(hash, entry);
        self.writer.len += 1;
        self.writer.heap += heap;
        entry
    }

    /// Removes the entry at `pos` (backward-shift deletion) and retires its slot, whose cell owns
    /// `heap` heap bytes.
    fn remove_at(&mut self, pos: usize, entry: Entry, heap: usize, hash_key: &impl Fn(&K) -> u64) {
        self.delete_at(pos, hash_key);
        self.retire(entry, heap);
    }

    /// Unlinks the entry at `pos` unless `keep` says otherwise after looking at its cell: the
    /// look happens after the cell is frozen or the entry hidden, so a check racing with it
    /// either is seen by `keep` or redoes itself (module docs). Returns whether the key was
    /// unlinked.
    fn unlink_if(
        &mut self,
        pos: usize,
        entry: Entry,
        heap: usize,
        keep: impl FnOnce(&C) -> bool,
        freezer: &impl Freezer<C>,
        hash_key: &impl Fn(&K) -> u64,
    ) -> bool {
        // Collect the cluster's homes first (user code) so that nothing runs between the freeze
        // (or BUSY) and the deletion that could panic and leave the key frozen (or hidden).
        let moves = self.cluster_after(pos, hash_key);
        let cell = self.cell(entry);
        if let Some(copy) = freezer.freeze(cell) {
            if keep(&copy) {
                freezer.thaw(cell, &copy);
                return false;
            }
        } else {
            // SeqCst store, then SeqCst fence: pairs with `still_linked`; our cell read below
            // sees every check whose re-read did not see BUSY.
            self.index().store(pos, BUSY, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if keep(cell) {
                // Release: republishes the entry for readers that load it afresh.
                self.index().store(pos, entry.raw(), Ordering::Release);
                return false;
            }
        }
        self.shift_into(pos, &moves);
        self.retire(entry, heap);
        true
    }

    /// Replaces the slot of the entry at `pos` by a new slot holding `key` and the cell `build`
    /// makes from the old cell (read after the old cell is frozen or its entry hidden, as in
    /// `unlink_if`). Returns the new entry, or gives the key back when no slot is free of its
    /// grace period.
    #[allow(clippy::too_many_arguments)]
    fn replace(
        &mut self,
        pos: usize,
        old: Entry,
        old_heap: usize,
        hash: u64,
        key: K,
        quota: QuotaId,
        new_heap: usize,
        build: impl FnOnce(&C) -> C,
        freezer: &impl Freezer<C>,
        hash_key: &impl Fn(&K) -> u64,
    ) -> Result<Entry, K>
    where
        K: Eq,
    {
        let Some(slot) = self.take_place(hash_key) else { return Err(key) };
        let old_cell = self.cell(old);
        // A frozen old cell stays frozen: checks still holding the old slot find it so and redo
        // themselves on the new one.
        let cell = match freezer.freeze(old_cell) {
            Some(copy) => build(&copy),
            None => {
                // SeqCst store, SeqCst fence: as in `unlink_if`.
                self.index().store(pos, BUSY, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                build(old_cell)
            }
        };
        let slot_ref = self.shard.hot.storage.slot_for_fill(slot);
        // SAFETY: vacant slot, lock held.
        unsafe { slot_ref.fill(key, cell) };
        self.writer.chunk_bytes += self.shard.hot.storage.set_quota_id(slot, quota);
        let entry = Entry::new(slot, hash, quota != DEFAULT_ID);
        debug_assert_eq!(entry.tag(), old.tag());
        // Release: readers that load the new entry (Acquire) see the slot filled.
        self.index().store(pos, entry.raw(), Ordering::Release);
        self.writer.heap += new_heap;
        self.writer.len += 1;
        self.retire(old, old_heap);
        Ok(entry)
    }

    /// The live entry at `pos`, if any.
    fn entry_at(&self, pos: usize) -> Option<Entry> {
        // Relaxed: we hold the lock.
        Entry::from_raw(self.index().load(pos, Ordering::Relaxed))
    }

    /// Index positions.
    fn positions(&self) -> usize {
        self.index().capacity()
    }

    #[cfg(test)]
    fn longest_run(&self) -> usize {
        let index = self.index();
        let used: Vec<bool> =
            (0..index.capacity()).map(|pos| index.load(pos, Ordering::Relaxed) != EMPTY).collect();
        used.split(|&used| !used).map(<[bool]>::len).max().unwrap_or(0)
    }

    fn scan_order(&self) -> ScanOrder {
        debug_assert_eq!(self.writer.scan, ScanOrder::new(self.positions()));
        self.writer.scan
    }

    /// Where the reclamation scan resumes, and moving it.
    fn cursor(&self) -> usize {
        self.writer.cursor % self.positions()
    }

    fn set_cursor(&mut self, cursor: usize) {
        self.writer.cursor = cursor;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loom::atomic::AtomicU64;

    /// A hash with the same home for every key in any index size (top bits 0), and the tag
    /// `key % 128`, or 0 for every third key (the tag that `EMPTY` and `BUSY` also read as).
    fn colliding(key: &u64) -> u64 {
        let tag = if key % 3 == 0 { 0 } else { key % 128 };
        (tag << 16) | (key & 0xFFFF)
    }

    #[test]
    fn every_slot_number_of_the_largest_shard_fits_an_entry() {
        for max_keys in [1, 1_000, 123_457, 1 << 20, ShardConfig::MAX_KEYS, usize::MAX] {
            let config = ShardConfig::new(max_keys);
            let numbers = config.chunks() << config.chunk_bits;
            assert!(numbers >= config.slots() as usize, "{max_keys}");
            assert!(numbers <= MAX_SLOTS as usize, "{max_keys}: {numbers} slot numbers");
        }
    }

    #[test]
    fn lock_free_lookups_find_keys_far_from_home_and_with_tag_zero() {
        const KEYS: u64 = 40;
        let shard: Shard<u64, AtomicU64> = Shard::new(ShardConfig::new(64));
        let guard = super::super::epoch::pin();
        {
            let mut locked = shard.lock(&guard);
            for key in 0..KEYS {
                let slot = locked.take_place(&colliding).expect("room");
                locked.insert(
                    slot,
                    colliding(&key),
                    key,
                    AtomicU64::new(key * 10),
                    DEFAULT_ID,
                    0,
                    &colliding,
                );
            }
            // Every fifth key goes: backward-shift deletion moves the rest of the cluster.
            for key in (0..KEYS).step_by(5) {
                let (pos, entry) = locked.find(colliding(&key), &key).expect("held");
                locked.remove_at(pos, entry, 0, &colliding);
            }
        }
        // One cluster of 32 keys from position 0: most sit past the first group.
        for key in 0..KEYS {
            let found = shard.find(colliding(&key), &key, &guard);
            if key % 5 == 0 {
                assert!(found.is_none(), "{key} was removed");
            } else {
                let hit = found.unwrap_or_else(|| panic!("{key} not found without the lock"));
                assert_eq!(hit.cell().load(Ordering::Relaxed), key * 10);
            }
        }
        for absent in KEYS..KEYS + 20 {
            assert!(shard.find(colliding(&absent), &absent, &guard).is_none());
        }
    }
}
