//! The binary on loopback, driven over gRPC against the example configuration.

mod common;

use common::*;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::google::protobuf::UInt64Value;

async fn call(client: &mut RateLimitServiceClientAlias, request: RateLimitRequest) -> RateLimitResponse {
    client.should_rate_limit(request).await.expect("a decision").into_inner()
}

type RateLimitServiceClientAlias =
    envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient<
        tonic::transport::Channel,
    >;

fn one(domain: &str, entries: &[(&str, &str)]) -> RateLimitRequest {
    request(domain, vec![descriptor(entries)], 0)
}

#[tokio::test]
async fn ok_until_the_limit_then_over_limit_with_headers() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    for remaining in [2u32, 1, 0] {
        let response = call(&mut client, one("edge", &[("remote_address", "10.0.0.1")])).await;
        assert_eq!(response.overall_code, Code::Ok as i32);
        let status = &response.statuses[0];
        assert_eq!(status.code, Code::Ok as i32);
        assert_eq!(status.limit_remaining, remaining);
        let limit = status.current_limit.as_ref().expect("a current limit");
        assert_eq!((limit.requests_per_unit, limit.unit), (3, Unit::Minute as i32));
        assert!(status.duration_until_reset.as_ref().is_some_and(|d| d.seconds <= 60));
        assert_eq!(header(&response, "ratelimit-policy"), Some(r#""remote_address";q=3;w=60"#));
        let state = header(&response, "ratelimit").expect("RateLimit");
        assert!(state.starts_with(&format!(r#""remote_address";r={remaining};t="#)), "{state}");
        assert_eq!(header(&response, "retry-after"), None);
    }
    let denied = call(&mut client, one("edge", &[("remote_address", "10.0.0.1")])).await;
    assert_eq!(denied.overall_code, Code::OverLimit as i32);
    assert_eq!(denied.statuses[0].code, Code::OverLimit as i32);
    assert_eq!(denied.statuses[0].limit_remaining, 0);
    let retry: u64 = header(&denied, "retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=60).contains(&retry), "{retry}");
    let state = header(&denied, "ratelimit").expect("RateLimit");
    assert_eq!(state, format!(r#""remote_address";r=0;t={retry}"#));
    // Another address has its own counter.
    let other = call(&mut client, one("edge", &[("remote_address", "10.0.0.2")])).await;
    assert_eq!((other.overall_code, other.statuses[0].limit_remaining), (Code::Ok as i32, 2));
}

#[tokio::test]
async fn nested_descriptors_follow_the_entries_in_order() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let post = [("api_key", "k1"), ("method", "POST")];
    for remaining in [1, 0] {
        let response = call(&mut client, one("edge", &post)).await;
        assert_eq!(
            (response.overall_code, response.statuses[0].limit_remaining),
            (Code::Ok as i32, remaining)
        );
    }
    assert_eq!(call(&mut client, one("edge", &post)).await.overall_code, Code::OverLimit as i32);
    // The key-only node beside the exact one: GET gets the 10 per hour.
    let get = call(&mut client, one("edge", &[("api_key", "k1"), ("method", "GET")])).await;
    assert_eq!(get.statuses[0].limit_remaining, 9);
    assert_eq!(get.statuses[0].current_limit.as_ref().map(|l| l.requests_per_unit), Some(10));
    // A node without a rule, or entries out of order, reach no limit.
    for entries in [&[("api_key", "k1")][..], &[("method", "POST")], &[("method", "POST"), ("api_key", "k1")]]
    {
        let response = call(&mut client, one("edge", entries)).await;
        assert_eq!(response.overall_code, Code::Ok as i32, "{entries:?}");
        assert_eq!(response.statuses[0].current_limit, None, "{entries:?}");
        assert!(response.response_headers_to_add.is_empty(), "{entries:?}");
    }
}

#[tokio::test]
async fn unlimited_exact_value_beats_the_key_only_rule() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    for _ in 0..20 {
        let response = call(&mut client, one("edge", &[("path", "/healthz")])).await;
        assert_eq!(response.overall_code, Code::Ok as i32);
        assert_eq!(response.statuses[0].limit_remaining, u32::MAX);
        assert_eq!(response.statuses[0].current_limit, None);
    }
    // Any other path: GCRA, 5 per minute with bursts of 2.
    let first = call(&mut client, one("edge", &[("path", "/search")])).await;
    assert_eq!(first.statuses[0].limit_remaining, 1);
    assert_eq!(header(&first, "ratelimit-policy"), Some(r#""per_path";q=2;w=24"#));
    assert_eq!(first.statuses[0].current_limit.as_ref().map(|l| l.name.as_str()), Some("per_path"));
    call(&mut client, one("edge", &[("path", "/search")])).await;
    let denied = call(&mut client, one("edge", &[("path", "/search")])).await;
    assert_eq!(denied.overall_code, Code::OverLimit as i32);
    let retry: u64 = header(&denied, "retry-after").expect("Retry-After").parse().expect("seconds");
    // One unit every 12 s.
    assert!((1..=12).contains(&retry), "{retry}");
}

#[tokio::test]
async fn shadow_mode_decides_and_counts_but_never_enforces() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    for _ in 0..3 {
        let response = call(&mut client, one("edge", &[("tenant", "t1")])).await;
        assert_eq!(response.overall_code, Code::Ok as i32);
        assert_eq!(response.statuses[0].code, Code::Ok as i32);
        assert!(response.response_headers_to_add.is_empty());
    }
    let series =
        |code: &str| format!(r#"kova_rls_decisions_total{{domain="edge",code="{code}",shadow="true"}}"#);
    assert_eq!(service.metric(&series("OK")), 1.0);
    assert_eq!(service.metric(&series("OVER_LIMIT")), 2.0);
}

#[tokio::test]
async fn hits_addend_is_the_cost_and_zero_means_one() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let address = [("remote_address", "10.1.0.1")];
    let two = call(&mut client, request("edge", vec![descriptor(&address)], 2)).await;
    assert_eq!((two.overall_code, two.statuses[0].limit_remaining), (Code::Ok as i32, 1));
    // 2 more do not fit in the 1 left: denied, and the denial takes nothing.
    let denied = call(&mut client, request("edge", vec![descriptor(&address)], 2)).await;
    assert_eq!(denied.overall_code, Code::OverLimit as i32);
    let zero = call(&mut client, request("edge", vec![descriptor(&address)], 0)).await;
    assert_eq!((zero.overall_code, zero.statuses[0].limit_remaining), (Code::Ok as i32, 0));

    // A descriptor's own hits_addend overrides the request's.
    let mut own = descriptor(&[("remote_address", "10.1.0.2")]);
    own.hits_addend = Some(UInt64Value { value: 3 });
    let response = call(&mut client, request("edge", vec![own], 1)).await;
    assert_eq!((response.overall_code, response.statuses[0].limit_remaining), (Code::Ok as i32, 0));
}

#[tokio::test]
async fn unknown_domains_and_descriptors_are_ok_without_a_limit() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    for request in
        [one("nowhere", &[("remote_address", "1")]), one("edge", &[("colour", "blue")]), one("edge", &[])]
    {
        for _ in 0..5 {
            let response = call(&mut client, request.clone()).await;
            assert_eq!(response.overall_code, Code::Ok as i32);
            assert_eq!(response.statuses.len(), 1);
            assert_eq!(
                (response.statuses[0].code, response.statuses[0].current_limit.as_ref()),
                (Code::Ok as i32, None)
            );
        }
    }
    assert_eq!(service.metric(r#"kova_rls_unlimited_total{domain="_unknown"}"#), 5.0);
}

#[tokio::test]
async fn a_request_over_the_limit_consumes_nothing_of_its_other_descriptors() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let address = descriptor(&[("remote_address", "10.2.0.1")]);
    call(&mut client, request("edge", vec![address.clone()], 3)).await;
    let path = descriptor(&[("path", "/upload")]);
    let both = call(&mut client, request("edge", vec![path.clone(), address], 1)).await;
    assert_eq!(both.overall_code, Code::OverLimit as i32);
    assert_eq!(both.statuses[0].code, Code::Ok as i32);
    assert_eq!(both.statuses[1].code, Code::OverLimit as i32);
    assert_eq!(header(&both, "ratelimit-policy"), Some(r#""per_path";q=2;w=24, "remote_address";q=3;w=60"#));
    // The path's unit was given back: its burst of 2 is whole.
    let alone = call(&mut client, request("edge", vec![path], 1)).await;
    assert_eq!(alone.statuses[0].limit_remaining, 1);
}

#[tokio::test]
async fn replaces_drops_the_replaced_rule_when_both_match() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let premium =
        || request("edge", vec![descriptor(&[("plan", "premium")]), descriptor(&[("client", "c1")])], 0);
    for _ in 0..3 {
        let response = call(&mut client, premium()).await;
        assert_eq!(response.overall_code, Code::Ok as i32);
        assert_eq!(response.statuses[1].current_limit, None);
    }
    // Without the premium descriptor the generic rule applies: 1 per minute.
    let generic = || one("edge", &[("client", "c1")]);
    assert_eq!(call(&mut client, generic()).await.overall_code, Code::Ok as i32);
    assert_eq!(call(&mut client, generic()).await.overall_code, Code::OverLimit as i32);
}

/// A shadow rule replaces nothing: its `replaces` would otherwise lift an enforced limit
/// while itself enforcing none.
#[tokio::test]
async fn a_shadow_rule_replaces_nothing() {
    let config = temp_file(
        "shadow-replaces",
        "config.yaml",
        "domain: edge
descriptors:
  - key: plan
    shadow_mode: true
    rate_limit: { name: trial, unit: minute, requests_per_unit: 100, replaces: [{ name: generic }] }
  - key: client
    rate_limit: { name: generic, unit: minute, requests_per_unit: 1 }
",
    );
    let service = Service::start(&config, &[]);
    let mut client = service.client().await;
    let both = || request("edge", vec![descriptor(&[("plan", "trial")]), descriptor(&[("client", "c1")])], 0);
    assert_eq!(call(&mut client, both()).await.overall_code, Code::Ok as i32);
    let second = call(&mut client, both()).await;
    assert_eq!(second.overall_code, Code::OverLimit as i32);
    assert_eq!(second.statuses[1].code, Code::OverLimit as i32);
}

#[tokio::test]
async fn sigterm_stops_the_service_cleanly() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    assert_eq!(
        call(&mut client, one("edge", &[("remote_address", "x")])).await.overall_code,
        Code::Ok as i32
    );
    assert_eq!(service.http_get("/healthz"), (200, "OK\n".to_owned()));
    // The client's connection stays open and its runtime keeps running (as Envoy's would), so
    // the server's graceful close (GOAWAY, ping) completes well before the 10 s grace.
    let start = std::time::Instant::now();
    let status = tokio::task::spawn_blocking(move || service.terminate()).await.expect("joins");
    assert!(status.success(), "{status:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(8), "{:?}", start.elapsed());
    drop(client);
}
