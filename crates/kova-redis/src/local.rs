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
use entry::{Entry, Now, Refill};
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

    /// The key's entry: the one in the table, or a fresh one if there is room, purging stale
    /// entries first when the table is full (at most once per [`PURGE_INTERVAL`] unless
    /// `force`). `None`: no room.
    ///
    /// Never replaces an entry: a check that found the key absent may insert after another
    /// made its entry and a refill leased into it, and replacing it would drop units Redis
    /// granted.
    fn insert(&self, key: &KeyRef<'_>, limit: &RedisLimit, now: u64, force: bool) -> Option<Arc<Entry>> {
        let map = self.map.pin();
        if let Some(entry) = map.get(key) {
            return Some(Arc::clone(entry));
        }
        if map.len() >= self.max_keys {
            // Relaxed: the purge time only spaces purges out; two racing purges are harmless.
            let last = self.last_purge.load(Ordering::Relaxed);
            if !force && last != 0 && now.saturating_sub(last) < PURGE_INTERVAL {
                return None;
            }
            self.last_purge.store(now.max(1), Ordering::Relaxed);
            let hot_within = self.hot_within;
            map.retain(|_, e| !e.is_stale(now, hot_within));
            self.recent.departed();
            if map.len() >= self.max_keys {
                return None;
            }
        }
        // Another check may have inserted the key since the lookup above: keep its entry.
        let entry = map.get_or_insert_with(key.into_owned(), || Arc::new(Entry::new(*limit, now)));
        Some(Arc::clone(entry))
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
                // The same key checked against a limit that Redis sees otherwise: start over for
                // it. Only an entry that does not hold for this limit is removed: one that
                // another check of this limit made meanwhile is kept, with its lease.
                if map.remove_if(&key, |_, entry| !entry.holds_for(limit)).is_ok_and(|r| r.is_some()) {
                    self.recent.departed();
                }
                drop(map);
                self.insert(&key, limit, now.value(), false);
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
        if let Some(refill) = &*refilling {
            let mut notified = Box::pin(refill.notify.clone().notified_owned());
            // Registered before the lock is released: the refill's notify_waiters, which runs
            // under the same lock after its lease or the units it gives back, cannot be missed.
            notified.as_mut().enable();
            return Before::Wait(notified);
        }
        // What the lease has left (fewer units than this check costs, or none it may still
        // spend) waits for Redis's answer: a new lease supersedes it, else the refill's end
        // gives it back ([`Refill`]).
        let taken = entry.take_lease();
        *refilling = Some(Refill { notify: Arc::new(Notify::new()), taken });
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
        // Durations count from the time Redis decided at (or before it), not from the reply:
        // a lease or a cached denial then ends no later than Redis's own boundary.
        let now = decided_from;
        let caching = self.cache_denials && !decision.is_allowed() && cost > 0;
        let denial = caching.then(|| Denial {
            cost,
            until: now.saturating_add(decision.retry_after_nanos()),
            remaining: decision.remaining(),
            reset_until: now.saturating_add(decision.reset_after_nanos()),
        });
        if granted > 0 {
            // Only a refill asks for units to lease.
            let Some(guard) = refill else { return };
            self.store_lease(&key, limit, decision, granted, denial, &guard.refilling, now);
            return;
        }
        if !caching {
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
        let Some(entry) = self.insert(&key, limit, now, true) else { return };
        if !entry.holds_for(limit) {
            return;
        }
        // The entry's lock makes this the denial's one writer.
        let _refilling = entry.refilling();
        entry.denial.set(denial);
    }

    /// Stores a lease of `granted` units, which Redis granted at `now` with `decision` to the
    /// refill that began on `began_on`, and the denial to remember beside it (if any).
    #[expect(clippy::too_many_arguments, reason = "the answer's parts, each used once")]
    fn store_lease(
        &self,
        key: &KeyRef<'_>,
        limit: &RedisLimit,
        decision: &Decision,
        granted: u64,
        denial: Option<Denial>,
        began_on: &Arc<Entry>,
        now: u64,
    ) {
        // The entry's lock makes this the lease's and the denial's one writer, and orders this
        // against a reset's `forget`, which removes the entry before it takes the lock.
        let mut refilling = began_on.refilling();
        // A lease goes only into the entry its refill began on, while that is still the key's
        // entry: one forgotten meanwhile (a reset, which deletes the Redis key) may hold units
        // Redis no longer counts, so they are left unspent (stricter). An entry replaced
        // because the key was checked under another limit leaves them unspent too.
        let current = self.map.pin().get(key).is_some_and(|entry| Arc::ptr_eq(entry, began_on));
        if !current || !began_on.holds_for(limit) {
            return;
        }
        began_on.denial.set(denial);
        let mut lasts = self.hot_within;
        if limit.kind() == AlgorithmKind::FixedWindow {
            // Units of one window are spent in that window only.
            lasts = lasts.min(decision.reset_after_nanos());
        }
        began_on.lease(granted, now.saturating_add(lasts), now.saturating_add(decision.reset_after_nanos()));
        if let Some(refill) = refilling.as_mut() {
            // The new lease supersedes what the refill took from the old one.
            refill.taken = 0;
        }
    }

    /// Forgets `user_key` under `kind` (after a reset).
    pub(crate) fn forget(&self, user_key: &[u8], kind: AlgorithmKind) {
        let key = KeyRef { kind, user_key };
        let map = self.map.pin();
        let Some(entry) = map.remove(&key) else { return };
        self.recent.departed();
        // A refill in flight ends here: what it took from the lease stays unspent (the reset
        // deleted the state that counted it).
        let refill = entry.refilling().take();
        if let Some(refill) = refill {
            refill.notify.notify_waiters();
        }
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Marks one key's lease refill in flight; dropping it (after the answer, a failure, or a
/// cancelled call) ends the refill, gives back what it took from the lease unless a new lease
/// superseded it ([`Refill`]), and wakes the checks waiting for it.
pub(crate) struct RefillGuard {
    /// The entry whose refill this is (still that key's entry, or one that left the table).
    refilling: Arc<Entry>,
}

impl Drop for RefillGuard {
    fn drop(&mut self) {
        let mut refilling = self.refilling.refilling();
        // None: a reset forgot the entry, and ended the refill.
        if let Some(refill) = refilling.take() {
            // Under the lock, before the wake: a waiter's next look finds the units.
            self.refilling.give_back(refill.taken);
            refill.notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests;
