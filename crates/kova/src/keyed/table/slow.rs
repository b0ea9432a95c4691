//! The slow path of a check: under the shard's lock, the key looked up again, moved to the
//! quota passed with the check or inserted, and decided there.

use std::hash::Hash;

use super::super::door::{self, Admission};
use super::super::epoch::{self, Guard};
use super::super::line_locked::NewKey;
use super::super::line_shard::LineShard;
use super::super::quotas::{At, QuotaId, DEFAULT_ID};
use super::{check_cost, heap_of, Keyed};
use crate::loom::atomic::Ordering;
use crate::{Algorithm, CheckError, Clock, Decision};

/// What a check already did on a key's place before finding it unlinked.
pub(super) type Prior = Option<(u64, Decision)>;

/// A check that takes the slow path.
#[derive(Clone, Copy)]
pub(super) struct Slow<'k, K> {
    pub(super) hash: u64,
    pub(super) key: &'k K,
    pub(super) cost: u64,
    /// The quota the key gets if it is inserted.
    pub(super) new_quota: QuotaId,
    /// The quota passed with the check: the key moves to it.
    pub(super) force: Option<QuotaId>,
    /// Whether the doorkeeper may admit the check without inserting the key (a plain check);
    /// not for a check that must leave the key held (`check_in`).
    pub(super) at_door: bool,
}

