//! Several limits at once against a sequential model (each limit an exact bucket from
//! `kova::model`; a check admitted only if all admit, and then charged to all), for one to four
//! limits (one word, the 128-bit pair, the check-then-refund chain); and threads that never get
//! more than every limit's bound.

use std::sync::Arc;
use std::time::Duration;

use kova::limits::{Limits, LimitsError, MAX_LIMITS};
use kova::model::BucketModel;
use kova::{CheckError, Clock, Decision, Gcra, ManualClock, Quota};
use proptest::prelude::*;

/// The composite, sequentially: every decision, the deciding index as documented.
fn model_check(models: &mut Vec<BucketModel>, now: u64, cost: u64) -> (bool, Vec<Decision>) {
    let mut trial = models.clone();
    let decisions: Vec<Decision> = trial.iter_mut().map(|m| m.decide(now, cost)).collect();
    let allowed = decisions.iter().all(Decision::is_allowed);
    if allowed {
        *models = trial;
        return (true, decisions);
    }
    // Nothing taken: the admitting limits report what they hold (a peek).
    let each = decisions
        .iter()
        .zip(models.iter_mut())
        .map(|(d, m)| if d.is_allowed() { m.clone().decide(now, 0) } else { *d })
        .collect();
    (false, each)
}

fn expected_decider(allowed: bool, each: &[Decision]) -> usize {
    let mut best = 0;
    for (i, d) in each.iter().enumerate() {
        let b = &each[best];
        let better = if allowed {
            d.remaining() < b.remaining()
        } else {
            !d.is_allowed() && (b.is_allowed() || d.retry_after_nanos() > b.retry_after_nanos())
        };
        if better {
            best = i;
        }
    }
    best
}

proptest! {
    #[test]
    fn the_composite_is_the_sequential_one(
        limits in prop::collection::vec((1u64..8, 1u64..6, 1u64..10), 1..=MAX_LIMITS),
        steps in prop::collection::vec((0u64..200, 0u64..6), 1..60),
    ) {
        // Limit i: `limit` per `period * 100` ms, burst `burst`.
        let quotas: Vec<Quota> = limits
            .iter()
            .map(|&(limit, burst, period)| {
                Quota::new(limit, Duration::from_millis(period * 100)).unwrap().with_burst(burst).unwrap()
            })
            .collect();
        let clock = ManualClock::new();
        let composite = Limits::<Gcra, _>::with_clock(quotas.clone(), clock.clone()).unwrap();
        let mut models: Vec<BucketModel> =
            quotas.iter().map(|q| BucketModel::new(q.emission_interval_nanos(), q.burst())).collect();
        let capacity = quotas.iter().map(Quota::burst).min().unwrap();
        for (advance, cost) in steps {
            clock.advance(Duration::from_millis(advance));
            let now = clock.now_nanos();
            match composite.check_n(cost) {
                Err(error) => {
                    prop_assert!(cost > capacity);
                    prop_assert_eq!(error, CheckError::CostExceedsCapacity { cost, capacity });
                }
                Ok(decision) => {
                    let (allowed, each) = model_check(&mut models, now, cost);
                    prop_assert_eq!(decision.is_allowed(), allowed);
                    prop_assert_eq!(decision.limit_decisions(), &each[..]);
                    prop_assert_eq!(decision.decided_by(), expected_decider(allowed, &each));
                    prop_assert_eq!(decision.decision(), each[decision.decided_by()]);
                }
            }
        }
    }
}

#[test]
fn a_denial_names_the_limit_to_wait_for() {
    let clock = ManualClock::new();
    let composite = Limits::<Gcra, _>::with_clock(
        [Quota::per_second(10).unwrap(), Quota::per_minute(12).unwrap(), Quota::per_hour(100).unwrap()],
        clock.clone(),
    )
    .unwrap();
    assert!(composite.check_n(10).unwrap().is_allowed());
    clock.advance(Duration::from_secs(1));
    // Per second: full again. Per minute: 2 left. A check of 3 waits for the per-minute limit.
    let denied = composite.check_n(3).unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(denied.decided_by(), 1);
    assert_eq!(denied.decision().retry_after(), Duration::from_secs(4)); // 1 s of 5 already earned
                                                                         // Nothing was taken from any limit.
    let each = composite.peek();
    let remaining: Vec<u64> = each.limit_decisions().iter().map(Decision::remaining).collect();
    assert_eq!(remaining, [10, 2, 90]);
    assert_eq!(each.decided_by(), 1);
}

