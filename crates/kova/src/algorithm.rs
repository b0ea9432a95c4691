//! The algorithms and the traits they share.
//!
//! Each algorithm is a pure decision function over a plain value plus the packing of that value
//! into storage. [`Algorithm`] is what limiters and tables drive; [`WordAlgorithm`] is the
//! single-`AtomicU64` kind (all but the sliding log), for which one CAS loop
//! ([`WordAlgorithm`]'s blanket `Algorithm` impl) is the whole hot path. A quota change
//! carries what a cell consumed over to a fresh cell of the new quota by one rule
//! (`algorithm/carry_over.rs`), the same for the direct limiter and the keyed table.

mod any;
mod carry_over;
mod fixed_window;
mod gcra;
mod period;
mod sliding_window_counter;
mod sliding_window_log;
mod token_bucket;
mod word;

pub use any::{AlgorithmKind, AnyAlgorithm, AnyCell, ParseAlgorithmKindError};
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use sliding_window_counter::SlidingWindowCounter;
pub use sliding_window_log::{LogCell, SlidingWindowLog};
pub use token_bucket::TokenBucket;
pub use word::InlineWord;

pub(crate) use carry_over::carry_over;

use crate::loom::atomic::AtomicU64;
use crate::{CheckError, Clock, Decision, Quota, QuotaError};

/// How a keyed table stores an algorithm's cells: inline, the cell being the key's word (every
/// [`WordAlgorithm`]'s, through its blanket [`Algorithm`] impl), or boxed, the key's word holding
/// the cell's address ([`BoxedCell`], the storage of any other algorithm outside kova). Sealed:
/// only kova's own storages exist, each implemented for the cells it fits, so an algorithm
/// cannot claim a storage its cell does not have.
///
/// ```
/// fn stored<A: kova::Algorithm, S: kova::cell::CellStorage<A>>() {}
/// stored::<kova::Gcra, kova::cell::InlineWord>(); // a word algorithm's cell is its word
/// stored::<kova::SlidingWindowLog, kova::cell::BoxedCell>(); // any algorithm's cell may be boxed
/// ```
///
/// The log's cell is not one word, so it cannot be stored as one:
///
/// ```compile_fail,E0277
/// fn stored<A: kova::Algorithm, S: kova::cell::CellStorage<A>>() {}
/// stored::<kova::SlidingWindowLog, kova::cell::InlineWord>();
/// ```
///
/// and no storage but kova's exists:
///
/// ```compile_fail,E0277
/// enum Mine {}
/// unsafe impl<A: kova::Algorithm> kova::cell::CellStorage<A> for Mine {}
/// ```
///
/// # Safety
/// An implementation's items agree with each other and with `A::Cell` (`INLINE` exactly when
/// `inline_cell` and `inline_word` are `Some`, and `A::Cell` is then the word itself;
/// `SELF_ADDRESSED` only for a cell that is `repr(transparent)` over a pointer to an allocation it
/// owns, whose first bytes hold that same pointer for as long as it lives, never written); the
/// keyed table relies on it in its unsafe code (`keyed/line/cell.rs`).
pub unsafe trait CellStorage<A: Algorithm>: sealed::Sealed + 'static {
    /// Whether the cell is one word, kept inline as its key's word.
    #[doc(hidden)]
    const INLINE: bool = false;

    /// Whether a cell that is not one word is its own address: the key's word holds the cell's
    /// pointer itself, and no box is needed (the sliding log's).
    #[doc(hidden)]
    const SELF_ADDRESSED: bool = false;

    /// A bare word viewed as the cell, when the cell is one word.
    #[doc(hidden)]
    #[inline(always)]
    fn inline_cell(word: &AtomicU64) -> Option<&A::Cell> {
        let _ = word;
        None
    }

    /// The reverse of [`inline_cell`](Self::inline_cell).
    #[doc(hidden)]
    #[inline(always)]
    fn inline_word(cell: &A::Cell) -> Option<&AtomicU64> {
        let _ = cell;
        None
    }

    /// The word that holds `cell`'s whole state, when `algorithm` decides it with
    /// [`decide_word`](Self::decide_word): a keyed table then runs its own CAS loop on it (one
    /// that a lock holder can freeze). By default the [`inline_word`](Self::inline_word);
    /// [`AnyAlgorithm`] answers per value.
    #[doc(hidden)]
    #[inline(always)]
    fn cell_word<'c>(algorithm: &A, cell: &'c A::Cell) -> Option<&'c AtomicU64> {
        let _ = algorithm;
        Self::inline_word(cell)
    }

    /// [`WordAlgorithm::decide`], for an algorithm whose [`cell_word`](Self::cell_word) is
    /// `Some`; `None` (the default) when it does not decide single words.
    #[doc(hidden)]
    #[inline(always)]
    fn decide_word(algorithm: &A, word: u64, now: u64, cost: u64) -> Option<(Decision, u64)> {
        let _ = (algorithm, word, now, cost);
        None
    }
}

