//! The one read-decide-compare-and-swap loop, for every state kept in one atomic word (or, for
//! a composite of two limits, one 128-bit word): the direct limiter, a keyed table's word cells,
//! reservations, settling, refunds and `Limits`' pair all run [`update`].
//!
//! Two policies live here and nowhere else:
//! - **Contention.** A compare-and-swap that fails because another thread wrote the word decides
//!   again at once on the value it returned, without backing off. The failed instruction has
//!   already brought the line to this core, so deciding at once gives each thread its turn; a
//!   backoff lets the thread that won keep the line for several checks in a row while the other
//!   waits, which in a server means the requests on the slower core wait.
//! - **The near miss.** A denial whose retry time lies within the clock's possible lag
//!   ([`Clock::max_lag_nanos`]) is decided again, once, on the precise time
//!   ([`Clock::now_nanos_precise`]), and every later step of the same call reads the precise
//!   time too. An admission, and a denial far from its retry time, never read it.

use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::AtomicU128;
use crate::{Clock, Decision};

/// An atomic word the loop can drive.
pub(crate) trait Word {
    /// The plain value it holds.
    type Value: Copy + Eq;

    /// Loads the value. Acquire: it pairs with the Release half of the compare-and-swap that
    /// wrote the value, whose writer read its clock before writing, so the clock read after this
    /// load is no older than theirs (a monotonic clock never seems to run backwards to a reader).
    fn load_acquire(&self) -> Self::Value;

    /// Replaces `old` with `new`, or returns the value found instead. Success is AcqRel: Release
    /// publishes our clock reading's place in time to the next reader, Acquire keeps the load's
    /// guarantee for us; failure is Acquire, since we decide again on the value it returns.
    fn compare_exchange(&self, old: Self::Value, new: Self::Value) -> Result<(), Self::Value>;
}

impl Word for AtomicU64 {
    type Value = u64;

    #[inline(always)]
    fn load_acquire(&self) -> u64 {
        self.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn compare_exchange(&self, old: u64, new: u64) -> Result<(), u64> {
        // Orderings: see the trait.
        self.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire).map(|_| ())
    }
}

impl Word for AtomicU128 {
    type Value = u128;

    #[inline(always)]
    fn load_acquire(&self) -> u128 {
        self.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn compare_exchange(&self, old: u128, new: u128) -> Result<(), u128> {
        // Orderings: see the trait.
        self.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire).map(|_| ())
    }
}

/// What a step returned, as far as the loop needs to know it: a denial's retry time, for the
/// near miss.
pub(crate) trait Outcome {
    /// How long until the same call would pass, if it was denied; 0 for anything else (an
    /// admission, a peek, a refund, a charge), which the loop never decides twice.
    fn denied_for_nanos(&self) -> u64;
}

impl Outcome for Decision {
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        self.retry_after_nanos()
    }
}

impl Outcome for u64 {
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        0
    }
}

impl Outcome for bool {
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        0
    }
}

/// Whether a denial `denied_for` nanoseconds from its retry time, decided on a coarse reading,
/// is a near miss that `clock`'s precise time may admit. Far denials pay one comparison.
#[inline(always)]
pub(crate) fn is_near_miss<C: Clock + ?Sized>(clock: &C, denied_for: u64) -> bool {
    denied_for != 0 && denied_for <= clock.max_lag_nanos()
}

/// `clock` read precisely: the clock a near miss is decided again on.
#[derive(Debug)]
pub(crate) struct Precise<'a, C: ?Sized>(pub(crate) &'a C);

impl<C: Clock + ?Sized> Clock for Precise<'_, C> {
    #[inline]
    fn now_nanos(&self) -> u64 {
        self.0.now_nanos_precise()
    }

    #[inline]
    fn now_nanos_precise(&self) -> u64 {
        self.0.now_nanos_precise()
    }
}

/// The loop: read the word, run `step(word, now)`, and write its new word unless unchanged,
/// deciding again on the value found when another thread wrote first. `step` returns `None` to
/// stop without deciding (a keyed table's frozen word); the loop then returns `None`.
/// `contended(now)` runs after each compare-and-swap that another write made fail (a weak one
/// may also fail spuriously, with the word unchanged: not contention), so an uncontended call
/// pays nothing for it.
#[inline(always)]
pub(crate) fn update<W: Word, C: Clock + ?Sized, R: Outcome>(
    cell: &W,
    clock: &C,
    step: impl FnMut(W::Value, u64) -> Option<(R, W::Value)>,
    contended: impl FnMut(u64),
) -> Option<R> {
    update_with(cell, clock, Rerun::No, step, contended)
}

