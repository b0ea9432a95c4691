//! Slots (a key and its algorithm's cell, side by side) and the chunks that hold them.
//!
//! Chunks are allocated as a shard fills and never move or shrink until the table is dropped,
//! so a slot's address is stable: a check updates the one cell every other check updates, and
//! growing the index never copies state.

use std::mem::MaybeUninit;
use std::ptr;

use crate::loom::atomic::{AtomicPtr, AtomicU16, Ordering};
pub(super) use crate::loom::UnsafeCell;

/// A pointer to read `cell`'s contents through. Under loom the access is recorded: loom fails
/// the model if a read and a write of the same slot (a check reading a key or cell, the lock
/// holder filling or emptying the slot) are not ordered by happens-before, as when a slot is
/// reused before its grace period ended.
#[inline(always)]
pub(super) fn read<T>(cell: &UnsafeCell<T>) -> *const T {
    cell.with(|ptr| ptr)
}

/// As [`read`], for a write.
#[inline(always)]
pub(super) fn write<T>(cell: &UnsafeCell<T>) -> *mut T {
    cell.with_mut(|ptr| ptr)
}

/// One key and its cell. Initialised by the shard's lock holder before its index entry is
/// published; read by lock-free checks; dropped only after a grace period that began after its
/// entry was unlinked.
pub(super) struct Slot<K, C> {
    cell: UnsafeCell<MaybeUninit<C>>,
    key: UnsafeCell<MaybeUninit<K>>,
}

impl<K, C> Slot<K, C> {
    fn vacant() -> Self {
        Slot { cell: UnsafeCell::new(MaybeUninit::uninit()), key: UnsafeCell::new(MaybeUninit::uninit()) }
    }

    /// The key.
    ///
    /// # Safety
    /// The slot is initialised and stays so while the returned reference lives: the caller read
    /// its entry from an index while pinned (and stays pinned), or holds the shard's lock.
    #[inline]
    pub(super) unsafe fn key(&self) -> &K {
        // SAFETY: initialised (caller's contract); only shared references exist until a grace
        // period after unlinking, which the caller's pin or lock rules out.
        unsafe { (*read(&self.key)).assume_init_ref() }
    }

    /// The cell.
    ///
    /// # Safety
    /// As for [`key`](Self::key).
    #[inline]
    pub(super) unsafe fn cell(&self) -> &C {
        // SAFETY: as in `key`.
        unsafe { (*read(&self.cell)).assume_init_ref() }
    }

    /// Writes a key and a cell into a vacant slot.
    ///
    /// # Safety
    /// The caller holds the shard's lock and the slot is vacant (never initialised, or dropped
    /// after a grace period): no other reference to its contents exists.
    pub(super) unsafe fn fill(&self, key: K, cell: C) {
        // SAFETY: exclusive access per the contract; writing a MaybeUninit drops nothing.
        unsafe {
            (*write(&self.key)).write(key);
            (*write(&self.cell)).write(cell);
        }
    }

    /// Drops the key and the cell, leaving the slot vacant.
    ///
    /// # Safety
    /// The caller holds the shard's lock (or `&mut` to the table), the slot is initialised, and
    /// no reader can still reach it: its entry was unlinked before a grace period that has ended.
    pub(super) unsafe fn empty(&self) {
        // SAFETY: initialised and exclusively ours per the contract.
        unsafe {
            ptr::drop_in_place((*write(&self.cell)).as_mut_ptr());
            ptr::drop_in_place((*write(&self.key)).as_mut_ptr());
        }
    }
}

/// A shard's slots: a fixed directory of lazily allocated chunks, plus, only for chunks that
/// hold keys with their own quota, a side array of quota ids.
pub(super) struct Storage<K, C> {
    chunk_bits: u32,
    /// Slots handed out one after the other sit `2^spread_bits` slots apart in their chunk
    /// (see [`numbered`](Self::numbered)).
    spread_bits: u32,
    /// Chunk `i` holds slots `i << chunk_bits ..`; null until first used.
    chunks: Box<[AtomicPtr<Slot<K, C>>]>,
    /// Null, or a directory (one pointer per chunk) of quota-id arrays, each null until a key
    /// with its own quota lands in that chunk.
    quota_ids: AtomicPtr<AtomicPtr<AtomicU16>>,
}