#[test]
#[cfg_attr(miri, ignore = "builds on the default clock, whose quanta source runs cpuid, which Miri cannot")]
fn bad_lists_are_typed_errors() {
    let q = Quota::per_second(1).unwrap();
    assert_eq!(Limits::<Gcra>::new([]).unwrap_err(), LimitsError::Empty);
    assert_eq!(Limits::<Gcra>::new([q; 5]).unwrap_err(), LimitsError::TooMany { count: 5, max: MAX_LIMITS });
    let windowed = Limits::<kova::FixedWindow>::new([q, q.with_burst(2).unwrap()]).unwrap_err();
    assert!(matches!(windowed, LimitsError::Quota { index: 1, .. }), "{windowed:?}");
}

#[test]
fn refund_gives_back_to_every_limit() {
    for n in 1..=MAX_LIMITS {
        let quotas: Vec<Quota> = (1..=n as u64).map(|i| Quota::per_second(10 * i).unwrap()).collect();
        let composite = Limits::<Gcra, _>::with_clock(quotas, ManualClock::new()).unwrap();
        assert!(composite.check_n(7).unwrap().is_allowed());
        composite.refund(7);
        let full: Vec<u64> = composite.peek().limit_decisions().iter().map(Decision::remaining).collect();
        assert_eq!(full, (1..=n as u64).map(|i| 10 * i).collect::<Vec<_>>(), "{n} limits");
    }
}

