//! Settling a limit's cost from the response: the estimate is charged at the check, and the
//! real cost, from a response header or the `ActualCost` extension, is settled once the
//! response's head arrives.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use axum::{body::Body, routing::get, Extension, Router};
use http::{HeaderMap, HeaderName, Request, StatusCode};
use kova::{Algorithm, FixedWindow, Gcra, Keyed, ManualClock, Quota, SlidingWindowCounter};
use kova_tower::{
    ActualCost, CheckFuture, CompositeLimit, CountingMetrics, Key, KeyedLimiter, Limit, LimitKey, PeerAddr,
    RateLimitLayer,
};
use tower::ServiceExt;

const TOKENS_USED: HeaderName = HeaderName::from_static("x-tokens-used");

/// The handler reports the request's `x-use` as the response's tokens-used header, and as
/// `ActualCost` when it is a number.
async fn handler(request: HeaderMap) -> axum::response::Response {
    let Some(used) = request.get("x-use").cloned() else { return "ok".into_response() };
    let mut headers = HeaderMap::new();
    headers.insert(TOKENS_USED, used.clone());
    match used.to_str().unwrap().parse::<u64>() {
        Ok(cost) => (headers, Extension(ActualCost(cost)), "ok").into_response(),
        Err(_) => (headers, "ok").into_response(),
    }
}

/// 100 tokens a minute, up to 50 of debt; each call is estimated at 10.
fn tokens(clock: &ManualClock) -> Limit {
    let quota = Quota::per_minute(100).unwrap().with_overdraft(50);
    Limit::in_memory_with::<Gcra, _>("tokens", quota, Key::global(), clock.clone()).unwrap().cost(10)
}

struct App {
    router: Router,
    metrics: Arc<CountingMetrics>,
}

impl App {
    fn new(limit: Limit) -> Self {
        let metrics = Arc::new(CountingMetrics::default());
        let router =
            Router::new().route("/", get(handler)).layer(RateLimitLayer::new(limit).metrics(metrics.clone()));
        App { router, metrics }
    }

