//! Choosing an algorithm at run time, from configuration.

use std::fmt;
use std::str::FromStr;

use super::{
    sealed, Algorithm, CellStorage, FixedWindow, Gcra, GiveBack, LogCell, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};
use crate::loom::atomic::AtomicU64;
use crate::{CheckError, Clock, Decision, Quota, QuotaError};

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
/// use kova::{AlgorithmKind, AnyAlgorithm, CoarseClock, Quota, RateLimiter};
/// let algorithm = AnyAlgorithm::new("sliding_window_counter".parse()?, Quota::per_minute(100)?)?;
/// let limiter = RateLimiter::from_algorithm(algorithm, CoarseClock::new());
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

/// The per-key state of an [`AnyAlgorithm`]: one word for the single-word algorithms, the
/// sliding log's ring for the log.
///
/// A cell is used with an algorithm of the kind that made it (limiters and tables always do:
/// a quota change keeps the algorithm). Handed to an algorithm of the other shape (a word's
/// cell to the sliding log, or the log's to a word algorithm), it is never misread:
/// [`Algorithm::check_cell`] returns [`CheckError::CellMismatch`], [`Algorithm::decide_cell`]
/// denies (fail closed), and nothing is changed. A word made by one word algorithm and handed to
/// another (a GCRA cell to a fixed window) is not told apart: it is read as that algorithm's
/// word, as a plain `AtomicU64` handed to it would be.
#[derive(Debug)]
pub struct AnyCell(Shape);

/// What an [`AnyCell`] holds.
#[derive(Debug)]
enum Shape {
    Word(AtomicU64),
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

/// Runs `$body` with `$alg` the algorithm and `$c` its kind of cell; `$mismatch` when `$cell`
/// was made by the other kind.
macro_rules! cell_dispatch {
    ($self:expr, $cell:expr, $alg:ident, $c:ident => $body:expr, $mismatch:expr) => {
        match ($self, &$cell.0) {
            (AnyAlgorithm::TokenBucket($alg), Shape::Word($c)) => $body,
            (AnyAlgorithm::Gcra($alg), Shape::Word($c)) => $body,
            (AnyAlgorithm::FixedWindow($alg), Shape::Word($c)) => $body,
            (AnyAlgorithm::SlidingWindowCounter($alg), Shape::Word($c)) => $body,
            (AnyAlgorithm::SlidingWindowLog($alg), Shape::Log($c)) => $body,
            _ => $mismatch,
        }
    };
}

impl AnyAlgorithm {
    /// Whether `cell` was made by an algorithm of this one's kind of cell.
    fn fits(&self, cell: &AnyCell) -> bool {
        matches!(
            (self, &cell.0),
            (AnyAlgorithm::SlidingWindowLog(_), Shape::Log(_))
                | (
                    AnyAlgorithm::TokenBucket(_)
                        | AnyAlgorithm::Gcra(_)
                        | AnyAlgorithm::FixedWindow(_)
                        | AnyAlgorithm::SlidingWindowCounter(_),
                    Shape::Word(_)
                )
        )
    }
}

impl Algorithm for AnyAlgorithm {
    type Cell = AnyCell;
    type Storage = AnyStorage;

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
        AnyCell(match self {
            AnyAlgorithm::TokenBucket(a) => Shape::Word(a.new_cell()),
            AnyAlgorithm::Gcra(a) => Shape::Word(a.new_cell()),
            AnyAlgorithm::FixedWindow(a) => Shape::Word(a.new_cell()),
            AnyAlgorithm::SlidingWindowCounter(a) => Shape::Word(a.new_cell()),
            AnyAlgorithm::SlidingWindowLog(a) => Shape::Log(a.new_cell()),
        })
    }

    /// A cell of the other kind is denied, never read (fail closed).
    fn decide_cell<C: Clock + ?Sized>(&self, cell: &AnyCell, clock: &C, cost: u64) -> Decision {
        cell_dispatch!(self, cell, a, c => a.decide_cell(c, clock, cost), {
            Decision::denied(self.capacity(), 0, u64::MAX, 0)
        })
    }

