//! Where a composite keeps its limits' words, and the two protocols over them: one link, one
//! compare-and-swap over every word (one or two limits), or two links checked then refunded
//! (three or four limits: the first two in one 128-bit word, the rest in a second word).

use super::link::{self, Link, Sight};
use super::seen::Seen;
use super::MAX_LIMITS;
use crate::loom::atomic::AtomicU64;
use crate::loom::AtomicU128;
use crate::{Clock, WordAlgorithm};

pub(crate) enum Cells {
    One(AtomicU64),
    /// Limit 0's word in the low half, limit 1's in the high half.
    Pair(AtomicU128),
    /// Three limits: 0 and 1 as a pair, then 2.
    PairThenOne(AtomicU128, AtomicU64),
    /// Four limits: 0 and 1 as a pair, then 2 and 3 as a pair.
    TwoPairs(AtomicU128, AtomicU128),
    /// Two limits checked then refunded, one word each, instead of one pair: only the loom
    /// models' should-fail twin builds it (`loom_racy::limits_chained`).
    Chained(AtomicU64, AtomicU64),
}

/// The first `N` algorithms, as an array (the composite holds exactly `N` where its cells hold
/// that many).
#[inline(always)]
#[expect(
    clippy::expect_used,
    reason = "callers pass exactly N algorithms: every variant of Cells is built for its count of limits"
)]
fn exactly<W, const N: usize>(algorithms: &[W]) -> &[W; N] {
    algorithms.try_into().expect("the cells were built for this many limits")
}

/// `algorithms` cut after the first `A`, as arrays of `A` and `B`.
#[inline(always)]
fn cut<W, const A: usize, const B: usize>(algorithms: &[W]) -> (&[W; A], &[W; B]) {
    let (head, tail) = algorithms.split_at(A.min(algorithms.len()));
    (exactly(head), exactly(tail))
}

impl Cells {
    /// Fresh cells for `algorithms` (1 to [`MAX_LIMITS`]); `chained`: two limits checked then
    /// refunded (the should-fail twin).
    pub(super) fn new<W: WordAlgorithm>(algorithms: &[W], chained: bool) -> Self {
        match algorithms.len() {
            1 => Cells::One(link::fresh(exactly::<W, 1>(algorithms))),
            2 if chained => {
                let (first, second) = cut::<W, 1, 1>(algorithms);
                Cells::Chained(link::fresh(first), link::fresh(second))
            }
            2 => Cells::Pair(link::fresh(exactly::<W, 2>(algorithms))),
            3 => {
                let (first, second) = cut::<W, 2, 1>(algorithms);
                Cells::PairThenOne(link::fresh(first), link::fresh(second))
            }
            _ => {
                let (first, second) = cut::<W, 2, 2>(algorithms);
                Cells::TwoPairs(link::fresh(first), link::fresh(second))
            }
        }
    }

    /// Checks `cost` units against every limit, all or nothing: what the check saw, from which
    /// its answer follows ([`Seen::answer`]).
    #[inline(always)]
    pub(super) fn check<W: WordAlgorithm, C: Clock + ?Sized>(
        &self,
        algorithms: &[W],
        clock: &C,
        cost: u64,
    ) -> Seen {
        match self {
            Cells::One(cell) => {
                let sight = link::check(cell, exactly::<W, 1>(algorithms), clock, cost);
                Seen::of(sight, Sight::NONE, sight.admitted)
            }
            // Both words decided together and swapped in one 128-bit CAS: the composite is
            // exactly the sequential one.
            Cells::Pair(cell) => {
                let sight = link::check(cell, exactly::<W, 2>(algorithms), clock, cost);
                Seen::of(sight, Sight::NONE, sight.admitted)
            }
            Cells::PairThenOne(first, second) => {
                check_then_refund::<_, _, W, C, 2, 1>(first, second, algorithms, clock, cost)
            }
            Cells::TwoPairs(first, second) => {
                check_then_refund::<_, _, W, C, 2, 2>(first, second, algorithms, clock, cost)
            }
            Cells::Chained(first, second) => {
                check_then_refund::<_, _, W, C, 1, 1>(first, second, algorithms, clock, cost)
            }
        }
    }