/// Keeps [`CellStorage`] kova's own.
mod sealed {
    pub trait Sealed {}
}

/// The storage of an algorithm outside kova that is not a [`WordAlgorithm`]
/// ([`Algorithm::Storage`]): a keyed table boxes its cells.
#[derive(Debug)]
pub enum BoxedCell {}

impl sealed::Sealed for BoxedCell {}

// SAFETY: every item is the default: a boxed cell, not inline, not its own address.
unsafe impl<A: Algorithm> CellStorage<A> for BoxedCell {}

/// Which of an admission's units a late give-back returns ([`Algorithm::still_counted`]), for
/// the rules that count time in units (GCRA, the token bucket); a window's units count whole
/// until it ends either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveBack {
    /// A settlement of a lower real cost: the units wholly still counted. A unit partly refilled
    /// since is not given back: with what refilled, it would be handed out more than once.
    Settle,
    /// An undo of the admission, its request denied after all: every unit not wholly refilled
    /// since, so that the denial takes nothing (a refund made at once gives back each unit
    /// whole too).
    Undo,
}

/// The default rule of [`Algorithm::still_counted`]: a window's units count whole until it ends
/// (the decision's reset), and not at all after.
fn whole_until_reset(cost: u64, elapsed_nanos: u64, reset_after_nanos: u64) -> u64 {
    if elapsed_nanos < reset_after_nanos {
        cost
    } else {
        0
    }
}

impl GiveBack {
    /// The units `nanos` of state hold, at `interval` nanoseconds a unit: whole ones for a
    /// settlement, any part of one for an undo.
    pub(crate) fn units(self, nanos: u64, interval: u64) -> u64 {
        match self {
            GiveBack::Settle => nanos / interval.max(1),
            GiveBack::Undo => nanos.div_ceil(interval.max(1)),
        }
    }
}

