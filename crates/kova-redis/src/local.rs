//! Local acceleration (off by default): denials remembered until their retry time, and token
//! leases for hot keys ([`Leasing`]). Both answer without a round trip and mark the decision
//! [`Fallback::LocalCache`](kova::Fallback::LocalCache).
//!
//! A local answer is the check's first step, before the Redis key is built or anything is
//! allocated: the key's entry is found by the user's key and algorithm in a concurrent map that
//! takes no lock and writes nothing shared on a lookup (or, for a key that a thread checks again
//! and again, kept by that thread: [`Recent`]), a leased unit is spent with one compare-and-swap
//! on the entry, and a denial is read under a sequence lock. The time is the
//! coarse clock's, read again precisely only near a lease's expiry or a denial's end.

mod denial;
mod entry;
mod recent;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kova::{AlgorithmKind, Clock, Decision};
use smallvec::SmallVec;
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

use crate::clock::LocalClock;
use crate::leasing::Leasing;
use crate::limit::RedisLimit;
use denial::Denial;
use entry::{Entry, Now};
use recent::Recent;

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

/// How many bytes of a user's key the table holds inline; a longer key takes an allocation of
/// its own, and its lookups one more memory access.
const INLINE_KEY: usize = 24;

/// A key of the local table: the user's key and the algorithm, as the Redis key names them
/// (two limits of one algorithm on one user key share their Redis key, and so their entry).
/// Held inline in the table's element, beside the entry's pointer: a lookup of a key of up to
/// [`INLINE_KEY`] bytes reads the element and the entry, and no third allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LocalKey {
    kind: AlgorithmKind,
    user_key: SmallVec<[u8; INLINE_KEY]>,
}

/// A key borrowed from a check's arguments: lookups allocate nothing.
#[derive(Clone, Copy)]
struct KeyRef<'a> {
    kind: AlgorithmKind,
    user_key: &'a [u8],
}

impl Hash for LocalKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        KeyRef { kind: self.kind, user_key: &self.user_key }.hash(state);
    }
}

impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The same bytes as `LocalKey`'s hash, which is defined by this one. The algorithm and
        // the key's length in one word: one round of the hasher fewer than writing each.
        state.write_u64((self.user_key.len() as u64) << 8 | self.kind as u64);
        state.write(self.user_key);
    }
}

impl papaya::Equivalent<LocalKey> for KeyRef<'_> {
    #[inline]
    fn equivalent(&self, key: &LocalKey) -> bool {
        self.kind == key.kind && *self.user_key == *key.user_key
    }
}

impl KeyRef<'_> {
    fn into_owned(self) -> LocalKey {
        LocalKey { kind: self.kind, user_key: SmallVec::from_slice(self.user_key) }
    }
}

/// The local table: a bounded number of keys in a concurrent map (papaya: lookups take no
/// lock and write nothing shared), each entry with atomics for its lease and its denial and a
/// lock of its own for a refill's start and end; and each thread's recent entry ([`Recent`]),
/// answered from without the map.
pub(crate) struct Local {
    /// Keys hashed with ahash, randomly seeded: chosen keys cannot force collisions, and a
    /// lookup hashes faster than with std's SipHash.
    /// Entries are shared (`Arc`) with the threads that keep them ([`Recent`]).
    map: papaya::HashMap<LocalKey, Arc<Entry>, ahash::RandomState>,
    /// Told of every entry that leaves `map`.
    recent: Recent,
    max_keys: usize,
    clock: LocalClock,
    /// When the last purge of stale entries ran (local nanoseconds; 0: never).
    last_purge: AtomicU64,
    cache_denials: bool,
    leasing: Option<Leasing>,
    /// How close two checks of a key make it hot: the lease ttl in nanoseconds (0: no leasing).
    hot_within: u64,
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

impl Local {
    pub(crate) fn new(
        max_keys: usize,
        cache_denials: bool,
        leasing: Option<Leasing>,
        clock: LocalClock,
    ) -> Self {
        Local {
            map: papaya::HashMap::with_hasher(ahash::RandomState::new()),
            recent: Recent::default(),
            max_keys: max_keys.max(1),
            clock,
            last_purge: AtomicU64::new(0),
            cache_denials,
            leasing,
            hot_within: leasing.map_or(0, |l| l.ttl_nanos()),
        }
    }

    /// The local answer for `cost` (>= 1) units of `user_key` under `limit`, if there is one:
    /// no lock, no allocation, no Redis key. `None`: ask [`before`](Self::before).
    #[inline]
    pub(crate) fn answer(&self, user_key: &[u8], limit: &RedisLimit, cost: u64) -> Option<Decision> {
        let key = KeyRef { kind: limit.kind(), user_key };
        let departures = self.recent.departures();
        let again = match self.recent.with_entry(key, departures, |e| self.answer_from(e, limit, cost)) {
            Ok(answer) => return answer,
            Err(again) => again,
        };
        let map = self.map.pin();
        let entry = map.get(&key)?;
        if again {
            self.recent.keep(key, departures, entry);
        }
        self.answer_from(entry, limit, cost)
    }