impl<K, C> Storage<K, C> {
    /// Room for `slots` slots in chunks of `2^chunk_bits`.
    pub(super) fn new(slots: u32, chunk_bits: u32) -> Self {
        let count = (slots as usize).div_ceil(1 << chunk_bits);
        let chunks = (0..count).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
        // At least 128 bytes apart: a slot may straddle two 64-byte lines, so 64 is not enough.
        let spread = 128usize.div_ceil(std::mem::size_of::<Slot<K, C>>().max(1)).next_power_of_two();
        let spread_bits = spread.trailing_zeros().min(chunk_bits);
        Storage { chunk_bits, spread_bits, chunks, quota_ids: AtomicPtr::new(ptr::null_mut()) }
    }

    /// The number of the `n`-th slot handed out (`n` below the chunks' total): slots are
    /// numbered by their place (chunk, then place in it), and the `n`-th one sits
    /// `2^spread_bits` places after the one before in its chunk (a transposition of the chunk
    /// seen as a matrix of `2^spread_bits` rows). So two keys inserted one after the other, often
    /// both active (clients that just arrived), never share a cache line, and their checks on two
    /// cores do not fight over it (false sharing measured in `kova-bench`'s
    /// `keyed_per_thread`: 2 threads no faster than 1 when its two keys had neighbouring slots).
    /// Done once per slot here rather than on every lookup.
    pub(super) fn numbered(&self, n: u32) -> u32 {
        let offset = n & ((1 << self.chunk_bits) - 1);
        let columns_bits = self.chunk_bits - self.spread_bits;
        let place = ((offset & ((1 << columns_bits) - 1)) << self.spread_bits) | (offset >> columns_bits);
        (n - offset) | place
    }

    fn chunk_len(&self) -> usize {
        1 << self.chunk_bits
    }

    /// Bytes of one allocated chunk (with its quota ids when `with_ids`).
    pub(super) fn chunk_bytes(chunk_bits: u32, with_ids: bool) -> usize {
        let per_slot =
            std::mem::size_of::<Slot<K, C>>() + if with_ids { std::mem::size_of::<AtomicU16>() } else { 0 };
        per_slot << chunk_bits
    }

    /// Bytes of the directories (without any chunk).
    pub(super) fn directory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.chunks)
    }

    /// Bytes of the quota-id directory, once allocated.
    pub(super) fn id_directory_bytes(&self) -> usize {
        self.chunks.len() * std::mem::size_of::<AtomicPtr<AtomicU16>>()
    }

    /// Slot `slot`.
    ///
    /// # Safety
    /// The slot's chunk is allocated: the caller read an entry naming `slot` (Acquire, published
    /// after the chunk) or holds the lock after [`ensure`](Self::ensure) for it.
    #[inline]
    pub(super) unsafe fn slot(&self, slot: u32) -> &Slot<K, C> {
        let slot = slot as usize;
        // Relaxed: the chunk pointer was stored before the entry the caller loaded with Acquire
        // (or before the caller's lock section), so that load already made the store visible.
        let base = self.chunks[slot >> self.chunk_bits].load(Ordering::Relaxed);
        // SAFETY: `base` is a live chunk of `chunk_len` slots (caller's contract; chunks are freed
        // only in `Drop`).
        unsafe { &*base.add(slot & (self.chunk_len() - 1)) }
    }

    /// Allocates the chunk holding `slot` if it is not yet; returns the bytes allocated. Caller
    /// holds the lock.
    pub(super) fn ensure(&self, slot: u32) -> usize {
        let chunk = &self.chunks[slot as usize >> self.chunk_bits];
        if !chunk.load(Ordering::Relaxed).is_null() {
            return 0;
        }
        let slots: Box<[Slot<K, C>]> = (0..self.chunk_len()).map(|_| Slot::vacant()).collect();
        // Relaxed: readers reach a chunk only through an index entry that the lock holder stores
        // with Release after this, and load with Acquire.
        chunk.store(Box::into_raw(slots).cast::<Slot<K, C>>(), Ordering::Relaxed);
        Self::chunk_bytes(self.chunk_bits, false)
    }

    /// The quota id of `slot`, a slot whose entry has the custom bit.
    ///
    /// # Safety
    /// The caller read the slot's custom entry with Acquire (published after the id), or holds
    /// the lock.
    pub(super) unsafe fn quota_id(&self, slot: u32) -> u16 {
        // Relaxed throughout: each pointer and the id were stored before the entry the caller
        // loaded with Acquire, which made them visible.
        let directory = self.quota_ids.load(Ordering::Relaxed);
        if directory.is_null() {
            return 0;
        }
        let slot = slot as usize;
        // SAFETY: the directory has one pointer per chunk and lives until `Drop`.
        let ids = unsafe { &*directory.add(slot >> self.chunk_bits) }.load(Ordering::Relaxed);
        if ids.is_null() {
            return 0;
        }
        // SAFETY: an id array has `chunk_len` entries and lives until `Drop`.
        unsafe { &*ids.add(slot & (self.chunk_len() - 1)) }.load(Ordering::Relaxed)
    }

    /// Sets `slot`'s quota id (the caller holds the lock, before publishing the slot's entry);
    /// returns the bytes allocated for it.
    pub(super) fn set_quota_id(&self, slot: u32, id: u16) -> usize {
        let mut allocated = 0;
        let mut directory = self.quota_ids.load(Ordering::Relaxed);
        if directory.is_null() {
            if id == 0 {
                return 0;
            }
            let fresh: Box<[AtomicPtr<AtomicU16>]> =
                (0..self.chunks.len()).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
            directory = Box::into_raw(fresh).cast::<AtomicPtr<AtomicU16>>();
            // Relaxed: as in `ensure`, published by the slot's entry (Release) stored later.
            self.quota_ids.store(directory, Ordering::Relaxed);
            allocated += self.id_directory_bytes();
        }
        let slot = slot as usize;
        // SAFETY: one pointer per chunk, alive until `Drop`.
        let cell = unsafe { &*directory.add(slot >> self.chunk_bits) };
        let mut ids = cell.load(Ordering::Relaxed);
        if ids.is_null() {
            if id == 0 {
                return allocated;
            }
            let fresh: Box<[AtomicU16]> = (0..self.chunk_len()).map(|_| AtomicU16::new(0)).collect();
            ids = Box::into_raw(fresh).cast::<AtomicU16>();
            // Relaxed: as above.
            cell.store(ids, Ordering::Relaxed);
            allocated += (std::mem::size_of::<AtomicU16>()) << self.chunk_bits;
        }
        // SAFETY: `chunk_len` ids, alive until `Drop`.
        unsafe { &*ids.add(slot & (self.chunk_len() - 1)) }.store(id, Ordering::Relaxed);
        allocated
    }
}