    /// Charges up to `cost` units to every limit whatever its state
    /// ([`WordAlgorithm::charge`]: what is left, then the overdraft): the units each took.
    pub(super) fn charge<W: WordAlgorithm, C: Clock + ?Sized>(
        &self,
        algorithms: &[W],
        clock: &C,
        cost: u64,
    ) -> [u64; MAX_LIMITS] {
        fn both<const A: usize, const B: usize>(first: [u64; A], second: [u64; B]) -> [u64; MAX_LIMITS] {
            let mut all = [0; MAX_LIMITS];
            for (place, charged) in all.iter_mut().zip(first.into_iter().chain(second)) {
                *place = charged;
            }
            all
        }
        match self {
            Cells::One(cell) => both(link::charge(cell, exactly::<W, 1>(algorithms), clock, cost), []),
            Cells::Pair(cell) => both(link::charge(cell, exactly::<W, 2>(algorithms), clock, cost), []),
            Cells::PairThenOne(first, second) => {
                let (a, b) = cut::<W, 2, 1>(algorithms);
                both(link::charge(first, a, clock, cost), link::charge(second, b, clock, cost))
            }
            Cells::TwoPairs(first, second) => {
                let (a, b) = cut::<W, 2, 2>(algorithms);
                both(link::charge(first, a, clock, cost), link::charge(second, b, clock, cost))
            }
            Cells::Chained(first, second) => {
                let (a, b) = cut::<W, 1, 1>(algorithms);
                both(link::charge(first, a, clock, cost), link::charge(second, b, clock, cost))
            }
        }
    }

    /// Gives `cost` units back to every limit (see [`WordAlgorithm::refund`]).
    pub(super) fn refund<W: WordAlgorithm, C: Clock + ?Sized>(&self, algorithms: &[W], clock: &C, cost: u64) {
        match self {
            Cells::One(cell) => link::refund(cell, exactly::<W, 1>(algorithms), clock, cost),
            Cells::Pair(cell) => link::refund(cell, exactly::<W, 2>(algorithms), clock, cost),
            Cells::PairThenOne(first, second) => {
                let (a, b) = cut::<W, 2, 1>(algorithms);
                link::refund(first, a, clock, cost);
                link::refund(second, b, clock, cost);
            }
            Cells::TwoPairs(first, second) => {
                let (a, b) = cut::<W, 2, 2>(algorithms);
                link::refund(first, a, clock, cost);
                link::refund(second, b, clock, cost);
            }
            Cells::Chained(first, second) => {
                let (a, b) = cut::<W, 1, 1>(algorithms);
                link::refund(first, a, clock, cost);
                link::refund(second, b, clock, cost);
            }
        }
    }

    /// Every limit's word back to fresh.
    pub(super) fn reset<W: WordAlgorithm>(&self, algorithms: &[W]) {
        match self {
            Cells::One(cell) => link::reset(cell, exactly::<W, 1>(algorithms)),
            Cells::Pair(cell) => link::reset(cell, exactly::<W, 2>(algorithms)),
            Cells::PairThenOne(first, second) => {
                let (a, b) = cut::<W, 2, 1>(algorithms);
                link::reset(first, a);
                link::reset(second, b);
            }
            Cells::TwoPairs(first, second) => {
                let (a, b) = cut::<W, 2, 2>(algorithms);
                link::reset(first, a);
                link::reset(second, b);
            }
            Cells::Chained(first, second) => {
                let (a, b) = cut::<W, 1, 1>(algorithms);
                link::reset(first, a);
                link::reset(second, b);
            }
        }
    }

    /// Whether every limit's word is indistinguishable from fresh at `now`.
    pub(super) fn is_idle<W: WordAlgorithm>(&self, algorithms: &[W], now: u64) -> bool {
        match self {
            Cells::One(cell) => link::is_idle(cell, exactly::<W, 1>(algorithms), now),
            Cells::Pair(cell) => link::is_idle(cell, exactly::<W, 2>(algorithms), now),
            Cells::PairThenOne(first, second) => {
                let (a, b) = cut::<W, 2, 1>(algorithms);
                link::is_idle(first, a, now) && link::is_idle(second, b, now)
            }
            Cells::TwoPairs(first, second) => {
                let (a, b) = cut::<W, 2, 2>(algorithms);
                link::is_idle(first, a, now) && link::is_idle(second, b, now)
            }
            Cells::Chained(first, second) => {
                let (a, b) = cut::<W, 1, 1>(algorithms);
                link::is_idle(first, a, now) && link::is_idle(second, b, now)
            }
        }
    }
}

