//! A shard's index: linear probing over 32-bit entries, each naming a slot.
//!
//! Lock-free readers probe it; only the shard's lock holder writes it. Entries are never
//! rewritten in place to name another slot while readers may hold the old one, except by the
//! unlink protocol in `shard.rs` (a `BUSY` marker, then deletion or restoration).

use crate::loom::atomic::{AtomicU32, Ordering};

/// Entries per aligned group. An index's entries start at a multiple of a group's size, which
/// leaves the low bits of their address free to carry the index's size ([`View`]).
const GROUP_ENTRIES: usize = 8;
/// The low address bits a [`View`] uses for `bits` (an index has at most 2^31 positions).
const VIEW_BITS_MASK: usize = 31;

/// A group of entries, aligned to its size (32 bytes).
#[repr(align(32))]
#[derive(Debug)]
pub(super) struct Group([AtomicU32; GROUP_ENTRIES]);

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
    groups: Box<[Group]>,
}

/// An index as checks reach it: the address of its entries with its `bits` in the low bits, so
/// that the one load of the shard's view gives both, and the entries are one dependent load
/// away instead of two (through the `Index` and its box).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct View(*mut Group);

impl View {
    /// The tagged address, as the shard's atomic holds it.
    pub(super) fn raw(self) -> *mut Group {
        self.0
    }

    pub(super) fn from_raw(raw: *mut Group) -> View {
        View(raw)
    }

    #[inline]
    fn bits(self) -> u32 {
        (self.0.addr() & VIEW_BITS_MASK) as u32
    }

    /// Where a probe for `hash` starts (as [`Index::home`]).
    #[inline]
    pub(super) fn home(self, hash: u64) -> usize {
        home(hash, self.bits())
    }

    /// Positions minus one.
    #[inline]
    pub(super) fn mask(self) -> usize {
        (1 << self.bits()) - 1
    }

    /// The entry at `pos` (at most [`mask`](Self::mask)).
    ///
    /// # Safety
    /// The viewed index is alive for `'a`: the caller loaded the view while pinned and stays
    /// pinned (an index is freed only after a grace period that began after it was replaced).
    #[inline]
    pub(super) unsafe fn entry<'a>(self, pos: usize) -> &'a AtomicU32 {
        debug_assert!(pos <= self.mask());
        let groups = self.0.map_addr(|addr| addr & !VIEW_BITS_MASK);
        // SAFETY: `groups` is the index's group array (the view was made by `Index::view`), alive
        // per the contract, with `2^bits / GROUP_ENTRIES` groups (at least one), so the group of
        // any position up to the mask is in it.
        unsafe { &(*groups.add(pos / GROUP_ENTRIES)).0[pos % GROUP_ENTRIES] }
    }
}

/// Where a probe for `hash` starts in an index of `2^bits` positions: the hash's top bits.
#[inline]
fn home(hash: u64, bits: u32) -> usize {
    (hash >> (64 - bits)) as usize
}

impl Index {
    /// The smallest index: 8 positions.
    pub(super) const MIN_BITS: u32 = 3;

    /// An empty index of `2^bits` positions (`bits` at least [`MIN_BITS`](Self::MIN_BITS)).
    pub(super) fn new(bits: u32) -> Index {
        assert!((Self::MIN_BITS..=VIEW_BITS_MASK as u32).contains(&bits), "{bits} index bits");
        let groups = (0..(1usize << bits) / GROUP_ENTRIES)
            .map(|_| Group(std::array::from_fn(|_| AtomicU32::new(EMPTY))))
            .collect();
        Index { bits, groups }
    }

    /// How checks reach this index.
    pub(super) fn view(&self) -> View {
        let groups = self.groups.as_ptr().cast_mut();
        View(groups.map_addr(|addr| addr | self.bits as usize))
    }

    /// The fewest bits whose index holds `keys` entries within the load factor.
    pub(super) fn bits_for(keys: usize) -> u32 {
        let positions = keys.saturating_mul(LOAD_DEN).div_ceil(LOAD_NUM).max(1);
        positions.next_power_of_two().trailing_zeros().max(Self::MIN_BITS)
    }

    /// How many entries the smallest index holds (every shard's first).
    #[cfg(kova_loom)]
    pub(super) fn keys_in_smallest() -> usize {
        (1usize..).find(|&keys| Self::bits_for(keys) > Self::MIN_BITS).map_or(0, |first| first - 1)
    }

    /// Whether one more entry fits within the load factor.
    pub(super) fn has_room_for(&self, keys: usize) -> bool {
        keys.saturating_mul(LOAD_DEN) <= self.capacity() * LOAD_NUM
    }

    pub(super) fn bits(&self) -> u32 {
        self.bits
    }

    pub(super) fn capacity(&self) -> usize {
        1 << self.bits
    }

    /// Bytes of one index of `2^bits` positions.
    pub(super) fn bytes_for(bits: u32) -> usize {
        std::mem::size_of::<Index>() + (std::mem::size_of::<Group>() << bits) / GROUP_ENTRIES
    }

    pub(super) fn bytes(&self) -> usize {
        Self::bytes_for(self.bits)
    }

    /// Where a probe for `hash` starts: the hash's top bits.
    #[inline]
    pub(super) fn home(&self, hash: u64) -> usize {
        home(hash, self.bits)
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

    fn entry(&self, pos: usize) -> &AtomicU32 {
        &self.groups[pos / GROUP_ENTRIES].0[pos % GROUP_ENTRIES]
    }

    #[inline]
    pub(super) fn load(&self, pos: usize, ordering: Ordering) -> u32 {
        self.entry(pos).load(ordering)
    }

    pub(super) fn store(&self, pos: usize, raw: u32, ordering: Ordering) {
        self.entry(pos).store(raw, ordering)
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
        for entry in self.groups.iter_mut().flat_map(|group| group.0.iter_mut()) {
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

    #[test]
    fn a_view_reaches_the_same_entries_with_the_same_homes() {
        assert!(Index::bits_for(MAX_SLOTS as usize) as usize <= VIEW_BITS_MASK);
        let largest = if cfg!(miri) { 6 } else { 12 };
        for bits in Index::MIN_BITS..=largest {
            let index = Index::new(bits);
            let view = index.view();
            assert_eq!(view.mask(), index.capacity() - 1);
            for pos in 0..index.capacity() {
                index.store(pos, pos as u32 + 1, Ordering::Relaxed);
            }
            for pos in 0..index.capacity() {
                // SAFETY: `index` is alive for the whole loop.
                assert_eq!(unsafe { view.entry(pos) }.load(Ordering::Relaxed), pos as u32 + 1);
            }
            for hash in [0, u64::MAX, 0x9E37_79B9_7F4A_7C15, 1 << 63] {
                assert_eq!(view.home(hash), index.home(hash));
            }
        }
    }
}
