//! Settling an estimate however late (`estimate` / `settle_estimate`) on a ManualClock: the units
//! a request really used are counted at the time of its check, and over random schedules of
//! checks, estimates and settlements in any order, GCRA keeps its bound and a fixed window its
//! limit per window. A refund that came too late to count (a window ended, units refilled)
//! gives nothing back; one made at once gives back all of the difference, as `settle` does.

use std::collections::BTreeMap;
use std::time::Duration;

use kova::limits::{KeyedLimits, Limits, LimitsEstimate};
use kova::reservation::{Estimate, Settlement};
use kova::{
    Clock, FixedWindow, Gcra, GiveBack, Keyed, ManualClock, Quota, RateLimiter, SlidingWindowCounter,
    TokenBucket, WordAlgorithm,
};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Check(u64),
    Estimate(u64),
    /// Settles the pending estimate at this index (modulo how many are pending) at `actual`.
    Settle(usize, u64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            (0u64..400).prop_map(Step::Advance),
            (1u64..8).prop_map(Step::Check),
            (1u64..12).prop_map(Step::Estimate),
            (0usize..8, 0u64..20).prop_map(|(at, actual)| Step::Settle(at, actual)),
        ],
        1..100,
    )
}

/// Runs `steps` on `limiter`, returning the units each request really used, at the time of its
/// check: a check's cost; an estimate's cost less what its settlement gave back (what it did not
/// give back counts as used); a settlement's extra charge, at the time of the settlement.
fn run<W: WordAlgorithm>(
    limiter: &RateLimiter<W, ManualClock>,
    clock: &ManualClock,
    steps: &[Step],
) -> Vec<(u64, i64)> {
    let mut used = Vec::new();
    let mut pending: Vec<(usize, Estimate)> = Vec::new();
    for step in steps {
        let now = clock.now_nanos();
        match *step {
            Step::Advance(ms) => clock.advance(Duration::from_millis(ms)),
            Step::Check(cost) => {
                if limiter.check_n(cost).is_ok_and(|d| d.is_allowed()) {
                    used.push((now, cost as i64));
                }
            }
            Step::Estimate(cost) => {
                if let Ok(estimate) = limiter.estimate(cost) {
                    if estimate.decision().is_allowed() {
                        used.push((now, cost as i64));
                        pending.push((used.len() - 1, estimate));
                    }
                }
            }
            Step::Settle(at, actual) => {
                if pending.is_empty() {
                    continue;
                }
                let (entry, estimate) = pending.remove(at % pending.len());
                let settled = limiter.settle_estimate(estimate, actual);
                assert!(settled.refunded <= estimate.taken().saturating_sub(actual), "{settled:?}");
                used[entry].1 -= settled.refunded as i64;
                if settled.charged > 0 {
                    used.push((now, settled.charged as i64));
                }
            }
        }
    }
    used.sort_by_key(|&(at, _)| at);
    used
}

proptest! {
    /// GCRA's bound holds for what requests really used: over any closed interval [a, b], at
    /// most `burst + overdraft + (b - a) / T`.
    #[test]
    fn gcra_keeps_its_bound_however_late_estimates_are_settled(
        burst in 1u64..12,
        overdraft in 0u64..10,
        steps in steps(),
    ) {
        const T: u64 = 100 * MS;
        let quota = Quota::per_second(10).unwrap().with_burst(burst).unwrap().with_overdraft(overdraft);
        let clock = ManualClock::new();
        let limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
        let used = run(&limiter, &clock, &steps);
        for (i, &(a, _)) in used.iter().enumerate() {
            let mut net = 0i64;
            for &(b, units) in &used[i..] {
                net += units;
                let bound = (burst + overdraft + (b - a) / T) as i64;
                prop_assert!(net <= bound, "{} used in [{}, {}], bound {}: {:?}", net, a, b, bound, used);
            }
        }
    }

    /// A fixed window admits at most its limit of what requests really used, in every window.
    #[test]
    fn a_fixed_window_keeps_its_limit_however_late_estimates_are_settled(steps in steps()) {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<FixedWindow, _>::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
        let mut per_window: BTreeMap<u64, i64> = BTreeMap::new();
        for (at, units) in run(&limiter, &clock, &steps) {
            *per_window.entry(at / (1_000 * MS)).or_default() += units;
        }
        prop_assert!(per_window.values().all(|&used| used <= 10), "{:?}", per_window);
    }

    /// A key of a table settles its estimates exactly as a direct limiter of the same quota.
    #[test]
    fn a_key_settles_estimates_as_a_direct_limiter(
        steps in prop::collection::vec((0u64..300, 1u64..10, 0u64..300, 0u64..20), 1..40),
    ) {
        let quota = Quota::per_second(10).unwrap().with_overdraft(5);
        let clock = ManualClock::new();
        let direct = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
        let table = Keyed::<u8, Gcra, _>::with_clock(quota, clock.clone()).unwrap();
        for (advance, cost, late, actual) in steps {
            clock.advance(Duration::from_millis(advance));
            let (direct_estimate, keyed_estimate) = (direct.estimate(cost).unwrap(), table.estimate(&7, cost).unwrap());
            prop_assert_eq!(keyed_estimate.decision(), direct_estimate.decision());
            clock.advance(Duration::from_millis(late));
            let settled = direct.settle_estimate(direct_estimate, actual);
            prop_assert_eq!(table.settle_estimate(&7, keyed_estimate, actual), settled);
            prop_assert_eq!(table.peek(&7), direct.peek());
        }
    }
}

