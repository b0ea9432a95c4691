//! The table's side of hot keys (`keyed/hot.rs`): the hit path's cold branch to a hot slot,
//! the lock holder's promotion and demotion, and the demotion that comes first wherever the
//! lock holder reads or writes a key's state.

use std::hash::Hash;

use super::super::epoch::Guard;
use super::super::hot::{self, HotSlots};
use super::super::line::{LineHit, LineLocked};
use super::entry::Entry;
use super::Keyed;
use crate::cell::CellStorage;
use crate::loom::atomic::Ordering;
use crate::striped::lease::Central;
use crate::{Algorithm, Clock, Decision};

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// The hit path's cold branch, for a word the CAS loop stopped at: a hot marker of this key
    /// is decided on its slot's stripes. `None` (deciding nothing) for any other marker.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn hot_hit(
        &self,
        hot: &HotSlots<A>,
        hash: u64,
        key: &K,
        hit: &LineHit<'_, A>,
        algorithm: &A,
        cost: u64,
        guard: &Guard,
    ) -> Option<Decision> {
        // Before the marker is loaded: a change of the key that closes its slot is counted
        // after it (`Forgets`), so a count that includes it comes with a marker that is gone.
        let seen = self.forgets_seen();
        // Acquire: pairs with the promotion's Release store of the marker, so the slot's hash
        // and state are seen.
        let value = A::Storage::inline_word(hit.cell())?.load(Ordering::Acquire);
        let slot = hot.owned(value, hash)?;
        let leased = hot.decide(slot, algorithm, &self.clock, cost);
        if leased.stranded > 0 {
            self.hand_in(hash, key, leased.stranded, seen, guard);
        }
        leased.decision
    }

    /// A check of the key of `hash` saw its word's compare-exchange fail at `now`: counted, and
    /// past the threshold ([`HotKeys::promote_after`](crate::keyed::HotKeys::promote_after)) the key is
    /// promoted, here, by this check taking the lock (its own CAS loop then finds the marker and
    /// goes to the slot).
    #[cold]
    #[inline(never)]
    pub(super) fn contended(&self, hot: &HotSlots<A>, hash: u64, key: &K, now: u64, guard: &Guard) {
        if hot.note(hash, now) {
            if let Entry::Held(entry) = self.entry(hash, key, guard) {
                entry.promote();
            }
        }
    }

    /// A sweep's look at the held line `pos`, which may be striped: a key whose slot leased
    /// nothing since the last sweep has cooled and is demoted. Returns whether it stays striped.
    pub(super) fn sweep_hot(&self, locked: &LineLocked<'_, K, A>, pos: usize) -> bool {
        let Some(hot) = &self.hot else { return false };
        // User code (`Hash`) under the lock, before anything is frozen, as a rehash does.
        let hash = self.hash(locked.key(pos));
        let Some(slot) = self.hot_slot(locked, pos, hash) else { return false };
        if !hot.quiet(slot) {
            return true;
        }
        self.cool(locked, pos, hash);
        false
    }

    /// The table's count of forgotten states as a check sees it before it loads a key's word
    /// (`Forgets::seen`).
    pub(crate) fn forgets_seen(&self) -> u64 {
        self.forgets.seen()
    }

    /// Gives back, under the lock, units a check took from a slot that closed before they could
    /// go back to it: to the key's state wherever it is now (a slot again, or its line), if that
    /// is still the state the check was decided on, that is, if no key of the table was
    /// removed, reset, reclaimed, evicted or moved since the check read `seen`. A key removed
    /// and back starts fresh, and units handed to it would be units beyond its quota; after
    /// another key's change the units stay taken, which is never too much. A key no longer held
    /// starts fresh: nothing to give back to.
    #[cold]
    fn hand_in(&self, hash: u64, key: &K, units: u64, seen: u64, guard: &Guard) {
        let Entry::Held(entry) = self.entry(hash, key, guard) else { return };
        if self.forgets.read() != seen {
            return;
        }
        match (entry.slot(), &self.hot) {
            (Some(slot), Some(hot)) => {
                hot.central(slot, entry.algorithm(), &self.clock).give_back(units);
            }
            _ => {
                entry.algorithm().refund_cell(entry.cell(), &self.clock, units);
            }
        }
    }

    /// The slot the held line `pos` (of the key of `hash`) is striped in, if any.
    pub(super) fn hot_slot(&self, locked: &LineLocked<'_, K, A>, pos: usize, hash: u64) -> Option<usize> {
        let hot = self.hot.as_ref()?;
        // Relaxed: under the lock, the marker was written by a lock holder.
        let value = A::Storage::inline_word(locked.cell(pos))?.load(Ordering::Relaxed);
        hot.owned(value, hash)
    }

    /// Whether the held line `pos` may be striped (its word is a hot marker): eviction scans,
    /// which have no hash at hand, leave such keys alone (a striped key is not idle).
    pub(super) fn maybe_hot(&self, locked: &LineLocked<'_, K, A>, pos: usize) -> bool {
        self.hot.is_some()
            && A::Storage::inline_word(locked.cell(pos))
                // Relaxed: as in `hot_slot`.
                .is_some_and(|word| hot::slot_of(word.load(Ordering::Relaxed)).is_some())
    }

    /// Demotes the held line `pos` (of the key of `hash`) if it is striped, so that the lock
    /// holder reads and writes the key's real state in its line (a held entry's cell does this
    /// first, `table/entry.rs`).
    pub(super) fn cool(&self, locked: &LineLocked<'_, K, A>, pos: usize, hash: u64) {
        let (Some(slot), Some(hot)) = (self.hot_slot(locked, pos, hash), self.hot.as_ref()) else { return };
        let Some(word) = A::Storage::inline_word(locked.cell(pos)) else { return };
        hot.demote(slot, word, self.quotas.get(locked.quota(pos)), &self.clock, locked.guard());
    }

    /// Stripes `key` now, as if the table had found it contended: its checks then spend from
    /// per-thread stripes leasing batches of its state ([`KeyedBuilder::hot_keys`]). Returns
    /// whether it is striped: `false` for a table without hot keys, a key not held (a key the
    /// doorkeeper admitted is held from its second check), or when every hot slot is in use (or
    /// waiting for its grace period).
    ///
    /// [`KeyedBuilder::hot_keys`]: super::super::KeyedBuilder::hot_keys
    pub fn promote(&self, key: &K) -> bool {
        if self.hot.is_none() {
            return false;
        }
        self.with_entry(key, |entry| match entry {
            Entry::Held(entry) => entry.promote(),
            Entry::Vacant(_) => false,
        })
    }

    /// Puts a striped `key` back into its line, its stripes' unspent units given back; returns
    /// whether it was striped.
    pub fn demote(&self, key: &K) -> bool {
        self.with_entry(key, |entry| {
            let Entry::Held(entry) = entry else { return false };
            let striped = entry.slot().is_some();
            entry.cool();
            striped
        })
    }

    /// The table with hot slots (`keyed/hot.rs`).
    pub(in super::super) fn with_hot(mut self, hot: Option<HotSlots<A>>) -> Self {
        self.hot = hot;
        self
    }

    /// Keys striped now (a snapshot; 0 without [`KeyedBuilder::hot_keys`]).
    ///
    /// [`KeyedBuilder::hot_keys`]: super::super::KeyedBuilder::hot_keys
    pub fn hot_len(&self) -> usize {
        self.hot.as_ref().map_or(0, HotSlots::in_use)
    }
}

impl<K, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Bytes of the hot slots (fixed when the table is built).
    pub(super) fn hot_bytes(&self) -> usize {
        self.hot.as_ref().map_or(0, HotSlots::bytes)
    }
}

#[cfg(test)]
mod tests;