/// Check then refund over two links, of `A` and `B` limits: the first link's limits by one CAS,
/// then the second's; when the second denies, the first gets its units back before returning
/// ([`undo_first`]). Nothing is ever admitted beyond any limit's bound, and a denial has taken
/// nothing once it returns; while it runs, the units it took from the first link are held.
#[inline(always)]
fn check_then_refund<L0, L1, W, C, const A: usize, const B: usize>(
    first: &L0,
    second: &L1,
    algorithms: &[W],
    clock: &C,
    cost: u64,
) -> Seen
where
    L0: Link<A>,
    L1: Link<B>,
    W: WordAlgorithm,
    C: Clock + ?Sized,
{
    let (head, tail) = cut::<W, A, B>(algorithms);
    let decided = link::check(first, head, clock, cost);
    if !decided.admitted {
        // Nothing was taken: the second link as it stands now.
        return Seen::of(decided, link::look(second, clock.now_nanos()), false);
    }
    let then = link::check(second, tail, clock, cost);
    if !then.admitted {
        return Seen::of(undo_first(first, head, clock, cost, &decided), then, false);
    }
    Seen::of(decided, then, true)
}

/// The second link's denial: the first link's limits get back what the check that saw
/// `charged` took ([`link::undo`]), and are looked at as they stand now. Out of line: the hit
/// path stays small.
#[cold]
#[inline(never)]
fn undo_first<L: Link<N>, W: WordAlgorithm, C: Clock + ?Sized, const N: usize>(
    cell: &L,
    algorithms: &[W; N],
    clock: &C,
    cost: u64,
    charged: &Sight<N>,
) -> Sight<N> {
    link::undo(cell, algorithms, clock, cost, charged);
    link::look(cell, clock.now_nanos())
}

#[cfg(all(test, not(kova_loom)))]
mod tests {
    use super::*;
    use crate::{FixedWindow, Gcra, ManualClock, Quota, SlidingWindowCounter, TokenBucket};

    /// A check that charged the first link at `charged_at` and is undone at `undone_at`, after
    /// another check took `between` units there at `undone_at`: how many single units the first
    /// link then admits at `undone_at` and at each of `later`.
    fn admitted_after_an_undo<W: WordAlgorithm>(
        algorithms: [W; 2],
        cost: u64,
        charged_at: u64,
        undone_at: u64,
        between: u64,
        later: &[u64],
    ) -> u64 {
        let clock = ManualClock::starting_at(charged_at);
        let first: AtomicU128 = link::fresh(&algorithms);
        let charged = link::check(&first, &algorithms, &clock, cost);
        assert!(charged.admitted);
        clock.advance_nanos(undone_at - charged_at);
        assert!(link::check(&first, &algorithms, &clock, between).admitted);
        undo_first(&first, &algorithms, &clock, cost, &charged);
        let mut admitted = 0;
        for &at in std::iter::once(&undone_at).chain(later) {
            clock.advance_nanos(at - clock.now_nanos());
            while link::check(&first, &algorithms, &clock, 1).admitted {
                admitted += 1;
            }
        }
        admitted
    }

    const SECOND: u64 = 1_000_000_000;

    fn algorithms<W: WordAlgorithm>(quota: Quota) -> [W; 2] {
        [W::from_quota(quota).unwrap(), W::from_quota(Quota::per_second(1_000).unwrap()).unwrap()]
    }

