//! The future of a wait that need not wait: its first check decided inside its first poll, so
//! an admission at once costs what the check costs.
//!
//! An `async fn` would do the same, but its poll is a function of its own that the compiler
//! leaves out of line, and the decision then comes back through memory: written in narrower
//! stores than the loads that copy it on, which the store buffer cannot forward. This poll is
//! small and `#[inline]`; only a wait that must sleep builds (and boxes) the waiting future.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::Decision;

/// A wait that first runs `check` (its answer if `Some`) and otherwise awaits what `wait`
/// builds. Nothing runs before the first poll, so a future dropped unpolled consumes nothing.
#[must_use = "futures do nothing unless polled"]
pub(crate) struct CheckFirst<Check, Wait, Waiting> {
    state: State<Check, Wait, Waiting>,
}

enum State<Check, Wait, Waiting> {
    Start(Check, Wait),
    Waiting(Pin<Box<Waiting>>),
    Done,
}

/// A first check's answer when it ends the wait (an admission, or an error), `None` for a
/// denial, after which the wait sleeps.
#[inline(always)]
pub(crate) fn unless_denied<E>(answer: Result<Decision, E>) -> Option<Result<Decision, E>> {
    match answer {
        Ok(first) if !first.is_allowed() => None,
        answer => Some(answer),
    }
}

impl<Check, Wait, Waiting> CheckFirst<Check, Wait, Waiting> {
    pub(crate) fn new(check: Check, wait: Wait) -> Self {
        CheckFirst { state: State::Start(check, wait) }
    }
}

impl<T, Check, Wait, Waiting> Future for CheckFirst<Check, Wait, Waiting>
where
    // `Fn`, called by reference: a closure called as `FnOnce` goes through a shim of the
    // compiler's that is left out of line, whatever the closure's own `#[inline]`.
    Check: Fn() -> Option<T> + Unpin,
    Wait: FnOnce() -> Waiting + Unpin,
    Waiting: Future<Output = T>,
{
    type Output = T;

    // Always: inside a caller's larger loop or task, the inliner leaves a poll of this size out
    // of line, and the first check's decision then crosses the call through memory.
    #[inline(always)]
    #[expect(
        clippy::panic,
        reason = "polling a completed future breaks Future's contract, which allows a panic (as async fn does); Pending would hang the caller silently"
    )]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = self.get_mut();
        loop {
            match std::mem::replace(&mut this.state, State::Done) {
                State::Start(check, wait) => match check() {
                    Some(answer) => return Poll::Ready(answer),
                    None => this.state = State::Waiting(Box::pin(wait())),
                },
                State::Waiting(mut waiting) => {
                    let polled = waiting.as_mut().poll(cx);
                    if polled.is_pending() {
                        this.state = State::Waiting(waiting);
                    }
                    return polled;
                }
                State::Done => panic!("a wait polled after it completed"),
            }
        }
    }
}
