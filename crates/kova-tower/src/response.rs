//! Rejections and their default responses: `application/problem+json` (RFC 9457) with a human
//! message saying when to retry, of the ratelimit-headers draft's problem types where one fits.

use std::fmt;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use kova::{Decision, Fallback, Quota};
use serde_json::{json, Value};

use crate::headers;
use crate::{KeyError, Limit, LimiterError};

/// The draft's problem type for a request over its quota.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// The draft's problem type for a server refusing requests while it cannot count them.
pub const TEMPORARY_REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// Why the layer answered a request itself instead of passing it on.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Rejection<'a> {
    /// A limit denied the request: 429.
    Limited {
        /// The limit that denied it.
        limit: &'a Limit,
        /// Its decision.
        decision: &'a Decision,
    },
    /// No key could be found (with [`MissingKeyPolicy::Reject`](crate::MissingKeyPolicy::Reject)):
    /// [`KeyError::status`].
    KeyError {
        /// The limit whose key is missing.
        limit: &'a Limit,
        /// Why.
        error: &'a KeyError,
    },
    /// The request costs more than the limit can ever admit: 500.
    CostExceedsCapacity {
        /// The limit.
        limit: &'a Limit,
        /// The request's cost.
        cost: u64,
        /// The limit's capacity.
        capacity: u64,
    },
    /// The limiter failed and [`BackendFailurePolicy::Reject`](crate::BackendFailurePolicy::Reject) applies:
    /// 503.
    BackendUnavailable {
        /// The limit.
        limit: &'a Limit,
        /// The limiter's error (not shown to the client).
        error: &'a LimiterError,
    },
}