/// Threads hammering a frozen clock: whatever the protocol, no limit admits more than its burst.
#[test]
fn threads_never_exceed_any_limit() {
    for n in 1..=MAX_LIMITS {
        let quotas: Vec<Quota> =
            (0..n as u64).map(|i| Quota::per_hour(1_000).unwrap().with_burst(40 + 7 * i).unwrap()).collect();
        let composite = Arc::new(Limits::<Gcra, _>::with_clock(quotas, ManualClock::new()).unwrap());
        let admitted: u64 = (0..4)
            .map(|t| {
                let composite = Arc::clone(&composite);
                std::thread::spawn(move || {
                    (0..200).filter(|i| composite.check_n(1 + (i + t) % 3).unwrap().is_allowed()).count()
                        as u64
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        let peek = composite.peek();
        // Every limit's units used agree: no limit was charged for a check another denied.
        let used: Vec<u64> = peek.limit_decisions().iter().map(|d| d.limit() - d.remaining()).collect();
        assert!(used.iter().all(|&u| u == used[0]), "{n} limits: used {used:?}");
        assert!(used[0] <= 40, "{n} limits: {used:?}");
        assert!(admitted > 0);
        assert_eq!(composite.clock().now_nanos(), 0);
    }
}

proptest! {
    /// A key of `KeyedLimits` decides exactly as a direct `Limits` of the same quotas.
    #[test]
    fn a_key_of_keyed_limits_decides_as_the_direct_composite(
        bursts in prop::collection::vec(1u64..6, 1..=MAX_LIMITS),
        steps in prop::collection::vec((0u64..300, 0u64..6, any::<bool>()), 1..50),
    ) {
        let quotas: Vec<Quota> =
            bursts.iter().enumerate().map(|(i, &b)| Quota::per_second(1 + i as u64).unwrap().with_burst(b).unwrap()).collect();
        let clock = ManualClock::new();
        let direct = Limits::<Gcra, _>::with_clock(quotas.clone(), clock.clone()).unwrap();
        let keyed = kova::limits::KeyedLimits::<u32, Gcra, _>::with_clock(quotas, clock.clone()).unwrap();
        for (advance, cost, refund) in steps {
            clock.advance(Duration::from_millis(advance));
            let expected = direct.check_n(cost);
            prop_assert_eq!(keyed.check_n(&1, cost), expected);
            if refund && expected.is_ok_and(|d| d.is_allowed()) {
                direct.refund(cost);
                keyed.refund(&1, cost);
            }
            let (keyed_peek, direct_peek) = (keyed.peek(&1), direct.peek());
            prop_assert_eq!(keyed_peek.limit_decisions(), direct_peek.limit_decisions());
        }
    }
}

#[test]
fn threads_on_one_key_never_exceed_any_limit() {
    let quotas: Vec<Quota> =
        (0..3u64).map(|i| Quota::per_hour(1_000).unwrap().with_burst(30 + 5 * i).unwrap()).collect();
    let limits =
        Arc::new(kova::limits::KeyedLimits::<u8, Gcra, _>::with_clock(quotas, ManualClock::new()).unwrap());
    let admitted: u64 = (0..4u64)
        .map(|t| {
            let limits = Arc::clone(&limits);
            std::thread::spawn(move || {
                (0..100u64)
                    .filter(|i| limits.check_n(&1, 1 + (i + t) % 3).unwrap().is_allowed())
                    .map(|i| 1 + (i + t) % 3)
                    .sum::<u64>()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    let peek = limits.peek(&1);
    let used: Vec<u64> = peek.limit_decisions().iter().map(|d| d.limit() - d.remaining()).collect();
    assert_eq!(used, [admitted; 3], "every limit charged exactly the admitted units");
    assert!(admitted > 0 && admitted <= 30, "{admitted}");
}

#[test]
fn keyed_limits_keep_their_table_bounds_and_mark_a_full_table() {
    let quotas = [Quota::per_second(2).unwrap(), Quota::per_minute(10).unwrap()];
    let clock = ManualClock::new();
    let limits = kova::limits::KeyedLimits::<u32, Gcra>::builder(quotas)
        .clock(clock.clone())
        .max_keys(1)
        .shards(1)
        .table_full(kova::keyed::TableFullPolicy::DenyNew)
        .build()
        .unwrap();
    assert!(limits.check(&1).is_allowed());
    assert_eq!(limits.key_count(), 1);
    // The only place is held and busy: a new key is denied, in every limit, and says why.
    let full = limits.check(&2);
    assert!(!full.is_allowed());
    for decision in full.limit_decisions() {
        assert_eq!(decision.fallback(), Some(kova::Fallback::TableFullDenied));
    }
    // A peek inserts nothing and reports a fresh key.
    assert_eq!(limits.peek(&3).limit_decisions().iter().map(|d| d.remaining()).collect::<Vec<_>>(), [2, 10]);
    // Once idle in every limit, the key is reclaimed and the place serves a new one.
    clock.advance(Duration::from_secs(60));
    assert_eq!(limits.sweep_idle(), 1);
    assert_eq!(limits.key_count(), 0);
    assert!(limits.check(&2).is_allowed());
    assert_eq!(limits.check(&2).decision().fallback(), None);
}

#[test]
fn keyed_limits_settle_each_limit_into_its_own_room() {
    let quotas = [Quota::per_minute(10).unwrap(), Quota::per_hour(100).unwrap().with_overdraft(50)];
    let limits = kova::limits::KeyedLimits::<u32, Gcra, _>::with_clock(quotas, ManualClock::new()).unwrap();
    assert!(limits.check_n(&1, 4).unwrap().is_allowed());
    // A lower cost gives the difference back to both.
    let back = limits.settle(&1, 4, 1);
    assert_eq!(back, vec![kova::reservation::Settlement { refunded: 3, ..Default::default() }; 2]);
    let left: Vec<u64> = limits.peek(&1).limit_decisions().iter().map(|d| d.remaining()).collect();
    assert_eq!(left, [9, 99]);
    // A higher one charges each limit as far as it holds: the minute limit has no overdraft.
    let more = limits.settle(&1, 1, 30);
    assert_eq!(more[0], kova::reservation::Settlement { refunded: 0, charged: 9, uncharged: 20 });
    assert_eq!(more[1], kova::reservation::Settlement { refunded: 0, charged: 29, uncharged: 0 });
    // A key not held is inserted and charged in the same step.
    assert_eq!(limits.settle(&2, 0, 3)[1].charged, 3);
    assert_eq!(limits.peek(&2).limit_decisions()[0].remaining(), 7);
}

/// A full table evicts the key closest to fresh in every limit: not one whose per-second limit
/// refills soon while its daily limit is nearly spent (evicted, it would forget that day's use).
#[test]
fn eviction_weighs_every_limits_reset() {
    let quotas = [Quota::per_second(10).unwrap(), Quota::per_day(10_000).unwrap()];
    let clock = ManualClock::new();
    let limits = kova::limits::KeyedLimits::<u32, Gcra>::builder(quotas)
        .clock(clock.clone())
        .max_keys(2)
        .shards(1)
        .table_full(kova::keyed::TableFullPolicy::EvictClosestToIdle)
        .build()
        .unwrap();
    limits.settle(&1, 0, 9_990); // 10 of the day left
    clock.advance(Duration::from_millis(700));
    assert!(limits.check_n(&2, 5).unwrap().is_allowed());
    assert_eq!(limits.key_count(), 2);
    // Key 1's per-second limit is fresh again in 0.3 s, key 2's in 0.5 s; their days in about
    // a day and in 43 s.
    assert!(limits.check_n(&3, 2).unwrap().is_allowed());
    assert_eq!(limits.peek(&1).limit_decisions()[1].remaining(), 10, "key 1 kept its day");
}

/// A full table's answer gives each limit its own numbers: untracked, what a fresh state of
/// that limit answers; denied, nothing left of its own capacity.
#[test]
fn a_full_tables_answer_is_in_each_limits_own_numbers() {
    let quotas = [Quota::per_second(10).unwrap(), Quota::per_day(10_000).unwrap()];
    let build = |policy| {
        kova::limits::KeyedLimits::<u32, Gcra>::builder(quotas)
            .clock(ManualClock::new())
            .max_keys(1)
            .shards(1)
            .table_full(policy)
            .build()
            .unwrap()
    };
    let untracked = build(kova::keyed::TableFullPolicy::AllowUntracked);
    assert!(untracked.check_n(&1, 2).unwrap().is_allowed());
    let answer = untracked.check(&2);
    let each: Vec<(u64, u64, Option<kova::Fallback>)> =
        answer.limit_decisions().iter().map(|d| (d.limit(), d.remaining(), d.fallback())).collect();
    let mark = Some(kova::Fallback::TableFullUntracked);
    assert_eq!(each, [(10, 9, mark), (10_000, 9_999, mark)]);
    let denied = build(kova::keyed::TableFullPolicy::DenyNew);
    assert!(denied.check_n(&1, 2).unwrap().is_allowed());
    let answer = denied.check(&2);
    assert!(!answer.is_allowed());
    let limits: Vec<u64> = answer.limit_decisions().iter().map(Decision::limit).collect();
    assert_eq!(limits, [10, 10_000]);
}

/// An answer said denied when every limit admitted has no limit to wait for: refused.
#[test]
fn a_denial_without_a_denying_limit_is_refused() {
    use kova::limits::LimitsDecision;
    assert!(LimitsDecision::from_decisions(&[Decision::allowed(10, 5, 0)], false).is_none());
    assert!(LimitsDecision::from_decisions(&[Decision::allowed(10, 5, 0)], true).is_some());
}

/// The sketch policy holds one GCRA state per key, not several limits: refused by the builder.
#[test]
fn keyed_limits_refuse_the_sketch_policy() {
    let built = kova::limits::KeyedLimits::<u32, Gcra>::builder([Quota::per_second(1).unwrap()])
        .table_full(kova::keyed::TableFullPolicy::Sketch)
        .build();
    assert!(matches!(built, Err(LimitsError::Table(kova::keyed::KeyedError::SketchAlgorithm { .. }))));
}