/// Settled at once, every word algorithm gives back the whole difference, as `settle` does.
#[test]
fn settled_at_once_the_whole_difference_comes_back() {
    fn case<W: WordAlgorithm>() {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<W, _>::with_clock(Quota::per_second(10).unwrap(), clock).unwrap();
        let estimate = limiter.estimate(8).unwrap();
        assert_eq!(limiter.settle_estimate(estimate, 3), Settlement { refunded: 5, ..Settlement::default() });
        assert_eq!(limiter.peek().remaining(), 7, "{}", W::NAME);
    }
    case::<Gcra>();
    case::<TokenBucket>();
    case::<FixedWindow>();
    case::<SlidingWindowCounter>();
}

/// GCRA and the token bucket, 10 a second: 10 taken at 0, 5 at 500 ms (5 had refilled), and
/// the estimate of 10 settled at 0 then. Only the 5 units of it still counted come back: the
/// other 5 refilled long ago. `settle` gives back all 10, and 15 pass at one instant.
#[test]
fn a_late_settlement_gives_back_only_what_has_not_refilled() {
    fn case<W: WordAlgorithm>() {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<W, _>::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
        let estimate = limiter.estimate(10).unwrap();
        clock.advance(Duration::from_millis(500));
        assert!(limiter.check_n(5).unwrap().is_allowed(), "{}", W::NAME);
        assert_eq!(limiter.settle_estimate(estimate, 0).refunded, 5, "{}", W::NAME);
        assert_eq!(limiter.peek().remaining(), 5, "{}", W::NAME);
    }
    case::<Gcra>();
    case::<TokenBucket>();
}

/// A sliding window counter's estimate settled after its window ended gives nothing back: the
/// units would come off a later window's count.
#[test]
fn a_counter_settled_after_its_window_gives_nothing_back() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap();
    let limiter = RateLimiter::<SlidingWindowCounter, _>::with_clock(quota, clock.clone()).unwrap();
    clock.set(900 * MS);
    let estimate = limiter.estimate(10).unwrap();
    clock.set(1_100 * MS);
    assert_eq!(limiter.settle_estimate(estimate, 0), Settlement::default());
    // Within its window, it does.
    let limiter = RateLimiter::<SlidingWindowCounter, _>::with_clock(quota, clock.clone()).unwrap();
    let estimate = limiter.estimate(10).unwrap();
    clock.set(1_800 * MS);
    assert_eq!(limiter.settle_estimate(estimate, 4).refunded, 6);
}

/// A denied estimate took nothing: settling it charges the whole real cost.
#[test]
fn a_denied_estimate_charges_its_real_cost() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().with_overdraft(20);
    let limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock).unwrap();
    assert!(limiter.check_n(10).unwrap().is_allowed());
    let denied = limiter.estimate(4).unwrap();
    assert!(!denied.decision().is_allowed());
    assert_eq!(denied.taken(), 0);
    assert_eq!(limiter.settle_estimate(denied, 3), Settlement { refunded: 0, charged: 3, uncharged: 0 });
}

/// `Keyed::still_counted` answers under the key's own quota; for a key not held, 0, but for
/// the first check the doorkeeper admitted without holding the key (under the default quota).
/// An undo counts a unit partly refilled whole; a settlement does not.
#[test]
fn a_key_still_counts_under_its_own_quota() {
    let (settle, undo) = (GiveBack::Settle, GiveBack::Undo);
    let clock = ManualClock::new();
    let table = Keyed::<u8, Gcra, _>::with_clock(Quota::per_second(10).unwrap(), clock).unwrap();
    table.check_n_with_quota(&1, Quota::per_second(100).unwrap(), 1).unwrap();
    // 10 units at 10 ms each (its own quota), half of a 100 ms reset gone: 5 still count.
    assert_eq!(table.still_counted(&1, 10, 50 * MS, 100 * MS, settle), 5);
    assert_eq!(table.still_counted(&1, 10, 100 * MS, 100 * MS, settle), 0);
    // 1 ns after the check: 9 whole units still count, and a tenth all but 1 ns of it.
    assert_eq!(table.still_counted(&1, 10, 1, 100 * MS, settle), 9);
    assert_eq!(table.still_counted(&1, 10, 1, 100 * MS, undo), 10);
    assert_eq!(table.still_counted(&2, 1, 0, 100 * MS, undo), 0, "not held");
    assert!(table.check(&2).is_allowed(), "admitted at the door, not held");
    assert_eq!(table.still_counted(&2, 1, 0, 100 * MS, undo), 1);
}

