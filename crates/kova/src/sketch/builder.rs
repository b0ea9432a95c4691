//! Configuring a sketch: its memory, the cells per key, and the errors of a bad configuration.

use std::fmt;

use super::layout::{LINE_BYTES, WORDS_PER_LINE};
use super::{Cells, Sketch};
use crate::clock::BuilderClock;
use crate::{Clock, CoarseClock, Gcra, Quota, QuotaError, WordAlgorithm};

/// The default memory of a sketch's cells: 64 KiB, 8,192 cells in 1,024 lines.
pub const DEFAULT_MEMORY_BYTES: usize = 64 * 1024;
/// The most memory a sketch's cells may take: 1 GiB. The line is chosen by the hash's low 32
/// bits and the cells within it by the high 32, so the lines must stay below 2^32; this bound
/// is far below that.
pub const MAX_MEMORY_BYTES: usize = 1 << 30;
/// The default cells per key: with 8 cells to a line, 2 gives the fewest over-charged keys from
/// about 1 to 2 live keys per line (the module's sizing table), and the cheapest check.
pub const DEFAULT_CELLS_PER_KEY: u32 = 2;
/// The most cells per key: a whole line.
pub const MAX_CELLS_PER_KEY: u32 = WORDS_PER_LINE as u32;

/// A configuration a [`Sketch`] cannot run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SketchError {
    /// The quota is not one GCRA can represent.
    Quota(QuotaError),
    /// The memory is not a power of two from one line (64 bytes) to [`MAX_MEMORY_BYTES`].
    Memory {
        /// The bytes asked for.
        bytes: usize,
    },
    /// The cells per key are not from 1 to [`MAX_CELLS_PER_KEY`].
    CellsPerKey {
        /// The count asked for.
        cells: u32,
    },
}

impl fmt::Display for SketchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SketchError::Quota(error) => write!(f, "sketch: {error}"),
            SketchError::Memory { bytes } => write!(
                f,
                "sketch: {bytes} bytes of cells; must be a power of two from {LINE_BYTES} to {MAX_MEMORY_BYTES}"
            ),
            SketchError::CellsPerKey { cells } => {
                write!(f, "sketch: {cells} cells per key; must be from 1 to {MAX_CELLS_PER_KEY}")
            }
        }
    }
}

impl std::error::Error for SketchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SketchError::Quota(error) => Some(error),
            SketchError::Memory { .. } | SketchError::CellsPerKey { .. } => None,
        }
    }
}

impl From<QuotaError> for SketchError {
    fn from(error: QuotaError) -> Self {
        SketchError::Quota(error)
    }
}

/// Builds a [`Sketch`]: [`Sketch::builder`].
///
/// ```
/// use kova::sketch::{Sketch, SketchError};
/// use kova::Quota;
///
/// let sketch = Sketch::builder(Quota::per_second(10)?).memory_bytes(1 << 20).cells_per_key(3).build()?;
/// assert_eq!(sketch.memory_bytes(), 1 << 20);
/// assert_eq!(
///     Sketch::builder(Quota::per_second(10)?).memory_bytes(1000).build().unwrap_err(),
///     SketchError::Memory { bytes: 1000 }
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct SketchBuilder<C = CoarseClock> {
    quota: Quota,
    clock: BuilderClock<C>,
    memory_bytes: usize,
    cells_per_key: u32,
}

impl SketchBuilder {
    pub(super) fn new(quota: Quota) -> Self {
        SketchBuilder {
            quota,
            clock: BuilderClock::coarse(),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            cells_per_key: DEFAULT_CELLS_PER_KEY,
        }
    }

    /// The configuration checked, the quota aside: a keyed table's sketch policy decides under
    /// each key's own quota.
    pub(crate) fn check_layout(bytes: usize, cells: u32) -> Result<(), SketchError> {
        if !bytes.is_power_of_two() || !(LINE_BYTES..=MAX_MEMORY_BYTES).contains(&bytes) {
            return Err(SketchError::Memory { bytes });
        }
        if !(1..=MAX_CELLS_PER_KEY).contains(&cells) {
            return Err(SketchError::CellsPerKey { cells });
        }
        Ok(())
    }
}

impl<C: Clock> SketchBuilder<C> {
    /// The clock the sketch reads (the coarse clock by default): a
    /// [`ManualClock`](crate::ManualClock) in tests.
    pub fn clock<C2: Clock>(self, clock: C2) -> SketchBuilder<C2> {
        let SketchBuilder { quota, clock: _, memory_bytes, cells_per_key } = self;
        SketchBuilder { quota, clock: BuilderClock::Given(clock), memory_bytes, cells_per_key }
    }

    /// Bytes of cells (default [`DEFAULT_MEMORY_BYTES`]): a power of two from 64 (one line) to
    /// [`MAX_MEMORY_BYTES`]. The module docs give the rule for sizing it.
    pub fn memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Cells per key, all in the key's line (default [`DEFAULT_CELLS_PER_KEY`]): from 1 to 8.
    pub fn cells_per_key(mut self, cells: u32) -> Self {
        self.cells_per_key = cells;
        self
    }

    /// The sketch: an error for a quota GCRA rejects, or a layout out of its range.
    pub fn build(self) -> Result<Sketch<C>, SketchError> {
        let gcra = <Gcra as WordAlgorithm>::from_quota(self.quota)?;
        let bytes = self.memory_bytes;
        SketchBuilder::check_layout(bytes, self.cells_per_key)?;
        Ok(Sketch {
            gcra,
            cells: Cells::new(bytes, self.cells_per_key),
            hasher: crate::loom::new_hasher(),
            clock: self.clock.into_clock(),
        })
    }
}
