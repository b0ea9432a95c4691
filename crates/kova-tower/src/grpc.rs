//! gRPC-shaped rejections: the layer's HTTP answer turned into a trailers-only gRPC response,
//! so a tonic client sees a `Status` instead of a transport error.

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

use crate::headers::{RATELIMIT, RATELIMIT_POLICY};
use crate::Rejection;

/// The gRPC response for `rejection`, keeping `http`'s rate-limit headers as metadata.
///
/// A denial is `RESOURCE_EXHAUSTED` with `google.rpc.RetryInfo` (the exact retry delay, not
/// rounded to seconds like `Retry-After`) and a `google.rpc.QuotaFailure` naming the limit.
pub(crate) fn response(rejection: &Rejection<'_>, http: &Response<Bytes>) -> Response<Bytes> {
    let code = match http.status() {
        StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
        StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
        status if status.is_client_error() => Code::InvalidArgument,
        _ => Code::Internal,
    };
    let mut details = ErrorDetails::new();
    if let Rejection::Limited { limit, decision } = rejection {
        details.set_retry_info(Some(Duration::from_nanos(decision.retry_after_nanos())));
        details.add_quota_failure_violation(limit.name(), "rate limit exceeded");
    } else if let Some(secs) = rejection.retry_after_secs() {
        details.set_retry_info(Some(Duration::from_secs(secs)));
    }
    let status = tonic::Status::with_error_details(code, rejection.detail(), details);

    // A gRPC status always travels in an HTTP 200; an empty body with the status in the
    // headers is a trailers-only response.
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    if status.add_header(headers).is_err() {
        // Only an unencodable message could fail; the code alone still says what happened.
        headers.insert("grpc-status", HeaderValue::from(code as i32));
    }
    for name in [RATELIMIT_POLICY, RATELIMIT] {
        for value in http.headers().get_all(&name) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Some(value) = http.headers().get(RETRY_AFTER) {
        headers.insert(RETRY_AFTER, value.clone());
    }
    response
}
