//! Local acceleration (off by default): denials remembered until their retry time, and token
//! leases for hot keys. Both answer without a round trip and mark the decision
//! [`Fallback::LocalCache`].

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
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

#[derive(Debug)]
struct Entry {
    limit: Limit,
    last_seen: u64,
    denial: Option<Denial>,
    lease_units: u64,
    lease_until: u64,
    lease_reset_until: u64,
    refilling: Option<Arc<Notify>>,
}

impl Entry {
    fn new(limit: Limit, now: u64) -> Self {
        Entry {
            limit,
            last_seen: now,
            denial: None,
            lease_units: 0,
            lease_until: 0,
            lease_reset_until: 0,
            refilling: None,
        }
    }

    /// Whether the entry holds nothing worth keeping at `now`.
    fn is_stale(&self, now: u64, hot_within: u64) -> bool {
        self.refilling.is_none()
            && (self.lease_units == 0 || self.lease_until <= now)
            && self.denial.is_none_or(|d| d.until <= now)
            && now.saturating_sub(self.last_seen) >= hot_within
    }
}

struct Shard {
    map: HashMap<Vec<u8>, Entry>,
    last_purge: u64,
}

/// The local table: a bounded number of keys, in mutex-guarded shards (each critical section is
/// a hash lookup and a few stores, never held across an await).
pub(crate) struct Local {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    max_per_shard: usize,
    cache_denials: bool,
    leasing: Option<Leasing>,
}

impl fmt::Debug for Local {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Local")
            .field("shards", &self.shards.len())
            .field("max_per_shard", &self.max_per_shard)
            .field("cache_denials", &self.cache_denials)
            .field("leasing", &self.leasing)
            .finish()
    }
}

const SHARDS: usize = 16;
/// Nanoseconds between two purges of a full shard.
const PURGE_INTERVAL: u64 = 100_000_000;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Local {
    pub(crate) fn new(max_keys: usize, cache_denials: bool, leasing: Option<Leasing>) -> Self {
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard { map: HashMap::new(), last_purge: 0 })).collect();
        Local {
            shards,
            hasher: RandomState::new(),
            max_per_shard: max_keys.div_ceil(SHARDS).max(1),
            cache_denials,
            leasing,
        }
    }

    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, Shard> {
        let index = (self.hasher.hash_one(key) as usize) % SHARDS;
        // Every update of a shard is complete before anything that could panic: a poisoned
        // lock still guards consistent entries.
        self.shards[index].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn hot_within(&self) -> u64 {
        self.leasing.map_or(0, |l| nanos(l.ttl))
    }

    /// Decides `cost` (>= 1) locally if it can, at local time `now`.
    pub(crate) fn before(self: &Arc<Self>, key: &[u8], limit: &Limit, cost: u64, now: u64) -> Before {
        let hot_within = self.hot_within();
        let mut shard = self.shard(key);
        let shard = &mut *shard;
        let entry = match shard.map.get_mut(key) {
            Some(entry) if entry.limit == *limit => entry,
            Some(entry) => {
                // The same key checked against another limit: start over for this one.
                *entry = Entry::new(*limit, now);
                return Before::Plain;
            }
            None => {
                if self.leasing.is_some() {
                    if shard.map.len() >= self.max_per_shard {
                        if now.saturating_sub(shard.last_purge) < PURGE_INTERVAL && shard.last_purge != 0 {
                            return Before::Plain;
                        }
                        shard.last_purge = now.max(1);
                        shard.map.retain(|_, e| !e.is_stale(now, hot_within));
                    }
                    if shard.map.len() < self.max_per_shard {
                        shard.map.insert(key.to_vec(), Entry::new(*limit, now));
                    }
                }
                return Before::Plain;
            }
        };
        let hot = now.saturating_sub(entry.last_seen) < hot_within;
        entry.last_seen = now;
        let capacity = limit.capacity();
        if entry.lease_units >= cost && now < entry.lease_until {
            entry.lease_units -= cost;
            let reset = entry.lease_reset_until.saturating_sub(now);
            return Before::Local(
                Decision::allowed(capacity, entry.lease_units, reset).with_fallback(Fallback::LocalCache),
            );
        }
        if let Some(denial) = entry.denial {
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
        let Some(leasing) = self.leasing else { return Before::Plain };
        if !hot || leasing.batch == 0 {
            return Before::Plain;
        }
        if let Some(notify) = &entry.refilling {
            let mut notified = Box::pin(notify.clone().notified_owned());
            // Registered before the lock is released: the refill's notify_waiters, which runs
            // under the same lock after it stores the lease, cannot be missed.
            notified.as_mut().enable();
            return Before::Wait(notified);
        }
        // Spend no stale remainder: the new lease replaces it.
        entry.lease_units = 0;
        entry.refilling = Some(Arc::new(Notify::new()));
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
                if let Some(entry) = self.shard(key).map.get_mut(key) {
                    entry.denial = None;
                }
            }
            return;
        }
        let mut shard = self.shard(key);
        let shard = &mut *shard;
        if !shard.map.contains_key(key) {
            if shard.map.len() >= self.max_per_shard {
                let hot_within = self.hot_within();
                shard.map.retain(|_, e| !e.is_stale(now, hot_within));
                if shard.map.len() >= self.max_per_shard {
                    return;
                }
            }
            shard.map.insert(key.to_vec(), Entry::new(*limit, now));
        }
        let Some(entry) = shard.map.get_mut(key) else { return };
        if entry.limit != *limit {
            return;
        }
        if caching {
            entry.denial = Some(Denial {
                cost,
                until: now.saturating_add(decision.retry_after_nanos()),
                remaining: decision.remaining(),
                reset_until: now.saturating_add(decision.reset_after_nanos()),
            });
        } else {
            entry.denial = None;
        }
        if granted > 0 {
            let ttl = self.leasing.map_or(0, |l| nanos(l.ttl));
            let mut lasts = ttl;
            if limit.kind() == kova::AlgorithmKind::FixedWindow {
                // Units of one window are spent in that window only.
                lasts = lasts.min(decision.reset_after_nanos());
            }
            entry.lease_units = granted;
            entry.lease_until = now.saturating_add(lasts);
            entry.lease_reset_until = now.saturating_add(decision.reset_after_nanos());
        }
    }

    /// Forgets `key` (after a reset).
    pub(crate) fn forget(&self, key: &[u8]) {
        if let Some(entry) = self.shard(key).map.remove(key) {
            if let Some(notify) = entry.refilling {
                notify.notify_waiters();
            }
        }
    }

    fn refill_done(&self, key: &[u8]) {
        let mut shard = self.shard(key);
        if let Some(entry) = shard.map.get_mut(key) {
            if let Some(notify) = entry.refilling.take() {
                notify.notify_waiters();
            }
        }
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).map.len()).sum()
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
