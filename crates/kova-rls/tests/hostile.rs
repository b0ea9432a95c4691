//! Hostile and malformed requests: a gRPC error or a decision, never a crash.

mod common;

use common::*;
use tonic::Code as GrpcCode;

#[tokio::test]
async fn malformed_requests_get_grpc_errors_and_the_service_lives_on() {
    let mut service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let refused = [
        (request("", vec![descriptor(&[("remote_address", "a")])], 0), "empty_domain"),
        (request("edge", vec![], 0), "no_descriptors"),
        (
            request(
                "edge",
                (0..10_000).map(|i| descriptor(&[("remote_address", &i.to_string())])).collect(),
                0,
            ),
            "too_many_descriptors",
        ),
        (request("edge", vec![descriptor(&vec![("k", "v"); 1_000])], 0), "too_many_entries"),
    ];
    for (request, reason) in refused {
        let status = client.should_rate_limit(request).await.expect_err(reason);
        assert_eq!(status.code(), GrpcCode::InvalidArgument, "{reason}: {status:?}");
        assert_eq!(service.metric(&format!(r#"kova_rls_request_errors_total{{reason="{reason}"}}"#)), 1.0);
    }
    // Above tonic's 4 MiB message bound: refused by the transport.
    let huge = "x".repeat(5 << 20);
    let status = client
        .should_rate_limit(request("edge", vec![descriptor(&[("remote_address", &huge)])], 0))
        .await
        .expect_err("too large");
    assert_ne!(status.code(), GrpcCode::Ok);
    assert!(service.is_running());
    // Still answering, on the same connection.
    let ok = client.should_rate_limit(request("edge", vec![descriptor(&[("remote_address", "a")])], 0)).await;
    assert_eq!(ok.expect("a decision").into_inner().overall_code, Code::Ok as i32);
}

#[tokio::test]
async fn huge_values_are_limited_like_any_other() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let big = "v".repeat(1 << 20);
    let other = format!("{}w", &big[1..]);
    for (value, remaining) in [(&big, 2), (&big, 1), (&other, 2), (&big, 0)] {
        let response = client
            .should_rate_limit(request("edge", vec![descriptor(&[("remote_address", value)])], 0))
            .await
            .expect("a decision")
            .into_inner();
        assert_eq!(response.statuses[0].limit_remaining, remaining);
    }
    // 256 descriptors (the default bound), all of one limit on distinct values.
    let many: Vec<_> = (0..256).map(|i| descriptor(&[("remote_address", &format!("m{i}"))])).collect();
    let response = client.should_rate_limit(request("edge", many, 0)).await.expect("a decision").into_inner();
    assert_eq!(response.statuses.len(), 256);
    assert!(response.statuses.iter().all(|s| s.limit_remaining == 2));
}

#[tokio::test]
async fn a_cost_above_the_limit_is_over_limit_and_takes_nothing() {
    let service = Service::start(&example_config(), &[]);
    let mut client = service.client().await;
    let address = || vec![descriptor(&[("remote_address", "greedy")])];
    let response = client
        .should_rate_limit(request("edge", address(), u32::MAX))
        .await
        .expect("a decision")
        .into_inner();
    assert_eq!(response.overall_code, Code::OverLimit as i32);
    assert_eq!(response.statuses[0].code, Code::OverLimit as i32);
    // It can never fit, so no Retry-After promises it will.
    assert_eq!(header(&response, "retry-after"), None);
    let after =
        client.should_rate_limit(request("edge", address(), 1)).await.expect("a decision").into_inner();
    assert_eq!((after.overall_code, after.statuses[0].limit_remaining), (Code::Ok as i32, 2));
}
