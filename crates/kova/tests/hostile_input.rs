//! Hostile input, table-driven: every public constructor and method that takes a size, count,
//! cost, duration or key, at its edges (0, 1, the maximum, the maximum + 1, `u64::MAX`,
//! `Duration::ZERO` / `Duration::MAX`, an empty and a 1 MiB key), answers with a typed error or
//! its documented decision, never a panic. The builders' own bounds are in `bad_input.rs`; the
//! keyed table, the composites, the sketch and the striped limiter are in `hostile_input_keyed.rs`.
//!
//! Each case is named; the runner runs every case (catching a panic as that case's failure) and
//! reports the names of all that failed.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use kova::reservation::{ReserveError, Settlement};
use kova::wait::{ManualTimer, Pacer, WaitError};
use kova::{
    Algorithm, AlgorithmKind, AnyAlgorithm, CheckError, Gcra, ManualClock, Quota, QuotaError, RateLimiter,
    SlidingWindowLog, TokenBucket,
};

#[path = "support/case_table.rs"]
mod case_table;

use case_table::{run, Case};

fn q(limit: u64) -> Quota {
    Quota::per_second(limit).unwrap()
}

/// A GCRA limiter of 10 per second on a manual clock.
fn gcra() -> (RateLimiter<Gcra, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (RateLimiter::with_clock(q(10), clock.clone()).unwrap(), clock)
}

/// Polls `future` once, on a waker that does nothing.
fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    let mut future = pin!(future);
    future.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

const QUOTA: &[Case] = &[
    ("Quota::new limit 0", || assert_eq!(Quota::new(0, Duration::from_secs(1)), Err(QuotaError::ZeroLimit))),
    ("Quota::new limit 1", || assert_eq!(Quota::new(1, Duration::from_secs(1)).unwrap().limit(), 1)),
    ("Quota::new limit u64::MAX per second", || {
        assert_eq!(
            Quota::new(u64::MAX, Duration::from_secs(1)),
            Err(QuotaError::RateTooHigh { limit: u64::MAX, period_nanos: 1_000_000_000 })
        )
    }),
    ("Quota::new period ZERO", || assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod))),
    ("Quota::new period 1 ns (the fastest rate)", || {
        assert_eq!(Quota::new(1, Duration::from_nanos(1)).unwrap().emission_interval_nanos(), 1)
    }),
    ("Quota::new period u64::MAX ns (the longest)", || {
        assert_eq!(Quota::new(1, Duration::from_nanos(u64::MAX)).unwrap().period_nanos(), u64::MAX)
    }),
    ("Quota::new period u64::MAX ns + 1", || {
        assert_eq!(
            Quota::new(1, Duration::from_nanos(u64::MAX) + Duration::from_nanos(1)),
            Err(QuotaError::PeriodTooLong)
        )
    }),
    ("Quota::new period Duration::MAX", || {
        assert_eq!(Quota::new(1, Duration::MAX), Err(QuotaError::PeriodTooLong))
    }),
    (
        "Quota::from_nanos limit = period (1 per ns)",
        || assert!(Quota::from_nanos(u64::MAX, u64::MAX).is_ok()),
    ),
    ("Quota::from_nanos limit = period + 1", || {
        assert_eq!(Quota::from_nanos(3, 2), Err(QuotaError::RateTooHigh { limit: 3, period_nanos: 2 }))
    }),
    ("Quota::per_day u64::MAX", || {
        assert!(matches!(Quota::per_day(u64::MAX), Err(QuotaError::RateTooHigh { limit: u64::MAX, .. })))
    }),
    ("with_burst 0", || assert_eq!(q(5).with_burst(0), Err(QuotaError::ZeroBurst))),
    ("with_burst 1", || assert_eq!(q(5).with_burst(1).unwrap().burst(), 1)),
    ("with_burst u64::MAX: a Quota, refused by GCRA", || {
        let quota = q(5).with_burst(u64::MAX).unwrap();
        assert!(matches!(
            RateLimiter::<Gcra>::new(quota),
            Err(QuotaError::Unrepresentable { algorithm: "gcra", field: "burst", .. })
        ));
    }),
    ("with_overdraft u64::MAX: refused by GCRA, not wrapped", || {
        let quota = q(5).with_overdraft(u64::MAX);
        assert!(matches!(
            RateLimiter::<Gcra>::new(quota),
            Err(QuotaError::Unrepresentable { algorithm: "gcra", .. })
        ));
    }),
    ("with_overdraft 1 on the token bucket: unsupported", || {
        assert!(matches!(
            RateLimiter::<TokenBucket>::new(q(5).with_overdraft(1)),
            Err(QuotaError::OverdraftUnsupported { .. })
        ));
    }),
    ("sliding log at MAX_LIMIT and MAX_LIMIT + 1", || {
        assert!(RateLimiter::<SlidingWindowLog>::new(q(SlidingWindowLog::MAX_LIMIT)).is_ok());
        assert!(matches!(
            RateLimiter::<SlidingWindowLog>::new(q(SlidingWindowLog::MAX_LIMIT + 1)),
            Err(QuotaError::Unrepresentable { algorithm: "sliding_window_log", .. })
        ));
    }),
];

