//! Configuring a striped limiter: stripes, batch, lease, and the errors of a bad configuration.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use super::stripe::{MAX_LEASE_UNITS, MAX_UNITS, STAMP_UNIT_SHIFT};
use super::StripedLimiter;
use crate::clock::BuilderClock;
use crate::{Clock, CoarseClock, Quota, QuotaError, WordAlgorithm};

/// The most stripes a limiter may have.
pub const MAX_STRIPES: usize = 256;
/// The default lease: how long a stripe keeps units before a check or a denial gives them back.
pub const DEFAULT_LEASE: Duration = Duration::from_millis(10);
/// The largest default batch: enough to take the central word off the hot path, small enough
/// that the units parked in stripes stay a small part of most quotas.
const MAX_DEFAULT_BATCH: u64 = 1024;

/// A configuration a [`StripedLimiter`] cannot run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StripedError {
    /// The quota is not one the algorithm can represent.
    Quota(QuotaError),
    /// The stripe count is not a power of two from 1 to [`MAX_STRIPES`].
    Stripes {
        /// The count asked for.
        stripes: usize,
    },
    /// The batch is 0, above the algorithm's capacity, or above what a stripe holds (2^24 - 1).
    Batch {
        /// The batch asked for.
        batch: u64,
        /// The largest batch this limiter accepts.
        max: u64,
    },
    /// The lease is zero or longer than a stripe's stamp can time (about 208 days).
    Lease {
        /// The lease asked for.
        lease: Duration,
        /// The longest lease accepted.
        max: Duration,
    },
    /// The keyed table's [`HotKeys`](crate::keyed::HotKeys) asks for no hot slots, or more than it
    /// can mark in a line's word.
    HotSlots {
        /// The slots asked for.
        max_hot: usize,
        /// The most slots accepted.
        max: usize,
    },
    /// The keyed table's [`HotKeys::promote_after`](crate::keyed::HotKeys::promote_after) is 0: a key
    /// would be promoted before any contention.
    PromoteAfter {
        /// The failures asked for.
        failures: u32,
    },
}

impl fmt::Display for StripedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StripedError::Quota(error) => write!(f, "striped limiter: {error}"),
            StripedError::Stripes { stripes } => {
                write!(
                    f,
                    "striped limiter: {stripes} stripes; must be a power of two from 1 to {MAX_STRIPES}"
                )
            }
            StripedError::Batch { batch, max } => {
                write!(f, "striped limiter: a batch of {batch} units; must be from 1 to {max}")
            }
            StripedError::Lease { lease, max } => {
                write!(f, "striped limiter: a lease of {lease:?}; must be above zero and at most {max:?}")
            }
            StripedError::HotSlots { max_hot, max } => {
                write!(f, "keyed table: {max_hot} hot slots; must be from 1 to {max}")
            }
            StripedError::PromoteAfter { failures } => {
                write!(f, "keyed table: promoting hot keys after {failures} failed compare-exchanges; must be at least 1")
            }
        }
    }
}

impl std::error::Error for StripedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StripedError::Quota(error) => Some(error),
            _ => None,
        }
    }
}

impl From<QuotaError> for StripedError {
    fn from(error: QuotaError) -> Self {
        StripedError::Quota(error)
    }
}

/// Builds a [`StripedLimiter`]: see [`StripedLimiter::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct StripedBuilder<W, C = CoarseClock> {
    quota: Quota,
    clock: BuilderClock<C>,
    stripes: Option<usize>,
    batch: Option<u64>,
    lease: Duration,
    algorithm: PhantomData<fn() -> W>,
}

impl<W: WordAlgorithm> StripedBuilder<W> {
    pub(super) fn new(quota: Quota) -> Self {
        StripedBuilder {
            quota,
            clock: BuilderClock::coarse(),
            stripes: None,
            batch: None,
            lease: DEFAULT_LEASE,
            algorithm: PhantomData,
        }
    }
}

