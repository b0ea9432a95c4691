//! Waits with a deadline on simulated time: admitted within it, refused at once when a denial
//! shows the admission would come after it, and a refusal takes nothing.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use kova::wait::{ManualTimer, Pacer, WaitError};
use kova::{CheckError, Clock, Gcra, Keyed, ManualClock, Quota, RateLimiter};

const MS: Duration = Duration::from_millis(1);

/// 10 a second, bursts of 1: each unit 100 ms after the last.
fn quota() -> Quota {
    Quota::per_second(10).unwrap().with_burst(1).unwrap()
}

fn limiter(clock: &ManualClock) -> RateLimiter<Gcra, ManualClock> {
    RateLimiter::with_clock(quota(), clock.clone()).unwrap()
}

#[test]
fn a_blocking_wait_past_its_deadline_fails_at_once_and_takes_nothing() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock);
    let pacer = Pacer::with_timer(ManualTimer::new(clock.clone()));
    assert!(pacer.wait_n_within(&limiter, 1, 50 * MS).unwrap().is_allowed());
    let before = limiter.peek();
    assert_eq!(
        pacer.wait_n_within(&limiter, 1, 50 * MS).unwrap_err(),
        WaitError::DeadlinePassed { wait: 100 * MS, max_wait: 50 * MS }
    );
    assert_eq!(limiter.peek(), before, "the refusal took nothing");
    assert!(pacer.timer().slept().is_empty(), "nor did it sleep");
    assert_eq!(clock.now_nanos(), 0);
    // Within reach: sleeps the denial's wait, then is admitted.
    assert!(pacer.wait_n_within(&limiter, 1, 100 * MS).unwrap().is_allowed());
    assert_eq!(pacer.timer().slept(), [100 * MS]);
}

#[test]
fn jitter_never_sleeps_past_the_deadline() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock);
    let pacer = Pacer::with_timer(ManualTimer::new(clock.clone())).jitter(Duration::from_secs(10));
    assert!(pacer.wait_n_within(&limiter, 1, 150 * MS).unwrap().is_allowed());
    for _ in 0..20 {
        let start = clock.now_nanos();
        assert!(pacer.wait_n_within(&limiter, 1, 150 * MS).unwrap().is_allowed());
        let waited = Duration::from_nanos(clock.now_nanos() - start);
        assert!(waited >= 100 * MS && waited <= 150 * MS, "{waited:?}");
    }
}

#[test]
fn a_cost_that_never_fits_is_the_check_error() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock);
    let table = Keyed::<u64, Gcra, _>::with_clock(quota(), clock.clone()).unwrap();
    let error = WaitError::Check(CheckError::CostExceedsCapacity { cost: 2, capacity: 1 });
    assert_eq!(limiter.wait_n_within(2, Duration::MAX).unwrap_err(), error);
    assert_eq!(table.wait_n_within(&7, 2, Duration::MAX).unwrap_err(), error);
}

#[test]
fn keyed_waits_keep_each_keys_deadline() {
    let clock = ManualClock::new();
    let table = Keyed::<u64, Gcra, _>::with_clock(quota(), clock.clone()).unwrap();
    let pacer = Pacer::with_timer(ManualTimer::new(clock.clone()));
    assert!(pacer.wait_key_n_within(&table, &1, 1, Duration::ZERO).unwrap().is_allowed());
    assert!(pacer.wait_key_n_within(&table, &2, 1, Duration::ZERO).unwrap().is_allowed());
    let before = table.peek(&1);
    assert!(matches!(
        pacer.wait_key_n_within(&table, &1, 1, 99 * MS),
        Err(WaitError::DeadlinePassed { wait, .. }) if wait == 100 * MS
    ));
    assert_eq!(table.peek(&1), before);
    assert!(pacer.wait_key_n_within(&table, &2, 1, 100 * MS).unwrap().is_allowed());
}

fn poll<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn an_async_wait_judges_its_deadline_again_after_each_sleep() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock);
    let timer = ManualTimer::new(clock.clone());
    let pacer = Pacer::with_timer(timer.clone());
    assert!(limiter.check().is_allowed());
    // Due in 100 ms, within its 150 ms: it sleeps.
    let mut waiting = pin!(pacer.until_n_ready_within(&limiter, 1, 150 * MS));
    assert!(poll(waiting.as_mut()).is_pending());
    // Another caller takes the unit the moment it is due: the waiter's next check would be
    // admitted only at 200 ms from its start, past its deadline, so it fails then.
    timer.advance(100 * MS);
    assert!(limiter.check().is_allowed());
    let before = limiter.peek();
    assert_eq!(
        poll(waiting.as_mut()),
        Poll::Ready(Err(WaitError::DeadlinePassed { wait: 200 * MS, max_wait: 150 * MS }))
    );
    assert_eq!(limiter.peek(), before);
}

