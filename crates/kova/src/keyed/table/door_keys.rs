//! What the table does for keys only the doorkeeper has seen: their first check admitted at the
//! door without the shard's lock (`door.rs`'s module doc says why no key gets more than its
//! quota), so that a flood of one-off keys takes no lock; and their reset, removal and refund,
//! which forget the door's entry as they would forget the key's state.

use std::hash::Hash;

use super::super::door;
use super::super::epoch::Guard;
use super::super::line_shard::LineShard;
use super::Keyed;
use crate::loom::atomic::{fence, Ordering};
use crate::loom::faults;
use crate::{Algorithm, Clock, Decision};

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Admits one unit of `key` (hash `hash`, in `shard`), under the default quota, at the door
    /// without the lock: `None`, having changed nothing, when the table has no door, the key is
    /// held, its word is taken, or an insert into the shard is or was under way meanwhile (the
    /// check then goes to the lock).
    pub(super) fn admit_at_door(
        &self,
        shard: &LineShard<K, A>,
        hash: u64,
        key: &K,
        guard: &Guard,
    ) -> Option<Decision> {
        let door = self.door.as_ref()?;
        // Acquire: pairs with the Release that ends an insert, so that the probe below sees the
        // key of any insert this count includes.
        let before = shard.inserts(Ordering::Acquire);
        if before % 2 == 1 || shard.find(hash, key, guard).is_some() {
            return None;
        }
        let now = self.clock.now_nanos();
        let claim = door.claim(hash, now).ok()?;
        // SeqCst: pairs with the fence of an insert's announcement (`lock.rs`): either its read
        // of the door sees our entry, or our read below sees the count it changed.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence. An undo that fails finds the entry taken by an insert
        // of the key, which charged this unit: the admission stands.
        if shard.inserts(Ordering::Relaxed) != before && !faults::door_count_unchecked() && claim.undo() {
            return None;
        }
        // Decided at the entry's time, which an insert charges (see `slow.rs`).
        Some(self.fresh_decision(self.quotas.default_algorithm(), 1, now))
    }

    /// Forgets the doorkeeper's entry of the key of `hash`, if the table has a door (under the
    /// key's shard lock: a reset or removal).
    pub(super) fn forget_at_door(&self, hash: u64) {
        if let Some(door) = &self.door {
            door.forget(hash);
        }
    }

    /// Gives back `cost` units of the key of `hash`, not held, under its shard lock: the unit the
    /// door admitted, if its entry is young and the algorithm can refund it (decided on the state
    /// the key would have had, had that check inserted it). Whether anything was given back.
    pub(super) fn refund_at_door(&self, hash: u64, cost: u64) -> bool {
        let Some(door) = &self.door else { return false };
        if cost == 0 {
            // Nothing to give back: the entry stays.
            return false;
        }
        let Some(at) = door.seen(hash, self.clock.now_nanos()) else { return false };
        let algorithm = self.quotas.default_algorithm();
        let refunded = algorithm.refund_cell(&door::fresh_cell(algorithm, Some(at)), &self.clock, cost);
        if refunded {
            door.forget(hash);
        }
        refunded
    }
}
