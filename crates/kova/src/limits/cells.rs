//! Where a composite keeps its limits' words, and the two protocols over them: one CAS over every
//! word (one or two limits), or check then refund (three or four).

use super::{LimitsDecision, MAX_LIMITS};
use crate::cas::{update_word, Outcome, Word};
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::AtomicU128;
use crate::{Algorithm, Clock, Decision, WordAlgorithm};

pub(crate) enum Cells {
    One(AtomicU64),
    /// Limit 0's word in the low half, limit 1's in the high half.
    Pair(AtomicU128),
    /// The first as many words as there are limits (inline: a keyed composite's cell is then
    /// one allocation, padded to its own cache lines).
    Chain([AtomicU64; MAX_LIMITS]),
}

/// A placeholder for the unused places of a decision array.
pub(super) const NONE: Decision = Decision::allowed(0, 0, 0);

#[inline(always)]
fn pack(words: [u64; 2]) -> u128 {
    u128::from(words[0]) | (u128::from(words[1]) << 64)
}

#[inline(always)]
fn unpack(pair: u128) -> [u64; 2] {
    // Truncation keeps each half.
    [pair as u64, (pair >> 64) as u64]
}

/// What a composite's step tells the CAS loop, in one word so that it travels in a register: 0
/// when every limit admitted, else how long until the whole check could pass (a denial always
/// waits at least 1 ns), which the loop needs for the near miss. The limits' own decisions go
/// straight into the caller's answer.
#[derive(Clone, Copy)]
struct Verdict(u64);

impl Verdict {
    #[inline(always)]
    fn is_allowed(self) -> bool {
        self.0 == 0
    }
}

/// What a pair's charge took from each limit: never denied, so never a near miss.
struct Charged([u64; 2]);

impl Outcome for Charged {
    fn denied_for_nanos(&self) -> u64 {
        0
    }
}

impl Outcome for Verdict {
    #[inline(always)]
    fn denied_for_nanos(&self) -> u64 {
        self.0
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

/// The first `N` algorithms, as an array (the composite holds exactly `N` when its cells are a
/// one- or two-word cell).
#[inline(always)]
#[expect(
    clippy::expect_used,
    reason = "callers pass exactly N algorithms: Cells::One and Pair are built for one and two limits, a chain is matched by its count"
)]
fn exactly<W, const N: usize>(algorithms: &[W]) -> &[W; N] {
    algorithms.try_into().expect("the cells were built for this many limits")
}

/// The CAS loop over `N` limits whose words `cell` holds together (`split` and `join` convert):
/// each limit's decision, and whether all admitted. Only the verdict travels through the loop;
/// the decisions stay in a fixed-size local the compiler keeps in registers.
#[inline(always)]
fn check_words<A: Word, W: WordAlgorithm, C: Clock + ?Sized, const N: usize>(
    cell: &A,
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
    split: impl Fn(A::Value) -> [u64; N],
    join: impl Fn([u64; N]) -> A::Value,
) -> ([Decision; N], bool) {
    let mut decisions = [NONE; N];
    let verdict = update_word(
        cell,
        clock,
        #[inline(always)]
        |value, now| {
            let (verdict, words) = decide_all(algorithms, split(value), now, cost, &mut decisions);
            (verdict, join(words))
        },
    );
    (decisions, verdict.is_allowed())
}

impl Cells {
    pub(super) fn new<W: WordAlgorithm>(algorithms: &[W], chained: bool) -> Self {
        match algorithms {
            [one] if !chained => Cells::One(AtomicU64::new(one.fresh_word())),
            [a, b] if !chained => Cells::Pair(AtomicU128::new(pack([a.fresh_word(), b.fresh_word()]))),
            all => Cells::Chain(std::array::from_fn(|i| {
                AtomicU64::new(all.get(i).map_or(0, WordAlgorithm::fresh_word))
            })),
        }
    }

