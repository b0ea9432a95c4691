//! The error of a check that carries its own quota.

use std::fmt;

use crate::{CheckError, QuotaError};

/// Why [`Keyed::check_n_with_quota`](crate::Keyed::check_n_with_quota) gave no decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedError {
    /// The quota passed with the check cannot be used: the algorithm cannot represent it, or the
    /// table already holds its maximum of distinct quotas.
    Quota(QuotaError),
    /// The cost exceeds what the key's quota can ever admit at once.
    Check(CheckError),
}

impl fmt::Display for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyedError::Quota(e) => write!(f, "per-key quota rejected: {e}"),
            KeyedError::Check(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for KeyedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyedError::Quota(e) => Some(e),
            KeyedError::Check(e) => Some(e),
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