impl<W: WordAlgorithm, C: Clock> StripedBuilder<W, C> {
    /// The clock the limiter reads (the coarse clock by default): a
    /// [`ManualClock`](crate::ManualClock) for simulated time.
    pub fn clock<C2: Clock>(self, clock: C2) -> StripedBuilder<W, C2> {
        let StripedBuilder { quota, clock: _, stripes, batch, lease, algorithm } = self;
        StripedBuilder { quota, clock: BuilderClock::Given(clock), stripes, batch, lease, algorithm }
    }

    /// How many stripes (a power of two, at most [`MAX_STRIPES`]). By default the machine's
    /// parallelism rounded up to a power of two.
    pub fn stripes(self, stripes: usize) -> Self {
        StripedBuilder { stripes: Some(stripes), ..self }
    }

    /// How many units a stripe takes from the central word at once. By default a quarter of the
    /// capacity shared among the stripes, at most 1,024 and at least 1, so that the units stripes
    /// hold stay within a quarter of the capacity whenever it is at least four units a stripe
    /// (below that, one unit a stripe: stripes may then hold more, up to the whole capacity, and
    /// other threads are denied until those units are spent or their lease ends).
    pub fn batch(self, batch: u64) -> Self {
        StripedBuilder { batch: Some(batch), ..self }
    }

    /// How long a stripe keeps leased units before they are given back ([`DEFAULT_LEASE`] by
    /// default). Timed in steps of 65.5 us, rounded up.
    pub fn lease(self, lease: Duration) -> Self {
        StripedBuilder { lease, ..self }
    }

    /// The limiter: an error for a quota the algorithm rejects, or an option out of its range.
    pub fn build(self) -> Result<StripedLimiter<W, C>, StripedError> {
        let algorithm = W::from_quota(self.quota)?;
        let shape = StripeShape::checked(algorithm.capacity(), self.stripes, self.batch, self.lease)?;
        Ok(StripedLimiter::from_parts(
            algorithm,
            shape.stripes,
            shape.batch,
            shape.lease_units,
            self.clock.into_clock(),
        ))
    }
}

/// Stripes, batch and lease checked against an algorithm's capacity: shared by the striped
/// limiter and the keyed table's hot keys (`keyed/hot.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StripeShape {
    pub(crate) stripes: usize,
    pub(crate) batch: u64,
    pub(crate) lease_units: u64,
}

impl StripeShape {
    /// The shape asked for (defaults where `None`), or the error naming what is out of range.
    pub(crate) fn checked(
        capacity: u64,
        stripes: Option<usize>,
        batch: Option<u64>,
        lease: Duration,
    ) -> Result<Self, StripedError> {
        let stripes = stripes.unwrap_or_else(default_stripes);
        if !stripes.is_power_of_two() || stripes > MAX_STRIPES {
            return Err(StripedError::Stripes { stripes });
        }
        let max_batch = capacity.min(MAX_UNITS);
        let batch = batch.unwrap_or_else(|| default_batch(capacity, stripes));
        if batch == 0 || batch > max_batch {
            return Err(StripedError::Batch { batch, max: max_batch });
        }
        let max_lease = Duration::from_nanos(MAX_LEASE_UNITS << STAMP_UNIT_SHIFT);
        if lease.is_zero() || lease > max_lease {
            return Err(StripedError::Lease { lease, max: max_lease });
        }
        let lease_units = (lease.as_nanos() as u64).div_ceil(1 << STAMP_UNIT_SHIFT);
        Ok(StripeShape { stripes, batch, lease_units })
    }
}

fn default_stripes() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from).next_power_of_two().min(MAX_STRIPES)
}

fn default_batch(capacity: u64, stripes: usize) -> u64 {
    (capacity / (4 * stripes as u64)).clamp(1, MAX_DEFAULT_BATCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_batch_keeps_stripes_within_a_quarter_of_the_capacity() {
        assert_eq!(default_batch(1_000_000, 2), 1_024);
        assert_eq!(default_batch(4_096, 2), 512);
        assert_eq!(default_batch(100, 2), 12);
        assert_eq!(default_batch(3, 4), 1);
        for (capacity, stripes) in [(10, 1), (1_000, 8), (64, 16)] {
            let batch = default_batch(capacity, stripes);
            assert!(batch == 1 || batch * stripes as u64 <= capacity / 4, "{capacity} {stripes}");
        }
    }
}
