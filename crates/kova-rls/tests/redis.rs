//! `--backend redis` with real processes on loopback: two kova-rls on one redis-server hold one
//! combined limit, and a redis-server killed and restarted mid-run is followed by the failure
//! policy (counted and logged) and then by Redis again.

mod common;

use common::redis::RedisServer;
use common::*;
use tonic::transport::Channel;

type Client =
    envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient<
        Channel,
    >;

/// 10 an hour per user, GCRA (no refill within a test, no window edge to cross).
const CONFIG: &str = "domain: shared
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
    kova: { algorithm: gcra }
";

fn on_redis(redis: &RedisServer, failure: &str) -> Vec<String> {
    let flags = ["--backend", "redis", "--redis-url", &redis.url(), "--redis-failure", failure];
    flags.iter().map(|s| s.to_string()).collect()
}

fn start(config: &std::path::Path, flags: &[String], extra: &[&str]) -> Service {
    let flags: Vec<&str> = flags.iter().map(String::as_str).chain(extra.iter().copied()).collect();
    Service::start(config, &flags)
}

async fn code(client: &mut Client, user: &str) -> i32 {
    let request = request("shared", vec![descriptor(&[("user", user)])], 1);
    client.should_rate_limit(request).await.expect("a decision").into_inner().overall_code
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

#[tokio::test]
async fn two_processes_on_one_redis_hold_one_limit_exactly() {
    let Some(redis) = RedisServer::start("two_processes") else { return };
    let config = temp_file("redis-two", "config.yaml", CONFIG);
    let flags = on_redis(&redis, "closed");
    let (a, b) = (start(&config, &flags, &[]), start(&config, &flags, &[]));
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let mut codes = Vec::new();
    for i in 0..20 {
        let client = if i % 2 == 0 { &mut ca } else { &mut cb };
        codes.push(code(client, "alice").await);
    }
    let expected: Vec<i32> = [OK; 10].into_iter().chain([OVER; 10]).collect();
    assert_eq!(codes, expected, "across both processes exactly 10 OK, then OVER_LIMIT");
    let ok = |s: &Service| s.metric(r#"kova_rls_decisions_total{domain="shared",code="OK",shadow="false"}"#);
    assert_eq!((ok(&a), ok(&b)), (5.0, 5.0));
    for service in [&a, &b] {
        assert_eq!(service.metric("kova_rls_backend_available"), 1.0);
        let (_, metrics) = service.http_get("/metrics");
        assert!(!metrics.contains("kova_rls_fallbacks_total{"), "no fallback: {metrics}");
    }
}

#[tokio::test]
async fn two_processes_under_concurrent_streams_admit_exactly_the_limit() {
    let Some(redis) = RedisServer::start("two_processes_concurrent") else { return };
    let config = temp_file(
        "redis-concurrent",
        "config.yaml",
        "domain: shared\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 100 }\n    kova: { algorithm: gcra }\n",
    );
    let flags = on_redis(&redis, "closed");
    let services = [start(&config, &flags, &[]), start(&config, &flags, &[])];
    let mut tasks = tokio::task::JoinSet::new();
    for service in &services {
        for _ in 0..8 {
            let mut client = service.client().await;
            tasks.spawn(async move {
                let mut ok = 0;
                for _ in 0..20 {
                    ok += u32::from(code(&mut client, "bob").await == OK);
                }
                ok
            });
        }
    }
    let admitted: u32 = tasks.join_all().await.into_iter().sum();
    assert_eq!(admitted, 100, "320 calls over 16 streams on 2 processes: exactly the limit admitted");
}

/// The fallback metric of `policy` on the `shared` domain.
fn fallbacks(service: &Service, fallback: &str) -> f64 {
    service.metric(&format!(r#"kova_rls_fallbacks_total{{domain="shared",fallback="{fallback}"}}"#))
}

#[tokio::test]
async fn redis_killed_and_restarted_degrades_to_a_local_share_then_returns() {
    let Some(mut redis) = RedisServer::start("restart") else { return };
    let config = temp_file("redis-restart", "config.yaml", CONFIG);
    let log = config.with_file_name("kova-rls.log");
    let flags = on_redis(&redis, "degrade");
    let flags: Vec<&str> = flags.iter().map(String::as_str).chain(["--redis-servers", "2"]).collect();
    let service = Service::start_logged(&config, &flags, &log);
    let mut client = service.client().await;

    for _ in 0..3 {
        assert_eq!(code(&mut client, "carol").await, OK);
    }
    assert_eq!(fallbacks(&service, "store_unavailable_local"), 0.0);
    assert_eq!(service.metric("kova_rls_backend_available"), 1.0);

    // Down: this server's share (10 / 2 servers = 5), decided locally and counted.
    redis.kill9();
    let outage: Vec<i32> = codes_of(&mut client, "carol", 6).await;
    assert_eq!(outage, [OK, OK, OK, OK, OK, OVER], "the local share while Redis is down");
    assert_eq!(fallbacks(&service, "store_unavailable_local"), 6.0);
    assert_eq!(service.metric("kova_rls_backend_available"), 0.0);

    // Back, empty: the 5 admitted locally are charged to Redis first, so 5 more, then denied.
    redis.restart();
    let mut redis_decided = Vec::new();
    let start = std::time::Instant::now();
    while redis_decided.len() < 7 {
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "Redis never decided again");
        let before = fallbacks(&service, "store_unavailable_local");
        let code = code(&mut client, "carol").await;
        if fallbacks(&service, "store_unavailable_local") > before {
            // Still reconnecting: the local share, spent, denies.
            assert!(redis_decided.is_empty(), "a fallback after Redis had answered again");
            assert_eq!(code, OVER);
            continue;
        }
        redis_decided.push(code);
    }
    assert_eq!(redis_decided, [OK, OK, OK, OK, OK, OVER, OVER], "Redis-backed again, the outage charged");
    assert_eq!(service.metric("kova_rls_backend_available"), 1.0);
    let logged = std::fs::read_to_string(&log).expect("the log");
    assert!(logged.contains("Redis unavailable: the failure policy decides"), "{logged}");
    assert!(logged.contains("Redis answers again"), "{logged}");
}

async fn codes_of(client: &mut Client, user: &str, n: usize) -> Vec<i32> {
    let mut codes = Vec::with_capacity(n);
    for _ in 0..n {
        codes.push(code(client, user).await);
    }
    codes
}

#[tokio::test]
async fn redis_down_under_fail_closed_denies_and_under_error_answers_unavailable() {
    let Some(mut redis) = RedisServer::start("policies") else { return };
    let config = temp_file("redis-policies", "config.yaml", CONFIG);
    let closed = start(&config, &on_redis(&redis, "closed"), &[]);
    let error = start(&config, &on_redis(&redis, "error"), &[]);
    let (mut cc, mut ce) = (closed.client().await, error.client().await);
    assert_eq!(code(&mut cc, "dave").await, OK);
    assert_eq!(code(&mut ce, "dave").await, OK);
    redis.kill9();
    assert_eq!(code(&mut cc, "dave").await, OVER);
    assert_eq!(fallbacks(&closed, "store_unavailable_denied"), 1.0);
    let request = request("shared", vec![descriptor(&[("user", "dave")])], 1);
    let status = ce.should_rate_limit(request).await.expect_err("no decision");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert_eq!(error.metric(r#"kova_rls_request_errors_total{reason="backend"}"#), 1.0);
}

/// SIGTERM while a call waits on Redis (paused by `CLIENT PAUSE`): the call is answered with
/// Redis's decision, a call arriving during the shutdown gets an error (never a hang, never a
/// decision from a closing server), and the process exits 0 once the first is answered.
#[tokio::test]
async fn sigterm_answers_the_call_in_flight_and_refuses_one_arriving_during_shutdown() {
    let Some(redis) = RedisServer::start("sigterm") else { return };
    let config = temp_file("redis-sigterm", "config.yaml", CONFIG);
    let service = start(&config, &on_redis(&redis, "closed"), &["--redis-timeout-ms", "10000"]);
    let grpc = service.grpc;
    let mut client = service.client().await;
    assert_eq!(code(&mut client, "erin").await, OK);

    assert_eq!(redis.cli(&["CLIENT", "PAUSE", "1500"]).trim(), "OK");
    let paused = std::time::Instant::now();
    let in_flight = tokio::spawn(async move {
        let request = request("shared", vec![descriptor(&[("user", "erin")])], 1);
        client.should_rate_limit(request).await.map(tonic::Response::into_inner)
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!in_flight.is_finished(), "the call waits on the paused Redis");
    let terminated = tokio::task::spawn_blocking(move || service.terminate());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    // Arriving now, on a new connection: refused while the first call is still in flight.
    let arriving = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut late = Client::connect(format!("http://{grpc}")).await?;
        let request = request("shared", vec![descriptor(&[("user", "erin")])], 1);
        late.should_rate_limit(request)
            .await
            .map(|_| ())
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error>)
    })
    .await
    .expect("the late call is answered at once, not held");
    assert!(arriving.is_err(), "a call arriving during shutdown gets no decision");
    assert!(!in_flight.is_finished(), "the first call is still waiting on Redis");

    let answered = in_flight.await.expect("joins").expect("the call in flight is answered");
    assert!(paused.elapsed() >= std::time::Duration::from_millis(1_400), "{:?}", paused.elapsed());
    assert_eq!(answered.overall_code, OK);
    assert_eq!(answered.statuses[0].limit_remaining, 8, "Redis's decision, not the failure policy's");
    let status = terminated.await.expect("joins");
    assert!(status.success(), "{status:?}");
}

/// A request denied as a whole takes nothing: the units its allowed descriptor took on one
/// process are given back in Redis, as the other process sees.
#[tokio::test]
async fn a_denied_request_gives_its_units_back_in_redis() {
    let Some(redis) = RedisServer::start("refund") else { return };
    let config = temp_file("redis-refund", "config.yaml", CONFIG);
    let flags = on_redis(&redis, "closed");
    let (a, b) = (start(&config, &flags, &[]), start(&config, &flags, &[]));
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    for _ in 0..10 {
        assert_eq!(code(&mut ca, "gina").await, OK);
    }
    let both = request("shared", vec![descriptor(&[("user", "frank")]), descriptor(&[("user", "gina")])], 1);
    let denied = ca.should_rate_limit(both).await.expect("a decision").into_inner();
    assert_eq!(denied.overall_code, OVER);
    assert_eq!(denied.statuses[0].limit_remaining, 10, "frank's status says what the refund left");
    let alone = request("shared", vec![descriptor(&[("user", "frank")])], 1);
    let response = cb.should_rate_limit(alone).await.expect("a decision").into_inner();
    assert_eq!(response.statuses[0].limit_remaining, 9, "frank's unit from the denied request came back");
    assert_eq!(a.metric("kova_rls_refund_failures_total"), 0.0);
}

/// `--redis-lease`: a hot key's decisions are answered from leased units (counted as
/// `local_cache`), and the limit still holds.
#[tokio::test]
async fn leasing_answers_hot_keys_locally_within_the_limit() {
    let Some(redis) = RedisServer::start("lease") else { return };
    let config = temp_file("redis-lease", "config.yaml", CONFIG);
    let service =
        start(&config, &on_redis(&redis, "closed"), &["--redis-lease", "4", "--redis-lease-ttl-ms", "5000"]);
    let mut client = service.client().await;
    let codes = codes_of(&mut client, "hank", 12).await;
    assert_eq!(codes, [[OK; 10].as_slice(), &[OVER; 2]].concat());
    assert!(fallbacks(&service, "local_cache") >= 4.0, "leased answers counted");
}

/// The service starts while Redis is down, and `--redis-failure open` allows, counted.
#[tokio::test]
async fn starts_while_redis_is_down_and_fails_open_visibly() {
    let Some(mut redis) = RedisServer::start("down_at_start") else { return };
    redis.kill9();
    let config = temp_file("redis-down", "config.yaml", CONFIG);
    let service = start(&config, &on_redis(&redis, "open"), &[]);
    let mut client = service.client().await;
    assert_eq!(codes_of(&mut client, "ivan", 12).await, [OK; 12], "fail open: allowed past the limit");
    assert_eq!(fallbacks(&service, "store_unavailable_allowed"), 12.0);
    assert_eq!(service.metric("kova_rls_backend_available"), 0.0);
}

/// `--redis-cluster`: two kova-rls on a three-master Redis Cluster hold each key's limit
/// exactly, the keys spread over the masters' slots.
#[tokio::test]
async fn two_processes_on_a_redis_cluster_hold_each_limit_exactly() {
    let Some(cluster) = common::redis::RedisCluster::start("cluster") else { return };
    let config = temp_file("redis-cluster", "config.yaml", CONFIG);
    let urls = cluster.urls();
    let flags = ["--backend", "redis", "--redis-cluster", &urls, "--redis-failure", "closed"];
    let (a, b) = (Service::start(&config, &flags), Service::start(&config, &flags));
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let users = ["kim", "lee", "max", "ned", "oz", "pat"];
    for user in users {
        let mut codes = Vec::new();
        for i in 0..14 {
            let client = if i % 2 == 0 { &mut ca } else { &mut cb };
            codes.push(code(client, user).await);
        }
        assert_eq!(codes, [[OK; 10].as_slice(), &[OVER; 4]].concat(), "{user}");
    }
    let keys: usize =
        cluster.nodes.iter().map(|n| n.cli(&["DBSIZE"]).trim().parse::<usize>().expect("a count")).sum();
    let masters_used = cluster.nodes.iter().filter(|n| n.cli(&["DBSIZE"]).trim() != "0").count();
    assert_eq!(keys, users.len());
    assert!(masters_used >= 2, "the keys spread over the cluster's masters");
    for service in [&a, &b] {
        let (_, metrics) = service.http_get("/metrics");
        assert!(!metrics.contains("kova_rls_fallbacks_total{"), "no fallback: {metrics}");
    }
}

/// Under `degrade`, a request denied as a whole while Redis is down gives back what its other
/// descriptors took from this server's local share: a denial takes nothing there either.
#[tokio::test]
async fn a_denied_request_gives_its_units_back_to_the_local_share() {
    let Some(mut redis) = RedisServer::start("local-refund") else { return };
    let config = temp_file("redis-local-refund", "config.yaml", CONFIG);
    let flags = on_redis(&redis, "degrade");
    let service = start(&config, &flags, &["--redis-servers", "2"]);
    let mut client = service.client().await;
    assert_eq!(code(&mut client, "hal").await, OK);
    redis.kill9();
    // This server's share is 5: ivy spends hers, hal takes 4 of his.
    assert_eq!(codes_of(&mut client, "ivy", 5).await, [OK; 5]);
    assert_eq!(codes_of(&mut client, "hal", 4).await, [OK; 4]);
    let both = request("shared", vec![descriptor(&[("user", "hal")]), descriptor(&[("user", "ivy")])], 1);
    let denied = client.should_rate_limit(both).await.expect("a decision").into_inner();
    assert_eq!(denied.overall_code, OVER, "ivy's share is spent");
    // hal's fifth unit came back from the denied request.
    assert_eq!(codes_of(&mut client, "hal", 2).await, [OK, OVER]);
    assert_eq!(fallbacks(&service, "store_unavailable_local"), 13.0);
}
