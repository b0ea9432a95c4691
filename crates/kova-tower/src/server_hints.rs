//! What a server's response says about when it will admit the next request: `Retry-After`, and
//! the `RateLimit` / `RateLimit-Policy` fields of draft-ietf-httpapi-ratelimit-headers-11, read
//! with an RFC 9651 parser (`sfv`).

use std::time::{Duration, SystemTime};

use http::header::RETRY_AFTER;
use http::{HeaderMap, StatusCode};
use sfv::{BareItem, ListEntry, Parser};

use crate::headers::{RATELIMIT, RATELIMIT_POLICY};

/// How long to hold the next request after a response with `status` and `headers`; `None`
/// when the server says nothing that asks for a wait.
///
/// - a 429 or 503 with `Retry-After` (delay-seconds or an HTTP date): that long;
/// - a `RateLimit` member with `r=0`: its `t`, or without a `t`, the `w` of the same-named
///   `RateLimit-Policy` member (the longest a quota takes to come back); the longest of these
///   when several policies are exhausted.
///
/// The wait for `r=0` is the time until the whole quota is back, not the first unit: it is
/// the only moment the draft's fields promise for every algorithm (a fixed window gives nothing
/// back before it). A field that does not parse is ignored, as the draft requires; so is a
/// member whose `r` or `t` is not a non-negative Integer (a malformed `t` holds for nothing,
/// not for the policy's `w`).
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, StatusCode};
/// use kova_tower::server_hints::hold_after;
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit", r#""ip";r=0;t=7, "user";r=40;t=100"#.parse()?);
/// assert_eq!(hold_after(StatusCode::OK, &headers), Some(Duration::from_secs(7)));
/// headers.insert("ratelimit", r#""ip";r=3;t=7"#.parse()?);
/// assert_eq!(hold_after(StatusCode::OK, &headers), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn hold_after(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    let mut hold = exhausted_policies_wait(headers);
    if matches!(status, StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE) {
        if let Some(retry) = retry_after(headers) {
            hold = Some(hold.map_or(retry, |h| h.max(retry)));
        }
    }
    hold
}

/// `Retry-After` as a delay: delay-seconds, or an HTTP date from now (a date in the past is no
/// wait).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(text).ok()?;
    Some(date.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// The longest wait among the `RateLimit` members with nothing left.
fn exhausted_policies_wait(headers: &HeaderMap) -> Option<Duration> {
    let state = parse(headers, &RATELIMIT)?;
    let mut policies = None;
    let mut hold: Option<u64> = None;
    for (name, params) in &state {
        if integer(params, "r") != Some(0) {
            continue;
        }
        let secs = match param(params, "t") {
            // A `t` that is not a non-negative Integer is ignored with its member: its window is
            // no promise about when this quota is back, and no hold is better than a guess.
            Some(t) => match non_negative(t) {
                Some(t) => t,
                None => continue,
            },
            None => {
                let policy =
                    policies.get_or_insert_with(|| parse(headers, &RATELIMIT_POLICY).unwrap_or_default());
                match policy.iter().find(|(n, _)| n == name).and_then(|(_, p)| integer(p, "w")) {
                    Some(w) => w,
                    None => continue,
                }
            }
        };
        hold = Some(hold.map_or(secs, |h| h.max(secs)));
    }
    hold.map(Duration::from_secs)
}

type Members = Vec<(String, Vec<(String, BareItem)>)>;

/// The members of a list field (every field line, combined), by policy name; `None` if the field
/// is absent or does not parse.
fn parse(headers: &HeaderMap, name: &http::HeaderName) -> Option<Members> {
    let mut combined = String::new();
    for value in headers.get_all(name) {
        if !combined.is_empty() {
            combined.push_str(", ");
        }
        combined.push_str(value.to_str().ok()?);
    }
    if combined.is_empty() {
        return None;
    }
    let list: sfv::List = Parser::new(&combined).parse().ok()?;
    let members = list
        .into_iter()
        .filter_map(|entry| match entry {
            ListEntry::Item(item) => {
                let name = match &item.bare_item {
                    BareItem::String(s) => s.as_str().to_owned(),
                    BareItem::Token(t) => t.as_str().to_owned(),
                    _ => return None,
                };
                let params = item.params.into_iter().map(|(k, v)| (k.as_str().to_owned(), v)).collect();
                Some((name, params))
            }
            ListEntry::InnerList(_) => None,
        })
        .collect();
    Some(members)
}

/// A parameter, whatever its value.
fn param<'a>(params: &'a [(String, BareItem)], key: &str) -> Option<&'a BareItem> {
    params.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A non-negative Integer parameter.