    /// A check charged late in one window and undone in the next: the units of the check taken
    /// in the next window stay taken (2 a window: one more there, not two).
    #[test]
    fn an_undo_across_a_window_edge_keeps_the_new_windows_units() {
        let quota = Quota::per_second(2).unwrap();
        let fixed = algorithms::<FixedWindow>(quota);
        assert_eq!(admitted_after_an_undo(fixed, 1, 9 * SECOND / 10, SECOND, 1, &[]), 1);
        let counter = algorithms::<SlidingWindowCounter>(quota);
        // The undone unit no longer weighs in from the previous window: by the window's end the
        // other check's unit and one more make the window's two.
        assert_eq!(admitted_after_an_undo(counter, 1, 9 * SECOND / 10, SECOND, 1, &[2 * SECOND - 1]), 1);
    }

    /// A bucket (burst 3, one a second) charged 2 at 0 and undone at 1.5 s, after another check
    /// took 1 at 1.5 s: without the undone check the bucket was full until 1.5 s, so 2 are left,
    /// not 3 (the 1.5 s that refilled behind the charge are not credited again).
    #[test]
    fn an_undo_after_a_refill_gives_back_only_what_is_still_missing() {
        let quota = Quota::per_second(1).unwrap().with_burst(3).unwrap();
        let at = 3 * SECOND / 2;
        assert_eq!(admitted_after_an_undo(algorithms::<Gcra>(quota), 2, 0, at, 1, &[]), 2);
        assert_eq!(admitted_after_an_undo(algorithms::<TokenBucket>(quota), 2, 0, at, 1, &[]), 2);
    }

    /// A clock whose coarse reading trails its precise one, as the default clock's may.
    struct Lagging {
        coarse: std::sync::atomic::AtomicU64,
        precise: std::sync::atomic::AtomicU64,
    }

    impl crate::Clock for Lagging {
        fn now_nanos(&self) -> u64 {
            self.coarse.load(std::sync::atomic::Ordering::Relaxed)
        }

        fn now_nanos_precise(&self) -> u64 {
            self.precise.load(std::sync::atomic::Ordering::Relaxed)
        }

        fn max_lag_nanos(&self) -> u64 {
            4_000_000
        }
    }

    /// A check charged 10 of a burst of 10, then another check's near miss decided again on the
    /// precise time (ahead of every coarse reading) and admitted, then the first check undone on
    /// a coarse reading: how many single units the first link admits at the precise time.
    fn admitted_after_an_undo_behind_a_near_miss<W: WordAlgorithm>() -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let algorithms = algorithms::<W>(Quota::per_second(1_000_000).unwrap().with_burst(10).unwrap());
        let clock = Lagging { coarse: 0.into(), precise: 0.into() };
        let first: AtomicU128 = link::fresh(&algorithms);
        let charged = link::check(&first, &algorithms, &clock, 10);
        assert!(charged.admitted);
        clock.precise.store(500_000, Relaxed);
        assert!(link::check(&first, &algorithms, &clock, 10).admitted, "a near miss decided again");
        undo_first(&first, &algorithms, &clock, 10, &charged);
        clock.coarse.store(500_000, Relaxed);
        let mut admitted = 0;
        while link::check(&first, &algorithms, &clock, 1).admitted {
            admitted += 1;
        }
        admitted
    }

    /// At the precise time the undone check's units had refilled behind the second check's
    /// charge: nothing comes back, as an undo that reads the precise time sees.
    #[test]
    fn an_undo_behind_a_near_miss_on_the_precise_time_gives_back_nothing_it_absorbed() {
        assert_eq!(admitted_after_an_undo_behind_a_near_miss::<Gcra>(), 0);
        assert_eq!(admitted_after_an_undo_behind_a_near_miss::<TokenBucket>(), 0);
    }

    /// Undone at once, with nothing in between: every algorithm is back as it was.
    #[test]
    fn an_undo_at_once_gives_everything_back() {
        let quota = Quota::per_second(3).unwrap();
        assert_eq!(admitted_after_an_undo(algorithms::<Gcra>(quota), 2, 0, 0, 0, &[]), 3);
        assert_eq!(admitted_after_an_undo(algorithms::<TokenBucket>(quota), 2, 0, 0, 0, &[]), 3);
        assert_eq!(admitted_after_an_undo(algorithms::<FixedWindow>(quota), 2, 0, 0, 0, &[]), 3);
        assert_eq!(admitted_after_an_undo(algorithms::<SlidingWindowCounter>(quota), 2, 0, 0, 0, &[]), 3);
    }
}
