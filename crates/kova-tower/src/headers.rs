//! The rate-limit response headers: `RateLimit-Policy` and `RateLimit` in the syntax of
//! draft-ietf-httpapi-ratelimit-headers-11, `Retry-After`, and the legacy `X-RateLimit-*`.
//!
//! Pure formatting over a [`Quota`] and a [`Decision`], public so that a custom response or
//! another framework can write the same values.
//!
//! - `RateLimit-Policy: "name";q=Q;w=W`: the quota `Q` = the most units admitted at once (the
//!   burst), `W` = the seconds it takes to earn them all back (`period x burst / limit`, rounded
//!   up; for a window algorithm, the window). "100 per minute" is `q=100;w=60`; "10 per second,
//!   bursts of 50" is `q=50;w=5`.
//! - `qu="content-bytes"` (or `"concurrent-requests"`) follows `q` when the limit counts
//!   something other than requests ([`QuotaUnit`], set with
//!   [`Limit::quota_unit`](crate::Limit::quota_unit)); the draft's default, `"requests"`, is not
//!   written.
//! - `RateLimit: "name";r=R;t=T`: `R` units remain, the quota is whole again in `T` seconds
//!   (rounded up). On a denial, the denying limit's `T` is the `Retry-After` value instead: the
//!   draft asks that both name the same moment, and the moment the denied request would be
//!   admitted is the one a client can use (`Retry-After` is then never earlier than `T`).
//! - `pk=:...:` (opt-in, [`RateLimitLayer::partition_keys`](crate::RateLimitLayer::partition_keys)):
//!   the partition key, on both fields, as a keyed digest of the client's key
//!   ([`PartitionKeys`](crate::PartitionKeys)), never the key itself.
//! - `Retry-After: S`: seconds until the denied request would be admitted, rounded UP and at
//!   least 1, so a client that waits exactly that long is never early.
//!
//! Several limits on one request are several list members, in the layer's order:
//! `RateLimit-Policy: "ip";q=60;w=60, "user";q=1000;w=3600`.

use base64::Engine as _;
use bytes::Bytes;
use http::header::HeaderName;
use http::{HeaderMap, HeaderValue};
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

/// The largest integer a structured field holds (RFC 9651: at most 15 digits). A larger `q`, `w`,
/// `r` or `t` is written as this, so that a strict parser does not drop the whole field.
pub const MAX_SF_INTEGER: u64 = 999_999_999_999_999;

/// `n` as a structured-field integer: at most [`MAX_SF_INTEGER`].
fn sf_integer(n: u64) -> u64 {
    n.min(MAX_SF_INTEGER)
}

/// Whether `name` can be a policy name: 1 to 64 characters of `A-Z a-z 0-9 _ - .` (a
/// structured-field string that needs no escaping anywhere: headers, JSON, metrics labels).
pub fn is_valid_policy_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Appends one `RateLimit-Policy` member counting requests: `"name";q=Q;w=W`.
///
/// ```
/// use kova::Quota;
/// let mut out = String::new();
/// kova_tower::headers::write_policy_item(&mut out, "default", &Quota::per_minute(100)?);
/// assert_eq!(out, r#""default";q=100;w=60"#);
/// # Ok::<(), kova::QuotaError>(())
/// ```
pub fn write_policy_item(out: &mut String, name: &str, quota: &Quota) {
    write_policy_item_in(out, name, quota, QuotaUnit::Requests);
}

/// What a limit's quota counts: the `qu` parameter of `RateLimit-Policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum QuotaUnit {
    /// Requests (the draft's default; not written).
    #[default]
    Requests,
    /// Bytes of content (a cost function counting bytes).
    ContentBytes,
    /// Requests in flight at once.
    ConcurrentRequests,
}

impl QuotaUnit {
    /// The registered name: `requests`, `content-bytes`, `concurrent-requests`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaUnit::Requests => "requests",
            QuotaUnit::ContentBytes => "content-bytes",
            QuotaUnit::ConcurrentRequests => "concurrent-requests",
        }
    }
}

/// Appends one `RateLimit-Policy` member with its unit: `"name";q=Q;qu="unit";w=W`, the `qu`
/// left out for [`QuotaUnit::Requests`].
///
/// ```
/// use kova::Quota;
/// use kova_tower::headers::{write_policy_item_in, QuotaUnit};
/// let mut out = String::new();
/// write_policy_item_in(&mut out, "bandwidth", &Quota::per_hour(65_535)?, QuotaUnit::ContentBytes);
/// assert_eq!(out, r#""bandwidth";q=65535;qu="content-bytes";w=3600"#);
/// # Ok::<(), kova::QuotaError>(())
/// ```
pub fn write_policy_item_in(out: &mut String, name: &str, quota: &Quota, unit: QuotaUnit) {
    out.push('"');
    out.push_str(name);
    out.push_str("\";q=");
    out.push_str(itoa::Buffer::new().format(sf_integer(quota.burst())));
    if unit != QuotaUnit::Requests {
        out.push_str(";qu=\"");
        out.push_str(unit.as_str());
        out.push('"');
    }
    out.push_str(";w=");
    out.push_str(itoa::Buffer::new().format(sf_integer(window_secs(quota))));
}

