//! A key's cell visited by a composite whose answer says more than one decision
//! ([`KeyedLimits`](crate::limits::KeyedLimits), whose cell holds every limit of its key): the
//! lock-free hit path of a boxed cell, and the held-or-new step under the lock, as a check's.

use std::cell::Cell;
use std::hash::Hash;

use super::super::epoch::{self, Guard};
use super::entry::{Entry, HeldEntry, VacantEntry};
use super::Keyed;
use crate::loom::faults;
use crate::{Algorithm, Clock, Decision};

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Runs `visit`, which decides `cost` units (0: a peek, which writes nothing) on a cell and
    /// answers (`admitted` says whether an answer admitted, and so wrote), on `key`'s cell.
    ///
    /// A key held is visited without the lock; a write stands if the key's line was still
    /// linked after it, as a check's on a boxed cell does, and is otherwise visited again under
    /// the lock, on the key's place (unless the key is still where the write went). A key not
    /// held is inserted for it under its shard's lock; a peek inserts nothing and visits a fresh
    /// cell. `full` answers, from the table-full policy's decision, for a new key the table has
    /// no room for.
    ///
    /// `visit`'s writes must end in a locked read-modify-write of the cell (a compare-and-swap
    /// loop's), which stands for the fence a check's write needs before it looks at its line
    /// again ([`still_linked_after_rmw`](super::super::line::LineShard::still_linked_after_rmw)).
    ///
    /// For tables of cells that are not one word, with no doorkeeper (a first check is
    /// admitted at the door only as a plain decision) and so no hot keys: `KeyedLimits` builds
    /// its table so.
    ///
    /// The answer is returned by value, each path building its own: the hit path's never has
    /// its address handed to a call the compiler cannot see into (the slow path gets a copy,
    /// and hands its own answer back in a box), so that, inlined, a part of it the caller never
    /// reads is never built.
    #[inline(always)]
    pub(crate) fn visit<R: Copy>(
        &self,
        key: &K,
        cost: u64,
        visit: impl Fn(&A, &A::Cell, &C) -> R,
        admitted: impl Fn(&R) -> bool,
        full: impl FnOnce(Decision) -> R,
    ) -> R {
        debug_assert!(self.door.is_none() && self.hot.is_none(), "a visited table has no door");
        let hash = self.hash(key);
        let shard = self.shard(hash);
        shard.prefetch(hash);
        let guard = epoch::pin();
        let mut prior = None;
        if let Some(hit) = shard.find(hash, key, &guard) {
            let answer = visit(self.quotas.get(hit.quota()), hit.cell(), &self.clock);
            if cost == 0
                || !admitted(&answer)
                || faults::visit_relook_skipped()
                || shard.still_linked_after_rmw(&hit)
            {
                return answer;
            }
            prior = Some((hit.place(), answer));
        }
        // Boxed: returned in place, the slow path's answer would be written through a pointer
        // to the caller's own answer, which would then live in memory on the hit path too, every
        // part of it stored there before the next pin's locked exchange. The slow path takes the
        // shard's lock; the allocation is small beside it.
        *self.visit_slow(hash, key, cost, prior, guard, &visit, full)
    }

    /// `visit`'s path under the lock (kept out of line: the hit path stays small).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn visit_slow<R: Copy>(
        &self,
        hash: u64,
        key: &K,
        cost: u64,
        prior: Option<(u64, R)>,
        guard: Guard,
        visit: &impl Fn(&A, &A::Cell, &C) -> R,
        full: impl FnOnce(Decision) -> R,
    ) -> Box<R> {
        // Once unpinned (a retried insert), the place `prior` names may be reused: it no longer
        // identifies anything.
        let prior = Cell::new(prior);
        let on_held = |entry: HeldEntry<'_, K, A, C>| {
            if let Some((place, answer)) = prior.take() {
                if entry.place() == place {
                    return answer;
                }
            }
            visit(entry.algorithm(), entry.cell(), entry.clock())
        };
        let on_new = |entry: &mut VacantEntry<'_, K, A, C>, algorithm: &A| {
            prior.set(None);
            (cost == 0).then(|| visit(algorithm, &entry.fresh_cell(algorithm), &self.clock))
        };
        if self.has_quota_fn() {
            // The quota function runs unpinned, after which `prior` names nothing: the held key
            // is looked for first, while pinned (as `check_slow` does).
            if let Entry::Held(entry) = self.entry(hash, key, &guard) {
                return Box::new(on_held(entry));
            }
            prior.set(None);
        }
        Box::new(match self.held_or_new(key, hash, guard, None, on_held, on_new) {
            Ok(answer) => answer,
            Err(no_room) => full(self.table_full(no_room.algorithm, cost, no_room.retry)),
        })
    }
}
