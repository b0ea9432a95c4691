//! ReadyOr: a future that is either already complete (in-memory limiters: no allocation, and the
//! middleware answers without an extra await) or a boxed future (limiters that wait on I/O). The
//! one shape behind every future a limiter trait returns.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

pub(crate) enum ReadyOr<T> {
    Ready(Option<T>),
    Boxed(Boxed<T>),
}

// Nothing is pinned through a ReadyOr: the ready value is taken out by value, and the boxed
// future is pinned in its box.
impl<T> Unpin for ReadyOr<T> {}

impl<T> ReadyOr<T> {
    pub(crate) fn boxed(future: impl Future<Output = T> + Send + 'static) -> Self {
        ReadyOr::Boxed(Box::pin(future))
    }

    /// The result if already complete, else the future back.
    pub(crate) fn into_ready(self) -> Result<T, Self> {
        match self {
            ReadyOr::Ready(Some(result)) => Ok(result),
            other => Err(other),
        }
    }

    pub(crate) fn is_ready(&self) -> bool {
        matches!(self, ReadyOr::Ready(_))
    }

    /// Polls; `polled_again` answers a ready future polled after it completed (never a panic).
    pub(crate) fn poll_with(&mut self, cx: &mut Context<'_>, polled_again: impl FnOnce() -> T) -> Poll<T> {
        match self {
            ReadyOr::Ready(result) => Poll::Ready(result.take().unwrap_or_else(polled_again)),
            ReadyOr::Boxed(future) => future.as_mut().poll(cx),
        }
    }
}
