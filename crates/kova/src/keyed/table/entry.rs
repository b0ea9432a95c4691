//! The one locked entry into a key's place, in the shape of std's and dashmap's `entry`:
//! taking it locks the key's shard and finds the key. A held entry hands out the key's
//! algorithm, quota, cell and clock, a striped key demoted before its cell is handed out (so
//! the lock holder reads and writes the key's real state, `table/hot.rs`); a vacant entry
//! answers for what the doorkeeper admitted of the key (`door.rs`) and owns its insert: room
//! made (idle keys reclaimed, a victim evicted, `table/evict.rs`), the door's unit taken and
//! charged, or the reason there is no room. Every operation under the lock is written on it,
//! so none can forget the door or a hot key.

use std::hash::Hash;

use super::super::door::{self, Admission};
use super::super::epoch::{self, Guard};
use super::super::line::{LineLocked, NewKey};
use super::super::quotas::{QuotaId, DEFAULT_ID};
use super::super::word::WordFreezer;
use super::{heap_of, Keyed};
use crate::algorithm::carry_over;
use crate::cell::CellStorage;
use crate::clock::At;
use crate::loom::atomic::Ordering;
use crate::{Algorithm, Clock, Decision};

/// How often a new key waits, unpinned, for a place to leave its grace period before the
/// table-full policy answers: `NO_SLOT_YIELDS` yields, then sleeps of `NO_SLOT_SLEEP` (about
/// 3 ms in all). Only when every place of a full shard is held or waiting, which takes a flood of
/// new keys while some thread is preempted in the middle of a check.
const NO_SLOT_RETRIES: usize = 20;
const NO_SLOT_YIELDS: usize = 8;
const NO_SLOT_SLEEP: std::time::Duration = std::time::Duration::from_micros(250);

/// A key's place, its shard locked.
pub(super) enum Entry<'a, K, A: Algorithm, C: Clock> {
    Held(HeldEntry<'a, K, A, C>),
    Vacant(VacantEntry<'a, K, A, C>),
}

/// A key the table holds, its shard locked.
pub(super) struct HeldEntry<'a, K, A: Algorithm, C: Clock> {
    table: &'a Keyed<K, A, C>,
    locked: LineLocked<'a, K, A>,
    hash: u64,
    /// The key's line; moves only with a quota change ([`move_to`](Self::move_to)).
    pos: usize,
}

/// A key the table does not hold, its shard locked.
pub(super) struct VacantEntry<'a, K, A: Algorithm, C: Clock> {
    table: &'a Keyed<K, A, C>,
    locked: LineLocked<'a, K, A>,
    hash: u64,
    key: &'a K,
}

/// Why a vacant entry inserted nothing.
pub(super) enum NoRoom {
    /// Every line of the shard is held or waiting for its grace period: try again unpinned.
    Waiting,
    /// The shard is full of keys that stay; the least time until a sampled key becomes idle,
    /// when the insert sampled any.
    Full(Option<u64>),
}

/// A new key the table had no room for: its quota's algorithm and what else the table-full
/// policy's answer needs ([`Keyed::table_full`]).
pub(super) struct TableFull<'a, K, A> {
    pub(super) algorithm: &'a A,
    pub(super) retry: NoRoomFor<'a, K>,
}

