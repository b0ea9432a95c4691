//! ResponseFuture: the future of a [`RateLimit`](crate::RateLimit) call.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;

use crate::headers::RateLimitHeaders;
use crate::ResponseBody;

type BoxedResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<ResponseBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of a [`RateLimit`](crate::RateLimit) call.
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, E> {
        /// Allowed: the inner service's future, and the headers to add to its response.
        Inner { #[pin] future: F, headers: Option<RateLimitHeaders> },
        /// Answered by the layer.
        Rejected { response: Option<Response<Bytes>> },
        /// Waiting on a limiter, then on the inner service.
        Boxed { future: BoxedResponse<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    pub(crate) fn inner(future: F, headers: Option<RateLimitHeaders>) -> Self {
        ResponseFuture { state: State::Inner { future, headers } }
    }

    pub(crate) fn rejected(response: Response<Bytes>) -> Self {
        ResponseFuture { state: State::Rejected { response: Some(response) } }
    }

    pub(crate) fn boxed(future: BoxedResponse<B, E>) -> Self {
        ResponseFuture { state: State::Boxed { future } }
    }
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Inner { .. } => "inner",
            State::Rejected { .. } => "rejected",
            State::Boxed { .. } => "waiting",
        };
        f.debug_struct("ResponseFuture").field("state", &state).finish()
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Inner { future, headers } => {
                let mut response = ready!(future.poll(cx))?;
                if let Some(headers) = headers.take() {
                    headers.apply(response.headers_mut());
                }
                Poll::Ready(Ok(response.map(ResponseBody::inner)))
            }
            StateProj::Rejected { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response.map(ResponseBody::full))),
                // Polled again after completing: stay pending rather than panic.
                None => Poll::Pending,
            },
            StateProj::Boxed { future } => future.as_mut().poll(cx),
        }
    }
}