    #[inline(always)]
    pub(super) fn check<W: WordAlgorithm, C: Clock + ?Sized>(
        &self,
        algorithms: &[W],
        clock: &C,
        cost: u64,
    ) -> LimitsDecision {
        match self {
            Cells::One(cell) => {
                let one = exactly::<W, 1>(algorithms);
                let (decisions, allowed) = check_words(cell, one, clock, cost, |word| [word], |[word]| word);
                LimitsDecision::of(decisions, allowed)
            }
            // Both words decided together and swapped in one 128-bit CAS: the composite is
            // exactly the sequential one.
            Cells::Pair(cell) => {
                let pair = exactly::<W, 2>(algorithms);
                let (decisions, allowed) = check_words(cell, pair, clock, cost, unpack, pack);
                LimitsDecision::of(decisions, allowed)
            }
            // By its count, so that every limit's decision has a fixed place.
            Cells::Chain(cells) => match algorithms.len() {
                // Only the should-fail model chains two limits (`loom_racy::limits_chained`);
                // outside loom builds the arm is not compiled, so the chain's code stays two copies.
                #[cfg(kova_loom)]
                2 => check_chain(cells, exactly::<W, 2>(algorithms), clock, cost),
                3 => check_chain(cells, exactly::<W, 3>(algorithms), clock, cost),
                _ => check_chain(cells, exactly::<W, 4>(algorithms), clock, cost),
            },
        }
    }

    /// Charges up to `cost` units to every limit whatever its state
    /// ([`WordAlgorithm::charge`]: what is left, then the overdraft): the units each took.
    #[expect(
        clippy::indexing_slicing,
        reason = "the cells were built for exactly these algorithms: Cells::One for one limit, Pair for two (one 128-bit word), Chain for 3 or 4 (one word each)"
    )]
    pub(super) fn charge<W: WordAlgorithm, C: Clock + ?Sized>(
        &self,
        algorithms: &[W],
        clock: &C,
        cost: u64,
    ) -> [u64; MAX_LIMITS] {
        let mut charged = [0; MAX_LIMITS];
        match self {
            Cells::One(cell) => {
                charged[0] = update_word(cell, clock, |word, now| algorithms[0].charge(word, now, cost));
            }
            Cells::Pair(cell) => {
                let Charged([a, b]) = update_word(cell, clock, |pair, now| {
                    let [a, b] = unpack(pair);
                    let ((charged_a, a), (charged_b, b)) =
                        (algorithms[0].charge(a, now, cost), algorithms[1].charge(b, now, cost));
                    (Charged([charged_a, charged_b]), pack([a, b]))
                });
                charged[..2].copy_from_slice(&[a, b]);
            }
            Cells::Chain(cells) => {
                for (i, (algorithm, cell)) in algorithms.iter().zip(cells.iter()).enumerate() {
                    charged[i] = update_word(cell, clock, |word, now| algorithm.charge(word, now, cost));
                }
            }
        }
        charged
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "the cells were built for exactly these algorithms: Cells::One for one limit, Pair for two (one 128-bit word), Chain for 3 or 4 (one word each)"
    )]
    pub(super) fn refund<W: WordAlgorithm, C: Clock + ?Sized>(&self, algorithms: &[W], clock: &C, cost: u64) {
        match self {
            Cells::One(cell) => {
                algorithms[0].refund_cell(cell, clock, cost);
            }
            Cells::Pair(cell) => {
                update_word(cell, clock, |pair, now| {
                    let [a, b] = unpack(pair);
                    ((), pack([algorithms[0].refund(a, now, cost), algorithms[1].refund(b, now, cost)]))
                });
            }
            Cells::Chain(cells) => {
                for (algorithm, cell) in algorithms.iter().zip(cells.iter()) {
                    algorithm.refund_cell(cell, clock, cost);
                }
            }
        }
    }
}

