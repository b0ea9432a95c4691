//! The lock-free operations: the one hit path every operation that can answer without the lock
//! shares ([`Keyed::lookup`]), the checks, peeks and quota reads on it, the doorkeeper's
//! admission of a new key's first check without the lock, and the checks' slow path, which
//! takes the key's entry (`table/entry.rs`).

use std::cell::Cell;
use std::hash::Hash;

use super::super::door;
use super::super::epoch::{self, Guard};
use super::super::line::{self, LineHit, LineShard};
use super::super::quotas::{QuotaId, DEFAULT_ID};
use super::super::word;
use super::super::KeyedError;
use super::entry::Entry;
use super::Keyed;
use crate::loom::atomic::{fence, Ordering};
use crate::loom::faults;
use crate::{Algorithm, CheckError, Clock, Decision, Fallback, Quota};

/// What a check already did on a key's place before finding it unlinked.
pub(super) type Prior = Option<(u64, Decision)>;

/// Whether `cost` fits the algorithm's capacity, or the error.
pub(super) fn check_cost<A: Algorithm>(algorithm: &A, cost: u64) -> Result<(), CheckError> {
    let capacity = algorithm.capacity();
    if cost > capacity {
        return Err(CheckError::CostExceedsCapacity { cost, capacity });
    }
    Ok(())
}

/// Whether a lock-free `decision` of `cost` units on `hit`'s cell stands. One that wrote nothing
/// (a peek, a denial) cannot be lost; one that wrote stands if the cell is frozen before any
/// unlink looks at it (a word: nothing to check after the CAS), or if its line was still linked
/// after the write. Otherwise the check is redone under the lock.
#[inline(always)]
fn stands<K, A: Algorithm>(
    shard: &LineShard<K, A>,
    hit: &LineHit<'_, A>,
    algorithm: &A,
    decision: &Decision,
    cost: u64,
) -> bool {
    cost == 0 || !decision.is_allowed() || word::freezes(algorithm, hit.cell()) || shard.still_linked(hit)
}

