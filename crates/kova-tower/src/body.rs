//! The response body: the inner service's, or the layer's own (a rejection); and which type
//! carries it ([`BodyMode`]: a wrapper of either, or the inner service's own type).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The body of a [`RateLimit`](crate::RateLimit) response: the inner service's body, or the
    /// complete body of a response the layer wrote itself (a 429).
    #[derive(Debug)]
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Full { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        ResponseBody { kind: Kind::Inner { body } }
    }

    pub(crate) fn full(data: Bytes) -> Self {
        let data = if data.is_empty() { None } else { Some(data) };
        ResponseBody { kind: Kind::Full { data } }
    }
}

impl<B: Body<Data = Bytes>> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { data } => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
        }
    }
}

/// Which body type a [`RateLimit`](crate::RateLimit) response has, chosen on the layer:
/// [`Wrap`] (the default) or [`SameBody`] ([`RateLimitLayer::same_body`](crate::RateLimitLayer::same_body)).
/// Sealed: these two are all there is.
pub trait BodyMode<B>: sealed::Sealed + Send + Sync + 'static {
    /// The response body.
    type Body;

    /// The inner service's body, as the response's.
    fn inner(body: B) -> Self::Body;

    /// The complete body of a response the layer wrote itself (a 429).
    fn full(data: Bytes) -> Self::Body;
}

/// The default [`BodyMode`]: every response's body is a [`ResponseBody`] around the inner
/// service's body or the layer's own, for any inner body type.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wrap;

/// The [`BodyMode`] of [`RateLimitLayer::same_body`](crate::RateLimitLayer::same_body): the
/// response body is the inner service's own type, and the layer's own responses are converted
/// into it (`B: From<Bytes>`: axum's `Body`, `http_body_util::Full<Bytes>`). Under axum the
/// response then reaches the router as its own `Body`, which it does not box again.
#[derive(Debug, Clone, Copy, Default)]
pub struct SameBody;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Wrap {}
    impl Sealed for super::SameBody {}
}

impl<B: Send + 'static> BodyMode<B> for Wrap {
    type Body = ResponseBody<B>;

    fn inner(body: B) -> ResponseBody<B> {
        ResponseBody::inner(body)
    }

    fn full(data: Bytes) -> ResponseBody<B> {
        ResponseBody::full(data)
    }
}

impl<B: From<Bytes> + Send + 'static> BodyMode<B> for SameBody {
    type Body = B;

    fn inner(body: B) -> B {
        body
    }

    fn full(data: Bytes) -> B {
        B::from(data)
    }
}