/// The key a full shard had no room for, and the retry hint of [`NoRoom::Full`]: what the
/// table-full policy answers on beside the key's algorithm (the sketch policy decides on the
/// key's hash, under its shard lock again; the others answer with the hint).
pub(super) struct NoRoomFor<'a, K> {
    pub(super) key: &'a K,
    pub(super) hash: u64,
    /// The least time until a sampled key becomes idle, when the insert sampled any.
    pub(super) soonest: Option<u64>,
}

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Takes the entry of `key` (hash `hash`) under its shard's lock.
    pub(super) fn entry<'a>(&'a self, hash: u64, key: &'a K, guard: &'a Guard) -> Entry<'a, K, A, C> {
        let locked = self.shard(hash).lock(guard);
        match locked.find(hash, key) {
            Some(pos) => Entry::Held(HeldEntry { table: self, locked, hash, pos }),
            None => Entry::Vacant(VacantEntry { table: self, locked, hash, key }),
        }
    }

    /// Runs `f` on the entry of `key`, the thread pinned for the call.
    pub(super) fn with_entry<R>(&self, key: &K, f: impl FnOnce(Entry<'_, K, A, C>) -> R) -> R {
        let hash = self.hash(key);
        let guard = epoch::pin();
        f(self.entry(hash, key, &guard))
    }

    /// Runs `held` on `key`'s (hash `hash`) held entry, inserting the key first when it is not held: under
    /// `quota`, or the quota function's when `None` (asked outside the lock, and only once the
    /// key is found absent). `new`, given the vacant entry and the new key's algorithm, may
    /// answer instead of the insert. An insert that finds no line free of its grace period is
    /// tried again, unpinned for a moment in between, and after a few tries, as a full table's,
    /// answers [`TableFull`].
    pub(super) fn held_or_new<'s, R>(
        &'s self,
        key: &'s K,
        hash: u64,
        mut guard: Guard,
        quota: Option<QuotaId>,
        mut held: impl FnMut(HeldEntry<'_, K, A, C>) -> R,
        mut new: impl FnMut(&mut VacantEntry<'_, K, A, C>, &A) -> Option<R>,
    ) -> Result<R, TableFull<'s, K, A>> {
        let id = match quota {
            Some(id) => id,
            None => {
                if let Entry::Held(entry) = self.entry(hash, key, &guard) {
                    return Ok(held(entry));
                }
                match self.quota_for_new(key, &mut guard) {
                    Some(id) => id,
                    None => return Err(self.refused(key, hash)),
                }
            }
        };
        let algorithm = self.quotas.get(id);
        let mut attempt = 0;
        loop {
            match self.entry(hash, key, &guard) {
                Entry::Held(entry) => return Ok(held(entry)),
                Entry::Vacant(mut entry) => {
                    if let Some(answer) = new(&mut entry, algorithm) {
                        return Ok(answer);
                    }
                    match entry.insert(id, attempt == NO_SLOT_RETRIES) {
                        Ok(entry) => return Ok(held(entry)),
                        Err(NoRoom::Full(soonest)) => {
                            return Err(TableFull { algorithm, retry: NoRoomFor { key, hash, soonest } })
                        }
                        Err(NoRoom::Waiting) => {}
                    }
                }
            }
            if attempt < NO_SLOT_YIELDS {
                guard.repin_after(std::thread::yield_now);
            } else {
                // A thread preempted while pinned holds every grace period back: give it time.
                guard.repin_after(|| std::thread::sleep(NO_SLOT_SLEEP));
            }
            attempt += 1;
        }
    }

    /// The quota a key not held yet gets: the quota function's, or the default; `None` when the
    /// function gave one the table cannot use (unrepresentable, or one distinct quota too many),
    /// and the key is then answered as one the table has no room for ([`Self::refused`]). The
    /// function is the user's code and may block (a lookup elsewhere): it runs with `guard`'s
    /// thread unpinned, since a pinned thread holds back every table's grace periods, and with
    /// them every insert that needs a removed line back. Whatever the caller read while pinned
    /// (a place, a line) means nothing after it.
    pub(super) fn quota_for_new(&self, key: &K, guard: &mut Guard) -> Option<QuotaId> {
        match &self.quota_fn {
            None => Some(DEFAULT_ID),
            Some(f) => guard.repin_after(|| self.quotas.intern_from_fn(f(key))),
        }
    }

    /// A key whose quota the table cannot use, answered by the table-full policy under the
    /// default quota, as a key the table has no room for (its decisions say so).
    pub(super) fn refused<'s>(&'s self, key: &'s K, hash: u64) -> TableFull<'s, K, A> {
        TableFull {
            algorithm: self.quotas.default_algorithm(),
            retry: NoRoomFor { key, hash, soonest: None },
        }
    }

    /// Whether the table has a quota function (so that [`quota_for_new`](Self::quota_for_new)
    /// unpins).
    pub(super) fn has_quota_fn(&self) -> bool {
        self.quota_fn.is_some()
    }

    /// The decision a fresh key gets for `cost` at `now`. Decided on a fresh word when the algorithm
    /// decides words (no compare-exchange: a locked instruction on a cell no one else sees
    /// would still order the check's memory accesses), on a new cell when cells own no heap,
    /// and for the log built directly (reset: one period).
    pub(super) fn fresh_decision(&self, algorithm: &A, cost: u64, now: u64) -> Decision {
        let cell = algorithm.new_cell();
        if let Some(word) = A::Storage::cell_word(algorithm, &cell) {
            // Relaxed: the cell is this function's own.
            let fresh = word.load(Ordering::Relaxed);
            if let Some((decision, _)) = A::Storage::decide_word(algorithm, fresh, now, cost) {
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

    /// A peek of a key not held under `algorithm`: fresh, less the unit the doorkeeper admitted
    /// at `admitted` ([`VacantEntry::admitted`]).
    pub(super) fn peek_new(&self, algorithm: &A, admitted: Option<u64>) -> Decision {
        match admitted {
            Some(at) => algorithm.decide_cell(&door::fresh_cell(algorithm, Some(at)), &self.clock, 0),
            None => self.fresh_decision(algorithm, 0, self.clock.now_nanos()),
        }
    }
}

impl<K, A: Algorithm, C: Clock> Entry<'_, K, A, C> {
    /// Forgets the doorkeeper's entry of the key (its reset or removal): its next check is a
    /// first one again.
    pub(super) fn forget_door(&self) {
        let (table, hash) = match self {
            Entry::Held(entry) => (entry.table, entry.hash),
            Entry::Vacant(entry) => (entry.table, entry.hash),
        };
        if let Some(door) = &table.door {
            door.forget(hash);
        }
    }
}

impl<'a, K: Hash + Eq + Clone, A: Algorithm, C: Clock> HeldEntry<'a, K, A, C> {
    /// The key's quota.
    pub(super) fn quota_id(&self) -> QuotaId {
        self.locked.quota(self.pos)
    }

    /// The key's quota's algorithm.
    pub(super) fn algorithm(&self) -> &'a A {
        self.table.quotas.get(self.quota_id())
    }

    /// The table's clock.
    pub(super) fn clock(&self) -> &'a C {
        &self.table.clock
    }

    /// The key's cell, its state back in its line if it was striped.
    pub(super) fn cell(&self) -> &A::Cell {
        self.cool();
        self.locked.cell(self.pos)
    }

    /// The hot slot the key is striped in, if any (its cell is then a marker).
    pub(super) fn slot(&self) -> Option<usize> {
        self.table.hot_slot(&self.locked, self.pos, self.hash)
    }

    /// Demotes the key if it is striped.
    pub(super) fn cool(&self) {
        self.table.cool(&self.locked, self.pos, self.hash);
    }

    /// What [`LineHit::place`](super::super::line::LineHit::place) says for this key.
    pub(super) fn place(&self) -> u64 {
        self.locked.place_of(self.pos)
    }

    /// Decides `cost` units (0: a peek): a striped key on its slot, as its checks without the
    /// lock are, any other on its cell.
    pub(super) fn decide(&self, cost: u64) -> Decision {
        if let (Some(slot), Some(hot)) = (self.slot(), &self.table.hot) {
            // No slot closes while we hold the lock: nothing is stranded, and `None` only for a
            // state that looks like a marker, decided on the line below.
            let leased = hot.decide(slot, self.algorithm(), &self.table.clock, cost);
            debug_assert_eq!(leased.stranded, 0);
            if let Some(decision) = leased.decision {
                return decision;
            }
        }
        self.algorithm().decide_cell(self.cell(), &self.table.clock, cost)
    }

    /// Stripes the key ([`Keyed::promote`]): whether it is striped now.
    pub(super) fn promote(&self) -> bool {
        let Some(hot) = &self.table.hot else { return false };
        if self.slot().is_some() {
            return true;
        }
        let Some(word) = A::Storage::inline_word(self.locked.cell(self.pos)) else { return false };
        hot.promote(word, self.hash, self.locked.guard()).is_some()
    }

    /// Puts the key back to full.
    pub(super) fn reset(self) {
        self.algorithm().reset_cell(self.cell());
        self.table.forgets.note();
    }

    /// Removes the key; its memory is reused once no check can still be reading it.
    pub(super) fn remove(mut self) {
        self.cool();
        self.locked.remove(self.pos, heap_of(self.algorithm()));
        self.table.forgets.note();
    }

    /// Moves the key to quota `id`, carrying over what it consumed (`algorithm/carry_over.rs`'s
    /// `carry_over`). `false` when no line is free of its grace period: the key keeps its quota
    /// for now.
    pub(super) fn move_to(&mut self, id: QuotaId) -> bool {
        let table = self.table;
        self.cool();
        let (old, new) = (self.algorithm(), table.quotas.get(id));
        let key = self.locked.key(self.pos).clone();
        let now = table.clock.now_nanos();
        let carry = |cell: &A::Cell| carry_over(old, new, cell, now);
        let moved = NewKey { hash: self.hash, key, quota: id, heap: heap_of(new) };
        if table.door.is_some() {
            // The key is absent between the burial of its line and its re-insert.
            self.locked.announce_insert();
        }
        let hash_key = |k: &K| table.hash(k);
        let moved =
            match self.locked.replace(self.pos, heap_of(old), moved, carry, &WordFreezer(old), &hash_key) {
                Ok(pos) => {
                    self.pos = pos;
                    true
                }
                Err(_) => false,
            };
        // Even when the key stays: it was cooled, and its slot closed.
        table.forgets.note();
        moved
    }
}

