//! Hostile input, table by table: every public constructor and method of kova-tower that takes a
//! size, count, cost, duration, key or header, at its edges (0, 1, the largest allowed, one
//! more, `u64::MAX`, `Duration::ZERO` / `MAX`, empty, very long, malformed, many values). Each
//! case names what it must get: a typed error, or the documented decision. None may panic.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Request, StatusCode};
use kova::limits::{LimitsError, MAX_LIMITS};
use kova::{Decision, Gcra, ManualClock, Quota, QuotaError};
use kova_tower::client_ip::{self, ClientIpError, ForwardedHeader, TrustedProxies, X_FORWARDED_FOR};
use kova_tower::headers;
use kova_tower::{
    CompositeLimit, ConfigError, CountingMetrics, Key, KeyError, Limit, LimitKey, PartitionKeys, PeerAddr,
    RateLimitLayer, MAX_HEADER_KEY_LEN,
};
use tower::ServiceExt;

const API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// A request's headers, in order.
type Headers = Vec<(HeaderName, HeaderValue)>;
/// The lines of one header, in order.
type Lines = Vec<HeaderValue>;

fn parts_with(headers: &[(HeaderName, HeaderValue)], peer: Option<&str>) -> http::request::Parts {
    let mut request = Request::get("/").body(()).unwrap();
    for (name, value) in headers {
        request.headers_mut().append(name.clone(), value.clone());
    }
    if let Some(peer) = peer {
        request.extensions_mut().insert(PeerAddr(SocketAddr::new(peer.parse().unwrap(), 4000)));
    }
    request.into_parts().0
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap()
}

/// One GET of `/` through `layer` from `peer`, with `headers`.
async fn status_through(layer: RateLimitLayer, headers: &[(HeaderName, HeaderValue)]) -> StatusCode {
    let app = Router::new().route("/", get(|| async { "ok" })).layer(layer);
    let mut request = Request::get("/").extension(PeerAddr("203.0.113.7:4000".parse().unwrap()));
    for (name, value) in headers {
        request = request.header(name.clone(), value.clone());
    }
    app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap().status()
}

/// What a limit's name gets: 1 to 64 characters of `A-Z a-z 0-9 _ - .`, or `InvalidName`.
#[test]
fn limit_names_at_their_edges() {
    let quota = Quota::per_minute(10).unwrap();
    let cases: [(&str, String, bool); 9] = [
        ("empty", String::new(), false),
        ("one character", "a".into(), true),
        ("64 characters", "n".repeat(64), true),
        ("65 characters", "n".repeat(65), false),
        ("very long", "n".repeat(1 << 16), false),
        ("a quote (would break the header)", "a\"b".into(), false),
        ("a comma (would split the list)", "a,b".into(), false),
        ("non-ASCII", "naïve".into(), false),
        ("a NUL byte", "a\0b".into(), false),
    ];
    for (case, name, valid) in cases {
        let got = Limit::in_memory(&name, quota, Key::global());
        match (valid, got) {
            (true, Ok(limit)) => assert_eq!(limit.name(), name, "{case}"),
            (false, Err(ConfigError::InvalidName(rejected))) => assert_eq!(rejected, name, "{case}"),
            (_, other) => panic!("{case}: expected valid={valid}, got {other:?}"),
        }
        let sketch = Limit::sketch(&name, quota, Key::global());
        assert_eq!(sketch.is_ok(), valid, "{case} (sketch)");
    }
}

