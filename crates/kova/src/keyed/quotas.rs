//! Per-key quotas: each distinct quota gets a small id and one built algorithm, shared by every
//! key that has it. A line stores only the id (and only when it is not the default).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::loom::atomic::{AtomicU64, Ordering};
use crate::{Algorithm, Quota, QuotaError};

/// A quota's id in its table; 0 is the table's default quota.
pub(super) type QuotaId = u16;

/// The default quota's id.
pub(super) const DEFAULT_ID: QuotaId = 0;

/// Ids per page of built algorithms.
const PAGE: usize = 64;
/// Distinct quotas a table holds by default, the default quota included
/// ([`KeyedBuilder::max_quotas`](super::KeyedBuilder::max_quotas)).
pub(super) const DEFAULT_MAX_QUOTAS: usize = 1 << 12;
/// The most distinct quotas a table can hold, the default included: every id of a [`QuotaId`].
pub(super) const MAX_QUOTAS: usize = 1 << 16;

/// A page of built algorithms, each set once.
type Page<A> = Box<[OnceLock<A>]>;

/// The table's algorithms by quota id.
pub(super) struct Quotas<A> {
    default: A,
    /// Page `p` holds ids `1 + p * PAGE ..`; pages and their entries are set once, under `ids`.
    pages: Box<[OnceLock<Page<A>>]>,
    /// Distinct quotas it holds at most, the default included.
    max: usize,
    ids: Mutex<HashMap<Quota, QuotaId>>,
    /// Quotas from the quota function that could not be used (invalid, or too many).
    rejected: AtomicU64,
}

impl<A: Algorithm> Quotas<A> {
    /// Quotas of `default` and at most `max - 1` others (`max` from 1 to [`MAX_QUOTAS`]).
    pub(super) fn new(default: A, max: usize) -> Self {
        debug_assert!((1..=MAX_QUOTAS).contains(&max), "{max} quotas");
        let pages = (0..(max - 1).div_ceil(PAGE)).map(|_| OnceLock::new()).collect();
        Quotas { default, pages, max, ids: Mutex::new(HashMap::new()), rejected: AtomicU64::new(0) }
    }

    /// The same, holding at most `max` distinct quotas (before any is interned).
    pub(super) fn with_max(self, max: usize) -> Self {
        debug_assert!(self.pages.iter().all(|page| page.get().is_none()), "quotas interned already");
        Quotas::new(self.default, max)
    }

    pub(super) fn default_algorithm(&self) -> &A {
        &self.default
    }

    /// The algorithm of quota `id` (the default for an id this table never handed out).
    #[inline]
    #[expect(clippy::indexing_slicing, reason = "i % PAGE is below PAGE, each page's length")]
    pub(super) fn get(&self, id: QuotaId) -> &A {
        if id == DEFAULT_ID {
            return &self.default;
        }
        let i = usize::from(id) - 1;
        self.pages
            .get(i / PAGE)
            .and_then(OnceLock::get)
            .and_then(|page| page[i % PAGE].get())
            .unwrap_or(&self.default)
    }

