//! What a request's descriptors cost, in the library (an in-memory backend on a manual clock):
//! a descriptor's own `hits_addend` of 0 checks without counting, as in envoyproxy/ratelimit;
//! and a request denied anywhere takes nothing from a sliding window log, which takes no
//! refunds.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use kova::ManualClock;
use kova_rls::{Config, Decider, MemoryBackend, MemoryOptions, RequestLimits};

/// `user`: 3 a minute (the default algorithm); `log` and `log2`: sliding window logs of 3 and 2
/// a minute; `strict`: 1 a minute.
const YAML: &str = "domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: log
    rate_limit: { unit: minute, requests_per_unit: 3 }
    kova: { algorithm: sliding_window_log }
  - key: log2
    rate_limit: { unit: minute, requests_per_unit: 2 }
    kova: { algorithm: sliding_window_log }
  - key: strict
    rate_limit: { unit: minute, requests_per_unit: 1 }
";

fn decider() -> Decider<MemoryBackend<ManualClock>> {
    let config = Config::from_yaml("edge.yaml".as_ref(), YAML).unwrap();
    let backend = MemoryBackend::with_clock(MemoryOptions::default(), ManualClock::new()).unwrap();
    Decider::new(config, backend, RequestLimits::default())
}

fn descriptor(key: &str, value: &str, hits_addend: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry { key: key.into(), value: value.into() }],
        hits_addend: hits_addend.map(|value| UInt64Value { value }),
        ..Default::default()
    }
}

fn decide(
    decider: &Decider<MemoryBackend<ManualClock>>,
    descriptors: &[RateLimitDescriptor],
) -> RateLimitResponse {
    let request =
        RateLimitRequest { domain: "edge".into(), descriptors: descriptors.to_vec(), hits_addend: 0 };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(decider.decide(&request)).expect("a decision")
}

/// (overall code, each descriptor's code and remaining).
fn codes(response: &RateLimitResponse) -> (i32, Vec<(i32, u32)>) {
    (response.overall_code, response.statuses.iter().map(|s| (s.code, s.limit_remaining)).collect())
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// A descriptor's `hits_addend` of 0 is a check that counts nothing (Envoy sends 0 for
/// `%BYTES_RECEIVED%` of an empty body): never over the limit for it, never taking a unit.
/// The request's own 0 still means 1.
#[test]
fn a_descriptors_own_zero_hits_addend_counts_nothing() {
    let decider = decider();
    for _ in 0..5 {
        let response = decide(&decider, &[descriptor("user", "u1", Some(0))]);
        assert_eq!(codes(&response), (OK, vec![(OK, 3)]));
    }
    for remaining in [2, 1, 0] {
        assert_eq!(codes(&decide(&decider, &[descriptor("user", "u1", None)])), (OK, vec![(OK, remaining)]));
    }
    assert_eq!(codes(&decide(&decider, &[descriptor("user", "u1", None)])).0, OVER);
    // Full: a check of nothing is still not over the limit.
    assert_eq!(codes(&decide(&decider, &[descriptor("user", "u1", Some(0))])), (OK, vec![(OK, 0)]));
}

/// A request that another limit denies takes nothing from a sliding window log, wherever the
/// log stands in the request; nor does one that a second log denies.
#[test]
fn a_denied_request_takes_nothing_from_a_sliding_window_log() {
    let decider = decider();
    // `strict` used up.
    assert_eq!(codes(&decide(&decider, &[descriptor("strict", "s", None)])).0, OK);
    for _ in 0..5 {
        for order in [
            [descriptor("log", "l", None), descriptor("strict", "s", None)],
            [descriptor("strict", "s", None), descriptor("log", "l", None)],
        ] {
            let response = decide(&decider, &order);
            assert_eq!(response.overall_code, OVER);
        }
    }
    // The log still has its 3.
    let alone = decide(&decider, &[descriptor("log", "l", None)]);
    assert_eq!(codes(&alone), (OK, vec![(OK, 2)]));

    // Two logs: the first fits, the second (2 a minute) is used up; the first keeps its units.
    for _ in 0..2 {
        assert_eq!(codes(&decide(&decider, &[descriptor("log2", "m", None)])).0, OK);
    }
    for _ in 0..5 {
        let response = decide(&decider, &[descriptor("log", "l2", None), descriptor("log2", "m", None)]);
        assert_eq!(codes(&response), (OVER, vec![(OK, 3), (OVER, 0)]));
    }
    assert_eq!(codes(&decide(&decider, &[descriptor("log", "l2", None)])), (OK, vec![(OK, 2)]));

    // Everything fits: the log is charged like any other limit.
    let both = decide(&decider, &[descriptor("log", "l3", None), descriptor("user", "u3", None)]);
    assert_eq!(codes(&both), (OK, vec![(OK, 2), (OK, 2)]));
}

/// A request denied as a whole gives its allowed descriptors' units back, and their statuses
/// and `RateLimit` members say what is left after that refund, not before it.
#[test]
fn a_denied_requests_allowed_descriptors_report_what_the_refund_left() {
    let decider = decider();
    // `strict` used up; `user` has taken one of its 3.
    assert_eq!(codes(&decide(&decider, &[descriptor("strict", "s", None)])).0, OK);
    assert_eq!(codes(&decide(&decider, &[descriptor("user", "u4", None)])), (OK, vec![(OK, 2)]));

    let denied = decide(&decider, &[descriptor("user", "u4", None), descriptor("strict", "s", None)]);
    assert_eq!(codes(&denied), (OVER, vec![(OK, 2), (OVER, 0)]));
    let state = denied.response_headers_to_add.iter().find(|h| h.key == "ratelimit").expect("RateLimit");
    assert!(state.value.starts_with(r#""user";r=2;"#), "{}", state.value);
    // What the status said is what the next check finds.
    assert_eq!(codes(&decide(&decider, &[descriptor("user", "u4", None)])), (OK, vec![(OK, 1)]));

    // A key whose refund makes it whole again: nothing left to wait for.
    let denied = decide(&decider, &[descriptor("user", "u5", None), descriptor("strict", "s", None)]);
    assert_eq!(codes(&denied), (OVER, vec![(OK, 3), (OVER, 0)]));
    let reset = denied.statuses[0].duration_until_reset.expect("a reset");
    assert_eq!((reset.seconds, reset.nanos), (0, 0));
}