/// Quotas at their edges, through every limit constructor: the quota's own typed error where
/// kova rejects it, else a limit (or the table's or sketch's typed error), never a panic.
#[test]
fn quotas_at_their_edges() {
    let cases: [(&str, Result<Quota, QuotaError>); 9] = [
        ("zero limit", Quota::new(0, Duration::from_secs(1))),
        ("zero period", Quota::new(1, Duration::ZERO)),
        ("longest period", Quota::new(1, Duration::MAX)),
        ("1 per nanosecond", Quota::from_nanos(1, 1)),
        ("u64::MAX per nanosecond", Quota::from_nanos(u64::MAX, 1)),
        ("u64::MAX per u64::MAX ns", Quota::from_nanos(u64::MAX, u64::MAX)),
        ("1 per u64::MAX ns", Quota::from_nanos(1, u64::MAX)),
        ("burst 0", Quota::per_second(1).and_then(|q| q.with_burst(0))),
        ("burst u64::MAX", Quota::per_second(1).and_then(|q| q.with_burst(u64::MAX))),
    ];
    for (case, quota) in cases {
        let quota = match quota {
            // The quota type's own answer: a named reason.
            Err(error) => {
                assert!(!error.to_string().is_empty(), "{case}");
                continue;
            }
            Ok(quota) => quota,
        };
        for (kind, limit) in [
            ("in_memory", Limit::in_memory("q", quota, Key::global())),
            ("sketch", Limit::sketch("q", quota, Key::global())),
        ] {
            match limit {
                Ok(limit) => {
                    // Announced as the draft says: `w` at least 1, whatever the quota.
                    assert!(headers::window_secs(&limit.quota()) >= 1, "{case} ({kind})");
                }
                Err(ConfigError::Quota(_) | ConfigError::Table(_) | ConfigError::Sketch(_)) => {}
                Err(other) => panic!("{case} ({kind}): unexpected {other:?}"),
            }
        }
    }
    // The rejections are the named ones, not some error.
    assert_eq!(Quota::new(0, Duration::from_secs(1)), Err(QuotaError::ZeroLimit));
    assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
}

