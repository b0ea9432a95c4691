//! A call whose future tonic drops (Envoy timed out or cancelled) still finishes its decision:
//! what its earlier checks took is given back when the request as a whole is denied, and a
//! panic in the decision answers `INTERNAL` instead of escaping the call.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use kova::{Decision, ManualClock};
use kova_rls::{
    Backend, BackendError, Config, Decider, Limited, MemoryBackend, MemoryOptions, RateLimitGrpc,
    RequestLimits,
};
use tokio::sync::watch;

/// `user`: 2 a minute; `slow`: 1 a minute (the key the test backend holds back).
const YAML: &str = "domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: slow
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: boom
    rate_limit: { unit: minute, requests_per_unit: 1 }
";

/// The memory backend, whose checks of a `slow` key wait while the gate is shut, and whose
/// checks of a `boom` key panic. It tells when a check is held and counts refunds.
#[derive(Debug)]
struct Gated {
    inner: MemoryBackend<ManualClock>,
    /// `true`: open.
    gate: watch::Receiver<bool>,
    /// How many checks wait at the gate now.
    held: watch::Sender<usize>,
    /// How many refunds were made.
    refunds: watch::Sender<usize>,
}

fn holds(key: &[u8], part: &[u8]) -> bool {
    key.windows(part.len()).any(|w| w == part)
}

#[allow(clippy::ptr_arg)]
impl Backend for Gated {
    async fn check(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> Result<Decision, BackendError> {
        assert!(!holds(key, b"boom"), "a backend bug");
        if holds(key, b"slow") {
            self.held.send_modify(|n| *n += 1);
            let _ = self.gate.clone().wait_for(|open| *open).await;
            self.held.send_modify(|n| *n -= 1);
        }
        self.inner.check(limit, key, cost).await
    }

    async fn refund(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> bool {
        let given = self.inner.refund(limit, key, cost).await;
        self.refunds.send_modify(|n| *n += 1);
        given
    }

    fn now_nanos(&self) -> u64 {
        self.inner.now_nanos()
    }
}

struct Setup {
    grpc: RateLimitGrpc<Gated>,
    gate: watch::Sender<bool>,
    held: watch::Receiver<usize>,
    refunds: watch::Receiver<usize>,
}

fn setup() -> Setup {
    let config = Config::from_yaml("edge.yaml".as_ref(), YAML).unwrap();
    let inner = MemoryBackend::with_clock(MemoryOptions::default(), ManualClock::new()).unwrap();
    let (gate, gate_rx) = watch::channel(true);
    let (held, held_rx) = watch::channel(0);
    let (refunds, refunds_rx) = watch::channel(0);
    let backend = Gated { inner, gate: gate_rx, held, refunds };
    let decider = Decider::new(config, backend, RequestLimits::default());
    Setup { grpc: RateLimitGrpc::new(Arc::new(decider)), gate, held: held_rx, refunds: refunds_rx }
}

fn request(keys: &[&str]) -> tonic::Request<RateLimitRequest> {
    let descriptors = keys
        .iter()
        .map(|key| RateLimitDescriptor {
            entries: vec![Entry { key: (*key).into(), value: "v".into() }],
            ..Default::default()
        })
        .collect();
    tonic::Request::new(RateLimitRequest { domain: "edge".into(), descriptors, hits_addend: 0 })
}

async fn call(grpc: &RateLimitGrpc<Gated>, keys: &[&str]) -> RateLimitResponse {
    grpc.should_rate_limit(request(keys)).await.expect("a decision").into_inner()
}

/// `user` is checked and takes a unit; `slow`, already used up, is held at the gate; the call
/// is dropped there (as tonic drops it on Envoy's timeout). Once `slow` is decided (over the
/// limit), the unit `user` took must be back: a denied request consumes nothing.
#[tokio::test]
async fn a_call_dropped_between_checks_still_gives_back_what_it_took() {
    let mut setup = setup();
    let used_up = call(&setup.grpc, &["slow"]).await;
    assert_eq!(used_up.overall_code, Code::Ok as i32);

    setup.gate.send_replace(false);
    let mut dropped = Box::pin(setup.grpc.should_rate_limit(request(&["user", "slow"])));
    tokio::select! {
        _ = &mut dropped => panic!("answered while `slow` was held"),
        held = setup.held.wait_for(|n| *n == 1) => { held.unwrap(); }
    }
    drop(dropped);
    setup.gate.send_replace(true);
    // The decision goes on without its caller: wait for its refund (none ever comes if the
    // decision was dropped with the call).
    let refunded = tokio::time::timeout(Duration::from_secs(5), setup.refunds.wait_for(|n| *n >= 1)).await;

    let after = call(&setup.grpc, &["user"]).await;
    assert_eq!(after.overall_code, Code::Ok as i32);
    assert_eq!(
        after.statuses[0].limit_remaining,
        1,
        "`user` had 2 a minute; the dropped, denied call must have given its unit back \
         (refund seen: {})",
        refunded.is_ok()
    );
}

/// A panic in the decision (here, a backend's) answers `INTERNAL`, and the service goes on.
#[tokio::test]
async fn a_panicking_decision_answers_internal() {
    let setup = setup();
    let status = setup.grpc.should_rate_limit(request(&["user", "boom"])).await.expect_err("no decision");
    assert_eq!(status.code(), tonic::Code::Internal, "{status:?}");
    let after = call(&setup.grpc, &["user"]).await;
    assert_eq!(after.overall_code, Code::Ok as i32);
}