impl Rejection<'_> {
    /// The status of the default response.
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::Limited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Rejection::KeyError { error, .. } => error.status(),
            Rejection::CostExceedsCapacity { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            Rejection::BackendUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The limit concerned.
    pub fn limit(&self) -> &Limit {
        match self {
            Rejection::Limited { limit, .. }
            | Rejection::KeyError { limit, .. }
            | Rejection::CostExceedsCapacity { limit, .. }
            | Rejection::BackendUnavailable { limit, .. } => limit,
        }
    }

    /// The seconds the client is told to wait (`Retry-After`), when it is told.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Rejection::Limited { decision, .. } => Some(headers::retry_after_secs(decision)),
            Rejection::BackendUnavailable { .. } => Some(1),
            _ => None,
        }
    }

    /// The human message of the default body.
    pub fn detail(&self) -> String {
        let name = self.limit().name();
        match self {
            Rejection::Limited { limit, decision } => {
                let secs = self.retry_after_secs().unwrap_or(1);
                let plural = if secs == 1 { "" } else { "s" };
                match decision.fallback() {
                    Some(Fallback::StoreUnavailableDenied) => format!(
                        "Rate limit {name} cannot be checked right now, so requests are refused. \
                         Try again in {secs} second{plural}."
                    ),
                    Some(Fallback::StoreUnavailableLocal) => format!(
                        "Rate limit {name} is decided on this server alone while its store cannot be \
                         reached, at a share of the limit. Try again in {secs} second{plural}."
                    ),
                    Some(Fallback::TableFullDenied) => format!(
                        "Rate limit {name} is tracking too many clients right now. Try again in {secs} second{plural}."
                    ),
                    _ => format!(
                        "Too many requests (limit {name}: {}). Try again in {secs} second{plural}.",
                        QuotaText(&limit.quota())
                    ),
                }
            }
            Rejection::KeyError { error, .. } => format!("Cannot apply rate limit {name}: {error}."),
            Rejection::CostExceedsCapacity { cost, capacity, .. } => format!(
                "Rate limit {name} is misconfigured: this request costs {cost} but at most {capacity} are admitted at once."
            ),
            Rejection::BackendUnavailable { .. } => {
                format!("Rate limit {name} cannot be checked right now. Try again in 1 second.")
            }
        }
    }

    /// The problem body (RFC 9457) of the default response.
    ///
    /// A denial is the draft's `quota-exceeded` problem type ([`QUOTA_EXCEEDED`]) with
    /// `violated-policies` naming the limit that denied (the layer stops at the first denial,
    /// so one name); a denial by a failure policy (the store is down, or deciding locally at
    /// this server's share; the table is full) is `temporary-reduced-capacity`
    /// ([`TEMPORARY_REDUCED_CAPACITY`]): the capacity, not the client, changed. Other rejections are `about:blank` with the limit's name as `policy`. Every
    /// body has `title`, `status` and `detail`, and `retry_after` (seconds) where the client
    /// should wait.
    pub fn problem(&self) -> Value {
        let status = self.status();
        let mut problem = match self {
            Rejection::Limited { limit, decision } => match decision.fallback() {
                Some(
                    Fallback::StoreUnavailableDenied
                    | Fallback::StoreUnavailableLocal
                    | Fallback::TableFullDenied,
                ) => json!({
                    "type": TEMPORARY_REDUCED_CAPACITY,
                    "title": "Request cannot be satisfied due to temporary reduced capacity",
                }),
                _ => json!({
                    "type": QUOTA_EXCEEDED,
                    "title": "Request cannot be satisfied as assigned quota has been exceeded",
                    "violated-policies": [limit.name()],
                }),
            },
            _ => json!({
                "type": "about:blank",
                "title": status.canonical_reason().unwrap_or("Error"),
                "policy": self.limit().name(),
            }),
        };
        // Every arm above is an object.
        if let Value::Object(fields) = &mut problem {
            fields.insert("status".into(), status.as_u16().into());
            fields.insert("detail".into(), self.detail().into());
            if let Some(secs) = self.retry_after_secs() {
                fields.insert("retry_after".into(), secs.into());
            }
        }
        problem
    }

    /// The default response: the status, `Content-Type: application/problem+json`,
    /// `Cache-Control: no-store`, `Retry-After` where the client should wait, and the
    /// [`problem`](Self::problem) body. (The layer then adds the `RateLimit` headers of a 429.)
    pub fn default_response(&self) -> Response<Bytes> {
        let status = self.status();
        let retry_after = self.retry_after_secs();
        let mut body = self.problem().to_string();
        body.push('\n');

        let mut response = Response::new(Bytes::from(body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(secs) = retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// "60 per minute", "10 per second, bursts of 50".
struct QuotaText<'a>(&'a Quota);

impl fmt::Display for QuotaText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SEC: u64 = 1_000_000_000;
        let quota = self.0;
        write!(f, "{} per ", quota.limit())?;
        match quota.period_nanos() {
            SEC => f.write_str("second")?,
            n if n == 60 * SEC => f.write_str("minute")?,
            n if n == 3600 * SEC => f.write_str("hour")?,
            n if n == 86_400 * SEC => f.write_str("day")?,
            n if n % SEC == 0 => write!(f, "{} seconds", n / SEC)?,
            n if n % 1_000_000 == 0 => write!(f, "{} ms", n / 1_000_000)?,
            n => write!(f, "{n} ns")?,
        }
        if quota.burst() != quota.limit() {
            write!(f, ", bursts of {}", quota.burst())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Key;

    #[test]
    fn quota_texts() {
        let text = |q: Quota| QuotaText(&q).to_string();
        assert_eq!(text(Quota::per_minute(60).unwrap()), "60 per minute");
        assert_eq!(
            text(Quota::per_second(10).unwrap().with_burst(50).unwrap()),
            "10 per second, bursts of 50"
        );
        assert_eq!(text(Quota::new(5, std::time::Duration::from_secs(10)).unwrap()), "5 per 10 seconds");
        assert_eq!(text(Quota::new(5, std::time::Duration::from_millis(250)).unwrap()), "5 per 250 ms");
    }

    #[test]
    fn key_error_body_escapes_custom_reasons() {
        let limit = Limit::in_memory("x", Quota::per_second(1).unwrap(), Key::global()).unwrap();
        let error = KeyError::Other("bad \"thing\"".into());
        let response = Rejection::KeyError { limit: &limit, error: &error }.default_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body: Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(
            body,
            json!({
                "type": "about:blank",
                "title": "Bad Request",
                "status": 400,
                "detail": "Cannot apply rate limit x: bad \"thing\".",
                "policy": "x",
            })
        );
        // Escaped on the wire, not just in the parsed value.
        assert!(std::str::from_utf8(response.body()).unwrap().contains(r#"bad \"thing\"."#));
        assert!(response.headers().get(RETRY_AFTER).is_none());
    }
}