    #[inline(always)]
    fn answer_from(&self, entry: &Entry, limit: &RedisLimit, cost: u64) -> Option<Decision> {
        if !entry.holds_for(limit) {
            return None;
        }
        let mut now = Now::read(&self.clock);
        let decision = entry.answer(cost, &mut now)?;
        entry.seen(now.value(), self.hot_within);
        Some(decision)
    }

    /// Inserts a fresh entry for `key` if there is room, purging stale entries first when the
    /// table is full (at most once per [`PURGE_INTERVAL`] unless `force`).
    fn insert(&self, key: &KeyRef<'_>, limit: &RedisLimit, now: u64, force: bool) -> bool {
        let map = self.map.pin();
        if map.len() >= self.max_keys {
            // Relaxed: the purge time only spaces purges out; two racing purges are harmless.
            let last = self.last_purge.load(Ordering::Relaxed);
            if !force && last != 0 && now.saturating_sub(last) < PURGE_INTERVAL {
                return false;
            }
            self.last_purge.store(now.max(1), Ordering::Relaxed);
            let hot_within = self.hot_within;
            map.retain(|_, e| !e.is_stale(now, hot_within));
            self.recent.departed();
            if map.len() >= self.max_keys {
                return false;
            }
        }
        if map.insert(key.into_owned(), Arc::new(Entry::new(*limit, now))).is_some() {
            // Another check inserted the key first.
            self.recent.departed();
        }
        true
    }

    /// What to do about `cost` (>= 1) units of `user_key` under `limit` when
    /// [`answer`](Self::answer) had none: answer locally after all (a lease that came since),
    /// refill a hot key's lease, wait for a refill in flight, or ask Redis plainly.
    pub(crate) fn before(&self, user_key: &[u8], limit: &RedisLimit, cost: u64) -> Before {
        let key = KeyRef { kind: limit.kind(), user_key };
        let mut now = Now::read(&self.clock);
        let map = self.map.pin();
        let entry = match map.get(&key) {
            Some(entry) if entry.holds_for(limit) => entry,
            Some(_) => {
                // The same key checked against a limit that Redis sees otherwise: start over for it.
                map.insert(key.into_owned(), Arc::new(Entry::new(*limit, now.value())));
                self.recent.departed();
                return Before::Plain;
            }
            None => {
                if self.leasing.is_some() {
                    drop(map);
                    self.insert(&key, limit, now.value(), false);
                }
                return Before::Plain;
            }
        };
        let answer = entry.answer(cost, &mut now);
        let hot = entry.seen(now.value(), self.hot_within);
        if let Some(decision) = answer {
            return Before::Local(decision);
        }
        let Some(leasing) = self.leasing else { return Before::Plain };
        if !hot || leasing.batch() == 0 {
            return Before::Plain;
        }
        let mut refilling = entry.refilling();
        if let Some(notify) = &*refilling {
            let mut notified = Box::pin(notify.clone().notified_owned());
            // Registered before the lock is released: the refill's notify_waiters, which runs
            // under the same lock after it stores the lease, cannot be missed.
            notified.as_mut().enable();
            return Before::Wait(notified);
        }
        // Spend no stale remainder: the new lease replaces it. Relaxed: spends racing with
        // this take at most the units they saw, which were theirs to take.
        entry.lease_units.store(0, Ordering::Relaxed);
        *refilling = Some(Arc::new(Notify::new()));
        Before::Refill { extra: leasing.batch(), guard: RefillGuard { refilling: Arc::clone(entry) } }
    }

    /// The local clock's precise time.
    pub(crate) fn now_precise(&self) -> u64 {
        self.clock.now_nanos_precise()
    }