/// A timer that wakes late (a sleep always may) does not fail a wait whose admission was due
/// within its deadline: the unit came due at 100 ms, the deadline is 100 ms, the wake-up comes
/// at 150 ms and the unit is still there.
#[test]
fn a_late_wake_up_still_admits_what_was_due_within_the_deadline() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock);
    let timer = ManualTimer::new(clock.clone());
    let pacer = Pacer::with_timer(timer.clone());
    assert!(limiter.check().is_allowed());
    let mut waiting = pin!(pacer.until_n_ready_within(&limiter, 1, 100 * MS));
    assert!(poll(waiting.as_mut()).is_pending());
    timer.advance(150 * MS);
    assert!(matches!(poll(waiting.as_mut()), Poll::Ready(Ok(d)) if d.is_allowed()));
    // A denial after a late wake-up still fails: another caller took the unit, and the next
    // is due 250 ms after this wait began, past its deadline.
    let mut second = pin!(pacer.until_n_ready_within(&limiter, 1, 100 * MS));
    assert!(poll(second.as_mut()).is_pending());
    timer.advance(150 * MS);
    assert!(limiter.check().is_allowed());
    assert!(matches!(poll(second.as_mut()), Poll::Ready(Err(WaitError::DeadlinePassed { .. }))));
}

#[test]
fn the_async_keyed_form_admits_within_its_deadline() {
    let clock = ManualClock::new();
    let table = Keyed::<u64, Gcra, _>::with_clock(quota(), clock.clone()).unwrap();
    let timer = ManualTimer::new(clock.clone());
    let pacer = Pacer::with_timer(timer.clone());
    assert!(table.check(&3).is_allowed());
    let mut waiting = pin!(pacer.until_key_n_ready_within(&table, &3, 1, 100 * MS));
    assert!(poll(waiting.as_mut()).is_pending());
    timer.advance(100 * MS);
    assert!(matches!(poll(waiting.as_mut()), Poll::Ready(Ok(d)) if d.is_allowed()));
}

/// In fair mode, a wait with a deadline does not wait for its turn past the deadline: queued
/// behind a waiter that sleeps long, it fails once its deadline passes, taking nothing, and one
/// whose turn comes after its deadline fails without checking.
#[test]
fn a_fair_wait_gives_up_its_place_in_line_at_its_deadline() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock);
    let timer = ManualTimer::new(clock.clone());
    let pacer = Pacer::with_timer(timer.clone()).fair();
    assert!(limiter.check().is_allowed());
    // First in line: sleeps 100 ms for the next unit.
    let mut first = pin!(pacer.until_n_ready(&limiter, 1));
    assert!(poll(first.as_mut()).is_pending());
    // Second, with 10 ms to spare: queued behind the first.
    let mut second = pin!(pacer.until_n_ready_within(&limiter, 1, 10 * MS));
    assert!(poll(second.as_mut()).is_pending());
    timer.advance(20 * MS);
    match poll(second.as_mut()) {
        Poll::Ready(Err(WaitError::DeadlinePassed { max_wait, .. })) => assert_eq!(max_wait, 10 * MS),
        other => panic!("still waiting for its turn past its deadline: {other:?}"),
    }
    // The first is admitted at its time, the line goes on.
    timer.advance(80 * MS);
    assert!(matches!(poll(first.as_mut()), Poll::Ready(Ok(d)) if d.is_allowed()));
    // A turn that comes after the deadline: the waiter fails without checking, taking nothing.
    let mut third = pin!(pacer.until_n_ready(&limiter, 1));
    assert!(poll(third.as_mut()).is_pending());
    let mut fourth = pin!(pacer.until_n_ready_within(&limiter, 1, 500 * MS));
    assert!(poll(fourth.as_mut()).is_pending());
    timer.advance(600 * MS);
    assert!(matches!(poll(third.as_mut()), Poll::Ready(Ok(d)) if d.is_allowed()));
    let before = limiter.peek();
    assert!(matches!(poll(fourth.as_mut()), Poll::Ready(Err(WaitError::DeadlinePassed { .. }))));
    assert_eq!(limiter.peek(), before, "the late turn took nothing");
}

/// A fair wait with no time to spare behind another waiter fails at once, taking nothing: at its
/// deadline without its turn, it does not sleep for nothing and come round again.
#[test]
fn a_fair_wait_at_its_deadline_without_its_turn_fails_at_once() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock);
    let pacer = Pacer::with_timer(ManualTimer::new(clock.clone())).fair();
    assert!(limiter.check().is_allowed());
    let mut first = pin!(pacer.until_n_ready(&limiter, 1));
    assert!(poll(first.as_mut()).is_pending());
    let before = limiter.peek();
    let mut second = pin!(pacer.until_n_ready_within(&limiter, 1, Duration::ZERO));
    assert!(matches!(poll(second.as_mut()), Poll::Ready(Err(WaitError::DeadlinePassed { .. }))));
    assert_eq!(limiter.peek(), before);
}
