//! A check that has to be awaited (a limiter that waits on a store): which limit it answers
//! for, and the future of one limit's check or of a composite's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use kova::limits::LimitsDecision;
use kova::Decision;

use crate::enforce::Reading;
use crate::stopwatch::Stopwatch;
use crate::{CheckFuture, CompositeCheckFuture, LimitKey, LimiterError};

/// A check that has to be awaited.
pub(crate) struct Pending {
    pub(crate) check: Check,
    pub(crate) future: PendingCheck,
}

/// Which check a pending future answers.
pub(crate) struct Check {
    pub(crate) index: usize,
    pub(crate) key: LimitKey,
    pub(crate) cost: u64,
    pub(crate) started: Stopwatch,
    /// When it was made, read before it where what it takes could be given back.
    pub(crate) at: Option<Reading>,
}

/// A pending check of one limit or of a composite.
pub(crate) enum PendingCheck {
    One(CheckFuture),
    All(CompositeCheckFuture),
}

/// What a pending check answered.
pub(crate) enum Answer {
    One(Result<Decision, LimiterError>),
    All(Result<LimitsDecision, LimiterError>),
}

impl Future for PendingCheck {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        match self.get_mut() {
            PendingCheck::One(future) => Pin::new(future).poll(cx).map(Answer::One),
            PendingCheck::All(future) => Pin::new(future).poll(cx).map(Answer::All),
        }
    }
}
