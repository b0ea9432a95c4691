//! The configuration: envoyproxy/ratelimit's format read, and every refusal naming its line.

use std::path::Path;

use kova::AlgorithmKind;
use kova_rls::{Config, ConfigError, Limit, Unit};

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_yaml(Path::new("test.yaml"), text)
}

/// The error of `text`: its line and a piece of its problem.
fn refused(text: &str) -> (Option<u64>, String) {
    let error = load(text).expect_err("refused");
    assert!(error.to_string().starts_with("test.yaml:"), "{error}");
    (error.line(), error.problem().to_owned())
}

#[test]
fn the_example_config_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config.yaml");
    let config = Config::load(&path).expect("the example is valid");
    let edge = config.domain("edge").expect("its domain");
    let rule = edge.find([("path", "/search")]).expect("the key-only path rule");
    let Limit::Limited(limited) = rule.limit() else { panic!("limited") };
    assert_eq!(
        (limited.requests_per_unit(), limited.unit(), limited.algorithm()),
        (5, Unit::Minute, AlgorithmKind::Gcra)
    );
    assert_eq!(limited.quota().burst(), 2);
    assert_eq!(edge.find([("path", "/healthz")]).map(|r| r.limit().clone()), Some(Limit::Unlimited));
    let default = edge.find([("remote_address", "x")]).expect("the address rule");
    let Limit::Limited(limited) = default.limit() else { panic!("limited") };
    assert_eq!(limited.algorithm(), kova_rls::DEFAULT_ALGORITHM);
}

#[test]
fn matching_prefers_exact_then_prefix_then_key_only() {
    let config = load(
        "domain: d
descriptors:
  - key: m
    value: GET
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: m
    value: GE*
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: m
    rate_limit: { unit: second, requests_per_unit: 3, name: any }
",
    )
    .expect("valid");
    let limit_of =
        |value: &str| match config.domain("d").and_then(|d| d.find([("m", value)])).map(|r| r.limit()) {
            Some(Limit::Limited(l)) => l.requests_per_unit(),
            other => panic!("{other:?}"),
        };
    assert_eq!((limit_of("GET"), limit_of("GEX"), limit_of("POST")), (1, 2, 3));
}

#[test]
fn units_are_case_insensitive_and_know_week_month_year() {
    for (unit, expected) in
        [("SECOND", Unit::Second), ("Week", Unit::Week), ("month", Unit::Month), ("year", Unit::Year)]
    {
        let text = format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{ unit: {unit}, requests_per_unit: 1 }}\n"
        );
        let config = load(&text).expect("valid");
        let Some(Limit::Limited(l)) = config.domain("d").and_then(|d| d.find([("k", "")])).map(|r| r.limit())
        else {
            panic!("limited")
        };
        assert_eq!(l.unit(), expected);
    }
    assert_eq!(Unit::Month.duration().as_secs(), 30 * 86_400);
}

#[test]
fn refusals_name_the_line_and_the_problem() {
    let cases: &[(&str, u64, &str)] = &[
        ("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n", 5, "unknown unit `fortnight`"),
        ("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 0\n    kova: { algorithm: gcra }\n", 7, "0 takes no `kova` block"),
        ("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5000000000\n", 6, "above 4294967295"),
        ("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n", 5, "needs `requests_per_unit`"),
        ("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      unit: second\n", 6, "takes no `unit`"),
        ("domain: d\ndescriptors:\n  - key: \"\"\n", 3, "`key` is empty"),
        ("domain: \"\"\n", 1, "`domain` is empty"),
        ("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n", 5, "duplicate descriptor key `k` value `v` (first at line 3)"),
        ("domain: d\ndescriptors:\n  - key: k\n    kova: { algorithm: gcra }\n", 4, "needs a `rate_limit`"),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n    kova:\n      algorithm: leaky\n",
            6,
            "unknown algorithm `leaky`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n    kova:\n      burst: 5\n",
            6,
            "`burst` applies to gcra and token_bucket, not fixed_window",
        ),
        ("domain: d\ndescriptors:\n  - key: k\n    colour: blue\n", 4, "colour"),
        ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: [1, 2\n", 4, ""),
    ];
    let mut wrong = Vec::new();
    for (text, line, problem) in cases {
        let (got_line, got_problem) = refused(text);
        if got_line != Some(*line) || !got_problem.contains(problem) {
            wrong.push(format!("{text:?}: line {got_line:?}, {got_problem}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_directory_is_one_domain_per_file_and_a_domain_twice_is_refused() {
    let dir = std::env::temp_dir().join(format!("kova-rls-config-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("a.yaml"), "domain: one\n").expect("writes");
    std::fs::write(dir.join("b.yml"), "domain: two\n").expect("writes");
    std::fs::write(dir.join("notes.txt"), "not yaml").expect("writes");
    let config = Config::load(&dir).expect("valid");
    let mut names: Vec<_> = config.domain_names().collect();
    names.sort();
    assert_eq!(names, ["one", "two"]);
    std::fs::write(dir.join("c.yaml"), "\n\ndomain: one\n").expect("writes");
    let error = Config::load(&dir).expect_err("twice");
    assert_eq!((error.file(), error.line()), (dir.join("c.yaml").as_path(), Some(3)));
    assert!(error.problem().contains("defined twice"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A limit the Redis backend's scripts cannot hold is refused where the file is checked against
/// that backend, naming its line (and at startup and on reload, which run the same check);
/// the in-memory backend, which holds it, accepts the same file.
#[test]
fn limits_the_redis_scripts_cannot_hold_are_refused_naming_their_line() {
    use kova_rls::{Backend, MemoryBackend, MemoryOptions, RedisBackend};
    let text = "domain: d
descriptors:
  - key: fine
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: nested
    descriptors:
      - key: counter
        rate_limit: { unit: day, requests_per_unit: 100000 }
        kova: { algorithm: sliding_window_counter }
";
    let config = load(text).expect("kova's in-memory algorithms hold every limit here");
    let memory = MemoryBackend::new(MemoryOptions::default()).unwrap();
    assert_eq!(config.check_limits(|l| memory.accepts(l)), Ok(()));
    // Opening a one-node limiter connects on first use: nothing listens on this port, and
    // nothing is sent.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let limiter = runtime.block_on(async { kova_redis::RedisLimiter::builder().open("redis://127.0.0.1:1") });
    let redis = RedisBackend::new(limiter.expect("a limiter that connects on first use"));
    let error = config.check_limits(|l| redis.accepts(l)).expect_err("refused for Redis");
    assert_eq!((error.file(), error.line()), (Path::new("test.yaml"), Some(7)), "{error}");
    assert!(error.problem().contains("Redis"), "{error}");
}
