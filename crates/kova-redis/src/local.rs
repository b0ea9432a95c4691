//! Local acceleration (off by default): denials remembered until their retry time, and token
//! leases for hot keys. Both answer without a round trip and mark the decision
//! [`Fallback::LocalCache`]. A leased unit is spent with one compare-and-swap on its key's entry,
//! found in a concurrent map without a lock, so local answers scale with cores.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kova::{Decision, Fallback};
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

use crate::Limit;

/// Token leasing for hot keys: take a batch of units from Redis in the same script run that
/// admits a request, and spend them locally with no round trip.
///
/// A key is *hot* when it is checked again within `ttl` of its previous check on this limiter.
/// When a hot key has no leased units left, one check (the others wait for it, up to their
/// timeout) asks Redis for `cost + batch`: the script admits `cost` and grants up to `batch`
/// more, as many as the limit has room for right now. Leased units are spent by later checks of
/// the same key and limit until they run out or `ttl` passes (for a fixed window, also when its
/// window ends); unspent units expire unused (the limit is then *under*-used, never over).
///
/// # Overshoot bound
/// Redis counts a leased unit when it is leased, and the unit may be spent up to `ttl` later.
/// So over any interval, the units admitted across `N` servers are at most what the algorithm
/// admits over that interval **plus `N * batch`** (each server holds at most `batch` unspent
/// units at the interval's start). With a fixed window the lease ends with its window, so the
/// per-window limit holds exactly. The test `leasing_overshoot_is_bounded` measures it.
///
/// ```
/// use std::time::Duration;
/// let leasing = kova_redis::Leasing::new(100, Duration::from_millis(200));
/// assert_eq!(leasing.batch(), 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leasing {
    batch: u64,
    ttl: Duration,
}

impl Leasing {
    /// Lease up to `batch` units at a time, each lease spent within `ttl`.
    pub fn new(batch: u64, ttl: Duration) -> Self {
        Leasing { batch, ttl }
    }

    /// Units leased at a time (at most).
    pub fn batch(&self) -> u64 {
        self.batch
    }

    /// How long a lease lasts, and how close two checks must be for a key to be hot.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// What the local layer says about a check before Redis is asked.
pub(crate) enum Before {
    /// Answered locally.
    Local(Decision),
    /// Ask Redis for `extra` more units to lease; `guard` marks the refill in flight.
    Refill { extra: u64, guard: RefillGuard },
    /// Another check is refilling this key's lease: wait for it, then ask again.
    Wait(Pin<Box<OwnedNotified>>),
    /// Ask Redis plainly.
    Plain,
}

/// A denial remembered: costs of at least `cost` are denied until `until`.
#[derive(Debug, Clone, Copy)]
struct Denial {
    cost: u64,
    until: u64,
    remaining: u64,
    reset_until: u64,
}

/// What changes rarely: under the entry's own lock (one key's, never the table's).
#[derive(Debug, Default)]
struct Slow {
    denial: Option<Denial>,
    refilling: Option<Arc<Notify>>,
}

/// One key's local state. The lease is spent with no lock: `lease_units` is published last by a
/// refill (Release) and read first by a spend (Acquire), so a spend that sees a lease's units
/// sees its expiry too.
#[derive(Debug)]
struct Entry {
    limit: Limit,
    last_seen: AtomicU64,
    lease_units: AtomicU64,
    lease_until: AtomicU64,
    lease_reset_until: AtomicU64,
    /// The remembered denial's `until` (0: none), so that a check of a key with no live denial
    /// takes no lock.
    denial_until: AtomicU64,
    slow: Mutex<Slow>,
}

impl Entry {
    fn new(limit: Limit, now: u64) -> Self {
        Entry {
            limit,
            last_seen: AtomicU64::new(now),
            lease_units: AtomicU64::new(0),
            lease_until: AtomicU64::new(0),
            lease_reset_until: AtomicU64::new(0),
            denial_until: AtomicU64::new(0),
            slow: Mutex::new(Slow::default()),
        }
    }

    fn slow(&self) -> MutexGuard<'_, Slow> {
        // Every update under this lock is complete before anything that could panic: a
        // poisoned lock still guards consistent fields.
        self.slow.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the entry holds nothing worth keeping at `now` (a busy entry is kept).
    fn is_stale(&self, now: u64, hot_within: u64) -> bool {
        // Relaxed: a purge may keep or drop an entry racing with a check; either is safe (a
        // dropped lease is under-use, a dropped denial only asks Redis again).
        let lease_live =
            self.lease_units.load(Ordering::Relaxed) > 0 && self.lease_until.load(Ordering::Relaxed) > now;
        let recent = now.saturating_sub(self.last_seen.load(Ordering::Relaxed)) < hot_within;
        if lease_live || recent || self.denial_until.load(Ordering::Relaxed) > now {
            return false;
        }
        self.slow.try_lock().is_ok_and(|slow| slow.refilling.is_none())
    }

