//! Keyed limiting: one limiter state per client key (IP, user, API key).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::RwLock;

use crossbeam_utils::CachePadded;

use crate::{Algorithm, CheckError, Clock, CoarseClock, Decision, Gcra, Quota, QuotaError};

/// Limits each key separately, with one quota for all keys.
///
/// First version: a power-of-two number of `CachePadded` shards, each a map behind a reader-writer
/// lock, keys hashed once with a randomly seeded ahash.
///
/// ```
/// use kova::{Gcra, Keyed, Quota};
/// let limiter = Keyed::<&str, Gcra>::new(Quota::per_second(1)?)?;
/// assert!(limiter.check(&"alice").is_allowed());
/// assert!(!limiter.check(&"alice").is_allowed());
/// assert!(limiter.check(&"bob").is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Keyed<K, A: Algorithm = Gcra, C: Clock = CoarseClock> {
    algorithm: A,
    clock: C,
    hasher: ahash::RandomState,
    shards: Box<[CachePadded<RwLock<HashMap<K, A::Cell, ahash::RandomState>>>]>,
}

impl<K, A: Algorithm, C: Clock> std::fmt::Debug for Keyed<K, A, C>
where
    A: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyed").field("algorithm", &self.algorithm).field("shards", &self.shards.len()).finish()
    }
}

fn default_shards() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores * 4).next_power_of_two()
}

impl<K: Hash + Eq + Clone, A: Algorithm> Keyed<K, A, CoarseClock> {
    /// A keyed limiter for `quota` on the coarse clock.
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Self::with_clock(quota, CoarseClock::new())
    }
}

impl<K: Hash + Eq + Clone, A: Algorithm, C: Clock> Keyed<K, A, C> {
    /// A keyed limiter for `quota` reading `clock`.
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        let algorithm = A::from_quota(quota)?;
        let shards = (0..default_shards())
            .map(|_| CachePadded::new(RwLock::new(HashMap::with_hasher(ahash::RandomState::new()))))
            .collect();
        Ok(Keyed { algorithm, clock, hasher: ahash::RandomState::new(), shards })
    }

    fn shard(&self, key: &K) -> &RwLock<HashMap<K, A::Cell, ahash::RandomState>> {
        let hash = self.hasher.hash_one(key);
        &self.shards[(hash as usize) & (self.shards.len() - 1)]
    }

    /// Checks one unit for `key`.
    pub fn check(&self, key: &K) -> Decision {
        self.decide(key, 1)
    }

    /// Checks `cost` units for `key`; an error when `cost` exceeds the capacity.
    pub fn check_n(&self, key: &K, cost: u64) -> Result<Decision, CheckError> {
        let capacity = self.algorithm.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity });
        }
        Ok(self.decide(key, cost))
    }

    /// Reports `key`'s state without changing it (and without inserting it).
    pub fn peek(&self, key: &K) -> Decision {
        let shard = self.shard(key).read().unwrap_or_else(|e| e.into_inner());
        match shard.get(key) {
            Some(cell) => self.algorithm.decide_cell(cell, &self.clock, 0),
            None => self.algorithm.decide_cell(&self.algorithm.new_cell(), &self.clock, 0),
        }
    }

    /// Puts `key` back to full.
    pub fn reset(&self, key: &K) {
        self.remove(key);
    }

    /// Forgets `key`; returns whether it was present.
    pub fn remove(&self, key: &K) -> bool {
        self.shard(key).write().unwrap_or_else(|e| e.into_inner()).remove(key).is_some()
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().unwrap_or_else(|e| e.into_inner()).len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn decide(&self, key: &K, cost: u64) -> Decision {
        let shard = self.shard(key);
        {
            let map = shard.read().unwrap_or_else(|e| e.into_inner());
            if let Some(cell) = map.get(key) {
                return self.algorithm.decide_cell(cell, &self.clock, cost);
            }
        }
        let mut map = shard.write().unwrap_or_else(|e| e.into_inner());
        let cell = map.entry(key.clone()).or_insert_with(|| self.algorithm.new_cell());
        self.algorithm.decide_cell(cell, &self.clock, cost)
    }
}
