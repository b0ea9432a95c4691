//! ResponseFuture: the future of a [`RateLimit`](crate::RateLimit) call.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;

use crate::body::{BodyMode, Wrap};
use crate::headers::RateLimitHeaders;

pub(crate) type BoxedResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

pin_project! {
    /// The future of a [`RateLimit`](crate::RateLimit) call: a response whose body is `M`'s
    /// for the inner service's body `B` (see [`BodyMode`]).
    ///
    /// Polled again after it completed, it stays pending, as a terminated
    /// `futures::future::Fuse` does, and polls nothing it holds again: neither the inner
    /// service's future nor a wait on a limiter, whose `async` blocks would panic. The `Future`
    /// contract allows a panic there (tower's `Oneshot` panics), but a combinator that polls a
    /// completed future is then a panic in a server's worker, which this crate never leaves to
    /// a caller's mistake.
    pub struct ResponseFuture<F, B, E, M = Wrap>
    where
        M: BodyMode<B>,
    {
        #[pin]
        state: State<F, M::Body, E>,
        mode: PhantomData<fn(B) -> M>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, R, E> {
        /// Allowed: the inner service's future, and the headers to add to its response.
        Inner { #[pin] future: F, headers: Option<RateLimitHeaders> },
        /// Answered by the layer.
        Rejected { response: Option<Response<Bytes>> },
        /// Waiting on a limiter, then on the inner service.
        Boxed { future: BoxedResponse<R, E> },
        /// Completed: nothing left to poll.
        Done,
    }
}

impl<F, B, E, M: BodyMode<B>> ResponseFuture<F, B, E, M> {
    pub(crate) fn inner(future: F, headers: Option<RateLimitHeaders>) -> Self {
        ResponseFuture { state: State::Inner { future, headers }, mode: PhantomData }
    }

    pub(crate) fn rejected(response: Response<Bytes>) -> Self {
        ResponseFuture { state: State::Rejected { response: Some(response) }, mode: PhantomData }
    }

    pub(crate) fn boxed(future: BoxedResponse<M::Body, E>) -> Self {
        ResponseFuture { state: State::Boxed { future }, mode: PhantomData }
    }
}

impl<F, B, E, M: BodyMode<B>> fmt::Debug for ResponseFuture<F, B, E, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Inner { .. } => "inner",
            State::Rejected { .. } => "rejected",
            State::Boxed { .. } => "waiting",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture").field("state", &state).finish()
    }
}

impl<F, B, E, M> Future for ResponseFuture<F, B, E, M>
where
    F: Future<Output = Result<Response<B>, E>>,
    M: BodyMode<B>,
{
    type Output = Result<Response<M::Body>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        let output = match state.as_mut().project() {
            StateProj::Inner { future, headers } => ready!(future.poll(cx)).map(|mut response| {
                if let Some(headers) = headers.take() {
                    headers.apply(response.headers_mut());
                }
                response.map(M::inner)
            }),
            StateProj::Rejected { response } => match response.take() {
                Some(response) => Ok(response.map(M::full)),
                // Taken only as the future completes, which then moves to `Done`.
                None => return Poll::Pending,
            },
            StateProj::Boxed { future } => ready!(future.as_mut().poll(cx)),
            // Polled again after completing: stay pending rather than poll a finished future.
            StateProj::Done => return Poll::Pending,
        };
        // The finished future is dropped here, so that no later poll can reach it.
        state.set(State::Done);
        Poll::Ready(output)
    }
}