/// A rate-limiting algorithm: a configuration (built from a [`Quota`]) that decides checks against
/// per-key state kept in a [`Cell`](Algorithm::Cell).
///
/// Implementations keep a denial and a zero-cost check (a peek) from changing the cell.
pub trait Algorithm: Send + Sync + Sized + 'static {
    /// Per-key state: one `AtomicU64` for the single-word algorithms.
    type Cell: Send + Sync;

    /// How a keyed table stores the cells ([`CellStorage`]): an algorithm written outside kova
    /// names [`BoxedCell`]; every [`WordAlgorithm`] keeps its word inline, beside its key.
    type Storage: CellStorage<Self>;

    /// A short name for reports and errors ("token_bucket", "gcra", ...).
    fn name(&self) -> &'static str;

    /// Builds the algorithm, or names what in the quota it cannot represent.
    fn from_quota(quota: Quota) -> Result<Self, QuotaError>;

    /// The quota it was built from.
    fn quota(&self) -> Quota;

    /// The most units one check can ever be admitted for ([`Decision::limit`]).
    fn capacity(&self) -> u64;

    /// State for a key never seen before (full).
    fn new_cell(&self) -> Self::Cell;

    /// Checks `cost` units against `cell`, reading `clock` as late as it can. `cost` 0 is a
    /// peek. The caller has checked `cost <= capacity()`.
    fn decide_cell<C: Clock + ?Sized>(&self, cell: &Self::Cell, clock: &C, cost: u64) -> Decision;

    /// Puts the cell back to fresh.
    fn reset_cell(&self, cell: &Self::Cell);

    /// Whether the cell is indistinguishable from a fresh one at `now` (so a table may drop it).
    fn is_idle(&self, cell: &Self::Cell, now: u64) -> bool;

    /// Bytes one cell occupies, heap included.
    fn cell_bytes(&self) -> usize;

    /// Gives back `cost` units an earlier allowed check took from `cell` (see
    /// [`WordAlgorithm::refund`]). Returns `false` when the algorithm cannot refund (the sliding
    /// log, whose units are timestamps already written); the state is then unchanged.
    fn refund_cell<C: Clock + ?Sized>(&self, cell: &Self::Cell, clock: &C, cost: u64) -> bool;

    /// Of `cost` units an admission took `elapsed_nanos` ago, whose decision said the state
    /// would be whole again after `reset_after_nanos`, how many a give-back made now returns
    /// ([`GiveBack`] says which: a settlement's or an undo's). By default all of them until that
    /// reset and none after: a window's units count until it ends.
    fn still_counted(
        &self,
        cost: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        let _ = give_back;
        whole_until_reset(cost, elapsed_nanos, reset_after_nanos)
    }

    /// Charges up to `cost` units from `cell` whatever its state, never denied (the extra part
    /// of a settled cost, see [`WordAlgorithm::charge`]): returns the units charged. By default
    /// (an algorithm whose state cannot hold a debt), what a peek reports remaining, at most
    /// `cost`, taken by an ordinary check; 0 if a concurrent check took it first.
    fn charge_cell<C: Clock + ?Sized>(&self, cell: &Self::Cell, clock: &C, cost: u64) -> u64 {
        let take = cost.min(self.decide_cell(cell, clock, 0).remaining()).min(self.capacity());
        if take > 0 && self.decide_cell(cell, clock, take).is_allowed() {
            take
        } else {
            0
        }
    }

    /// The units `cell` counts as consumed at `now`, a debt run into by
    /// [charges](Self::charge_cell) included (a quota change carries them over). By default
    /// the capacity less what a peek reports remaining (an algorithm whose state holds no debt).
    fn consumed_cell(&self, cell: &Self::Cell, now: u64) -> u64 {
        self.capacity().saturating_sub(self.decide_cell(cell, &crate::clock::At(now), 0).remaining())
    }

    /// The same algorithm for another quota (a keyed table's per-key quotas):
    /// [`from_quota`](Self::from_quota), unless the value says more than its type
    /// ([`AnyAlgorithm`] keeps its kind).
    fn with_quota(&self, quota: Quota) -> Result<Self, QuotaError> {
        Self::from_quota(quota)
    }

    /// Checks `cost` units: an error (not a denial) when `cost` exceeds the capacity.
    // Always inlined, as `decide_cell` is (see there): a call here would bring the decision
    // back through memory.
    #[inline(always)]
    fn check_cell<C: Clock + ?Sized>(
        &self,
        cell: &Self::Cell,
        clock: &C,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        let capacity = self.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity });
        }
        Ok(self.decide_cell(cell, clock, cost))
    }
}

