//! [`Entry`]: one key's local state (its lease, its remembered denial, when it was last seen),
//! and the local answer read from it without a lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use kova::{Clock, Decision, Fallback};
use tokio::sync::Notify;

use super::denial::CachedDenial;
use crate::clock::LocalClock;
use crate::limit::RedisLimit;

/// One key's local state. The lease is spent with no lock: `lease_units` is published last by a
/// refill (Release) and read first by a spend (Acquire), so a spend that sees a lease's units
/// sees its expiry too. The denial is read with no lock either ([`CachedDenial`]); the lock
/// guards only a refill's start and end ([`Refill`]).
///
/// Laid out in this order (`repr(C)`): what a local answer reads comes first, so that it
/// touches as few cache lines as it can.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Entry {
    pub(crate) lease_units: AtomicU64,
    pub(crate) lease_until: AtomicU64,
    pub(crate) lease_reset_until: AtomicU64,
    pub(crate) last_seen: AtomicU64,
    /// The entry's limit as its script sees it ([`RedisLimit::script_args`]; the algorithm is the
    /// key's): what a local answer compares, beside the lease, instead of the whole limit.
    script: [u64; 2],
    /// The limit's capacity, which its script arguments fix.
    capacity: u64,
    pub(crate) denial: CachedDenial,
    /// The refill in flight, if any: checks that find a hot key with no units wait on it.
    refilling: Mutex<Option<Refill>>,
}

/// A refill in flight: what wakes the checks waiting for it, and the units it took from the
/// lease it may replace.
///
/// A refill starts when a check costs more than the lease holds (or the lease ended). The units
/// still left are Redis's grant to this server, so they are taken out of reach while Redis is
/// asked (a spend racing with a new lease's store could otherwise pair them with the new
/// lease's end) and given back unless Redis's answer brings a new lease, which supersedes them.
/// Given back, they keep their own lease's end: only the refill writes a lease, and it wrote
/// none.
#[derive(Debug)]
pub(crate) struct Refill {
    pub(crate) notify: Arc<Notify>,
    /// Units taken from the lease when the refill started; 0 once a new lease supersedes them.
    pub(crate) taken: u64,
}

/// A reading of the local clock for one check: the coarse time, and the precise time read only
/// when a boundary lies within the coarse time's lag.
pub(crate) struct Now<'a> {
    clock: &'a LocalClock,
    coarse: u64,
    lag: u64,
    precise: Option<u64>,
}

impl<'a> Now<'a> {
    #[inline]
    pub(crate) fn read(clock: &'a LocalClock) -> Self {
        Now { clock, coarse: clock.now_nanos(), lag: clock.max_lag_nanos(), precise: None }
    }

    /// The reading so far: the precise one if a near miss read it, else the coarse one.
    pub(crate) fn value(&self) -> u64 {
        self.precise.unwrap_or(self.coarse)
    }

    /// Whether the time is before `deadline`, on the precise time when the coarse reading is
    /// within its lag of it; and the reading that decided it.
    #[inline]
    fn before(&mut self, deadline: u64) -> Option<u64> {
        let now = self.precise.unwrap_or(self.coarse);
        if now >= deadline {
            return None;
        }
        if self.precise.is_some() || now.saturating_add(self.lag) < deadline {
            return Some(now);
        }
        // A near miss: the precise time may already be past the deadline.
        let precise = self.clock.now_nanos_precise().max(now);
        self.precise = Some(precise);
        (precise < deadline).then_some(precise)
    }
}

impl Entry {
    pub(crate) fn new(limit: RedisLimit, now: u64) -> Self {
        Entry {
            script: limit.script_args(),
            capacity: limit.capacity(),
            last_seen: AtomicU64::new(now),
            lease_units: AtomicU64::new(0),
            lease_until: AtomicU64::new(0),
            lease_reset_until: AtomicU64::new(0),
            denial: CachedDenial::default(),
            refilling: Mutex::new(None),
        }
    }

    /// Whether this entry's lease and denial hold for checks under `limit` (of the key's
    /// algorithm): Redis decided them with the same script arguments, and a limit's capacity
    /// follows from those, so two limits that pass them alike share what Redis granted.
    #[inline]
    pub(crate) fn holds_for(&self, limit: &RedisLimit) -> bool {
        self.script == limit.script_args()
    }

    pub(crate) fn refilling(&self) -> MutexGuard<'_, Option<Refill>> {
        // Every update under this lock is one store: a poisoned lock still guards a consistent
        // value.
        self.refilling.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the units left in the lease, for a refill that starts (see [`Refill`]).
    pub(crate) fn take_lease(&self) -> u64 {
        // Acquire: pairs with the Release that published these units, so the expiry they were
        // stored with happens before the `give_back` that republishes them.
        self.lease_units.swap(0, Ordering::Acquire)
    }

    /// Gives back `units` taken by [`take_lease`](Self::take_lease), under the lease's own end.
    pub(crate) fn give_back(&self, units: u64) {
        if units > 0 {
            // Release: a spend that reads these units with Acquire sees the lease's expiry,
            // which the taking Acquire ordered before this.
            self.lease_units.fetch_add(units, Ordering::Release);
        }
    }

    /// Stores a new lease of `units`, spendable before `until`; its window resets at
    /// `reset_until`. The refill's caller holds the entry's lock: one writer at a time.
    pub(crate) fn lease(&self, units: u64, until: u64, reset_until: u64) {
        // Relaxed: published by the Release store of the units below.
        self.lease_until.store(until, Ordering::Relaxed);
        self.lease_reset_until.store(reset_until, Ordering::Relaxed);
        // Release: a spend that reads these units sees the expiry stored above.
        self.lease_units.store(units, Ordering::Release);
    }

