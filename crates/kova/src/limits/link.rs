//! A link: the limits of a composite that one compare-and-swap decides together, one word
//! (`AtomicU64`) or two in a 128-bit word (`AtomicU128`, the first limit's word in the low half).
//! A composite is one link (one or two limits: exactly the sequential composite) or two links
//! checked then refunded (three or four limits, `cells.rs`).

use crate::cas::{update_word, Outcome, Precise, Word};
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::AtomicU128;
use crate::{Decision, WordAlgorithm};

/// A placeholder for the unused places of a decision array.
pub(super) const NONE: Decision = Decision::allowed(0, 0, 0);

/// An atomic word holding the words of `N` limits.
pub(super) trait Link<const N: usize>: Word {
    /// Each limit's word.
    fn split(value: Self::Value) -> [u64; N];
    /// The value holding `words`.
    fn join(words: [u64; N]) -> Self::Value;
    /// A word holding `words`.
    fn holding(words: [u64; N]) -> Self;
    /// Replaces the value (a reset).
    fn store_release(&self, value: Self::Value);
}

impl Link<1> for AtomicU64 {
    #[inline(always)]
    fn split(value: u64) -> [u64; 1] {
        [value]
    }

    #[inline(always)]
    fn join([word]: [u64; 1]) -> u64 {
        word
    }

    fn holding([word]: [u64; 1]) -> Self {
        AtomicU64::new(word)
    }

    fn store_release(&self, value: u64) {
        // Release, as a check's CAS: a reader that sees the value sees what came before.
        self.store(value, Ordering::Release);
    }
}

impl Link<2> for AtomicU128 {
    #[inline(always)]
    fn split(pair: u128) -> [u64; 2] {
        // Truncation keeps each half.
        [pair as u64, (pair >> 64) as u64]
    }

    #[inline(always)]
    fn join(words: [u64; 2]) -> u128 {
        u128::from(words[0]) | (u128::from(words[1]) << 64)
    }

    fn holding(words: [u64; 2]) -> Self {
        AtomicU128::new(Self::join(words))
    }

    fn store_release(&self, value: u128) {
        // Release, as above.
        self.store(value, Ordering::Release);
    }
}

/// What a link's step tells the CAS loop: how long until the whole check could pass (0 when
/// every limit admitted; a denial always waits at least 1 ns), which the loop needs for the near
/// miss, and the words and time it decided on, from which each limit's decision follows
/// (`seen.rs`).
#[derive(Clone, Copy)]
struct Verdict<const N: usize> {
    denied_for: u64,
    sight: Sight<N>,
}

impl<const N: usize> Outcome for Verdict<N> {
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        self.denied_for
    }
}

/// What a charge took from each limit: never denied, so never a near miss.
struct Charged<const N: usize>([u64; N]);

impl<const N: usize> Outcome for Charged<N> {
    fn denied_for_nanos(&self) -> u64 {
        0
    }
}

/// What a check saw of a link's limits: their words as decided on (or looked at), the time, and
/// whether every one of them admitted and took the cost.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sight<const N: usize> {
    pub(super) words: [u64; N],
    pub(super) now: u64,
    pub(super) admitted: bool,
}

impl Sight<0> {
    /// The second link of a composite that has one.
    pub(super) const NONE: Self = Sight { words: [], now: 0, admitted: true };
}

/// The sequential composite over `N` plain words: every limit decides `cost` at `now`; if all
/// admit, every word takes it (the new words); otherwise nothing changes. Also how long until
/// the whole check could pass: 0 while every limit admits.
#[inline(always)]
#[expect(clippy::indexing_slicing, reason = "every index runs over 0..N, the length of each array")]
fn decide_all<W: WordAlgorithm, const N: usize>(
    algorithms: &[W; N],
    words: [u64; N],
    now: u64,
    cost: u64,
) -> (u64, [u64; N]) {
    let mut new = words;
    // The denying limit that must be waited for longest says when the whole check could pass.
    let mut denied_for = 0;
    for i in 0..N {
        let (decision, word) = algorithms[i].decide(words[i], now, cost);
        denied_for = denied_for.max(decision.retry_after_nanos());
        new[i] = word;
    }
    if denied_for == 0 {
        (0, new)
    } else {
        (denied_for, words)
    }
}

