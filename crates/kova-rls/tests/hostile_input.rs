//! Hostile input to the library, table-driven: the backend's sizes, the request bounds, costs
//! (`hits_addend`) and limit overrides at their edges (0, 1, the maximum, `u32::MAX` /
//! `usize::MAX`), empty and 1 MiB domains, keys and values, and config files at their edges,
//! each answering with a typed error or its documented decision, never a panic. The gRPC
//! service's own refusals are in `hostile.rs`.
//!
//! Each case is named; the runner catches a panic as that case's failure and names every
//! failing case.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use kova::keyed::KeyedError;
use kova::ManualClock;
use kova_rls::{descriptor_key, Config, Decider, MemoryBackend, MemoryOptions, RequestError, RequestLimits};

type Case = (&'static str, fn());

fn run(cases: &[Case]) {
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|&(name, case)| {
            let payload = std::panic::catch_unwind(case).err()?;
            let why = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Some(format!("{name}: {why}"))
        })
        .collect();
    assert!(failed.is_empty(), "{} of {} cases failed:\n{}", failed.len(), cases.len(), failed.join("\n"));
}

const YAML: &str =
    "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n";
const MIB: usize = 1 << 20;

fn decider(limits: RequestLimits) -> Decider<MemoryBackend<ManualClock>> {
    let config = Config::from_yaml("edge.yaml".as_ref(), YAML).unwrap();
    let backend = MemoryBackend::with_clock(MemoryOptions::default(), ManualClock::new()).unwrap();
    Decider::new(config, backend, limits)
}

fn descriptor(value: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry { key: "user".into(), value: value.into() }],
        ..Default::default()
    }
}

fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>, hits_addend: u32) -> RateLimitRequest {
    RateLimitRequest { domain: domain.into(), descriptors, hits_addend }
}

fn decide(
    decider: &Decider<MemoryBackend<ManualClock>>,
    request: &RateLimitRequest,
) -> Result<i32, RequestError> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(decider.decide(request)).map(|response| response.overall_code)
}

