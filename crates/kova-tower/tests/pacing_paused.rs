//! The pacing client on tokio's paused clock (the local limit reads the same clock): when each
//! request is sent, to the millisecond, and what a held request keeps from other callers.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use kova::{Clock, Gcra, Quota, RateLimiter};
use kova_tower::PacingLayer;
use tokio::time::Instant;
use tower::limit::ConcurrencyLimit;
use tower::{service_fn, Layer, Service, ServiceExt};

/// A kova clock on tokio's time, which a paused runtime moves only when every task waits.
struct TokioClock(Instant);

impl Clock for TokioClock {
    fn now_nanos(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A local limit of one request every 100 ms, no burst.
fn local_limit() -> RateLimiter<Gcra, TokioClock> {
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    RateLimiter::with_clock(quota, TokioClock(Instant::now())).unwrap()
}

/// When each request reached the server.
type Sent = Arc<Mutex<Vec<Instant>>>;

/// A server that answers `/deny` with a 429 and `Retry-After: 2`, anything else with a 200,
/// and notes when each request arrived.
fn server(
    sent: Sent,
) -> impl Service<Request<()>, Response = Response<()>, Error = Infallible, Future: Send> + Clone + Send {
    service_fn(move |request: Request<()>| {
        sent.lock().unwrap_or_else(PoisonError::into_inner).push(Instant::now());
        let deny = request.uri().path() == "/deny";
        async move {
            let response = if deny {
                Response::builder().status(StatusCode::TOO_MANY_REQUESTS).header("retry-after", "2")
            } else {
                Response::builder()
            };
            Ok(response.body(()).unwrap())
        }
    })
}

fn get(path: &str) -> Request<()> {
    Request::get(path).body(()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn requests_held_by_the_server_take_their_local_turns_after_the_hold() {
    let start = Instant::now();
    let sent = Sent::default();
    let layer = PacingLayer::new().local_limit(local_limit()).margin(Duration::ZERO);
    let paced = layer.layer(server(sent.clone()));
    // The first request is denied: every later one is held 2 s.
    let denied = paced.clone().oneshot(get("/deny")).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let tasks: Vec<_> = (0..5).map(|_| tokio::spawn(paced.clone().oneshot(get("/")))).collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap().status(), StatusCode::OK);
    }
    let sent: Vec<Duration> =
        sent.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|at| *at - start).collect();
    // After the hold, one every 100 ms as the local limit says: no burst when it ends.
    let ms = |ms| Duration::from_millis(ms);
    assert_eq!(sent, [ms(0), ms(2000), ms(2100), ms(2200), ms(2300), ms(2400)]);
}

#[tokio::test(start_paused = true)]
async fn a_held_request_leaves_the_inner_services_one_slot_to_other_callers() {
    let start = Instant::now();
    let sent = Sent::default();
    // One request at a time, shared by the paced caller and a direct one.
    let one_slot = ConcurrencyLimit::new(server(sent.clone()), 1);
    let layer = PacingLayer::new().margin(Duration::ZERO);
    let mut paced = layer.layer(one_slot.clone());
    let denied = paced.ready().await.unwrap().call(get("/deny")).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // Held for 2 s.
    let held = tokio::spawn(paced.clone().oneshot(get("/held")));
    tokio::task::yield_now().await;
    // Another caller of the same inner service is served at once, not after the hold.
    let mut direct = one_slot.clone();
    let ready = tokio::time::timeout(Duration::from_millis(10), direct.ready()).await;
    assert!(ready.is_ok(), "the inner service's slot is kept by a held request");
    assert_eq!(direct.call(get("/direct")).await.unwrap().status(), StatusCode::OK);
    assert_eq!(held.await.unwrap().unwrap().status(), StatusCode::OK);
    let sent: Vec<Duration> =
        sent.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|at| *at - start).collect();
    assert_eq!(sent, [Duration::ZERO, Duration::ZERO, Duration::from_secs(2)]);
}
