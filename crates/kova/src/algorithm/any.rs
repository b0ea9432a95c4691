//! Choosing an algorithm at run time, from configuration.

use std::fmt;
use std::str::FromStr;

use super::{Algorithm, FixedWindow, Gcra, LogCell, SlidingWindowCounter, SlidingWindowLog, TokenBucket};
use crate::sync::atomic::AtomicU64;
use crate::{Clock, Decision, Quota, QuotaError};

/// The five algorithms, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AlgorithmKind {
    /// [`TokenBucket`]
    TokenBucket,
    /// [`Gcra`]
    Gcra,
    /// [`FixedWindow`]
    FixedWindow,
    /// [`SlidingWindowCounter`]
    SlidingWindowCounter,
    /// [`SlidingWindowLog`]
    SlidingWindowLog,
}

impl AlgorithmKind {
    /// All five, in a fixed order.
    pub const ALL: [AlgorithmKind; 5] = [
        AlgorithmKind::TokenBucket,
        AlgorithmKind::Gcra,
        AlgorithmKind::FixedWindow,
        AlgorithmKind::SlidingWindowCounter,
        AlgorithmKind::SlidingWindowLog,
    ];

    /// The name used in configuration and reports (`"token_bucket"`, `"gcra"`, `"fixed_window"`,
    /// `"sliding_window_counter"`, `"sliding_window_log"`).
    pub fn as_str(self) -> &'static str {
        match self {
            AlgorithmKind::TokenBucket => "token_bucket",
            AlgorithmKind::Gcra => "gcra",
            AlgorithmKind::FixedWindow => "fixed_window",
            AlgorithmKind::SlidingWindowCounter => "sliding_window_counter",
            AlgorithmKind::SlidingWindowLog => "sliding_window_log",
        }
    }
}

impl fmt::Display for AlgorithmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of the five algorithms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseAlgorithmKindError(String);

impl fmt::Display for ParseAlgorithmKindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown algorithm {:?}: expected one of token_bucket, gcra, fixed_window, \
             sliding_window_counter, sliding_window_log",
            self.0
        )
    }
}

impl std::error::Error for ParseAlgorithmKindError {}

impl FromStr for AlgorithmKind {
    type Err = ParseAlgorithmKindError;

    /// ```
    /// let kind: kova::AlgorithmKind = "gcra".parse()?;
    /// assert_eq!(kind, kova::AlgorithmKind::Gcra);
    /// assert!("leaky".parse::<kova::AlgorithmKind>().is_err());
    /// # Ok::<(), kova::ParseAlgorithmKindError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let normalized = s.trim().to_ascii_lowercase().replace('-', "_");
        AlgorithmKind::ALL
            .into_iter()
            .find(|k| k.as_str() == normalized)
            .ok_or_else(|| ParseAlgorithmKindError(s.to_owned()))
    }
}

/// Any of the five algorithms, chosen at run time.
///
/// ```
/// use kova::{AlgorithmKind, AnyAlgorithm, Quota, RateLimiter};
/// let algorithm = AnyAlgorithm::new("sliding_window_counter".parse()?, Quota::per_minute(100)?)?;
/// let limiter = RateLimiter::from_algorithm(algorithm);
/// assert!(limiter.check().is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyAlgorithm {
    /// [`TokenBucket`]
    TokenBucket(TokenBucket),
    /// [`Gcra`]
    Gcra(Gcra),
    /// [`FixedWindow`]
    FixedWindow(FixedWindow),
    /// [`SlidingWindowCounter`]
    SlidingWindowCounter(SlidingWindowCounter),
    /// [`SlidingWindowLog`]
    SlidingWindowLog(SlidingWindowLog),
}

/// The per-key state of an [`AnyAlgorithm`].
///
/// A cell must be used with an algorithm of the kind that made it (limiters and tables always
/// do). Passing a sliding log's cell to a single-word algorithm, or the reverse, panics: it is a
/// programming error, not an input.
#[derive(Debug)]
pub enum AnyCell {
    /// The single-word algorithms.
    Word(AtomicU64),
    /// The sliding log.
    Log(LogCell),
}

macro_rules! dispatch {
    ($self:expr, $alg:ident => $body:expr) => {
        match $self {
            AnyAlgorithm::TokenBucket($alg) => $body,
            AnyAlgorithm::Gcra($alg) => $body,
            AnyAlgorithm::FixedWindow($alg) => $body,
            AnyAlgorithm::SlidingWindowCounter($alg) => $body,
            AnyAlgorithm::SlidingWindowLog($alg) => $body,
        }
    };
}

