//! How big a shard's array is: the loads it keeps (held keys, and held plus removed lines),
//! how it grows and shrinks, and what that costs a key.

use super::array::GROUP_LINES;

/// The most held keys an array takes before it grows: 13/20 of its lines. A hit at that load
/// looks at 1.9 lines on average (linear probing: (1 + 1/(1 - load)) / 2), against 2.5 at 3/4:
/// a probe of small tables, which hit the cache, is bound by the lines it looks at.
pub(in crate::keyed) const HELD_NUM: usize = 13;
pub(in crate::keyed) const HELD_DEN: usize = 20;
/// The most lines in use, held and removed, before a rehash sheds the removed ones: 3/4, above
/// [`HELD_NUM`]/[`HELD_DEN`], so that a table at its key bound, where a flood of new keys evicts
/// and removes, sheds no more often than when both were 3/4.
pub(in crate::keyed) const FULL_NUM: usize = 3;
pub(in crate::keyed) const FULL_DEN: usize = 4;
/// How loaded a dense array is right after a rehash: 11/20. So a `u64` key takes at most 17 /
/// 0.55 = 31 bytes (a 16-byte line and a 1-byte mark), and a probe is short (a hit at 11/20 looks
/// at 1.6 lines on average). Small arrays are sparser ([`SPARSE_LINES`]).
pub(in crate::keyed) const FRESH_NUM: usize = 11;
pub(in crate::keyed) const FRESH_DEN: usize = 20;
/// The least an array grows by, 6/5, so that growth is geometric; no more, so that a dense array
/// grown when its held keys fill it starts at a load of at least 13/20 / 6/5 = 0.54 (32 bytes a
/// `u64` key at most, whole groups included, once arrays are dense).
pub(in crate::keyed) const GROWTH_NUM: usize = 6;
pub(in crate::keyed) const GROWTH_DEN: usize = 5;
/// The smallest array.
pub(in crate::keyed) const MIN_LINES: usize = GROUP_LINES;
/// The most lines a shard starts with (and shrinks to): a few groups, so that a few hot keys in
/// one shard seldom share one (1 KiB for `u64` keys). Fewer when half its key bound needs fewer
/// ([`start_lines`]).
pub(in crate::keyed) const START_LINES: usize = 8 * GROUP_LINES;
/// Replaced arrays waiting for their grace period hold at most this many times the current
/// array (see `take_place`).
pub(in crate::keyed) const RETIRED_ARRAYS: usize = 4;

/// Arrays are made sparse up to this many lines (64 KiB of `u64` lines): a shard's array holds
/// its keys at a quarter of the load [`FRESH_NUM`]/[`FRESH_DEN`] would give them, until that many
/// lines hold them at that load. A check then nearly always finds its key on its home line,
/// where at the dense load a hit looks at 1.6 lines, and whether it looks at one or two is a
/// branch the CPU mispredicts; and the keys that different threads check seldom share a cache
/// line, whose every admission writes. Up to a few thousand keys a shard, memory is cheap
/// against both: at most [`SPARSE_FACTOR`] times the bytes per key of a dense array, and at most
/// this many lines a shard.
pub(in crate::keyed) const SPARSE_LINES: usize = 4096;
/// How many times the dense lines a sparse array takes. 1 (dense) under loom and Miri: sparsity
/// changes how large an array is, not how it is read and written, and there every line is work
/// (a loom atomic to explore, an interpreted write to make).
pub(in crate::keyed) const SPARSE_FACTOR: usize = if cfg!(any(kova_loom, miri)) { 1 } else { 4 };

/// Lines for `keys` held keys right after a rehash (whole groups): the dense array's lines, or
/// [`SPARSE_FACTOR`] times as many up to [`SPARSE_LINES`]. Never fewer for more keys, so that
/// arrays only grow as keys arrive and a shard's key bound bounds its array.
pub(in crate::keyed) fn lines_for(keys: usize) -> usize {
    let dense =
        (keys.saturating_mul(FRESH_DEN).div_ceil(FRESH_NUM)).max(MIN_LINES).next_multiple_of(GROUP_LINES);
    dense.max(dense.saturating_mul(SPARSE_FACTOR).min(SPARSE_LINES))
}

