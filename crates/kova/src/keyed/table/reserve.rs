//! Reservations per key: [`RateLimiter::reserve_n`](crate::RateLimiter::reserve_n) and
//! [`Reservation::cancel`](crate::reservation::Reservation::cancel) on one key of the table, with the same
//! pure steps (`reservation.rs`) run on the key's word under its shard lock.

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use super::super::epoch;
use super::entry::{Entry, HeldEntry, VacantEntry};
use super::Keyed;
use crate::cas::update_word;
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::reservation::ReserveError;
use crate::reservation::{cancel_step, max_delay_nanos, reserve_step};
use crate::{Clock, Decision, Fallback, Quota, WordAlgorithm};

/// Counts the table's resets, removals, reclamations, evictions and quota moves of any key: a
/// reservation made before one cannot tell its key's state from a new one, so its cancel gives
/// nothing back; nor can units a check stranded on a hot key's closed slot (`table/hot.rs`).
///
/// Every bump is made under the shard lock of the key concerned, once its old state is gone
/// (its slot closed, its line buried or its state replaced). Reads under the same lock are
/// ordered with it; other keys' bumps only make a cancel or a hand-in give back nothing, never
/// more.
#[derive(Debug, Default)]
pub(super) struct Forgets(AtomicU64);

impl Forgets {
    /// Notes that a key's state was forgotten or converted (under its shard lock, after the
    /// change).
    pub(super) fn note(&self) {
        // Release: a check that reads the new count (Acquire, `seen`) before it loads the key's
        // word sees the change this bump follows (a closed slot, a buried line), so it cannot
        // decide on the old state and still count itself after the change.
        self.0.fetch_add(1, Ordering::Release);
    }

    /// The count as a check sees it without the lock, before it loads the key's word.
    pub(super) fn seen(&self) -> u64 {
        // Acquire: pairs with `note`'s Release.
        self.0.load(Ordering::Acquire)
    }

    pub(super) fn read(&self) -> u64 {
        // Relaxed: read under the shard lock, as `note` is.
        self.0.load(Ordering::Relaxed)
    }
}

/// Units taken by [`Keyed::reserve_n`] on one key, usable after [`delay`](Self::delay):
/// the keyed [`Reservation`](crate::reservation::Reservation).
///
/// Dropping it keeps the units taken; [`cancel`](Self::cancel) gives back what it can, to the
/// same key.
#[must_use = "a reservation holds units: wait for its delay, or cancel it"]
pub struct KeyedReservation<'a, K, W: WordAlgorithm, C: Clock> {
    table: &'a Keyed<K, W, C>,
    key: K,
    cost: u64,
    made_at: u64,
    ready_at: u64,
    /// The word the reservation stored (the mark that tells later units from ours).
    mark: u64,
    /// The key's quota when the reservation was made.
    quota: Quota,
    /// The table's [`Forgets`] count when the reservation was made.
    forgets: u64,
    fallback: Option<Fallback>,
}

