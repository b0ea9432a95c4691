//! Waiting on a limiter with a simulated timer: order, fairness across costs, cancellation (a
//! dropped future consumes nothing), jitter, errors, the blocking wait and the keyed waits.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use kova::wait::{ManualTimer, Pacer};
use kova::{CheckError, Clock, Decision, Gcra, Keyed, ManualClock, Quota, RateLimiter};

type Waiting<'a> = Pin<Box<dyn Future<Output = Result<Decision, CheckError>> + 'a>>;

#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn poll(future: &mut Waiting<'_>, waker: &Waker) -> Option<Result<Decision, CheckError>> {
    match future.as_mut().poll(&mut Context::from_waker(waker)) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}

/// 50 per second (20 ms a unit), burst 50, drained at time 0.
fn drained(clock: &ManualClock) -> RateLimiter<Gcra, ManualClock> {
    let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(50).unwrap(), clock.clone()).unwrap();
    assert!(limiter.check_n(50).unwrap().is_allowed());
    limiter
}

const UNIT: Duration = Duration::from_millis(20);

/// Polls every waiter still pending, in index order, and records which were admitted.
fn poll_all(waiters: &mut [Option<Waiting<'_>>], admitted: &mut Vec<usize>) {
    let waker = Waker::noop();
    for (i, slot) in waiters.iter_mut().enumerate() {
        if let Some(future) = slot {
            if let Some(out) = poll(future, waker) {
                assert!(out.unwrap().is_allowed());
                admitted.push(i);
                *slot = None;
            }
        }
    }
}

#[test]
fn a_waiter_is_admitted_exactly_when_its_units_are_there() {
    let clock = ManualClock::new();
    let timer = ManualTimer::new(clock.clone());
    let limiter = drained(&clock);
    let pacer = Pacer::with_timer(timer.clone());
    let mut wait: Waiting = Box::pin(pacer.until_n_ready(&limiter, 3));
    assert!(poll(&mut wait, Waker::noop()).is_none());
    assert_eq!(timer.slept(), vec![UNIT * 3]);
    timer.advance(UNIT * 3 - Duration::from_nanos(1));
    assert!(poll(&mut wait, Waker::noop()).is_none(), "one nanosecond early");
    timer.advance(Duration::from_nanos(1));
    let admitted = poll(&mut wait, Waker::noop()).unwrap().unwrap();
    assert!(admitted.is_allowed());
    assert_eq!(limiter.peek().remaining(), 0);
}

#[test]
fn a_cost_that_never_fits_is_an_error_at_once() {
    let clock = ManualClock::new();
    let limiter = drained(&clock);
    let pacer = Pacer::with_timer(ManualTimer::new(clock.clone()));
    let mut wait: Waiting = Box::pin(pacer.until_n_ready(&limiter, 51));
    assert_eq!(
        poll(&mut wait, Waker::noop()),
        Some(Err(CheckError::CostExceedsCapacity { cost: 51, capacity: 50 }))
    );
    assert_eq!(limiter.wait_n(51), Err(CheckError::CostExceedsCapacity { cost: 51, capacity: 50 }));
}

#[test]
fn a_dropped_waiter_consumes_nothing() {
    let clock = ManualClock::new();
    let timer = ManualTimer::new(clock.clone());
    let limiter = drained(&clock);
    let pacer = Pacer::with_timer(timer.clone()).fair();
    let mut first: Waiting = Box::pin(pacer.until_n_ready(&limiter, 5));
    assert!(poll(&mut first, Waker::noop()).is_none());
    timer.advance(UNIT * 4);
    assert!(poll(&mut first, Waker::noop()).is_none());
    let before = limiter.peek();
    drop(first);
    assert_eq!(limiter.peek(), before, "dropping a pending waiter changed the state");
    assert_eq!(pacer.waiting(), 0);
    // The units it waited for are there for the next caller.
    timer.advance(UNIT);
    assert!(limiter.check_n(5).unwrap().is_allowed());
}

/// The unfair twin of the test below: a stream of one-unit waiters overtakes the 50-unit one.
#[test]
fn without_fairness_a_large_cost_is_overtaken() {
    let order = admission_order(Pacer::with_timer(ManualTimer::new(ManualClock::new())));
    assert_ne!(order.first(), Some(&0), "the big waiter went first even without fairness: {order:?}");
}

#[test]
fn fair_waiters_go_first_come_first_served_across_costs() {
    let order = admission_order(Pacer::with_timer(ManualTimer::new(ManualClock::new())).fair());
    assert_eq!(order, (0..=10).collect::<Vec<_>>());
}

/// Waiter 0 wants 50 units, waiters 1..=10 one each, all joining at time 0 on a drained limiter.
/// Returns the order of admission.
fn admission_order(pacer: Pacer<ManualTimer>) -> Vec<usize> {
    let timer = pacer.timer().clone();
    let limiter = drained(timer.clock());
    let mut waiters: Vec<Option<Waiting>> = Vec::new();
    waiters.push(Some(Box::pin(pacer.until_n_ready(&limiter, 50))));
    for _ in 0..10 {
        waiters.push(Some(Box::pin(pacer.until_n_ready(&limiter, 1))));
    }
    let mut admitted = Vec::new();
    for _ in 0..200 {
        poll_all(&mut waiters, &mut admitted);
        if admitted.len() == waiters.len() {
            break;
        }
        timer.advance(UNIT);
    }
    assert_eq!(admitted.len(), waiters.len(), "not every waiter was admitted: {admitted:?}");
    admitted
}

#[test]
fn leaving_the_line_wakes_the_next_waiter() {
    let clock = ManualClock::new();
    let timer = ManualTimer::new(clock.clone());
    let limiter = drained(&clock);
    let pacer = Pacer::with_timer(timer.clone()).fair();
    let mut big: Waiting = Box::pin(pacer.until_n_ready(&limiter, 50));
    let mut small: Waiting = Box::pin(pacer.until_n_ready(&limiter, 1));
    let woken = Arc::new(CountingWaker::default());
    let small_waker = Waker::from(woken.clone());
    assert!(poll(&mut big, Waker::noop()).is_none());
    assert!(poll(&mut small, &small_waker).is_none());
    assert_eq!(pacer.waiting(), 2);
    timer.advance(UNIT);
    // One unit is there, but the big waiter is first.
    assert!(poll(&mut small, &small_waker).is_none());
    let wakes_before = woken.0.load(Ordering::Relaxed);
    drop(big);
    assert!(woken.0.load(Ordering::Relaxed) > wakes_before, "the next waiter was not woken");
    assert!(poll(&mut small, &small_waker).unwrap().unwrap().is_allowed());
    assert_eq!(pacer.waiting(), 0);
}

#[test]
fn jitter_spreads_the_retries_within_its_bound() {
    let clock = ManualClock::new();
    let timer = ManualTimer::new(clock.clone());
    let limiter = drained(&clock);
    let jitter = Duration::from_millis(10);
    let pacer = Pacer::with_timer(timer.clone()).jitter(jitter);
    let mut waiters: Vec<Waiting> =
        (0..32).map(|_| Box::pin(pacer.until_n_ready(&limiter, 1)) as Waiting).collect();
    for waiter in &mut waiters {
        assert!(poll(waiter, Waker::noop()).is_none());
    }
    let slept = timer.slept();
    assert_eq!(slept.len(), 32);
    assert!(slept.iter().all(|d| *d >= UNIT && *d <= UNIT + jitter), "{slept:?}");
    assert!(slept.iter().any(|d| *d != slept[0]), "no jitter at all: {slept:?}");
}

#[test]
fn the_blocking_wait_sleeps_exactly_until_admitted() {
    let clock = ManualClock::new();
    let limiter = drained(&clock);
    let timer = ManualTimer::new(clock.clone());
    let pacer = Pacer::with_timer(timer.clone()).fair();
    let start = clock.now_nanos();
    assert!(pacer.wait_n(&limiter, 5).unwrap().is_allowed());
    assert_eq!(Duration::from_nanos(clock.now_nanos() - start), UNIT * 5);
    assert_eq!(limiter.peek().remaining(), 0);
}

#[test]
fn keyed_waiters_wait_per_key_and_in_line_per_key() {
    let clock = ManualClock::new();
    let timer = ManualTimer::new(clock.clone());
    let table = Keyed::<u64, Gcra, _>::with_clock(Quota::per_second(50).unwrap(), clock.clone()).unwrap();
    assert!(table.check_n(&1, 50).unwrap().is_allowed());
    let pacer = Pacer::with_timer(timer.clone()).fair();
    let mut drained_key: Waiting = Box::pin(pacer.until_key_n_ready(&table, &1, 2));
    let mut fresh_key: Waiting = Box::pin(pacer.until_key_n_ready(&table, &2, 50));
    assert!(poll(&mut drained_key, Waker::noop()).is_none());
    // Key 2 has its own line: not held up behind key 1's waiter.
    assert!(poll(&mut fresh_key, Waker::noop()).unwrap().unwrap().is_allowed());
    timer.advance(UNIT * 2);
    assert!(poll(&mut drained_key, Waker::noop()).unwrap().unwrap().is_allowed());
    assert!(pacer.wait_key_n(&table, &3, 51).is_err());
}

#[tokio::test(flavor = "current_thread")]
async fn the_default_timer_runs_on_tokio() {
    let limiter = RateLimiter::<Gcra, _>::with_clock(
        Quota::per_second(200).unwrap().with_burst(1).unwrap(),
        kova::PreciseClock::new(),
    )
    .unwrap();
    let start = std::time::Instant::now();
    for _ in 0..3 {
        assert!(limiter.until_n_ready(1).await.unwrap().is_allowed());
    }
    // Three units, the first at once: at least two intervals of 5 ms.
    assert!(start.elapsed() >= Duration::from_millis(9), "{:?}", start.elapsed());
    let table = Keyed::<u64, Gcra>::new(Quota::per_second(10).unwrap()).unwrap();
    assert!(table.until_n_ready(&1, 10).await.unwrap().is_allowed());
    assert!(table.until_n_ready(&1, 11).await.is_err());
}

/// A wait does nothing until polled: created and dropped unpolled, it took nothing; polled, an
/// admission at once completes on the first poll.
#[test]
fn a_wait_takes_nothing_before_its_first_poll() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10).unwrap(), clock).unwrap();
    let table =
        Keyed::<u64, Gcra, _>::with_clock(Quota::per_second(10).unwrap(), ManualClock::new()).unwrap();
    let before = (limiter.peek(), table.peek(&1));
    drop(limiter.until_ready());
    drop(limiter.until_n_ready(3));
    drop(limiter.until_n_ready_within(3, Duration::ZERO));
    drop(table.until_n_ready(&1, 3));
    drop(table.until_n_ready_within(&1, 3, Duration::ZERO));
    assert_eq!((limiter.peek(), table.peek(&1)), before);
    let waker = Waker::noop();
    let mut ready: Waiting<'_> = Box::pin(limiter.until_n_ready(3));
    assert_eq!(poll(&mut ready, waker).map(|d| d.map(|d| d.remaining())), Some(Ok(7)));
}