/// The `t` of a decision's `RateLimit` member: seconds until the quota is whole again, or, for a
/// denial, its `Retry-After` (the moment the denied request would be admitted).
///
/// ```
/// use kova::Decision;
/// use kova_tower::headers::reset_secs;
/// assert_eq!(reset_secs(&Decision::allowed(10, 4, 36_000_000_000)), 36);
/// // Denied: admitted again in 6 s, whole again in 60 s: `t` says 6, like `Retry-After`.
/// assert_eq!(reset_secs(&Decision::denied(10, 0, 6_000_000_000, 60_000_000_000)), 6);
/// ```
pub fn reset_secs(decision: &Decision) -> u64 {
    if decision.is_allowed() {
        ceil_secs(decision.reset_after_nanos())
    } else {
        retry_after_secs(decision)
    }
}

/// Appends one `RateLimit` member: `"name";r=R;t=T` (`T` from [`reset_secs`]).
///
/// ```
/// use kova::Decision;
/// let mut out = String::new();
/// kova_tower::headers::write_state_item(&mut out, "default", &Decision::allowed(100, 42, 29_500_000_000));
/// assert_eq!(out, r#""default";r=42;t=30"#);
/// ```
pub fn write_state_item(out: &mut String, name: &str, decision: &Decision) {
    state_item(out, name, decision);
}

fn state_item(out: &mut impl Text, name: &str, decision: &Decision) {
    let (mut remaining, mut reset) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (r, t) = (sf_integer(decision.remaining()), sf_integer(reset_secs(decision)));
    let pieces = state_pieces(name, remaining.format(r), reset.format(t));
    for piece in pieces {
        out.put(piece);
    }
}

/// The pieces of one `RateLimit` member, `"name";r=R;t=T`, in order.
fn state_pieces<'a>(name: &'a str, remaining: &'a str, reset: &'a str) -> [&'a str; 6] {
    ["\"", name, "\";r=", remaining, ";t=", reset]
}

/// Appends a `pk` parameter: `;pk=:BASE64:` (a structured-field byte sequence).
///
/// ```
/// let mut out = String::from(r#""user";r=5;t=10"#);
/// kova_tower::headers::write_partition_key(&mut out, b"project123");
/// assert_eq!(out, r#""user";r=5;t=10;pk=:cHJvamVjdDEyMw==:"#);
/// ```
pub fn write_partition_key(out: &mut String, digest: &[u8]) {
    partition_key(out, digest);
}

fn partition_key(out: &mut impl Text, digest: &[u8]) {
    let base64 = base64::engine::general_purpose::STANDARD;
    out.put(";pk=:");
    // On the stack for digests up to 48 bytes (the layer's are `PARTITION_KEY_LEN`).
    let mut encoded = [0u8; 64];
    let written = base64.encode_slice(digest, &mut encoded).ok().and_then(|len| encoded.get(..len));
    match written.map(std::str::from_utf8) {
        Some(Ok(text)) => out.put(text),
        _ => out.put(&base64.encode(digest)),
    }
    out.put(":");
}

/// Whether a decision measured the client's usage, so its remaining count is worth publishing:
/// not when a failure policy let the request through untracked.
pub fn is_measurement(decision: &Decision) -> bool {
    !matches!(decision.fallback(), Some(Fallback::StoreUnavailableAllowed | Fallback::TableFullUntracked))
}

/// Somewhere header text is written: a `String` (the public writers) or the layer's
/// [`ValueText`].
trait Text {
    fn put(&mut self, text: &str);
}

impl Text for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }
}

/// A header value being written: on the stack while it fits (the usual few limits), then
/// copied once into the value (one allocation per header, none for the text).
pub(crate) struct ValueText {
    stack: [u8; STACK_TEXT],
    len: usize,
    /// The whole text, once it outgrew `stack`.
    spilled: Vec<u8>,
}

/// Bytes of header text written on the stack: a member is at most about 140 (a 64-character
/// name, two 20-digit numbers and a partition key).
const STACK_TEXT: usize = 256;

impl Default for ValueText {
    fn default() -> Self {
        ValueText { stack: [0; STACK_TEXT], len: 0, spilled: Vec::new() }
    }
}

