//! A response future of the middleware polled again after it completed (a hand-written
//! combinator that does not track completion): it stays pending, on every path, and polls
//! neither the inner service's future nor its own steps again.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use kova::{Gcra, Keyed, ManualClock, Quota};
use kova_tower::{CheckFuture, Key, KeyedLimiter, Limit, LimitKey, LimiterError, RateLimitLayer};
use tower::{service_fn, Layer, Service};

fn quota() -> Quota {
    Quota::new(1, Duration::from_secs(60)).unwrap()
}

/// An in-memory limiter behind an await, as a networked store would be (the boxed path).
struct Awaited(Arc<Keyed<LimitKey, Gcra, ManualClock>>);

impl KeyedLimiter for Awaited {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        let (limiter, key) = (self.0.clone(), key.clone());
        CheckFuture::new(async move { limiter.check_n(&key, cost).map_err(LimiterError::from) })
    }
}

/// Polls the future of one request to completion, then once more; returns the status it
/// completed with and what the extra poll gave.
fn complete_then_poll_again(limit: Limit) -> (StatusCode, Poll<()>) {
    // The inner service's future is an `async` block: polled again, it would panic.
    let inner =
        service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new())) });
    let mut service = RateLimitLayer::new(limit).layer(inner);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(service.poll_ready(&mut cx).is_ready());
    let mut future = pin!(service.call(Request::new(())));
    let status = loop {
        // The in-memory checks answer at once; the awaited one within a few polls.
        if let Poll::Ready(response) = future.as_mut().poll(&mut cx) {
            break response.unwrap().status();
        }
    };
    (status, future.as_mut().poll(&mut cx).map(drop))
}

#[test]
fn an_allowed_request_polled_again_stays_pending() {
    let limit = Limit::in_memory_with::<Gcra, _>("all", quota(), Key::global(), ManualClock::new()).unwrap();
    assert_eq!(complete_then_poll_again(limit), (StatusCode::OK, Poll::Pending));
}

#[test]
fn a_rejected_request_polled_again_stays_pending() {
    let keyed = Arc::new(Keyed::with_clock(quota(), ManualClock::new()).unwrap());
    assert!(keyed.check_n(&LimitKey::Global, 1).unwrap().is_allowed());
    let limit = Limit::new("all", quota(), Key::global(), Awaited(keyed)).unwrap();
    assert_eq!(complete_then_poll_again(limit), (StatusCode::TOO_MANY_REQUESTS, Poll::Pending));
    let limit =
        Limit::in_memory_with::<Gcra, _>("all", quota(), Key::global(), ManualClock::new()).unwrap().cost(2);
    // A cost above the quota's capacity is answered by the layer at once.
    assert_eq!(complete_then_poll_again(limit).1, Poll::Pending);
}

#[test]
fn a_request_after_an_awaited_check_polled_again_stays_pending() {
    let keyed = Arc::new(Keyed::with_clock(quota(), ManualClock::new()).unwrap());
    let limit = Limit::new("all", quota(), Key::global(), Awaited(keyed)).unwrap();
    assert_eq!(complete_then_poll_again(limit), (StatusCode::OK, Poll::Pending));
}
