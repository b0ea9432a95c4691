//! A request descriptor's own `limit` (Envoy's `RateLimitDescriptor.limit`) replaces the file's.

mod common;

use common::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;

fn overridden(domain: &str, entries: &[(&str, &str)], requests_per_unit: u32, unit: i32) -> RateLimitRequest {
    let mut d = descriptor(entries);
    d.limit = Some(RateLimitOverride { requests_per_unit, unit });
    request(domain, vec![d], 0)
}

#[tokio::test]
async fn a_descriptors_own_limit_replaces_the_files() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let mut codes = Vec::new();
    // The file says 3 a minute for remote_address; the request says 2 an hour.
    for _ in 0..3 {
        let request = overridden("edge", &[("remote_address", "10.9.9.9")], 2, RateLimitUnit::Hour as i32);
        let response = client.should_rate_limit(request).await.expect("a decision").into_inner();
        let limit = response.statuses[0].current_limit.clone().expect("a current limit");
        assert_eq!((limit.requests_per_unit, limit.unit), (2, Unit::Hour as i32));
        assert_eq!(header(&response, "ratelimit-policy"), Some(r#""remote_address";q=2;w=3600"#));
        codes.push(response.overall_code);
    }
    assert_eq!(codes, [Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32]);

    // A descriptor no node matches is limited by its own limit too (as envoyproxy/ratelimit).
    let unmatched = || overridden("edge", &[("tenant", "t1")], 1, RateLimitUnit::Day as i32);
    let first = client.should_rate_limit(unmatched()).await.expect("a decision").into_inner();
    assert_eq!(first.overall_code, Code::Ok as i32);
    assert_eq!(header(&first, "ratelimit-policy"), Some(r#""tenant";q=1;w=86400"#));
    let second = client.should_rate_limit(unmatched()).await.expect("a decision").into_inner();
    assert_eq!(second.overall_code, Code::OverLimit as i32);

    // In a domain the file does not define, nothing is limited.
    for _ in 0..3 {
        let free = overridden("nowhere", &[("tenant", "t1")], 1, RateLimitUnit::Day as i32);
        let response = client.should_rate_limit(free).await.expect("a decision").into_inner();
        assert_eq!(
            (response.overall_code, response.statuses[0].current_limit.clone()),
            (Code::Ok as i32, None)
        );
    }
}

#[tokio::test]
async fn a_bad_override_is_invalid_argument() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    for (requests_per_unit, unit) in
        [(0, RateLimitUnit::Minute as i32), (5, RateLimitUnit::Unknown as i32), (5, 99)]
    {
        let request = overridden("edge", &[("remote_address", "10.9.9.8")], requests_per_unit, unit);
        let status = client.should_rate_limit(request).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("limit override"), "{}", status.message());
    }
    assert_eq!(service.metric(r#"kova_rls_request_errors_total{reason="bad_limit_override"}"#), 3.0);
    // Nothing was taken by the refused calls: the file's 3 a minute are all there.
    let plain = request("edge", vec![descriptor(&[("remote_address", "10.9.9.8")])], 0);
    let response = client.should_rate_limit(plain).await.expect("a decision").into_inner();
    assert_eq!(response.statuses[0].limit_remaining, 2);
}
