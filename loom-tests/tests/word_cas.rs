//! Loom models of the single-word CAS loop (`algorithm/word.rs`), one set per algorithm.
//!
//! Every model runs the real `check_cell` (what `RateLimiter::check_n` runs) and asserts, in every
//! interleaving up to the preemption bound: the admitted total within the algorithm's bound, a
//! linearization through the algorithm's pure `decide` that reproduces every decision and the final
//! word (no update lost), and, where the clock is still during the concurrent part, the same
//! against the reference model. See `kova_loom_tests::harness`.
//!
//! All quotas are 3 units per 3 us (emission interval 1 us): small numbers, so interleavings matter.
#![cfg(kova_loom)]

use kova::{FixedWindow, Gcra, Quota, SlidingWindowCounter, TokenBucket};
use kova_loom_tests::harness::{check_plan, real_check, LoomAlgorithm, Plan, Pre};

fn quota() -> Quota {
    Quota::from_nanos(3, 3_000).unwrap()
}

/// Two threads, demand 4 > capacity 3, one thread checking twice: which calls win depends on the
/// order; the loser's remaining / retry_after must match that order.
fn contention<A: LoomAlgorithm>() {
    check_plan::<A>(
        Plan { quota: quota(), prelude: vec![], threads: vec![vec![2, 1], vec![1]], advancer: vec![] },
        real_check::<A>,
    );
}

/// Three threads with costs 1, 1, 2 on a full limiter.
fn three_threads<A: LoomAlgorithm>() {
    check_plan::<A>(
        Plan { quota: quota(), prelude: vec![], threads: vec![vec![1], vec![1], vec![2]], advancer: vec![] },
        real_check::<A>,
    );
}

/// Drained, then the clock advanced before two threads contend for what came back.
fn advanced_between<A: LoomAlgorithm>(prelude: Vec<Pre>, threads: Vec<Vec<u64>>) {
    check_plan::<A>(Plan { quota: quota(), prelude, threads, advancer: vec![] }, real_check::<A>);
}

/// The clock advanced by a third thread while two threads check: each call may read any time it
/// could have seen, and a call may be linearized after one that read a later time.
fn advanced_during<A: LoomAlgorithm>(prelude: Vec<Pre>, threads: Vec<Vec<u64>>, advancer: Vec<u64>) {
    check_plan::<A>(Plan { quota: quota(), prelude, threads, advancer }, real_check::<A>);
}

mod gcra {
    use super::*;

    #[test]
    fn contention() {
        super::contention::<Gcra>();
    }

    #[test]
    fn three_threads() {
        super::three_threads::<Gcra>();
    }

    #[test]
    fn advanced_between() {
        // 2.5 intervals after draining: 2 units back, half a unit of progress.
        super::advanced_between::<Gcra>(vec![Pre::Check(3), Pre::Advance(2_500)], vec![vec![2], vec![1]]);
    }

    #[test]
    fn advanced_during() {
        super::advanced_during::<Gcra>(vec![Pre::Check(3)], vec![vec![1], vec![2]], vec![1_000, 1_000]);
    }
}

mod token_bucket {
    use super::*;

    #[test]
    fn contention() {
        super::contention::<TokenBucket>();
    }

    #[test]
    fn three_threads() {
        super::three_threads::<TokenBucket>();
    }

    #[test]
    fn advanced_between() {
        super::advanced_between::<TokenBucket>(
            vec![Pre::Check(3), Pre::Advance(2_500)],
            vec![vec![2], vec![1]],
        );
    }

    #[test]
    fn advanced_during() {
        super::advanced_during::<TokenBucket>(
            vec![Pre::Check(3)],
            vec![vec![1], vec![2]],
            vec![1_000, 1_000],
        );
    }
}

mod fixed_window {
    use super::*;

    #[test]
    fn contention() {
        super::contention::<FixedWindow>();
    }

    #[test]
    fn three_threads() {
        super::three_threads::<FixedWindow>();
    }

    #[test]
    fn advanced_between() {
        // One unit left at the window's last nanosecond.
        super::advanced_between::<FixedWindow>(
            vec![Pre::Check(2), Pre::Advance(2_999)],
            vec![vec![1], vec![1]],
        );
    }

    #[test]
    fn advanced_during() {
        // The window edge passes while the threads check: up to 2x the limit across it, by design.
        super::advanced_during::<FixedWindow>(
            vec![Pre::Check(2), Pre::Advance(2_999)],
            vec![vec![1], vec![2]],
            vec![1],
        );
    }
}

mod sliding_window_counter {
    use super::*;

    #[test]
    fn contention() {
        super::contention::<SlidingWindowCounter>();
    }

    #[test]
    fn three_threads() {
        super::three_threads::<SlidingWindowCounter>();
    }

    #[test]
    fn advanced_between() {
        // A third into the next window: the previous 3 weigh 2, so one unit fits.
        super::advanced_between::<SlidingWindowCounter>(
            vec![Pre::Check(3), Pre::Advance(4_000)],
            vec![vec![1], vec![1]],
        );
    }

    #[test]
    fn advanced_during() {
        super::advanced_during::<SlidingWindowCounter>(
            vec![Pre::Check(3), Pre::Advance(3_000)],
            vec![vec![1], vec![1]],
            vec![1_000, 1_000],
        );
    }
}
