//! RateLimit: the tower `Service` that checks each request before passing it on.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::enforce::{Pending, Progress, Run, Verdict};
use crate::layer::Config;
use crate::{ResponseBody, ResponseFuture};

/// Rate-limits requests to an inner service; made by [`RateLimitLayer`](crate::RateLimitLayer).
///
/// When every limiter answers at once (in-memory limiters), the request is decided inside `call`
/// and passed to the inner service directly: no extra allocation or await. When a limiter has to
/// wait (a shared store), the inner service, already ready, is taken for the request and a clone
/// left in its place (the usual tower pattern), and the request waits in a boxed future.
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S> RateLimit<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        RateLimit { inner, config }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        let mut run = Run::default();
        match run.drive(&self.config, &parts) {
            Progress::Done(Verdict::Pass(headers)) => {
                ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), headers)
            }
            Progress::Done(Verdict::Reject(response)) => ResponseFuture::rejected(response),
            Progress::Pending(pending) => {
                // `self.inner` is the instance that was polled ready: the request takes it, and a
                // clone (to be polled ready before the next call) stays behind.
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                let config = self.config.clone();
                ResponseFuture::boxed(Box::pin(async move {
                    let mut pending: Pending = pending;
                    let verdict = loop {
                        let result = pending.future.await;
                        match run.resume(&config, &parts, &pending.check, result) {
                            Progress::Done(verdict) => break verdict,
                            Progress::Pending(next) => pending = next,
                        }
                    };
                    match verdict {
                        Verdict::Reject(response) => Ok(response.map(ResponseBody::full)),
                        Verdict::Pass(headers) => {
                            let mut inner = inner;
                            let mut response = inner.call(Request::from_parts(parts, body)).await?;
                            if let Some(headers) = headers {
                                headers.apply(response.headers_mut());
                            }
                            Ok(response.map(ResponseBody::inner))
                        }
                    }
                }))
            }
        }
    }
}