/// A request's cost: 0 is a peek (admitted, nothing taken), up to the burst admitted, above it a
/// 500 naming the misconfiguration (never a 429 that waiting could cure).
#[tokio::test]
async fn costs_at_their_edges() {
    let quota = Quota::per_minute(10).unwrap();
    let cases: [(&str, u64, StatusCode); 5] = [
        ("a peek", 0, StatusCode::OK),
        ("one unit", 1, StatusCode::OK),
        ("the whole burst", 10, StatusCode::OK),
        ("one past the burst", 11, StatusCode::INTERNAL_SERVER_ERROR),
        ("u64::MAX", u64::MAX, StatusCode::INTERNAL_SERVER_ERROR),
    ];
    for (case, cost, expected) in cases {
        let metrics = Arc::new(CountingMetrics::default());
        let limit = Limit::in_memory_with::<Gcra, _>("ip", quota, Key::peer_ip(), ManualClock::new())
            .unwrap()
            .cost(cost);
        let layer = RateLimitLayer::new(limit).metrics(metrics.clone());
        assert_eq!(status_through(layer, &[]).await, expected, "{case}");
        let counts = metrics.snapshot();
        let misconfigured = u64::from(expected == StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(counts.misconfigured, misconfigured, "{case}");
    }
    // A peek takes nothing: ten more single requests all pass.
    let limit = Limit::in_memory_with::<Gcra, _>("ip", quota, Key::peer_ip(), ManualClock::new()).unwrap();
    let layer = RateLimitLayer::new(limit.clone().cost(0)).limit(limit.clone().cost(0));
    for _ in 0..3 {
        assert_eq!(status_through(layer.clone(), &[]).await, StatusCode::OK);
    }
    let single = RateLimitLayer::new(limit);
    for n in 0..10 {
        assert_eq!(status_through(single.clone(), &[]).await, StatusCode::OK, "request {n}");
    }
    assert_eq!(status_through(single, &[]).await, StatusCode::TOO_MANY_REQUESTS);
}

/// The near-limit share: a percentage, above 100 meaning 100 (documented); 0 reports only an
/// allowed request that left nothing.
#[tokio::test]
async fn near_limit_percents_at_their_edges() {
    // A quota of 10: the first request leaves 9 (90%), the tenth leaves 0.
    let cases: [(&str, u8, u64, u64); 6] = [
        ("zero", 0, 1, 9),
        ("one", 1, 1, 9),
        ("ninety", 90, 10, 0),
        ("a hundred", 100, 10, 0),
        ("one more than a hundred", 101, 10, 0),
        ("u8::MAX", u8::MAX, 10, 0),
    ];
    for (case, percent, near, allowed) in cases {
        let metrics = Arc::new(CountingMetrics::default());
        let quota = Quota::per_minute(10).unwrap();
        let limit =
            Limit::in_memory_with::<Gcra, _>("ip", quota, Key::peer_ip(), ManualClock::new()).unwrap();
        let layer = RateLimitLayer::new(limit).metrics(metrics.clone()).near_limit_percent(percent);
        for _ in 0..10 {
            assert_eq!(status_through(layer.clone(), &[]).await, StatusCode::OK, "{case}");
        }
        let counts = metrics.snapshot();
        assert_eq!((counts.near_limit, counts.allowed), (near, allowed), "{case}");
    }
}

/// A key read from a header: once, 1 to `MAX_HEADER_KEY_LEN` visible ASCII characters, else a
/// typed error (and a 400 through the layer).
#[tokio::test]
async fn header_keys_at_their_edges() {
    let key = Key::header(API_KEY);
    let malformed = Err(KeyError::MalformedHeader(API_KEY));
    let many: Headers = (0..1000).map(|n| (API_KEY, value(&format!("k{n}")))).collect();
    let cases: Vec<(&str, Headers, Result<LimitKey, KeyError>)> = vec![
        ("absent", vec![], Err(KeyError::MissingHeader(API_KEY))),
        ("empty", vec![(API_KEY, value(""))], malformed.clone()),
        ("only spaces", vec![(API_KEY, value("   "))], malformed.clone()),
        ("one character", vec![(API_KEY, value("k"))], Ok(LimitKey::api_key("k"))),
        (
            "the longest",
            vec![(API_KEY, value(&"k".repeat(MAX_HEADER_KEY_LEN)))],
            Ok(LimitKey::api_key(&"k".repeat(MAX_HEADER_KEY_LEN))),
        ),
        ("one byte longer", vec![(API_KEY, value(&"k".repeat(MAX_HEADER_KEY_LEN + 1)))], malformed.clone()),
        ("64 KiB", vec![(API_KEY, value(&"k".repeat(1 << 16)))], malformed.clone()),
        ("twice", vec![(API_KEY, value("a")), (API_KEY, value("a"))], malformed.clone()),
        ("a thousand values", many, malformed.clone()),
        ("a tab inside", vec![(API_KEY, value("a\tb"))], malformed.clone()),
        (
            "bytes outside UTF-8",
            vec![(API_KEY, HeaderValue::from_bytes(b"\xff\xfe").unwrap())],
            malformed.clone(),
        ),
        ("spaces inside kept", vec![(API_KEY, value(" a b "))], Ok(LimitKey::api_key("a b"))),
    ];
    let quota = Quota::per_minute(10).unwrap();
    for (case, headers, expected) in cases {
        assert_eq!(key.extract(&parts_with(&headers, None)), expected, "{case}");
        let layer = RateLimitLayer::new(Limit::in_memory("key", quota, key.clone()).unwrap());
        let status = if expected.is_ok() { StatusCode::OK } else { StatusCode::BAD_REQUEST };
        assert_eq!(status_through(layer, &headers).await, status, "{case} (through the layer)");
    }
}

/// Forwarding headers written by anyone: the client address or a typed `ClientIpError`, for
/// either header, however long, broken or repeated.
#[test]
fn forwarding_headers_at_their_edges() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let proxy = ip("10.0.0.1");
    let xff = TrustedProxies::parse("10.0.0.0/8").unwrap();
    let fwd = xff.clone().with_header(ForwardedHeader::Forwarded);
    let missing_xff = Err(ClientIpError::MissingHeader { header: X_FORWARDED_FOR });
    let malformed_xff = Err(ClientIpError::Malformed { header: X_FORWARDED_FOR });
    let forwarded = http::header::FORWARDED;
    let malformed_fwd = Err(ClientIpError::Malformed { header: forwarded.clone() });
    let unknown_fwd = Err(ClientIpError::Unknown { header: forwarded.clone() });
    let long_chain = format!("198.51.100.1, {}", vec!["10.0.0.2"; 10_000].join(", "));
    let junk_left = format!("{}, 203.0.113.7", "x".repeat(100_000));
    let cases: Vec<(&str, &TrustedProxies, Lines, Result<IpAddr, ClientIpError>)> = vec![
        ("no header", &xff, vec![], missing_xff.clone()),
        ("empty", &xff, vec![value("")], missing_xff.clone()),
        ("only commas", &xff, vec![value(",,, ,")], missing_xff.clone()),
        ("one address", &xff, vec![value("203.0.113.7")], Ok(ip("203.0.113.7"))),
        ("not an address", &xff, vec![value("garbage")], malformed_xff.clone()),
        ("port out of range", &xff, vec![value("203.0.113.7:99999")], malformed_xff.clone()),
        ("unclosed bracket", &xff, vec![value("[2001:db8::1")], malformed_xff.clone()),
        ("bracketed with port", &xff, vec![value("[2001:db8::1]:80")], Ok(ip("2001:db8::1"))),
        ("zone id", &xff, vec![value("fe80::1%eth0")], malformed_xff.clone()),
        ("10,000 trusted hops", &xff, vec![value(&long_chain)], Ok(ip("198.51.100.1"))),
        ("100 KB of junk left of the client", &xff, vec![value(&junk_left)], Ok(ip("203.0.113.7"))),
        ("a thousand lines", &xff, vec![value("10.0.0.3"); 1000], Ok(ip("10.0.0.3"))),
        (
            "bytes outside UTF-8 in the proxy's entry",
            &xff,
            vec![HeaderValue::from_bytes(b"203.0.113.7, 10.0.0.\xff").unwrap()],
            malformed_xff.clone(),
        ),
        ("forwarded: for= empty", &fwd, vec![value("for=")], malformed_fwd.clone()),
        ("forwarded: no for", &fwd, vec![value("proto=https")], unknown_fwd.clone()),
        ("forwarded: unknown", &fwd, vec![value("for=unknown")], unknown_fwd.clone()),
        ("forwarded: obfuscated", &fwd, vec![value("for=\"_hidden\"")], unknown_fwd.clone()),
        ("forwarded: two for", &fwd, vec![value("for=1.2.3.4;for=5.6.7.8")], malformed_fwd.clone()),
        ("forwarded: unclosed quote", &fwd, vec![value("for=\"[::1]")], malformed_fwd.clone()),
        ("forwarded: no value", &fwd, vec![value("for")], malformed_fwd.clone()),
        ("forwarded: obfuscated port", &fwd, vec![value("for=\"[2001:db8::1]:_p\"")], Ok(ip("2001:db8::1"))),
    ];
    for (case, trusted, lines, expected) in cases {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append(trusted.header().name(), line);
        }
        assert_eq!(client_ip::client_ip(proxy, &map, trusted), expected, "{case}");
        // Through the key: the same answer, as a key or a `KeyError::ClientIp`.
        let key = Key::from(Key::client_ip(trusted.clone()));
        let headers: Vec<(HeaderName, HeaderValue)> =
            map.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
        let got = key.extract(&parts_with(&headers, Some("10.0.0.1")));
        let want =
            expected.map(|ip| LimitKey::ip(ip, if ip.is_ipv4() { 32 } else { 64 })).map_err(KeyError::from);
        assert_eq!(got, want, "{case} (as a key)");
    }
}

