//! Work on a key's cell under its shard lock, for the callers outside the table that read or
//! update a key's state with their own CAS loops: the composite limits (`limits/keyed.rs`),
//! reservations (`reserve.rs`) and the settling charge (`settle.rs`).

use std::hash::Hash;

use super::super::door;
use super::super::epoch;
use super::Keyed;
use crate::{Algorithm, Clock};

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Runs `f` on `key`'s algorithm and cell under its shard lock, as [`refund`](Keyed::refund)
    /// does (checks of the key run meanwhile; no eviction or quota change can lose what `f`
    /// writes with a CAS loop). `None` when the key is not held.
    pub(crate) fn with_held_cell<R>(&self, key: &K, f: impl FnOnce(&A, &A::Cell, &C) -> R) -> Option<R> {
        let hash = self.hash(key);
        let guard = epoch::pin();
        let locked = self.shard(hash).lock(&guard);
        let pos = locked.find(hash, key)?;
        self.cool(&locked, pos, hash);
        Some(f(self.quotas.get(locked.quota(pos)), locked.cell(pos), &self.clock))
    }

    /// Runs `f` on `key`'s algorithm and cell under its shard lock, as
    /// [`with_held_cell`](Keyed::with_held_cell) does; for a key not held, on the state an insert
    /// would give it now (fresh, charged what the doorkeeper admitted of it), which `f` may read
    /// and nothing keeps. For a look at what a check would decide (`limits/keyed.rs`).
    pub(crate) fn with_cell_or_new<R>(&self, key: &K, f: impl FnOnce(&A, &A::Cell, &C) -> R) -> R {
        // Outside the lock: the quota function is the user's code.
        let new_quota = self.quota_for_new(key);
        let hash = self.hash(key);
        let guard = epoch::pin();
        let locked = self.shard(hash).lock(&guard);
        if let Some(pos) = locked.find(hash, key) {
            self.cool(&locked, pos, hash);
            return f(self.quotas.get(locked.quota(pos)), locked.cell(pos), &self.clock);
        }
        let algorithm = self.quotas.get(new_quota);
        // Under the lock, as an insert reads it.
        let admitted = self.door.as_ref().and_then(|door| door.seen(hash, self.clock.now_nanos()));
        f(algorithm, &door::fresh_cell(algorithm, admitted), &self.clock)
    }
}
