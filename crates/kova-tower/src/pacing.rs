//! PacingLayer: a tower layer for outgoing requests (a hyper client, any tower HTTP client)
//! that holds each request until it would be admitted: by what the server's last responses
//! said ([`server_hints`](crate::server_hints)), then by a local kova limit.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use kova::{Algorithm, Clock, Decision, RateLimiter};
use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

use crate::server_hints;

type LocalCheck = dyn Fn() -> Decision + Send + Sync;

/// What every [`Pacing`] service of one layer shares.
struct Shared {
    local: Option<Arc<LocalCheck>>,
    /// The server's own hold: no request starts before it.
    hold_until: Mutex<Option<Instant>>,
    max_hold: Duration,
    margin: Duration,
}

impl Shared {
    /// When the server's hold ends, if it has not ended by `now`.
    fn hold_after(&self, now: Instant) -> Option<Instant> {
        let hold = *self.hold_until.lock().unwrap_or_else(PoisonError::into_inner);
        hold.filter(|until| *until > now)
    }

    /// Takes one unit of the local limit, if there is one: `Err` with how long until it may
    /// admit one (a denial consumes nothing).
    fn take_local(&self) -> Result<(), Duration> {
        match &self.local {
            Some(check) => {
                let decision = check();
                if decision.is_allowed() {
                    Ok(())
                } else {
                    Err(decision.retry_after())
                }
            }
            None => Ok(()),
        }
    }

    /// Notes what a response asked for, measured from when it arrived (after the server
    /// decided: never earlier than the server meant).
    fn observe<B>(&self, response: &Response<B>, arrived: Instant) {
        let Some(hold) = server_hints::hold_after(response.status(), response.headers()) else {
            return;
        };
        // Saturating: a server may ask for any number of seconds (`Retry-After: 18446744073709551615`).
        let until = arrived + hold.saturating_add(self.margin).min(self.max_hold);
        let mut current = self.hold_until.lock().unwrap_or_else(PoisonError::into_inner);
        if current.is_none_or(|c| c < until) {
            *current = Some(until);
        }
    }
}

/// A tower [`Layer`] for clients: each request waits for its turn before it is sent.
///
/// - After each response, the layer reads `Retry-After` (on a 429 or 503) and the `RateLimit`
///   field (a policy with `r=0` is back whole after its `t`, or the `w` of its
///   `RateLimit-Policy`), and holds every later request until then, at most
///   [`max_hold`](Self::max_hold) (default 10 minutes), plus a small
///   [`margin`](Self::margin) for the server's clock.
/// - With [`local_limit`](Self::local_limit), a request then waits until a kova limiter
///   admits it (check, sleep its retry time, check again: a denial consumes nothing). The
///   hold comes first, so that requests held together leave at the local rate when it ends.
///
/// The turn is waited for in `poll_ready`, before the inner service is polled ready, as
/// tower's own rate limit does: a service polled ready may keep a slot for the request (a
/// concurrency limit's permit, a buffer's place) that a request waiting here would keep from
/// every other caller. Once a request has its turn, it waits for the inner service and goes:
/// a hold announced meanwhile applies to the requests after it.
///
/// Holding after `r=0` until the quota is whole again admits a burst of `q` every `w`: the
/// quota's own rate, for any algorithm. The fields describe the requests one client sends
/// one after another; clients sending many at once should add a local limit.
/// A denied request is returned to the caller as it came (the layer does not retry).
///
/// ```
/// use kova::{Quota, RateLimiter};
/// use kova_tower::PacingLayer;
/// // At most 10 requests a second of our own, and whatever the server says on top.
/// let own: RateLimiter = RateLimiter::new(Quota::per_second(10)?)?;
/// let layer = PacingLayer::new().local_limit(own);
/// // tower::ServiceBuilder::new().layer(layer).service(hyper_client)
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct PacingLayer {
    shared: Arc<Shared>,
}

impl fmt::Debug for PacingLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacingLayer")
            .field("local_limit", &self.shared.local.is_some())
            .field("max_hold", &self.shared.max_hold)
            .finish_non_exhaustive()
    }
}

impl Default for PacingLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl PacingLayer {
    /// A layer that follows the server's fields only.
    pub fn new() -> Self {
        let shared = Shared {
            local: None,
            hold_until: Mutex::new(None),
            max_hold: Duration::from_secs(600),
            margin: Duration::from_millis(25),
        };
        PacingLayer { shared: Arc::new(shared) }
    }