/// Trusted proxy lists: empty means none, a bad entry is named, any length parses.
#[test]
fn trusted_proxy_lists_at_their_edges() {
    let long: String = (0..10_000).map(|n| format!("10.{}.{}.0/24, ", n / 256, n % 256)).collect();
    let cases: [(&str, &str, Result<bool, &str>); 8] = [
        ("empty", "", Ok(true)),
        ("separators only", " ,, ,", Ok(true)),
        ("one address", "10.0.0.1", Ok(false)),
        ("everything", "0.0.0.0/0, ::/0", Ok(false)),
        ("host bits set", "10.0.0.1/8", Ok(false)),
        ("prefix past the address", "10.0.0.0/33", Err("10.0.0.0/33")),
        ("not an address", "proxy.internal", Err("proxy.internal")),
        ("10,000 networks", &long, Ok(false)),
    ];
    for (case, list, expected) in cases {
        match (TrustedProxies::parse(list), expected) {
            (Ok(trusted), Ok(empty)) => assert_eq!(trusted.is_empty(), empty, "{case}"),
            (Err(error), Err(entry)) => assert!(error.to_string().contains(entry), "{case}: {error}"),
            (got, _) => panic!("{case}: expected {expected:?}, got {got:?}"),
        }
    }
    // "10.0.0.1/8" is the network 10.0.0.0/8.
    assert!(TrustedProxies::parse("10.0.0.1/8").unwrap().contains("10.200.0.1".parse().unwrap()));
}

