//! A shadow rule never changes what is enforced: a backend that cannot decide a shadow rule's
//! check leaves the enforced rules' decisions standing.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use kova::{Decision, ManualClock};
use kova_rls::{
    Backend, BackendError, Config, Decider, Limited, MemoryBackend, MemoryOptions, RequestError,
    RequestLimits,
};

/// `user`: 2 a minute, enforced; `tenant` (a fixed window) and `log` (a sliding window log):
/// shadow rules.
const YAML: &str = "domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: tenant
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: log
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
    kova: { algorithm: sliding_window_log }
";

/// The memory backend, unavailable for every key that holds `down`.
#[derive(Debug)]
struct DownFor {
    inner: MemoryBackend<ManualClock>,
    down: &'static [u8],
}

impl DownFor {
    fn is_down(&self, key: &[u8]) -> bool {
        key.windows(self.down.len()).any(|w| w == self.down)
    }
}

#[allow(clippy::ptr_arg)]
impl Backend for DownFor {
    async fn check(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> Result<Decision, BackendError> {
        if self.is_down(key) {
            return Err(BackendError::Unavailable("down".into()));
        }
        self.inner.check(limit, key, cost).await
    }

    async fn refund(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> bool {
        !self.is_down(key) && self.inner.refund(limit, key, cost).await
    }

    fn now_nanos(&self) -> u64 {
        self.inner.now_nanos()
    }
}

fn decider(down: &'static [u8]) -> Decider<DownFor> {
    let config = Config::from_yaml("edge.yaml".as_ref(), YAML).unwrap();
    let inner = MemoryBackend::with_clock(MemoryOptions::default(), ManualClock::new()).unwrap();
    Decider::new(config, DownFor { inner, down }, RequestLimits::default())
}

fn descriptor(key: &str, value: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry { key: key.into(), value: value.into() }],
        ..Default::default()
    }
}

fn decide(
    decider: &Decider<DownFor>,
    descriptors: &[RateLimitDescriptor],
) -> Result<RateLimitResponse, RequestError> {
    let request =
        RateLimitRequest { domain: "edge".into(), descriptors: descriptors.to_vec(), hits_addend: 0 };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(decider.decide(&request))
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// A shadow rule whose check the backend cannot make answers `OK` for its descriptor, and the
/// enforced rule decides the request, both ways.
#[test]
fn an_unavailable_shadow_rule_leaves_the_enforced_decision_standing() {
    for (shadow, down) in [("tenant", &b"tenant"[..]), ("log", b"log")] {
        let decider = decider(down);
        let request = [descriptor("user", "u"), descriptor(shadow, "t")];
        for remaining in [1, 0] {
            let response = decide(&decider, &request).expect("a decision");
            assert_eq!(response.overall_code, OK, "{shadow}");
            let statuses: Vec<_> = response.statuses.iter().map(|s| (s.code, s.limit_remaining)).collect();
            assert_eq!(statuses, [(OK, remaining), (OK, 0)], "{shadow}");
        }
        let response = decide(&decider, &request).expect("a decision");
        assert_eq!(response.overall_code, OVER, "{shadow}");
        assert_eq!(response.statuses[0].code, OVER, "{shadow}");
        assert_eq!(response.statuses[1].code, OK, "{shadow}");
    }
}
