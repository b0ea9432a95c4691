//! The in-memory backend: kova's keyed tables, one per algorithm (a table's per-key quotas
//! share its algorithm), every key under its rule's quota. Its [`Backend`](crate::Backend)
//! futures are ready at once: nothing in it waits.

use kova::keyed::{KeyedBuilder, KeyedError, TableFullPolicy};
use kova::{AlgorithmKind, AnyAlgorithm, Clock, CoarseClock, Decision, Keyed, Quota};

use crate::{Limited, UnixClock};

/// The sizes and policy of the in-memory tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryOptions {
    /// The most keys one algorithm's table holds (each table is bounded on its own).
    pub max_keys: usize,
    /// What a full table does with a new key; the decisions it makes carry a
    /// [`kova::Fallback`], which the service counts in `kova_rls_fallbacks_total`.
    pub table_full: TableFullPolicy,
}

impl Default for MemoryOptions {
    /// kova's defaults: [`KeyedBuilder::DEFAULT_MAX_KEYS`] keys, evicting the key closest to
    /// idle (never one being limited).
    fn default() -> Self {
        MemoryOptions {
            max_keys: KeyedBuilder::<Vec<u8>, AnyAlgorithm, CoarseClock>::DEFAULT_MAX_KEYS,
            table_full: TableFullPolicy::default(),
        }
    }
}

/// One bounded table per algorithm.
#[derive(Debug)]
pub struct MemoryBackend<C: Clock = UnixClock> {
    tables: Vec<Keyed<Vec<u8>, AnyAlgorithm, C>>,
    /// The tables' clock, read for [`Backend::now_nanos`](crate::Backend::now_nanos).
    pub(crate) clock: C,
}

impl MemoryBackend<UnixClock> {
    /// Tables on kova's coarse clock counted from the Unix epoch ([`UnixClock`]), so that
    /// fixed windows start where envoyproxy/ratelimit's do.
    ///
    /// ```
    /// let backend = kova_rls::MemoryBackend::new(kova_rls::MemoryOptions::default())?;
    /// # Ok::<(), kova::keyed::KeyedError>(())
    /// ```
    pub fn new(options: MemoryOptions) -> Result<Self, kova::keyed::KeyedError> {
        MemoryBackend::with_clock(options, UnixClock::new())
    }
}

impl<C: Clock + Clone> MemoryBackend<C> {
    /// Tables reading `clock` (a [`kova::ManualClock`] in tests).
    pub fn with_clock(options: MemoryOptions, clock: C) -> Result<Self, kova::keyed::KeyedError> {
        // A table's default quota is never used: every check carries its rule's.
        let placeholder = Quota::per_second(1)?;
        let tables = AlgorithmKind::ALL
            .into_iter()
            .map(|kind| {
                Keyed::builder_from_algorithm(AnyAlgorithm::new(kind, placeholder)?)
                    .clock(clock.clone())
                    .max_keys(options.max_keys)
                    .table_full(options.table_full)
                    // Every rule's quota, and every distinct `limit` a request's descriptors
                    // carry, is a quota of its algorithm's table for the table's life.
                    .max_quotas(KeyedBuilder::<Vec<u8>, AnyAlgorithm, C>::MAX_QUOTAS)
                    .build()
            })
            .collect::<Result<_, _>>()?;
        Ok(MemoryBackend { tables, clock })
    }
}

impl<C: Clock> MemoryBackend<C> {
    #[expect(
        clippy::indexing_slicing,
        reason = "new builds one table per AlgorithmKind::ALL, and index is a position in it (or 0)"
    )]
    fn table(&self, kind: AlgorithmKind) -> &Keyed<Vec<u8>, AnyAlgorithm, C> {
        let index = AlgorithmKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        &self.tables[index]
    }

    /// Checks `cost` units of `key` under `limit`'s quota. A key held under another quota of
    /// the same algorithm (the rule changed on reload) moves to this one keeping what it
    /// consumed; an error when `cost` exceeds what the quota can ever admit at once, or the
    /// table holds too many distinct quotas.
    pub fn check_now(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> Result<Decision, KeyedError> {
        self.table(limit.algorithm()).check_n_with_quota(key, limit.quota(), cost)
    }

    /// Gives back `cost` units an allowed check of `key` took; whether anything was given back.
    pub fn refund_now(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> bool {
        self.table(limit.algorithm()).refund(key, cost)
    }

    /// Keys held, over all tables.
    pub fn len(&self) -> usize {
        self.tables.iter().map(Keyed::len).sum()
    }

    /// Whether no table holds a key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Unit;

    /// Request descriptors may each carry a `limit` of their own (a tenant's plan, from dynamic
    /// metadata): a table keeps thousands of distinct quotas, more than a kova table's default.
    #[test]
    fn a_table_keeps_more_distinct_quotas_than_kovas_default() {
        let backend = MemoryBackend::with_clock(MemoryOptions::default(), kova::ManualClock::new())
            .expect("valid tables");
        let quotas =
            KeyedBuilder::<Vec<u8>, AnyAlgorithm, kova::ManualClock>::DEFAULT_MAX_QUOTAS as u32 + 100;
        for n in 1..=quotas {
            let limit = Limited {
                requests_per_unit: n,
                unit: Unit::Hour,
                algorithm: AlgorithmKind::FixedWindow,
                quota: Quota::per_hour(u64::from(n)).expect("valid"),
            };
            let decision = backend.check_now(&limit, &n.to_be_bytes().to_vec(), 1);
            assert!(decision.is_ok_and(|d| d.is_allowed()), "quota {n}: {decision:?}");
        }
    }
}
