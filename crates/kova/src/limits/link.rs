//! A link: the limits of a composite that one compare-and-swap decides together, one word
//! (`AtomicU64`) or two in a 128-bit word (`AtomicU128`, the first limit's word in the low half).
//! A composite is one link (one or two limits: exactly the sequential composite) or two links
//! checked then refunded (three or four limits, `cells.rs`).

use crate::cas::{update_word, Outcome, Word};
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

/// What a link's step tells the CAS loop, in one word so that it travels in a register: 0 when
/// every limit admitted, else how long until the whole check could pass (a denial always waits
/// at least 1 ns), which the loop needs for the near miss. The limits' own decisions go
/// straight into the caller's answer.
#[derive(Clone, Copy)]
struct Verdict(u64);

impl Outcome for Verdict {
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        self.0
    }
}

/// What a charge took from each limit: never denied, so never a near miss.
struct Charged<const N: usize>([u64; N]);

impl<const N: usize> Outcome for Charged<N> {
    fn denied_for_nanos(&self) -> u64 {
        0
    }
}

/// The sequential composite over `N` plain words: every limit decides `cost` at `now`; if all
/// admit, every word takes it; otherwise nothing changes and the admitting limits report a peek.
/// Each limit's decision is written to `decisions`.
#[inline(always)]
#[expect(clippy::indexing_slicing, reason = "every index runs over 0..N, the length of each array")]
fn decide_all<W: WordAlgorithm, const N: usize>(
    algorithms: &[W; N],
    words: [u64; N],
    now: u64,
    cost: u64,
    decisions: &mut [Decision; N],
) -> (Verdict, [u64; N]) {
    let mut new = words;
    // The denying limit that must be waited for longest says when the whole check could pass;
    // 0 while every limit admits.
    let mut denied_for = 0;
    for i in 0..N {
        let (decision, word) = algorithms[i].decide(words[i], now, cost);
        denied_for = denied_for.max(decision.retry_after_nanos());
        decisions[i] = decision;
        new[i] = word;
    }
    if denied_for == 0 {
        return (Verdict(0), new);
    }
    for i in 0..N {
        if decisions[i].is_allowed() {
            decisions[i] = algorithms[i].decide(words[i], now, 0).0;
        }
    }
    (Verdict(denied_for), words)
}

/// Checks `cost` units against the `N` limits of `cell`, all or nothing, by one CAS loop: each
/// limit's decision, and whether all admitted. Only the verdict travels through the loop; the
/// decisions stay in a fixed-size local the compiler keeps in registers.
#[inline(always)]
pub(super) fn check<L: Link<N>, W: WordAlgorithm, C: crate::Clock + ?Sized, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
) -> ([Decision; N], bool) {
    let mut decisions = [NONE; N];
    let verdict = update_word(
        cell,
        clock,
        #[inline(always)]
        |value, now| {
            let (verdict, words) = decide_all(algorithms, L::split(value), now, cost, &mut decisions);
            (verdict, L::join(words))
        },
    );
    (decisions, verdict.0 == 0)
}

/// What each limit of `cell` would say to `cost` units at `now`, changing nothing: its denial
/// if it would deny, else a peek (the limits of a link a composite's check did not charge, or
/// has just refunded).
#[inline(always)]
pub(super) fn standing<L: Link<N>, W: WordAlgorithm, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    now: u64,
    cost: u64,
) -> [Decision; N] {
    // Acquire as in the CAS loop: the caller's clock reading is no older than the writer's.
    let words = L::split(cell.load_acquire());
    let mut decisions = [NONE; N];
    for ((place, algorithm), word) in decisions.iter_mut().zip(algorithms).zip(words) {
        let (decision, _) = algorithm.decide(word, now, cost);
        *place = if decision.is_allowed() { algorithm.decide(word, now, 0).0 } else { decision };
    }
    decisions
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