/// An algorithm whose whole per-key state is one `u64`, updated by compare-and-swap.
///
/// `decide` is pure: the same (word, now, cost) always gives the same answer, which is what the
/// reference models, fuzz targets, loom models and the Redis scripts are checked against.
pub trait WordAlgorithm: Send + Sync + Sized + 'static {
    /// A short name.
    const NAME: &'static str;

    /// Builds the algorithm, or names what in the quota it cannot represent.
    fn from_quota(quota: Quota) -> Result<Self, QuotaError>;

    /// The quota it was built from.
    fn quota(&self) -> Quota;

    /// The most units one check can be admitted for.
    fn capacity(&self) -> u64;

    /// The packed state of a fresh (full) key.
    fn fresh_word(&self) -> u64;

    /// Decides `cost` units (0 = peek) at `now` against the packed state `word`. Returns the
    /// decision and the word to store; a denial or a peek returns `word` unchanged. A function
    /// of its arguments alone: a check's compare-and-swap loop decides again on the word it
    /// lost to, and may run it more than once on the same word.
    fn decide(&self, word: u64, now: u64, cost: u64) -> (Decision, u64);

    /// Whether a [`RateLimiter`](crate::RateLimiter)'s check runs [`decide`](Self::decide) twice
    /// when it writes: once for the word, before its compare-and-swap, and once more for the
    /// decision, after the compare-and-swap has won. Being inlined, each run keeps only the half
    /// it uses, so the decision's arithmetic leaves the span between the check's load and its
    /// compare-and-swap, in which another core's write makes the compare-and-swap fail. Worth it
    /// for a `decide` that is inlined and whose decision costs more than recomputing what the
    /// second run repeats (kova's GCRA and sliding window counter); false by default. A keyed
    /// table's checks run it once either way (twice cost its larger hit path more than it saved).
    const DECIDE_AFTER_WRITE: bool = false;

    /// Whether `word` is indistinguishable from fresh at `now`.
    fn is_idle_word(&self, word: u64, now: u64) -> bool;

    /// Gives back `cost` units that an earlier allowed check took (for example when a request
    /// passed one limit but a later limit denied it), at `now`. The state cannot tell which
    /// check its units came from, so the refund is right when made soon after that check, as
    /// the request that took them ends: the state becomes what it would be had `cost` fewer
    /// units been taken — or full, never beyond. A window the state has already left is not
    /// touched (its units no longer count), but once a later check has opened a new window (or
    /// units have refilled since the check), units are given back to the state as it is now,
    /// which then admits more than the quota over the check's span. A caller that may refund
    /// late keeps when the check was made and gives nothing back after its decision's
    /// [`reset_after`](crate::Decision::reset_after) (kova-tower does).
    fn refund(&self, word: u64, now: u64, cost: u64) -> u64;

    /// [`Algorithm::still_counted`]: the same default, all of `cost` until the reset and none
    /// after.
    fn still_counted(
        &self,
        cost: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        let _ = give_back;
        whole_until_reset(cost, elapsed_nanos, reset_after_nanos)
    }

    /// Gives back `cost` units that an allowed check took by writing `written` (the word its
    /// [`decide`](Self::decide) returned), now that the state is `word` and the time `now` (no
    /// earlier than that check's): a composite undoing its charge of a limit after a later limit
    /// denied the check ([`Limits`](crate::limits::Limits) of three or four). Unlike
    /// [`refund`](Self::refund), which gives back into the state at `now` whatever window or
    /// refill that is, this gives back only what that check's units still count at `now`: the
    /// state is never fuller than had the check never happened, whatever other checks did and
    /// however far the clock moved in between. A window that has closed keeps its count, and a
    /// bucket is not credited for refill that the charge's own deficit has already absorbed.
    ///
    /// What a check's units still count is read from `written`, which an earlier check's give-back
    /// since can make out of date: for a bucket (GCRA, the token bucket), giving back a check
    /// charged before this one moves this one's units earlier, and this one can then give back
    /// up to the emission intervals it was in flight beyond what they count.
    ///
    /// By default: [`refund`](Self::refund) of at most the units `written` still counts at
    /// `now` ([`consumed`](Self::consumed)). Override it where a refund at `now` can reach
    /// another window than the one the check wrote (kova's window algorithms do), or where
    /// `consumed` rounds a part of a unit up (kova's GCRA and token bucket do).
    fn undo(&self, word: u64, now: u64, cost: u64, written: u64) -> u64 {
        self.refund(word, now, cost.min(self.consumed(written, now)))
    }

    /// Takes `cost` units at `now` even when they are only available later (a reservation):
    /// `Some((wait_nanos, new_word))`, where the units may be used `wait_nanos` after `now`, or
    /// `None` when the state cannot hold units taken ahead of time. Only [`Gcra`] can (its
    /// theoretical arrival time simply moves further out); the token bucket's count cannot go
    /// below zero and a window cannot count into a window that has not begun. The caller has
    /// checked `1 <= cost <= capacity()`.
    fn reserve(&self, word: u64, now: u64, cost: u64) -> Option<(u64, u64)> {
        let _ = (word, now, cost);
        None
    }

    /// Gives back what a reservation of `cost` units has not used, cancelled at `now` no later
    /// than its `ready_at` (the caller gives nothing back once the units are due):
    /// `(units given back, new word)`. `reserved_word` is the word the reservation stored.
    ///
    /// **The rule, for every algorithm:** a cancel gives back the whole cost when nothing
    /// granted after the reservation is still counted (the state is the one the reservation
    /// left: every later grant was itself cancelled, last first), and nothing otherwise: those
    /// later grants were given times, or room, that assumed these units gone. A denial or a
    /// peek grants nothing. (A [refund](Self::refund) made since counts as giving back part of
    /// them.)
    ///
    /// Go's `Reservation.Cancel` gives back part (the cost less the tokens between the
    /// reservation's time and the latest time granted), which needs the latest time granted
    /// kept apart from the state; in one word per key it cannot be, and measured on the state
    /// instead, a part given back while a later reservation holds can over-grant once other
    /// cancels come out of order (three cancels suffice; the reservation tests' bound finds
    /// it). So here a cancel out of order gives back nothing, which never admits more than the
    /// quota.
    ///
    /// By default: the whole cost by a plain [`refund`](Self::refund) when the word is still
    /// `reserved_word`, else nothing.
    fn cancel_reservation(
        &self,
        word: u64,
        now: u64,
        cost: u64,
        reserved_word: u64,
        ready_at: u64,
    ) -> (u64, u64) {
        let _ = ready_at;
        if word != reserved_word {
            return (0, word);
        }
        (cost, self.refund(word, now, cost))
    }

    /// The units `word` counts as consumed at `now`, a debt included (see
    /// [`Algorithm::consumed_cell`]). By default the capacity less what a peek reports
    /// remaining.
    fn consumed(&self, word: u64, now: u64) -> u64 {
        self.capacity().saturating_sub(self.decide(word, now, 0).0.remaining())
    }

    /// Charges up to `cost` units whatever the state (the extra part of a settled cost):
    /// `(charged, new_word)`. It takes what is left and, for an algorithm with an overdraft
    /// ([`Quota::with_overdraft`]), runs into a debt of up to that many units; what does not fit
    /// is not charged. By default, the units a peek reports remaining, at most `cost`.
    fn charge(&self, word: u64, now: u64, cost: u64) -> (u64, u64) {
        let left = self.decide(word, now, 0).0.remaining();
        let take = cost.min(left).min(self.capacity());
        if take == 0 {
            return (0, word);
        }
        match self.decide(word, now, take) {
            (decision, new) if decision.is_allowed() => (take, new),
            _ => (0, word),
        }
    }
}

/// Checks a quota for a window algorithm: `limit` per window, no separate burst, and a limit the
/// algorithm's state can hold.
fn check_window_quota(quota: &Quota, algorithm: &'static str, max_limit: u64) -> Result<(), QuotaError> {
    check_no_overdraft(quota, algorithm)?;
    if quota.burst() != quota.limit() {
        return Err(QuotaError::BurstUnsupported { algorithm });
    }
    if quota.limit() > max_limit {
        return Err(QuotaError::Unrepresentable {
            algorithm,
            field: "limit",
            value: quota.limit(),
            max: max_limit,
        });
    }
    Ok(())
}

/// Rejects an overdraft for an algorithm whose state cannot hold a debt.
fn check_no_overdraft(quota: &Quota, algorithm: &'static str) -> Result<(), QuotaError> {
    if quota.overdraft() != 0 {
        return Err(QuotaError::OverdraftUnsupported { algorithm });
    }
    Ok(())
}