/// Prefix lengths: longer than the address means the whole address (documented), 0 is one key
/// for every address of the family.
#[test]
fn prefix_lengths_at_their_edges() {
    let v4: IpAddr = "203.0.113.77".parse().unwrap();
    let v6: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
    let cases: [(&str, u8, u8, &str, &str); 5] = [
        ("zero", 0, 0, "0.0.0.0/0", "::/0"),
        ("one", 1, 1, "128.0.0.0/1", "::/1"),
        ("the whole address", 32, 128, "203.0.113.77/32", "2001:db8:1:2:3:4:5:6/128"),
        ("one past it", 33, 129, "203.0.113.77/32", "2001:db8:1:2:3:4:5:6/128"),
        ("u8::MAX", u8::MAX, u8::MAX, "203.0.113.77/32", "2001:db8:1:2:3:4:5:6/128"),
    ];
    for (case, v4_len, v6_len, v4_net, v6_net) in cases {
        assert_eq!(client_ip::mask(v4, v4_len, v6_len).to_string(), v4_net, "{case} (IPv4)");
        assert_eq!(client_ip::mask(v6, v4_len, v6_len).to_string(), v6_net, "{case} (IPv6)");
        let key = Key::from(Key::peer_ip().ipv4_prefix(v4_len).ipv6_prefix(v6_len));
        let got = key.extract(&parts_with(&[], Some("203.0.113.77"))).unwrap();
        assert_eq!(got.to_string(), format!("ip:{v4_net}"), "{case} (through IpKey)");
        assert_eq!(LimitKey::ip(v6, v6_len).to_string(), format!("ip:{v6_net}"), "{case} (LimitKey::ip)");
    }
}

/// Composites: no limits and more than kova's `MAX_LIMITS` are typed errors; a bad member
/// name is named.
#[test]
fn composite_sizes_at_their_edges() {
    let quota = Quota::per_minute(10).unwrap();
    let names: Vec<String> = (0..=MAX_LIMITS).map(|n| format!("l{n}")).collect();
    let limits = |n: usize| names.iter().take(n).map(|name| (name.as_str(), quota)).collect::<Vec<_>>();
    let empty = CompositeLimit::in_memory(Key::global(), limits(0)).map(|_| ());
    assert_eq!(empty, Err(ConfigError::Composite(LimitsError::Empty)));
    assert_eq!(CompositeLimit::in_memory(Key::global(), limits(1)).map(|c| c.limits().len()), Ok(1));
    let most = CompositeLimit::in_memory(Key::global(), limits(MAX_LIMITS)).map(|c| c.limits().len());
    assert_eq!(most, Ok(MAX_LIMITS));
    let too_many = CompositeLimit::in_memory(Key::global(), limits(MAX_LIMITS + 1)).map(|_| ());
    assert_eq!(
        too_many,
        Err(ConfigError::Composite(LimitsError::TooMany { count: MAX_LIMITS + 1, max: MAX_LIMITS }))
    );
    let bad_name = CompositeLimit::in_memory(Key::global(), [("ok", quota), ("not ok", quota)]).map(|_| ());
    assert_eq!(bad_name, Err(ConfigError::InvalidName("not ok".into())));
}