impl Cells {
    /// Every limit's word back to fresh.
    #[expect(
        clippy::indexing_slicing,
        reason = "the cells were built for exactly these algorithms: Cells::One for one limit, Pair for two (one 128-bit word), Chain for 3 or 4 (one word each)"
    )]
    pub(super) fn reset<W: WordAlgorithm>(&self, algorithms: &[W]) {
        // Release, as a check's CAS: a reader that sees the fresh state sees what came before.
        match self {
            Cells::One(cell) => cell.store(algorithms[0].fresh_word(), Ordering::Release),
            Cells::Pair(cell) => {
                cell.store(pack([algorithms[0].fresh_word(), algorithms[1].fresh_word()]), Ordering::Release)
            }
            Cells::Chain(cells) => {
                for (algorithm, cell) in algorithms.iter().zip(cells.iter()) {
                    cell.store(algorithm.fresh_word(), Ordering::Release);
                }
            }
        }
    }

    /// Whether every limit's word is indistinguishable from fresh at `now`.
    #[expect(
        clippy::indexing_slicing,
        reason = "the cells were built for exactly these algorithms: Cells::One for one limit, Pair for two (one 128-bit word), Chain for 3 or 4 (one word each)"
    )]
    pub(super) fn is_idle<W: WordAlgorithm>(&self, algorithms: &[W], now: u64) -> bool {
        // Acquire: pairs with the Release of the check that wrote the word.
        match self {
            Cells::One(cell) => algorithms[0].is_idle_word(cell.load(Ordering::Acquire), now),
            Cells::Pair(cell) => {
                let [a, b] = unpack(cell.load(Ordering::Acquire));
                algorithms[0].is_idle_word(a, now) && algorithms[1].is_idle_word(b, now)
            }
            Cells::Chain(cells) => algorithms
                .iter()
                .zip(cells.iter())
                .all(|(algorithm, cell)| algorithm.is_idle_word(cell.load(Ordering::Acquire), now)),
        }
    }
}

/// Check then refund over exactly `N` limits: each limit by its own CAS loop, in order; on a
/// denial the limits already charged get their units back before returning ([`undo_chain`]).
// Each index in `step!` is a constant below `N` (the step's guard), a chain's count, at most
// `MAX_LIMITS`: no index can fail.
#[inline(always)]
fn check_chain<W: WordAlgorithm, C: Clock + ?Sized, const N: usize>(
    cells: &[AtomicU64; MAX_LIMITS],
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
) -> LimitsDecision {
    let mut decisions = [NONE; MAX_LIMITS];
    // Unrolled by hand, each limit at a constant index: in a loop over a runtime index the
    // decisions would live in memory, each written field by field and read back whole, a
    // store-forwarding stall per limit.
    macro_rules! step {
        ($i:literal) => {
            if $i < N {
                let one = std::array::from_ref(&algorithms[$i]);
                let ([decision], allowed) =
                    check_words(&cells[$i], one, clock, cost, |word| [word], |[word]| word);
                if !allowed {
                    return LimitsDecision::of(
                        undo_chain(cells, algorithms, clock, cost, $i, decision),
                        false,
                    );
                }
                decisions[$i] = decision;
            }
        };
    }
    step!(0);
    step!(1);
    step!(2);
    step!(3);
    LimitsDecision::new(decisions, N, true)
}

/// A chain's denial by limit `denied` (which decided `denial`): the limits before it get their
/// units back, and every other limit's decision becomes what it would say now (the later ones
/// were never charged, the earlier ones have just been refunded; only `denied` is known to
/// deny, a peek for those that admit). Out of line, returning the decisions by value: the hot
/// path's own decisions never have their address taken, so they stay in registers.
#[cold]
#[inline(never)]
#[expect(
    clippy::indexing_slicing,
    reason = "j and denied run below N, a chain's count (2 to 4, at most MAX_LIMITS, each array's length)"
)]
fn undo_chain<W: WordAlgorithm, C: Clock + ?Sized, const N: usize>(
    cells: &[AtomicU64; MAX_LIMITS],
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
    denied: usize,
    denial: Decision,
) -> [Decision; N] {
    for j in 0..denied {
        algorithms[j].refund_cell(&cells[j], clock, cost);
    }
    let now = clock.now_nanos();
    std::array::from_fn(|j| {
        if j == denied {
            return denial;
        }
        // Acquire as in `decide_cell`: the clock read above is no older than the writer's.
        let word = cells[j].load(Ordering::Acquire);
        let (decision, _) = algorithms[j].decide(word, now, cost);
        if decision.is_allowed() {
            algorithms[j].decide(word, now, 0).0
        } else {
            decision
        }
    })
}
