//! What a full table does with a new key.

/// What a keyed table does with a key it does not hold when the key's shard is full and the
/// insert found no idle key to reclaim (nor any line free of a pending grace period).
///
/// Every decision a policy makes carries a [`Fallback`](crate::Fallback), so the caller can tell
/// it from a measurement of the client's usage.
///
/// "Actively limited" below means: a check of one unit at this instant would be denied
/// (`remaining() == 0`). Such a key is never evicted by any policy: evicting it would reset a
/// client that is being limited right now, which is exactly what a flood of new keys would try
/// to provoke.
///
/// ```
/// use kova::{Decision, Fallback, Gcra, KeyedBuilder, ManualClock, Quota, TableFullPolicy};
/// let limiter = KeyedBuilder::<u32, Gcra, _>::new(Quota::per_second(1)?, ManualClock::new())
///     .shards(1)
///     .max_keys(2)
///     .table_full(TableFullPolicy::DenyNew)
///     .doorkeeper(0) // every key's first check inserts it
///     .build()?;
/// assert!(limiter.check(&1).is_allowed());
/// assert!(limiter.check(&2).is_allowed());
/// let third = limiter.check(&3);
/// assert!(!third.is_allowed());
/// assert_eq!(third.fallback(), Some(Fallback::TableFullDenied));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TableFullPolicy {
    /// Fail closed: deny the new key ([`Fallback::TableFullDenied`](crate::Fallback::TableFullDenied)).
    /// Its `retry_after` is the time until the sampled key closest to idle becomes idle (a hint:
    /// another new key may take that room first). Nothing is inserted.
    DenyNew,
    /// Fail open: allow the new key without tracking it
    /// ([`Fallback::TableFullUntracked`](crate::Fallback::TableFullUntracked)): the decision is
    /// what a fresh key would get, and nothing is recorded, so the same key is allowed again
    /// until it finds room. Choose it where availability matters more than the limit.
    AllowUntracked,
    /// The default: evict the key closest to idle (the least time until its state is fresh
    /// again) among the entries the insert sampled (the next
    /// [`reclaim_scan`](crate::KeyedBuilder::reclaim_scan) entries of the shard's sweep
    /// cursor), and insert the new key in its place; its decision is a normal one (no fallback).
    /// Actively limited keys are never chosen: when every sampled key is actively limited, the
    /// new key is denied as under [`DenyNew`](Self::DenyNew), with
    /// [`Fallback::TableFullDenied`](crate::Fallback::TableFullDenied).
    ///
    /// The evicted key forgets what it consumed: when it returns it starts fresh. That is the
    /// price of admitting new clients into a full table; the sample favours keys that had
    /// nearly refilled anyway.
    #[default]
    EvictClosestToIdle,
}
