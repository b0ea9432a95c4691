//! The rate-limit response headers: `RateLimit-Policy` and `RateLimit` in the syntax of
//! draft-ietf-httpapi-ratelimit-headers-10, `Retry-After`, and the legacy `X-RateLimit-*`.
//!
//! Pure formatting over a [`Quota`] and a [`Decision`], public so that a custom response or
//! another framework can write the same values.
//!
//! - `RateLimit-Policy: "name";q=Q;w=W`: the quota `Q` = the most units admitted at once (the
//!   burst), `W` = the seconds it takes to earn them all back (`period x burst / limit`, rounded
//!   up; for a window algorithm, the window). "100 per minute" is `q=100;w=60`; "10 per second,
//!   bursts of 50" is `q=50;w=5`.
//! - `RateLimit: "name";r=R;t=T`: `R` units remain, the quota is whole again in `T` seconds
//!   (rounded up).
//! - `Retry-After: S`: seconds until the denied request would be admitted, rounded UP and at
//!   least 1, so a client that waits exactly that long is never early.
//!
//! Several limits on one request are several list members, in the layer's order:
//! `RateLimit-Policy: "ip";q=60;w=60, "user";q=1000;w=3600`.

use std::fmt::Write as _;

use http::header::HeaderName;
use kova::{Decision, Fallback, Quota};

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// Legacy `X-RateLimit-Limit`: the quota of the limit closest to its end.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// Legacy `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// Legacy `X-RateLimit-Reset`: seconds until the quota is whole again (a delay, not a date).
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Whole seconds in `nanos`, rounded up.
///
/// ```
/// use kova_tower::headers::ceil_secs;
/// assert_eq!(ceil_secs(0), 0);
/// assert_eq!(ceil_secs(1), 1);
/// assert_eq!(ceil_secs(1_000_000_000), 1);
/// assert_eq!(ceil_secs(1_000_000_001), 2);
/// ```
pub fn ceil_secs(nanos: u64) -> u64 {
    nanos.div_ceil(NANOS_PER_SEC)
}

/// The `Retry-After` seconds of a denial: its retry time rounded up, at least 1 (a denial never
/// says "retry now").
///
/// ```
/// use kova::Decision;
/// use kova_tower::headers::retry_after_secs;
/// assert_eq!(retry_after_secs(&Decision::denied(10, 0, 1, 5)), 1);
/// assert_eq!(retry_after_secs(&Decision::denied(10, 0, 2_000_000_001, 5)), 3);
/// ```
pub fn retry_after_secs(decision: &Decision) -> u64 {
    ceil_secs(decision.retry_after_nanos()).max(1)
}

/// The `w` of a quota: seconds to earn the whole burst back, rounded up, at least 1.
///
/// ```
/// use kova::Quota;
/// use kova_tower::headers::window_secs;
/// assert_eq!(window_secs(&Quota::per_minute(100)?), 60);
/// assert_eq!(window_secs(&Quota::per_second(10)?.with_burst(50)?), 5);
/// assert_eq!(window_secs(&Quota::new(10, std::time::Duration::from_millis(100))?), 1);
/// # Ok::<(), kova::QuotaError>(())
/// ```
pub fn window_secs(quota: &Quota) -> u64 {
    let nanos = u128::from(quota.period_nanos()) * u128::from(quota.burst());
    let nanos = nanos.div_ceil(u128::from(quota.limit()));
    let secs = nanos.div_ceil(u128::from(NANOS_PER_SEC));
    u64::try_from(secs).unwrap_or(u64::MAX).max(1)
}

/// Whether `name` can be a policy name: 1 to 64 characters of `A-Z a-z 0-9 _ - .` (a
/// structured-field string that needs no escaping anywhere: headers, JSON, metrics labels).
pub fn is_valid_policy_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Appends one `RateLimit-Policy` member: `"name";q=Q;w=W`.
///
/// ```
/// use kova::Quota;
/// let mut out = String::new();
/// kova_tower::headers::write_policy_item(&mut out, "default", &Quota::per_minute(100)?);
/// assert_eq!(out, r#""default";q=100;w=60"#);
/// # Ok::<(), kova::QuotaError>(())
/// ```
pub fn write_policy_item(out: &mut String, name: &str, quota: &Quota) {
    // Writing to a String cannot fail.
    let _ = write!(out, "\"{name}\";q={};w={}", quota.burst(), window_secs(quota));
}

/// Appends one `RateLimit` member: `"name";r=R;t=T`.
///
/// ```
/// use kova::Decision;
/// let mut out = String::new();
/// kova_tower::headers::write_state_item(&mut out, "default", &Decision::allowed(100, 42, 29_500_000_000));
/// assert_eq!(out, r#""default";r=42;t=30"#);
/// ```
pub fn write_state_item(out: &mut String, name: &str, decision: &Decision) {
    let _ =
        write!(out, "\"{name}\";r={};t={}", decision.remaining(), ceil_secs(decision.reset_after_nanos()));
}

/// Whether a decision measured the client's usage, so its remaining count is worth publishing:
/// not when a failure policy let the request through untracked.
pub fn is_measurement(decision: &Decision) -> bool {
    !matches!(decision.fallback(), Some(Fallback::StoreUnavailableAllowed | Fallback::TableFullUntracked))
}
