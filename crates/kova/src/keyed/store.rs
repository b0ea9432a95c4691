//! What the table's operations need from a shard (`line_shard.rs`): lock-free lookups, and the
//! lock holder's changes. A key's *place* says which cell a check wrote (`StoreHit::place`); the
//! *positions* are the lines a probe walks.

use super::epoch::Guard;

use super::quotas::QuotaId;
use super::word::Freezer;

/// A shard: lock-free lookups, and a lock for everything else.
pub(super) trait Store<K, C> {
    /// A key found without the lock.
    type Hit<'g>: StoreHit<'g, C> + Copy
    where
        Self: 'g;
    /// The shard with its lock held.
    type Locked<'a>: StoreLocked<K, C>
    where
        Self: 'a;

    /// Starts loading where `hash`'s key would be, before the thread is pinned (so that the
    /// cache miss overlaps the pin). A hint: it reads nothing it relies on.
    #[inline(always)]
    fn prefetch(&self, _hash: u64) {}

    /// Finds `key` without a lock. `None` is not proof of absence (see `Shard::find`).
    fn find<'g>(&'g self, hash: u64, key: &K, guard: &'g Guard) -> Option<Self::Hit<'g>>
    where
        K: Eq;

    /// After a check wrote `hit`'s cell, a cell that cannot be frozen: whether the write stands
    /// (see `line_cell.rs`).
    fn still_linked(&self, hit: &Self::Hit<'_>) -> bool;

    /// Takes the lock, first handing back what finished its grace period.
    fn lock<'a>(&'a self, guard: &'a Guard) -> Self::Locked<'a>;

    /// Keys held (a snapshot).
    fn len(&self) -> usize;

    /// Bytes held (a snapshot), the shard struct itself not included.
    fn memory(&self) -> usize;
}

/// A key found without the lock, used while the thread stays pinned.
pub(super) trait StoreHit<'g, C> {
    fn cell(&self) -> &'g C;
    fn quota(&self) -> QuotaId;
    /// Which cell the check wrote (its place), for the lock holder to tell whether the key
    /// still has it.
    fn place(&self) -> u64;
}

/// The operations of the lock holder. `Entry` names a held key until the lock is released (or
/// until a change through this lock moves it).
pub(super) trait StoreLocked<K, C> {
    type Entry: Copy + PartialEq + std::fmt::Debug;

    /// Finds `key` (authoritative): its position and entry.
    fn find(&self, hash: u64, key: &K) -> Option<(usize, Self::Entry)>
    where
        K: Eq;
    fn key(&self, entry: Self::Entry) -> &K;
    fn cell(&self, entry: Self::Entry) -> &C;
    fn quota(&self, entry: Self::Entry) -> QuotaId;
    /// What [`StoreHit::place`] says for the key of `entry` found without the lock.
    fn place_of(&self, entry: Self::Entry) -> u64;
    /// Whether the shard holds its most keys.
    fn is_full(&self) -> bool;
    /// Room for one more key: a place for [`insert`](Self::insert), or `None` when none
    /// is free of its grace period. May rehash the array (and run the user's `Hash`).
    fn take_place(&mut self, hash_key: &impl Fn(&K) -> u64) -> Option<u32>;
    /// Gives back room from [`take_place`](Self::take_place) that was not used.
    fn put_back(&mut self, place: u32);
    /// Inserts `key` (absent, checked by the caller) with `cell` and `quota` into the room
    /// `place` from [`take_place`](Self::take_place); its cell owns `heap` heap bytes.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        place: u32,
        hash: u64,
        key: K,
        cell: C,
        quota: QuotaId,
        heap: usize,
        hash_key: &impl Fn(&K) -> u64,
    ) -> Self::Entry;
    /// Removes the key of `entry` at `pos`.
    fn remove_at(&mut self, pos: usize, entry: Self::Entry, heap: usize, hash_key: &impl Fn(&K) -> u64);
    /// Unlinks the key of `entry` at `pos` unless `keep` says otherwise after looking at its
    /// cell, with racing checks either seen or redone; returns whether it was unlinked.
    #[allow(clippy::too_many_arguments)]
    fn unlink_if(
        &mut self,
        pos: usize,
        entry: Self::Entry,
        heap: usize,
        keep: impl FnOnce(&C) -> bool,
        freezer: &impl Freezer<C>,
        hash_key: &impl Fn(&K) -> u64,
    ) -> bool;
    /// Moves the key of `old` at `pos` to quota `quota` with the cell `build` makes from its
    /// cell; gives the key back when there is no room free of its grace period.
    #[allow(clippy::too_many_arguments)]
    fn replace(
        &mut self,
        pos: usize,
        old: Self::Entry,
        old_heap: usize,
        hash: u64,
        key: K,
        quota: QuotaId,
        new_heap: usize,
        build: impl FnOnce(&C) -> C,
        freezer: &impl Freezer<C>,
        hash_key: &impl Fn(&K) -> u64,
    ) -> Result<Self::Entry, K>
    where
        K: Eq;
    /// The held key at `pos`, if any.
    fn entry_at(&self, pos: usize) -> Option<Self::Entry>;
    /// Positions `entry_at` can look at.
    fn positions(&self) -> usize;
    /// The order the reclamation scan visits them in.
    fn scan_order(&self) -> ScanOrder;
    /// The longest run of positions in use (held or removed) that a probe may pass (tests).
    #[cfg(test)]
    fn longest_run(&self) -> usize;
    /// Where the reclamation scan resumes, and moving it.
    fn cursor(&self) -> usize;
    fn set_cursor(&mut self, cursor: usize);
}