    async fn get(&self, used: Option<&str>) -> (StatusCode, String) {
        let peer = PeerAddr("203.0.113.9:40000".parse::<SocketAddr>().unwrap());
        let mut request = Request::get("/").extension(peer);
        if let Some(used) = used {
            request = request.header("x-use", used);
        }
        let request = request.body(Body::empty()).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let state = response.headers().get("ratelimit").map(|v| v.to_str().unwrap().to_owned());
        (response.status(), state.unwrap_or_default())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn from_a_header_lower_refunds_higher_runs_into_a_debt_later_requests_pay_off() {
    let clock = ManualClock::new();
    let app = App::new(tokens(&clock).settle_from_header(TOKENS_USED));

    // No actual cost: the estimate stands.
    assert_eq!(app.get(None).await, (StatusCode::OK, r#""tokens";r=90;t=6"#.into()));
    // A lower actual: 7 of the 10 come back, and the header already shows it.
    assert_eq!(app.get(Some("3")).await, (StatusCode::OK, r#""tokens";r=87;t=8"#.into()));
    // The next request sees the refund (87 - 10 = 77).
    assert_eq!(app.get(None).await, (StatusCode::OK, r#""tokens";r=77;t=14"#.into()));
    assert_eq!(app.metrics.snapshot().settled, 1);

    // A higher actual: 117 against an estimate of 10 takes the 67 left and 40 of debt.
    let (status, state) = app.get(Some("117")).await;
    assert_eq!((status, state.as_str()), (StatusCode::OK, r#""tokens";r=0;t=84"#));
    // The debt is paid off before anything is admitted: 40 of debt plus the next 10 is 50
    // tokens, 30 s at 100 a minute.
    let (status, _) = app.get(None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(29));
    assert_eq!(app.get(None).await.0, StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(1));
    // 84 s of deficit, 30 s paid off, 6 s for this request.
    assert_eq!(app.get(None).await, (StatusCode::OK, r#""tokens";r=0;t=60"#.into()));
    let counts = app.metrics.snapshot();
    assert_eq!((counts.settled, counts.settle_failures, counts.settle_shortfalls), (2, 0, 0));
}

#[tokio::test(flavor = "current_thread")]
async fn from_the_extension_and_what_the_overdraft_cannot_hold_is_reported() {
    let clock = ManualClock::new();
    let app = App::new(tokens(&clock).settle_from_extension());
    assert_eq!(app.get(Some("4")).await, (StatusCode::OK, r#""tokens";r=96;t=3"#.into()));
    assert_eq!(app.get(None).await, (StatusCode::OK, r#""tokens";r=86;t=9"#.into()));
    // 500 used: 86 left + 50 of debt are charged, 364 are not, and that is visible.
    let (status, _) = app.get(Some("500")).await;
    assert_eq!(status, StatusCode::OK);
    let counts = app.metrics.snapshot();
    assert_eq!((counts.settled, counts.settle_shortfalls), (2, 1));
    assert_eq!(app.get(None).await.0, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test(flavor = "current_thread")]
async fn an_unreadable_cost_keeps_the_estimate_and_is_reported() {
    let clock = ManualClock::new();
    let app = App::new(tokens(&clock).settle_from_header(TOKENS_USED));
    assert_eq!(app.get(Some("lots")).await, (StatusCode::OK, r#""tokens";r=90;t=6"#.into()));
    assert_eq!(app.get(Some("-3")).await, (StatusCode::OK, r#""tokens";r=80;t=12"#.into()));
    let counts = app.metrics.snapshot();
    assert_eq!((counts.settled, counts.settle_failures), (0, 2));
}

/// A limiter with no settle of its own: the trait's default.
struct CheckOnly(Keyed<LimitKey, Gcra, ManualClock>);

impl KeyedLimiter for CheckOnly {
    fn check(&self, key: &LimitKey, cost: u64) -> CheckFuture {
        KeyedLimiter::check(&self.0, key, cost)
    }

    fn refund(&self, key: &LimitKey, cost: u64) -> bool {
        self.0.refund(key, cost)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_limiter_without_settle_refunds_a_lower_cost_and_reports_a_higher_one() {
    let clock = ManualClock::new();
    let quota = Quota::per_minute(100).unwrap();
    let limiter = CheckOnly(Keyed::with_clock(quota, clock.clone()).unwrap());
    let limit = Limit::new("tokens", quota, Key::global(), limiter).unwrap().cost(10);
    let app = App::new(limit.settle_from_header(TOKENS_USED));
    // The header is written before the settle: it shows the estimate.
    assert_eq!(app.get(Some("2")).await.0, StatusCode::OK);
    assert_eq!(app.get(None).await, (StatusCode::OK, r#""tokens";r=88;t=8"#.into()));
    // Higher: the default cannot charge; the estimate stands and the failure is counted.
    assert_eq!(app.get(Some("50")).await.0, StatusCode::OK);
    assert_eq!(app.get(None).await, (StatusCode::OK, r#""tokens";r=68;t=20"#.into()));
    let counts = app.metrics.snapshot();
    assert_eq!((counts.settled, counts.settle_failures), (1, 1));
}

#[tokio::test(flavor = "current_thread")]
async fn a_composite_settles_every_limit_each_into_its_own_overdraft() {
    let clock = ManualClock::new();
    let quotas = [
        ("minute", Quota::per_minute(100).unwrap().with_overdraft(50)),
        ("day", Quota::per_day(1_000).unwrap()),
    ];
    let composite = CompositeLimit::in_memory_with::<Gcra, _>(Key::global(), quotas, clock.clone())
        .unwrap()
        .cost(10)
        .settle_from_header(TOKENS_USED);
    let metrics = Arc::new(CountingMetrics::default());
    let layer = RateLimitLayer::from_composite(composite).metrics(metrics.clone());
    let app = App { router: Router::new().route("/", get(handler)).layer(layer), metrics };

    assert_eq!(app.get(Some("3")).await, (StatusCode::OK, r#""minute";r=97;t=2, "day";r=997;t=260"#.into()));
    // 200 used: the minute limit takes its 87 left and its 50 of debt (53 uncharged), the day
    // limit (no overdraft) the 190 extra from its 987.
    let used = app.get(Some("200")).await;
    assert_eq!(used, (StatusCode::OK, r#""minute";r=0;t=90, "day";r=797;t=17540"#.into()));
    let counts = app.metrics.snapshot();
    assert_eq!((counts.settled, counts.settle_shortfalls), (4, 1));
    // The minute limit's debt denies the next request, and takes nothing from the day.
    let denied = app.get(None).await;
    assert_eq!(denied.0, StatusCode::TOO_MANY_REQUESTS);
    assert!(denied.1.ends_with(r#""day";r=797;t=17540"#), "{}", denied.1);
}

/// A lower cost settled after the window its estimate went into has ended gives nothing back:
/// the units were counted in that window, and taking them off the next one would let it admit
/// more than its quota.
#[tokio::test(flavor = "current_thread")]
async fn a_lower_cost_settled_after_its_window_ended_gives_nothing_to_the_next_window() {
    let clock = ManualClock::new();
    let quota = Quota::per_minute(10).unwrap();
    let shared = Arc::new(Keyed::<LimitKey, FixedWindow, _>::with_clock(quota, clock.clone()).unwrap());
    let limit = Limit::new("tokens", quota, Key::global(), shared.clone())
        .unwrap()
        .cost(5)
        .settle_from_header(TOKENS_USED);
    let (in_handler, later) = (shared.clone(), clock.clone());
    let handler = move || {
        let (limiter, clock) = (in_handler.clone(), later.clone());
        async move {
            // The call answers in the next window, after another request took 5 there.
            clock.advance(Duration::from_secs(60));
            assert!(limiter.check_n(&LimitKey::Global, 5).unwrap().is_allowed());
            ([(TOKENS_USED, "0")], "ok")
        }
    };
    let router = Router::new().route("/", get(handler)).layer(RateLimitLayer::new(limit));
    let response = router.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The new window holds its own 5: 5 more pass in it, not 10.
    let passed = (0..10).filter(|_| shared.check_n(&LimitKey::Global, 1).unwrap().is_allowed()).count();
    assert_eq!(passed, 5);
}

/// One request of `cost` units through a layer settling from the response, checked at
/// `checked_at`; its handler moves the clock on by `answered_after`, lets another request take
/// `other` units there, and answers that it used none. Then: how many single units the
/// limiter admits at that instant.
async fn settled_late<A: Algorithm>(
    shared: Arc<Keyed<LimitKey, A, ManualClock>>,
    clock: &ManualClock,
    (checked_at, cost): (Duration, u64),
    answered_after: Duration,
    other: u64,
) -> usize {
    let quota = shared.algorithm().quota();
    let limit = Limit::new("tokens", quota, Key::global(), shared.clone())
        .unwrap()
        .cost(cost)
        .settle_from_header(TOKENS_USED);
    clock.set(u64::try_from(checked_at.as_nanos()).unwrap());
    let (in_handler, later) = (shared.clone(), clock.clone());
    let handler = move || {
        let (limiter, clock) = (in_handler.clone(), later.clone());
        async move {
            clock.advance(answered_after);
            if other > 0 {
                assert!(limiter.check_n(&LimitKey::Global, other).unwrap().is_allowed());
            }
            ([(TOKENS_USED, "0")], "ok")
        }
    };
    let router = Router::new().route("/", get(handler)).layer(RateLimitLayer::new(limit));
    let response = router.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    (0..20).filter(|_| shared.check_n(&LimitKey::Global, 1).unwrap().is_allowed()).count()
}

/// A sliding window counter's window ends up to a period before its decision's reset: a lower
/// cost settled after the window ended, still before the reset, gives nothing back. (Given
/// back, it came off the previous window's count, which weighs on the next one: 10 taken at
/// 0.9 s, 10 more admitted at 1.1 s, 20 in 0.2 s against 10 a second.)
#[tokio::test(flavor = "current_thread")]
async fn a_lower_cost_settled_after_a_sliding_windows_end_gives_nothing_to_the_next_window() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap();
    let shared =
        Arc::new(Keyed::<LimitKey, SlidingWindowCounter, _>::with_clock(quota, clock.clone()).unwrap());
    let ms = Duration::from_millis;
    let passed = settled_late(shared, &clock, (ms(900), 10), ms(200), 0).await;
    // At 1.1 s the 10 of 0.9 s weigh 9 of the 10: one more passes, not ten.
    assert_eq!(passed, 1);
}

/// GCRA gives back only what has not refilled since the check: 10 taken at 0 (burst 10), 5
/// more at 500 ms by another request, then a settlement of 0 at 500 ms. Of the 10, 5 have
/// refilled and been taken again: 5 come back, not 10 (which admitted 15 at one instant).
#[tokio::test(flavor = "current_thread")]
async fn a_lower_cost_settled_late_gives_back_only_what_has_not_refilled() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap();
    let shared = Arc::new(Keyed::<LimitKey, Gcra, _>::with_clock(quota, clock.clone()).unwrap());
    let ms = Duration::from_millis;
    let passed = settled_late(shared, &clock, (ms(0), 10), ms(500), 5).await;
    // The other request's 5 and these 5 make the burst of 10 at 500 ms.
    assert_eq!(passed, 5);
}