/// The public header writers at the extremes of `u64`: whole seconds rounded up, no overflow.
#[test]
fn header_numbers_at_their_edges() {
    let max_secs = u64::MAX.div_ceil(1_000_000_000);
    let cases: [(&str, u64, u64); 4] = [
        ("zero", 0, 0),
        ("one nanosecond", 1, 1),
        ("one second", 1_000_000_000, 1),
        ("u64::MAX", u64::MAX, max_secs),
    ];
    for (case, nanos, secs) in cases {
        assert_eq!(headers::ceil_secs(nanos), secs, "{case}");
    }
    // Retry-After is at least 1 even for a retry time of 0, and exact at u64::MAX.
    assert_eq!(headers::retry_after_secs(&Decision::denied(1, 0, 0, 0)), 1);
    assert_eq!(headers::retry_after_secs(&Decision::denied(u64::MAX, 0, u64::MAX, u64::MAX)), max_secs);
    let mut out = String::new();
    headers::write_state_item(&mut out, "x", &Decision::allowed(u64::MAX, u64::MAX, u64::MAX));
    // Structured-field integers have at most 15 digits: larger ones are written as the largest.
    assert_eq!(out, format!("\"x\";r=999999999999999;t={max_secs}"));
    let mut out = String::new();
    headers::write_policy_item(
        &mut out,
        "x",
        &Quota::new(10u64.pow(16), Duration::from_secs(365 * 86_400)).unwrap(),
    );
    assert_eq!(out, "\"x\";q=999999999999999;w=31536000");
    // Partition keys of any length, on the stack or not, are the standard base64.
    for len in [0, 1, 48, 49, 4096] {
        let digest = vec![0xa5; len];
        let mut out = String::new();
        headers::write_partition_key(&mut out, &digest);
        use base64::Engine as _;
        let expected = base64::engine::general_purpose::STANDARD.encode(&digest);
        assert_eq!(out, format!(";pk=:{expected}:"), "digest of {len} bytes");
    }
    // A digest of a very long key is still 16 bytes.
    let keys = PartitionKeys::with_secret([0; 32]);
    assert_eq!(keys.digest("x", &LimitKey::user(&"u".repeat(1 << 20))).len(), kova_tower::PARTITION_KEY_LEN);
}

/// A limit whose quota passes 15 digits, through the single-limit path: every number of its
/// `RateLimit` member fits a structured-field integer (a strict parser drops the whole field
/// for one longer number, `server_hints` and `PacingLayer` included).
#[tokio::test]
async fn huge_quota_state_fits_structured_fields() {
    let quota = Quota::new(10u64.pow(16), Duration::from_secs(365 * 86_400)).unwrap();
    let limit = Limit::in_memory("huge", quota, Key::global()).unwrap();
    let app = Router::new().route("/", get(|| async { "ok" })).layer(RateLimitLayer::new(limit));
    let request = Request::get("/").extension(PeerAddr("203.0.113.7:4000".parse().unwrap()));
    let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let state = response.headers()[headers::RATELIMIT].to_str().unwrap().to_owned();
    let numbers = state.split(|c: char| !c.is_ascii_digit()).filter(|n| !n.is_empty());
    for number in numbers {
        assert!(number.len() <= 15, "{number} has more than 15 digits in {state:?}");
    }
    assert!(state.starts_with("\"huge\";r=999999999999999;t="), "{state}");
}

/// A settled cost read from the response: a whole number up to `u64::MAX` is settled (what does
/// not fit in the overdraft reported as uncharged), anything else keeps the estimate and is
/// reported as a failure.
#[tokio::test]
async fn settled_costs_at_their_edges() {
    const USED: HeaderName = HeaderName::from_static("x-used");
    // (case, header value, settled, failed, shortfall)
    let cases: [(&str, &str, u64, u64, u64); 8] = [
        ("zero", "0", 1, 0, 0),
        ("the estimate", "1", 1, 0, 0),
        ("the burst", "10", 1, 0, 0),
        ("u64::MAX", "18446744073709551615", 1, 0, 1),
        ("u64::MAX + 1", "18446744073709551616", 0, 1, 0),
        ("negative", "-1", 0, 1, 0),
        ("not a number", "lots", 0, 1, 0),
        ("empty", "", 0, 1, 0),
    ];
    for (case, used, settled, failed, shortfall) in cases {
        let metrics = Arc::new(CountingMetrics::default());
        let quota = Quota::per_minute(10).unwrap().with_overdraft(5);
        let limit = Limit::in_memory_with::<Gcra, _>("tokens", quota, Key::peer_ip(), ManualClock::new())
            .unwrap()
            .settle_from_header(USED);
        let layer = RateLimitLayer::new(limit).metrics(metrics.clone());
        let used = used.to_owned();
        let app = Router::new().route("/", get(move || async move { ([(USED, used)], "ok") })).layer(layer);
        let request = Request::get("/").extension(PeerAddr("203.0.113.7:4000".parse().unwrap()));
        let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{case}");
        let counts = metrics.snapshot();
        assert_eq!(
            (counts.settled, counts.settle_failures, counts.settle_shortfalls),
            (settled, failed, shortfall),
            "{case}"
        );
    }
}