const CASES: &[Case] = &[
    ("MemoryBackend max_keys 0 and usize::MAX: kova's typed error", || {
        for max_keys in [0, usize::MAX] {
            let options = MemoryOptions { max_keys, ..MemoryOptions::default() };
            let built = MemoryBackend::with_clock(options, ManualClock::new());
            assert!(
                matches!(built, Err(KeyedError::MaxKeys { max_keys: m, .. }) if m == max_keys),
                "{max_keys}"
            );
        }
    }),
    ("MemoryBackend max_keys 1", || {
        let options = MemoryOptions { max_keys: 1, ..MemoryOptions::default() };
        assert!(MemoryBackend::with_clock(options, ManualClock::new()).unwrap().is_empty());
    }),
    ("RequestLimits of 0 descriptors and 0 entries: every request refused", || {
        let none = decider(RequestLimits { max_descriptors: 0, ..RequestLimits::default() });
        assert!(matches!(
            decide(&none, &request("edge", vec![descriptor("a")], 0)),
            Err(RequestError::TooManyDescriptors { .. })
        ));
        let no_entries = decider(RequestLimits { max_entries: 0, ..RequestLimits::default() });
        assert!(matches!(
            decide(&no_entries, &request("edge", vec![descriptor("a")], 0)),
            Err(RequestError::TooManyEntries { .. })
        ));
    }),
    ("RequestLimits usize::MAX: a request within them is decided", || {
        let open = decider(RequestLimits { max_descriptors: usize::MAX, max_entries: usize::MAX });
        assert_eq!(decide(&open, &request("edge", vec![descriptor("a")], 0)).unwrap(), Code::Ok as i32);
    }),
    ("empty domain and no descriptors: typed errors", || {
        let d = decider(RequestLimits::default());
        assert!(matches!(decide(&d, &request("", vec![descriptor("a")], 0)), Err(RequestError::EmptyDomain)));
        assert!(matches!(decide(&d, &request("edge", vec![], 0)), Err(RequestError::NoDescriptors)));
    }),
    ("an unknown 1 MiB domain, an empty descriptor: no rule, OK", || {
        let d = decider(RequestLimits::default());
        let domain = "d".repeat(MIB);
        assert_eq!(decide(&d, &request(&domain, vec![descriptor("a")], 0)).unwrap(), Code::Ok as i32);
        let empty = RateLimitDescriptor::default();
        assert_eq!(decide(&d, &request("edge", vec![empty], 0)).unwrap(), Code::Ok as i32);
    }),
    ("empty and 1 MiB values: each its own key, limited", || {
        let d = decider(RequestLimits::default());
        for value in [String::new(), "v".repeat(MIB)] {
            let codes: Vec<i32> =
                (0..4).map(|_| decide(&d, &request("edge", vec![descriptor(&value)], 0)).unwrap()).collect();
            assert_eq!(
                codes,
                [0, 0, 0, 1].map(|i| [Code::Ok, Code::OverLimit][i] as i32),
                "{} bytes",
                value.len()
            );
        }
    }),
    ("hits_addend 0 counts 1 (Envoy's rule); 3, the limit, fits; u32::MAX is over the limit", || {
        let d = decider(RequestLimits::default());
        assert_eq!(decide(&d, &request("edge", vec![descriptor("zero")], 0)).unwrap(), Code::Ok as i32);
        assert_eq!(decide(&d, &request("edge", vec![descriptor("three")], 3)).unwrap(), Code::Ok as i32);
        assert_eq!(
            decide(&d, &request("edge", vec![descriptor("max")], u32::MAX)).unwrap(),
            Code::OverLimit as i32
        );
        // The refused cost took nothing.
        assert_eq!(decide(&d, &request("edge", vec![descriptor("max")], 3)).unwrap(), Code::Ok as i32);
    }),
    ("a limit override of 0 and of u32::MAX requests", || {
        let d = decider(RequestLimits::default());
        let mut zero = descriptor("override-0");
        zero.limit = Some(RateLimitOverride { requests_per_unit: 0, unit: RateLimitUnit::Second as i32 });
        // 0 admits nothing (envoyproxy/ratelimit's meaning): over the limit, not an error.
        assert_eq!(decide(&d, &request("edge", vec![zero], 0)).unwrap(), Code::OverLimit as i32);
        // u32::MAX a second is more than one a nanosecond: refused; u32::MAX an hour is not.
        for (unit, allowed) in [(RateLimitUnit::Second, false), (RateLimitUnit::Hour, true)] {
            let mut max = descriptor("override-max");
            max.limit = Some(RateLimitOverride { requests_per_unit: u32::MAX, unit: unit as i32 });
            let decided = decide(&d, &request("edge", vec![max], 0));
            match allowed {
                true => assert_eq!(decided.unwrap(), Code::Ok as i32),
                false => assert!(matches!(decided, Err(RequestError::BadLimitOverride(_))), "{decided:?}"),
            }
        }
        let mut unknown = descriptor("override-unit");
        unknown.limit = Some(RateLimitOverride { requests_per_unit: 1, unit: i32::MAX });
        assert!(matches!(
            decide(&d, &request("edge", vec![unknown], 0)),
            Err(RequestError::BadLimitOverride(_))
        ));
    }),
    ("descriptor_key: no entries, empty and 1 MiB values stay distinct and bounded", || {
        let entry = |value: &str| Entry { key: "k".into(), value: value.into() };
        let none = descriptor_key("edge", &[]);
        let empty = descriptor_key("edge", &[entry("")]);
        let long = descriptor_key("edge", &[entry(&"v".repeat(MIB))]);
        let longer = descriptor_key("edge", &[entry(&"v".repeat(MIB + 1))]);
        assert!(none != empty && long != longer);
        assert!(long.len() < 1024 && longer.len() < 1024, "{} {}", long.len(), longer.len());
    }),
    ("config: empty file, requests_per_unit 0 with a kova block, and u64::MAX: typed errors", || {
        let path = "edge.yaml".as_ref();
        assert!(Config::from_yaml(path, "").is_err());
        // A bare 0 blocks (envoyproxy/ratelimit's meaning, `limit_override.rs`); with an
        // algorithm to count it by, it is refused.
        let zero = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 0 }\n";
        assert!(Config::from_yaml(path, zero).is_ok());
        let zero_counted = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 0 }\n    kova: { algorithm: gcra }\n";
        assert!(Config::from_yaml(path, zero_counted).is_err());
        let huge = format!(
            "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: second, requests_per_unit: {} }}\n",
            u64::MAX
        );
        assert!(Config::from_yaml(path, &huge).is_err());
    }),
    ("config: a key of 1 MiB", || {
        let path = "edge.yaml".as_ref();
        let long = format!(
            "domain: edge\ndescriptors:\n  - key: {}\n    rate_limit: {{ unit: second, requests_per_unit: 1 }}\n",
            "k".repeat(MIB)
        );
        assert!(Config::from_yaml(path, &long).is_ok());
    }),
];

#[test]
fn hostile_input_at_every_edge() {
    run(CASES);
}
