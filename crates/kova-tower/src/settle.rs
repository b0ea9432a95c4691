//! Settling a limit's cost from the response: the handler (or the upstream it proxies) says what
//! the request really cost, in a response extension ([`ActualCost`]) or a header, and the layer
//! gives back or charges the difference from the estimate it checked. This file holds what
//! users and limiters see (the real cost, where it is read, a settle's result and error, its
//! future); the layer's part, settling a request's limits once its response arrives, is under
//! enforcement (`enforce/settling.rs`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderMap, HeaderName, HeaderValue};
use kova::reservation::Settlement;
use kova::Decision;

use crate::ready::ReadyOr;

/// The real cost of a request, known once it has been served (an LLM call's tokens): a response
/// extension the handler sets, for every limit configured with
/// [`Limit::settle_from_extension`](crate::Limit::settle_from_extension).
///
/// In axum, return it with the response: `(Extension(ActualCost(tokens)), body)`.
///
/// ```
/// use std::net::SocketAddr;
/// use axum::{body::Body, routing::post, Extension, Router};
/// use http::{Request, StatusCode};
/// use kova::{Gcra, ManualClock, Quota};
/// use kova_tower::{ActualCost, Key, Limit, PeerAddr, RateLimitLayer};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let clock = ManualClock::new();
/// // 1,000 tokens a minute per client, up to 500 of debt; a call is estimated at 100 tokens.
/// let quota = Quota::per_minute(1_000)?.with_overdraft(500);
/// let tokens = Limit::in_memory_with::<Gcra, _>("tokens", quota, Key::peer_ip(), clock)?
///     .cost(100)
///     .settle_from_extension();
/// let app = Router::new()
///     .route("/v1/chat", post(|body: String| async move {
///         let used = body.len() as u64; // what the model really used
///         (Extension(ActualCost(used)), "answer")
///     }))
///     .layer(RateLimitLayer::new(tokens));
///
/// let peer = PeerAddr("203.0.113.7:50000".parse::<SocketAddr>()?);
/// let chat = |len: usize| Request::post("/v1/chat").extension(peer).body(Body::from("x".repeat(len))).unwrap();
/// // Used 40 of the 100 checked: 60 come back, and the header says so.
/// let cheap = app.clone().oneshot(chat(40)).await?;
/// assert_eq!(cheap.headers()["ratelimit"], r#""tokens";r=960;t=3"#);
/// // Used 1,300: 1,340 in all, 340 beyond the quota: a debt paid off (at 1,000 a minute)
/// // before the next call is admitted.
/// let long = app.clone().oneshot(chat(1_300)).await?;
/// assert_eq!(long.headers()["ratelimit"], r#""tokens";r=0;t=81"#);
/// assert_eq!(app.clone().oneshot(chat(2)).await?.status(), StatusCode::TOO_MANY_REQUESTS);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActualCost(pub u64);

/// Where a limit reads a response's real cost.
#[derive(Debug, Clone)]
pub(crate) enum SettleFrom {
    Extension,
    Header(HeaderName),
}

impl SettleFrom {
    /// The response's real cost: `None` when it does not say (the estimate stands).
    pub(crate) fn read(
        &self,
        headers: &HeaderMap,
        extensions: &http::Extensions,
    ) -> Option<Result<u64, SettleError>> {
        match self {
            SettleFrom::Extension => extensions.get::<ActualCost>().map(|cost| Ok(cost.0)),
            SettleFrom::Header(name) => headers.get(name).map(|value| {
                let text = value.to_str().ok().map(str::trim);
                text.and_then(|t| t.parse::<u64>().ok())
                    .ok_or_else(|| SettleError::UnreadableCost { header: name.clone(), value: value.clone() })
            }),
        }
    }
}

/// What a settle did: the core's [`Settlement`] (units given back, charged, and any that did not
/// fit even in the overdraft), and the key's state after it when the limiter knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settled {
    /// Units given back, charged, and left uncharged.
    pub settlement: Settlement,
    /// The key's state after settling (what the `RateLimit` header then shows), if known.
    pub after: Option<Decision>,
}

impl Settled {
    /// A settle that did `settlement`, with the key's state `after` it if known.
    pub fn new(settlement: Settlement, after: Option<Decision>) -> Self {
        Settled { settlement, after }
    }
}

/// A response's real cost that could not be settled. The estimate charged at the check stands
/// (nothing more is given back or charged), and the layer reports it
/// ([`EventKind::SettleFailed`](crate::EventKind::SettleFailed)).
#[derive(Debug)]
#[non_exhaustive]
pub enum SettleError {
    /// The limiter cannot settle this difference (a store without a settle of its own, or a
    /// limiter that cannot take units back).
    Unsupported,
    /// The response's cost header is not a whole number of units.
    UnreadableCost {
        /// The header read.
        header: HeaderName,
        /// Its value.
        value: HeaderValue,
    },
    /// The backend failed while settling.
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

impl SettleError {
    /// A short label for metrics: `unsupported`, `unreadable_cost` or `backend`.
    pub fn label(&self) -> &'static str {
        match self {
            SettleError::Unsupported => "unsupported",
            SettleError::UnreadableCost { .. } => "unreadable_cost",
            SettleError::Backend(_) => "backend",
        }
    }
}

impl fmt::Display for SettleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettleError::Unsupported => {
                f.write_str("the limiter cannot settle this cost; the estimate stands")
            }
            SettleError::UnreadableCost { header, value } => {
                write!(f, "response header {header} is not a whole number of units: {value:?}")
            }
            SettleError::Backend(e) => write!(f, "rate-limit backend failed while settling: {e}"),
        }
    }
}

impl std::error::Error for SettleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SettleError::Backend(e) => Some(&**e),
            _ => None,
        }
    }
}

/// The future of one [`KeyedLimiter::settle`](crate::KeyedLimiter::settle) (`T` = [`Settled`])
/// or [`CompositeLimiter::settle`](crate::CompositeLimiter::settle) (one [`Settled`] per limit):
/// already complete for in-memory limiters, boxed for those that wait on I/O.
#[must_use = "a settle does nothing unless awaited"]
pub struct SettleFuture<T = Settled>(ReadyOr<Result<T, SettleError>>);

impl<T> SettleFuture<T> {
    /// A settle that is already complete.
    pub fn ready(result: Result<T, SettleError>) -> Self {
        SettleFuture(ReadyOr::Ready(Some(result)))
    }

    /// A settle that completes when `future` does.
    pub fn new<F>(future: F) -> Self
    where
        F: Future<Output = Result<T, SettleError>> + Send + 'static,
    {
        SettleFuture(ReadyOr::boxed(future))
    }
}

impl<T> fmt::Debug for SettleFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.0.is_ready() { "SettleFuture::Ready" } else { "SettleFuture::Pending" };
        f.write_str(state)
    }
}

impl<T> Future for SettleFuture<T> {
    type Output = Result<T, SettleError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut()
            .0
            .poll_with(cx, || Err(SettleError::Backend("settle polled after it completed".into())))
    }
}
