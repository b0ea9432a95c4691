//! What a request's descriptors cost, in the library (an in-memory backend on a manual clock):
//! a descriptor's own `hits_addend` of 0 checks without counting, as in envoyproxy/ratelimit;
//! and a request denied anywhere takes nothing from a sliding window log, which takes no
//! refunds, while an admitted one is charged there whatever its shadow logs found; a refund
//! owed to a window that has ended is not made.

use std::sync::atomic::{AtomicBool, Ordering};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use kova::{Decision, ManualClock};
use kova_rls::{
    Backend, BackendError, Config, Decider, Limit, Limited, MemoryBackend, MemoryOptions, RequestLimits,
};

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
    decider_of(YAML)
}

fn decider_of(yaml: &str) -> Decider<MemoryBackend<ManualClock>> {
    let config = Config::from_yaml("edge.yaml".as_ref(), yaml).unwrap();
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

fn decide<B: Backend>(decider: &Decider<B>, descriptors: &[RateLimitDescriptor]) -> RateLimitResponse {
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

/// A shadow sliding window log that is used up never stops an enforced log from being
/// charged: its denial is not enforced, so the request is admitted, and what an admitted
/// request takes from the enforced log is taken.
#[test]
fn a_used_up_shadow_log_does_not_leave_an_enforced_log_uncharged() {
    let decider = decider_of(
        "domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10 }
    kova: { algorithm: sliding_window_log }
    descriptors:
      - key: path
        shadow_mode: true
        rate_limit: { unit: minute, requests_per_unit: 1 }
        kova: { algorithm: sliding_window_log }
",
    );
    let both = || {
        let mut nested = descriptor("user", "u", None);
        nested.entries.push(Entry { key: "path".into(), value: "/p".into() });
        [descriptor("user", "u", None), nested]
    };
    for remaining in (0..10).rev() {
        let response = decide(&decider, &both());
        assert_eq!((response.overall_code, codes(&response).1[0]), (OK, (OK, remaining)));
    }
    let response = decide(&decider, &both());
    assert_eq!(codes(&response), (OVER, vec![(OVER, 0), (OK, 0)]));
}

/// The memory backend on `clock`, where, once `armed`, the next check of `strict` first lets
/// another request's check of `user` `u6` in, a tenth of a second later.
#[derive(Debug)]
struct Interleaved {
    inner: MemoryBackend<ManualClock>,
    clock: ManualClock,
    user: Limited,
    armed: AtomicBool,
}

#[allow(clippy::ptr_arg)]
impl Backend for Interleaved {
    async fn check(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> Result<Decision, BackendError> {
        if *limit != self.user && self.armed.swap(false, Ordering::Relaxed) {
            self.clock.advance_nanos(100_000_000);
            let key = kova_rls::descriptor_key("edge", &descriptor("user", "u6", None).entries);
            let other = self.inner.check(&self.user, &key, 1).await;
            assert!(other.as_ref().is_ok_and(Decision::is_allowed), "{other:?}");
        }
        self.inner.check(limit, key, cost).await
    }

    async fn refund(&self, limit: &Limited, key: &Vec<u8>, cost: u64) -> bool {
        self.inner.refund(limit, key, cost).await
    }

    fn now_nanos(&self) -> u64 {
        self.inner.now_nanos()
    }
}

/// A request denied as a whole gives nothing back to a window that ended since its check: the
/// units it took went with that window, and a refund would come off the next window's count,
/// letting that window admit more than its limit.
#[test]
fn a_refund_after_the_window_ended_gives_nothing_back() {
    let yaml = "domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: strict
    rate_limit: { unit: hour, requests_per_unit: 1 }
";
    let config = Config::from_yaml("edge.yaml".as_ref(), yaml).unwrap();
    let user = config.domain("edge").and_then(|d| d.find([("user", "u6")]));
    let Some(Limit::Limited(user)) = user.map(|rule| rule.limit().clone()) else { panic!("{user:?}") };
    let clock = ManualClock::new();
    let inner = MemoryBackend::with_clock(MemoryOptions::default(), clock.clone()).unwrap();
    let backend = Interleaved { inner, clock: clock.clone(), user, armed: AtomicBool::new(false) };
    let decider = Decider::new(config, backend, RequestLimits::default());
    // `strict` used up for the hour.
    assert_eq!(decide(&decider, &[descriptor("strict", "s", None)]).overall_code, OK);
    // `u6` checked at 59.9 s; another request's check of it at 60 s opens the next window;
    // then `strict` denies, and `u6`'s unit would be refunded.
    clock.advance_nanos(59_900_000_000);
    decider.backend().armed.store(true, Ordering::Relaxed);
    let denied = decide(&decider, &[descriptor("user", "u6", None), descriptor("strict", "s", None)]);
    assert_eq!(denied.overall_code, OVER);
    let mut admitted = 0;
    while decide(&decider, &[descriptor("user", "u6", None)]).overall_code == OK {
        admitted += 1;
        assert!(admitted <= 10, "the new window admits without end");
    }
    // The other request took one of the new window's 10.
    assert_eq!(admitted, 9);
}