const DIRECT: &[Case] = &[
    ("check_n 0 is a peek: allowed, nothing taken", || {
        let (limiter, _) = gcra();
        let peek = limiter.check_n(0).unwrap();
        assert!(peek.is_allowed());
        assert_eq!((peek.remaining(), limiter.peek().remaining()), (10, 10));
    }),
    ("check_n capacity, then capacity + 1, u64::MAX", || {
        let (limiter, _) = gcra();
        assert!(limiter.check_n(10).unwrap().is_allowed());
        assert_eq!(limiter.check_n(11), Err(CheckError::CostExceedsCapacity { cost: 11, capacity: 10 }));
        assert_eq!(
            limiter.check_n(u64::MAX),
            Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 })
        );
    }),
    ("refund 0 and u64::MAX: never above full", || {
        let (limiter, _) = gcra();
        assert!(limiter.check_n(4).unwrap().is_allowed());
        assert!(limiter.refund(0));
        assert_eq!(limiter.peek().remaining(), 6);
        assert!(limiter.refund(u64::MAX));
        assert_eq!(limiter.peek().remaining(), 10);
    }),
    ("refund u64::MAX on every algorithm: never above full", || {
        for kind in AlgorithmKind::ALL {
            let limiter =
                RateLimiter::from_algorithm(AnyAlgorithm::new(kind, q(10)).unwrap(), ManualClock::new());
            assert!(limiter.check_n(3).unwrap().is_allowed(), "{kind}");
            // The sliding log takes no refunds (documented: false, nothing changed).
            assert_eq!(limiter.refund(u64::MAX), kind != AlgorithmKind::SlidingWindowLog, "{kind}");
            let expected = if kind == AlgorithmKind::SlidingWindowLog { 7 } else { 10 };
            assert_eq!(limiter.peek().remaining(), expected, "{kind}");
        }
    }),
    ("charge 0 and u64::MAX without overdraft: what is left", || {
        let (limiter, _) = gcra();
        assert_eq!(limiter.charge(0), 0);
        assert_eq!(limiter.charge(u64::MAX), 10);
        assert_eq!(limiter.charge(1), 0);
    }),
    ("settle 0 -> u64::MAX: charged what is left, the rest uncharged", || {
        let (limiter, _) = gcra();
        let settled = limiter.settle(0, u64::MAX);
        assert_eq!(settled, Settlement { refunded: 0, charged: 10, uncharged: u64::MAX - 10 });
    }),
    ("settle u64::MAX -> 0: a refund that fills, never past full", || {
        let (limiter, _) = gcra();
        assert!(limiter.check_n(10).unwrap().is_allowed());
        assert_eq!(limiter.settle(u64::MAX, 0).charged, 0);
        assert_eq!(limiter.peek().remaining(), 10);
    }),
    ("settle with the largest overdraft GCRA holds, u64::MAX extra", || {
        let clock = ManualClock::new();
        let quota = Quota::per_second(1_000).unwrap().with_overdraft(1_000_000);
        let limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock).unwrap();
        let settled = limiter.settle(0, u64::MAX);
        assert_eq!(settled.charged, 1_000 + 1_000_000);
        assert_eq!(settled.charged + settled.uncharged, u64::MAX);
        assert!(!limiter.check().is_allowed());
    }),
    ("reserve_n 0, capacity + 1, u64::MAX", || {
        let (limiter, _) = gcra();
        assert_eq!(limiter.reserve_n(0).unwrap().delay(), Duration::ZERO);
        assert_eq!(
            limiter.reserve_n(11).unwrap_err(),
            ReserveError::CostExceedsCapacity { cost: 11, capacity: 10 }
        );
        assert_eq!(
            limiter.reserve_n(u64::MAX).unwrap_err(),
            ReserveError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }
        );
        assert_eq!(limiter.peek().remaining(), 10);
    }),
    ("reserve_n_owned u64::MAX and within ZERO", || {
        let limiter = std::sync::Arc::new(gcra().0);
        assert_eq!(
            limiter.reserve_n_owned(u64::MAX).unwrap_err(),
            ReserveError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }
        );
        let all = limiter.reserve_n_owned(10).unwrap();
        assert!(matches!(
            limiter.reserve_n_within_owned(1, Duration::ZERO),
            Err(ReserveError::DelayTooLong { .. })
        ));
        assert_eq!(all.cancel(), 10);
    }),
    ("reserve_n_within ZERO when empty: refused, nothing taken", || {
        let (limiter, _) = gcra();
        let all = limiter.reserve_n(10).unwrap();
        assert_eq!(
            limiter.reserve_n_within(1, Duration::ZERO).unwrap_err(),
            ReserveError::DelayTooLong { delay: Duration::from_millis(100), max_delay: Duration::ZERO }
        );
        assert_eq!(all.cancel(), 10);
        assert_eq!(limiter.peek().remaining(), 10);
    }),
    ("reserve_n_within Duration::MAX queues", || {
        let (limiter, _) = gcra();
        let _all = limiter.reserve_n(10).unwrap();
        assert_eq!(limiter.reserve_n_within(10, Duration::MAX).unwrap().delay(), Duration::from_secs(1));
    }),
    ("set_quota to an unrepresentable quota: an error, the limiter unchanged", || {
        let (mut limiter, _) = gcra();
        assert!(limiter.check_n(4).unwrap().is_allowed());
        assert!(matches!(
            limiter.set_quota(q(1).with_burst(u64::MAX).unwrap()),
            Err(QuotaError::Unrepresentable { algorithm: "gcra", .. })
        ));
        assert_eq!((limiter.algorithm().quota(), limiter.peek().remaining()), (q(10), 6));
    }),
    ("set_quota to 1 per u64::MAX ns: past GCRA's half-timeline capacity", || {
        let (mut limiter, _) = gcra();
        assert_eq!(
            limiter.set_quota(Quota::from_nanos(1, u64::MAX).unwrap()),
            Err(QuotaError::Unrepresentable { algorithm: "gcra", field: "burst", value: 1, max: 0 })
        );
        limiter.set_quota(Quota::from_nanos(1, u64::MAX / 2).unwrap()).unwrap();
        assert!(limiter.check().is_allowed());
        assert!(!limiter.check().is_allowed());
    }),
    ("wait_n capacity + 1 and u64::MAX: an error at once", || {
        let (limiter, _) = gcra();
        assert_eq!(limiter.wait_n(11), Err(CheckError::CostExceedsCapacity { cost: 11, capacity: 10 }));
        assert_eq!(
            limiter.wait_n(u64::MAX),
            Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 })
        );
        assert_eq!(limiter.peek().remaining(), 10);
    }),
    ("until_n_ready u64::MAX: ready at once with the error", || {
        let (limiter, _) = gcra();
        assert_eq!(
            poll_once(limiter.until_n_ready(u64::MAX)),
            Poll::Ready(Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }))
        );
    }),
    ("wait_n_within ZERO when empty: DeadlinePassed, nothing taken", || {
        let (limiter, _) = gcra();
        assert!(limiter.check_n(10).unwrap().is_allowed());
        assert_eq!(
            limiter.wait_n_within(1, Duration::ZERO),
            Err(WaitError::DeadlinePassed { wait: Duration::from_millis(100), max_wait: Duration::ZERO })
        );
    }),
    ("wait_n_within Duration::MAX when there is room: admitted", || {
        let (limiter, _) = gcra();
        assert!(limiter.wait_n_within(10, Duration::MAX).unwrap().is_allowed());
    }),
    ("wait_n_within a cost that never fits: the check's error", || {
        let (limiter, _) = gcra();
        assert_eq!(
            limiter.wait_n_within(u64::MAX, Duration::MAX),
            Err(WaitError::Check(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }))
        );
    }),
    ("Pacer jitter Duration::MAX: the sleep saturates, then is cut to the deadline", || {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<Gcra, _>::with_clock(q(10), clock.clone()).unwrap();
        assert!(limiter.check_n(10).unwrap().is_allowed());
        let timer = ManualTimer::new(clock);
        let pacer = Pacer::with_timer(timer.clone()).jitter(Duration::MAX);
        assert!(poll_once(pacer.until_n_ready_within(&limiter, 1, Duration::from_secs(1))).is_pending());
        let slept = timer.slept();
        assert_eq!(slept.len(), 1);
        assert!(slept[0] >= Duration::from_millis(100) && slept[0] <= Duration::from_secs(1), "{slept:?}");
    }),
    ("Pacer jitter Duration::MAX without a deadline: no overflow", || {
        let clock = ManualClock::new();
        let limiter = RateLimiter::<Gcra, _>::with_clock(q(10), clock.clone()).unwrap();
        assert!(limiter.check_n(10).unwrap().is_allowed());
        let timer = ManualTimer::new(clock);
        let pacer = Pacer::with_timer(timer.clone()).jitter(Duration::MAX);
        assert!(poll_once(pacer.until_n_ready(&limiter, 1)).is_pending());
        assert!(timer.slept()[0] >= Duration::from_millis(100));
    }),
];

