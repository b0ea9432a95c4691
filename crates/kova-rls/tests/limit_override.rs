//! A request descriptor's own `limit` (Envoy's `RateLimitDescriptor.limit`) replaces the file's.

mod common;

use common::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::google::protobuf::UInt64Value;

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
    for (requests_per_unit, unit) in [(5, RateLimitUnit::Unknown as i32), (5, 99)] {
        let request = overridden("edge", &[("remote_address", "10.9.9.8")], requests_per_unit, unit);
        let status = client.should_rate_limit(request).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("limit override"), "{}", status.message());
    }
    assert_eq!(service.metric(r#"kova_rls_request_errors_total{reason="bad_limit_override"}"#), 2.0);
    // Nothing was taken by the refused calls: the file's 3 a minute are all there.
    let plain = request("edge", vec![descriptor(&[("remote_address", "10.9.9.8")])], 0);
    let response = client.should_rate_limit(plain).await.expect("a decision").into_inner();
    assert_eq!(response.statuses[0].limit_remaining, 2);
}

/// A `requests_per_unit` of 0 admits nothing, as envoyproxy/ratelimit counts it (any hit is
/// above 0): the descriptor is over the limit, the request with it, and its other descriptors
/// take nothing. A descriptor's `hits_addend` of 0 counts nothing and is not over it.
#[tokio::test]
async fn a_zero_override_admits_nothing() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    for _ in 0..3 {
        let zero = overridden("edge", &[("remote_address", "10.9.9.7")], 0, RateLimitUnit::Minute as i32);
        let mut descriptors = zero.descriptors;
        descriptors.push(descriptor(&[("path", "/zero")]));
        let response =
            client.should_rate_limit(request("edge", descriptors, 0)).await.expect("a decision").into_inner();
        assert_eq!(response.overall_code, Code::OverLimit as i32);
        let status = &response.statuses[0];
        assert_eq!((status.code, status.limit_remaining), (Code::OverLimit as i32, 0));
        let limit = status.current_limit.clone().expect("a current limit");
        assert_eq!((limit.requests_per_unit, limit.unit), (0, Unit::Minute as i32));
        assert_eq!(response.statuses[1].code, Code::Ok as i32);
        assert_eq!(
            header(&response, "ratelimit-policy"),
            Some(r#""remote_address";q=0;w=60, "per_path";q=2;w=24"#)
        );
        // Never admitted while the override says 0: no moment to retry at.
        assert_eq!(header(&response, "retry-after"), None);
    }
    // The path's burst of 2 is whole: the denied requests took nothing from it.
    let path = request("edge", vec![descriptor(&[("path", "/zero")])], 0);
    let response = client.should_rate_limit(path).await.expect("a decision").into_inner();
    assert_eq!(response.statuses[0].limit_remaining, 1);

    // Counting nothing is not over a limit of 0.
    let mut free = overridden("edge", &[("remote_address", "10.9.9.7")], 0, RateLimitUnit::Minute as i32);
    free.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    let response = client.should_rate_limit(free).await.expect("a decision").into_inner();
    assert_eq!((response.overall_code, response.statuses[0].limit_remaining), (Code::Ok as i32, 0));
    assert_eq!(service.metric(r#"kova_rls_request_errors_total{reason="bad_limit_override"}"#), 0.0);
}

/// envoyproxy/ratelimit's way to block one value in the file itself (its README blocks an
/// address with `requests_per_unit: 0`): the file loads, and every request with that value is
/// over the limit while the others are limited as written.
#[tokio::test]
async fn a_files_zero_blocks_its_value() {
    let dir = std::env::temp_dir().join(format!("kova-rls-zero-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("makes the directory");
    let config = dir.join("blocks.yaml");
    std::fs::write(
        &config,
        "domain: blocks\ndescriptors:\n  - key: remote_address\n    value: 10.0.0.66\n    rate_limit:\n      unit: second\n      requests_per_unit: 0\n  - key: remote_address\n    rate_limit:\n      unit: minute\n      requests_per_unit: 5\n",
    )
    .expect("writes the file");
    let service = Service::start(&config, &[]);
    let mut client = service.client().await;
    let blocked = request("blocks", vec![descriptor(&[("remote_address", "10.0.0.66")])], 0);
    let response = client.should_rate_limit(blocked).await.expect("a decision").into_inner();
    assert_eq!(response.overall_code, Code::OverLimit as i32);
    let limit = response.statuses[0].current_limit.clone().expect("a current limit");
    assert_eq!((limit.requests_per_unit, limit.unit), (0, Unit::Second as i32));
    let other = request("blocks", vec![descriptor(&[("remote_address", "10.0.0.1")])], 0);
    let response = client.should_rate_limit(other).await.expect("a decision").into_inner();
    assert_eq!((response.overall_code, response.statuses[0].limit_remaining), (Code::Ok as i32, 4));
    let _ = std::fs::remove_dir_all(&dir);
}

/// As envoyproxy/ratelimit orders them, a descriptor's own `limit` applies before `replaces`:
/// the overridden descriptor's limit has no name and replaces nothing, so the rule its node
/// names (`premium`, replacing `generic`) neither replaces another nor is replaced.
#[tokio::test]
async fn an_override_applies_before_replaces() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    // `plan: premium` replaces `generic` (client, 1 a minute), but not once it is overridden.
    let premium = || {
        let mut plan = overridden("edge", &[("plan", "premium")], 100, RateLimitUnit::Minute as i32);
        plan.descriptors.push(descriptor(&[("client", "c7")]));
        plan
    };
    let codes = |response: &RateLimitResponse| {
        (response.overall_code, response.statuses.iter().map(|s| s.code).collect::<Vec<_>>())
    };
    let first = client.should_rate_limit(premium()).await.expect("a decision").into_inner();
    assert_eq!(codes(&first), (Code::Ok as i32, vec![Code::Ok as i32; 2]));
    let generic = first.statuses[1].current_limit.clone().expect("generic applies");
    assert_eq!((generic.name.as_str(), generic.requests_per_unit), ("generic", 1));
    let second = client.should_rate_limit(premium()).await.expect("a decision").into_inner();
    assert_eq!(codes(&second), (Code::OverLimit as i32, vec![Code::Ok as i32, Code::OverLimit as i32]));

    // The other way round: an overridden `generic` is not dropped by `premium`.
    let generic = || {
        let mut client_limit = overridden("edge", &[("client", "c8")], 1, RateLimitUnit::Hour as i32);
        client_limit.descriptors.insert(0, descriptor(&[("plan", "premium")]));
        client_limit
    };
    let first = client.should_rate_limit(generic()).await.expect("a decision").into_inner();
    let limit = first.statuses[1].current_limit.clone().expect("the override applies");
    assert_eq!((limit.requests_per_unit, limit.unit), (1, Unit::Hour as i32));
    let second = client.should_rate_limit(generic()).await.expect("a decision").into_inner();
    assert_eq!(codes(&second), (Code::OverLimit as i32, vec![Code::Ok as i32, Code::OverLimit as i32]));
}