/// How often a new key waits, unpinned, for a place to leave its grace period before the
/// table-full policy answers: `NO_SLOT_YIELDS` yields, then sleeps of `NO_SLOT_SLEEP` (about
/// 3 ms in all). Only when every place of a full shard is held or waiting, which takes a flood of
/// new keys while some thread is preempted in the middle of a check.
const NO_SLOT_RETRIES: usize = 20;
const NO_SLOT_YIELDS: usize = 8;
const NO_SLOT_SLEEP: std::time::Duration = std::time::Duration::from_micros(250);

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// `check`'s slow path (see `check_n_slow`).
    #[cold]
    #[inline(never)]
    pub(super) fn check_one_slow(
        &self,
        shard: &LineShard<K, A>,
        hash: u64,
        key: &K,
        prior: Prior,
        guard: Guard,
    ) -> Decision {
        match self.check_n_slow(shard, hash, key, 1, prior, guard) {
            Ok(decision) => decision,
            // Only an algorithm whose capacity is 0 gets here (kova's are all at least 1): one
            // unit can never be admitted.
            Err(CheckError::CostExceedsCapacity { capacity, .. }) => {
                Decision::denied(capacity, 0, u64::MAX, 0)
            }
            // Not made here: the table's cells are always its own algorithms'.
            Err(CheckError::CellMismatch { .. }) => Decision::denied(0, 0, u64::MAX, 0),
        }
    }

    /// `check_n` for a key not found without the lock, or found unlinked after the write: kept
    /// out of line so that the hit path stays small.
    #[cold]
    #[inline(never)]
    pub(super) fn check_n_slow(
        &self,
        shard: &LineShard<K, A>,
        hash: u64,
        key: &K,
        cost: u64,
        prior: Prior,
        guard: Guard,
    ) -> Result<Decision, CheckError> {
        let new_quota = self.quota_for_new(key);
        self.check_slow(shard, Slow { hash, key, cost, new_quota, force: None, at_door: true }, prior, guard)
    }

    /// Checks `cost` units of `key`, inserting it when it is not held, as a table without a
    /// doorkeeper would (what the door admitted of it is charged first): for callers that go on
    /// to work on the key's held state (a reservation, a settling charge).
    pub(crate) fn check_in(&self, key: &K, cost: u64) -> Result<Decision, CheckError> {
        let hash = self.hash(key);
        let new_quota = self.quota_for_new(key);
        let slow = Slow { hash, key, cost, new_quota, force: None, at_door: false };
        self.check_slow(self.shard(hash), slow, None, epoch::pin())
    }

    /// The quota a key not held yet gets: the quota function's, or the default.
    pub(super) fn quota_for_new(&self, key: &K) -> QuotaId {
        match &self.quota_fn {
            None => DEFAULT_ID,
            Some(f) => self.quotas.intern_or_default(f(key)),
        }
    }

    /// The slow path: [`check_locked`](Self::check_locked), retried a few times (unpinned for a
    /// moment in between) while every place of the shard is held or waiting for its grace period.
    pub(super) fn check_slow(
        &self,
        shard: &LineShard<K, A>,
        slow: Slow<'_, K>,
        mut prior: Prior,
        mut guard: Guard,
    ) -> Result<Decision, CheckError> {
        if slow.at_door
            && prior.is_none()
            && slow.cost == 1
            && slow.new_quota == DEFAULT_ID
            && slow.force.is_none()
        {
            if let Some(decision) = self.admit_at_door(shard, slow.hash, slow.key, &guard) {
                return Ok(decision);
            }
        }
        let mut attempt = 0;
        loop {
            let last = attempt == NO_SLOT_RETRIES;
            if let Some(decision) = self.check_locked(shard, &slow, prior, &guard, last)? {
                return Ok(decision);
            }
            // Once unpinned, the place `prior` names may be reused: it no longer identifies
            // anything (and if the key still had it, the first attempt returned).
            prior = None;
            if attempt < NO_SLOT_YIELDS {
                guard.repin_after(std::thread::yield_now);
            } else {
                // A thread preempted while pinned holds every grace period back: give it time.
                guard.repin_after(|| std::thread::sleep(NO_SLOT_SLEEP));
            }
            attempt += 1;
        }
    }

    /// The slow path, under the shard's lock: the key is looked up again (authoritatively); if
    /// `prior` says the check already updated the place the key still has, that decision stands;
    /// otherwise the check is decided here, after moving the key to `force` (a quota passed with
    /// the check) or inserting it with `new_quota`. `None` when a new key found no place free of
    /// its grace period (unless `last`: then the table-full policy answers).
    pub(super) fn check_locked(
        &self,
        shard: &LineShard<K, A>,
        slow: &Slow<'_, K>,
        prior: Prior,
        guard: &Guard,
        last: bool,
    ) -> Result<Option<Decision>, CheckError> {
        let Slow { hash, key, cost, new_quota, force, at_door } = *slow;
        let mut locked = shard.lock(guard);
        if let Some(mut pos) = locked.find(hash, key) {
            if let Some((place, decision)) = prior {
                if locked.place_of(pos) == place {
                    return Ok(Some(decision));
                }
            }
            if let Some(id) = force {
                if locked.quota(pos) != id {
                    pos = self.convert(&mut locked, pos, hash, id).unwrap_or(pos);
                }
            }
            let algorithm = self.quotas.get(locked.quota(pos));
            check_cost(algorithm, cost)?;
            // A striped key is decided on its slot, as its checks without the lock are.
            if let Some(decision) = self.hot_decide_locked(&locked, pos, hash, cost) {
                return Ok(Some(decision));
            }
            self.cool(&locked, pos, hash);
            return Ok(Some(algorithm.decide_cell(locked.cell(pos), &self.clock, cost)));
        }
        let id = force.unwrap_or(new_quota);
        let algorithm = self.quotas.get(id);
        check_cost(algorithm, cost)?;
        if cost == 0 {
            // A peek inserts nothing.
            return Ok(Some(self.peek_new(algorithm, hash)));
        }
        // Under the lock, so that the door's word for this key and its insert are ordered, and
        // after announcing the insert, so that an admission without the lock is seen or undone.
        if let Some(door) = &self.door {
            locked.announce_insert();
            let door_may_admit = at_door && cost == 1 && id == DEFAULT_ID;
            if door_may_admit {
                if let Admission::Admitted(now) = door.admit(hash, self.clock.now_nanos()) {
                    // Decided at the entry's time: a fresh state's decision depends on it (a
                    // window's end, a bucket's time quantum), and the insert charges it then.
                    return Ok(Some(self.fresh_decision(algorithm, 1, now)));
                }
            }
        }
        let hash_key = |k: &K| self.hash(k);
        if !locked.make_space(&hash_key) {
            return Ok(last.then(|| self.table_full(algorithm, cost, None)));
        }
        if locked.is_full() {
            if let Err(retry) = self.make_room(&mut locked, self.clock.now_nanos_precise()) {
                return Ok(Some(self.table_full(algorithm, cost, Some(retry))));
            }
        }
        // Taken only now that the key is sure to be inserted: a taken entry's unit is charged
        // here or nowhere.
        let admitted = self.door.as_ref().and_then(|door| door.take(hash, self.clock.now_nanos()));
        let new = NewKey { hash, key: key.clone(), quota: id, heap: heap_of(algorithm) };
        let pos = locked.insert(new, door::fresh_cell(algorithm, admitted));
        Ok(Some(algorithm.decide_cell(locked.cell(pos), &self.clock, cost)))
    }

    /// A peek of the key of `hash`, not held, under `algorithm`: fresh, less the unit the
    /// doorkeeper admitted, while that is not idle.
    pub(super) fn peek_new(&self, algorithm: &A, hash: u64) -> Decision {
        match self.door.as_ref().and_then(|door| door.seen(hash, self.clock.now_nanos())) {
            Some(at) => algorithm.decide_cell(&door::fresh_cell(algorithm, Some(at)), &self.clock, 0),
            None => self.fresh_decision(algorithm, 0, self.clock.now_nanos()),
        }
    }

    /// The decision a fresh key gets for `cost` at `now`. Decided on a fresh word when the algorithm
    /// decides words (no compare-exchange: a locked instruction on a cell no one else sees
    /// would still order the check's memory accesses), on a new cell when cells own no heap,
    /// and for the log built directly (reset: one period).
    pub(super) fn fresh_decision(&self, algorithm: &A, cost: u64, now: u64) -> Decision {
        let cell = algorithm.new_cell();
        if let Some(word) = algorithm.cell_word(&cell) {
            // Relaxed: the cell is this function's own.
            let fresh = word.load(Ordering::Relaxed);
            if let Some((decision, _)) = algorithm.decide_word(fresh, now, cost) {
                return decision;
            }
        }
        if heap_of(algorithm) == 0 {
            return algorithm.decide_cell(&cell, &At(now), cost);
        }
        let capacity = algorithm.capacity();
        let reset = if cost == 0 { 0 } else { algorithm.quota().period_nanos() };
        Decision::allowed(capacity, capacity - cost, reset)
    }
}