const CLOCK: &[Case] = &[
    ("ManualClock::advance Duration::MAX saturates at u64::MAX", || {
        let clock = ManualClock::new();
        clock.advance(Duration::MAX);
        clock.advance(Duration::MAX);
        clock.advance_nanos(u64::MAX);
        assert_eq!(kova::Clock::now_nanos(&clock), u64::MAX);
    }),
    ("every algorithm at time u64::MAX: the burst, then (but GCRA) a denial", || {
        for kind in AlgorithmKind::ALL {
            let clock = ManualClock::starting_at(u64::MAX);
            let limiter = RateLimiter::from_algorithm(AnyAlgorithm::new(kind, q(10)).unwrap(), clock);
            assert!(limiter.check_n(10).unwrap().is_allowed(), "{kind}");
            // GCRA's documented end of the timeline: the saturated TAT never leaves the burst.
            assert_eq!(limiter.check().is_allowed(), kind == AlgorithmKind::Gcra, "{kind}");
        }
    }),
    ("every algorithm: time jumps to u64::MAX after use", || {
        for kind in AlgorithmKind::ALL {
            let clock = ManualClock::new();
            let limiter = RateLimiter::from_algorithm(AnyAlgorithm::new(kind, q(10)).unwrap(), clock.clone());
            assert!(limiter.check_n(10).unwrap().is_allowed(), "{kind}");
            clock.advance(Duration::MAX);
            let after = limiter.check_n(10).unwrap();
            // The token bucket's documented wrap-around: a jump of a multiple of its stamp's
            // range may under-count the refill, never over-count it.
            assert_eq!(after.is_allowed(), kind != AlgorithmKind::TokenBucket, "{kind}: {after:?}");
        }
    }),
    ("every algorithm: a clock set back (up to 2^8 windows) never grants", || {
        for kind in AlgorithmKind::ALL {
            let clock = ManualClock::starting_at(200_000_000_000);
            let limiter = RateLimiter::from_algorithm(AnyAlgorithm::new(kind, q(10)).unwrap(), clock.clone());
            assert!(limiter.check_n(10).unwrap().is_allowed(), "{kind}");
            clock.set(100_000_000_000);
            assert!(!limiter.check().is_allowed(), "{kind}");
            clock.set(0);
            assert!(!limiter.check().is_allowed(), "{kind}");
        }
    }),
    ("sliding window counter: a clock set back past 2^8 windows reads as a later window", || {
        let clock = ManualClock::starting_at(1 << 40);
        let limiter = RateLimiter::<kova::SlidingWindowCounter, _>::with_clock(q(10), clock.clone()).unwrap();
        assert!(limiter.check_n(10).unwrap().is_allowed());
        clock.set(0);
        assert_eq!(limiter.check().remaining(), 9);
    }),
];

#[test]
fn quota_edges() {
    run(QUOTA);
}

#[test]
fn direct_limiter_edges() {
    run(DIRECT);
}

#[test]
fn clock_edges() {
    run(CLOCK);
}

/// The runner reports a failing case by name (so a table's failure is never anonymous).
#[test]
fn the_runner_names_a_failing_case() {
    let report = std::panic::catch_unwind(|| run(&[("fine", || {}), ("broken", || assert_eq!(1, 2))]))
        .expect_err("a failing case fails the run");
    let text = report.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(text.contains("1 of 2 cases failed") && text.contains("broken:"), "{text}");
}