    /// Whether the entry holds nothing worth keeping at `now` (a busy entry is kept).
    pub(crate) fn is_stale(&self, now: u64, hot_within: u64) -> bool {
        // Relaxed: a purge may keep or drop an entry racing with a check; either is safe (a
        // dropped lease is under-use, a dropped denial only asks Redis again).
        let lease_live =
            self.lease_units.load(Ordering::Relaxed) > 0 && self.lease_until.load(Ordering::Relaxed) > now;
        let recent = now.saturating_sub(self.last_seen.load(Ordering::Relaxed)) < hot_within;
        if lease_live || recent || self.denial.until_hint() > now {
            return false;
        }
        self.refilling.try_lock().is_ok_and(|refilling| refilling.is_none())
    }

    /// Whether the key was checked within `hot_within` before `now`; notes this check.
    #[inline]
    pub(crate) fn seen(&self, now: u64, hot_within: u64) -> bool {
        // Relaxed: hotness is a heuristic. Stored only when it moved by a sixteenth of the
        // window, so that a hot key's checks on many cores do not all write one cache line.
        let last_seen = self.last_seen.load(Ordering::Relaxed);
        let since = now.saturating_sub(last_seen);
        if since >= hot_within / 16 {
            self.last_seen.store(now, Ordering::Relaxed);
        }
        since < hot_within
    }

    /// The local answer for `cost` (>= 1) units, if there is one: leased units spent, or the
    /// remembered denial. Takes no lock and allocates nothing.
    #[inline]
    pub(crate) fn answer(&self, cost: u64, now: &mut Now<'_>) -> Option<Decision> {
        let capacity = self.capacity;
        if let Some((left, at)) = self.spend(cost, now) {
            // Relaxed: written before the units that `spend` read with Acquire.
            let reset = self.lease_reset_until.load(Ordering::Relaxed).saturating_sub(at);
            return Some(Decision::allowed(capacity, left, reset).with_fallback(Fallback::LocalCache));
        }
        let denial = self.denial.get()?;
        if cost < denial.cost {
            return None;
        }
        let at = now.before(denial.until)?;
        let decision = Decision::denied(
            capacity,
            denial.remaining,
            denial.until - at,
            denial.reset_until.saturating_sub(at),
        );
        Some(decision.with_fallback(Fallback::LocalCache))
    }

    /// Spends `cost` leased units if the lease holds them and is live; the units left and the
    /// time that decided it.
    #[inline]
    fn spend(&self, cost: u64, now: &mut Now<'_>) -> Option<(u64, u64)> {
        // Acquire: pairs with the refill's Release store of the units (see `Entry`).
        let mut units = self.lease_units.load(Ordering::Acquire);
        loop {
            if units < cost {
                return None;
            }
            let at = now.before(self.lease_until.load(Ordering::Relaxed))?;
            // Success AcqRel: a spend after a refill's store of the same value reads it with
            // Acquire; failure Acquire for the same reason as the first load.
            match self.lease_units.compare_exchange_weak(
                units,
                units - cost,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some((units - cost, at)),
                Err(current) => units = current,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A coarse reading of 1,000 that may trail the precise one by up to 100: the precise time
    /// is 1,050, and every precise reading is counted.
    #[derive(Default)]
    struct Lagging {
        precise_reads: AtomicU64,
    }

    impl Clock for Lagging {
        fn now_nanos(&self) -> u64 {
            1_000
        }
        fn now_nanos_precise(&self) -> u64 {
            self.precise_reads.fetch_add(1, Ordering::Relaxed);
            1_050
        }
        fn max_lag_nanos(&self) -> u64 {
            100
        }
    }

    fn clock() -> (Arc<Lagging>, LocalClock) {
        let lagging = Arc::new(Lagging::default());
        (Arc::clone(&lagging), LocalClock::Client(lagging))
    }

    #[test]
    fn a_deadline_beyond_the_lag_is_decided_on_the_coarse_time() {
        let (lagging, clock) = clock();
        assert_eq!(Now::read(&clock).before(1_101), Some(1_000));
        assert_eq!(Now::read(&clock).before(1_000), None);
        assert_eq!(lagging.precise_reads.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_near_miss_is_decided_on_the_precise_time() {
        let (lagging, clock) = clock();
        // The coarse time is before 1,040, the precise time is not: the lease has ended.
        assert_eq!(Now::read(&clock).before(1_040), None);
        assert_eq!(Now::read(&clock).before(1_050), None);
        assert_eq!(Now::read(&clock).before(1_051), Some(1_050));
        assert_eq!(lagging.precise_reads.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_lease_in_its_last_lag_is_not_spent_past_its_end() {
        let (_, clock) = clock();
        let limit = RedisLimit::gcra(kova::Quota::per_second(10).unwrap()).unwrap();
        let entry = Entry::new(limit, 0);
        entry.lease_until.store(1_040, Ordering::Relaxed);
        entry.lease_units.store(3, Ordering::Release);
        assert_eq!(entry.answer(1, &mut Now::read(&clock)), None);
        assert_eq!(entry.lease_units.load(Ordering::Relaxed), 3, "units spent after the lease ended");
        entry.lease_until.store(1_051, Ordering::Relaxed);
        let d = entry.answer(1, &mut Now::read(&clock)).expect("spent within the lease");
        assert_eq!((d.remaining(), d.fallback()), (2, Some(Fallback::LocalCache)));
    }
}