    /// Records what Redis answered for `cost` (+ `granted` leased units) of `user_key`;
    /// `refill` is the guard of the refill that asked for the lease, `decided_from` a local
    /// time at or before the one Redis decided at: the answer's durations count from it.
    #[expect(clippy::too_many_arguments, reason = "the answer's parts, each used once")]
    pub(crate) fn after(
        &self,
        user_key: &[u8],
        limit: &RedisLimit,
        cost: u64,
        decision: &Decision,
        granted: u64,
        refill: Option<&RefillGuard>,
        decided_from: u64,
    ) {
        let key = KeyRef { kind: limit.kind(), user_key };
        if granted > 0 {
            // A lease goes only into the entry its refill began on, while that is still the
            // key's entry: one forgotten meanwhile (a reset, which deletes the Redis key) may
            // hold units Redis no longer counts. The units are then left unspent (stricter).
            let current = self.map.pin().get(&key).cloned();
            let began_on = refill.map(|guard| &guard.refilling);
            if !current.as_ref().zip(began_on).is_some_and(|(now, then)| Arc::ptr_eq(now, then)) {
                return;
            }
        }
        // Durations count from the time Redis decided at (or before it), not from the reply:
        // a lease or a cached denial then ends no later than Redis's own boundary.
        let now = decided_from;
        let caching = self.cache_denials && !decision.is_allowed() && cost > 0;
        if granted == 0 && !caching {
            if decision.is_allowed() && cost > 0 {
                // A stale denial must not outlive an admission.
                if let Some(entry) = self.map.pin().get(&key) {
                    if entry.denial.until_hint() != 0 {
                        let _refilling = entry.refilling();
                        entry.denial.set(None);
                    }
                }
            }
            return;
        }
        if self.map.pin().get(&key).is_none() && !self.insert(&key, limit, now, true) {
            return;
        }
        let map = self.map.pin();
        let Some(entry) = map.get(&key) else { return };
        if !entry.holds_for(limit) {
            return;
        }
        // The entry's lock makes this the denial's one writer.
        let _refilling = entry.refilling();
        entry.denial.set(caching.then(|| Denial {
            cost,
            until: now.saturating_add(decision.retry_after_nanos()),
            remaining: decision.remaining(),
            reset_until: now.saturating_add(decision.reset_after_nanos()),
        }));
        if granted > 0 {
            let mut lasts = self.hot_within;
            if limit.kind() == AlgorithmKind::FixedWindow {
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

    /// Forgets `user_key` under `kind` (after a reset).
    pub(crate) fn forget(&self, user_key: &[u8], kind: AlgorithmKind) {
        let key = KeyRef { kind, user_key };
        let map = self.map.pin();
        let Some(entry) = map.remove(&key) else { return };
        self.recent.departed();
        let refill = entry.refilling().take();
        if let Some(notify) = refill {
            notify.notify_waiters();
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
    /// The entry whose refill this is (still that key's entry, or one that left the table).
    refilling: Arc<Entry>,
}

impl Drop for RefillGuard {
    fn drop(&mut self) {
        if let Some(notify) = self.refilling.refilling().take() {
            notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kova::{Clock, ManualClock, Quota};

    use super::*;

    /// A lease goes only into the entry its refill began on: when the key was forgotten (a
    /// reset) while the refill was in flight, the units Redis granted may count against state
    /// the reset deleted, so they are not kept, even in the entry a later check made meanwhile.
    #[test]
    fn a_lease_whose_key_was_forgotten_meanwhile_is_not_kept() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::starting_at(1_000_000_000));
        let local = Local::new(
            100,
            false,
            Some(Leasing::new(5, Duration::from_secs(10))),
            LocalClock::new(Some(&clock)),
        );
        let limit = RedisLimit::gcra(Quota::per_minute(100).unwrap()).unwrap();
        let key = b"k".as_slice();
        // A first check makes the entry, a second finds the key hot and refills.
        assert!(matches!(local.before(key, &limit, 1), Before::Plain));
        let Before::Refill { guard, .. } = local.before(key, &limit, 1) else { panic!("a refill") };
        // A reset forgets the key; a check makes a new entry before the refill's answer.
        local.forget(key, limit.kind());
        assert!(matches!(local.before(key, &limit, 1), Before::Plain));
        local.after(key, &limit, 1, &Decision::allowed(100, 94, 0), 5, Some(&guard), clock.now_nanos());
        assert_eq!(local.answer(key, &limit, 1), None, "a lease counted before the reset was kept");
        // A refill that began on the entry it answers keeps its lease.
        drop(guard);
        let Before::Refill { guard, .. } = local.before(key, &limit, 1) else { panic!("a refill") };
        local.after(key, &limit, 1, &Decision::allowed(100, 94, 0), 5, Some(&guard), clock.now_nanos());
        assert!(local.answer(key, &limit, 1).is_some_and(|d| d.is_allowed()));
    }

    /// A fixed window's lease ends with the window Redis decided in, counted from the time Redis
    /// decided at, not from when its reply came: a late reply must not carry a lease into the
    /// next window, whose limit Redis grants whole again.
    #[test]
    fn a_lease_ends_with_the_window_redis_decided_in_however_late_the_reply() {
        let manual = ManualClock::starting_at(1_000_000_000);
        let clock: Arc<dyn Clock> = Arc::new(manual.clone());
        let local = Local::new(
            100,
            false,
            Some(Leasing::new(5, Duration::from_secs(10))),
            LocalClock::new(Some(&clock)),
        );
        let limit = RedisLimit::fixed_window(Quota::per_second(100).unwrap()).unwrap();
        let key = b"k".as_slice();
        assert!(matches!(local.before(key, &limit, 1), Before::Plain));
        let Before::Refill { guard, .. } = local.before(key, &limit, 1) else { panic!("a refill") };
        // Redis decided 1 ms before its window's end; the reply comes 5 ms later.
        let decided = manual.now_nanos();
        manual.advance(Duration::from_millis(5));
        local.after(key, &limit, 1, &Decision::allowed(100, 94, 1_000_000), 5, Some(&guard), decided);
        assert_eq!(local.answer(key, &limit, 1), None, "a lease outlived the window Redis granted it in");
    }
}