impl<'a, K: Hash + Eq + Clone, A: Algorithm, C: Clock> VacantEntry<'a, K, A, C> {
    /// When the doorkeeper admitted the key's first check (rounded up), if that unit is not
    /// idle now.
    pub(super) fn admitted(&self) -> Option<u64> {
        self.table.door.as_ref().and_then(|door| door.seen(self.hash, self.table.clock.now_nanos()))
    }

    /// The state an insert would give the key now under `algorithm`: fresh, charged what the
    /// doorkeeper admitted of it. Nothing keeps it.
    pub(super) fn fresh_cell(&self, algorithm: &A) -> A::Cell {
        self.new_cell(algorithm, self.admitted())
    }

    /// A new cell of the key under `algorithm`: fresh, charged what the door `admitted` of it
    /// and, under the sketch policy, what the sketch holds for it (its checks there are decided
    /// under this lock, so none is missed).
    fn new_cell(&self, algorithm: &A, admitted: Option<u64>) -> A::Cell {
        let cell = door::fresh_cell(algorithm, admitted);
        if let Some(sketch) = &self.table.full_sketch {
            sketch.seed(algorithm, &cell, self.hash);
        }
        cell
    }

    /// A check of one unit under the default quota admitted at the door under the lock, without
    /// inserting the key: decided at the entry's time, which the key's insert charges. `None`
    /// when the table has no door or the door has seen the key (or its word is another key's).
    pub(super) fn admit(&mut self) -> Option<Decision> {
        let door = self.table.door.as_ref()?;
        // Announced first, so that an admission without the lock is seen or undone.
        self.locked.announce_insert();
        match door.admit(self.hash, self.table.clock.now_nanos()) {
            // Decided at the entry's time: a fresh state's decision depends on it (a window's
            // end, a bucket's time quantum), and the insert charges it then.
            Admission::Admitted(now) => Some(self.table.fresh_decision(self.table.algorithm(), 1, now)),
            Admission::Seen(_) | Admission::Busy => None,
        }
    }