/// Checks `cost` units against the `N` limits of `cell`, all or nothing, by one CAS loop: what
/// it saw. Only the verdict and the words the loop already holds travel through it; the limits'
/// decisions are worked out from them when the answer is read (`seen.rs`).
#[inline(always)]
pub(super) fn check<L: Link<N>, W: WordAlgorithm, C: crate::Clock + ?Sized, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
) -> Sight<N> {
    let verdict = update_word(
        cell,
        clock,
        #[inline(always)]
        |value, now| {
            let words = L::split(value);
            let (denied_for, new) = decide_all(algorithms, words, now, cost);
            (Verdict { denied_for, sight: Sight { words, now, admitted: denied_for == 0 } }, L::join(new))
        },
    );
    verdict.sight
}

/// The words of `cell`, looked at `now`, changing nothing: what its limits would say to a
/// check, for a link a composite's check did not charge, or has just given its units back.
#[inline(always)]
pub(super) fn look<L: Link<N>, const N: usize>(cell: &L, now: u64) -> Sight<N> {
    // Acquire as in the CAS loop: the caller's clock reading is no older than the writer's.
    Sight { words: L::split(cell.load_acquire()), now, admitted: false }
}

/// Gives `cost` units back to every limit of `cell` (see [`WordAlgorithm::refund`]).
#[inline]
pub(super) fn refund<L: Link<N>, W: WordAlgorithm, C: crate::Clock + ?Sized, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
) {
    update_word(cell, clock, |value, now| {
        let mut words = L::split(value);
        for (word, algorithm) in words.iter_mut().zip(algorithms) {
            *word = algorithm.refund(*word, now, cost);
        }
        ((), L::join(words))
    });
}

/// Gives back the `cost` units that the check which saw `charged` took from every limit of
/// `cell` (see [`WordAlgorithm::undo`]): each limit's word that check wrote is decided again
/// from what it saw, so only what those units still count comes back, however far the clock
/// and other checks have moved the words since.
#[expect(clippy::indexing_slicing, reason = "every index runs over 0..N, the length of each array")]
pub(super) fn undo<L: Link<N>, W: WordAlgorithm, C: crate::Clock + ?Sized, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
    charged: &Sight<N>,
) {
    let written: [u64; N] =
        std::array::from_fn(|i| algorithms[i].decide(charged.words[i], charged.now, cost).1);
    // On the precise time: another check's near miss may have been decided again on it, ahead
    // of every coarse reading, and what the charge still counts must be judged no earlier than
    // that check's time, or units it absorbed come back. A denial's undo is off the hit path.
    update_word(cell, &Precise(clock), |value, now| {
        // A reading older than the charge's is taken as the charge's: the undo reasons from the
        // charge forwards.
        let now = now.max(charged.now);
        let mut words = L::split(value);
        for ((word, algorithm), written) in words.iter_mut().zip(algorithms).zip(written) {
            *word = algorithm.undo(*word, now, cost, written);
        }
        ((), L::join(words))
    });
}

/// Charges up to `cost` units to every limit of `cell` whatever its state
/// ([`WordAlgorithm::charge`]): the units each took.
pub(super) fn charge<L: Link<N>, W: WordAlgorithm, C: crate::Clock + ?Sized, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
) -> [u64; N] {
    let Charged(charged) = update_word(cell, clock, |value, now| {
        let mut words = L::split(value);
        let mut charged = [0; N];
        for ((word, taken), algorithm) in words.iter_mut().zip(charged.iter_mut()).zip(algorithms) {
            (*taken, *word) = algorithm.charge(*word, now, cost);
        }
        (Charged(charged), L::join(words))
    });
    charged
}

/// A link holding every limit's fresh word.
pub(super) fn fresh<L: Link<N>, W: WordAlgorithm, const N: usize>(algorithms: &[W; N]) -> L {
    L::holding(algorithms.each_ref().map(WordAlgorithm::fresh_word))
}

/// Every limit of `cell` back to fresh.
pub(super) fn reset<L: Link<N>, W: WordAlgorithm, const N: usize>(cell: &L, algorithms: &[W; N]) {
    cell.store_release(L::join(algorithms.each_ref().map(WordAlgorithm::fresh_word)));
}

/// Whether every limit of `cell` is indistinguishable from fresh at `now`.
pub(super) fn is_idle<L: Link<N>, W: WordAlgorithm, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    now: u64,
) -> bool {
    // Acquire: pairs with the Release of the check that wrote the word.
    let words = L::split(cell.load_acquire());
    algorithms.iter().zip(words).all(|(algorithm, word)| algorithm.is_idle_word(word, now))
}
