//! The in-memory backend's fixed windows start where envoyproxy/ratelimit's do: at the Unix
//! epoch's multiples of the unit (a minute window at a whole UTC minute), not at multiples of
//! the unit from the process's start.

use std::time::{SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use kova_rls::{Config, Decider, MemoryBackend, MemoryOptions, RequestLimits};

#[test]
fn a_minute_window_ends_at_a_whole_utc_minute() {
    let yaml =
        "domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n";
    let config = Config::from_yaml("d.yaml".as_ref(), yaml).unwrap();
    let decider =
        Decider::new(config, MemoryBackend::new(MemoryOptions::default()).unwrap(), RequestLimits::default());
    let request = RateLimitRequest {
        domain: "d".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry { key: "user".into(), value: "u".into() }],
            ..Default::default()
        }],
        hits_addend: 1,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let response = runtime.block_on(decider.decide(&request)).unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let until_next_minute = 60_000_000_000 - now % 60_000_000_000;
    let reset = response.statuses[0].duration_until_reset.expect("a reset time");
    let reset = reset.seconds as u64 * 1_000_000_000 + reset.nanos as u64;
    // Within the coarse clock's lag and the time between the two readings, either side of a
    // minute's edge.
    let apart = reset.abs_diff(until_next_minute).min(60_000_000_000 - reset.abs_diff(until_next_minute));
    assert!(apart < 100_000_000, "resets in {reset} ns; the next UTC minute is {until_next_minute} ns away");
}