/// The lines a shard of at most `max_keys` keys starts with.
pub(in crate::keyed) fn start_lines(max_keys: usize) -> usize {
    lines_for(max_keys / 2).min(START_LINES)
}

/// The lines an array of `len` lines grows to when its held keys need `needed` (more than
/// `len`): by at least the least growth, at most what the shard's key bound needs.
pub(in crate::keyed) fn grown_lines(len: usize, needed: usize, max_keys: usize) -> usize {
    needed.max(len.saturating_mul(GROWTH_NUM).div_ceil(GROWTH_DEN)).min(lines_for(max_keys + 1).max(needed))
}

/// How many keys a shard of `max_keys` keys holds before it grows its first array.
#[cfg(any(kova_loom, test))]
pub(in crate::keyed) fn keys_in_first_array(max_keys: usize) -> usize {
    let len = start_lines(max_keys);
    (0..=len).rev().find(|&keys| fits(keys, keys, len)).unwrap_or(0)
}

/// Whether `held` keys in `occupied` lines (held and removed) fit an array of `len` lines.
pub(in crate::keyed) fn fits(held: usize, occupied: usize, len: usize) -> bool {
    held.saturating_mul(HELD_DEN) <= len * HELD_NUM && occupied.saturating_mul(FULL_DEN) <= len * FULL_NUM
}

#[cfg(test)]
mod tests {
    use super::super::array::Line;
    use super::*;

    /// Right after a rehash an array holds its keys at a load of at most 11/20, so they fit
    /// (at most 13/20 held) with room to grow; a small array at a quarter of that, at most
    /// [`SPARSE_LINES`] lines; and once arrays are dense a `u64` key costs at most 32 bytes, also
    /// in an array grown by the least growth from a full one.
    #[test]
    fn sizing_keeps_the_loads() {
        let mut last = 0;
        for keys in (1..5_000).chain([123_456, 1 << 20]) {
            let len = lines_for(keys);
            assert!(len >= last, "{keys} keys: {len} lines, fewer than for one key less");
            last = len;
            assert!(keys * FRESH_DEN <= len * FRESH_NUM, "{keys} keys in {len} lines");
            assert!(fits(keys, keys, len));
            let bytes_per_key = (len * (std::mem::size_of::<Line<u64>>() + 1)) as f64 / keys as f64;
            if len <= SPARSE_LINES {
                // Sparse: a quarter of the dense load while four times the dense lines fit.
                let dense = keys * FRESH_DEN / FRESH_NUM;
                assert!(len >= (SPARSE_FACTOR * dense).min(SPARSE_LINES), "{keys} keys in {len} lines");
            } else {
                // Whole groups add up to 7 lines, which matters only below a thousand keys.
                assert!(bytes_per_key <= 32.0, "{keys} keys: {bytes_per_key} bytes each");
            }
        }
        // A full array of held keys takes one more: the grown array holds them at 32 bytes
        // each at most.
        let groups = if cfg!(miri) { 2_000 } else { 20_000 };
        for len in (1..groups).map(|groups| groups * GROUP_LINES) {
            let held = len * HELD_NUM / HELD_DEN;
            assert!(fits(held, held, len) && !fits(held + 1, held + 1, len));
            let needed = lines_for(held + 1);
            if needed <= SPARSE_LINES || needed <= len {
                continue;
            }
            let grown = grown_lines(len, needed, usize::MAX / 2).next_multiple_of(GROUP_LINES);
            assert!(grown * GROWTH_DEN >= len * GROWTH_NUM, "{len} lines grew to {grown}");
            let bytes_per_key = (grown * (std::mem::size_of::<Line<u64>>() + 1)) as f64 / (held + 1) as f64;
            assert!(bytes_per_key <= 32.0, "{len} lines grew to {grown}: {bytes_per_key} bytes each");
        }
    }
}
