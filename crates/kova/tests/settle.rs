//! Settling (an estimate checked, the real cost settled later) on a ManualClock: against a
//! sequential model of a bucket that may run into a bounded debt, and the stated bound on what a
//! key takes in any interval: `burst + overdraft + L / T`.

use std::time::Duration;

use kova::reservation::Settlement;
use kova::{Clock, FixedWindow, Gcra, ManualClock, Quota, QuotaError, RateLimiter, TokenBucket};
use proptest::prelude::*;

/// The model: credit in nanoseconds, at most `burst * T`, at least `-overdraft * T`; a check
/// needs `cost * T` of credit; a charge takes credit down to the floor; a refund gives it back up
/// to the top. Time refills credit one nanosecond per nanosecond.
#[derive(Debug)]
struct DebtBucket {
    interval: i128,
    top: i128,
    floor: i128,
    credit: i128,
    at: u64,
}

impl DebtBucket {
    fn new(interval: u64, burst: u64, overdraft: u64) -> Self {
        let interval = i128::from(interval);
        let top = i128::from(burst) * interval;
        DebtBucket { interval, top, floor: -i128::from(overdraft) * interval, credit: top, at: 0 }
    }

    fn advance(&mut self, now: u64) {
        self.credit = (self.credit + i128::from(now - self.at)).min(self.top);
        self.at = now;
    }

    fn check(&mut self, now: u64, cost: u64) -> bool {
        self.advance(now);
        let need = i128::from(cost) * self.interval;
        let ok = self.credit >= need;
        if ok {
            self.credit -= need;
        }
        ok
    }

    fn charge(&mut self, now: u64, cost: u64) -> u64 {
        self.advance(now);
        let room = ((self.credit - self.floor) / self.interval).max(0) as u64;
        let take = cost.min(room);
        self.credit -= i128::from(take) * self.interval;
        take
    }

    fn refund(&mut self, now: u64, cost: u64) {
        self.advance(now);
        self.credit = (self.credit + i128::from(cost) * self.interval).min(self.top);
    }

    fn remaining(&self) -> u64 {
        (self.credit.max(0) / self.interval) as u64
    }
}

#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Check(u64),
    /// Check `estimate`; if admitted, settle at `actual`.
    Settle {
        estimate: u64,
        actual: u64,
    },
}

proptest! {
    #[test]
    fn settling_matches_the_debt_model_and_keeps_the_bound(
        burst in 1u64..20,
        overdraft in 0u64..30,
        steps in prop::collection::vec(prop_oneof![
            (0u64..300).prop_map(Step::Advance),
            (1u64..20).prop_map(Step::Check),
            (1u64..20, 0u64..60).prop_map(|(estimate, actual)| Step::Settle { estimate, actual }),
        ], 1..80),
    ) {
        // 10 per second: T = 100 ms; time steps in ms.
        const T: u64 = 100_000_000;
        let quota = Quota::per_second(10).unwrap().with_burst(burst).unwrap().with_overdraft(overdraft);
        let clock = ManualClock::new();
        let limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
        let mut model = DebtBucket::new(T, burst, overdraft);
        // (time, units) taken (negative: given back).
        let mut taken: Vec<(u64, i64)> = Vec::new();
        for step in steps {
            let now = clock.now_nanos();
            match step {
                Step::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Step::Check(cost) => {
                    let Ok(decision) = limiter.check_n(cost) else {
                        prop_assert!(cost > burst);
                        continue;
                    };
                    prop_assert_eq!(decision.is_allowed(), model.check(now, cost));
                    if decision.is_allowed() {
                        taken.push((now, cost as i64));
                    }
                }
                Step::Settle { estimate, actual } => {
                    let Ok(decision) = limiter.check_n(estimate) else { continue };
                    prop_assert_eq!(decision.is_allowed(), model.check(now, estimate));
                    if !decision.is_allowed() {
                        continue;
                    }
                    taken.push((now, estimate as i64));
                    let settled = limiter.settle(estimate, actual);
                    if actual < estimate {
                        model.refund(now, estimate - actual);
                        prop_assert_eq!(settled, Settlement { refunded: estimate - actual, ..Settlement::default() });
                        taken.push((now, -((estimate - actual) as i64)));
                    } else {
                        let charged = model.charge(now, actual - estimate);
                        prop_assert_eq!(settled.charged, charged);
                        prop_assert_eq!(settled.charged + settled.uncharged, actual - estimate);
                        taken.push((now, charged as i64));
                    }
                }
            }
            model.advance(clock.now_nanos());
            prop_assert_eq!(limiter.peek().remaining(), model.remaining());
        }
        // The bound: over any closed interval [a, b], net units taken <= B + D + (b - a) / T.
        for (i, &(a, _)) in taken.iter().enumerate() {
            let mut net = 0i64;
            for &(b, units) in &taken[i..] {
                net += units;
                let bound = (burst + overdraft + (b - a) / T) as i64;
                prop_assert!(net <= bound, "{} net in [{}, {}], bound {}: {:?}", net, a, b, bound, taken);
            }
        }
    }
}

