//! gRPC through tonic: tonic-health's health service behind the layer on a loopback port, a
//! tonic client calling it with its API key in metadata, denials as `RESOURCE_EXHAUSTED` with
//! `google.rpc.RetryInfo`, and the RateLimit fields as metadata on both answers.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use http::header::HeaderName;
use kova::{Gcra, ManualClock, Quota};
use kova_tower::{Key, Limit, RateLimitLayer};
use support::sf::{parse_integer, parse_list};
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_types::StatusExt;

/// Serves the health service behind `layer` on 127.0.0.1:0; returns its address.
async fn serve(layer: RateLimitLayer) -> SocketAddr {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder().layer(layer).add_service(health).serve_with_incoming(TcpIncoming::from(listener)),
    );
    addr
}

fn check(api_key: Option<&str>) -> tonic::Request<HealthCheckRequest> {
    let mut request = tonic::Request::new(HealthCheckRequest { service: String::new() });
    if let Some(key) = api_key {
        request.metadata_mut().insert("x-api-key", key.parse().unwrap());
    }
    request
}

fn text<'a>(metadata: &'a MetadataMap, name: &str) -> Vec<&'a str> {
    metadata.get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
}

#[tokio::test]
async fn a_tonic_service_is_limited_by_metadata_keys_and_denials_carry_retry_info() {
    let clock = ManualClock::new();
    // 2 calls a minute per API key (metadata `x-api-key`).
    let per_key = Limit::in_memory_with::<Gcra, _>(
        "key",
        Quota::per_minute(2).unwrap(),
        Key::header(HeaderName::from_static("x-api-key")),
        clock.clone(),
    )
    .unwrap();
    let addr = serve(RateLimitLayer::new(per_key).grpc(true)).await;
    let channel = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut client = HealthClient::new(channel);

    // Allowed: the service answers, and the response metadata carry the fields.
    let ok = client.check(check(Some("k1"))).await.unwrap();
    assert_eq!(ok.get_ref().status, ServingStatus::Serving as i32);
    let policy = parse_list(&text(ok.metadata(), "ratelimit-policy"));
    assert_eq!((policy[0].name.as_str(), policy[0].int("q"), policy[0].int("w")), ("key", Some(2), Some(60)));
    let state = parse_list(&text(ok.metadata(), "ratelimit"));
    assert_eq!((state[0].int("r"), state[0].int("t")), (Some(1), Some(30)));
    client.check(check(Some("k1"))).await.unwrap();

    // Denied: RESOURCE_EXHAUSTED, the exact delay in RetryInfo, the fields as metadata.
    clock.advance_nanos(500_000_000);
    let denied = client.check(check(Some("k1"))).await.unwrap_err();
    assert_eq!(denied.code(), Code::ResourceExhausted, "{denied:?}");
    assert!(denied.message().contains("limit key"), "{}", denied.message());
    let retry = denied.get_details_retry_info().expect("RetryInfo in the status details");
    assert_eq!(retry.retry_delay, Some(Duration::from_millis(29_500)));
    let quota_failure = denied.get_details_quota_failure().expect("QuotaFailure in the status details");
    assert_eq!(quota_failure.violations[0].subject, "key");
    let retry_after = parse_integer(text(denied.metadata(), "retry-after")[0]);
    assert_eq!(retry_after, 30);
    let state = parse_list(&text(denied.metadata(), "ratelimit"));
    assert_eq!((state[0].name.as_str(), state[0].int("r"), state[0].int("t")), ("key", Some(0), Some(30)));
    assert_eq!(parse_list(&text(denied.metadata(), "ratelimit-policy"))[0].int("q"), Some(2));

    // Another key has its own quota; a call without one is refused as INVALID_ARGUMENT.
    assert!(client.check(check(Some("k2"))).await.is_ok());
    let missing = client.check(check(None)).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument, "{missing:?}");
    assert!(missing.metadata().get("ratelimit").is_none());

    // A client that waited what RetryInfo said is served.
    clock.advance(retry.retry_delay.unwrap());
    assert!(client.check(check(Some("k1"))).await.is_ok());
}