impl Text for ValueText {
    fn put(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let end = self.len + bytes.len();
        match self.stack.get_mut(self.len..end) {
            Some(room) if self.spilled.is_empty() => room.copy_from_slice(bytes),
            _ => {
                if self.spilled.is_empty() {
                    let written = self.stack.get(..self.len).unwrap_or_default();
                    self.spilled.extend_from_slice(written);
                }
                self.spilled.extend_from_slice(bytes);
            }
        }
        self.len = end;
    }
}

impl ValueText {
    /// The text on the stack: all of it until it spilled.
    fn written_on_stack(&self) -> &[u8] {
        // Until it spilled, `len` only grew where the text fit the stack.
        self.stack.get(..self.len).unwrap_or_default()
    }

    /// Starts the next member of a list (`, ` after the first).
    fn next_member(&mut self) {
        if self.len > 0 {
            self.put(", ");
        }
    }

    /// The header value; `None` when nothing was written (or, never for text written here, when
    /// the text is not a valid header value).
    fn into_value(self) -> Option<HeaderValue> {
        let text = if self.spilled.is_empty() { self.written_on_stack() } else { &self.spilled };
        if text.is_empty() {
            return None;
        }
        HeaderValue::from_bytes(text).ok()
    }
}

/// `RateLimit-Policy` of the members `items`: each a limit's precomputed policy item
/// ([`write_policy_item_in`]) and its partition key, if published.
pub(crate) fn policy_value<'a>(
    items: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>,
) -> Option<HeaderValue> {
    let mut text = ValueText::default();
    for (item, pk) in items {
        text.next_member();
        text.put(item);
        if let Some(pk) = pk {
            partition_key(&mut text, pk);
        }
    }
    text.into_value()
}

/// `RateLimit` of the members `items`: each a limit's name, its decision and its partition key,
/// if published; `None` when there are none.
pub(crate) fn state_value<'a>(
    items: impl IntoIterator<Item = (&'a str, &'a Decision, Option<&'a [u8]>)>,
) -> Option<HeaderValue> {
    let mut text = ValueText::default();
    for (name, decision, pk) in items {
        text.next_member();
        state_item(&mut text, name, decision);
        if let Some(pk) = pk {
            partition_key(&mut text, pk);
        }
    }
    text.into_value()
}

/// The start of a limit's `RateLimit` member, `"name";r=`, before its two numbers.
pub(crate) fn state_prefix(name: &str) -> String {
    let [quote, name, r, ..] = state_pieces(name, "", "");
    [quote, name, r].concat()
}

/// `RateLimit` of one limit, from its [`state_prefix`]: written straight into a buffer of its
/// exact size, which becomes the value without another copy. Its numbers are clamped as
/// [`state_item`]'s are: one of more than 15 digits makes a strict parser drop the whole field.
pub(crate) fn state_value_of(prefix: &str, decision: &Decision) -> Option<HeaderValue> {
    let (mut remaining, mut reset) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (r, t) = (sf_integer(decision.remaining()), sf_integer(reset_secs(decision)));
    let [_, _, _, remaining, t, reset] = state_pieces("", remaining.format(r), reset.format(t));
    let pieces = [prefix, remaining, t, reset];
    let mut text = Vec::with_capacity(pieces.iter().map(|piece| piece.len()).sum());
    for piece in pieces {
        text.extend_from_slice(piece.as_bytes());
    }
    // Length and capacity are equal, so the bytes take the buffer as it is.
    HeaderValue::from_maybe_shared(Bytes::from(text)).ok()
}

/// The legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` values of `decision` (boxed: an
/// option few layers turn on, kept out of every response future).
pub(crate) fn legacy_values(decision: &Decision) -> Box<[HeaderValue; 3]> {
    Box::new([
        HeaderValue::from(decision.limit()),
        HeaderValue::from(decision.remaining()),
        HeaderValue::from(ceil_secs(decision.reset_after_nanos())),
    ])
}

/// The rate-limit headers of one response.
#[derive(Debug)]
pub(crate) struct RateLimitHeaders {
    pub(crate) policy: HeaderValue,
    pub(crate) state: Option<HeaderValue>,
    pub(crate) legacy: Option<Box<[HeaderValue; 3]>>,
}

impl RateLimitHeaders {
    /// Appends the headers (appends, so that an outer layer's members are kept).
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        headers.append(RATELIMIT_POLICY, self.policy);
        if let Some(state) = self.state {
            headers.append(RATELIMIT, state);
        }
        if let Some(legacy) = self.legacy {
            let [limit, remaining, reset] = *legacy;
            headers.insert(X_RATELIMIT_LIMIT, limit);
            headers.insert(X_RATELIMIT_REMAINING, remaining);
            headers.insert(X_RATELIMIT_RESET, reset);
        }
    }
}