impl AnyAlgorithm {
    /// Builds the algorithm `kind` for `quota`.
    pub fn new(kind: AlgorithmKind, quota: Quota) -> Result<Self, QuotaError> {
        Ok(match kind {
            AlgorithmKind::TokenBucket => AnyAlgorithm::TokenBucket(Algorithm::from_quota(quota)?),
            AlgorithmKind::Gcra => AnyAlgorithm::Gcra(Algorithm::from_quota(quota)?),
            AlgorithmKind::FixedWindow => AnyAlgorithm::FixedWindow(Algorithm::from_quota(quota)?),
            AlgorithmKind::SlidingWindowCounter => {
                AnyAlgorithm::SlidingWindowCounter(Algorithm::from_quota(quota)?)
            }
            AlgorithmKind::SlidingWindowLog => AnyAlgorithm::SlidingWindowLog(Algorithm::from_quota(quota)?),
        })
    }

    /// Which algorithm this is.
    pub fn kind(&self) -> AlgorithmKind {
        match self {
            AnyAlgorithm::TokenBucket(_) => AlgorithmKind::TokenBucket,
            AnyAlgorithm::Gcra(_) => AlgorithmKind::Gcra,
            AnyAlgorithm::FixedWindow(_) => AlgorithmKind::FixedWindow,
            AnyAlgorithm::SlidingWindowCounter(_) => AlgorithmKind::SlidingWindowCounter,
            AnyAlgorithm::SlidingWindowLog(_) => AlgorithmKind::SlidingWindowLog,
        }
    }
}

fn word_of(cell: &AnyCell) -> &AtomicU64 {
    match cell {
        AnyCell::Word(word) => word,
        AnyCell::Log(_) => unreachable!("an AnyCell is only used with the AnyAlgorithm that made it"),
    }
}

fn log_of(cell: &AnyCell) -> &LogCell {
    match cell {
        AnyCell::Log(log) => log,
        AnyCell::Word(_) => unreachable!("an AnyCell is only used with the AnyAlgorithm that made it"),
    }
}

macro_rules! cell_dispatch {
    ($self:expr, $cell:expr, $alg:ident, $c:ident => $body:expr) => {
        match $self {
            AnyAlgorithm::TokenBucket($alg) => {
                let $c = word_of($cell);
                $body
            }
            AnyAlgorithm::Gcra($alg) => {
                let $c = word_of($cell);
                $body
            }
            AnyAlgorithm::FixedWindow($alg) => {
                let $c = word_of($cell);
                $body
            }
            AnyAlgorithm::SlidingWindowCounter($alg) => {
                let $c = word_of($cell);
                $body
            }
            AnyAlgorithm::SlidingWindowLog($alg) => {
                let $c = log_of($cell);
                $body
            }
        }
    };
}

impl Algorithm for AnyAlgorithm {
    type Cell = AnyCell;

    fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// Builds a [`Gcra`], the default algorithm.
    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        AnyAlgorithm::new(AlgorithmKind::Gcra, quota)
    }

    fn quota(&self) -> Quota {
        dispatch!(self, a => a.quota())
    }

    /// The same kind for `quota`.
    fn with_quota(&self, quota: Quota) -> Result<Self, QuotaError> {
        AnyAlgorithm::new(self.kind(), quota)
    }

    fn capacity(&self) -> u64 {
        dispatch!(self, a => a.capacity())
    }

    fn new_cell(&self) -> AnyCell {
        match self {
            AnyAlgorithm::SlidingWindowLog(a) => AnyCell::Log(a.new_cell()),
            other => AnyCell::Word(dispatch!(other, a => a.new_cell_word())),
        }
    }

    fn decide_cell<C: Clock + ?Sized>(&self, cell: &AnyCell, clock: &C, cost: u64) -> Decision {
        cell_dispatch!(self, cell, a, c => a.decide_cell(c, clock, cost))
    }

    fn refund_cell<C: Clock + ?Sized>(&self, cell: &AnyCell, clock: &C, cost: u64) -> bool {
        cell_dispatch!(self, cell, a, c => a.refund_cell(c, clock, cost))
    }

    fn reset_cell(&self, cell: &AnyCell) {
        cell_dispatch!(self, cell, a, c => a.reset_cell(c))
    }

    fn is_idle(&self, cell: &AnyCell, now: u64) -> bool {
        cell_dispatch!(self, cell, a, c => a.is_idle(c, now))
    }

    fn cell_bytes(&self) -> usize {
        std::mem::size_of::<AnyCell>() + dispatch!(self, a => a.cell_bytes())
            - match self {
                AnyAlgorithm::SlidingWindowLog(_) => std::mem::size_of::<LogCell>(),
                _ => std::mem::size_of::<AtomicU64>(),
            }
    }
}

/// `new_cell` as an `AtomicU64` for the word algorithms (and unreachable for the log, which
/// `new_cell` handles first).
trait NewWord {
    fn new_cell_word(&self) -> AtomicU64;
}

impl<W: super::WordAlgorithm> NewWord for W {
    fn new_cell_word(&self) -> AtomicU64 {
        AtomicU64::new(self.fresh_word())
    }
}

impl NewWord for SlidingWindowLog {
    fn new_cell_word(&self) -> AtomicU64 {
        unreachable!("the sliding log has no single-word cell")
    }
}