impl<K: fmt::Debug, W: WordAlgorithm, C: Clock> fmt::Debug for KeyedReservation<'_, K, W, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedReservation")
            .field("key", &self.key)
            .field("cost", &self.cost)
            .field("made_at", &self.made_at)
            .field("ready_at", &self.ready_at)
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl<K: Hash + Eq + Clone, W: WordAlgorithm, C: Clock> Keyed<K, W, C> {
    /// [`RateLimiter::reserve_n`](crate::RateLimiter::reserve_n) for `key`, under the key's own
    /// quota: takes `cost` units now and says when they may be used. With
    /// [`Gcra`](crate::Gcra) they may lie in the future (later checks of the key queue behind
    /// them); the other algorithms reserve only what is available now
    /// ([`ReserveError::NotAvailableNow`] otherwise).
    ///
    /// The reservation takes the key's shard lock, as [`refund`](Self::refund) does, so that
    /// no eviction or quota change can lose it. A key not held is inserted first, its state
    /// fresh (charged what the doorkeeper admitted of it), and reserved on in the same locked
    /// step. A full table answers by its policy: under
    /// [`TableFullPolicy::AllowUntracked`](crate::keyed::TableFullPolicy::AllowUntracked) the
    /// reservation is granted at once, holds nothing and says so in
    /// [`fallback`](KeyedReservation::fallback); under
    /// [`TableFullPolicy::Sketch`](crate::keyed::TableFullPolicy::Sketch) the sketch checks the units
    /// (it cannot reserve ahead), and an admission is a reservation usable at once, marked
    /// [`Fallback::Sketch`]; a denial is [`ReserveError::TableFull`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let table = Keyed::<&str, Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// assert_eq!(table.reserve_n(&"vendor-a", 10)?.delay(), Duration::ZERO);
    /// let later = table.reserve_n(&"vendor-a", 5)?;
    /// assert_eq!(later.delay(), Duration::from_millis(500));
    /// assert!(!table.check(&"vendor-a").is_allowed()); // queued behind the reservation
    /// assert!(table.check(&"vendor-b").is_allowed()); // another key
    /// assert_eq!(later.cancel(), 5); // its 5 units go back to vendor-a
    /// assert_eq!(table.check(&"vendor-a").retry_after(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n(&self, key: &K, cost: u64) -> Result<KeyedReservation<'_, K, W, C>, ReserveError> {
        self.reserve_n_within(key, cost, Duration::MAX)
    }

    /// [`reserve_n`](Self::reserve_n), refused without taking anything when the units
    /// would be usable only after more than `max_delay`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::reservation::ReserveError;
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let table = Keyed::<u64, Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// let _all = table.reserve_n(&7, 10)?;
    /// let refused = table.reserve_n_within(&7, 2, Duration::from_millis(100));
    /// assert!(matches!(refused, Err(ReserveError::DelayTooLong { .. })));
    /// assert_eq!(table.reserve_n_within(&7, 1, Duration::from_millis(100))?.delay(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_n_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Duration,
    ) -> Result<KeyedReservation<'_, K, W, C>, ReserveError> {
        let max_nanos = max_delay_nanos(max_delay);
        let reserve = |entry: HeldEntry<'_, K, W, C>| {
            let algorithm = entry.algorithm();
            let capacity = algorithm.capacity();
            if cost > capacity {
                return Err(ReserveError::CostExceedsCapacity { cost, capacity });
            }
            let (made_at, wait, mark) = update_word(entry.cell(), entry.clock(), |word, now| {
                reserve_step(algorithm, word, now, cost, max_nanos, max_delay)
            })?;
            Ok(KeyedReservation {
                table: self,
                key: key.clone(),
                cost,
                made_at,
                ready_at: made_at.saturating_add(wait),
                mark,
                quota: algorithm.quota(),
                forgets: self.forgets.read(),
                fallback: None,
            })
        };
        // Refuse a cost the new key's quota can never take before inserting it.
        let fits = |_: &mut VacantEntry<'_, K, W, C>, algorithm: &W| {
            let capacity = algorithm.capacity();
            (cost > capacity).then_some(Err(ReserveError::CostExceedsCapacity { cost, capacity }))
        };
        self.held_or_new(key, self.hash(key), epoch::pin(), None, &reserve, fits).unwrap_or_else(|full| {
            // Checked by `fits` for a key that found no room, not for one whose quota the table
            // refused (answered under the default quota).
            let capacity = full.algorithm.capacity();
            if cost > capacity {
                return Err(ReserveError::CostExceedsCapacity { cost, capacity });
            }
            let quota = full.algorithm.quota();
            let decided = |decision: Decision| match decision.fallback() {
                Some(fallback @ (Fallback::TableFullUntracked | Fallback::Sketch))
                    if decision.is_allowed() =>
                {
                    Ok(self.untracked(key, cost, quota, fallback))
                }
                _ => Err(ReserveError::TableFull { retry_after: decision.retry_after() }),
            };
            self.table_full_or_held(full.algorithm, cost, full.retry, reserve, decided)
        })
    }

    /// A reservation granted by [`TableFullPolicy::AllowUntracked`](crate::keyed::TableFullPolicy) or
    /// [`TableFullPolicy::Sketch`](crate::keyed::TableFullPolicy) (`fallback` says which): at once,
    /// holding nothing in the table.
    fn untracked(
        &self,
        key: &K,
        cost: u64,
        quota: Quota,
        fallback: Fallback,
    ) -> KeyedReservation<'_, K, W, C> {
        let now = self.clock.now_nanos();
        KeyedReservation {
            table: self,
            key: key.clone(),
            cost,
            made_at: now,
            ready_at: now,
            mark: 0,
            quota,
            forgets: 0,
            fallback: Some(fallback),
        }
    }
}

