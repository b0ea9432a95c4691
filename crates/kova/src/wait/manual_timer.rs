//! A [`Timer`] on simulated time, for testing waiting code without waiting.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::timer::Timer;
use crate::{Clock, ManualClock};

/// A [`Timer`] on a [`ManualClock`]: a sleep completes once the clock has moved past its
/// deadline ([`advance`](Self::advance) moves it and wakes the sleepers), and a blocking sleep
/// moves the clock itself, so a blocking wait runs through simulated time at once. Every
/// duration asked for is recorded ([`slept`](Self::slept)).
///
/// Share the clock with the limiter under test, and hand the timer to a [`Pacer`](crate::wait::Pacer):
///
/// ```
/// use std::time::Duration;
/// use kova::wait::{ManualTimer, Pacer};
/// use kova::{Gcra, ManualClock, Quota, RateLimiter};
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?.with_burst(1)?, clock.clone())?;
/// let pacer = Pacer::with_timer(ManualTimer::new(clock.clone()));
/// assert!(pacer.wait_n(&limiter, 1)?.is_allowed()); // at once
/// assert!(pacer.wait_n(&limiter, 1)?.is_allowed()); // after 100 simulated ms
/// assert_eq!(pacer.timer().slept(), [Duration::from_millis(100)]);
/// assert_eq!(clock.now_nanos(), 100_000_000);
/// # use kova::Clock;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ManualTimer {
    clock: ManualClock,
    sleepers: Arc<Mutex<Vec<Waker>>>,
    slept: Arc<Mutex<Vec<Duration>>>,
}

impl ManualTimer {
    /// A timer on `clock` (a clone shares its time).
    pub fn new(clock: ManualClock) -> Self {
        ManualTimer { clock, sleepers: Arc::default(), slept: Arc::default() }
    }

    /// The clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Moves the clock on by `by` and wakes every sleeping future (each completes if its
    /// deadline has come, and sleeps on otherwise).
    pub fn advance(&self, by: Duration) {
        // The clock moves under the sleepers' lock, which a sleep holds from its reading of the
        // clock to its registration: a sleep on another thread either reads the new time or is
        // registered in time to be woken here (no wakeup is lost between the two).
        let wakers = {
            let mut sleepers = lock(&self.sleepers);
            self.clock.advance(by);
            std::mem::take(&mut *sleepers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Every duration a sleep asked for, in order.
    pub fn slept(&self) -> Vec<Duration> {
        lock(&self.slept).clone()
    }
}

/// The timer's lists hold plain data that a panicking holder cannot leave half-written.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The future of [`ManualTimer`]'s [`sleep`](Timer::sleep).
#[derive(Debug)]
pub struct ManualSleep {
    clock: ManualClock,
    deadline: u64,
    sleepers: Arc<Mutex<Vec<Waker>>>,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Read and register under one lock (see `ManualTimer::advance`).
        let mut sleepers = lock(&self.sleepers);
        if self.clock.now_nanos() >= self.deadline {
            return Poll::Ready(());
        }
        sleepers.push(cx.waker().clone());
        Poll::Pending
    }
}

impl Timer for ManualTimer {
    type Sleep = ManualSleep;

    fn sleep(&self, duration: Duration) -> ManualSleep {
        lock(&self.slept).push(duration);
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let deadline = self.clock.now_nanos().saturating_add(nanos);
        ManualSleep { clock: self.clock.clone(), deadline, sleepers: self.sleepers.clone() }
    }

    fn sleep_blocking(&self, duration: Duration) {
        lock(&self.slept).push(duration);
        // The shared clock moves: the futures sleeping on it are woken, as by `advance`.
        self.advance(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Count(std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn a_sleep_completes_only_once_the_clock_has_passed_its_deadline() {
        let timer = ManualTimer::new(ManualClock::new());
        let woken = Arc::new(Count(0.into()));
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut sleep = Box::pin(timer.sleep(Duration::from_millis(10)));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        timer.advance(Duration::from_millis(9));
        assert_eq!(woken.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        timer.advance(Duration::from_millis(1));
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
        timer.sleep_blocking(Duration::from_millis(5));
        assert_eq!(timer.clock().now_nanos(), 15_000_000);
        assert_eq!(timer.slept(), [Duration::from_millis(10), Duration::from_millis(5)]);
    }

    /// A blocking sleep moves the shared clock, so it wakes the futures sleeping on it.
    #[test]
    fn a_blocking_sleep_wakes_the_futures_sleeping_on_the_timer() {
        let timer = ManualTimer::new(ManualClock::new());
        let woken = Arc::new(Count(0.into()));
        let waker = Waker::from(woken.clone());
        let mut sleep = Box::pin(timer.sleep(Duration::from_millis(10)));
        assert!(sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        timer.sleep_blocking(Duration::from_millis(10));
        assert_eq!(woken.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
    }

    /// A sleep polled on one thread while another advances the clock past its deadline either
    /// completes or is woken: never left pending with nobody to wake it. (Without one lock
    /// around the poll's reading and registration, the advance can fall between the two.)
    #[test]
    fn a_sleep_racing_an_advance_is_never_left_unwoken() {
        for _ in 0..if cfg!(miri) { 20 } else { 2_000 } {
            let timer = ManualTimer::new(ManualClock::new());
            let woken = Arc::new(Count(0.into()));
            let waker = Waker::from(woken.clone());
            let mut sleep = Box::pin(timer.sleep(Duration::from_nanos(1)));
            let advancer = {
                let timer = timer.clone();
                std::thread::spawn(move || timer.advance(Duration::from_nanos(1)))
            };
            let ready = sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_ready();
            advancer.join().unwrap();
            assert!(ready || woken.0.load(std::sync::atomic::Ordering::Relaxed) == 1);
        }
    }
}
