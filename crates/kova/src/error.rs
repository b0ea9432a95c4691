//! Errors of a check (as distinct from a denial).

use std::fmt;

/// A check that could not be answered with a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckError {
    /// The cost is larger than the limiter can ever admit at once: waiting would not help, so
    /// this is an error rather than a denial.
    CostExceedsCapacity {
        /// The cost asked for.
        cost: u64,
        /// The most the limiter admits at once.
        capacity: u64,
    },
    /// The state cell was made by an algorithm of another kind (an [`AnyCell`](crate::cell::AnyCell)
    /// of a sliding log handed to a single-word algorithm, or the reverse): it was not read.
    CellMismatch {
        /// The algorithm the cell was handed to.
        algorithm: &'static str,
    },
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CheckError::CostExceedsCapacity { cost, capacity } => write!(
                f,
                "cost {cost} exceeds the limiter's capacity of {capacity}: it can never be admitted"
            ),
            CheckError::CellMismatch { algorithm } => {
                write!(f, "the state cell was made by another kind of algorithm than {algorithm}")
            }
        }
    }
}

impl std::error::Error for CheckError {}