    /// A cell of the other kind is [`CheckError::CellMismatch`].
    fn check_cell<C: Clock + ?Sized>(
        &self,
        cell: &AnyCell,
        clock: &C,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        if !self.fits(cell) {
            return Err(CheckError::CellMismatch { algorithm: self.name() });
        }
        let capacity = self.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity });
        }
        Ok(self.decide_cell(cell, clock, cost))
    }

    fn still_counted(
        &self,
        cost: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        dispatch!(self, a => a.still_counted(cost, elapsed_nanos, reset_after_nanos, give_back))
    }

    /// A cell of the other kind is not refunded.
    fn refund_cell<C: Clock + ?Sized>(&self, cell: &AnyCell, clock: &C, cost: u64) -> bool {
        cell_dispatch!(self, cell, a, c => a.refund_cell(c, clock, cost), false)
    }

    /// A cell of the other kind is charged nothing.
    fn charge_cell<C: Clock + ?Sized>(&self, cell: &AnyCell, clock: &C, cost: u64) -> u64 {
        cell_dispatch!(self, cell, a, c => a.charge_cell(c, clock, cost), 0)
    }

    /// A cell of the other kind counts as all consumed (it cannot be read).
    fn consumed_cell(&self, cell: &AnyCell, now: u64) -> u64 {
        cell_dispatch!(self, cell, a, c => a.consumed_cell(c, now), self.capacity())
    }

    /// A cell of the other kind is left as it is.
    fn reset_cell(&self, cell: &AnyCell) {
        cell_dispatch!(self, cell, a, c => a.reset_cell(c), ())
    }

    /// A cell of the other kind is never idle (nothing drops it on a misreading).
    fn is_idle(&self, cell: &AnyCell, now: u64) -> bool {
        cell_dispatch!(self, cell, a, c => a.is_idle(c, now), false)
    }

    fn cell_bytes(&self) -> usize {
        std::mem::size_of::<AnyCell>() + dispatch!(self, a => a.cell_bytes())
            - match self {
                AnyAlgorithm::SlidingWindowLog(_) => std::mem::size_of::<LogCell>(),
                _ => std::mem::size_of::<AtomicU64>(),
            }
    }
}

/// The storage of [`AnyAlgorithm`]'s cells ([`Algorithm::Storage`]): boxed, and a word kind's
/// cell decided on its word, which a keyed table can freeze.
#[derive(Debug)]
pub enum AnyStorage {}

impl sealed::Sealed for AnyStorage {}

// SAFETY: a boxed cell (every item but the two below is the default), not its own address.
unsafe impl CellStorage<AnyAlgorithm> for AnyStorage {
    /// The word algorithms' words; `None` for the log, and for a cell of the other kind.
    #[inline(always)]
    fn cell_word<'c>(algorithm: &AnyAlgorithm, cell: &'c AnyCell) -> Option<&'c AtomicU64> {
        match (algorithm, &cell.0) {
            (AnyAlgorithm::SlidingWindowLog(_), _) | (_, Shape::Log(_)) => None,
            (_, Shape::Word(word)) => Some(word),
        }
    }

    #[inline(always)]
    fn decide_word(algorithm: &AnyAlgorithm, word: u64, now: u64, cost: u64) -> Option<(Decision, u64)> {
        match algorithm {
            AnyAlgorithm::TokenBucket(a) => Some(super::WordAlgorithm::decide(a, word, now, cost)),
            AnyAlgorithm::Gcra(a) => Some(super::WordAlgorithm::decide(a, word, now, cost)),
            AnyAlgorithm::FixedWindow(a) => Some(super::WordAlgorithm::decide(a, word, now, cost)),
            AnyAlgorithm::SlidingWindowCounter(a) => Some(super::WordAlgorithm::decide(a, word, now, cost)),
            AnyAlgorithm::SlidingWindowLog(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    /// A cell handed to an algorithm of the other kind is an error or a denial, never a panic,
    /// and is left unchanged.
    #[test]
    fn a_cell_of_the_other_kind_is_refused_not_misread() {
        let clock = ManualClock::new();
        let quota = Quota::per_second(3).unwrap();
        let gcra = AnyAlgorithm::new(AlgorithmKind::Gcra, quota).unwrap();
        let log = AnyAlgorithm::new(AlgorithmKind::SlidingWindowLog, quota).unwrap();
        for (algorithm, other) in [(gcra, log), (log, gcra)] {
            let cell = other.new_cell();
            assert_eq!(
                algorithm.check_cell(&cell, &clock, 1),
                Err(CheckError::CellMismatch { algorithm: algorithm.name() })
            );
            assert!(!algorithm.decide_cell(&cell, &clock, 1).is_allowed());
            assert!(!algorithm.refund_cell(&cell, &clock, 1));
            assert!(!algorithm.is_idle(&cell, clock.now_nanos()));
            algorithm.reset_cell(&cell);
            assert!(AnyStorage::cell_word(&algorithm, &cell).is_none());
            // Untouched: the kind that made it still sees a fresh cell.
            assert_eq!(other.check_cell(&cell, &clock, 0).unwrap().remaining(), 3);
            assert!(algorithm.check_cell(&algorithm.new_cell(), &clock, 1).unwrap().is_allowed());
        }
    }
}