proptest! {
    /// Several limits (10 a second and 30 a minute, fixed windows): however late estimates are
    /// settled, what requests really used stays within each limit in each of its windows; and
    /// a key of `KeyedLimits` settles as the direct composite.
    #[test]
    fn limits_keep_every_limit_however_late_estimates_are_settled(steps in steps()) {
        let clock = ManualClock::new();
        let quotas = [Quota::per_second(10).unwrap(), Quota::per_minute(30).unwrap()];
        let limits = Limits::<FixedWindow, _>::with_clock(quotas, clock.clone()).unwrap();
        let keyed = KeyedLimits::<u8, FixedWindow, _>::with_clock(quotas, clock.clone()).unwrap();
        let mut used: Vec<(u64, i64)> = Vec::new();
        let mut pending: Vec<(usize, LimitsEstimate, LimitsEstimate)> = Vec::new();
        for step in &steps {
            let now = clock.now_nanos();
            match *step {
                Step::Advance(ms) => clock.advance(Duration::from_millis(ms * 20)),
                Step::Check(cost) => {
                    let decision = limits.check_n(cost).unwrap();
                    prop_assert_eq!(keyed.check_n(&1, cost).unwrap(), decision);
                    if decision.is_allowed() {
                        used.push((now, cost as i64));
                    }
                }
                // Above the per-second limit's capacity: an error, taking nothing.
                Step::Estimate(cost) if cost > 10 => {}
                Step::Estimate(cost) => {
                    let (estimate, keyed_estimate) = (limits.estimate(cost).unwrap(), keyed.estimate(&1, cost).unwrap());
                    prop_assert_eq!(keyed_estimate.decision(), estimate.decision());
                    if estimate.decision().is_allowed() {
                        used.push((now, cost as i64));
                        pending.push((used.len() - 1, estimate, keyed_estimate));
                    }
                }
                Step::Settle(at, actual) => {
                    if pending.is_empty() {
                        continue;
                    }
                    let (entry, estimate, keyed_estimate) = pending.remove(at % pending.len());
                    let settled = limits.settle_estimate(estimate, actual);
                    prop_assert_eq!(keyed.settle_estimate(&1, keyed_estimate, actual), settled.clone());
                    used[entry].1 -= settled[0].refunded as i64;
                    let charged = settled.iter().map(|s| s.charged).min().unwrap_or(0);
                    if charged > 0 {
                        used.push((now, charged as i64));
                    }
                }
            }
        }
        let mut seconds: BTreeMap<u64, i64> = BTreeMap::new();
        let mut minutes: BTreeMap<u64, i64> = BTreeMap::new();
        for (at, units) in used {
            *seconds.entry(at / (1_000 * MS)).or_default() += units;
            *minutes.entry(at / (60_000 * MS)).or_default() += units;
        }
        prop_assert!(seconds.values().all(|&u| u <= 10), "{:?}", seconds);
        prop_assert!(minutes.values().all(|&u| u <= 30), "{:?}", minutes);
    }
}

/// A reset gives back everything, the estimate's units included: settling the estimate after
/// it gives back nothing more (GCRA 10 a second: the old rule gave 10 back on top, and 20 passed
/// at one instant). The same for a key of a table reset or removed, and after a quota change.
#[test]
fn nothing_comes_back_after_a_reset_or_a_quota_change() {
    let clock = ManualClock::new();
    let mut limiter =
        RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
    let estimate = limiter.estimate(10).unwrap();
    limiter.reset();
    assert!(limiter.check_n(10).unwrap().is_allowed());
    assert_eq!(limiter.settle_estimate(estimate, 0), Settlement::default());
    assert!(!limiter.check().is_allowed());

    limiter.reset();
    let estimate = limiter.estimate(10).unwrap();
    limiter.set_quota(Quota::per_second(20).unwrap()).unwrap();
    assert_eq!(limiter.settle_estimate(estimate, 0), Settlement::default());

    let table = Keyed::<u8, Gcra, _>::with_clock(Quota::per_second(10).unwrap(), clock).unwrap();
    for forget in [Keyed::reset as fn(&Keyed<u8, Gcra, ManualClock>, &u8), |t, k| {
        t.remove(k);
    }] {
        table.check(&1); // held from its second check (the doorkeeper)
        let estimate = table.estimate(&1, 9).unwrap();
        forget(&table, &1);
        assert!(table.check_n(&1, 10).unwrap().is_allowed());
        assert_eq!(table.settle_estimate(&1, estimate, 0), Settlement::default());
        assert!(!table.check(&1).is_allowed());
        table.remove(&1);
    }
}