    /// Spends `cost` leased units if the lease holds them and is live at `now`.
    fn spend(&self, cost: u64, now: u64) -> Option<u64> {
        // Acquire: pairs with the refill's Release store of the units (see `Entry`).
        let mut units = self.lease_units.load(Ordering::Acquire);
        loop {
            if units < cost || now >= self.lease_until.load(Ordering::Relaxed) {
                return None;
            }
            // Success AcqRel: a spend after a refill's store of the same value reads it with
            // Acquire; failure Acquire for the same reason as the first load.
            match self.lease_units.compare_exchange_weak(
                units,
                units - cost,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(units - cost),
                Err(current) => units = current,
            }
        }
    }
}

/// The local table: a bounded number of keys in a concurrent map (papaya: lookups take no
/// lock and write nothing shared), each entry with atomics for its lease and a lock of its own
/// for its rare changes (a denial remembered, a refill starting or ending).
pub(crate) struct Local {
    /// Keys hashed with ahash, randomly seeded: chosen keys cannot force collisions, and a
    /// lookup hashes faster than with std's SipHash.
    map: papaya::HashMap<Vec<u8>, Entry, ahash::RandomState>,
    max_keys: usize,
    /// When the last purge of stale entries ran (local nanoseconds; 0: never).
    last_purge: AtomicU64,
    cache_denials: bool,
    leasing: Option<Leasing>,
}

impl fmt::Debug for Local {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Local")
            .field("keys", &self.map.len())
            .field("max_keys", &self.max_keys)
            .field("cache_denials", &self.cache_denials)
            .field("leasing", &self.leasing)
            .finish()
    }
}