#[test]
fn a_debt_is_paid_off_before_the_next_check() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().with_overdraft(5);
    let limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
    assert!(limiter.check_n(10).unwrap().is_allowed());
    assert_eq!(limiter.settle(10, 15), Settlement { refunded: 0, charged: 5, uncharged: 0 });
    // 5 units of debt, then one unit to earn: 600 ms.
    assert_eq!(limiter.check().retry_after(), Duration::from_millis(600));
    clock.advance(Duration::from_millis(599));
    assert!(!limiter.check().is_allowed());
    clock.advance(Duration::from_millis(1));
    assert!(limiter.check().is_allowed());
}

#[test]
fn a_lower_real_cost_is_refunded() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::<TokenBucket, _>::with_clock(Quota::per_second(10).unwrap(), clock).unwrap();
    assert!(limiter.check_n(8).unwrap().is_allowed());
    assert_eq!(limiter.settle(8, 3), Settlement { refunded: 5, ..Settlement::default() });
    assert_eq!(limiter.peek().remaining(), 7);
    // Without an overdraft a higher cost takes only what is left.
    assert_eq!(limiter.settle(3, 20), Settlement { refunded: 0, charged: 7, uncharged: 10 });
    assert_eq!(limiter.peek().remaining(), 0);
}

#[test]
fn only_gcra_takes_an_overdraft() {
    let quota = Quota::per_second(10).unwrap().with_overdraft(1);
    assert_eq!(
        RateLimiter::<TokenBucket>::new(quota).unwrap_err(),
        QuotaError::OverdraftUnsupported { algorithm: "token_bucket" }
    );
    assert_eq!(
        RateLimiter::<FixedWindow>::new(quota).unwrap_err(),
        QuotaError::OverdraftUnsupported { algorithm: "fixed_window" }
    );
    assert!(RateLimiter::<Gcra>::new(Quota::per_second(10).unwrap().with_overdraft(u64::MAX)).is_err());
}

proptest! {
    /// A key of a table settles exactly as a direct limiter of the same quota.
    #[test]
    fn a_key_settles_as_a_direct_limiter(
        overdraft in 0u64..20,
        steps in prop::collection::vec((0u64..300, 1u64..10, 0u64..30), 1..40),
    ) {
        let quota = Quota::per_second(10).unwrap().with_overdraft(overdraft);
        let clock = ManualClock::new();
        let direct = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone()).unwrap();
        let table = kova::Keyed::<u8, Gcra, _>::with_clock(quota, clock.clone()).unwrap();
        for (advance, estimate, actual) in steps {
            clock.advance(Duration::from_millis(advance));
            let checked = direct.check_n(estimate).unwrap();
            prop_assert_eq!(table.check_n(&7, estimate).unwrap(), checked);
            if checked.is_allowed() {
                prop_assert_eq!(table.settle(&7, estimate, actual), direct.settle(estimate, actual));
            }
            prop_assert_eq!(table.peek(&7), direct.peek());
        }
        // A key never seen: charged from its fresh state into its overdraft.
        prop_assert_eq!(table.charge(&9, 10 + overdraft + 5), 10 + overdraft);
    }
}