    /// Gives back `cost` units of the key: the unit the door admitted, if its entry is young and
    /// the algorithm can refund it (decided on the state the key would have had, had that check
    /// inserted it). Whether anything was given back.
    pub(super) fn refund(&self, cost: u64) -> bool {
        let Some(door) = &self.table.door else { return false };
        if cost == 0 {
            // Nothing to give back: the entry stays.
            return false;
        }
        let Some(at) = self.admitted() else { return false };
        let algorithm = self.table.algorithm();
        let refunded = algorithm.refund_cell(&door::fresh_cell(algorithm, Some(at)), &self.table.clock, cost);
        if refunded {
            door.forget(self.hash);
        }
        refunded
    }

    /// Inserts the key under quota `id`, its state fresh and charged the unit the door admitted
    /// of it (taken from the door only now that the insert is sure), making room first. When
    /// every line is held or waiting for its grace period, the `last` try gives up (the table is
    /// full) and any other waits.
    pub(super) fn insert(mut self, id: QuotaId, last: bool) -> Result<HeldEntry<'a, K, A, C>, NoRoom> {
        let table = self.table;
        if table.door.is_some() {
            // Before the door is read, so that an admission without the lock is seen or undone.
            self.locked.announce_insert();
        }
        let hash_key = |k: &K| table.hash(k);
        if !self.locked.make_space(&hash_key) {
            return Err(if last { NoRoom::Full(None) } else { NoRoom::Waiting });
        }
        if self.locked.is_full() {
            table
                .make_room(&mut self.locked, table.clock.now_nanos_precise())
                .map_err(|r| NoRoom::Full(Some(r)))?;
        }
        let algorithm = table.quotas.get(id);
        // The user's `Clone` before the door's unit is taken: if it panics, the door still
        // counts what it admitted of the key.
        let key = self.key.clone();
        let admitted = table.door.as_ref().and_then(|door| door.take(self.hash, table.clock.now_nanos()));
        let new = NewKey { hash: self.hash, key, quota: id, heap: heap_of(algorithm) };
        let cell = self.new_cell(algorithm, admitted);
        let pos = self.locked.insert(new, cell);
        Ok(HeldEntry { table, locked: self.locked, hash: self.hash, pos })
    }
}
