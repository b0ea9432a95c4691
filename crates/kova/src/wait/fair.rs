//! First come, first served: one line of waiters per limiter (per key on a keyed table), of
//! which only the first checks.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

/// The lines of waiters, by line id (0 for a direct limiter, the key's hash on a table).
#[derive(Debug, Default)]
pub(super) struct FairQueue {
    inner: Mutex<Lines>,
}

#[derive(Debug, Default)]
struct Lines {
    next_ticket: u64,
    lines: HashMap<u64, VecDeque<Waiting>>,
}

#[derive(Debug)]
struct Waiting {
    ticket: u64,
    /// Woken when this waiter becomes first.
    waker: Option<Waker>,
}

/// A waiter's place in a line; leaving (drop) hands the turn to the next.
#[derive(Debug)]
pub(super) struct Place<'q> {
    queue: &'q FairQueue,
    line: u64,
    ticket: u64,
}

impl FairQueue {
    fn lock(&self) -> MutexGuard<'_, Lines> {
        // A panic elsewhere while holding the lock leaves the lines consistent (every change is
        // one push or one remove), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the end of `line`.
    pub(super) fn join(&self, line: u64) -> Place<'_> {
        let mut lines = self.lock();
        let ticket = lines.next_ticket;
        lines.next_ticket += 1;
        lines.lines.entry(line).or_default().push_back(Waiting { ticket, waker: None });
        Place { queue: self, line, ticket }
    }

    /// Waiters in `line` (for tests and diagnostics).
    pub(super) fn len(&self, line: u64) -> usize {
        self.lock().lines.get(&line).map_or(0, VecDeque::len)
    }
}

impl Place<'_> {
    /// Completes once this waiter is first in its line.
    pub(super) async fn first(&self) {
        poll_fn(|cx| {
            let mut lines = self.queue.lock();
            let Some(line) = lines.lines.get_mut(&self.line) else { return Poll::Ready(()) };
            if line.front().is_none_or(|w| w.ticket == self.ticket) {
                return Poll::Ready(());
            }
            if let Some(me) = line.iter_mut().find(|w| w.ticket == self.ticket) {
                me.waker = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let next = {
            let mut lines = self.queue.lock();
            let Some(line) = lines.lines.get_mut(&self.line) else { return };
            let was_first = line.front().is_some_and(|w| w.ticket == self.ticket);
            line.retain(|w| w.ticket != self.ticket);
            if line.is_empty() {
                lines.lines.remove(&self.line);
                None
            } else if was_first {
                line.front_mut().and_then(|w| w.waker.take())
            } else {
                None
            }
        };
        // Woken outside the lock: the next waiter's executor may poll it at once.
        if let Some(waker) = next {
            waker.wake();
        }
    }
}