/// Whether the loop runs its step again for the result after the compare-and-swap has won.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Rerun {
    /// The result comes from the run that built the word written.
    No,
    /// For a step that is a function of the word and the time alone (it reads and writes nothing
    /// else), such as a decision: it runs once for the word it writes before the
    /// compare-and-swap, and once more for its result after the compare-and-swap has won. Being
    /// inlined, each run keeps only the part used after it, so what only the result needs (a
    /// decision's remaining units and times, a division for some algorithms) runs outside the
    /// span between the load and the compare-and-swap: the longer that span, the likelier
    /// another core writes the word within it and the compare-and-swap fails.
    AfterWrite,
}

/// [`update`], with the choice of [`Rerun`]. Always inlined with a constant `rerun`, so the
/// choice costs nothing at run time.
#[inline(always)]
pub(crate) fn update_with<W: Word, C: Clock + ?Sized, R: Outcome>(
    cell: &W,
    clock: &C,
    rerun: Rerun,
    mut step: impl FnMut(W::Value, u64) -> Option<(R, W::Value)>,
    mut contended: impl FnMut(u64),
) -> Option<R> {
    let rerun = rerun == Rerun::AfterWrite;
    let mut old = cell.load_acquire();
    let mut precise = false;
    let mut now = clock.now_nanos();
    loop {
        // With a rerun, this run's result is never used: the compiler keeps only its word.
        let (first_result, new) = step(old, now)?;
        if new == old {
            // Nothing to write: a denial, a peek, or a step that changes nothing.
            let result = if rerun { step(old, now)?.0 } else { first_result };
            if precise || !is_near_miss(clock, result.denied_for_nanos()) {
                return Some(result);
            }
            precise = true;
            old = cell.load_acquire();
            now = clock.now_nanos_precise();
            continue;
        }
        match cell.compare_exchange(old, new) {
            // A rerun is the same step on the same word and time: the result of the word written.
            Ok(()) if rerun => return step(old, now).map(|(result, _)| result),
            Ok(()) => return Some(first_result),
            Err(actual) => {
                if actual != old {
                    contended(now);
                }
                old = actual;
                now = if precise { clock.now_nanos_precise() } else { clock.now_nanos() };
            }
        }
    }
}

/// [`update`] for a step that always decides.
#[inline(always)]
pub(crate) fn update_word<W: Word, C: Clock + ?Sized, R: Outcome>(
    cell: &W,
    clock: &C,
    step: impl FnMut(W::Value, u64) -> (R, W::Value),
) -> R {
    update_word_with(cell, clock, Rerun::No, step)
}

/// [`update_with`] for a step that always decides.
#[inline(always)]
#[expect(clippy::unreachable, reason = "the step always returns Some, so update_with does too")]
pub(crate) fn update_word_with<W: Word, C: Clock + ?Sized, R: Outcome>(
    cell: &W,
    clock: &C,
    rerun: Rerun,
    mut step: impl FnMut(W::Value, u64) -> (R, W::Value),
) -> R {
    // Always inlined: left out of line, the step's result crosses the call through the stack in
    // stores narrower than the loads that copy it on, which the store buffer cannot forward.
    let found = update_with(
        cell,
        clock,
        rerun,
        #[inline(always)]
        |word, now| Some(step(word, now)),
        |_| {},
    );
    match found {
        Some(result) => result,
        // `step` never returns `None`, so neither does `update_with`.
        None => unreachable!("a step that always decides stopped the loop"),
    }
}

impl<T> Outcome for Result<T, crate::reservation::ReserveError> {
    /// A reservation refused for want of units now ([`ReserveError::NotAvailableNow`]) is a
    /// denial like a check's; any other result is not.
    ///
    /// [`ReserveError::NotAvailableNow`]: crate::reservation::ReserveError::NotAvailableNow
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        match self {
            Err(crate::reservation::ReserveError::NotAvailableNow { retry_after, .. }) => {
                u64::try_from(retry_after.as_nanos()).unwrap_or(u64::MAX)
            }
            _ => 0,
        }
    }
}

impl Outcome for () {
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        0
    }
}