    /// Also waits on `limiter` before each request (the client's own quota). Call it before the
    /// layer makes services: they share what the layer holds then.
    pub fn local_limit<A: Algorithm, C: Clock + 'static>(self, limiter: RateLimiter<A, C>) -> Self {
        self.with_shared(|shared| shared.local = Some(Arc::new(move || limiter.check())))
    }

    /// The longest the layer holds requests for a server's fields (a server announcing an hour
    /// is waited on for at most this, so that one wrong field cannot stall the client forever).
    /// At most [`LONGEST_HOLD`](Self::LONGEST_HOLD) (a year): a longer one, up to
    /// `Duration::MAX`, means a year.
    pub fn max_hold(self, max: Duration) -> Self {
        self.with_shared(|shared| shared.max_hold = max.min(Self::LONGEST_HOLD))
    }

    /// The longest [`max_hold`](Self::max_hold): a year, well inside what the clock's instants
    /// can be moved by.
    pub const LONGEST_HOLD: Duration = Duration::from_secs(365 * 24 * 60 * 60);

    /// Added to every hold the server asks for (default 25 ms): the server's clock may run a
    /// little late at one moment and less at the next (a coarse clock under load), and a request
    /// sent exactly when the quota is back would then arrive a moment before it, by the
    /// server's clock. The server's fields are whole seconds rounded up, so most holds have
    /// room to spare already; this covers the ones that land exactly on the second.
    pub fn margin(self, margin: Duration) -> Self {
        self.with_shared(|shared| shared.margin = margin)
    }

    fn with_shared(self, f: impl FnOnce(&mut Shared)) -> Self {
        let mut shared = match Arc::try_unwrap(self.shared) {
            Ok(shared) => shared,
            // A clone of the layer exists: configure a copy (the clone keeps the original).
            Err(arc) => Shared {
                local: arc.local.clone(),
                hold_until: Mutex::new(*arc.hold_until.lock().unwrap_or_else(PoisonError::into_inner)),
                max_hold: arc.max_hold,
                margin: arc.margin,
            },
        };
        f(&mut shared);
        PacingLayer { shared: Arc::new(shared) }
    }
}

impl<S> Layer<S> for PacingLayer {
    type Service = Pacing<S>;

    fn layer(&self, inner: S) -> Pacing<S> {
        Pacing { inner, shared: self.shared.clone(), turn: Turn::default() }
    }
}

/// A client service that paces its requests; made by [`PacingLayer`].
///
/// Each request's turn is waited for in [`poll_ready`](Service::poll_ready) (see
/// [`PacingLayer`]); a clone starts without one.
pub struct Pacing<S> {
    inner: S,
    shared: Arc<Shared>,
    turn: Turn,
}

/// Where a service stands in waiting for its next request's turn.
#[derive(Default)]
struct Turn {
    /// The hold was over and the local limit admitted the request: only the inner service's
    /// readiness is left.
    taken: bool,
    /// A wait is under way on `sleep`.
    sleeping: bool,
    /// The service's timer, reset for each wait (kept between waits: one allocation).
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Turn {
    fn sleep_until(&mut self, deadline: Instant) {
        match &mut self.sleep {
            Some(sleep) => sleep.as_mut().reset(deadline),
            None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.sleeping = true;
    }

    /// Waits until the server's hold is over, then for the local limit's unit.
    fn poll_take(&mut self, shared: &Shared, cx: &mut Context<'_>) -> Poll<()> {
        while !self.taken {
            if self.sleeping {
                if let Some(sleep) = &mut self.sleep {
                    ready!(sleep.as_mut().poll(cx));
                }
                self.sleeping = false;
            }
            let now = Instant::now();
            // The hold first: a unit taken during it would be spent on a request that cannot
            // go, and every request holding one would go at once when it ends.
            if let Some(until) = shared.hold_after(now) {
                self.sleep_until(until);
                continue;
            }
            match shared.take_local() {
                Ok(()) => self.taken = true,
                // A local limit asks for far less than a year; the cap keeps the instant valid.
                Err(retry) => self.sleep_until(now + retry.min(PacingLayer::LONGEST_HOLD)),
            }
        }
        Poll::Ready(())
    }
}

impl<S: Clone> Clone for Pacing<S> {
    fn clone(&self) -> Self {
        // A turn belongs to the service that waited for it, as a readiness does in tower.
        Pacing { inner: self.inner.clone(), shared: self.shared.clone(), turn: Turn::default() }
    }
}

impl<S: fmt::Debug> fmt::Debug for Pacing<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pacing")
            .field("inner", &self.inner)
            .field("turn_taken", &self.turn.taken)
            .finish_non_exhaustive()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Pacing<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResBody>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // The turn before the inner service's readiness: nothing of the inner service is kept
        // while a request waits here.
        ready!(self.turn.poll_take(&self.shared, cx));
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The turn goes with this request; the next one waits for its own.
        self.turn.taken = false;
        let future = self.inner.call(request);
        let shared = self.shared.clone();
        Box::pin(async move {
            let response = future.await?;
            shared.observe(&response, Instant::now());
            Ok(response)
        })
    }
}
