//! A shard's index: linear probing over 32-bit entries, each naming a slot.
//!
//! Lock-free readers probe it; only the shard's lock holder writes it. Entries are never
//! rewritten in place to name another slot while readers may hold the old one, except by the
//! unlink protocol in `shard.rs` (a `BUSY` marker, then deletion or restoration).

use crate::sync::atomic::{AtomicU32, Ordering};

/// Bits of an entry that hold `slot + 1`.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Bits of the hash kept in an entry, to skip most non-matching slots without reading them.
const TAG_BITS: u32 = 7;
const TAG_SHIFT: u32 = SLOT_BITS;
const TAG_MASK: u32 = (1 << TAG_BITS) - 1;
/// Where a tag's bits are taken from in the hash: above the shard bits (at most 16), below the
/// position bits (the top ones).
const TAG_HASH_SHIFT: u32 = 16;
/// Set when the slot has its own quota (its quota id is in the storage's side array).
const CUSTOM_BIT: u32 = 1 << (SLOT_BITS + TAG_BITS);

/// An unused position: a probe stops here.
pub(super) const EMPTY: u32 = 0;
/// A position being unlinked or replaced by the lock holder: occupied, matches no key.
pub(super) const BUSY: u32 = SLOT_MASK;
/// The most slots a shard can name: `slot + 1` must stay below `BUSY`'s slot field.
pub(super) const MAX_SLOTS: u32 = SLOT_MASK - 1;

/// The most entries a full index holds, as a fraction of its capacity: 3/4.
const LOAD_NUM: usize = 3;
const LOAD_DEN: usize = 4;

/// A live entry: a slot, a hash tag, and whether the slot has its own quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry(u32);

impl Entry {
    /// The entry for `slot` (`< MAX_SLOTS`) of a key whose hash is `hash`.
    pub(super) fn new(slot: u32, hash: u64, custom: bool) -> Entry {
        debug_assert!(slot < MAX_SLOTS);
        let custom = if custom { CUSTOM_BIT } else { 0 };
        Entry(custom | (tag_of(hash) << TAG_SHIFT) | (slot + 1))
    }

    /// Reads a raw entry: `None` for `EMPTY` and `BUSY`.
    pub(super) fn from_raw(raw: u32) -> Option<Entry> {
        if raw == EMPTY || raw == BUSY {
            None
        } else {
            Some(Entry(raw))
        }
    }

    pub(super) fn raw(self) -> u32 {
        self.0
    }

    pub(super) fn slot(self) -> u32 {
        (self.0 & SLOT_MASK) - 1
    }

    pub(super) fn tag(self) -> u32 {
        raw_tag(self.0)
    }

    pub(super) fn is_custom(self) -> bool {
        self.0 & CUSTOM_BIT != 0
    }
}

/// The tag bits of a raw entry (0 for `EMPTY` and `BUSY`).
#[inline]
pub(super) fn raw_tag(raw: u32) -> u32 {
    (raw >> TAG_SHIFT) & TAG_MASK
}

/// The tag an entry keeps of `hash`.
pub(super) fn tag_of(hash: u64) -> u32 {
    (hash >> TAG_HASH_SHIFT) as u32 & TAG_MASK
}

/// The open-addressing array.
#[derive(Debug)]
pub(super) struct Index {
    bits: u32,
    entries: Box<[AtomicU32]>,
}

impl Index {
    /// The smallest index: 8 positions.
    pub(super) const MIN_BITS: u32 = 3;

    /// An empty index of `2^bits` positions.
    pub(super) fn new(bits: u32) -> Index {
        let entries = (0..1usize << bits).map(|_| AtomicU32::new(EMPTY)).collect();
        Index { bits, entries }
    }

    /// The fewest bits whose index holds `keys` entries within the load factor.
    pub(super) fn bits_for(keys: usize) -> u32 {
        let positions = keys.saturating_mul(LOAD_DEN).div_ceil(LOAD_NUM).max(1);
        positions.next_power_of_two().trailing_zeros().max(Self::MIN_BITS)
    }

    /// Whether one more entry fits within the load factor.
    pub(super) fn has_room_for(&self, keys: usize) -> bool {
        keys.saturating_mul(LOAD_DEN) <= self.capacity() * LOAD_NUM
    }

    pub(super) fn bits(&self) -> u32 {
        self.bits
    }

