//! The striped limiter against a plain sequential model of its protocol (proptest, manual
//! clock), and under real threads with the real clock: never beyond the stated bound, and
//! nothing lost (every unit taken from the central word is admitted, held or given back).

use std::sync::{Arc, Barrier};
use std::time::Duration;

use kova::striped::StripedLimiter;
use kova::{
    Clock, Decision, Fallback, FixedWindow, Gcra, ManualClock, PreciseClock, Quota, TokenBucket,
    WordAlgorithm,
};
use proptest::prelude::*;

/// The stripes' time step: a stamp is `now >> 16`, a lease a whole number of steps.
const STEP_SHIFT: u32 = 16;

/// The protocol in plain sequential Rust: a central word run through the pure `decide` and
/// `refund`, and stripes as `(units, stamp)`.
struct Model<W> {
    algorithm: W,
    central: u64,
    stripes: Vec<(u64, u64)>,
    batch: u64,
    lease_steps: u64,
}

impl<W: WordAlgorithm> Model<W> {
    fn central(&mut self, now: u64, cost: u64) -> Decision {
        let (decision, word) = self.algorithm.decide(self.central, now, cost);
        self.central = word;
        decision
    }

    fn expired(&self, stamp: u64, now: u64) -> bool {
        (now >> STEP_SHIFT) - stamp >= self.lease_steps
    }

    fn give_back(&mut self, stripe: usize, now: u64) {
        let units = std::mem::take(&mut self.stripes[stripe]).0;
        if units > 0 {
            self.central = self.algorithm.refund(self.central, now, units);
        }
    }

    fn spent(&self, left: u64, stamp: u64, now: u64) -> Decision {
        let until = self.lease_steps.saturating_sub((now >> STEP_SHIFT) - stamp) << STEP_SHIFT;
        Decision::allowed(self.algorithm.capacity(), left, until).with_fallback(Fallback::StripeLease)
    }

    fn held(&self) -> u64 {
        self.stripes.iter().map(|s| s.0).sum()
    }

    fn peek(&self, now: u64) -> Decision {
        let (central, _) = self.algorithm.decide(self.central, now, 0);
        if self.held() == 0 {
            return central;
        }
        let remaining = (central.remaining() + self.held()).min(central.limit());
        Decision::allowed(central.limit(), remaining, central.reset_after_nanos())
            .with_fallback(Fallback::StripeLease)
    }

    fn check(&mut self, stripe: usize, cost: u64, now: u64) -> Decision {
        let decision = self.check_unmarked(stripe, cost, now);
        if decision.is_allowed() {
            decision
        } else {
            decision.with_fallback(Fallback::StripeLease)
        }
    }

    fn check_unmarked(&mut self, stripe: usize, cost: u64, now: u64) -> Decision {
        if cost > self.batch {
            return self.central(now, cost);
        }
        let stripe = stripe % self.stripes.len();
        let (units, stamp) = self.stripes[stripe];
        if units > 0 && self.expired(stamp, now) {
            self.give_back(stripe, now);
        } else if units >= cost {
            self.stripes[stripe].0 -= cost;
            return self.spent(units - cost, stamp, now);
        }
        if self.central(now, self.batch).is_allowed() {
            let left = self.batch - cost;
            let (held, held_stamp) = self.stripes[stripe];
            if held == 0 {
                self.stripes[stripe] = (left, now >> STEP_SHIFT);
            } else if held + left <= self.batch {
                self.stripes[stripe] = (held + left, held_stamp);
            } else {
                self.central = self.algorithm.refund(self.central, now, left);
            }
            return self.spent(left, now >> STEP_SHIFT, now);
        }
        let exact = self.central(now, cost);
        if exact.is_allowed() {
            return exact;
        }
        let mut returned = false;
        for other in 0..self.stripes.len() {
            let (units, stamp) = self.stripes[other];
            if units > 0 && self.expired(stamp, now) {
                self.give_back(other, now);
                returned = true;
            }
        }
        if returned {
            self.central(now, cost)
        } else {
            exact
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Check { stripe: usize, cost: u64 },
    Advance(u64),
    Flush,
}

fn steps(capacity: u64, lease: u64) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => (0usize..6, 1..=capacity).prop_map(|(stripe, cost)| Step::Check { stripe, cost }),
        2 => (0..=lease * 2).prop_map(Step::Advance),
        1 => Just(Step::Flush),
    ];
    prop::collection::vec(step, 1..80)
}

/// Runs `steps` on the limiter and the model side by side: every decision field for field, the
/// units held, and the peek after every step. The clock starts at a whole number of steps.
fn agrees<W: WordAlgorithm>(quota: Quota, stripes: usize, batch: u64, lease_steps: u64, steps: &[Step]) {
    let clock = ManualClock::starting_at(1 << 40);
    let lease = Duration::from_nanos(lease_steps << STEP_SHIFT);
    let limiter = StripedLimiter::<W>::builder(quota)
        .stripes(stripes)
        .batch(batch)
        .lease(lease)
        .clock(clock.clone())
        .build()
        .unwrap();
    let algorithm = W::from_quota(quota).unwrap();
    let central = algorithm.fresh_word();
    let mut model = Model { algorithm, central, stripes: vec![(0, 0); stripes], batch, lease_steps };
    for (i, step) in steps.iter().enumerate() {
        let now = clock.now_nanos();
        match *step {
            Step::Check { stripe, cost } => {
                let real = limiter.check_n_on(stripe, cost).unwrap();
                assert_eq!(real, model.check(stripe, cost, now), "step {i}: {step:?} in {steps:?}");
            }
            Step::Advance(nanos) => clock.advance_nanos(nanos),
            Step::Flush => {
                let held = model.held();
                (0..stripes).for_each(|s| model.give_back(s, now));
                assert_eq!(limiter.flush(), held, "step {i}");
            }
        }
        assert_eq!(limiter.held(), model.held(), "step {i}: {step:?} in {steps:?}");
        assert_eq!(limiter.peek(), model.peek(clock.now_nanos()), "step {i}: {step:?} in {steps:?}");
    }
}