/// The pacing client against a hostile server: any `Retry-After`, with any margin and longest
/// hold, is held at most `max_hold` (itself at most a year), never a panic.
#[cfg(feature = "client")]
#[tokio::test]
async fn pacing_holds_at_their_edges() {
    use kova_tower::PacingLayer;
    use tower::Layer;
    let cases: [(&str, &str, Duration, Duration); 5] = [
        ("zero", "0", Duration::ZERO, Duration::from_secs(600)),
        ("u64::MAX seconds", "18446744073709551615", Duration::from_millis(25), Duration::from_secs(600)),
        ("past u64", "18446744073709551616", Duration::from_millis(25), Duration::from_secs(600)),
        ("longest margin", "1", Duration::MAX, Duration::from_secs(600)),
        ("longest hold and margin", "18446744073709551615", Duration::MAX, Duration::MAX),
    ];
    for (case, retry_after, margin, max_hold) in cases {
        let retry_after = retry_after.to_owned();
        let server = tower::service_fn(move |_: Request<Body>| {
            let retry_after = retry_after.clone();
            async move {
                let response = http::Response::builder()
                    .status(StatusCode::TOO_MANY_REQUESTS)
                    .header(http::header::RETRY_AFTER, retry_after)
                    .body(Body::empty())
                    .unwrap();
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let client = PacingLayer::new().margin(margin).max_hold(max_hold).layer(server);
        let response = client.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS, "{case}");
    }
    assert_eq!(PacingLayer::LONGEST_HOLD, Duration::from_secs(365 * 24 * 3600));
}

/// Hints a server sends, read by `server_hints`: numbers past what the field can hold, negative,
/// or of the wrong type are no hint.
#[cfg(feature = "client")]
#[test]
fn server_hints_at_their_edges() {
    use kova_tower::server_hints::{hold_after, retry_after};
    let hints = |name: &'static str, text: &str| {
        let mut map = HeaderMap::new();
        map.insert(name, value(text));
        map
    };
    let cases: [(&str, HeaderMap, Option<Duration>); 8] = [
        ("Retry-After 0", hints("retry-after", "0"), Some(Duration::ZERO)),
        (
            "Retry-After u64::MAX",
            hints("retry-after", "18446744073709551615"),
            Some(Duration::from_secs(u64::MAX)),
        ),
        ("Retry-After past u64", hints("retry-after", "18446744073709551616"), None),
        ("Retry-After negative", hints("retry-after", "-5"), None),
        ("Retry-After empty", hints("retry-after", ""), None),
        ("RateLimit t past sfv's integers", hints("ratelimit", "\"a\";r=0;t=10000000000000000"), None),
        ("RateLimit t negative", hints("ratelimit", "\"a\";r=0;t=-1"), None),
        (
            "RateLimit t largest",
            hints("ratelimit", "\"a\";r=0;t=999999999999999"),
            Some(Duration::from_secs(999_999_999_999_999)),
        ),
    ];
    for (case, map, expected) in cases {
        let got = if map.contains_key("retry-after") {
            retry_after(&map)
        } else {
            hold_after(StatusCode::OK, &map)
        };
        assert_eq!(got, expected, "{case}");
    }
    // A thousand RateLimit lines: read as one list.
    let mut map = HeaderMap::new();
    for n in 0..1000 {
        map.append("ratelimit", value(&format!("\"p{n}\";r=0;t={n}")));
    }
    assert_eq!(hold_after(StatusCode::OK, &map), Some(Duration::from_secs(999)));
}
