//! Where a composite keeps its limits' words, and the two protocols over them: one CAS over every
//! word (one or two limits), or check then refund (three or four).

use super::{LimitsDecision, MAX_LIMITS};
use crate::cas::update_word;
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::AtomicU128;
use crate::{Algorithm, Clock, Decision, WordAlgorithm};

pub(super) enum Cells {
    One(AtomicU64),
    /// Limit 0's word in the low half, limit 1's in the high half.
    Pair(AtomicU128),
    Chain(Box<[AtomicU64]>),
}

/// A placeholder for the unused places of a decision array.
pub(super) const NONE: Decision = Decision::allowed(0, 0, 0);

fn pack(words: [u64; 2]) -> u128 {
    u128::from(words[0]) | (u128::from(words[1]) << 64)
}

fn unpack(pair: u128) -> [u64; 2] {
    // Truncation keeps each half.
    [pair as u64, (pair >> 64) as u64]
}

/// The sequential composite over plain words: every limit decides `cost` at `now`; if all admit,
/// every word takes it; otherwise nothing changes and the admitting limits report a peek.
fn decide_all<W: WordAlgorithm>(algorithms: &[W], words: &mut [u64], now: u64, cost: u64) -> LimitsDecision {
    let mut decisions = [NONE; MAX_LIMITS];
    let mut new = [0u64; MAX_LIMITS];
    let mut allowed = true;
    for (i, (algorithm, &word)) in algorithms.iter().zip(words.iter()).enumerate() {
        let (decision, word) = algorithm.decide(word, now, cost);
        allowed &= decision.is_allowed();
        decisions[i] = decision;
        new[i] = word;
    }
    if allowed {
        words.copy_from_slice(&new[..words.len()]);
    } else {
        for (i, (algorithm, &word)) in algorithms.iter().zip(words.iter()).enumerate() {
            if decisions[i].is_allowed() {
                decisions[i] = algorithm.decide(word, now, 0).0;
            }
        }
    }
    LimitsDecision::new(decisions, algorithms.len(), allowed)
}

impl Cells {
    pub(super) fn new<W: WordAlgorithm>(algorithms: &[W], chained: bool) -> Self {
        match algorithms {
            [one] if !chained => Cells::One(AtomicU64::new(one.fresh_word())),
            [a, b] if !chained => Cells::Pair(AtomicU128::new(pack([a.fresh_word(), b.fresh_word()]))),
            all => Cells::Chain(all.iter().map(|a| AtomicU64::new(a.fresh_word())).collect()),
        }
    }

    pub(super) fn check<W: WordAlgorithm, C: Clock>(
        &self,
        algorithms: &[W],
        clock: &C,
        cost: u64,
    ) -> LimitsDecision {
        match self {
            Cells::One(cell) => update_word(cell, clock, |word, now| {
                let mut words = [word];
                let decision = decide_all(algorithms, &mut words, now, cost);
                (decision, words[0])
            }),
            Cells::Pair(cell) => check_pair(cell, algorithms, clock, cost),
            Cells::Chain(cells) => check_chain(cells, algorithms, clock, cost),
        }
    }

    pub(super) fn refund<W: WordAlgorithm, C: Clock>(&self, algorithms: &[W], clock: &C, cost: u64) {
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

/// Both words decided together and swapped in one 128-bit CAS: the composite is exactly the
/// sequential one.
fn check_pair<W: WordAlgorithm, C: Clock>(
    cell: &AtomicU128,
    algorithms: &[W],
    clock: &C,
    cost: u64,
) -> LimitsDecision {
    update_word(cell, clock, |pair, now| {
        let mut words = unpack(pair);
        let decision = decide_all(algorithms, &mut words, now, cost);
        (decision, pack(words))
    })
}

/// Check then refund: each limit by its own CAS loop, in order; on a denial the limits already
/// charged get their units back before returning.
fn check_chain<W: WordAlgorithm, C: Clock>(
    cells: &[AtomicU64],
    algorithms: &[W],
    clock: &C,
    cost: u64,
) -> LimitsDecision {
    let n = algorithms.len();
    let mut decisions = [NONE; MAX_LIMITS];
    for i in 0..n {
        let decision = algorithms[i].decide_cell(&cells[i], clock, cost);
        decisions[i] = decision;
        if decision.is_allowed() {
            continue;
        }
        for j in 0..i {
            algorithms[j].refund_cell(&cells[j], clock, cost);
        }
        // What every limit would say now: the later ones were never charged, the earlier ones
        // have just been refunded. Only limit `i` is known to deny; a peek for those that admit.
        let now = clock.now_nanos();
        for j in (0..n).filter(|&j| j != i) {
            // Acquire as in `decide_cell`: the clock read above is no older than the writer's.
            let word = cells[j].load(Ordering::Acquire);
            let (decision, _) = algorithms[j].decide(word, now, cost);
            decisions[j] =
                if decision.is_allowed() { algorithms[j].decide(word, now, 0).0 } else { decision };
        }
        return LimitsDecision::new(decisions, n, false);
    }
    LimitsDecision::new(decisions, n, true)
}