fn integer(params: &[(String, BareItem)], key: &str) -> Option<u64> {
    param(params, key).and_then(non_negative)
}

/// A non-negative Integer.
fn non_negative(item: &BareItem) -> Option<u64> {
    match item {
        BareItem::Integer(n) => u64::try_from(i64::from(*n)).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn exhausted_policies_hold_for_their_reset_and_the_longest_wins() {
        let h = headers(&[("ratelimit", r#""a";r=0;t=3"#), ("ratelimit", r#""b";r=0;t=9, "c";r=1;t=50"#)]);
        assert_eq!(hold_after(StatusCode::OK, &h), Some(Duration::from_secs(9)));
    }

    #[test]
    fn without_t_the_policy_window_is_the_wait() {
        let h =
            headers(&[("ratelimit", r#""a";r=0"#), ("ratelimit-policy", r#""a";q=10;w=60, "b";q=1;w=5"#)]);
        assert_eq!(hold_after(StatusCode::OK, &h), Some(Duration::from_secs(60)));
        // Nothing says how long: no hold.
        let h = headers(&[("ratelimit", r#""a";r=0"#)]);
        assert_eq!(hold_after(StatusCode::OK, &h), None);
    }

    #[test]
    fn retry_after_counts_on_429_and_503_and_takes_the_longer_wait() {
        let h = headers(&[("retry-after", "12"), ("ratelimit", r#""a";r=0;t=5"#)]);
        assert_eq!(hold_after(StatusCode::TOO_MANY_REQUESTS, &h), Some(Duration::from_secs(12)));
        assert_eq!(hold_after(StatusCode::SERVICE_UNAVAILABLE, &h), Some(Duration::from_secs(12)));
        // A Retry-After on a 200 is not about this limit.
        assert_eq!(hold_after(StatusCode::OK, &h), Some(Duration::from_secs(5)));
        let past = headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]);
        assert_eq!(hold_after(StatusCode::TOO_MANY_REQUESTS, &past), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let h = headers(&[("retry-after", &later)]);
        let hold = hold_after(StatusCode::TOO_MANY_REQUESTS, &h).unwrap();
        assert!(hold > Duration::from_secs(115) && hold <= Duration::from_secs(120), "{hold:?}");
    }

    #[test]
    fn malformed_fields_are_ignored() {
        let five = Some(Duration::from_secs(5));
        for (field, hold) in [
            (r#""a";r=0;t=5"#, five),
            (r#""a";r=0;t=5,"#, None),
            ("a;;", None),
            (r#""a";r=-1;t=5"#, None),
            (r#""a";r=0;t="5""#, None),
            (r#""a";r=0;t=5.0"#, None),
            // A member that is not a policy is skipped, not the whole field.
            (r#"("inner"), "a";r=0;t=5"#, five),
        ] {
            let h = headers(&[("ratelimit", field)]);
            assert_eq!(hold_after(StatusCode::OK, &h), hold, "{field:?}");
        }
        let h = headers(&[("retry-after", "soon")]);
        assert_eq!(hold_after(StatusCode::TOO_MANY_REQUESTS, &h), None);
    }

    #[test]
    fn a_malformed_t_holds_for_nothing_not_for_the_window() {
        let policy = ("ratelimit-policy", r#""a";q=10;w=60"#);
        for field in
            [r#""a";r=0;t="5""#, r#""a";r=0;t=5.0"#, r#""a";r=0;t=-1"#, r#""a";r=0;t=?1"#, r#""a";r=0;t=x"#]
        {
            let h = headers(&[("ratelimit", field), policy]);
            assert_eq!(hold_after(StatusCode::OK, &h), None, "{field:?}");
        }
        // Another exhausted policy still holds for its own `t`.
        let h = headers(&[("ratelimit", r#""a";r=0;t="5", "b";r=0;t=7"#), policy]);
        assert_eq!(hold_after(StatusCode::OK, &h), Some(Duration::from_secs(7)));
        // Without a `t`, the window is the wait.
        let h = headers(&[("ratelimit", r#""a";r=0"#), policy]);
        assert_eq!(hold_after(StatusCode::OK, &h), Some(Duration::from_secs(60)));
    }
}