    /// The id of `quota`, building its algorithm the first time: an error when the algorithm
    /// cannot represent it, or when the table already holds its most distinct quotas.
    #[expect(
        clippy::indexing_slicing,
        reason = "next < max, checked above, so i / PAGE is below pages.len() and i % PAGE below PAGE"
    )]
    pub(super) fn intern(&self, quota: Quota) -> Result<QuotaId, QuotaError> {
        if quota == self.default.quota() {
            return Ok(DEFAULT_ID);
        }
        // A panic while holding this lock leaves the map and pages consistent (the map is
        // written last), so a poisoned lock is still usable.
        let mut ids = self.ids.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&id) = ids.get(&quota) {
            return Ok(id);
        }
        let next = ids.len() + 1;
        if next >= self.max {
            return Err(QuotaError::Unrepresentable {
                algorithm: self.default.name(),
                field: "distinct per-key quotas",
                value: next as u64 + 1,
                max: self.max as u64,
            });
        }
        let algorithm = self.default.with_quota(quota)?;
        let i = next - 1;
        let page = self.pages[i / PAGE].get_or_init(|| (0..PAGE).map(|_| OnceLock::new()).collect());
        if page[i % PAGE].set(algorithm).is_err() {
            // Unreachable: ids are handed out once, under the lock. Refuse rather than alias.
            return Err(QuotaError::Unrepresentable {
                algorithm: self.default.name(),
                field: "distinct per-key quotas",
                value: next as u64,
                max: next as u64 - 1,
            });
        }
        let id = next as QuotaId;
        ids.insert(quota, id);
        Ok(id)
    }

    /// The id for a quota from the quota function (`None`: the default), or `None` when the
    /// table cannot use it (counted).
    pub(super) fn intern_from_fn(&self, quota: Option<Quota>) -> Option<QuotaId> {
        match quota.map(|q| self.intern(q)) {
            None => Some(DEFAULT_ID),
            Some(Ok(id)) => Some(id),
            Some(Err(_)) => {
                // Relaxed: a statistic.
                self.rejected.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    pub(super) fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// The most [`bytes`](Self::bytes) reports, whatever quotas arrive: every page built and the
    /// id map at the most room it takes for `max - 1` entries (its capacity at most doubles past
    /// what it holds, and starts at 3).
    pub(super) fn bound_bytes(&self) -> usize {
        let map = 2 * (self.max - 1) + 3;
        std::mem::size_of_val(&*self.pages)
            + self.pages.len() * PAGE * std::mem::size_of::<OnceLock<A>>()
            + map * (std::mem::size_of::<(Quota, QuotaId)>() + 1)
    }

    /// Bytes held: the page directory, the pages built and the id map's entries (estimated
    /// from its capacity).
    pub(super) fn bytes(&self) -> usize {
        let pages = self.pages.iter().filter(|p| p.get().is_some()).count();
        let map = self.ids.lock().map_or(0, |ids| ids.capacity());
        std::mem::size_of_val(&*self.pages)
            + pages * PAGE * std::mem::size_of::<OnceLock<A>>()
            + map * (std::mem::size_of::<(Quota, QuotaId)>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlgorithmKind, AnyAlgorithm, Gcra};

    #[test]
    fn ids_are_stable_and_the_default_is_zero() {
        let quotas = Quotas::new(
            <Gcra as Algorithm>::from_quota(Quota::per_second(10).unwrap()).unwrap(),
            DEFAULT_MAX_QUOTAS,
        );
        assert_eq!(quotas.intern(Quota::per_second(10).unwrap()), Ok(DEFAULT_ID));
        let a = quotas.intern(Quota::per_second(20).unwrap()).unwrap();
        let b = quotas.intern(Quota::per_minute(20).unwrap()).unwrap();
        assert_ne!(a, b);
        assert_eq!(quotas.intern(Quota::per_second(20).unwrap()), Ok(a));
        assert_eq!(quotas.get(a).quota(), Quota::per_second(20).unwrap());
        assert_eq!(quotas.get(b).quota(), Quota::per_minute(20).unwrap());
        assert_eq!(quotas.get(999).quota(), Quota::per_second(10).unwrap());
    }

    #[test]
    fn invalid_quotas_are_errors_and_count_as_rejected() {
        let window = AnyAlgorithm::new(AlgorithmKind::FixedWindow, Quota::per_second(10).unwrap()).unwrap();
        let quotas = Quotas::new(window, DEFAULT_MAX_QUOTAS);
        let bursty = Quota::per_second(5).unwrap().with_burst(9).unwrap();
        assert_eq!(quotas.intern(bursty), Err(QuotaError::BurstUnsupported { algorithm: "fixed_window" }));
        assert_eq!(quotas.intern_from_fn(Some(bursty)), None);
        assert_eq!(quotas.rejected(), 1);
        assert_eq!(quotas.intern_from_fn(None), Some(DEFAULT_ID));
    }

    #[test]
    fn any_algorithm_keeps_its_kind() {
        let log = AnyAlgorithm::new(AlgorithmKind::SlidingWindowLog, Quota::per_second(3).unwrap()).unwrap();
        let built = log.with_quota(Quota::per_second(7).unwrap()).unwrap();
        assert_eq!(built.kind(), AlgorithmKind::SlidingWindowLog);
        assert_eq!(built.capacity(), 7);
    }

    #[test]
    fn the_table_refuses_more_than_its_most_quotas() {
        // The default most, and the most ids there are (fewer under Miri: every intern builds).
        let most = if cfg!(miri) { [1, 2, 70] } else { [1, DEFAULT_MAX_QUOTAS, MAX_QUOTAS] };
        for max in most {
            let quotas =
                Quotas::new(<Gcra as Algorithm>::from_quota(Quota::per_hour(1).unwrap()).unwrap(), max);
            for n in 2..=max as u64 {
                let id = quotas.intern(Quota::per_hour(n).unwrap()).unwrap();
                assert_eq!(quotas.get(id).quota(), Quota::per_hour(n).unwrap());
            }
            assert_eq!(
                quotas.intern(Quota::per_hour(1_000_000).unwrap()),
                Err(QuotaError::Unrepresentable {
                    algorithm: "gcra",
                    field: "distinct per-key quotas",
                    value: max as u64 + 1,
                    max: max as u64,
                })
            );
        }
    }
}