/// Nanoseconds between two purges of a full table.
const PURGE_INTERVAL: u64 = 100_000_000;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Local {
    pub(crate) fn new(max_keys: usize, cache_denials: bool, leasing: Option<Leasing>) -> Self {
        Local {
            map: papaya::HashMap::with_hasher(ahash::RandomState::new()),
            max_keys: max_keys.max(1),
            last_purge: AtomicU64::new(0),
            cache_denials,
            leasing,
        }
    }

    fn hot_within(&self) -> u64 {
        self.leasing.map_or(0, |l| nanos(l.ttl))
    }

    /// Inserts a fresh entry for `key` if there is room, purging stale entries first when the
    /// table is full (at most once per [`PURGE_INTERVAL`] unless `force`).
    fn insert(&self, key: &[u8], limit: &Limit, now: u64, force: bool) -> bool {
        let map = self.map.pin();
        if map.len() >= self.max_keys {
            // Relaxed: the purge time only spaces purges out; two racing purges are harmless.
            let last = self.last_purge.load(Ordering::Relaxed);
            if !force && last != 0 && now.saturating_sub(last) < PURGE_INTERVAL {
                return false;
            }
            self.last_purge.store(now.max(1), Ordering::Relaxed);
            let hot_within = self.hot_within();
            map.retain(|_, e| !e.is_stale(now, hot_within));
            if map.len() >= self.max_keys {
                return false;
            }
        }
        map.insert(key.to_vec(), Entry::new(*limit, now));
        true
    }

    /// Decides `cost` (>= 1) locally if it can, at local time `now`.
    pub(crate) fn before(self: &Arc<Self>, key: &[u8], limit: &Limit, cost: u64, now: u64) -> Before {
        let hot_within = self.hot_within();
        let map = self.map.pin();
        let entry = match map.get(key) {
            Some(entry) if entry.limit == *limit => entry,
            Some(_) => {
                // The same key checked against another limit: start over for this one.
                map.insert(key.to_vec(), Entry::new(*limit, now));
                return Before::Plain;
            }
            None => {
                if self.leasing.is_some() {
                    drop(map);
                    self.insert(key, limit, now, false);
                }
                return Before::Plain;
            }
        };
        // Relaxed: hotness is a heuristic. Stored only when it moved by a sixteenth of the
        // window, so that a hot key's checks on many cores do not all write one cache line.
        let last_seen = entry.last_seen.load(Ordering::Relaxed);
        let hot = now.saturating_sub(last_seen) < hot_within;
        if now.saturating_sub(last_seen) >= hot_within / 16 {
            entry.last_seen.store(now, Ordering::Relaxed);
        }
        let capacity = limit.capacity();
        if let Some(left) = entry.spend(cost, now) {
            // Relaxed: written before the units that `spend` read with Acquire.
            let reset = entry.lease_reset_until.load(Ordering::Relaxed).saturating_sub(now);
            return Before::Local(
                Decision::allowed(capacity, left, reset).with_fallback(Fallback::LocalCache),
            );
        }
        // Relaxed: a hint; the denial itself is read under the entry's lock.
        if now < entry.denial_until.load(Ordering::Relaxed) {
            if let Some(denial) = entry.slow().denial {
                if now < denial.until && cost >= denial.cost {
                    let decision = Decision::denied(
                        capacity,
                        denial.remaining,
                        denial.until - now,
                        denial.reset_until.saturating_sub(now),
                    );
                    return Before::Local(decision.with_fallback(Fallback::LocalCache));
                }
            }
        }
        let Some(leasing) = self.leasing else { return Before::Plain };
        if !hot || leasing.batch == 0 {
            return Before::Plain;
        }
        let mut slow = entry.slow();
        if let Some(notify) = &slow.refilling {
            let mut notified = Box::pin(notify.clone().notified_owned());
            // Registered before the lock is released: the refill's notify_waiters, which runs
            // under the same lock after it stores the lease, cannot be missed.
            notified.as_mut().enable();
            return Before::Wait(notified);
        }
        // Spend no stale remainder: the new lease replaces it. Relaxed: spends racing with
        // this take at most the units they saw, which were theirs to take.
        entry.lease_units.store(0, Ordering::Relaxed);
        slow.refilling = Some(Arc::new(Notify::new()));
        Before::Refill {
            extra: leasing.batch,
            guard: RefillGuard { local: Arc::clone(self), key: key.to_vec() },
        }
    }

    /// Records what Redis answered for `cost` (+ `granted` leased units) at local time `now`.
    pub(crate) fn after(
        &self,
        key: &[u8],
        limit: &Limit,
        cost: u64,
        decision: &Decision,
        granted: u64,
        now: u64,
    ) {
        let caching = self.cache_denials && !decision.is_allowed() && cost > 0;
        if granted == 0 && !caching {
            if decision.is_allowed() && cost > 0 {
                // A stale denial must not outlive an admission.
                if let Some(entry) = self.map.pin().get(key) {
                    if entry.denial_until.load(Ordering::Relaxed) != 0 {
                        entry.slow().denial = None;
                        entry.denial_until.store(0, Ordering::Relaxed);
                    }
                }
            }
            return;
        }
        if self.map.pin().get(key).is_none() && !self.insert(key, limit, now, true) {
            return;
        }
        let map = self.map.pin();
        let Some(entry) = map.get(key) else { return };
        if entry.limit != *limit {
            return;
        }
        let mut slow = entry.slow();
        if caching {
            let denial = Denial {
                cost,
                until: now.saturating_add(decision.retry_after_nanos()),
                remaining: decision.remaining(),
                reset_until: now.saturating_add(decision.reset_after_nanos()),
            };
            slow.denial = Some(denial);
            // Relaxed: a hint; the denial is read under the lock.
            entry.denial_until.store(denial.until, Ordering::Relaxed);
        } else {
            slow.denial = None;
            entry.denial_until.store(0, Ordering::Relaxed);
        }
        if granted > 0 {
            let mut lasts = self.hot_within();
            if limit.kind() == kova::AlgorithmKind::FixedWindow {
                // Units of one window are spent in that window only.
                lasts = lasts.min(decision.reset_after_nanos());
            }
            // Relaxed: published by the Release store of the units below.
            entry.lease_until.store(now.saturating_add(lasts), Ordering::Relaxed);
            entry
                .lease_reset_until
                .store(now.saturating_add(decision.reset_after_nanos()), Ordering::Relaxed);
            // Release: a spend that reads these units sees the expiry stored above.
            entry.lease_units.store(granted, Ordering::Release);
        }
    }

    /// Forgets `key` (after a reset).
    pub(crate) fn forget(&self, key: &[u8]) {
        let map = self.map.pin();
        if let Some(entry) = map.remove(key) {
            if let Some(notify) = entry.slow().refilling.take() {
                notify.notify_waiters();
            }
        }
    }

    fn refill_done(&self, key: &[u8]) {
        let map = self.map.pin();
        if let Some(entry) = map.get(key) {
            if let Some(notify) = entry.slow().refilling.take() {
                notify.notify_waiters();
            }
        }
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Marks one key's lease refill in flight; dropping it (after the answer, a failure, or a
/// cancelled call) ends the refill and wakes the checks waiting for it.
pub(crate) struct RefillGuard {
    local: Arc<Local>,
    key: Vec<u8>,
}

impl Drop for RefillGuard {
    fn drop(&mut self) {
        self.local.refill_done(&self.key);
    }
}
