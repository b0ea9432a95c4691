//! draft-ietf-httpapi-ratelimit-headers-11 as a client reads it: every field parsed by an
//! independent RFC 9651 parser (`sfv`), the draft's examples, `qu`, `pk`, the `quota-exceeded`
//! problem body, and `Retry-After` against the denying policy's `t`.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::routing::{get, post};
use axum::Router;
use http::header::CONTENT_LENGTH;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use kova::{Decision, Gcra, ManualClock, Quota};
use kova_tower::headers::{self, QuotaUnit};
use kova_tower::{Key, Limit, LimitKey, PartitionKeys, PeerAddr, RateLimitLayer};
use proptest::prelude::*;
use support::sf::{parse_integer, parse_list, Member, Value};
use tower::ServiceExt;

const SECRET: [u8; 32] = [42; 32];

fn lines<'a>(response: &'a Response<Body>, name: &str) -> Vec<&'a str> {
    response.headers().get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
}

fn member<'a>(members: &'a [Member], name: &str) -> &'a Member {
    members.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no member {name:?} in {members:?}"))
}

/// The draft's examples parse as the draft means them, and the layer writes the same fields
/// for the same quotas and states.
#[test]
fn the_drafts_examples_parse_and_the_layer_writes_them() {
    // A quota of 100 units per minute.
    let example = parse_list(&[r#""default";q=100;w=60"#]);
    assert_eq!(example.len(), 1);
    assert_eq!(
        (example[0].name.as_str(), example[0].int("q"), example[0].int("w")),
        ("default", Some(100), Some(60))
    );
    let mut ours = String::new();
    headers::write_policy_item(&mut ours, "default", &Quota::per_minute(100).unwrap());
    assert_eq!(parse_list(&[&ours]), example);

    // Several policies, split over two field lines.
    let several = parse_list(&[r#""permin";q=50;w=60"#, r#""perhr";q=1000;w=3600, "perday";q=5000;w=86400"#]);
    let names: Vec<_> = several.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["permin", "perhr", "perday"]);
    let mut ours = String::new();
    for (n, (name, quota)) in [
        ("permin", Quota::per_minute(50).unwrap()),
        ("perhr", Quota::per_hour(1000).unwrap()),
        ("perday", Quota::new(5000, Duration::from_secs(86_400)).unwrap()),
    ]
    .into_iter()
    .enumerate()
    {
        if n > 0 {
            ours.push_str(", ");
        }
        headers::write_policy_item(&mut ours, name, &quota);
    }
    assert_eq!(parse_list(&[&ours]), several);

    // A quota in bytes: `qu` is a String.
    let bandwidth = parse_list(&[r#""bandwidth";q=65535;qu="content-bytes";w=3600"#]);
    assert_eq!(bandwidth[0].string("qu"), Some("content-bytes"));
    let mut ours = String::new();
    headers::write_policy_item_in(
        &mut ours,
        "bandwidth",
        &Quota::per_hour(65535).unwrap(),
        QuotaUnit::ContentBytes,
    );
    assert_eq!(parse_list(&[&ours]), bandwidth);
    let mut ours = String::new();
    let concurrency = Quota::new(100, Duration::from_secs(1)).unwrap();
    headers::write_policy_item_in(&mut ours, "concurrency", &concurrency, QuotaUnit::ConcurrentRequests);
    assert_eq!(parse_list(&[&ours])[0].string("qu"), Some("concurrent-requests"));

    // The service limit: 50 units left, the window resets in 30 s.
    let state = parse_list(&[r#""default";r=50;t=30"#]);
    let mut ours = String::new();
    headers::write_state_item(&mut ours, "default", &Decision::allowed(100, 50, 30_000_000_000));
    assert_eq!(parse_list(&[&ours]), state);

    // A partition key is a Byte Sequence.
    let partitioned = parse_list(&[r#""peruser";q=100;w=60;pk=:cHJvamVjdDEyMw==:"#]);
    assert_eq!(partitioned[0].bytes("pk"), Some(&b"project123"[..]));
    let mut ours = String::new();
    headers::write_policy_item(&mut ours, "peruser", &Quota::per_minute(100).unwrap());
    headers::write_partition_key(&mut ours, b"project123");
    assert_eq!(parse_list(&[&ours]), partitioned);
}

proptest! {
    /// Whatever the quota and the decision, both fields are RFC 9651 lists whose members carry
    /// the values the layer meant, as non-negative Integers.
    #[test]
    fn every_policy_and_state_parses_back(
        limit in 1u64..1_000_000,
        period_ms in 1u64..100_000_000,
        remaining in 0u64..1_000_000,
        reset in 0u64..10_000_000_000_000,
        retry in 1u64..10_000_000_000_000,
        allowed: bool,
        digest: [u8; 16],
    ) {
        let quota = Quota::new(limit, Duration::from_millis(period_ms)).unwrap();
        let mut policy = String::new();
        headers::write_policy_item_in(&mut policy, "p.1_x-y", &quota, QuotaUnit::ContentBytes);
        headers::write_partition_key(&mut policy, &digest);
        let parsed = parse_list(&[&policy]);
        prop_assert_eq!(parsed.len(), 1);
        prop_assert_eq!(parsed[0].int("q"), Some(quota.burst() as i64));
        prop_assert_eq!(parsed[0].int("w"), Some(headers::window_secs(&quota) as i64));
        prop_assert_eq!(parsed[0].bytes("pk"), Some(&digest[..]));

        let decision = if allowed {
            Decision::allowed(limit, remaining, reset)
        } else {
            Decision::denied(limit, remaining, retry, reset)
        };
        let mut state = String::new();
        headers::write_state_item(&mut state, "p.1_x-y", &decision);
        let parsed = parse_list(&[&state]);
        prop_assert_eq!(parsed[0].int("r"), Some(remaining as i64));
        let t = parsed[0].int("t").unwrap();
        prop_assert!(t >= 0);
        if !allowed {
            // A denial's `t` is its Retry-After: a client waiting either is never early.
            prop_assert_eq!(t as u64, headers::retry_after_secs(&decision));
            prop_assert!(t as u64 * 1_000_000_000 >= retry);
        }
    }
}

/// Two limits, one counted in bytes, with partition keys: every field of an allowed and a
/// denied response, as a client parses them.
#[tokio::test]
async fn allowed_and_denied_responses_parse_with_units_partition_keys_and_the_quota_exceeded_body() {
    let clock = ManualClock::new();
    // 10 requests a minute per client; 1000 bytes a minute per client, a body costing its length.
    let requests = Limit::in_memory_with::<Gcra, _>(
        "requests",
        Quota::per_minute(10).unwrap(),
        Key::peer_ip(),
        clock.clone(),
    )
    .unwrap();
    let bytes =
        Limit::in_memory_with::<Gcra, _>("bytes", Quota::per_minute(1000).unwrap(), Key::peer_ip(), clock)
            .unwrap()
            .cost_fn(|parts| {
                let length = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
                length.unwrap_or(1)
            })
            .quota_unit(QuotaUnit::ContentBytes);
    let layer = RateLimitLayer::new(requests).limit(bytes).partition_keys(PartitionKeys::with_secret(SECRET));
    let app = Router::new().route("/upload", post(|| async { "stored" })).layer(layer);

    let alice = "203.0.113.7:40000".parse::<SocketAddr>().unwrap();
    let upload = |from: SocketAddr, len: usize| {
        Request::post("/upload")
            .extension(PeerAddr(from))
            .header(CONTENT_LENGTH, len)
            .body(Body::from(vec![b'x'; len]))
            .unwrap()
    };

    let ok = app.clone().oneshot(upload(alice, 600)).await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let policy = parse_list(&lines(&ok, "ratelimit-policy"));
    let state = parse_list(&lines(&ok, "ratelimit"));
    let names: Vec<_> = policy.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["requests", "bytes"]);
    let (req_policy, byte_policy) = (member(&policy, "requests"), member(&policy, "bytes"));
    assert_eq!((req_policy.int("q"), req_policy.int("w"), req_policy.get("qu")), (Some(10), Some(60), None));
    assert_eq!((byte_policy.int("q"), byte_policy.int("w")), (Some(1000), Some(60)));
    assert_eq!(byte_policy.string("qu"), Some("content-bytes"));
    assert_eq!(member(&state, "requests").int("r"), Some(9));
    assert_eq!(member(&state, "bytes").int("r"), Some(400));
    // 600 of 1000 bytes are back in 36 s.
    assert_eq!(member(&state, "bytes").int("t"), Some(36));

    // `pk`: the keyed digest of the client's key, the same on both fields, never the address.
    let keys = PartitionKeys::with_secret(SECRET);
    let alice_key = LimitKey::ip(alice.ip(), 32);
    for name in ["requests", "bytes"] {
        let expected = keys.digest(name, &alice_key);
        assert_eq!(member(&policy, name).bytes("pk"), Some(&expected[..]));
        assert_eq!(member(&state, name).bytes("pk"), Some(&expected[..]));
    }
    assert_ne!(member(&policy, "requests").bytes("pk"), member(&policy, "bytes").bytes("pk"));
    for line in lines(&ok, "ratelimit-policy").into_iter().chain(lines(&ok, "ratelimit")) {
        assert!(!line.contains("203.0.113.7"), "{line}");
    }
    // Another client gets another partition key.
    let bob = "198.51.100.1:40000".parse::<SocketAddr>().unwrap();
    let bobs = app.clone().oneshot(upload(bob, 10)).await.unwrap();
    let bob_policy = parse_list(&lines(&bobs, "ratelimit-policy"));
    assert_ne!(member(&bob_policy, "bytes").bytes("pk"), member(&policy, "bytes").bytes("pk"));

    // 600 more bytes do not fit: the bytes limit denies.
    let denied = app.clone().oneshot(upload(alice, 600)).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after = parse_integer(denied.headers()["retry-after"].to_str().unwrap());
    let state = parse_list(&lines(&denied, "ratelimit"));
    let policy = parse_list(&lines(&denied, "ratelimit-policy"));
    assert_eq!(policy.len(), 2);
    assert_eq!(denied.headers()["content-type"], "application/problem+json");
    let body = denied.into_body().collect().await.unwrap().to_bytes();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(problem["type"], kova_tower::QUOTA_EXCEEDED);
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["violated-policies"], serde_json::json!(["bytes"]));
    assert_eq!(problem["retry_after"], retry_after);
    // Every violated policy's `t` is no later than Retry-After: a client obeying either waits
    // long enough. 200 more bytes are needed: 12 s.
    for name in problem["violated-policies"].as_array().unwrap() {
        let t = member(&state, name.as_str().unwrap()).int("t").unwrap();
        assert!(retry_after >= t, "Retry-After {retry_after} earlier than t={t}");
        assert_eq!(t, 12);
    }
    assert_eq!(retry_after, 12);
    // The requests limit's unit was given back when the bytes limit denied (a rejected request
    // consumes no quota), and its member says what is left after that: 9, not its check's 8.
    assert_eq!(member(&state, "requests").int("r"), Some(9));
    assert!(
        matches!(member(&state, "bytes").get("pk"), Some(Value::Bytes(b)) if b.len() == kova_tower::PARTITION_KEY_LEN)
    );
}

/// Without `partition_keys`, no `pk` is written, and the problem body of a plain denial names
/// its limit.
#[tokio::test]
async fn partition_keys_are_opt_in() {
    let limit = Limit::in_memory("ip", Quota::per_minute(1).unwrap(), Key::peer_ip()).unwrap();
    let app = Router::new().route("/", get(|| async { "hi" })).layer(RateLimitLayer::new(limit));
    let peer = PeerAddr("203.0.113.7:1".parse().unwrap());
    let get = || Request::get("/").extension(peer).body(Body::empty()).unwrap();
    let ok = app.clone().oneshot(get()).await.unwrap();
    let policy = parse_list(&lines(&ok, "ratelimit-policy"));
    assert_eq!(policy[0].get("pk"), None);
    assert_eq!(parse_list(&lines(&ok, "ratelimit"))[0].get("pk"), None);
    let denied = app.oneshot(get()).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after = parse_integer(denied.headers()["retry-after"].to_str().unwrap());
    let state = parse_list(&lines(&denied, "ratelimit"));
    assert!(retry_after >= state[0].int("t").unwrap());
    assert_eq!(state[0].int("r"), Some(0));
}
