//! The operations that take the key's shard lock, each a few lines on its entry
//! (`table/entry.rs`): reset, refund, removal, a quota change, a charge, and the look at a
//! key's state the composite limits take (`limits/keyed.rs`).

use std::hash::Hash;

use super::super::epoch;
use super::entry::Entry;
use super::Keyed;
use crate::{Algorithm, Clock, Quota, QuotaError};

/// How many times `set_quota` waits for a line to leave its grace period.
const SET_QUOTA_TRIES: usize = 64;

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// Puts `key` back to full, keeping it (and its quota) in the table. For a key not held,
    /// forgets only what the doorkeeper admitted of it ([`KeyedBuilder::doorkeeper`]).
    ///
    /// [`KeyedBuilder::doorkeeper`]: super::super::KeyedBuilder::doorkeeper
    pub fn reset(&self, key: &K) {
        self.with_entry(key, |entry| {
            entry.forget_door();
            if let Entry::Held(entry) = entry {
                entry.reset();
            }
        });
    }

    /// Gives back `cost` units an earlier allowed check of `key` took (for example when a later
    /// limit denied the same request; see [`WordAlgorithm::refund`](crate::WordAlgorithm::refund)).
    /// Returns `false`, changing nothing, when the key is not held (its state is fresh: nothing
    /// to give back, unless the doorkeeper admitted its first check: that unit is given back) or
    /// the algorithm cannot refund (the sliding log). Takes the key's shard lock,
    /// so that no eviction or quota change can lose it; checks of the key run meanwhile.
    /// The units go to the key's state as it is now: if the key was removed, reset or evicted
    /// since the check that took them, they go to its fresh state, which then admits up to
    /// that many units beyond its quota. Between a check and its refund within one request
    /// that takes a [`remove`](Self::remove) or [`reset`](Self::reset) of the key, or an
    /// eviction from a table full of keys still in use (a key just checked is not idle).
    ///
    /// ```
    /// use kova::{Gcra, Keyed, Quota};
    /// let limiter = Keyed::<u64, Gcra>::new(Quota::per_minute(10)?)?;
    /// assert!(limiter.check_n(&1, 4)?.is_allowed());
    /// assert!(limiter.refund(&1, 4));
    /// assert_eq!(limiter.peek(&1).remaining(), 10);
    /// assert!(!limiter.refund(&2, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund(&self, key: &K, cost: u64) -> bool {
        self.with_entry(key, |entry| match entry {
            Entry::Held(entry) => entry.algorithm().refund_cell(entry.cell(), entry.clock(), cost),
            Entry::Vacant(entry) => entry.refund(cost),
        })
    }

    /// [`refund`](Self::refund) of as many units as `units` says under the key's algorithm
    /// (its own quota's), all under the key's lock, unless the table has forgotten a state since
    /// its count read `forgotten` ([`forgets_seen`](Self::forgets_seen)); returns the units given
    /// back.
    pub(crate) fn refund_with(&self, key: &K, forgotten: u64, units: impl FnOnce(&A) -> u64) -> u64 {
        self.with_entry(key, |entry| match entry {
            _ if self.forgets.read() != forgotten => 0,
            Entry::Held(entry) => {
                let cost = units(entry.algorithm());
                let given = cost > 0 && entry.algorithm().refund_cell(entry.cell(), entry.clock(), cost);
                if given {
                    cost
                } else {
                    0
                }
            }
            // The door admits under the default quota only.
            Entry::Vacant(entry) => {
                let cost = units(self.algorithm());
                if cost > 0 && entry.refund(cost) {
                    cost
                } else {
                    0
                }
            }
        })
    }

    /// Forgets `key` (its state, its own quota, and what the doorkeeper admitted of it); returns
    /// whether it was held. Its memory is reused once no check can still be reading it.
    pub fn remove(&self, key: &K) -> bool {
        self.with_entry(key, |entry| {
            entry.forget_door();
            match entry {
                Entry::Held(entry) => {
                    entry.remove();
                    true
                }
                Entry::Vacant(_) => false,
            }
        })
    }

    /// Gives a held key its own quota, keeping what it has consumed; returns whether the key is
    /// held (a key not held gets its quota when it is next checked: from the quota function,
    /// or [`check_n_with_quota`](Self::check_n_with_quota)). A move needs a line free of its
    /// grace period: while a thread stays pinned (preempted, or blocked in a user's key or
    /// algorithm code) there may be none, and after 64 tries, yielding between them, the key
    /// keeps its quota and this returns `false` too.
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
        for _ in 0..SET_QUOTA_TRIES {
            let moved = self.with_entry(key, |entry| match entry {
                Entry::Held(mut entry) => (entry.quota_id() == id || entry.move_to(id)).then_some(true),
                Entry::Vacant(_) => Some(false),
            });
            if let Some(held) = moved {
                return Ok(held);
            }
            // No line is free of its grace period: let other threads unpin (as we are now),
            // then try again.
            std::thread::yield_now();
        }
        Ok(false)
    }

    /// [`RateLimiter::charge`](crate::RateLimiter::charge) for `key`: up to `cost` units, never
    /// denied, down to the key's overdraft. A key not held is inserted first, its state fresh
    /// (charged what the doorkeeper admitted of it), and charged in the same locked step. A full
    /// table charges nothing ([`settle`](Self::settle) reports it uncharged).
    pub fn charge(&self, key: &K, cost: u64) -> u64 {
        if cost == 0 {
            return 0;
        }
        let charge = |entry: super::entry::HeldEntry<'_, K, A, C>| {
            entry.algorithm().charge_cell(entry.cell(), entry.clock(), cost)
        };
        self.held_or_new(key, self.hash(key), epoch::pin(), None, charge, |_, _| None).unwrap_or(0)
    }

    /// Runs `f` on `key`'s algorithm, cell and the clock under its shard lock, inserting the key
    /// first (fresh) when it is not held, in the same locked step as [`charge`](Self::charge):
    /// for a composite's charges (`limits/keyed.rs`). `None` when a full table had no room.
    pub(crate) fn on_held_or_new<R>(&self, key: &K, mut f: impl FnMut(&A, &A::Cell, &C) -> R) -> Option<R> {
        let on_held =
            |entry: super::entry::HeldEntry<'_, K, A, C>| f(entry.algorithm(), entry.cell(), entry.clock());
        self.held_or_new(key, self.hash(key), epoch::pin(), None, on_held, |_, _| None).ok()
    }
}
