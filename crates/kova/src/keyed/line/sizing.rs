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
/// How loaded an array is right after a rehash: 11/20. So a `u64` key takes at most 17 / 0.55
/// = 31 bytes (a 16-byte line and a 1-byte mark), and a probe is short (a hit at 11/20 looks at
/// 1.6 lines on average).
pub(in crate::keyed) const FRESH_NUM: usize = 11;
pub(in crate::keyed) const FRESH_DEN: usize = 20;
/// The least an array grows by, 6/5, so that growth is geometric; no more, so that an array
/// grown when its held keys fill it starts at a load of at least 13/20 / 6/5 = 0.54 (32 bytes a `u64` key at most,
/// whole groups included, from a thousand keys).
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

/// Lines for `keys` held keys right after a rehash (whole groups).
pub(in crate::keyed) fn lines_for(keys: usize) -> usize {
    (keys.saturating_mul(FRESH_DEN).div_ceil(FRESH_NUM)).max(MIN_LINES).next_multiple_of(GROUP_LINES)
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
#[cfg(kova_loom)]
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
