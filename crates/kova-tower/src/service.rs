//! RateLimit: the tower `Service` that checks each request before passing it on.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::body::{BodyMode, Wrap};
use crate::config::Config;
use crate::enforce::{Awaiting, Pass, Pending, Progress, Run, Start, Verdict};
use crate::ResponseFuture;

/// Rate-limits requests to an inner service; made by [`RateLimitLayer`](crate::RateLimitLayer).
///
/// When every limiter answers at once (in-memory limiters), the request is decided inside `call`
/// and passed to the inner service directly: no extra allocation or await. When a limiter has to
/// wait (a shared store), the inner service, already ready, is taken for the request and a clone
/// left in its place (the usual tower pattern), and the request waits in a boxed future.
///
/// `M` chooses the response body type ([`BodyMode`]): [`Wrap`] by default,
/// [`SameBody`](crate::SameBody) with [`RateLimitLayer::same_body`](crate::RateLimitLayer::same_body).
pub struct RateLimit<S, M = Wrap> {
    inner: S,
    config: Arc<Config>,
    mode: PhantomData<fn() -> M>,
}

impl<S: Clone, M> Clone for RateLimit<S, M> {
    fn clone(&self) -> Self {
        RateLimit { inner: self.inner.clone(), config: self.config.clone(), mode: PhantomData }
    }
}

impl<S: fmt::Debug, M> fmt::Debug for RateLimit<S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S, M> RateLimit<S, M> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        RateLimit { inner, config, mode: PhantomData }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, ReqBody, ResBody, M> Service<Request<ReqBody>> for RateLimit<S, M>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
    M: BodyMode<ResBody>,
{
    type Response = Response<M::Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error, M>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        // Built in place: a layer of several limits pays no box for its run.
        let mut run: Run;
        let progress = match self.config.one_plain_limit() {
            Some(limit) => match Run::start_one(&self.config, limit, &parts) {
                Start::Passed(headers) => {
                    return ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), headers);
                }
                Start::Running(started, progress) => {
                    run = *started;
                    progress
                }
            },
            None => {
                run = Run::default();
                run.drive(&self.config, &parts)
            }
        };
        match progress {
            Progress::Done(Verdict::Pass(Pass::Now(headers))) => {
                ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), headers)
            }
            Progress::Done(Verdict::Reject(response)) => ResponseFuture::rejected(response),
            Progress::Done(Verdict::Pass(pass)) => {
                let (inner, config) = self.take_ready();
                let request = Request::from_parts(parts, body);
                ResponseFuture::boxed(Box::pin(async move {
                    serve::<_, _, _, M>(inner, request, pass, &config).await
                }))
            }
            Progress::Pending(pending) => {
                let (inner, config) = self.take_ready();
                // Dropped while a check waits, it gives back what earlier limits took.
                let mut run = Awaiting::new(run, config);
                ResponseFuture::boxed(Box::pin(async move {
                    let mut pending: Pending = pending;
                    let verdict = loop {
                        let answer = pending.future.await;
                        match run.resume(&parts, &pending.check, answer) {
                            Progress::Done(verdict) => break verdict,
                            Progress::Pending(next) => pending = next,
                        }
                    };
                    match verdict {
                        Verdict::Reject(response) => Ok(response.map(M::full)),
                        Verdict::Pass(pass) => {
                            let request = Request::from_parts(parts, body);
                            serve::<_, _, _, M>(inner, request, pass, run.config()).await
                        }
                    }
                }))
            }
        }
    }
}

impl<S: Clone, M> RateLimit<S, M> {
    /// The instance that was polled ready, for a request that goes on in a future of its own;
    /// a clone (to be polled ready before the next call) stays behind (the usual tower pattern).
    fn take_ready(&mut self) -> (S, Arc<Config>) {
        let clone = self.inner.clone();
        (std::mem::replace(&mut self.inner, clone), self.config.clone())
    }
}

/// Passes the request on and writes the headers of `pass` on its response, settling from the
/// response first where a limit asks for it.
async fn serve<S, ReqBody, ResBody, M>(
    mut inner: S,
    request: Request<ReqBody>,
    pass: Pass,
    config: &Config,
) -> Result<Response<M::Body>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    M: BodyMode<ResBody>,
{
    let mut response = inner.call(request).await?;
    let headers = match pass {
        Pass::Now(headers) => headers,
        Pass::AfterResponse(settling) => {
            let actuals = settling.read(config, response.headers(), response.extensions());
            settling.finish(config, actuals).await
        }
    };
    if let Some(headers) = headers {
        headers.apply(response.headers_mut());
    }
    Ok(response.map(M::inner))
}