impl<K, C> Drop for Storage<K, C> {
    /// Frees the chunks and id arrays. Slot contents must have been dropped by the shard.
    fn drop(&mut self) {
        let len = self.chunk_len();
        let directory = self.quota_ids.load(Ordering::Relaxed);
        for (i, chunk) in self.chunks.iter().enumerate() {
            let base = chunk.load(Ordering::Relaxed);
            if !base.is_null() {
                // SAFETY: made by `Box::into_raw` of a `Box<[Slot]>` of `len` slots in `ensure`;
                // `&mut self` means no reader remains, and the contents were dropped already.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(base, len)) });
            }
            if !directory.is_null() {
                // SAFETY: the directory has one pointer per chunk.
                let ids = unsafe { &*directory.add(i) }.load(Ordering::Relaxed);
                if !ids.is_null() {
                    // SAFETY: made by `Box::into_raw` of a `Box<[AtomicU16]>` of `len` ids.
                    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(ids, len)) });
                }
            }
        }
        if !directory.is_null() {
            // SAFETY: made by `Box::into_raw` of a boxed slice of `chunks.len()` pointers.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(directory, self.chunks.len())) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loom::atomic::AtomicU64;

    /// The slots handed out fill each chunk's places once, in order of chunks, and consecutive
    /// ones sit at least 128 bytes apart (never on one cache line), for a small and a large slot.
    fn check_spread<K, C>(chunk_bits: u32) {
        let len = 1u32 << chunk_bits;
        let storage = Storage::<K, C>::new(3 * len, chunk_bits);
        let mut seen = vec![false; 3 * len as usize];
        for n in 0..3 * len {
            let slot = storage.numbered(n);
            assert!(slot >> chunk_bits == n >> chunk_bits && !seen[slot as usize], "{n} -> {slot}");
            seen[slot as usize] = true;
            if (n + 1) % len != 0 {
                let apart =
                    storage.numbered(n + 1).abs_diff(slot) as usize * std::mem::size_of::<Slot<K, C>>();
                assert!(apart >= 128, "slots {n} and {} are {apart} bytes apart", n + 1);
            }
        }
    }

    #[test]
    fn consecutive_slots_sit_on_different_cache_lines() {
        assert_eq!(std::mem::size_of::<Slot<u64, AtomicU64>>(), 16);
        for chunk_bits in [6, 9, 12] {
            check_spread::<u64, AtomicU64>(chunk_bits);
            check_spread::<[u64; 4], AtomicU64>(chunk_bits);
            check_spread::<[u8; 200], AtomicU64>(chunk_bits);
        }
    }
}
