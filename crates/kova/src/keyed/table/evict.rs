//! Room for new keys: reclaiming idle keys (on inserts into a full shard, and on demand with
//! [`Keyed::sweep_idle`]), evicting under [`TableFullPolicy::EvictClosestToIdle`], and the
//! policy's answer when neither frees room.

use std::hash::Hash;

use super::super::epoch;
use super::super::line::LineLocked;
use super::super::policy::TableFullPolicy;
use super::super::word::WordFreezer;
use super::entry::{Entry, HeldEntry, NoRoomFor};
use super::{heap_of, Keyed};
use crate::clock::At;
use crate::{Algorithm, Clock, Decision, Fallback};

/// The most idle keys one insert into a full shard reclaims: with the default
/// [`reclaim_scan`](crate::keyed::KeyedBuilder::reclaim_scan) of 16, every idle key it examines. A
/// locked section that unlinks anything pays for its grace period (an epoch stamp, and the
/// advances that end it), and the next inserts use the places this one freed. Reclaiming an
/// idle key early changes nothing a check can see, but each parks a place in its grace period,
/// and the inserting check waits for the whole batch.
pub(super) const RECLAIM_BATCH: usize = 16;
/// Entries a sweep examines per lock hold.
const SWEEP_STEP: usize = 256;
/// The most keys one scan of a full shard evicts under
/// [`TableFullPolicy::EvictClosestToIdle`]: the sampled keys closest to idle, so that the
/// inserts after this one find room without a scan of their own. A scan's entries are cache
/// misses in a large table, and a flood of new keys at a quota whose keys stay live evicts on
/// every insert; the keys evicted early are the ones the next inserts would have evicted. A
/// shard evicts at most one key per [`KEYS_PER_EVICTION`] it holds, so a small table evicts one
/// at a time.
const EVICT_BATCH: usize = 4;
/// See [`EVICT_BATCH`].
const KEYS_PER_EVICTION: usize = 64;

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Reclaims every idle key (state indistinguishable from fresh), one shard at a time and a
    /// few hundred entries per lock hold, so checks of held keys never wait and inserts wait
    /// little. Returns how many keys it reclaimed. Inserts into full shards reclaim on their own;
    /// call this to return memory to the free lists sooner, e.g. from a periodic task.
    pub fn sweep_idle(&self) -> usize {
        let mut reclaimed = 0;
        for shard in self.shards.iter() {
            let mut pos = 0;
            loop {
                let guard = epoch::pin();
                let mut locked = shard.lock(&guard);
                let positions = locked.positions();
                if pos >= positions {
                    break;
                }
                let end = (pos + SWEEP_STEP).min(positions);
                let now = self.clock.now_nanos_precise();
                while pos < end {
                    // A striped key is in use: not idle; once cooled it is demoted, and then
                    // looked at as any other (`table/hot.rs`).
                    let striped =
                        locked.is_held(pos) && self.maybe_hot(&locked, pos) && self.sweep_hot(&locked, pos);
                    if locked.is_held(pos) && !striped && self.reclaim_if_idle(&mut locked, pos, now) {
                        reclaimed += 1;
                        continue;
                    }
                    pos += 1;
                }
            }
        }
        reclaimed
    }

    /// Reclaims the held line `pos` if its key is idle at `now`, unless a racing check uses it
    /// while the lock holder looks. Whether it was reclaimed.
    fn reclaim_if_idle(&self, locked: &mut LineLocked<'_, K, A>, pos: usize, now: u64) -> bool {
        let algorithm = self.quotas.get(locked.quota(pos));
        let keep = |cell: &A::Cell| !algorithm.is_idle(cell, now);
        let reclaimed = algorithm.is_idle(locked.cell(pos), now)
            && locked.unlink_if(pos, heap_of(algorithm), keep, &WordFreezer(algorithm));
        if reclaimed {
            self.forgets.note();
        }
        reclaimed
    }

    /// The policy's decision for `cost` units (within the capacity) of a new key that found no
    /// room (`retry`: the key, and the least time until a sampled key becomes idle).
    pub(super) fn table_full(&self, algorithm: &A, cost: u64, retry: NoRoomFor<'_, K>) -> Decision {
        self.table_full_or_held(algorithm, cost, retry, |held| held.decide(cost), |decision| decision)
    }

    /// [`table_full`](Self::table_full)'s decision given to `decided`, or `held` run on the
    /// key's entry instead when the sketch policy, taking the key's lock again to decide, finds
    /// the key inserted meanwhile.
    pub(super) fn table_full_or_held<R>(
        &self,
        algorithm: &A,
        cost: u64,
        retry: NoRoomFor<'_, K>,
        held: impl FnOnce(HeldEntry<'_, K, A, C>) -> R,
        decided: impl FnOnce(Decision) -> R,
    ) -> R {
        let NoRoomFor { key, hash, soonest } = retry;
        if let (TableFullPolicy::Sketch, Some(sketch)) = (self.policy, &self.full_sketch) {
            let guard = epoch::pin();
            // Under the key's lock, so that no insert of the key misses this check: an insert
            // seeds the key from the sketch (`entry.rs`).
            return match self.entry(hash, key, &guard) {
                Entry::Held(entry) => held(entry),
                Entry::Vacant(_locked) => decided(sketch.decide(algorithm, &self.clock, hash, cost)),
            };
        }
        decided(match self.policy {
            TableFullPolicy::AllowUntracked => self
                .fresh_decision(algorithm, cost, self.clock.now_nanos())
                .with_fallback(Fallback::TableFullUntracked),
            // The sketch policy has its sketch (`KeyedBuilder` builds it): not reached for it.
            TableFullPolicy::DenyNew | TableFullPolicy::EvictClosestToIdle | TableFullPolicy::Sketch => {
                let retry = match soonest {
                    Some(nanos) if nanos > 0 && nanos < u64::MAX => nanos,
                    _ => algorithm.quota().emission_interval_nanos(),
                };
                Decision::denied(algorithm.capacity(), 0, retry, 0).with_fallback(Fallback::TableFullDenied)
            }
        })
    }

    /// Frees room in a full shard: reclaims the idle keys (up to [`RECLAIM_BATCH`]) among the
    /// next `scan` entries from the sweep cursor, or, under
    /// [`TableFullPolicy::EvictClosestToIdle`], evicts the sampled keys closest to idle that are
    /// not actively limited (up to [`EVICT_BATCH`]). On failure, returns the least
    /// time until a sampled key becomes idle (`u64::MAX` when none was sampled).
    ///
    /// `now` is the clock's precise reading: with the coarse clock running late on a busy
    /// machine, a flood at the bound found every sampled key not yet idle, and denied new keys
    /// whose room was in fact free (tens to hundreds per two seconds of a two-thread flood).
    #[expect(
        clippy::indexing_slicing,
        reason = "`kept <= EVICT_BATCH`, the array's length, and `place < EVICT_BATCH` is checked before use"
    )]
    pub(super) fn make_room(&self, locked: &mut LineLocked<'_, K, A>, now: u64) -> Result<(), u64> {
        let at = At(now);
        let positions = locked.positions();
        let order = locked.scan_order();
        let mut pos = locked.cursor();
        let (mut examined, mut steps) = (0, 0);
        let (mut soonest, mut reclaimed) = (u64::MAX, 0);
        // The closest to idle that are not actively limited: (reset, position), closest first;
        // the first `kept` places are filled. On the stack: no allocation per scan.
        let mut closest = [(u64::MAX, 0usize); EVICT_BATCH];
        let mut kept = 0;
        while examined < self.scan && steps < positions && reclaimed < RECLAIM_BATCH {
            // A striped key is in use: neither idle nor a victim (`table/hot.rs`).
            if !locked.is_held(pos) || self.maybe_hot(locked, pos) {
                pos = order.next(pos);
                steps += 1;
                continue;
            }
            examined += 1;
            if self.reclaim_if_idle(locked, pos, now) {
                reclaimed += 1;
                pos = order.next(pos);
                steps += 1;
                continue;
            }
            // Not idle, or kept: a racing check used it after it looked idle. An active key, a
            // candidate for eviction.
            {
                let algorithm = self.quotas.get(locked.quota(pos));
                let peek = algorithm.decide_cell(locked.cell(pos), &at, 0);
                let reset = peek.reset_after_nanos();
                soonest = soonest.min(reset);
                if peek.remaining() > 0 {
                    let place = closest[..kept].partition_point(|&(best, _)| best <= reset);
                    if place < EVICT_BATCH {
                        // Shift the farther ones down one place (the last falls off when full).
                        kept = (kept + 1).min(EVICT_BATCH);
                        closest[place..kept].rotate_right(1);
                        closest[place] = (reset, pos);
                    }
                }
            }
            pos = order.next(pos);
            steps += 1;
        }
        locked.set_cursor(pos);
        // The next scan, a few inserts away when this one evicts a batch: its lines in cache by
        // then rather than missed under the lock.
        locked.prefetch_scan(pos, 2 * self.scan);
        if !locked.is_full() {
            return Ok(());
        }
        if self.policy != TableFullPolicy::EvictClosestToIdle {
            return Err(soonest);
        }
        // Lines do not move while the lock is held and nothing rehashes: the victims are still
        // at their positions.
        let mut evicted = 0;
        let batch = (locked.max_keys() / KEYS_PER_EVICTION).clamp(1, EVICT_BATCH);
        for &(_, pos) in closest[..kept].iter().take(batch) {
            let algorithm = self.quotas.get(locked.quota(pos));
            // Keep it after all if a racing check just limited it.
            let keep = |cell: &A::Cell| algorithm.decide_cell(cell, &at, 0).remaining() == 0;
            if locked.unlink_if(pos, heap_of(algorithm), keep, &WordFreezer(algorithm)) {
                self.forgets.note();
                evicted += 1;
            }
        }
        if evicted > 0 {
            Ok(())
        } else {
            Err(soonest)
        }
    }
}
