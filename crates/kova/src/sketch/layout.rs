//! Where a key's cells are: one line of eight words chosen by the hash, and a set of distinct
//! words within it chosen by the hash's other half.

use crate::loom::atomic::AtomicU64;

/// Words in one line: a 64-byte cache line of `AtomicU64`s.
pub(crate) const WORDS_PER_LINE: usize = 8;
/// Bytes of one line.
pub(crate) const LINE_BYTES: usize = WORDS_PER_LINE * std::mem::size_of::<u64>();
/// Bits of a word's position in its line, as packed in a [`Subsets`] entry.
const POSITION_BITS: u32 = 3;
const POSITION_MASK: u32 = (1 << POSITION_BITS) - 1;
/// The most subsets of one size there are: 8 choose 4.
const MAX_SUBSETS: usize = 70;
/// Bits of the hash that choose the line (the low half); the high half chooses the subset, so
/// the two choices are independent while the line count stays below 2^32.
const SUBSET_SHIFT: u32 = 32;

/// One cache line of cells, aligned so that it is one line of the CPU's too: every word a check
/// reads or writes is in it.
#[repr(align(64))]
#[derive(Debug)]
pub(crate) struct Line(pub(crate) [AtomicU64; WORDS_PER_LINE]);

impl Line {
    pub(crate) fn new() -> Self {
        Line(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Every set of `cells` distinct positions of a line, each packed as `cells` 3-bit positions in
/// ascending order: a key's hash picks one. A fixed array, so that choosing costs a multiply and
/// one load, not a shuffle.
#[derive(Debug, Clone)]
pub(crate) struct Subsets {
    packed: [u32; MAX_SUBSETS],
    len: u32,
    cells: u32,
}

/// A key's place: its line and its positions in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) line: usize,
    /// `cells` positions, 3 bits each, the first in the low bits.
    pub(crate) positions: u32,
}

impl Place {
    /// The `i`-th position.
    #[inline(always)]
    pub(crate) fn position(self, i: u32) -> usize {
        ((self.positions >> (i * POSITION_BITS)) & POSITION_MASK) as usize
    }
}

impl Subsets {
    /// All subsets of `cells` positions (1 to 8; the builder checked).
    #[expect(
        clippy::indexing_slicing,
        reason = "len counts the subsets of cells positions among 8, at most 8 choose 4 = MAX_SUBSETS"
    )]
    pub(crate) fn new(cells: u32) -> Self {
        let mut packed = [0; MAX_SUBSETS];
        let mut len = 0;
        for mask in 0u32..1 << WORDS_PER_LINE {
            if mask.count_ones() != cells {
                continue;
            }
            let mut entry = 0;
            let mut shift = 0;
            for position in 0..WORDS_PER_LINE as u32 {
                if mask & (1 << position) != 0 {
                    entry |= position << shift;
                    shift += POSITION_BITS;
                }
            }
            packed[len] = entry;
            len += 1;
        }
        Subsets { packed, len: len as u32, cells }
    }

    /// Positions per key.
    pub(crate) fn cells(&self) -> u32 {
        self.cells
    }

    /// How many subsets there are (8 choose `cells`).
    #[cfg(test)]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// The place of a key hashed to `hash` among `line_mask + 1` lines.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "Lemire's multiply-shift maps the hash onto 0..len, and len <= MAX_SUBSETS"
    )]
    pub(crate) fn place(&self, hash: u64, line_mask: usize) -> Place {
        let line = hash as usize & line_mask;
        // Lemire's multiply-shift maps the high half onto 0..len without a division.
        let index = ((hash >> SUBSET_SHIFT) * u64::from(self.len)) >> SUBSET_SHIFT;
        Place { line, positions: self.packed[index as usize] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_are_every_choice_of_distinct_positions() {
        for (cells, expected) in [(1, 8), (2, 28), (3, 56), (4, 70), (5, 56), (7, 8), (8, 1)] {
            let subsets = Subsets::new(cells);
            assert_eq!(subsets.len(), expected, "{cells} of 8");
            let mut seen = std::collections::HashSet::new();
            for &entry in &subsets.packed[..expected as usize] {
                let place = Place { line: 0, positions: entry };
                let positions: Vec<usize> = (0..cells).map(|i| place.position(i)).collect();
                assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?} distinct, ascending");
                assert!(positions.iter().all(|&p| p < WORDS_PER_LINE));
                assert!(seen.insert(positions));
            }
        }
    }

    #[test]
    fn the_low_bits_choose_the_line_and_the_high_bits_the_subset() {
        let subsets = Subsets::new(2);
        let place = subsets.place(0x0000_0000_0000_0123, 0xff);
        assert_eq!(place.line, 0x23);
        // A high half of 0 is the first subset, {0, 1}; the largest is the last, {6, 7}.
        assert_eq!((place.position(0), place.position(1)), (0, 1));
        let last = subsets.place(0xffff_ffff_0000_0000, 0xff);
        assert_eq!((last.line, last.position(0), last.position(1)), (0, 6, 7));
        // The high half spreads evenly over the 28 subsets.
        let mut counts = [0u32; 28];
        for i in 0..28 * 1000u64 {
            let hash = (i * ((1u64 << 32) / 28_000)) << 32;
            let place = subsets.place(hash, 0);
            let index = subsets.packed[..28].iter().position(|&e| e == place.positions).unwrap();
            counts[index] += 1;
        }
        assert!(counts.iter().all(|&c| (990..=1010).contains(&c)), "{counts:?}");
    }

    #[test]
    fn a_line_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Line>(), LINE_BYTES);
        assert_eq!(std::mem::align_of::<Line>(), 64);
    }
}
