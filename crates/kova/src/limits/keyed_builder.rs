//! `KeyedLimitsBuilder`: the bounds of a [`KeyedLimits`] table.

use std::fmt;
use std::hash::Hash;

use super::composite::Composite;
use super::{KeyedLimits, LimitsError};
use crate::clock::BuilderClock;
use crate::keyed::{KeyedBuilder, TableFullPolicy};
use crate::{Clock, CoarseClock, Gcra, WordAlgorithm};

/// The builder of the table a [`KeyedLimits`] keeps its keys' limits in.
type TableBuilder<K, W, C> = KeyedBuilder<K, Composite<W>, C>;

/// Options of a [`KeyedLimits`] table ([`KeyedLimits::builder`]): the bounds a [`Keyed`]
/// table's [`KeyedBuilder`] sets, with the same defaults and ranges. The table has no
/// doorkeeper (a first check admitted at the door would answer for one limit, not all).
///
/// [`Keyed`]: crate::Keyed
pub struct KeyedLimitsBuilder<K, W: WordAlgorithm = Gcra, C: Clock = CoarseClock> {
    /// How many limits and the table's builder, or why the quotas make no composite.
    table: Result<(usize, TableBuilder<K, W, C>), LimitsError>,
}

impl<K, W: WordAlgorithm, C: Clock> fmt::Debug for KeyedLimitsBuilder<K, W, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.table {
            Ok((_, table)) => table.fmt(f),
            Err(error) => f.debug_tuple("KeyedLimitsBuilder").field(error).finish(),
        }
    }
}

impl<K, W: WordAlgorithm, C: Clock> KeyedLimitsBuilder<K, W, C> {
    pub(super) fn new(composite: Result<Composite<W>, LimitsError>, clock: BuilderClock<C>) -> Self {
        let table = composite
            .map(|composite| (composite.len(), KeyedBuilder::from_algorithm(composite, clock).doorkeeper(0)));
        KeyedLimitsBuilder { table }
    }

    /// Sets an option of the table's builder.
    fn with(
        self,
        set: impl FnOnce(KeyedBuilder<K, Composite<W>, C>) -> KeyedBuilder<K, Composite<W>, C>,
    ) -> Self {
        KeyedLimitsBuilder { table: self.table.map(|(len, table)| (len, set(table))) }
    }

    /// The clock the limits read (the coarse clock by default): a
    /// [`ManualClock`](crate::ManualClock) for simulated time.
    pub fn clock<C2: Clock>(self, clock: C2) -> KeyedLimitsBuilder<K, W, C2> {
        KeyedLimitsBuilder { table: self.table.map(|(len, table)| (len, table.clock(clock))) }
    }

    /// The most keys held ([`KeyedBuilder::max_keys`]).
    pub fn max_keys(self, max_keys: usize) -> Self {
        self.with(|table| table.max_keys(max_keys))
    }

    /// The number of shards ([`KeyedBuilder::shards`]).
    pub fn shards(self, shards: usize) -> Self {
        self.with(|table| table.shards(shards))
    }

    /// What a new key gets when the table is full ([`KeyedBuilder::table_full`]); the policy's
    /// decision stands for every limit of the answer, each in its own numbers (untracked: what a
    /// fresh state of that limit answers; denied: nothing left of its capacity).
    /// [`TableFullPolicy::Sketch`] is refused by [`build`](Self::build)
    /// ([`KeyedError::SketchAlgorithm`](crate::keyed::KeyedError::SketchAlgorithm)): the sketch
    /// holds one GCRA state per key, not several limits.
    pub fn table_full(self, policy: TableFullPolicy) -> Self {
        self.with(|table| table.table_full(policy))
    }

    /// Entries an insert into a full shard examines ([`KeyedBuilder::reclaim_scan`]).
    pub fn reclaim_scan(self, entries: usize) -> Self {
        self.with(|table| table.reclaim_scan(entries))
    }
}

impl<K: Hash + Eq + Clone, W: WordAlgorithm, C: Clock> KeyedLimitsBuilder<K, W, C> {
    /// Builds the limits: an error for quotas that make no composite, or an option out of its
    /// range ([`LimitsError::Table`]).
    ///
    /// ```
    /// use kova::keyed::KeyedError;
    /// use kova::limits::{KeyedLimits, LimitsError};
    /// use kova::{Gcra, Quota};
    /// let none = KeyedLimits::<u64, Gcra>::builder([Quota::per_second(1)?]).max_keys(0).build();
    /// assert!(matches!(none, Err(LimitsError::Table(KeyedError::MaxKeys { max_keys: 0, .. }))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<KeyedLimits<K, W, C>, LimitsError> {
        let (len, table) = self.table?;
        Ok(KeyedLimits::from_table(table.build().map_err(LimitsError::Table)?, len))
    }
}
