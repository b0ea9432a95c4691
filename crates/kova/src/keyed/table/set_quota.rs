//! Moving a held key to another quota, carrying over what it consumed (the carry-over itself
//! is `quotas.rs`'s `carry_over`).

use std::hash::Hash;

use super::super::epoch;
use super::super::line_locked::{LineLocked, NewKey};
use super::super::quotas::{carry_over, QuotaId};
use super::super::word::WordFreezer;
use super::{heap_of, Keyed};
use crate::{Algorithm, Clock, Quota, QuotaError};

/// How many times `set_quota` waits for a line to leave its grace period.
const SET_QUOTA_TRIES: usize = 64;

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Gives a held key its own quota, keeping what it has consumed; returns whether the key is
    /// held (a key not held gets its quota when it is next checked: from the quota function,
    /// or [`check_n_with_quota`](Self::check_n_with_quota)).
    ///
    /// "Keeping what it consumed" means: the units the old quota counts as used at this instant
    /// (`capacity - remaining`, so a partly refilled unit counts as used) are taken from a fresh
    /// state of the new quota, at this instant, capped at the new capacity. So:
    /// - [`Gcra`](crate::Gcra) / [`TokenBucket`](crate::TokenBucket): the bucket holds as many tokens fewer
    ///   than full as before, and refills at the new rate from now;
    /// - [`FixedWindow`](crate::FixedWindow): the current window's count is kept (windows are
    ///   re-aligned to the new period);
    /// - [`SlidingWindowCounter`](crate::SlidingWindowCounter): the weighted estimate becomes the
    ///   current window's count (stricter: it now ages out with the current window);
    /// - [`SlidingWindowLog`](crate::SlidingWindowLog): the units in the window are re-dated to
    ///   now (stricter: they leave the window up to one period later).
    ///
    /// Units used beyond the new capacity are dropped: a key moved to a smaller quota and back
    /// comes back with at most the smaller capacity used. A check racing with the change on the
    /// same key counts once for the four single-word algorithms; for the sliding log it may count
    /// twice (never zero times: no update is lost).
    ///
    /// ```
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let limiter = Keyed::<u64, Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// limiter.check_n(&42, 8)?;
    /// assert!(limiter.set_quota(&42, Quota::per_second(5)?)?);
    /// assert!(!limiter.check(&42).is_allowed()); // 8 used of the new 5
    /// assert_eq!(limiter.quota_of(&42), Some(Quota::per_second(5)?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, key: &K, quota: Quota) -> Result<bool, QuotaError> {
        let id = self.quotas.intern(quota)?;
        let hash = self.hash(key);
        for _ in 0..SET_QUOTA_TRIES {
            let guard = epoch::pin();
            let converted = {
                let mut locked = self.shard(hash).lock(&guard);
                let Some(pos) = locked.find(hash, key) else { return Ok(false) };
                locked.quota(pos) == id || self.convert(&mut locked, pos, hash, id).is_some()
            };
            if converted {
                return Ok(true);
            }
            // No line is free of its grace period: let other threads unpin, then try again.
            drop(guard);
            std::thread::yield_now();
        }
        Ok(false)
    }

    /// Moves the key at `pos` to quota `id`, carrying over what it consumed. `None` when no line
    /// is free of its grace period (the key keeps its quota for now).
    pub(super) fn convert(
        &self,
        locked: &mut LineLocked<'_, K, A>,
        pos: usize,
        hash: u64,
        id: QuotaId,
    ) -> Option<usize> {
        self.forgets.note();
        // The state moves with the key: a striped key's comes back into its line first.
        self.cool(locked, pos, hash);
        let old = self.quotas.get(locked.quota(pos));
        let new = self.quotas.get(id);
        let key = locked.key(pos).clone();
        let now = self.clock.now_nanos();
        let carry = |cell: &A::Cell| carry_over(old, new, cell, now);
        let hash_key = |k: &K| self.hash(k);
        let moved = NewKey { hash, key, quota: id, heap: heap_of(new) };
        if self.door.is_some() {
            // The key is absent between the burial of its line and its re-insert.
            locked.announce_insert();
        }
        locked.replace(pos, heap_of(old), moved, carry, &WordFreezer(old), &hash_key).ok()
    }
}
