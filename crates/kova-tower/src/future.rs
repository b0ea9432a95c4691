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
        match self.project().state.project() {
            StateProj::Inner { future, headers } => {
                let mut response = ready!(future.poll(cx))?;
                if let Some(headers) = headers.take() {
                    headers.apply(response.headers_mut());
                }
                Poll::Ready(Ok(response.map(M::inner)))
            }
            StateProj::Rejected { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response.map(M::full))),
                // Polled again after completing: stay pending rather than panic.
                None => Poll::Pending,
            },
            StateProj::Boxed { future } => future.as_mut().poll(cx),
        }
    }
}
