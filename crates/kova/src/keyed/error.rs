//! The keyed table's errors: an option out of its range, and a check that carries its own quota.

use std::fmt;

use crate::sketch::SketchError;
use crate::{CheckError, QuotaError};

/// Why a [`KeyedBuilder`](crate::keyed::KeyedBuilder) built no table, or
/// [`Keyed::check_n_with_quota`](crate::Keyed::check_n_with_quota) gave no decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedError {
    /// The quota passed with the check cannot be used: the algorithm cannot represent it, or the
    /// table already holds its maximum of distinct quotas.
    Quota(QuotaError),
    /// The cost exceeds what the key's quota can ever admit at once.
    Check(CheckError),
    /// [`max_keys`](crate::keyed::KeyedBuilder::max_keys) is 0 or above `max`.
    MaxKeys {
        /// The keys asked for.
        max_keys: usize,
        /// The most accepted ([`KeyedBuilder::MAX_KEYS`](crate::keyed::KeyedBuilder::MAX_KEYS)).
        max: usize,
    },
    /// [`shards`](crate::keyed::KeyedBuilder::shards) is 0 or above `max`.
    Shards {
        /// The shards asked for.
        shards: usize,
        /// The most accepted ([`KeyedBuilder::MAX_SHARDS`](crate::keyed::KeyedBuilder::MAX_SHARDS)).
        max: usize,
    },
    /// [`reclaim_scan`](crate::keyed::KeyedBuilder::reclaim_scan) is 0 or above `max`.
    ReclaimScan {
        /// The entries asked for.
        entries: usize,
        /// The most accepted
        /// ([`KeyedBuilder::MAX_RECLAIM_SCAN`](crate::keyed::KeyedBuilder::MAX_RECLAIM_SCAN)).
        max: usize,
    },
    /// [`doorkeeper`](crate::keyed::KeyedBuilder::doorkeeper) asks for more than `max` words.
    Doorkeeper {
        /// The words asked for.
        words: usize,
        /// The most accepted
        /// ([`KeyedBuilder::MAX_DOOR_WORDS`](crate::keyed::KeyedBuilder::MAX_DOOR_WORDS)).
        max: usize,
    },
    /// [`max_quotas`](crate::keyed::KeyedBuilder::max_quotas) is 0 or more than `max`.
    MaxQuotas {
        /// The quotas asked for.
        quotas: usize,
        /// The most accepted ([`KeyedBuilder::MAX_QUOTAS`](crate::keyed::KeyedBuilder::MAX_QUOTAS)).
        max: usize,
    },
    /// The sketch of [`TableFullPolicy::Sketch`](crate::keyed::TableFullPolicy::Sketch) cannot be built:
    /// its [`sketch_memory_bytes`](crate::keyed::KeyedBuilder::sketch_memory_bytes).
    Sketch(SketchError),
    /// [`TableFullPolicy::Sketch`](crate::keyed::TableFullPolicy::Sketch) asked of a table whose
    /// algorithm is not GCRA: the sketch's bound needs GCRA's state.
    SketchAlgorithm {
        /// The table's algorithm ([`Algorithm::name`](crate::Algorithm::name)).
        algorithm: &'static str,
    },
    /// [`TableFullPolicy::Sketch`](crate::keyed::TableFullPolicy::Sketch) asked of a table with a
    /// [`doorkeeper`](crate::keyed::KeyedBuilder::doorkeeper): the door would admit a key limited by
    /// the sketch as if it were fresh.
    SketchDoorkeeper {
        /// The doorkeeper's words asked for.
        words: usize,
    },
}

impl fmt::Display for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyedError::Quota(e) => write!(f, "per-key quota rejected: {e}"),
            KeyedError::Check(e) => e.fmt(f),
            KeyedError::MaxKeys { max_keys, max } => {
                write!(f, "keyed table: max_keys {max_keys}; must be from 1 to {max}")
            }
            KeyedError::Shards { shards, max } => {
                write!(f, "keyed table: {shards} shards; must be from 1 to {max}")
            }
            KeyedError::ReclaimScan { entries, max } => {
                write!(f, "keyed table: a reclaim scan of {entries} entries; must be from 1 to {max}")
            }
            KeyedError::Doorkeeper { words, max } => {
                write!(f, "keyed table: a doorkeeper of {words} words; must be at most {max} (0 for none)")
            }
            KeyedError::MaxQuotas { quotas, max } => {
                write!(f, "keyed table: max_quotas {quotas}; must be from 1 to {max} (the default quota included)")
            }
            KeyedError::Sketch(e) => write!(f, "keyed table's table-full sketch: {e}"),
            KeyedError::SketchAlgorithm { algorithm } => write!(
                f,
                "keyed table: the table-full sketch decides GCRA only, not {algorithm} (choose another policy)"
            ),
            KeyedError::SketchDoorkeeper { words } => write!(
                f,
                "keyed table: the table-full sketch cannot have a doorkeeper ({words} words asked for; 0 for none)"
            ),
        }
    }
}

impl std::error::Error for KeyedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyedError::Quota(e) => Some(e),
            KeyedError::Check(e) => Some(e),
            KeyedError::Sketch(e) => Some(e),
            _ => None,
        }
    }
}

impl From<QuotaError> for KeyedError {
    fn from(e: QuotaError) -> Self {
        KeyedError::Quota(e)
    }
}

impl From<CheckError> for KeyedError {
    fn from(e: CheckError) -> Self {
        KeyedError::Check(e)
    }
}