fn quota_and_batch() -> impl Strategy<Value = (Quota, u64, usize, u64)> {
    (2u64..40, prop_oneof![Just(1_000_000_000u64), 1_000_000u64..100_000_000], 0u32..3, 1u64..20)
        .prop_flat_map(|(limit, period, stripes_log, lease_steps)| {
            let quota = Quota::from_nanos(limit, period).unwrap();
            (Just(quota), 1..=limit, Just(1usize << stripes_log), Just(lease_steps))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn gcra_agrees_with_the_model(((quota, batch, stripes, lease), steps) in quota_and_batch()
        .prop_flat_map(|q| (Just(q), steps(q.0.burst(), q.3 << STEP_SHIFT)))) {
        agrees::<Gcra>(quota, stripes, batch, lease, &steps);
    }

    #[test]
    fn token_bucket_agrees_with_the_model(((quota, batch, stripes, lease), steps) in quota_and_batch()
        .prop_flat_map(|q| (Just(q), steps(q.0.burst(), q.3 << STEP_SHIFT)))) {
        agrees::<TokenBucket>(quota, stripes, batch, lease, &steps);
    }

    #[test]
    fn fixed_window_agrees_with_the_model(((quota, batch, stripes, lease), steps) in quota_and_batch()
        .prop_flat_map(|q| (Just(q), steps(q.0.burst(), q.3 << STEP_SHIFT)))) {
        agrees::<FixedWindow>(quota, stripes, batch, lease, &steps);
    }
}

/// Threads hammering one striped limiter on the real clock, with a quota that barely refills
/// during the run: what they admit stays within the burst plus the refill over the run, and
/// short of the burst by no more than the stripes can hold; after a flush the central word accounts for every unit (admitted plus remaining is the burst
/// plus at most that refill: nothing lost, nothing made up).
fn hammer<W: WordAlgorithm>(stripes: usize, batch: u64) {
    const BURST: u64 = 20_000;
    const PER_THREAD: u64 = 10_000;
    let threads = 4;
    let quota = Quota::per_hour(BURST).unwrap();
    let interval = quota.emission_interval_nanos();
    let limiter = Arc::new(
        StripedLimiter::<W>::builder(quota)
            .stripes(stripes)
            .batch(batch)
            .clock(PreciseClock::new())
            .build()
            .unwrap(),
    );
    let barrier = Arc::new(Barrier::new(threads));
    let start = limiter.clock().now_nanos();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                (0..PER_THREAD).filter(|_| limiter.check().is_allowed()).count() as u64
            })
        })
        .collect();
    let admitted: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    limiter.flush();
    let end = limiter.clock().now_nanos();
    let refill = (end - start) / interval + 1;
    let name = W::NAME;
    assert!(admitted <= BURST + refill, "{name}: admitted {admitted}, bound {}", BURST + refill);
    // Twice the burst was asked for, so only units still held by stripes can be missing: a
    // thread's last checks are denied while another stripe holds units that its thread, done,
    // gives back only at the flush (the denials say so: `Fallback::StripeLease`).
    let held_at_most = stripes as u64 * batch;
    assert!(
        admitted + held_at_most >= BURST,
        "{name}: admitted only {admitted} of a demand of {} (stripes hold at most {held_at_most})",
        PER_THREAD * 4
    );
    let accounted = admitted + limiter.peek().remaining();
    assert!(
        (BURST..=BURST + refill).contains(&accounted),
        "{name}: admitted {admitted} + remaining {} is not the burst {BURST} (+ refill {refill})",
        limiter.peek().remaining()
    );
    assert_eq!(limiter.held(), 0);
}

#[test]
fn threads_on_their_own_stripes_lose_nothing() {
    hammer::<Gcra>(4, 16);
    hammer::<TokenBucket>(4, 16);
}

#[test]
fn threads_sharing_stripes_lose_nothing() {
    hammer::<Gcra>(1, 16);
    hammer::<TokenBucket>(2, 7);
}

/// A stripe left unused for a long time holds units leased long ago: they are expired, whatever
/// the time (here 2^48 ns, about 78 hours, a whole multiple of what a narrower stamp covered, at
/// which such units read as freshly leased and were spent beside a full central word).
#[test]
fn units_leased_long_ago_are_expired() {
    let clock = ManualClock::starting_at(1 << 40);
    let limiter = StripedLimiter::<Gcra>::builder(Quota::per_second(10).unwrap())
        .stripes(1)
        .batch(5)
        .lease(Duration::from_millis(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    assert!(limiter.check_n_on(0, 1).unwrap().is_allowed()); // the stripe keeps 4
    for later in [1u64 << 48, 1 << 50, 1 << 52] {
        clock.advance_nanos(later);
        let admitted = (0..100).take_while(|_| limiter.check_n_on(0, 1).unwrap().is_allowed()).count();
        assert_eq!(admitted, 10, "after {later} ns: the burst, and nothing older");
    }
}
