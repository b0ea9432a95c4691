//! What a composite's check saw, from which its answer follows: each limit's word as decided on
//! and the clock reading it was decided at, whether the whole check was admitted, and the cost.
//!
//! A limit's decision is a function of its word, the time and the cost alone
//! ([`WordAlgorithm::decide`]), so the check's compare-and-swap loop carries only the words it
//! already holds and each limit's decision is worked out from them afterwards
//! ([`Seen::answer`]), outside the span between the loop's load and its compare-and-swap.
//! Inlined into a caller that reads only [`LimitsDecision::is_allowed`], the decisions are never
//! built at all; a keyed composite's answer passes through its table's hit and slow paths as
//! these few words rather than as four decisions.

use super::link::{Sight, NONE};
use super::{LimitsDecision, MAX_LIMITS};
use crate::{Decision, WordAlgorithm};

/// What a composite's check saw of its limits (see the module docs). Kept to a few words: a
/// keyed composite's passes through memory between its table's paths.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    /// Each limit's word, as the check decided on it (or looked at it, for a link the check
    /// did not charge or has given back).
    words: [u64; MAX_LIMITS],
    /// The clock reading each link's words were decided at.
    nows: [u64; 2],
    /// How many limits the first link holds (the rest are the second's).
    first: u8,
    allowed: bool,
}

impl Seen {
    /// What two links saw, in the composite's order (`B` is 0 for a composite of one link).
    /// `allowed`: whether the whole check was admitted, every limit of both links charged.
    #[inline(always)]
    #[expect(
        clippy::indexing_slicing,
        reason = "A + B limits, at most MAX_LIMITS (checked at compile time), fill the first A + B places"
    )]
    pub(super) fn of<const A: usize, const B: usize>(
        first: Sight<A>,
        second: Sight<B>,
        allowed: bool,
    ) -> Self {
        const { assert!(A >= 1 && A + B <= MAX_LIMITS) };
        let mut words = [0; MAX_LIMITS];
        for (i, word) in first.words.into_iter().enumerate() {
            words[i] = word;
        }
        for (i, word) in second.words.into_iter().enumerate() {
            words[A + i] = word;
        }
        // At most MAX_LIMITS.
        let first_len = A as u8;
        Seen { words, nows: [first.now, second.now], first: first_len, allowed }
    }

    /// Whether every limit admitted the check.
    #[inline(always)]
    pub(crate) fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// The answer to `cost` units, given the composite's `algorithms` (those the check ran):
    /// admitted, each limit's decision of the cost; denied, each denying limit's denial and a
    /// peek of every other (nothing was taken).
    #[inline(always)]
    pub(crate) fn answer<W: WordAlgorithm>(&self, algorithms: &[W], cost: u64) -> LimitsDecision {
        // Spelled out per count, each decision at a fixed place: built in registers, and a
        // place the caller never reads is never built. No arm can panic, so a caller that reads
        // only `is_allowed` keeps none of this.
        let allowed = self.allowed;
        match algorithms {
            [a] => LimitsDecision::of([self.decision(a, 0, cost)], allowed),
            [a, b] => LimitsDecision::of([self.decision(a, 0, cost), self.decision(b, 1, cost)], allowed),
            [a, b, c] => {
                let each = [self.decision(a, 0, cost), self.decision(b, 1, cost), self.decision(c, 2, cost)];
                LimitsDecision::of(each, allowed)
            }
            [a, b, c, d, ..] => {
                let each = [
                    self.decision(a, 0, cost),
                    self.decision(b, 1, cost),
                    self.decision(c, 2, cost),
                    self.decision(d, 3, cost),
                ];
                LimitsDecision::of(each, allowed)
            }
            // A composite has at least one limit (its constructors refuse an empty list).
            [] => LimitsDecision::of([NONE], allowed),
        }
    }

    /// Limit `i`'s decision of `cost` units, by `algorithm`.
    #[inline(always)]
    #[expect(clippy::indexing_slicing, reason = "callers pass a limit's place, below MAX_LIMITS")]
    fn decision<W: WordAlgorithm>(&self, algorithm: &W, i: usize, cost: u64) -> Decision {
        let now = self.nows[usize::from(i >= usize::from(self.first))];
        let word = self.words[i];
        let (decision, _) = algorithm.decide(word, now, cost);
        if self.allowed || !decision.is_allowed() {
            decision
        } else {
            algorithm.decide(word, now, 0).0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Gcra, Quota};

    fn gcra(per_second: u64) -> Gcra {
        <Gcra as WordAlgorithm>::from_quota(Quota::per_second(per_second).unwrap()).unwrap()
    }

    /// Each limit is decided at its own link's time, on its own word: the second link's limit
    /// at the second reading, not the first link's.
    #[test]
    fn each_limit_is_decided_on_its_word_at_its_links_time() {
        // The slowest limit last: its state still depends on the time at 80 ms.
        let algorithms = [gcra(1_000), gcra(100), gcra(10)];
        let fresh = algorithms.each_ref().map(WordAlgorithm::fresh_word);
        // Spend some of each limit at t = 0, then look at the pair at 50 ms and the third at 80 ms.
        let spent: [u64; 3] = std::array::from_fn(|i| algorithms[i].decide(fresh[i], 0, 5).1);
        let (t1, t2) = (50_000_000, 80_000_000);
        let first = Sight { words: [spent[0], spent[1]], now: t1, admitted: true };
        let second = Sight { words: [spent[2]], now: t2, admitted: true };
        let answer = Seen::of(first, second, true).answer(&algorithms, 2);
        let expected: Vec<Decision> = [(0, t1), (1, t1), (2, t2)]
            .into_iter()
            .map(|(i, now)| algorithms[i].decide(spent[i], now, 2).0)
            .collect();
        assert_eq!(answer.limit_decisions(), expected.as_slice());
        assert!(answer.is_allowed());
    }

    /// Denied: a denying limit gives its denial, an admitting one a peek (it took nothing).
    #[test]
    fn a_denial_answers_with_the_denials_and_peeks_of_the_others() {
        let algorithms = [gcra(1_000), gcra(2)];
        let fresh = algorithms.each_ref().map(WordAlgorithm::fresh_word);
        let empty = algorithms[1].decide(fresh[1], 0, 2).1;
        let first = Sight { words: [fresh[0], empty], now: 0, admitted: false };
        let answer = Seen::of(first, Sight::NONE, false).answer(&algorithms, 1);
        let each = answer.limit_decisions();
        assert_eq!(each[0], algorithms[0].decide(fresh[0], 0, 0).0, "a peek: nothing taken");
        assert_eq!(each[0].remaining(), 1_000);
        assert!(!each[1].is_allowed());
        assert_eq!(each[1], algorithms[1].decide(empty, 0, 1).0);
        assert_eq!((answer.is_allowed(), answer.decided_by()), (false, 1));
    }
}