/// Consecutive positions the reclamation scan looks at before it jumps (a cache line or two).
const SCAN_RUN: usize = 8;

/// The order in which a shard's reclamation scan (`Keyed::make_room`) visits its positions:
/// runs of [`SCAN_RUN`] consecutive positions, each run a golden-ratio stride of runs after the
/// last, the stride coprime with the number of runs, so that every position comes in turn.
///
/// Positions follow the hashes (a probe starts where the hash's top bits say).
/// A scan in position order evicts by hash: keys just ahead of the cursor, not scanned for a
/// whole pass, pile up to twice the average load while those just behind it are gone, and at
/// the key bound a flood of new keys then probes runs of tens of thousands of lines (seen: a
/// table of 131,072 `u64` keys fell to about 10 thousand inserts a second after two passes).
/// Scattered runs spread each stretch of evictions over the whole array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScanOrder {
    positions: usize,
    runs: usize,
    stride: usize,
}

impl ScanOrder {
    /// The order over `positions` positions.
    pub(super) fn new(positions: usize) -> ScanOrder {
        let runs = positions.div_ceil(SCAN_RUN).max(1);
        // 0.618 of the runs, made coprime with their number.
        let mut stride = (runs * 618 / 1000).max(1);
        while gcd(stride, runs) != 1 {
            stride += 1;
        }
        ScanOrder { positions, runs, stride }
    }

    /// The position visited after `pos`.
    pub(super) fn next(self, pos: usize) -> usize {
        let next = pos + 1;
        if next % SCAN_RUN != 0 && next < self.positions {
            return next;
        }
        let run = (pos / SCAN_RUN + self.stride) % self.runs;
        run * SCAN_RUN
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every position once per pass, from any start, and runs far apart.
    #[test]
    fn the_scan_visits_every_position_once_a_pass() {
        let sizes: &[usize] = if cfg!(miri) {
            &[1, 7, 8, 9, 64, 88, 1_000]
        } else {
            &[1, 7, 8, 9, 64, 88, 1_000, 4_096, 238_320]
        };
        for &positions in sizes {
            let order = ScanOrder::new(positions);
            let start = positions / 3;
            let mut seen = vec![false; positions];
            let mut pos = start;
            for _ in 0..positions {
                assert!(pos < positions && !seen[pos], "{positions}: {pos} twice");
                seen[pos] = true;
                pos = order.next(pos);
            }
            assert_eq!(pos, start, "{positions}: a pass ends where it began");
            if positions >= 1_000 {
                let jump = order.next(SCAN_RUN - 1).abs_diff(SCAN_RUN - 1);
                assert!(jump >= positions / 4, "{positions}: a jump of {jump}");
            }
        }
    }
}