    pub(super) fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of one index of `2^bits` positions.
    pub(super) fn bytes_for(bits: u32) -> usize {
        std::mem::size_of::<Index>() + (std::mem::size_of::<AtomicU32>() << bits)
    }

    pub(super) fn bytes(&self) -> usize {
        Self::bytes_for(self.bits)
    }

    /// Where a probe for `hash` starts: the hash's top bits.
    #[inline]
    pub(super) fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.bits)) as usize
    }

    #[inline]
    pub(super) fn next(&self, pos: usize) -> usize {
        self.wrap(pos + 1)
    }

    /// `pos` taken around the array (positions past the end start again at 0).
    #[inline]
    pub(super) fn wrap(&self, pos: usize) -> usize {
        pos & (self.capacity() - 1)
    }

    /// How far `pos` is past `home`, going forward around the array.
    pub(super) fn distance(&self, home: usize, pos: usize) -> usize {
        pos.wrapping_sub(home) & (self.capacity() - 1)
    }

    /// The entries, for a probe that reads several.
    #[inline]
    pub(super) fn entries(&self) -> &[AtomicU32] {
        &self.entries
    }

    #[inline]
    pub(super) fn load(&self, pos: usize, ordering: Ordering) -> u32 {
        self.entries[pos].load(ordering)
    }

    pub(super) fn store(&self, pos: usize, raw: u32, ordering: Ordering) {
        self.entries[pos].store(raw, ordering)
    }

    /// Puts `entry` at the first empty position from `hash`'s home (the caller holds the lock
    /// and has checked the load factor). Release: a reader that loads the entry (Acquire) sees
    /// the slot it names initialised.
    pub(super) fn insert(&self, hash: u64, entry: Entry) -> usize {
        let mut pos = self.home(hash);
        while self.load(pos, Ordering::Relaxed) != EMPTY {
            pos = self.next(pos);
        }
        self.store(pos, entry.raw(), Ordering::Release);
        pos
    }
}

/// Under loom, freeing an index is a tracked write to each entry: a check still probing an
/// index freed too early (no grace period) is then a causality violation loom reports, rather
/// than a use-after-free it cannot see (its atomics are separate objects, not this memory).
#[cfg(kova_loom)]
impl Drop for Index {
    fn drop(&mut self) {
        for entry in self.entries.iter_mut() {
            entry.with_mut(|_| ());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_at_the_edges() {
        for slot in [0, 1, MAX_SLOTS - 1] {
            for hash in [0u64, u64::MAX, 0x7F << TAG_HASH_SHIFT, 1 << 63] {
                for custom in [false, true] {
                    let entry = Entry::new(slot, hash, custom);
                    assert_eq!(entry.slot(), slot);
                    assert_eq!(entry.tag(), tag_of(hash));
                    assert_eq!(entry.is_custom(), custom);
                    assert_eq!(Entry::from_raw(entry.raw()), Some(entry));
                    assert_ne!(entry.raw(), EMPTY);
                    assert_ne!(entry.raw(), BUSY);
                }
            }
        }
        assert_eq!(Entry::from_raw(EMPTY), None);
        assert_eq!(Entry::from_raw(BUSY), None);
    }

    #[test]
    fn sizing_keeps_the_load_factor() {
        assert_eq!(Index::bits_for(0), Index::MIN_BITS);
        assert_eq!(Index::bits_for(6), 3);
        assert_eq!(Index::bits_for(7), 4);
        let largest = if cfg!(miri) { 200 } else { 1 << 20 };
        for keys in [1, 5, 100, 12_288, 12_289, largest] {
            let index = Index::new(Index::bits_for(keys));
            assert!(index.has_room_for(keys), "{keys}");
        }
    }

    #[test]
    fn tags_and_homes_use_disjoint_hash_bits() {
        // The largest index a shard can have still takes its home from above the tag bits,
        // which sit above the shard bits (at most 16).
        let largest = Index::bits_for(MAX_SLOTS as usize);
        assert!(64 - largest >= TAG_HASH_SHIFT + TAG_BITS, "{largest} bits");
        let index = Index::new(8);
        assert_eq!(index.home(0xFF_FFFF), index.home(0));
        assert_eq!(index.home(u64::MAX), 255);
        assert_eq!(tag_of(1 << 63), 0);
        assert_eq!((raw_tag(EMPTY), raw_tag(BUSY)), (0, 0));
        assert_eq!(tag_of(0x7F << TAG_HASH_SHIFT), 0x7F);
    }
}
