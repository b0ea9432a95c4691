//! One real round trip against a running kova-rls on the example config: three `OK` then
//! `OVER_LIMIT` for one client address (`remote_address`: 3 per minute). Exits non-zero
//! otherwise. Used by `ci.sh`: `cargo run -p kova-rls --example check -- 127.0.0.1:8081`.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8081".into());
    let mut client = RateLimitServiceClient::connect(format!("http://{addr}")).await?;
    let address = format!("ci-{}", std::process::id());
    let request = RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry { key: "remote_address".into(), value: address }],
            ..Default::default()
        }],
        hits_addend: 1,
    };
    for expected in [Code::Ok, Code::Ok, Code::Ok, Code::OverLimit] {
        let response = client.should_rate_limit(request.clone()).await?.into_inner();
        let headers: Vec<String> =
            response.response_headers_to_add.iter().map(|h| format!("{}: {}", h.key, h.value)).collect();
        println!("{:?} {}", Code::try_from(response.overall_code), headers.join(" | "));
        if response.overall_code != expected as i32 {
            return Err(format!("expected {expected:?}, got {:?}", response.overall_code).into());
        }
    }
    Ok(())
}