/// What an operation's hit path does with a key found without the lock ([`Keyed::lookup`]).
enum OnHit<R> {
    /// Answers at once, reading no state.
    Answer(R),
    /// Decides this many units on the key's cell.
    Decide(u64),
    /// Leaves it to the slow path.
    Slow,
}

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// The hit path, written once for every operation that can answer without the lock: hashes
    /// `key`, picks its shard, pins the thread and looks the key up. For a key found, `on_hit`
    /// (given its quota's algorithm) answers at once, or asks for `cost` units to be decided on
    /// its cell, a decision `decided` turns into the answer when it stands. Anything else (a key
    /// not found, a frozen cell, a write that may be lost) goes to `slow`, with what the hit
    /// path already did on the key's place.
    #[inline(always)]
    fn lookup<R>(
        &self,
        key: &K,
        on_hit: impl FnOnce(&A) -> OnHit<R>,
        decided: impl FnOnce(Decision) -> R,
        slow: impl FnOnce(u64, Prior, Guard) -> R,
    ) -> R {
        let hash = self.hash(key);
        let shard = self.shard(hash);
        shard.prefetch(hash);
        if let Some(door) = &self.door {
            // A flood of new keys reads the door after the probe misses: both misses overlap.
            door.prefetch_after_misses(hash);
        }
        let guard = epoch::pin();
        let mut prior = None;
        if let Some(hit) = shard.find(hash, key, &guard) {
            let algorithm = self.quotas.get(hit.quota());
            match on_hit(algorithm) {
                OnHit::Answer(answer) => return answer,
                OnHit::Slow => {}
                OnHit::Decide(cost) => {
                    match word::decide_noting(algorithm, hit.cell(), &self.clock, cost, |now| {
                        // Only after a failed compare-exchange: an uncontended check never gets here.
                        line::note_contention();
                        if let Some(hot) = &self.hot {
                            self.contended(hot, hash, key, now, &guard);
                        }
                    }) {
                        Some(decision) => {
                            if stands(shard, &hit, algorithm, &decision, cost) {
                                return decided(decision);
                            }
                            prior = Some((hit.place(), decision));
                        }
                        // A marker: a hot key's goes to its slot (`table/hot.rs`); any other
                        // (frozen by the lock holder) is decided under the lock.
                        None => {
                            if let Some(hot) = &self.hot {
                                if let Some(decision) =
                                    self.hot_hit(hot, hash, key, &hit, algorithm, cost, &guard)
                                {
                                    return decided(decision);
                                }
                            }
                        }
                    }
                }
            }
        }
        slow(hash, prior, guard)
    }

    /// Checks one unit for `key`.
    #[inline]
    pub fn check(&self, key: &K) -> Decision {
        // `check_n`'s path without its `Result`: merging that with the slow path's result sent
        // every decision through the stack.
        self.lookup(
            key,
            |algorithm| if algorithm.capacity() >= 1 { OnHit::Decide(1) } else { OnHit::Slow },
            |decision| decision,
            // Copied, so that the slow path's decision is not written straight into the place
            // this function returns it in: that place would then be memory the call writes, and
            // the hit path would store its whole decision there too, even when the caller reads
            // one field.
            |hash, prior, guard| self.check_one_slow(hash, key, prior, guard).copied(),
        )
    }

    /// Checks `cost` units for `key`; an error (not a denial) when `cost` exceeds the capacity
    /// of the key's quota. Cost 0 is a peek.
    ///
    /// ```
    /// use kova::{CheckError, Gcra, Keyed, Quota};
    /// let limiter = Keyed::<&str, Gcra>::new(Quota::per_minute(60)?)?;
    /// assert_eq!(limiter.check_n(&"upload", 5)?.remaining(), 55);
    /// assert_eq!(
    ///     limiter.check_n(&"upload", 61),
    ///     Err(CheckError::CostExceedsCapacity { cost: 61, capacity: 60 })
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn check_n(&self, key: &K, cost: u64) -> Result<Decision, CheckError> {
        self.lookup(
            key,
            |algorithm| match check_cost(algorithm, cost) {
                Ok(()) => OnHit::Decide(cost),
                Err(error) => OnHit::Answer(Err(error)),
            },
            Ok,
            |hash, prior, guard| self.check_slow(hash, key, cost, None, prior, guard),
        )
    }

    /// Checks `cost` units for `key` under `quota`, the key's own quota (a plan, a tier, a
    /// per-customer limit). A key first seen gets it; a key held under another quota moves to it,
    /// keeping what it consumed (see [`set_quota`](Self::set_quota)).
    ///
    /// The common case costs one comparison of the key's quota with `quota` more than
    /// [`check_n`](Self::check_n). Errors: `quota` unusable for the algorithm (or one distinct
    /// quota too many: a table holds [`KeyedBuilder::max_quotas`](crate::keyed::KeyedBuilder::max_quotas)
    /// counting its default, 4,096 unless set), or `cost` above its capacity.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let limiter = Keyed::<&str, Gcra, _>::with_clock(Quota::per_minute(10)?, ManualClock::new())?;
    /// let pro = Quota::per_minute(100)?;
    /// assert_eq!(limiter.check_n_with_quota(&"pro-user", pro, 1)?.remaining(), 99);
    /// assert_eq!(limiter.check(&"free-user").remaining(), 9);
    /// // An upgrade keeps what was consumed: 10 used of the new 1000.
    /// limiter.check_n_with_quota(&"free-user", Quota::per_minute(10)?, 9)?;
    /// let upgraded = limiter.check_n_with_quota(&"free-user", Quota::per_minute(1000)?, 1)?;
    /// assert_eq!(upgraded.remaining(), 989);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_n_with_quota(&self, key: &K, quota: Quota, cost: u64) -> Result<Decision, KeyedError> {
        self.lookup(
            key,
            |algorithm| match check_cost(algorithm, cost) {
                _ if algorithm.quota() != quota => OnHit::Slow,
                Ok(()) => OnHit::Decide(cost),
                Err(error) => OnHit::Answer(Err(error.into())),
            },
            Ok,
            |hash, prior, guard| {
                let id = self.quotas.intern(quota)?;
                // Before any move: a cost the asked quota cannot take moves nothing.
                check_cost(self.quotas.get(id), cost)?;
                Ok(self.check_slow(hash, key, cost, Some(id), prior, guard)?)
            },
        )
    }

    /// Reports `key`'s state without changing it (and without inserting it): for a key not held,
    /// what a fresh key would get.
    pub fn peek(&self, key: &K) -> Decision {
        self.lookup(
            key,
            |_| OnHit::Decide(0),
            |decision| decision,
            // Frozen: the lock holder is done with it once we hold the lock.
            |hash, _, mut guard| {
                let admitted = match self.entry(hash, key, &guard) {
                    Entry::Held(entry) => return entry.decide(0),
                    Entry::Vacant(entry) => entry.admitted(),
                };
                // Outside the lock and unpinned: the quota function is the user's code.
                match self.quota_for_new(key, &mut guard) {
                    Some(quota) => self.peek_new(self.quotas.get(quota), admitted),
                    None => {
                        let refused = self.refused(key, hash);
                        self.table_full(refused.algorithm, 0, refused.retry)
                    }
                }
            },
        )
    }

    /// The quota `key` is held under (`None` when not held).
    pub fn quota_of(&self, key: &K) -> Option<Quota> {
        self.lookup(
            key,
            |algorithm| OnHit::Answer(Some(algorithm.quota())),
            // Not asked for: `on_hit` never decides.
            |_| None,
            |hash, _, guard| match self.entry(hash, key, &guard) {
                Entry::Held(entry) => Some(entry.algorithm().quota()),
                Entry::Vacant(_) => None,
            },
        )
    }

    /// Of `taken` units a check of `key` took `elapsed_nanos` ago, whose decision said
    /// `reset_after_nanos`, how many a give-back made now returns under the key's quota
    /// ([`Algorithm::still_counted`]). 0 for a key not held (its state is fresh: nothing of it
    /// still counts), unless the doorkeeper admitted the key's first check without holding it:
    /// that check's units are counted under the default quota, as [`refund`](Self::refund)
    /// gives them back. For a caller that keeps its own record of a check (a middleware);
    /// [`settle_estimate`](Self::settle_estimate) applies it itself.
    pub fn still_counted(
        &self,
        key: &K,
        taken: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: crate::GiveBack,
    ) -> u64 {
        let counted =
            |algorithm: &A| algorithm.still_counted(taken, elapsed_nanos, reset_after_nanos, give_back);
        self.lookup(
            key,
            |algorithm| OnHit::Answer(counted(algorithm)),
            // Not asked for: `on_hit` never decides.
            |_| 0,
            |hash, _, guard| match self.entry(hash, key, &guard) {
                Entry::Held(entry) => counted(entry.algorithm()),
                // The door admits under the default quota only.
                Entry::Vacant(entry) if entry.admitted().is_some() => counted(self.algorithm()),
                Entry::Vacant(_) => 0,
            },
        )
    }

    /// `check`'s slow path (see `check_slow`).
    #[cold]
    #[inline(never)]
    fn check_one_slow(&self, hash: u64, key: &K, prior: Prior, guard: Guard) -> Decision {
        match self.check_slow(hash, key, 1, None, prior, guard) {
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

    /// The slow path of a check of `cost` units of `key`, for a key not found without the lock,
    /// or found unlinked after the write (kept out of line so that the hit path stays small): a
    /// new key's first check admitted at the door without the lock, or else the check under the
    /// lock, on the key's entry. If `prior` says the check already updated the place the key
    /// still has, that decision stands; otherwise the check is decided there, after moving the
    /// key to `moved_to` (a quota passed with the check) or inserting it under that quota (else
    /// the quota function's).
    #[cold]
    #[inline(never)]
    pub(super) fn check_slow(
        &self,
        hash: u64,
        key: &K,
        cost: u64,
        moved_to: Option<QuotaId>,
        prior: Prior,
        mut guard: Guard,
    ) -> Result<Decision, CheckError> {
        // Once unpinned (the quota function, a retried insert), the place `prior` names may be
        // reused: it no longer identifies anything.
        let prior = Cell::new(prior);
        let on_held = |mut entry: super::entry::HeldEntry<'_, K, A, C>| {
            if let Some((place, decision)) = prior.take() {
                if entry.place() == place {
                    return Ok(decision);
                }
            }
            let moved = moved_to.filter(|&quota| entry.quota_id() != quota).map(|quota| entry.move_to(quota));
            if moved == Some(false) {
                // No line free of its grace period: decided under the quota the key still has,
                // which may not take a cost the asked quota takes (checked before the move):
                // denied then, until a later check moves the key.
                let algorithm = entry.algorithm();
                let decision = if check_cost(algorithm, cost).is_ok() {
                    entry.decide(cost)
                } else {
                    let now = entry.decide(0);
                    let retry = algorithm.quota().emission_interval_nanos();
                    Decision::denied(now.limit(), now.remaining(), retry, now.reset_after_nanos())
                };
                return Ok(decision.with_fallback(Fallback::QuotaNotMoved));
            }
            check_cost(entry.algorithm(), cost)?;
            Ok(entry.decide(cost))
        };
        let quota = match moved_to {
            Some(quota) => quota,
            None => {
                if prior.get().is_some() && self.has_quota_fn() {
                    // `prior` names a place only while the thread stays pinned, and the quota
                    // function runs unpinned: the key is looked for first (the function is
                    // asked only for a key found absent, whose place, if any, is gone).
                    if let Entry::Held(entry) = self.entry(hash, key, &guard) {
                        return on_held(entry);
                    }
                    prior.set(None);
                }
                match self.quota_for_new(key, &mut guard) {
                    Some(quota) => quota,
                    None => {
                        let refused = self.refused(key, hash);
                        check_cost(refused.algorithm, cost)?;
                        return Ok(self.table_full(refused.algorithm, cost, refused.retry));
                    }
                }
            }
        };
        let door_may_admit = cost == 1 && quota == DEFAULT_ID;
        if door_may_admit && prior.get().is_none() {
            if let Some(decision) = self.admit_at_door(hash, key, &guard) {
                return Ok(decision);
            }
        }
        let on_new = |entry: &mut super::entry::VacantEntry<'_, K, A, C>, algorithm: &A| {
            prior.set(None);
            if let Err(error) = check_cost(algorithm, cost) {
                return Some(Err(error));
            }
            if cost == 0 {
                // A peek inserts nothing.
                return Some(Ok(self.peek_new(algorithm, entry.admitted())));
            }
            door_may_admit.then(|| entry.admit()).flatten().map(Ok)
        };
        self.held_or_new(key, hash, guard, Some(quota), on_held, on_new)
            .unwrap_or_else(|full| Ok(self.table_full(full.algorithm, cost, full.retry)))
    }

    /// Admits one unit of `key` (hash `hash`), under the default quota, at the door without
    /// the lock: `None`, having changed nothing, when the table has no door, the key is held,
    /// its word is taken, or an insert into the shard is or was under way meanwhile (the check
    /// then goes to the lock). Why no key gets more than its quota: `door.rs`'s module docs.
    fn admit_at_door(&self, hash: u64, key: &K, guard: &Guard) -> Option<Decision> {
        let door = self.door.as_ref()?;
        door::note_missing_key();
        let shard = self.shard(hash);
        // Acquire: pairs with the Release that ends an insert, so that the probe below sees the
        // key of any insert this count includes.
        let before = shard.inserts(Ordering::Acquire);
        // `holds`, not `find`: a key whose boxed line a sweep has hidden is held, and a unit
        // admitted here would never be charged to it if the sweep keeps it.
        if before % 2 == 1 || shard.holds(hash, key, guard) {
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
        // Decided at the entry's time, which an insert charges (see `entry.rs`).
        Some(self.fresh_decision(self.quotas.default_algorithm(), 1, now))
    }
}
