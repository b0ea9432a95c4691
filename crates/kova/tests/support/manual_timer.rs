//! A [`Timer`] on a [`ManualClock`]: a sleep completes once the test has moved the clock past its
//! deadline, and a blocking sleep moves the clock itself (simulated time).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use kova::{Clock, ManualClock, Timer};

#[derive(Debug, Clone)]
pub struct ManualTimer {
    pub clock: ManualClock,
    sleepers: Arc<Mutex<Vec<Waker>>>,
    /// Every duration asked for, in order.
    pub slept: Arc<Mutex<Vec<Duration>>>,
}

impl ManualTimer {
    pub fn new(clock: ManualClock) -> Self {
        ManualTimer { clock, sleepers: Arc::default(), slept: Arc::default() }
    }

    /// Moves the clock on and wakes every sleeper (each checks its own deadline).
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
        for waker in std::mem::take(&mut *self.sleepers.lock().unwrap()) {
            waker.wake();
        }
    }
}

#[derive(Debug)]
pub struct ManualSleep {
    clock: ManualClock,
    deadline: u64,
    sleepers: Arc<Mutex<Vec<Waker>>>,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now_nanos() >= self.deadline {
            return Poll::Ready(());
        }
        self.sleepers.lock().unwrap().push(cx.waker().clone());
        Poll::Pending
    }
}

impl Timer for ManualTimer {
    type Sleep = ManualSleep;

    fn sleep(&self, duration: Duration) -> ManualSleep {
        self.slept.lock().unwrap().push(duration);
        let deadline = self.clock.now_nanos().saturating_add(duration.as_nanos() as u64);
        ManualSleep { clock: self.clock.clone(), deadline, sleepers: self.sleepers.clone() }
    }

    fn sleep_blocking(&self, duration: Duration) {
        self.slept.lock().unwrap().push(duration);
        self.clock.advance(duration);
    }
}