impl<K: Hash + Eq + Clone, W: WordAlgorithm, C: Clock> KeyedReservation<'_, K, W, C> {
    /// How long after it was made the reserved units may be used (zero: at once).
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.ready_at - self.made_at)
    }

    /// How long from now (on the table's clock) until the units may be used.
    pub fn delay_from_now(&self) -> Duration {
        Duration::from_nanos(self.ready_at.saturating_sub(self.table.clock.now_nanos()))
    }

    /// The key the units were reserved on.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// The units reserved.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// When the units may be used, in the table's clock's nanoseconds.
    pub fn ready_at_nanos(&self) -> u64 {
        self.ready_at
    }

    /// `Some` when the table's full-table policy granted the reservation without holding the
    /// key: [`Fallback::TableFullUntracked`] (nothing was taken) or [`Fallback::Sketch`] (taken
    /// from the sketch's cells, which cannot give back); a cancel gives nothing.
    pub fn fallback(&self) -> Option<Fallback> {
        self.fallback
    }

    /// Says the reserved units will not be used and gives back what can be, to the same key:
    /// [`Reservation::cancel`](crate::reservation::Reservation::cancel)'s rule (nothing once their time has
    /// come; otherwise the whole cost when nothing granted on the key after it is still counted,
    /// and nothing when something is, as
    /// [`WordAlgorithm::cancel_reservation`](crate::WordAlgorithm::cancel_reservation) states it).
    /// Returns the units given back.
    ///
    /// It never gives a key more than its quota: when the key's state may no longer hold this
    /// reservation's units, nothing comes back (and it returns 0), namely when
    /// - the key is no longer held (evicted or [removed](Keyed::remove)): it starts fresh;
    /// - the key is held under another quota than it was reserved under
    ///   ([`set_quota`](Keyed::set_quota), [`check_n_with_quota`](Keyed::check_n_with_quota)):
    ///   the change carried over what was consumed, in the new quota's units;
    /// - any key of the table was [reset](Keyed::reset), removed, reclaimed or evicted, or
    ///   moved to another quota since the reservation (the table counts these, not per key: a
    ///   cancel after another key's change gives back nothing too, which is never too much);
    /// - the full-table policy granted it untracked.
    ///
    /// Giving back units that were also [refunded](Keyed::refund) gives them back twice, as on
    /// the direct limiter.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, ManualClock, Quota};
    /// let table = Keyed::<u64, Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// let _now = table.reserve_n(&1, 10)?;
    /// let later = table.reserve_n(&1, 10)?;
    /// table.remove(&1); // the key starts fresh: full
    /// assert_eq!(table.check_n(&1, 10)?.remaining(), 0);
    /// assert_eq!(later.cancel(), 0); // nothing goes back into the new state
    /// assert_eq!(table.peek(&1).remaining(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(self) -> u64 {
        let table = self.table;
        if self.fallback.is_some() || self.cost == 0 {
            return 0;
        }
        table.with_entry(&self.key, |entry| {
            let Entry::Held(entry) = entry else { return 0 };
            let algorithm = entry.algorithm();
            if table.forgets.read() != self.forgets || algorithm.quota() != self.quota {
                return 0;
            }
            update_word(entry.cell(), entry.clock(), |word, now| {
                cancel_step(algorithm, word, now, self.cost, self.ready_at, self.mark)
            })
        })
    }
}
